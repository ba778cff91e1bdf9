"""A per-token request rate limit: a token bucket for each caller, in process.

Each caller (a token; the one agent in local mode) may send ``burst`` requests at once and
then ``per_minute`` a minute; a request over that is answered 429 with ``Retry-After`` (the
whole seconds until it would be accepted). Off unless ``[limits] requests_per_minute`` is set.
Several API processes each count their own requests.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

# Buckets kept before the full ones (callers idle long enough to be back at their burst) are dropped.
MAX_TRACKED = 10_000


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class RateLimiter:
    def __init__(
        self,
        per_minute: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_tracked: int = MAX_TRACKED,
    ) -> None:
        if per_minute <= 0 or burst < 1:
            raise ValueError("a rate limit needs a positive rate and a burst of at least 1")
        self._rate = per_minute / 60.0
        self._burst = float(burst)
        self._clock = clock
        self._max_tracked = max_tracked
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

    def wait(self, key: str) -> float:
        """Take one request from ``key``'s bucket and return 0, or, when the bucket is empty,
        take nothing and return the seconds until one request would be accepted."""
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= self._max_tracked:
                    self._forget_full(now)
                bucket = self._buckets[key] = _Bucket(self._burst, now)
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.at) * self._rate)
            bucket.at = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / self._rate

    def _forget_full(self, now: float) -> None:
        full = [key for key, b in self._buckets.items() if b.tokens + (now - b.at) * self._rate >= self._burst]
        for key in full:
            del self._buckets[key]


def retry_after(seconds: float) -> str:
    """``Retry-After`` in whole seconds, rounded up (never 0 for a refused request)."""
    return str(max(1, math.ceil(seconds)))
