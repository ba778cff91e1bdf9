"""The numbers a text gives (``engine.text.numbers``): a near-identical text that gives
other numbers is no repeat of the older one (``engine.writing``'s write-time dedup)."""

from __future__ import annotations

import pytest

from engine import text


def test_digits_number_words_and_chinese_numerals_are_numbers() -> None:
    assert text.numbers("The rent is 1,200 euros from the first of May, 3pm") == ["1200", "3", "first"]
    assert text.numbers("I have two cats and one dog") == ["one", "two"]
    assert text.numbers("我的航班是5月3日，带两个箱子") == ["3", "5", "两"]
    assert text.numbers("No numbers here at all") == []


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The rent is 1200 euros.", "The rent is 1500 euros."),
        ("The meeting starts at 3pm.", "The meeting starts at 4pm."),
        ("I have two cats.", "I have three cats."),
        ("My flight is on 5月3日.", "My flight is on 5月5日."),
        ("The code is 1-2-3.", "The code is 1-2-3-4."),
    ],
)
def test_other_numbers_are_not_the_same(a: str, b: str) -> None:
    assert not text.same_numbers(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Bart went to the zoo and felt very happy.", "Bart went to the zoo and felt really happy."),
        ("The rent is 1,200 euros.", "The rent is 1200 euros!"),
        ("The meeting starts at 3pm and ends at 4pm.", "The meeting ends at 4pm and starts at 3pm."),
    ],
)
def test_the_same_numbers_in_other_words_or_order_are_the_same(a: str, b: str) -> None:
    assert text.same_numbers(a, b)


def test_a_decimal_comma_is_no_thousands_separator() -> None:
    assert not text.same_numbers("The bag weighs 1,5 kg.", "The bag weighs 15 kg.")
    assert text.same_numbers("The rent is 1,200.50 euros.", "The rent is 1200.50 euros.")


def test_full_width_digits_are_the_same_numbers() -> None:
    assert text.same_numbers("房租是１２００元", "房租是1200元")


def _new_terms(newer: str, older: str) -> int:
    return len(text.Wording.of(newer).terms - text.Wording.of(older).terms)


def test_new_terms_counts_the_words_only_the_newer_text_holds() -> None:
    older = "I'd like to explore more courses in data science."
    assert _new_terms(older, older) == 0
    assert _new_terms("I'd like to explore more courses in data science!", older) == 0
    newer = "I'd like to explore more courses in data science, specifically machine learning and deep learning."
    assert _new_terms(newer, older) == 4  # specif, machin, learn, deep
    assert _new_terms(older, newer) == 0
    # Over DEDUP_MAX_NEW_TERMS (3): no repeat, whatever else it shares; the other way round it is.
    assert not text.repeats(text.Wording.of(newer), text.Wording.of(older))
    assert text.repeats(text.Wording.of(older), text.Wording.of(newer))
