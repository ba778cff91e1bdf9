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
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from engine.index_keeper import IndexKeeper
from engine.ports import Embedder, Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Progress:
    model: str
    # "idle" (nothing to do), "running", "paused" (not started), "done", or "failed".
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
        self._error: str | None = None

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
        self._state = "running"
        self._error = None
        log.info("re-embedding %d memories for %s", self._total, self._embedder.name)
        try:
            while not self._stop.is_set() and self.step():
                pass
        except Exception as exc:
            # The job has no caller to raise to; say it, keep the state, resume at next start.
            self._state = "failed"
            self._error = str(exc)
            log.exception("re-embedding for %s failed after %d memories", self._embedder.name, self._done)
            return self.progress()
        self._state = "paused" if self._stop.is_set() else "done"
        if self._state == "done":
            log.info("re-embedding for %s done: %d memories", self._embedder.name, self._done)
        return self.progress()

    def step(self) -> int:
        """Re-embed one batch; return how many memories it stored (0: nothing left)."""
        model = self._embedder.name
        ids = self._store.missing_vectors(model, "", self._batch)
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
                dict(zip(kept, vectors[rows], strict=True)), model, embedding_version=self._embedder.version
            )
            self._keeper.adopt(kept, vectors[rows])
        self._done += len(kept)
        rate = self._rate()
        log.info(
            "re-embedding for %s: %d of %d done%s",
            model,
            self._done,
            self._total,
            f" ({rate:.0f} memories/s)" if rate is not None else "",
        )
        # Rows skipped above got a vector from their edit; an empty batch still means progress.
        return max(len(kept), 1)

    def _rate(self) -> float | None:
        if self._started is None:
            return None
        elapsed = self._monotonic() - self._started
        return self._done / elapsed if elapsed > 0 else None

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
