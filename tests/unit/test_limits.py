"""The input bounds shared by every entry point: nesting depth without recursion, 64-bit
integers, times that leave the calendar in UTC, and the If-Match / expected_version pair."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from api.schemas import expected_version
from engine.codec import as_utc, from_iso
from engine.config import LimitsConfig
from engine.errors import InvalidInput
from engine.limits import check_query, fits_int64, metadata_problem, nesting_depth


def _nested(levels: int) -> object:
    value: object = 1
    for n in range(levels):
        value = {"k": value} if n % 2 else [value]
    return value


@pytest.mark.parametrize(("value", "depth"), [(1, 0), ({}, 1), ([], 1), ({"a": [1, {"b": 2}]}, 3), ("[[[", 0)])
def test_nesting_depth(value: object, depth: int) -> None:
    assert nesting_depth(value, stop_after=10) == depth


def test_nesting_depth_of_a_hundred_thousand_levels_needs_no_recursion() -> None:
    assert nesting_depth(_nested(100_000), stop_after=32) == 33  # counted only as far as the limit


def test_metadata_problem_names_the_limit() -> None:
    config = LimitsConfig(max_metadata_depth=3)
    assert metadata_problem({"a": {"b": {}}}, config) is None
    assert (
        metadata_problem({"a": {"b": {"c": {}}}}, config) == "metadata nests deeper than 3 levels of objects and lists"
    )


@pytest.mark.parametrize(
    ("value", "fits"),
    [
        (2**63 - 1, True),
        (-(2**63), True),
        (2**63, False),
        (-(2**63) - 1, False),
        (1e300, True),
        (True, True),
        ("9" * 30, True),
    ],
)
def test_fits_int64(value: object, fits: bool) -> None:
    assert fits_int64(value) is fits


def test_check_query() -> None:
    check_query("x" * 10, LimitsConfig(max_query_chars=10))
    with pytest.raises(InvalidInput, match="11 characters, at most 10") as refused:
        check_query("x" * 11, LimitsConfig(max_query_chars=10))
    assert refused.value.field == "query"


def test_as_utc_refuses_what_leaves_the_calendar() -> None:
    edge = timezone(-timedelta(hours=23, minutes=59))
    assert as_utc(datetime(2026, 1, 1, 0, 0, tzinfo=edge)) == datetime(2026, 1, 1, 23, 59, tzinfo=UTC)
    with pytest.raises(ValueError, match="out of range once converted to UTC"):
        as_utc(datetime(9999, 12, 31, 23, 59, 59, tzinfo=edge))
    with pytest.raises(ValueError, match="out of range"):
        from_iso("0001-01-01T00:00:00+23:59")
    with pytest.raises(ValueError, match="no timezone"):
        as_utc(datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("if_match", "given", "expected"),
    [
        (None, None, None),
        ('"7"', None, 7),
        ('W/"7"', None, 7),
        ("7", None, 7),
        ("*", 3, 3),
        (None, 4, 4),
        ('"5"', 5, 5),
    ],
)
def test_expected_version(if_match: str | None, given: int | None, expected: int | None) -> None:
    assert expected_version(if_match, given) == expected


@pytest.mark.parametrize(
    ("if_match", "given"), [("seven", None), ('"1", "2"', None), ('"0"', None), ("", None), ('"5"', 6)]
)
def test_expected_version_refuses_a_malformed_or_contradictory_condition(if_match: str, given: int | None) -> None:
    with pytest.raises(InvalidInput):
        expected_version(if_match, given)
