"""Keeps the fast network (the vector index) in step with the system of record.

The index is derived data. The store's change sequence says what changed; the
keeper applies every change after the index's ``applied_seq`` (add the stored
vector, or remove the id), whether the change was made by this process a
moment ago, by this process before a crash, or by another replica sharing the
store. At start-up it loads the saved index, catches up, and checks the count
against the store; when the saved index is absent, torn, built for another
model, ahead of the store's change sequence (a store restored from a backup),
or disagrees with the store, it rebuilds from the stored vectors (embedding
any memory that has no vector for the current model).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engine.ports import Embedder, Matrix, Store, VectorIndex
from engine.records import Status

log = logging.getLogger(__name__)

CHANGE_PAGE = 2000
REBUILD_BATCH = 2048

IndexFactory = Callable[[], VectorIndex]


class IndexKeeper:
    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        new_index: IndexFactory,
        directory: Path,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._new_index = new_index
        self._directory = directory
        self._lock = threading.RLock()
        self._index: VectorIndex | None = None
        self.rebuilt_at_start = False

    @property
    def index(self) -> VectorIndex:
        if self._index is None:
            raise RuntimeError("IndexKeeper.start() has not run")
        return self._index

    def start(self, loaded: VectorIndex | None) -> None:
        """Adopt a loaded index (or none), catch it up, and rebuild if it disagrees."""
        with self._lock:
            if loaded is not None and loaded.applied_seq > self._store.last_seq():
                # The index reflects changes this store never had (it was restored
                # from a backup or replaced): its seq numbers would be reused, and
                # catching up from them would skip the store's new changes.
                log.warning(
                    "saved index reflects change %d, the store only %d: rebuilding",
                    loaded.applied_seq,
                    self._store.last_seq(),
                )
                loaded = None
            if loaded is not None:
                self._index = loaded
                self.catch_up()
                expected = self._store.count_indexable()
                if len(loaded) == expected:
                    return
                log.warning(
                    "saved index holds %d vectors, the store %d memories: rebuilding",
                    len(loaded),
                    expected,
                )
            self.rebuild()
            self.rebuilt_at_start = True

    def is_current(self) -> bool:
        return self.index.applied_seq >= self._store.last_seq()

    def ensure_current(self) -> None:
        """Catch up unless the index already reflects the newest change (one cheap query)."""
        if not self.is_current():
            self.catch_up()

    def catch_up(self) -> int:
        """Apply every change after ``applied_seq``; return how many were applied."""
        with self._lock:
            index = self.index
            applied = 0
            while True:
                changes = self._store.changes_since(index.applied_seq, CHANGE_PAGE)
                if not changes:
                    return applied
                ids = list(dict.fromkeys(change.memory_id for change in changes))
                self._apply(index, ids)
                index.applied_seq = changes[-1].seq
                applied += len(changes)

    def rebuild(self) -> None:
        """Build a fresh index from the store, then swap it in."""
        with self._lock:
            seq = self._store.last_seq()
            fresh = self._new_index()
            model = self._embedder.name
            for ids, vectors, missing in self._store.iter_indexable(model, REBUILD_BATCH):
                fresh.upsert(ids, vectors)
                if missing:
                    fresh.upsert(*self._embed_stored(missing))
            fresh.applied_seq = seq
            self._index = fresh
            # Changes made while we walked the store are applied on top.
            self.catch_up()
            log.info("vector index rebuilt: %d vectors", len(fresh))

    def save(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.save(self._directory)

    def _apply(self, index: VectorIndex, ids: list[str]) -> None:
        statuses = self._store.index_status(ids)
        keep = [mid for mid in ids if statuses.get(mid, Status.DELETED) is not Status.DELETED]
        kept = set(keep)
        index.remove(mid for mid in ids if mid not in kept)
        if not keep:
            return
        vectors = self._store.vectors(keep, self._embedder.name)
        missing = [mid for mid in keep if mid not in vectors]
        present = [mid for mid in keep if mid in vectors]
        if present:
            index.upsert(present, np.vstack([vectors[mid] for mid in present]))
        if missing:
            index.upsert(*self._embed_stored(missing))

    def _embed_stored(self, ids: list[str]) -> tuple[list[str], Matrix]:
        """Embed memories that have no vector for the current model, and keep the vectors."""
        contents = self._store.contents(ids)
        ordered = [mid for mid in ids if mid in contents]
        vectors = self._embedder.embed_documents([contents[mid] for mid in ordered])
        self._store.put_vectors(dict(zip(ordered, vectors, strict=True)), self._embedder.name)
        return ordered, vectors
