"""The rate limiters (per token; failed authentications per address), on a clock the test moves."""

from __future__ import annotations

import pytest

from api.ratelimit import (
    LOGGED_ADDRESSES,
    OVERFLOW,
    FailedAuthLimiter,
    RateLimiter,
    Verdict,
    address_key,
    retry_after,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(per_minute=6, burst=3, clock=clock)
    assert [limiter.wait("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.wait("a") == pytest.approx(10.0)  # one request every 10 s
    clock.now += 4
    assert limiter.wait("a") == pytest.approx(6.0)
    clock.now += 6
    assert limiter.wait("a") == 0.0
    assert limiter.wait("a") == pytest.approx(10.0)


def test_callers_do_not_share_a_bucket() -> None:
    limiter = RateLimiter(per_minute=1, burst=1, clock=Clock())
    assert limiter.wait("a") == 0.0
    assert limiter.wait("a") > 0
    assert limiter.wait("b") == 0.0


def test_an_idle_caller_gets_no_more_than_its_burst() -> None:
    clock = Clock()
    limiter = RateLimiter(per_minute=60, burst=2, clock=clock)
    clock.now += 3600
    assert [limiter.wait("a") == 0.0 for _ in range(3)] == [True, True, False]


def test_full_buckets_are_forgotten_when_too_many_are_kept() -> None:
    clock = Clock()
    limiter = RateLimiter(per_minute=60, burst=1, clock=clock, max_tracked=3)
    for key in ("a", "b", "c"):
        limiter.wait(key)
    clock.now += 5  # a, b and c are full again
    limiter.wait("d")
    assert len(limiter._buckets) == 1  # a, b and c were dropped; d is the one left


def test_retry_after_is_whole_seconds_rounded_up() -> None:
    assert [retry_after(s) for s in (0.01, 1.0, 1.2, 59.9)] == ["1", "1", "2", "60"]


def test_a_limiter_needs_a_rate() -> None:
    with pytest.raises(ValueError, match="positive rate"):
        RateLimiter(per_minute=0, burst=1)


def test_a_full_table_makes_new_callers_share_one_bucket() -> None:
    """Buckets of callers still under their limit are kept; past the table's size the new ones
    share one bucket, so memory stays bounded however many callers there are."""
    clock = Clock()
    limiter = RateLimiter(per_minute=1, burst=1, clock=clock, max_tracked=3)
    for key in ("a", "b", "c"):
        assert limiter.wait(key) == 0.0  # each now empty: none can be forgotten
    assert limiter.wait("d") == 0.0  # d takes the shared bucket
    assert limiter.wait("e") > 0  # and e finds it empty
    assert set(limiter._buckets) == {"a", "b", "c", OVERFLOW}


def test_failed_authentications_a_burst_then_429_per_address() -> None:
    clock = Clock()
    limiter = FailedAuthLimiter(per_second=1, burst=2, clock=clock)
    assert [limiter.failed("10.0.0.1") for _ in range(2)] == [Verdict(0.0, True)] * 2
    refused = limiter.failed("10.0.0.1")
    assert refused.wait == pytest.approx(1.0) and not refused.logged
    assert limiter.failed("10.0.0.2") == Verdict(0.0, True)  # another address
    clock.now += 1
    assert limiter.failed("10.0.0.1") == Verdict(0.0, True)
    tallies = limiter.drain()
    assert {key: (t.refused, t.unlogged) for key, t in tallies.items()} == {"10.0.0.1": (1, 0)}
    assert limiter.drain() == {}


def test_the_log_budget_is_shared_by_every_address() -> None:
    limiter = FailedAuthLimiter(per_second=1, burst=1, clock=Clock())
    verdicts = [limiter.failed(f"10.0.1.{n}") for n in range(LOGGED_ADDRESSES + 3)]
    assert all(v.wait == 0.0 for v in verdicts)  # each address within its own limit: 401
    assert [v.logged for v in verdicts] == [True] * LOGGED_ADDRESSES + [False] * 3
    assert sum(t.unlogged for t in limiter.drain().values()) == 3


def test_many_addresses_keep_the_limiter_bounded() -> None:
    limiter = FailedAuthLimiter(per_second=1, burst=1, clock=Clock(), max_tracked=100)
    for n in range(5000):
        for _ in range(2):
            limiter.failed(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
    assert len(limiter._addresses._buckets) <= 101
    tallies = limiter.drain()
    assert len(tallies) <= 101 and OVERFLOW in tallies
    assert sum(t.failures for t in tallies.values()) == 10_000 - 5 * 1  # all but the logged ones


def test_a_report_that_could_not_be_written_is_put_back() -> None:
    limiter = FailedAuthLimiter(per_second=1, burst=1, clock=Clock(), max_tracked=2)
    for address in ("a", "a", "b", "b"):
        limiter.failed(address)
    tallies = limiter.drain()
    limiter.failed("c")
    limiter.failed("c")
    limiter.restore(tallies)
    again = limiter.drain()
    assert sum(t.failures for t in again.values()) == 3 and len(again) <= 3


def test_ipv6_addresses_count_by_their_64_network() -> None:
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert address_key("::1") == "::1"
    assert address_key(None) == "(unknown)"
