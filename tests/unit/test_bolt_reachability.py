"""When a Bolt server counts as away (``engine.adapters.neo4j_store.Reachability``): only
after a call kept failing to reach it, never on one error raised at once."""

from __future__ import annotations

from typing import Any

import pytest
from neo4j.exceptions import IncompleteCommit, ServiceUnavailable, SessionExpired

from engine.adapters.neo4j_store import Reachability, _translate
from engine.errors import StoreError


class DownDriver:
    """A driver whose server does not answer the probe."""

    def __init__(self) -> None:
        self.probes = 0

    def verify_connectivity(self) -> None:
        self.probes += 1
        raise ServiceUnavailable("Couldn't connect to 127.0.0.1:7687")


def fail(server: Reachability, exc: Exception, *, waited: float, retry_time: float, monkeypatch: Any) -> None:
    times = [100.0, 100.0 + waited]
    monkeypatch.setattr("engine.adapters.neo4j_store.time.monotonic", lambda: times.pop(0) if times else 100.0 + waited)
    with pytest.raises(StoreError), _translate("save", server, retry_time):
        raise exc
    monkeypatch.undo()


@pytest.mark.parametrize(
    "exc",
    [
        IncompleteCommit("Connection lost while awaiting commit"),
        SessionExpired("Failed to read from defunct connection"),
        ServiceUnavailable("Failed to read from defunct connection"),
    ],
)
def test_one_error_raised_at_once_does_not_mark_the_server_away(exc: Exception, monkeypatch: Any) -> None:
    """A commit whose connection dropped (``IncompleteCommit``, which the driver never
    retries) or one dropped connection says nothing about a server being down. Marked
    away on it, every call of every request answered 503 at once until the server came
    back: a 13 s restart that writes used to wait out became 13 s of 503s, an already
    committed save's audit entry among them."""
    server = Reachability()
    fail(server, exc, waited=0.05, retry_time=30, monkeypatch=monkeypatch)
    driver = DownDriver()
    server.check(driver)  # type: ignore[arg-type]
    assert driver.probes == 0


def test_a_commit_lost_after_a_long_wait_does_not_mark_the_server_away(monkeypatch: Any) -> None:
    server = Reachability()
    fail(server, IncompleteCommit("lost"), waited=31, retry_time=30, monkeypatch=monkeypatch)
    server.check(DownDriver())  # type: ignore[arg-type]


@pytest.mark.parametrize("waited", [15.0, 25.5, 31.0])
def test_a_call_that_waited_out_its_retries_marks_the_server_away(waited: float, monkeypatch: Any) -> None:
    """25.5 s: where a one-statement read at retry_seconds = 30 gives up (its doubling pause
    would pass the deadline)."""
    server = Reachability()
    fail(server, ServiceUnavailable("Couldn't connect"), waited=waited, retry_time=30, monkeypatch=monkeypatch)
    driver = DownDriver()
    with pytest.raises(ServiceUnavailable):
        server.check(driver)  # type: ignore[arg-type]
    assert driver.probes == 1


def test_no_retries_marks_at_once(monkeypatch: Any) -> None:
    server = Reachability()
    fail(server, ServiceUnavailable("Couldn't connect"), waited=0.01, retry_time=0, monkeypatch=monkeypatch)
    with pytest.raises(ServiceUnavailable):
        server.check(DownDriver())  # type: ignore[arg-type]
