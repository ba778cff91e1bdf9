"""The per-token rate limiter, on a clock the test moves."""

from __future__ import annotations

import pytest

from api.ratelimit import RateLimiter, retry_after


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
