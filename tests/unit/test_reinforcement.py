"""The background reinforcer: events gathered into one apply, flush and stop never wait out the gathering."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime

from engine.ports import Reinforcement
from engine.reinforcement import Reinforcer

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _events(*ids: str) -> list[Reinforcement]:
    return [(memory_id, 0.1, AT) for memory_id in ids]


def _in_time(action: threading.Thread) -> bool:
    action.start()
    action.join(timeout=30)  # the gathering below is an hour: only a hurried reinforcer ends in time
    return not action.is_alive()


def test_events_submitted_together_are_applied_in_one_call_when_flushed() -> None:
    applied: list[list[str]] = []
    reinforcer = Reinforcer(lambda events: applied.append([e[0] for e in events]), gather_s=3600)
    reinforcer.start()
    reinforcer.submit(_events("a", "b"))
    reinforcer.submit(_events("c"))
    assert _in_time(threading.Thread(target=reinforcer.flush))
    assert applied == [["a", "b", "c"]]
    assert reinforcer.applied == 3
    reinforcer.submit(_events("d"))
    assert _in_time(threading.Thread(target=reinforcer.stop))
    assert applied == [["a", "b", "c"], ["d"]]


def test_a_failed_apply_is_counted_and_later_events_still_apply() -> None:
    applied: list[str] = []

    def apply(events: Sequence[Reinforcement]) -> None:
        if any(e[0] == "bad" for e in events):
            raise RuntimeError("store refused")
        applied.extend(e[0] for e in events)

    reinforcer = Reinforcer(apply, gather_s=0.0)
    reinforcer.start()
    reinforcer.submit(_events("bad"))
    reinforcer.flush()
    reinforcer.submit(_events("good"))
    reinforcer.stop()
    assert reinforcer.failures == 1 and applied == ["good"]


def test_pending_counts_what_is_gathering_or_being_written_until_it_is_in_the_store() -> None:
    writing, release = threading.Event(), threading.Event()

    def apply(events: Sequence[Reinforcement]) -> None:
        writing.set()
        release.wait(timeout=30)

    reinforcer = Reinforcer(apply, gather_s=0)
    reinforcer.start()
    assert reinforcer.pending == 0
    reinforcer.submit(_events("a"))
    assert writing.wait(timeout=30)
    assert reinforcer.pending == 1  # taken off the queue, not in the store yet
    release.set()
    assert _in_time(threading.Thread(target=reinforcer.flush))
    assert reinforcer.pending == 0
    reinforcer.stop()
