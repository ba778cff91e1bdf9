"""Reinforcement off the response's critical path.

Recall hands its rank bonuses to a ``Reinforcer`` and returns; one background
thread drains the queue and applies everything waiting in one store
transaction. It lets events gather for ``GATHER_S`` first (or until someone
flushes or stops it), so recalls in quick succession cost one transaction
between them, not one each, and the thread interrupts the recalls it runs
beside less often. Each queued event adds exactly one access, so many concurrent
recalls of one memory add up exactly. A failed batch is logged and counted
(``failures``, reported by the health endpoint); it is never silently dropped.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence

from engine.ports import Reinforcement

log = logging.getLogger(__name__)

MAX_BATCH = 2000
GATHER_S = 0.02
_STOP = object()


class Reinforcer:
    def __init__(self, apply: Callable[[Sequence[Reinforcement]], None], *, gather_s: float = GATHER_S) -> None:
        self._apply = apply
        self._gather_s = gather_s
        self._hurry = threading.Event()  # set by flush and stop: apply what is queued now
        self._queue: queue.Queue[object] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.failures = 0
        self.applied = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="twinmem-reinforce", daemon=True)
            self._thread.start()

    def submit(self, events: Sequence[Reinforcement]) -> None:
        if events:
            self._queue.put(list(events))

    def flush(self) -> None:
        """Block until everything submitted so far has been applied (or has failed)."""
        self._hurry.set()
        self._queue.join()

    def stop(self) -> None:
        """Apply what is queued, then end the thread."""
        if self._thread is not None:
            self._queue.put(_STOP)
            self._hurry.set()
            self._thread.join()
            self._thread = None

    @property
    def pending(self) -> int:
        """Recalls whose reinforcement is not applied yet: queued, gathering or being written
        (what ``flush`` waits for), so 0 means every one submitted is in the store."""
        return self._queue.unfinished_tasks

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is not _STOP and self._hurry.wait(self._gather_s):
                self._hurry.clear()
            taken = [first]
            while len(taken) < MAX_BATCH:
                try:
                    taken.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            events: list[Reinforcement] = []
            for item in taken:
                if isinstance(item, list):
                    events.extend(item)
            try:
                if events:
                    self._apply(events)
                    self.applied += len(events)
            except Exception:
                self.failures += 1
                log.exception("reinforcement of %d recalled memories failed", len(events))
            finally:
                for _ in taken:
                    self._queue.task_done()
            if any(item is _STOP for item in taken):
                return
