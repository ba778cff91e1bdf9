"""How far the semantic channel widens its search when a filter turns most neighbours away."""

from __future__ import annotations

from engine.recall import _enough


def test_enough_scales_the_search_by_the_share_that_passed_twice_over() -> None:
    assert _enough(100, 5, 10) == 400  # 5% passed: 10 wanted needs 200, twice that
    assert _enough(400, 40, 10) == 200
    assert _enough(100, 50, 10) == 40  # already enough in a search of 100: widening ×4 wins


def test_enough_takes_one_in_the_searched_where_none_passed() -> None:
    assert _enough(100, 0, 10) == 2000
    assert _enough(1000, 0, 10) == 20000  # beyond any sensible limit: the exact scan follows
