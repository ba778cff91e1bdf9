"""Re-embedding after a change of embedding model, in the background, resumable.

Progress lives in the store, not in the job: a memory is done when it has a
vector of the current model (``Store.missing_vectors`` lists those that have
not). So the job needs no bookkeeping of its own and resumes after a restart
exactly where it stopped. Each batch: read the contents, embed them (no lock
held), then under the service's write lock re-check that the contents did not
change meanwhile, store the vectors (marking each record's ``embedding_model``)
and move the memories into the main index (``IndexKeeper.adopt``). Until a
memory is done, recall finds it through the legacy index of the previous
model's vectors (see ``engine/index_keeper.py``).

Replicas sharing a store run one re-embedder at a time: where the store keeps
leases (``engine.ports.Leases``), ``run`` takes the ``reembed`` lease before each
batch (renewing it) and gives it up at the end. A replica that finds it held
waits ("waiting"), polling, until the holder is done or its lease runs out
(a replica that died mid-way), then takes over where the store says it stopped.
The holder's stored vectors each log a change, so the waiting replicas' indexes
pick them up as they catch up.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from engine.errors import StoreError
from engine.index_keeper import IndexKeeper
from engine.ports import Embedder, Leases, Store, Vector
from engine.records import utcnow

log = logging.getLogger(__name__)

LEASE = "reembed"
# Renewed before every batch, so it must outlast the slowest batch by a wide margin.
LEASE_TTL = timedelta(seconds=120)
# How often a waiting replica looks again.
LEASE_POLL_S = 5.0


@dataclass(frozen=True, slots=True)
class Progress:
    model: str
    # "idle" (nothing to do), "running", "waiting" (another replica holds the lease),
    # "paused" (not started), "done", or "failed".
    state: str
    total: int
    done: int
    remaining: int
    rate_per_s: float | None
    legacy_indexed: int
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "state": self.state,
            "total": self.total,
            "done": self.done,
            "remaining": self.remaining,
            "rate_per_s": round(self.rate_per_s, 1) if self.rate_per_s is not None else None,
            "legacy_indexed": self.legacy_indexed,
            "error": self.error,
        }


class Reembedder:
    def __init__(
        self,
        store: Store,
        keeper: IndexKeeper,
        embedder: Embedder,
        *,
        lock: AbstractContextManager[object],
        batch: int,
        monotonic: Callable[[], float] = time.monotonic,
        lease: Leases | None = None,
        clock: Callable[[], datetime] = utcnow,
        lease_ttl: timedelta = LEASE_TTL,
        lease_poll_s: float = LEASE_POLL_S,
    ) -> None:
        self._store = store
        self._keeper = keeper
        self._embedder = embedder
        self._lock = lock
        self._batch = batch
        self._monotonic = monotonic
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._state = "paused"
        self._total = 0
        self._done = 0
        self._started: float | None = None
        self._ended: float | None = None  # when run() last returned: the rate stops there
        self._error: str | None = None
        self._lease = lease
        self._clock = clock
        self._lease_ttl = lease_ttl
        self._lease_poll_s = lease_poll_s
        # Who holds the lease, as other replicas (and an operator reading the graph) see it.
        self.holder = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"

    def remaining(self) -> int:
        return sum(self._store.missing_vector_models(self._embedder.name).values())

    def start(self) -> None:
        """Start the background job if any memory lacks a vector of the current model."""
        if self._thread is not None:
            return
        remaining = self.remaining()
        if not remaining:
            self._state = "idle"
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="twinmem-reembed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the batch in hand; what is stored stays done."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def join(self) -> None:
        """Wait for the background job to end (tests, benchmarks)."""
        if self._thread is not None:
            self._thread.join()

    def run(self) -> Progress:
        """Re-embed every memory lacking a current vector, batch by batch (blocking)."""
        self._total = self.remaining()
        self._done = 0
        self._started = self._monotonic()
        self._ended = None
        self._state = "running"
        self._error = None
        log.info("re-embedding %d memories for %s", self._total, self._embedder.name)
        try:
            while not self._stop.is_set():
                if not self._hold_lease():
                    self._state = "waiting"
                    if not self.remaining():
                        break  # the holder finished the work
                    self._stop.wait(self._lease_poll_s)
                    continue
                self._state = "running"
                if not self.step():
                    break
        except Exception as exc:
            # The job has no caller to raise to; say it, keep the state, resume at next start.
            self._state = "failed"
            self._error = str(exc)
            log.exception("re-embedding for %s failed after %d memories", self._embedder.name, self._done)
            return self.progress()
        finally:
            self._ended = self._monotonic()
            self._release_lease()
        self._state = "paused" if self._stop.is_set() else "done"
        if self._state == "done":
            log.info("re-embedding for %s done: %d memories", self._embedder.name, self._done)
        return self.progress()

    def _hold_lease(self) -> bool:
        """Take or renew the lease for the next batch; True without a lease to take."""
        if self._lease is None:
            return True
        return self._lease.take_lease(LEASE, self.holder, self._clock(), self._lease_ttl)

    def _release_lease(self) -> None:
        if self._lease is None:
            return
        try:
            self._lease.release_lease(LEASE, self.holder)
        except StoreError:
            # Nothing is lost: the lease runs out by itself and another replica takes over.
            log.warning("could not give up the re-embedding lease; it expires in %s", self._lease_ttl, exc_info=True)

    def step(self) -> int:
        """Re-embed one batch; return how many memories it stored (0: nothing left)."""
        model = self._embedder.name
        ids = self._store.missing_vectors(model, "", self._batch)
        if not ids:
            return 0
        kept = self.embed_now(ids)
        rate = self._rate()
        log.info(
            "re-embedding for %s: %d of %d done%s",
            model,
            self._done,
            self._total,
            f" ({rate:.0f} memories/s)" if rate is not None else "",
        )
        # Rows embed_now skipped got a vector from their edit; an empty batch still means progress.
        return max(kept, 1)

    def embed_now(self, ids: Sequence[str]) -> int:
        """Re-embed these memories (each lacking a vector of the current model) now, as a
        batch of the job would; how many were stored. The caller holds no write lock: this
        takes it. The write path asks it for the memories a save may repeat or replace,
        so that its checks read them with the new model's vectors."""
        if not ids:
            return 0
        contents = self._store.contents(ids)
        ordered = [memory_id for memory_id in ids if memory_id in contents]
        vectors = self._embedder.embed_documents([contents[memory_id] for memory_id in ordered])
        with self._lock:
            # An edit meanwhile stored its own current vector; do not overwrite it with the old text's.
            now_contents = self._store.contents(ordered)
            rows = [row for row, memory_id in enumerate(ordered) if now_contents.get(memory_id) == contents[memory_id]]
            kept = [ordered[row] for row in rows]
            self._store.put_vectors(
                dict(zip(kept, vectors[rows], strict=True)),
                self._embedder.name,
                embedding_version=self._embedder.version,
            )
            # Another process's edit (which takes no lock of this one) may have come between
            # the check above and the write, which then kept the edit's vector: only the
            # vectors stored as ours go into the index (the edit's change brings its own).
            stored = self._store.vectors(kept, self._embedder.name)
            rows = [row for row in rows if _stored_as(stored.get(ordered[row]), vectors[row])]
            kept = [ordered[row] for row in rows]
            self._keeper.adopt(kept, vectors[rows])
        self._done += len(kept)
        return len(kept)

    def _rate(self) -> float | None:
        # Each field read once: progress() runs in request threads while run() may be
        # setting them (a second read of _ended could find the None a new run just put there).
        started, ended, done = self._started, self._ended, self._done
        if started is None:
            return None
        elapsed = (self._monotonic() if ended is None else ended) - started
        return done / elapsed if elapsed > 0 else None

    def progress(self) -> Progress:
        # Idle means start() found every memory embedded by the current model, and every
        # write since embeds with it: no need to scan the store (/health calls this).
        remaining = 0 if self._state == "idle" else self.remaining()
        state = self._state
        if state == "idle" and remaining:
            state = "paused"
        return Progress(
            model=self._embedder.name,
            state=state,
            total=max(self._total, self._done + remaining),
            done=self._done,
            remaining=remaining,
            rate_per_s=self._rate(),
            legacy_indexed=self._keeper.legacy_size,
            error=self._error,
        )


def _stored_as(stored: Vector | None, vector: Vector) -> bool:
    """Whether the store holds ``vector`` (float32 bits), not another's."""
    return (
        stored is not None
        and stored.shape == vector.shape
        and np.array_equal(stored, vector.astype(np.float32, copy=False))
    )
