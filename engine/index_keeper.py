"""Keeps the fast network (the vector index and ``FastNetwork``) in step with the system of record.

Both are derived data. The store's change sequence says what changed; the
keeper applies every change after the index's ``applied_seq`` (add the stored
vector, or remove the id), whether the change was made by this process a
moment ago, by this process before a crash, or by another replica sharing the
store. At start-up it loads the saved index, catches up, and checks the count
against the store; when the saved index is absent, torn, built for another
model, ahead of the store's change sequence (a store restored from a backup),
or disagrees with the store, it rebuilds from the stored vectors. "Disagrees"
is checked two ways: the count of live vectors, and a sample of ids whose indexed
vectors must be the ones the store holds for them (a labels file that maps
vectors to the wrong memories passes the count, not this).

After a change of embedding model, memories that have no vector of the current
model yet are not embedded at start-up when the previous model is at hand
(``previous``): they go into a *legacy index* of their previous-model vectors,
which recall searches with the previous model's query embedding
(``legacy_query``, ``legacy_similar``), and the background re-embedding job moves them into the
main index batch by batch (``adopt``). Without the previous model they are
embedded during start-up, as any memory lacking a vector is.

The ``FastNetwork`` (columns, lexical index, entity postings, links) follows the same
change sequence with its own ``applied_seq``: each changed memory's record and links
are read from the store in one call each per page of changes. It is saved beside the
index and, when absent, torn, ahead of the store or disagreeing with its count,
rebuilt from a walk of the store.

Catching up reads the change sequence up to its first gap. Seq numbers are
consecutive, so a gap means either that the changes were pruned (the store's
change log is bounded: ``Store.low_water_seq``), and then the index or the fast
network rebuilds from the store, with a log line; or that a change is not visible
to this reader yet, and then it stops there and continues on the next catch-up (a
gap still there after ``GAP_PATIENCE_S`` is treated as lost: rebuild).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import numpy.typing as npt

from engine import scoring
from engine.fast_network import FastNetwork, NetworkFactory
from engine.ports import Embedder, Matrix, Store, Vector, VectorIndex, held_as
from engine.records import Change, Memory, MemoryFilter, Scope, Status, utcnow

log = logging.getLogger(__name__)

CHANGE_PAGE = 2000
REBUILD_BATCH = 2048
# Ids whose indexed vector is compared with the stored one when a saved index is loaded.
SELF_CHECK_SAMPLE = 64
# Every record the store holds, whatever its status or expiry (the fast network mirrors them all).
EVERY_RECORD = MemoryFilter(statuses=(), include_expired=True)
# How long a gap in the change sequence may stay before it is taken for a lost change.
GAP_PATIENCE_S = 30.0

IndexFactory = Callable[[], VectorIndex]
# A fresh, empty index for another embedder's vectors (the legacy index).
LegacyIndexFactory = Callable[[Embedder], VectorIndex]


class IndexKeeper:
    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        new_index: IndexFactory,
        new_network: NetworkFactory,
        directory: Path,
        previous: Embedder | None = None,
        new_legacy_index: LegacyIndexFactory | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._new_index = new_index
        self._directory = directory
        self._lock = threading.RLock()
        self._index: VectorIndex | None = None
        self._new_network = new_network
        self._network: FastNetwork | None = None
        self.rebuilt_at_start = False
        self.network_rebuilt_at_start = False
        self._previous = previous if new_legacy_index is not None else None
        self._new_legacy_index = new_legacy_index
        self._legacy: VectorIndex | None = None
        self._gap: tuple[int, float] | None = None  # (seq missing, since) for GAP_PATIENCE_S
        # One thread for ``index_ahead``: insertions stay in the order the writes made them.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="twinmem-index-ahead")
        self._stopped = False

    @property
    def index(self) -> VectorIndex:
        if self._index is None:
            raise RuntimeError("IndexKeeper.start() has not run")
        return self._index

    @property
    def network(self) -> FastNetwork:
        if self._network is None:
            raise RuntimeError("IndexKeeper.start() has not run")
        return self._network

    def start(self, loaded: VectorIndex | None, network: FastNetwork | None = None) -> None:
        """Adopt a loaded index and fast network (or none), catch them up, and rebuild
        either if it disagrees with the store."""
        with self._lock:
            self._start_network(network)
            self._start_index(loaded)

    def _start_network(self, loaded: FastNetwork | None) -> None:
        if loaded is not None and self._pruned_past(loaded.applied_seq, "saved fast network"):
            loaded = None
        if loaded is not None and loaded.applied_seq > self._store.last_seq():
            log.warning(
                "saved fast network reflects change %d, the store only %d: rebuilding",
                loaded.applied_seq,
                self._store.last_seq(),
            )
            loaded = None
        if loaded is not None:
            self._network = loaded
            self._catch_up_network()
            held = len(loaded) - loaded.count_deleted()
            expected = self._store.count_indexable()
            if held == expected:
                return
            log.warning("saved fast network holds %d memories, the store %d: rebuilding", held, expected)
        self.rebuild_network()
        self.network_rebuilt_at_start = True

    def rebuild_network(self) -> None:
        """Build a fresh fast network from a walk of the store, then swap it in."""
        with self._lock:
            seq = self._store.last_seq()
            fresh = self._new_network()
            for namespace in self._store.namespaces():
                after, whole = "", Scope.whole([namespace])
                while True:
                    page = self._store.scan(whole, after, REBUILD_BATCH)
                    if not page:
                        break
                    ids = [m.memory_id for m in page]
                    fresh.apply(page, (), self._store.links(ids))
                    self._network_vectors(fresh, ids)
                    after = page[-1].memory_id
                    if len(page) < REBUILD_BATCH:
                        break
            fresh.applied_seq = seq
            if self._network is not None:
                self._network.stop_warming()  # nothing more built for the network replaced
            self._network = fresh
            self._catch_up_network()
            log.info("fast network rebuilt: %d memories", len(fresh))

    def _start_index(self, loaded: VectorIndex | None) -> None:
        if loaded is not None and self._pruned_past(loaded.applied_seq, "saved vector index"):
            loaded = None
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
            if len(loaded) != expected:
                log.warning(
                    "saved index holds %d vectors, the store %d memories: rebuilding",
                    len(loaded),
                    expected,
                )
            else:
                wrong = self._misplaced(loaded)
                if not wrong:
                    return
                log.warning(
                    "saved index maps %d of %d sampled ids to vectors the store does not hold for them"
                    " (first: %s): rebuilding",
                    len(wrong),
                    min(SELF_CHECK_SAMPLE, len(loaded)),
                    wrong[0],
                )
        self.rebuild()
        self.rebuilt_at_start = True

    def _misplaced(self, index: VectorIndex) -> list[str]:
        """Sampled ids whose indexed vector is not the store's vector for them."""
        ids = index.sample(SELF_CHECK_SAMPLE)
        stored = self._store.vectors(ids, self._embedder.name)
        wrong = set(_not_indexed_as(index, [memory_id for memory_id in ids if memory_id in stored], stored))
        return [memory_id for memory_id in ids if memory_id not in stored or memory_id in wrong]

    def is_current(self) -> bool:
        last = self._store.last_seq()
        return self.index.applied_seq >= last and self.network.applied_seq >= last

    def ensure_current(self) -> None:
        """Catch up unless the index already reflects the newest change (one cheap query)."""
        if not self.is_current():
            self.catch_up()

    def catch_up(self, ahead: IndexAhead | None = None) -> int:
        """Apply every change after ``applied_seq`` to the index and the fast network;
        return how many were applied to the index.

        ``ahead``: the insertion of the memories a save just committed
        (``index_ahead``), still running. The changed records are read and applied to
        the fast network while it runs; the index waits for it, and the vectors it put
        are not read back from the index to see whether they are there."""
        with self._lock:
            try:
                return self._catch_up(ahead)
            finally:
                if ahead is not None:
                    ahead.wait()  # done before the save returns, whatever the catch-up met

    def _catch_up(self, ahead: IndexAhead | None) -> int:
        index = self.index
        applied = 0
        while True:
            changes = self._next_changes(index.applied_seq, "vector index")
            if changes is None:
                self.rebuild()
                return applied
            if not changes:
                break
            network = self._network
            if network is not None and network.applied_seq == index.applied_seq:
                self._apply_both(index, network, changes, ahead)
            else:
                self._apply(index, list(dict.fromkeys(change.memory_id for change in changes)), ahead=ahead)
            index.applied_seq = changes[-1].seq
            applied += len(changes)
            if len(changes) < CHANGE_PAGE:
                break  # the end of the sequence (or a gap): no need to ask again
        if self._network is not None and self._network.applied_seq != index.applied_seq:
            self._catch_up_network()
        return applied

    def _apply_both(
        self, index: VectorIndex, network: FastNetwork, changes: Sequence[Change], ahead: IndexAhead | None
    ) -> None:
        """Apply a page of changes to the index and the fast network (both at the change
        before it) from one read of the changed records, their vectors and links."""
        records = self._records(changes)
        vectors = self._store.vectors(list(records), self._embedder.name) if records else {}
        links = self._store.links(list(records)) if records else []
        ids = list(dict.fromkeys(change.memory_id for change in changes))
        network.apply(list(records.values()), [memory_id for memory_id in ids if memory_id not in records], links)
        if vectors:
            network.put_vectors(list(vectors), np.vstack(list(vectors.values())))
        network.applied_seq = changes[-1].seq
        # After the network has the records: a vector embedded here goes to both.
        self._apply(index, ids, {memory_id: memory.status for memory_id, memory in records.items()}, vectors, ahead)

    def _catch_up_network(self) -> None:
        network = self._network
        if network is None:
            return
        while True:
            changes = self._next_changes(network.applied_seq, "fast network")
            if changes is None:
                self.rebuild_network()
                return
            if not changes:
                return
            records = self._records(changes)
            gone = [change.memory_id for change in changes if change.memory_id not in records]
            links = self._store.links(list(records)) if records else []
            network.apply(list(records.values()), gone, links)
            self._network_vectors(network, list(records))
            network.applied_seq = changes[-1].seq
            if len(changes) < CHANGE_PAGE:
                return

    def _next_changes(self, seq: int, what: str) -> list[Change] | None:
        """The changes after ``seq`` up to the first gap in the sequence; None when
        ``what`` (at ``seq``) cannot catch up and must be rebuilt."""
        changes = self._store.changes_since(seq, CHANGE_PAGE)
        if changes and changes[0].seq != seq + 1:
            if self._pruned_past(seq, what):
                return None
            if self._gap is None or self._gap[0] != seq + 1:
                self._gap = (seq + 1, time.monotonic())
            elif time.monotonic() - self._gap[1] > GAP_PATIENCE_S:
                log.warning("%s: change %d is still missing after %.0f s: rebuilding", what, seq + 1, GAP_PATIENCE_S)
                self._gap = None
                return None
            return []
        for n, change in enumerate(changes):
            if change.seq != seq + 1 + n:
                return changes[:n]
        return changes

    def _pruned_past(self, seq: int, what: str) -> bool:
        """Whether changes after ``seq`` were pruned from the store's log (logged)."""
        low = self._store.low_water_seq()
        if seq >= low:
            return False
        log.warning(
            "%s is at change %d, below the store's low-water mark %d (the changes after it were pruned):"
            " rebuilding from the store",
            what,
            seq,
            low,
        )
        return True

    def _network_vectors(self, network: FastNetwork, ids: list[str]) -> None:
        vectors = self._store.vectors(ids, self._embedder.name) if ids else {}
        if vectors:
            network.put_vectors(list(vectors), np.vstack(list(vectors.values())))

    def _records(self, changes: Sequence[Change]) -> dict[str, Memory]:
        """The current record of each changed memory that still exists, by id."""
        by_namespace: dict[str, list[str]] = {}
        for change in changes:
            by_namespace.setdefault(change.namespace, []).append(change.memory_id)
        found: dict[str, Memory] = {}
        for namespace, ids in by_namespace.items():
            unique = list(dict.fromkeys(ids))
            for memory in self._store.get_many(Scope.whole([namespace]), unique, EVERY_RECORD, utcnow()):
                found[memory.memory_id] = memory
        return found

    def rebuild(self) -> None:
        """Build a fresh index from the store, then swap it in."""
        with self._lock:
            seq = self._store.last_seq()
            fresh = self._new_index()
            model = self._embedder.name
            pending: list[str] = []
            for ids, vectors, missing in self._store.iter_indexable(model, REBUILD_BATCH):
                fresh.upsert(ids, vectors)
                if missing:
                    pending += missing
            legacy = self._legacy_for(pending, fresh)
            if pending:
                fresh.upsert(*self._embed_stored(pending))
            fresh.applied_seq = seq
            self._index = fresh
            self._legacy = legacy
            # Changes made while we walked the store are applied on top.
            self.catch_up()
            log.info("vector index rebuilt: %d vectors", len(fresh))

    def _legacy_for(self, pending: list[str], main: VectorIndex) -> VectorIndex | None:
        """A legacy index of the previous model's vectors for ``pending`` ids; those
        it covers are taken out of ``pending`` (the rest must be embedded now)."""
        if not pending or self._previous is None or self._new_legacy_index is None:
            return None
        legacy = self._new_legacy_index(self._previous)
        wanted = set(pending)
        for ids, vectors, _ in self._store.iter_indexable(self._previous.name, REBUILD_BATCH):
            rows = [row for row, memory_id in enumerate(ids) if memory_id in wanted and memory_id not in main]
            if rows:
                legacy.upsert([ids[row] for row in rows], vectors[rows])
        pending[:] = [memory_id for memory_id in pending if memory_id not in legacy]
        if not len(legacy):
            return None
        log.info(
            "%d memories have no %s vector yet: recall searches them with %s until they are re-embedded",
            len(legacy),
            self._embedder.name,
            self._previous.name,
        )
        return legacy

    @property
    def legacy_size(self) -> int:
        """Memories recall still finds through the previous model's vectors."""
        legacy = self._legacy
        return len(legacy) if legacy is not None else 0

    def adopt(self, ids: Sequence[str], vectors: Matrix) -> None:
        """Move re-embedded memories (vectors already stored) into the main index."""
        with self._lock:
            statuses = self._store.index_status(list(ids))
            alive = [statuses.get(memory_id, Status.DELETED) is not Status.DELETED for memory_id in ids]
            keep = [row for row, ok in enumerate(alive) if ok]
            if keep:
                self.index.upsert([ids[row] for row in keep], vectors[keep])
                if self._network is not None:
                    self._network.put_vectors([ids[row] for row in keep], vectors[keep])
            self._forget_legacy(ids)

    def _forget_legacy(self, ids: Sequence[str]) -> None:
        legacy = self._legacy
        if legacy is None:
            return
        legacy.remove(ids)
        if not len(legacy):
            self._legacy = None
            log.info("every memory has a %s vector: the legacy index is gone", self._embedder.name)

    def legacy_query(self, query: str) -> Vector | None:
        """``query`` embedded by the previous model, for ``legacy_similar``; None when no
        memory waits for re-embedding (nothing to search)."""
        legacy, previous = self._legacy, self._previous
        if legacy is None or previous is None or not len(legacy):
            return None
        return previous.embed_query(query)

    def legacy_similar(self, vector: Vector, k: int, among: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """Up to ``k`` (id, cosine) among memories not yet re-embedded, found with the
        previous model's query vector (``legacy_query``), or only among the ids ``among``
        names (the memories a recall's namespaces and filter let through: the nearest of
        the whole legacy index may all be other namespaces'); each cosine is mapped onto
        the current model's scale (equal calibrated similarity), so that the ranker can
        compare them."""
        legacy, previous = self._legacy, self._previous
        if legacy is None or previous is None or not len(legacy):
            return []
        if among is None:
            hits = legacy.search(vector, min(k, len(legacy)))
        else:
            hits = legacy.search_among(vector, k, legacy.handles(among))
        floor = self._embedder.similarity_floor
        return [
            (memory_id, floor + scoring.calibrated_similarity(cosine, previous.similarity_floor) * (1 - floor))
            for memory_id, cosine in hits
        ]

    def legacy_neighbours(self, texts: Sequence[tuple[str, str]], k: int, *, limit: int | None = None) -> list[str]:
        """For each (namespace, text), up to ``k`` memories of that namespace not yet
        re-embedded that are nearest the text by the previous model: those a new memory
        may repeat or replace, which the write path's checks, reading the current model's
        vectors only, would not see. Every id once; none when nothing waits. ``limit``:
        at most that many in all, every text's nearest before any text's second."""
        legacy, previous, network = self._legacy, self._previous, self._network
        if legacy is None or previous is None or network is None or not len(legacy) or not texts:
            return []
        vectors = previous.embed_documents([text for _, text in texts])
        ranked: list[list[str]] = []  # each text's, nearest first
        waiting: dict[str, npt.NDArray[np.int64]] = {}  # each namespace's handles in the legacy index
        for (namespace, _), vector in zip(texts, vectors, strict=True):
            if namespace not in waiting:
                with network.reading():
                    ids = [network.ids[row] for row in network.rows_in([namespace]).tolist()]
                handles = legacy.handles(ids)
                waiting[namespace] = handles[handles >= 0]
            if len(waiting[namespace]):
                ranked.append([memory_id for memory_id, _ in legacy.search_among(vector, k, waiting[namespace])])
        found: dict[str, None] = {}
        for rank in range(k):
            for nearest in ranked:
                if rank < len(nearest):
                    found[nearest[rank]] = None
                    if limit is not None and len(found) >= limit:
                        return list(found)
        return list(found)

    def index_ahead(self, ids: Sequence[str], vectors: Matrix) -> IndexAhead:
        """Start putting the vectors of new memories into the index before the store
        transaction that writes them commits, on the keeper's worker thread: HNSW's
        insertion (hnswlib lets go of the GIL) runs while the store writes and syncs, and
        on while the catch-up after the commit (``catch_up(ahead)``) reads the changes and
        applies them to the fast network; the catch-up waits for it before it touches the
        index, and inserts nothing again for the vectors it put (``IndexAhead.put_into``).
        Ids the index holds already are left alone (``VectorIndex.insert_absent``).

        The caller holds the service's write lock from here to ``catch_up(ahead)`` (the
        transaction committed) or ``IndexAhead.undo`` (it failed: the ids come out of the
        index again). Until the commit, a search may meet these ids; the fast network does
        not know them yet, so recall drops them (``FastNetwork.live_rows``)."""
        index = self.index
        new = [n for n, memory_id in enumerate(ids) if memory_id not in index]
        if not new or self._stopped:
            return IndexAhead(index, [], None, None)
        put = [ids[n] for n in new]
        data = np.ascontiguousarray(np.asarray(vectors)[new], dtype=np.float32)
        try:
            future = self._worker.submit(self._put_ahead, index, put, data)
        except RuntimeError:  # the worker was shut down (closing): the catch-up indexes them
            return IndexAhead(index, [], None, None)
        return IndexAhead(index, put, data, future)

    def _put_ahead(self, index: VectorIndex, ids: list[str], vectors: Matrix) -> list[str]:
        # Not under the keeper's lock: the catch-up holds it while it waits for this.
        if index is not self._index:
            return []  # rebuilt meanwhile: the catch-up indexes them in the new one
        return index.insert_absent(ids, vectors)

    def stop(self) -> None:
        """No more background work on the fast network (closing; ``save`` follows)."""
        with self._lock:
            self._stopped = True
        self._worker.shutdown(wait=True)
        with self._lock:
            if self._network is not None:
                self._network.stop_warming()

    def save(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.save(self._directory)
            if self._network is not None:
                self._network.settle()  # no lexicon build left running behind a save (or an exit)
                self._network.save(self._directory)

    def _apply(
        self,
        index: VectorIndex,
        ids: list[str],
        statuses: dict[str, Status] | None = None,
        stored: dict[str, Vector] | None = None,
        ahead: IndexAhead | None = None,
    ) -> None:
        """Bring ``ids`` in the index in step with the store; ``statuses`` (of those that
        exist) and ``stored`` (their vectors) when already read; ``ahead``: an insertion
        into the index that these ids may be part of (waited for first)."""
        if statuses is None:
            statuses = self._store.index_status(ids)
        # First the insertion ahead: a memory it put that is gone by now (deleted by
        # another replica since the commit) is removed below, not put back after.
        put = ahead.put_into(index) if ahead is not None else {}
        keep = [mid for mid in ids if statuses.get(mid, Status.DELETED) is not Status.DELETED]
        kept = set(keep)
        index.remove(mid for mid in ids if mid not in kept)
        # A changed memory leaves the legacy index: it is removed, or gets a current vector below.
        self._forget_legacy(ids)
        if not keep:
            return
        vectors = self._store.vectors(keep, self._embedder.name) if stored is None else stored
        missing = [mid for mid in keep if mid not in vectors]
        # Vectors put ahead are there, as the store holds them: no need to read them back.
        unsure = [mid for mid in keep if mid in vectors and not _same(put.get(mid), vectors[mid])]
        # A change that kept the vector (a status or field edit, an archive) needs no
        # index write: re-inserting into HNSW costs a graph search per id.
        present = _not_indexed_as(index, unsure, vectors)
        if present:
            index.upsert(present, np.vstack([vectors[mid] for mid in present]))
        if missing:
            index.upsert(*self._embed_stored(missing))

    def _embed_stored(self, ids: list[str]) -> tuple[list[str], Matrix]:
        """Embed memories that have no vector for the current model, and keep the vectors,
        each record then naming the model of its vector (as a re-embedding does: without
        it, memories embedded here at a model change kept the old model's name, and the
        re-embedding job, finding no memory without a vector, reported nothing to do)."""
        contents = self._store.contents(ids)
        ordered = [mid for mid in ids if mid in contents]
        vectors = self._embedder.embed_documents([contents[mid] for mid in ordered])
        self._store.put_vectors(
            dict(zip(ordered, vectors, strict=True)), self._embedder.name, embedding_version=self._embedder.version
        )
        if self._network is not None:  # a stored vector writes no change to catch up from
            self._network.put_vectors(ordered, vectors)
        return ordered, vectors


class IndexAhead:
    """New memories' vectors on their way into the index (``IndexKeeper.index_ahead``)."""

    def __init__(
        self, index: VectorIndex, ids: list[str], vectors: Matrix | None, future: Future[list[str]] | None
    ) -> None:
        self._index = index
        self._ids = ids
        self._vectors = vectors
        self._future = future
        self._put: list[str] = []

    def wait(self) -> list[str]:
        """Wait for the insertion; the ids it put in (the same on every call). A failed
        insertion is logged and put in nothing: the catch-up inserts those vectors
        itself, and raises if it fails."""
        if self._future is None:
            return self._put
        try:
            self._put = self._future.result()
        except Exception as exc:  # noqa: BLE001 (the catch-up meets and reports it)
            log.warning("indexing %d new memories ahead of their commit failed: %s", len(self._ids), exc)
        finally:
            self._future = None
        return self._put

    def put_into(self, index: VectorIndex) -> dict[str, Vector]:
        """Once the insertion is done: the vector it put into ``index`` for each id."""
        put = set(self.wait())
        if index is not self._index or not put or self._vectors is None:
            return {}
        return {memory_id: self._vectors[n] for n, memory_id in enumerate(self._ids) if memory_id in put}

    def undo(self) -> None:
        """The transaction failed: take out of the index what was put in for it."""
        put = self.wait()
        if put:
            self._index.remove(put)


def _same(put: Vector | None, stored: Vector) -> bool:
    """Whether a vector put into the index is the one the store holds (float32 bits)."""
    return put is not None and put.shape == stored.shape and np.array_equal(put, stored.astype(np.float32, copy=False))


def _not_indexed_as(index: VectorIndex, ids: list[str], vectors: Mapping[str, Vector]) -> list[str]:
    """Those of ``ids`` for which the index does not hold ``vectors[id]`` (to float
    precision) already, in one read of the index."""
    if not ids:
        return []
    held = held_as(index, ids, np.vstack([vectors[mid] for mid in ids]))
    return [mid for mid, same in zip(ids, held.tolist(), strict=True) if not same]
