"""How far the semantic channel widens its search when a filter turns most neighbours away."""

from __future__ import annotations

from engine.recall import EXACT_DIRECT, _enough, _first_search


def test_enough_scales_the_search_by_the_share_that_passed_twice_over() -> None:
    assert _enough(100, 5, 10) == 400  # 5% passed: 10 wanted needs 200, twice that
    assert _enough(400, 40, 10) == 200
    assert _enough(100, 50, 10) == 40  # already enough in a search of 100: widening ×4 wins


def test_enough_takes_one_in_the_searched_where_none_passed() -> None:
    assert _enough(100, 0, 10) == 2000
    assert _enough(1000, 0, 10) == 20000  # beyond any sensible limit: the exact scan follows


def test_the_first_search_is_sized_by_the_share_that_passes() -> None:
    # 100k rows, 8% pass: 10 wanted needs 125 neighbours, twice that
    assert _first_search(100_000, 8_000, 100, 10, 4096) == 250
    # nearly all pass: the pool is the floor
    assert _first_search(100_000, 99_000, 100, 10, 4096) == 100
    # 3% pass: as wide as the limit allows
    assert _first_search(1_000_000, 3_000, 100, 10, 4096) == 4096


def test_a_small_namespace_or_a_narrow_filter_is_scanned_at_once() -> None:
    assert _first_search(EXACT_DIRECT, EXACT_DIRECT, 100, 10, 4096) is None
    assert _first_search(1_000_000, EXACT_DIRECT, 100, 10, 4096) is None
    assert _first_search(1_000_000, 0, 100, 10, 4096) is None
    assert _first_search(1_000_000, EXACT_DIRECT + 1, 100, 10, 4096) == 4096
