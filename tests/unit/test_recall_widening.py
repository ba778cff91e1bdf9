"""How the semantic channel plans its search when a filter turns most neighbours away."""

from __future__ import annotations

from engine.fast_network import ROUGH_MIN_ROWS
from engine.recall import (
    EXACT_DIRECT,
    FILTERED_US,
    LOOKUP_US_PER_ROW,
    MASK_US_PER_ROW,
    ROUGH_SCAN_US_PER_ROW,
    SCAN_US_PER_ROW,
    _after_short_search,
    _category_search,
    _enough,
    _filtered_cost,
    _How,
    _Plan,
    _plan_search,
    _scan_cost,
    _search_cost,
)


def _plan(size: int, passing: int, *, masked: int | None = None, rough: bool = False) -> _Plan:
    """The plan for a top 10 of a pool of 100, searches of at most 4,096, where the
    namespaces looked into hold ``masked`` rows (all ``size`` unless said)."""
    masked = size if masked is None else masked
    return _plan_search(size, passing, 100, 10, 4096, _scan_cost(masked, passing, rough=rough), masked)


def test_enough_scales_the_search_by_the_share_that_passed_twice_over() -> None:
    assert _enough(100, 5, 10) == 400  # 5% passed: 10 wanted needs 200, twice that
    assert _enough(400, 40, 10) == 200
    assert _enough(100, 50, 10) == 40


def test_enough_takes_one_in_the_searched_where_none_passed() -> None:
    assert _enough(100, 0, 10) == 2000
    assert _enough(1000, 0, 10) == 20000


def test_the_first_search_is_sized_by_the_share_that_passes() -> None:
    # 100k rows, 8% pass: 10 wanted needs 125 neighbours, twice that
    plan = _plan(100_000, 8_000)
    assert (plan.how, plan.k) == (_How.SEARCH, 250)
    # nearly all pass: the pool is the floor
    plan = _plan(100_000, 99_000)
    assert (plan.how, plan.k) == (_How.SEARCH, 100)


def test_a_small_namespace_or_a_narrow_filter_is_scanned_at_once() -> None:
    for size, passing in [(EXACT_DIRECT, EXACT_DIRECT), (1_000_000, EXACT_DIRECT), (1_000_000, 0)]:
        plan = _plan(size, passing)
        assert plan.how is _How.SCAN


def test_a_search_wider_than_the_limit_is_not_made() -> None:
    # 1M rows, 3,000 pass: the first search would need 6,667 neighbours
    plan = _plan(1_000_000, 3_000)
    assert plan.how is _How.SCAN  # scanning 3,000 costs less than a search among them
    assert plan.how is not _How.SEARCH


def test_the_filtered_search_is_priced_against_the_scan_of_what_passes() -> None:
    # 100k rows, 8,000 pass (8%): the filtered search walks past 12 rows for each kept,
    # cheaper than widening 8,000 float16 vectors
    assert _filtered_cost(100_000, 8_000, 100, 100_000) < _scan_cost(100_000, 8_000, rough=False)
    # 100k rows, 2,500 pass (2.5%): the filtered search would walk most of the graph
    assert _filtered_cost(100_000, 2_500, 100, 100_000) > _scan_cost(100_000, 2_500, rough=False)
    # 1M rows, 80,000 pass: scanning them costs far more than the search
    assert _filtered_cost(1_000_000, 80_000, 100, 1_000_000) < _scan_cost(1_000_000, 80_000, rough=False)


def test_the_filtered_cost_is_a_search_and_grows_as_the_share_falls() -> None:
    search = _search_cost(100)
    mask = MASK_US_PER_ROW * 100_000
    assert _filtered_cost(100_000, 50_000, 100, 100_000) == search + FILTERED_US * 2 + LOOKUP_US_PER_ROW * 50_000 + mask
    assert _filtered_cost(100_000, 1_000, 100, 100_000) > _scan_cost(100_000, 1_000, rough=False)  # 1%: scanning wins
    assert _filtered_cost(100_000, 0, 100, 100_000) == search + FILTERED_US * 100_000 + mask  # no division by zero


def test_a_filter_that_lets_nearly_all_through_is_searched_plainly() -> None:
    # 2,700 rows, 2,600 pass: a plain search of the pool costs less than a filtered one
    plan = _plan(2_700, 2_600)
    assert (plan.how, plan.k) == (_How.SEARCH, 100)


def test_a_search_dearer_than_what_would_follow_it_is_not_made() -> None:
    # 1M rows, one namespace of 7,000 with no filter: 2,858 neighbours would be needed,
    # dearer than scanning the 7,000, with rough cosines first or without, so they are
    # scanned at once
    for rough in (False, True):
        assert _plan(1_000_000, 7_000, masked=7_000, rough=rough).how is _How.SCAN
    # one of 20,000: a search of 1,000 costs less than either scan
    for rough in (False, True):
        plan = _plan(1_000_000, 20_000, masked=20_000, rough=rough)
        assert (plan.how, plan.k) == (_How.SEARCH, 1_000)
    # a namespace of 7,000 at 100k rows: a search of 286 is cheaper still
    for rough in (False, True):
        plan = _plan(100_000, 7_000, masked=7_000, rough=rough)
        assert (plan.how, plan.k) == (_How.SEARCH, 286)


def test_rough_cosines_are_priced_only_past_their_minimum() -> None:
    # below ROUGH_MIN_ROWS the scan widens in numpy (torch's fixed cost after a pause outweighs it)
    small = ROUGH_MIN_ROWS - 1
    assert _scan_cost(small, small, rough=True) == _scan_cost(small, small, rough=False)
    assert _scan_cost(ROUGH_MIN_ROWS, ROUGH_MIN_ROWS, rough=True) < _scan_cost(
        ROUGH_MIN_ROWS, ROUGH_MIN_ROWS, rough=False
    )


def test_after_a_short_search_the_share_seen_among_its_neighbours_prices_the_filtered_one() -> None:
    plan = _plan(100_000, 8_000)  # a search of 250 first
    assert plan.how is _How.SEARCH and _filtered_cost(100_000, 8_000, 100, 100_000) < plan.scan_us
    assert _after_short_search(plan, 250, 20) == (_How.FILTERED, 0)  # the share overall (8%)
    # 1 in 25: the search, its walk and the mask alone (8,150 µs) would come under the scan
    # (8,400), but looking up the 8,000 passing rows' handles (400) does not
    assert _after_short_search(plan, 250, 10) == (_How.SCAN, 0)
    assert _after_short_search(plan, 250, 8) == (_How.SCAN, 0)  # under half of it: the scan costs less
    assert _after_short_search(plan, 250, 1) == (_How.SCAN, 0)  # 1 in 250: the filtered search would walk far
    # none: the filter goes against the query; scanning the 8,000 costs less than one
    # search of 4,096
    assert _after_short_search(plan, 250, 0) == (_How.SCAN, 0)
    # 22,000 passing: that search costs less than the scan, and comes first; after it the scan
    wide = _plan(100_000, 22_000)
    assert _after_short_search(wide, wide.k, 0) == (_How.SEARCH, 4096)
    assert _after_short_search(wide, 4096, 0) == (_How.SCAN, 0)


def test_a_common_category_none_of_a_first_search_holds_is_searched_wider_before_any_scan() -> None:
    plan = _plan(1_000_000, 220_000)  # 22% pass: a search of the pool
    assert (plan.how, plan.k) == (_How.SEARCH, 100)
    assert _after_short_search(plan, 100, 0) == (_How.SEARCH, 4096)  # far cheaper than 220,000 rows
    assert _after_short_search(plan, 4096, 0) == (_How.SCAN, 0)  # as wide as allowed: the scan


def test_the_scan_is_priced_by_the_rows_masked_and_those_that_pass() -> None:
    assert _scan_cost(100_000, 8_000, rough=False) == MASK_US_PER_ROW * 100_000 + SCAN_US_PER_ROW * 8_000
    assert _scan_cost(100_000, 8_000, rough=True) == MASK_US_PER_ROW * 100_000 + ROUGH_SCAN_US_PER_ROW * 8_000


def test_with_rough_cosines_a_category_the_first_search_missed_is_scanned_not_searched_wider() -> None:
    # 100k rows, 8%, 16% and 22% pass, none among the first search's neighbours: scanning
    # them with rough cosines first costs less than a search of 4,096 (without, at 16%,
    # the wider search comes first)
    plain = _plan(100_000, 16_000)
    assert _after_short_search(plain, plain.k, 0) == (_How.SEARCH, 4096)
    for passing in (8_000, 16_000, 22_000):
        plan = _plan(100_000, passing, rough=True)
        assert plan.how is _How.SEARCH
        assert _after_short_search(plan, plan.k, 0) == (_How.SCAN, 0)
    # at 1M, 22% is 220,000 rows: the wider search still comes first
    plan = _plan(1_000_000, 220_000, rough=True)
    assert _after_short_search(plan, plan.k, 0) == (_How.SEARCH, 4096)


def test_a_category_index_is_searched_for_the_pool_where_the_namespaces_hold_the_category() -> None:
    # 8,000 of 8,082 procedures pass (one namespace): the pool, cheaper than the 250 a
    # plain search of the whole index would need
    assert _category_search(8_082, 8_000, 100, 10, 4096, _search_cost(250)) == 100
    # as dear as the plan's own search: the category's index still (its neighbours are all
    # of the category)
    assert _category_search(8_082, 8_000, 100, 10, 4096, _search_cost(100)) == 100


def test_a_category_index_is_searched_wider_for_a_small_share_and_not_past_the_limit() -> None:
    # a namespace holds 3,000 of 80,000: 10 wanted needs 267, twice that
    assert _category_search(80_000, 3_000, 100, 10, 4096, _scan_cost(3_000, 3_000, rough=False)) == 534
    # dearer than the plan: not searched
    assert _category_search(80_000, 3_000, 100, 10, 4096, _search_cost(533)) == 0
    # 100 of 80,000: wider than the limit
    assert _category_search(80_000, 100, 100, 10, 4096, 1e9) == 0
    # a category index smaller than the pool is asked for all it holds
    assert _category_search(60, 60, 100, 10, 4096, 1e9) == 60
