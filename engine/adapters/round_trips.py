"""How many statements and transactions a store has sent to its backend.

Each store adapter keeps one ``RoundTrips`` as its ``round_trips`` attribute and
counts every statement it sends (``benchmarks/store_latency.py`` reports them per
recall and per save). Over Bolt each statement is at least one network round trip
and each transaction one more (its commit); in SQLite they are calls into the
library, counted the same way so the two stores can be compared (once the SQLite
store's ``count_round_trips()`` has turned its counting on).
"""

from __future__ import annotations

import threading


class RoundTrips:
    """Running totals; safe to bump from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.statements = 0
        self.transactions = 0

    def statement(self) -> None:
        with self._lock:
            self.statements += 1

    def transaction(self) -> None:
        with self._lock:
            self.transactions += 1

    def totals(self) -> tuple[int, int]:
        """(statements, transactions) so far."""
        with self._lock:
            return self.statements, self.transactions
