"""Which questions ask how to do something (``procedures.asks_how``): their procedures come first."""

from __future__ import annotations

import pytest

from engine.procedures import asks_how


@pytest.mark.parametrize(
    "question",
    [
        "How do I reset the router?",
        "how can we export our data?",
        "How does the user reset the router?",  # an agent asking for its user
        "How can the user export their data?",
        "how should the user file an expense report?",
        "What are the steps to deploy the app?",
        "怎么重置路由器？",
    ],
)
def test_a_how_question(question: str) -> None:
    assert asks_how(question)


@pytest.mark.parametrize(
    "question",
    ["How does the router work?", "How was the trip?", "Where does the user live?", "How many users are there?"],
)
def test_not_a_how_question(question: str) -> None:
    assert not asks_how(question)


@pytest.mark.parametrize(
    "question",
    [
        "How does the user feel about the move?",
        "How did the user like the concert?",
        "How would the user rate the hotel?",
        "How does the user interface work?",
        "How does the user table get populated?",
    ],
)
def test_a_question_about_the_user_that_is_not_how_to(question: str) -> None:
    assert not asks_how(question)
