"""Rate limits, token buckets in process: per token, and for failed authentications per address.

``RateLimiter``: each caller (a token; the one agent in local mode) may send ``burst``
requests at once and then ``per_minute`` a minute; a request over that is answered 429 with
``Retry-After`` (the whole seconds until it would be accepted). Off unless ``[limits]
requests_per_minute`` is set.

``FailedAuthLimiter``: failed authentications (a missing, unknown or revoked token) from one
client address, ``burst`` at once then ``per_second``; over that they are answered 429. It
also decides which failures the audit log records one by one: those within their address's
budget, and within a budget for all addresses together (``LOGGED_ADDRESSES`` addresses'
worth), so that no number of addresses can fill the log one 401 at a time. The others are
tallied, by address, for one audit entry now and then (``drain``). A request with a valid
token never reaches it: a client with a bad token cannot lock out another client that
shares its address (every client of a loopback deployment does).

Memory is bounded: at most ``max_tracked`` buckets and tallies. Buckets of callers idle long
enough to be back at their burst are forgotten first; past that, every new caller shares one
bucket (``OVERFLOW``): many addresses together get the budget of one. IPv6 addresses count
by their /64 network, which one client usually holds whole. Several API processes each
count their own requests.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from engine.records import utcnow

# Buckets kept before the full ones (callers idle long enough to be back at their burst) are
# dropped; past that, new callers share the OVERFLOW bucket.
MAX_TRACKED = 10_000
OVERFLOW = "(other addresses)"
# Failures the audit log records one by one, from all addresses together: this many
# addresses' budgets (burst and rate).
LOGGED_ADDRESSES = 5


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
                if len(self._buckets) >= self._max_tracked:
                    key = OVERFLOW  # every caller not tracked shares one bucket: memory stays bounded
                    bucket = self._buckets.get(key)
                if bucket is None:
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


@dataclass(slots=True)
class Tally:
    """Failed authentications from one address that the audit log did not record one by one."""

    first: datetime
    last: datetime
    refused: int = 0  # answered 429
    unlogged: int = 0  # answered 401, past the budget of the log

    @property
    def failures(self) -> int:
        return self.refused + self.unlogged

    def add(self, other: Tally) -> None:
        self.first, self.last = min(self.first, other.first), max(self.last, other.last)
        self.refused += other.refused
        self.unlogged += other.unlogged


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one failed authentication: answer 429 after ``wait`` seconds (0: answer
    401), and whether its audit entry is written (else it is tallied)."""

    wait: float
    logged: bool


@dataclass
class FailedAuthLimiter:
    per_second: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], datetime] = utcnow
    max_tracked: int = MAX_TRACKED
    _addresses: RateLimiter = field(init=False)
    _log: RateLimiter = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _tallies: dict[str, Tally] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._addresses = RateLimiter(self.per_second * 60, self.burst, clock=self.clock, max_tracked=self.max_tracked)
        self._log = RateLimiter(
            self.per_second * 60 * LOGGED_ADDRESSES, self.burst * LOGGED_ADDRESSES, clock=self.clock
        )

    def failed(self, address: str | None) -> Verdict:
        """Count one failed authentication from ``address`` (None: unknown)."""
        key = address_key(address)
        wait = self._addresses.wait(key)
        if wait > 0:
            self._tally(key, refused=1)
            return Verdict(wait, logged=False)
        if self._log.wait("") > 0:
            self._tally(key, unlogged=1)
            return Verdict(0.0, logged=False)
        return Verdict(0.0, logged=True)

    def _tally(self, key: str, *, refused: int = 0, unlogged: int = 0) -> None:
        now = self.wall()
        with self._lock:
            tally = self._tallies.get(key)
            if tally is None:
                if len(self._tallies) >= self.max_tracked:
                    key = OVERFLOW
                    tally = self._tallies.get(key)
                if tally is None:
                    tally = self._tallies[key] = Tally(now, now)
            tally.last = now
            tally.refused += refused
            tally.unlogged += unlogged

    def drain(self) -> dict[str, Tally]:
        """The tallies since the last drain, by address; counting starts again from nothing."""
        with self._lock:
            tallies, self._tallies = self._tallies, {}
        return tallies

    def restore(self, tallies: dict[str, Tally]) -> None:
        """Put back tallies a report could not write, to be reported with the next."""
        with self._lock:
            for key, tally in tallies.items():
                if key in self._tallies:
                    self._tallies[key].add(tally)
                elif len(self._tallies) < self.max_tracked:
                    self._tallies[key] = tally
                else:
                    self._tallies.setdefault(OVERFLOW, Tally(tally.first, tally.last)).add(tally)


def address_key(address: str | None) -> str:
    """The key a client address is counted under: an IPv4 address itself, an IPv6 address's
    /64 network (an IPv4-mapped one as its IPv4 address), anything else as given."""
    if not address:
        return "(unknown)"
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address[:100]
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        if not parsed.is_loopback:
            return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


def retry_after(seconds: float) -> str:
    """``Retry-After`` in whole seconds, rounded up (never 0 for a refused request)."""
    return str(max(1, math.ceil(seconds)))
