"""HNSW indexes over one category's memories, for the recalls narrowed to that category.

A recall narrowed to one category (a "how" question's second ranking, over procedures;
a category filter) whose memories are a small share of the index finds few of them
among the main index's neighbours. It then scans them, or searches the main index
keeping only them, which walks past everything else (engine/recall.py): at 100,000
memories, 8,000 procedures cost 3–5 ms that way, against about 0.3 ms for a search of
an index that holds only them.

Where a recall had to do that over more than ``EXACT_DIRECT`` memories of one category,
it asks for that category's own index (``ask``). One background thread builds it from
a copy of the fast network's float16 vectors, widened a chunk at a time outside the
network's lock, one build at a time, for at most ``kept`` categories, which together
hold no more than ``room()`` memories (a quarter of the network's: each member costs its
vector again, in float32, and its links, about 3.8 KB at 512 dimensions by RSS; a
category past that room is not built until the next start).

From the moment a build takes its snapshot, the network reports every memory whose
category, vector, status or existence changes (``touched``). The next recall that asks
for the index (``get``, under the network's lock) brings those in first, so a write pays
nothing for it and the index a recall searches is never behind the network it reads.
Where more than ``SYNC_IN_RECALL`` are waiting (a bulk import), that recall is not made
to insert them all: the index is set aside and built again in the background, and
recalls plan without it meanwhile; so is an index whose catching up failed. A build that
fails is logged and leaves the category without an index until it is asked again.

Its members are the category's memories that hold a vector and are not deleted, in
every namespace (the recall checks sight and filter on what comes back, as it does on
the main index's neighbours). The indexes are not saved: after a start, each is built
again when a recall first asks (8,000 vectors of 512 dimensions take about 2 s on one
thread, with the index's own settings).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from engine.errors import VectorIndexError
from engine.ports import VectorIndex, held_as

log = logging.getLogger(__name__)

# Vectors widened and put into an index being built per call: a stop (closing) waits
# for at most one chunk.
BUILD_CHUNK = 1024
# At most this many touched memories are brought into an index by the recall that asks
# for it (an insertion costs up to about 0.3 ms); more are a rebuild in the background.
SYNC_IN_RECALL = 64

IndexFactory = Callable[[], VectorIndex]
HalfMatrix = npt.NDArray[np.float16]


class Members(Protocol):
    """The network's members of ``category`` (all of them, or those among ``ids``) and,
    unless ``vectors`` is False, a copy of their float16 vectors; called under the
    network's lock."""

    def __call__(
        self, category: str, ids: Sequence[str] | None, *, vectors: bool = True
    ) -> tuple[list[str], HalfMatrix]: ...


class CategoryIndexes:
    """The categories' own indexes of one fast network (see the module docstring). The
    network calls every method under ``lock``, its own, but ``settle``, which must be
    called without it (the build thread takes it)."""

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
        """The category's index brought in step with the network, or None where it has
        none now (not built yet, or being built again)."""
        index = self._ready.get(category)
        touched = self._dirty.get(category)
        if index is None or not touched:
            return index
        if len(touched) > SYNC_IN_RECALL:
            self._rebuild(category)
            return None
        try:
            self._sync(index, category, touched)
        except VectorIndexError:
            log.exception("category %r: its index could not catch up; building it again", category)
            self._rebuild(category)
            return None
        touched.clear()
        return index

    def ask(self, category: str) -> None:
        """Build the category's index in the background, unless it has or awaits one,
        was refused for want of room, ``kept`` categories already have or await one, or
        the indexes were stopped."""
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

    def _rebuild(self, category: str) -> None:
        """Set the category's index aside and build it again (its room checked again)."""
        del self._ready[category]
        self._dirty.pop(category, None)
        self.ask(category)

    def _build_queued(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._stopped or not self._queued:
                        self._building.clear()  # stopped: those queued are not built
                        self._queued.clear()
                        self._thread = None
                        return
                    category = self._queued.pop(0)
                    snapshot = self._snapshot(category)
                built = self._build(category, *snapshot) if snapshot is not None else None
                with self._lock:
                    self._building.discard(category)
                    if built is None:
                        self._dirty.pop(category, None)
                    else:
                        self._ready[category] = built
        finally:
            with self._lock:
                if self._thread is threading.current_thread():  # it failed: what it held is asked again later
                    self._thread = None
                    self._building.clear()
                    self._queued.clear()
                for category in set(self._dirty) - set(self._ready) - self._building:
                    del self._dirty[category]

    def _snapshot(self, category: str) -> tuple[list[str], HalfMatrix] | None:
        """The category's members and their vectors, from which its index is built, or
        None where they would not fit in the room left (under the lock)."""
        count = len(self._members(category, None, vectors=False)[0])
        if sum(map(len, self._ready.values())) + count > self._room():
            self._refused.add(category)
            log.info("category %r gets no index of its own: %d memories, past the room", category, count)
            return None
        self._dirty[category] = set()  # what changes from here on is brought in at ``get``
        return self._members(category, None)

    def _build(self, category: str, ids: list[str], vectors: HalfMatrix) -> VectorIndex | None:
        """A fresh index of these vectors, or None where the network stopped meanwhile or
        the index refused them (logged)."""
        try:
            index = self._new_index()
            for start in range(0, len(ids), BUILD_CHUNK):
                if self._stopped:
                    return None
                chunk = np.asarray(vectors[start : start + BUILD_CHUNK], dtype=np.float32)
                index.upsert(ids[start : start + BUILD_CHUNK], chunk)
        except VectorIndexError:
            log.exception("category %r: its index could not be built", category)
            return None
        log.info("category %r has its own index: %d memories", category, len(ids))
        return index

    def _sync(self, index: VectorIndex, category: str, touched: set[str]) -> None:
        asked = sorted(touched)
        members, half = self._members(category, asked)
        index.remove(set(asked).difference(members))
        if not members:
            return
        vectors = np.asarray(half, dtype=np.float32)
        stale = np.flatnonzero(~held_as(index, members, vectors))
        if len(stale):
            index.upsert([members[n] for n in stale.tolist()], vectors[stale])
