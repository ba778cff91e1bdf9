"""HNSW indexes over one category's memories, for the recalls narrowed to that category.

A recall narrowed to one category (a "how" question's second ranking, over procedures;
a category filter) whose memories are a small share of the index finds few of them
among the main index's neighbours. It then scans them, or searches the main index
keeping only them, which walks past everything else (engine/recall.py): at 100,000
memories, 8,000 procedures cost 3–5 ms that way, against about 0.3 ms for a search of
an index that holds only them.

Where a recall had to do that over more than ``EXACT_DIRECT`` memories of one category,
it asks for that category's own index (``ask``). One background thread builds it from
the fast network's vectors (float16, widened), outside the network's lock, at most one
build at a time and at most ``kept`` categories, which together hold no more than
``room()`` memories (a quarter of the network's: each member costs its vector again, in
float32, and its links, about 2.3 KB at 512 dimensions; a category past that room is
not built until the next start). From the moment a build takes its
snapshot, the network reports every memory whose category, vector, status or
existence changes (``touched``); those are brought in step the next time a recall asks
for the index (``get``, under the network's lock), so a write pays nothing for it and a
recall never sees an index behind the network it reads.

Its members are the category's memories that hold a vector and are not deleted, in
every namespace (the recall checks sight and filter on what comes back, as it does on
the main index's neighbours). The indexes are not saved: after a start, each is built
again when a recall first asks (8,000 vectors of 512 dimensions take about a second on
one thread, with the index's own settings).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import numpy as np

from engine.ports import Matrix, VectorIndex

log = logging.getLogger(__name__)

# Vectors put into an index being built per call: a stop (closing) waits for at most one.
BUILD_CHUNK = 1024
# Stored and indexed vectors this close are the same vector (as ``index_keeper``'s).
UNCHANGED_COSINE = 1.0 - 1e-5

IndexFactory = Callable[[], VectorIndex]


class Members(Protocol):
    """The network's members of ``category`` (all of them, or those among ``ids``) and,
    unless ``vectors`` is False, their vectors; called under the network's lock."""

    def __call__(
        self, category: str, ids: Sequence[str] | None, *, vectors: bool = True
    ) -> tuple[list[str], Matrix]: ...


class CategoryIndexes:
    """The categories' own indexes of one fast network (see the module docstring).
    Every method but the build thread's runs under ``lock``, the network's."""

    def __init__(
        self,
        new_index: IndexFactory,
        members: Members,
        lock: threading.RLock,
        *,
        kept: int,
        room: Callable[[], int],
    ) -> None:
        self._new_index = new_index
        self._members = members
        self._lock = lock
        self._kept = kept
        self._room = room  # the most members the indexes may hold together (under the lock)
        self._ready: dict[str, VectorIndex] = {}
        self._queued: list[str] = []
        self._building: set[str] = set()  # asked for and not ready yet (queued or under way)
        self._refused: set[str] = set()  # past the room when built: not asked again
        # Per category with an index or a build, the ids touched since its snapshot.
        self._dirty: dict[str, set[str]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = False

    def get(self, category: str) -> VectorIndex | None:
        """The category's index brought in step with the network, or None where it has none yet."""
        index = self._ready.get(category)
        if index is not None and self._dirty.get(category):
            self._sync(index, category, self._dirty.pop(category))
        return index

    def ask(self, category: str) -> None:
        """Build the category's index in the background, unless it has or awaits one, or
        ``kept`` categories already do."""
        if self._stopped or category in self._ready or category in self._building or category in self._refused:
            return
        if len(self._ready) + len(self._building) >= self._kept:
            return
        self._building.add(category)
        self._queued.append(category)
        if self._thread is None:
            self._thread = threading.Thread(target=self._build_queued, name="category-index", daemon=True)
            self._thread.start()

    def touched(self, category: str, ids: Iterable[str]) -> None:
        """These memories' membership of the category, or their vectors, may have changed."""
        dirty = self._dirty.get(category)
        if dirty is not None:
            dirty.update(ids)

    def holds(self) -> dict[str, int]:
        """Members held by each category's index (tests, the benchmark's report)."""
        return {category: len(index) for category, index in self._ready.items()}

    def stop(self) -> None:
        """Build nothing more (closing, or the network replaced); a build under way stops
        at its next chunk."""
        self._stopped = True
        self._queued.clear()

    def settle(self) -> None:
        """Wait until no build is under way (call without holding the lock)."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def _build_queued(self) -> None:
        while True:
            with self._lock:
                if self._stopped or not self._queued:
                    self._building.clear()
                    self._thread = None
                    return
                category = self._queued.pop(0)
                count = len(self._members(category, None, vectors=False)[0])
                if sum(map(len, self._ready.values())) + count > self._room():
                    self._building.discard(category)
                    self._refused.add(category)
                    log.info("category %r gets no index of its own: %d memories, past the room", category, count)
                    continue
                ids, vectors = self._members(category, None)
                self._dirty[category] = set()  # what changes from here on is brought in at ``get``
            index = self._build(ids, vectors)
            with self._lock:
                self._building.discard(category)
                if index is None:
                    self._dirty.pop(category, None)
                    continue
                self._ready[category] = index
            log.info("category %r has its own index: %d memories", category, len(ids))

    def _build(self, ids: list[str], vectors: Matrix) -> VectorIndex | None:
        """A fresh index of these vectors, or None where the network stopped meanwhile."""
        index = self._new_index()
        for start in range(0, len(ids), BUILD_CHUNK):
            if self._stopped:
                return None
            index.upsert(ids[start : start + BUILD_CHUNK], vectors[start : start + BUILD_CHUNK])
        return index

    def _sync(self, index: VectorIndex, category: str, touched: set[str]) -> None:
        asked = sorted(touched)
        members, vectors = self._members(category, asked)
        index.remove(set(asked).difference(members))
        if not members:
            return
        held = index.paired_similarities(members, vectors) >= UNCHANGED_COSINE  # NaN: not held
        stale = np.flatnonzero(~held)
        if len(stale):
            index.upsert([members[n] for n in stale.tolist()], vectors[stale])
