"""A query rewritten in the other grammatical person (engine/persons.py)."""

from __future__ import annotations

import pytest

from engine.persons import MAX_CHARS, Phrasing, first_person, other_person, third_person


@pytest.mark.parametrize(
    ("query", "first_person"),
    [
        ("Where does the user live?", "Where do I live?"),
        ("What is the user's favourite colour?", "What is my favourite colour?"),
        ("What is the user’s job?", "What is my job?"),
        ("Has the user ever been to Japan?", "Have I ever been to Japan?"),
        ("Is the user vegetarian?", "Am I vegetarian?"),
        ("Did the user finish reading the book?", "Did I finish reading the book?"),
        ("Can you remind the user which chapter it was?", "Can you remind me which chapter it was?"),
        (
            "The user was going through the chat and the user wanted to check",
            "I was going through the chat and I wanted to check",
        ),
        ("What gift would suit the user?", "What gift would suit me?"),
    ],
)
def test_a_query_naming_the_user_is_read_in_the_first_person(query: str, first_person: str) -> None:
    assert other_person(query) == Phrasing(first_person, first_person=True)


@pytest.mark.parametrize(
    ("query", "third_person"),
    [
        ("Where do I live?", "Where does the user live?"),
        ("What did I buy for my sister's birthday?", "What did the user buy for the user's sister's birthday?"),
        (
            "I'm looking back at our chat. Can you remind me what I said?",
            "The user is looking back at our chat. Can you remind the user what the user said?",
        ),
        ("I’ve been feeling nostalgic lately.", "The user has been feeling nostalgic lately."),
        ("Have I told you about myself?", "Has the user told you about the user themselves?"),
        ("My dog is called Rex", "The user's dog is called Rex"),
        ("Am I allergic to anything?", "Is the user allergic to anything?"),
    ],
)
def test_a_query_in_the_first_person_is_read_with_the_user(query: str, third_person: str) -> None:
    assert other_person(query) == Phrasing(third_person, first_person=False)


@pytest.mark.parametrize(
    "query",
    [
        "Tariq Andersen blue cheese",
        "How many users signed up last week?",
        "What is a user-friendly editor?",
        "When is the team meeting?",
        "用户住在哪里？",  # Chinese is not rewritten: no development data measures it
        "",
    ],
)
def test_a_query_in_neither_person_has_no_other_phrasing(query: str) -> None:
    assert other_person(query) is None


@pytest.mark.parametrize(
    "query",
    [
        "How do I log the user out after the session expires?",
        "Where did the user and I meet?",
        "Does the user know me?",
    ],
)
def test_the_user_beside_the_first_person_is_someone_else(query: str) -> None:
    assert first_person(query) is None and third_person(query) is None and other_person(query) is None


@pytest.mark.parametrize(
    ("query", "rewritten"),
    [
        ("Does the user have Type I diabetes?", "Do I have Type I diabetes?"),
        ("Did the user report an I/O error?", "Did I report an I/O error?"),
        ("Does the user play World War I games?", "Do I play World War I games?"),
    ],
)
def test_i_as_a_letter_is_not_the_speaker(query: str, rewritten: str) -> None:
    assert first_person(query) == rewritten


@pytest.mark.parametrize(
    "query",
    [
        "What columns does the user table have?",
        "Where is the user model defined?",
        "How do user permissions work?",
        "Delete the user account for bob",
        "The user interface is slow on mobile",
        "Was user data migrated?",
        "What is user's job?",  # without "the": about users, or a typo; read as written
        "What are the user preferences for the theme?",
        "Summarize the user memories about travel",
        "What is the user message asking for?",
        "How many users signed up?",
    ],
)
def test_user_as_a_noun_is_not_the_user(query: str) -> None:
    assert first_person(query) is None


def test_i_as_a_letter_is_left_alone() -> None:
    assert third_person("Why do I get an I/O error?") == "Why does the user get an I/O error?"
    assert third_person("Do I have Type I diabetes?") == "Does the user have Type I diabetes?"
    assert third_person("What did I read about World War I?") == "What did the user read about World War I?"
    assert third_person("Do I have type I diabetes?") == "Does the user have type I diabetes?"
    assert third_person("Do I have Type-I diabetes?") == "Does the user have Type-I diabetes?"


def test_a_long_text_is_read_as_written() -> None:
    question = "Where does the user live? "
    assert other_person(question * (MAX_CHARS // len(question))) is not None
    assert other_person(question * (MAX_CHARS // len(question) + 1)) is None
    assert third_person("I " * MAX_CHARS) is None
