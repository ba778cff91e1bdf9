"""The fast network: an in-process HNSW index (hnswlib) over memory ids.

hnswlib's quirks stay in here:

* its cosine space returns ``1 - cos``; callers get similarity;
* ``add_items`` is not safe beside ``knn_query``; one lock serialises them;
* ``ef`` is not saved with the index; it is re-applied after load and raised
  to ``k`` when a query asks for more neighbours than ``ef``;
* capacity is fixed at creation; the index grows by doubling when full;
* labels are integers; the label → memory-id map is kept here and saved as a
  plain ``.npy`` of strings (no pickle);
* replacing a vector marks the old label deleted and adds a new one;
* ``knn_query`` raises ("Cannot return the results in a contiguous 2D array")
  when deleted elements leave it fewer than ``k`` reachable results, even though
  ``k`` live ids exist: the search is retried with a wider ``ef``, then answered
  by an exact scan of the live vectors, so it never fails for that reason;
* a filtered ``knn_query`` calls a Python callable for every element it would keep,
  holding the GIL: ``search_among`` hands it a ``bytes`` mask's own ``__getitem__``
  (no Python frame per call) and searches on one thread;
* ``load_index`` trusts its file: a graph file damaged in place (same size)
  crashes the process at the first query. Each saved file's SHA-256 is kept in
  the meta file and checked before hnswlib reads anything.

A save writes three files beside each other (graph, labels, meta). The meta
file is written last and names the sizes and checksums of the other two, so a
torn or damaged save is detected on load (and logged), and the caller rebuilds
from the store instead of serving it.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import hnswlib
import numpy as np
import numpy.typing as npt

from engine.errors import VectorIndexError
from engine.files import ARRAY_HEADERS, CHECKSUM, checksum_matches, checksum_of
from engine.ports import Matrix, Vector

log = logging.getLogger(__name__)

_GRAPH = "hnsw.bin"
_LABELS = "hnsw.labels.npy"
_META = "hnsw.meta.json"
_FORMAT = 2  # 2: the meta file holds each file's checksum (SHA-256, then XXH3-128)
_MIN_CAPACITY = 1024
# Vectors read at once by ``similarities`` (4096 × 384 float32 is 6 MiB).
_SIMILARITY_CHUNK = 4096


class HnswIndex:
    """``VectorIndex`` over hnswlib (see ``engine.ports.VectorIndex``)."""

    def __init__(
        self,
        dim: int,
        *,
        model: str,
        m: int = 16,
        ef_construction: int = 200,
        ef_search: int = 128,
        capacity: int = _MIN_CAPACITY,
        threads: int = 1,
        search_threads: int = 1,
        _native: hnswlib.Index | None = None,
    ) -> None:
        self.dim = dim
        self.model = model
        self.applied_seq = 0
        self._m = m
        self._ef_construction = ef_construction
        self._ef_search = ef_search
        self._threads = threads
        self._search_threads = search_threads
        self._lock = threading.Lock()
        self._labels: list[str | None] = []
        # The id each label was given, kept once its vector is replaced or removed (None
        # only for labels dead before a load): a label names one id for good (``ids_of``).
        self._named: list[str | None] = []
        self._by_id: dict[str, int] = {}
        self._live = np.zeros(_MIN_CAPACITY, np.bool_)  # per label: it names a present vector
        self.handle_space = uuid.uuid4().hex  # handles are labels, never reused by this object
        if _native is None:
            _native = hnswlib.Index(space="cosine", dim=dim)
            _native.init_index(max_elements=max(capacity, _MIN_CAPACITY), M=m, ef_construction=ef_construction)
        self._index = _native
        self._index.set_ef(ef_search)
        self._ef = ef_search
        # How often a search needed a wider second try, and how often an exact scan.
        self.search_retries = 0
        self.exact_searches = 0

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._by_id

    @property
    def dead_labels(self) -> int:
        """Labels taken by removed or replaced vectors (reclaimed by a rebuild)."""
        return len(self._labels) - len(self._by_id)

    def upsert(self, ids: Sequence[str], vectors: Matrix) -> None:
        if len(ids) == 0:
            return
        data = self._checked(ids, vectors)
        with self._lock:
            self._add(list(ids), data)

    def insert_absent(self, ids: Sequence[str], vectors: Matrix) -> list[str]:
        if len(ids) == 0:
            return []
        data = self._checked(ids, vectors)
        with self._lock:
            new = [n for n, memory_id in enumerate(ids) if memory_id not in self._by_id]
            added = [ids[n] for n in new]
            if added:
                self._add(added, data if len(new) == len(ids) else data[new])
            return added

    def _checked(self, ids: Sequence[str], vectors: Matrix) -> Matrix:
        data = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), -1)
        if data.shape[1] != self.dim:
            raise VectorIndexError(f"vectors have dimension {data.shape[1]}, the index {self.dim}")
        if len(set(ids)) != len(ids):
            raise ValueError("upsert got the same id twice")
        return data

    def _add(self, ids: list[str], data: Matrix) -> None:
        """Put ``ids`` in (replacing any vector they have); the caller holds ``_lock``."""
        try:
            self._forget(ids)
            start = len(self._labels)
            needed = start + len(ids)
            capacity = self._index.get_max_elements()
            if needed > capacity:
                self._index.resize_index(max(needed, capacity * 2))
            labels = np.arange(start, needed, dtype=np.int64)
            self._index.add_items(data, labels, num_threads=self._threads)
        except RuntimeError as exc:
            raise VectorIndexError(f"hnswlib refused the vectors: {exc}") from exc
        for offset, memory_id in enumerate(ids):
            self._labels.append(memory_id)
            self._named.append(memory_id)
            self._by_id[memory_id] = start + offset
        self._grow_live(needed)
        self._live[start:needed] = True

    def remove(self, ids: Iterable[str]) -> None:
        with self._lock:
            self._forget(ids)

    def _forget(self, ids: Iterable[str]) -> None:
        """Mark the vectors of ``ids`` deleted; the caller holds ``_lock``."""
        for memory_id in ids:
            label = self._by_id.pop(memory_id, None)
            if label is not None:
                self._index.mark_deleted(label)
                self._labels[label] = None
                self._live[label] = False

    def search(self, vector: Vector, k: int) -> list[tuple[str, float]]:
        handles, sims = self.search_handles(vector, k)
        names = self._named  # append-only: what the handles named when the search answered
        found = zip([names[handle] for handle in handles.tolist()], sims.tolist(), strict=True)
        return [(memory_id, sim) for memory_id, sim in found if memory_id is not None]

    def search_handles(self, vector: Vector, k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        query = np.ascontiguousarray(vector, dtype=np.float32).reshape(1, -1)
        with self._lock:
            k = min(k, len(self._by_id))
            if k <= 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float64)
            if k > self._ef:
                self._index.set_ef(k)
            try:
                labels, distances = self._index.knn_query(query, k=k, num_threads=1)
            except RuntimeError:
                # Deleted elements left fewer than k reachable results: look wider, then exactly.
                found = self._search_harder(query, k)
                handles = np.fromiter((self._by_id[memory_id] for memory_id, _ in found), np.int64, len(found))
                return handles, np.fromiter((sim for _, sim in found), np.float64, len(found))
            finally:
                if k > self._ef:
                    self._index.set_ef(self._ef)
            handles = labels[0].astype(np.int64)
            live = self._live[handles]  # as ``search``, which drops what ``_forget`` unnamed
            return handles[live], (1.0 - distances[0].astype(np.float64))[live]

    def ids_of(self, handles: npt.NDArray[np.int64]) -> list[str | None]:
        with self._lock:
            names, size = self._named, len(self._named)
            return [names[handle] if 0 <= handle < size else None for handle in handles.tolist()]

    def search_many(self, vectors: Matrix, k: int) -> list[list[tuple[str, float]]]:
        queries = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if len(queries) == 0:
            return []
        with self._lock:
            k = min(k, len(self._by_id))
            if k <= 0:
                return [[] for _ in range(len(queries))]
            if k > self._ef:
                self._index.set_ef(k)
            try:
                # Each row is searched alone, as by ``search``; the threads split the rows.
                labels, distances = self._index.knn_query(queries, k=k, num_threads=self._search_threads)
            except RuntimeError:
                labels = None
            finally:
                if k > self._ef:
                    self._index.set_ef(self._ef)
            if labels is not None:
                names = self._labels
                return [
                    [
                        (memory_id, 1.0 - dist)
                        for label, dist in zip(row_labels.tolist(), row_distances.tolist(), strict=True)
                        if (memory_id := names[label]) is not None
                    ]
                    for row_labels, row_distances in zip(labels, distances, strict=True)
                ]
        # Some row found fewer than k live results: each row alone, as ``search`` answers it.
        return [self.search(query, k) for query in queries]

    def handles(self, ids: Sequence[str]) -> npt.NDArray[np.int64]:
        with self._lock:
            return np.fromiter(map(self._by_id.get, ids, itertools.repeat(-1)), dtype=np.int64, count=len(ids))

    def live(self, handles: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        with self._lock:
            known = (handles >= 0) & (handles < len(self._labels))
            alive = self._live[: len(self._labels)]
            found: npt.NDArray[np.bool_] = known & alive[np.where(known, handles, 0)]
            return found

    def search_among(self, vector: Vector, k: int, handles: npt.NDArray[np.int64]) -> list[tuple[str, float]]:
        query = np.ascontiguousarray(vector, dtype=np.float32).reshape(1, -1)
        with self._lock:
            allowed = np.zeros(len(self._labels), np.bool_)
            known = handles[(handles >= 0) & (handles < len(self._labels))]
            allowed[known] = True
            allowed &= self._live[: len(self._labels)]
            k = min(k, int(allowed.sum()))
            if k <= 0:
                return []
            # hnswlib calls the filter for each element it would keep; a bytes object's own
            # __getitem__ answers without a Python frame (a lambda costs nearly twice the search).
            keep = allowed.tobytes().__getitem__
            if k > self._ef:
                self._index.set_ef(k)
            try:
                found, distances = self._index.knn_query(query, k=k, num_threads=1, filter=keep)
            except RuntimeError:
                # Fewer than k of them reachable past deleted or filtered-out elements.
                self.exact_searches += 1
                every = np.flatnonzero(allowed).tolist()
                return self._exact(query[0], k, [mid for label in every if (mid := self._labels[label]) is not None])
            finally:
                if k > self._ef:
                    self._index.set_ef(self._ef)
            names = self._labels
            pairs = zip(found[0].tolist(), (1.0 - distances[0].astype(np.float64)).tolist(), strict=True)
            return [(memory_id, sim) for label, sim in pairs if (memory_id := names[label]) is not None]

    def _grow_live(self, size: int) -> None:
        if size > len(self._live):
            live = np.zeros(max(size, 2 * len(self._live)), np.bool_)
            live[: len(self._live)] = self._live
            self._live = live

    def _search_harder(self, query: Matrix, k: int) -> list[tuple[str, float]]:
        """``search`` after hnswlib found fewer than ``k`` live results (lock held): once more
        with ``ef`` as wide as the whole index, then an exact scan of every live vector."""
        wide = max(k, len(self._labels))
        self.search_retries += 1
        self._index.set_ef(wide)
        try:
            labels, distances = self._index.knn_query(query, k=k, num_threads=1)
        except RuntimeError:
            pass
        else:
            found = [(self._labels[int(lb)], 1.0 - float(d)) for lb, d in zip(labels[0], distances[0], strict=True)]
            return [(memory_id, sim) for memory_id, sim in found if memory_id is not None]
        finally:
            self._index.set_ef(self._ef)
        self.exact_searches += 1
        return self._exact(query[0], k)

    def _exact(self, query: Vector, k: int, ids: list[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` live ids most similar to ``query``, by brute force, among ``ids``
        (present ones) when given (lock held)."""
        ids = list(self._by_id) if ids is None else ids
        stored = np.asarray(self._index.get_items([self._by_id[memory_id] for memory_id in ids]), dtype=np.float32)
        norms = np.linalg.norm(stored, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
        sims = stored @ query / np.maximum(norms, 1e-12)
        best = np.argsort(-sims, kind="stable")[:k]
        return [(ids[int(row)], float(sims[row])) for row in best]

    def sample(self, n: int) -> list[str]:
        """Up to ``n`` present ids spread evenly over the labels (for a start-up self-check)."""
        with self._lock:
            live = [memory_id for memory_id in self._labels if memory_id is not None]
        if len(live) <= n:
            return live
        step = len(live) / n
        return [live[int(i * step)] for i in range(n)]

    def similarities(self, vector: Vector, ids: Sequence[str]) -> list[tuple[str, float]]:
        query = np.asarray(vector, dtype=np.float32)
        query_norm = max(float(np.linalg.norm(query)), 1e-12)
        with self._lock:
            present = [(memory_id, self._by_id[memory_id]) for memory_id in ids if memory_id in self._by_id]
        found: list[tuple[str, float]] = []
        # In chunks: an exact scan over a large filtered set never holds all its vectors at once.
        for start in range(0, len(present), _SIMILARITY_CHUNK):
            with self._lock:
                # Still live under this label: a vector replaced since the list was taken is skipped.
                chunk = [
                    (mid, label)
                    for mid, label in present[start : start + _SIMILARITY_CHUNK]
                    if self._by_id.get(mid) == label
                ]
                if not chunk:
                    continue
                stored = np.asarray(self._index.get_items([label for _, label in chunk]), dtype=np.float32)
            sims = stored @ query / np.maximum(np.linalg.norm(stored, axis=1) * query_norm, 1e-12)
            found.extend((memory_id, float(sim)) for (memory_id, _), sim in zip(chunk, sims, strict=True))
        return found

    def paired_similarities(self, ids: Sequence[str], vectors: Matrix) -> npt.NDArray[np.float64]:
        given = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        found = np.full(len(ids), np.nan)
        with self._lock:
            at = [(n, label) for n, memory_id in enumerate(ids) if (label := self._by_id.get(memory_id)) is not None]
            if not at:
                return found
            stored = np.asarray(self._index.get_items([label for _, label in at]), dtype=np.float32)
        rows = np.asarray([n for n, _ in at], dtype=np.int64)
        mine = given[rows]
        norms = np.linalg.norm(stored, axis=1) * np.linalg.norm(mine, axis=1)
        found[rows] = np.einsum("ij,ij->i", stored, mine) / np.maximum(norms, 1e-12)
        return found

    # --- persistence -------------------------------------------------------------

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        with self._lock:
            try:
                self._index.save_index(str(directory / (_GRAPH + ".tmp")))
            except RuntimeError as exc:
                raise VectorIndexError(f"hnswlib could not save: {exc}") from exc
            labels = np.array([label or "" for label in self._labels], dtype=np.str_)
            with open(directory / (_LABELS + ".tmp"), "wb") as fh:
                np.save(fh, labels, allow_pickle=False)
            meta = {
                "format": _FORMAT,
                "dim": self.dim,
                "model": self.model,
                "applied_seq": self.applied_seq,
                "labels": len(self._labels),
                "live": len(self._by_id),
                "graph_bytes": (directory / (_GRAPH + ".tmp")).stat().st_size,
                "m": self._m,
                "ef_construction": self._ef_construction,
            }
        # Outside the lock: hashing a large graph takes a while, and searches need not wait.
        meta[CHECKSUM] = {name: checksum_of(directory / (name + ".tmp")) for name in (_GRAPH, _LABELS)}
        for name in (_GRAPH, _LABELS):
            _fsync(directory / (name + ".tmp"))
            os.replace(directory / (name + ".tmp"), directory / name)
        tmp_meta = directory / (_META + ".tmp")
        tmp_meta.write_text(json.dumps(meta), encoding="utf-8")
        _fsync(tmp_meta)
        os.replace(tmp_meta, directory / _META)

    @classmethod
    def load(
        cls,
        directory: Path,
        *,
        dim: int,
        model: str,
        ef_search: int = 128,
        threads: int = 1,
        search_threads: int = 1,
    ) -> HnswIndex | None:
        """The index saved in ``directory``, or None when it is absent, torn,
        or was built for another model or dimension (the caller rebuilds)."""
        try:
            meta = json.loads((directory / _META).read_text(encoding="utf-8"))
            if meta.get("format") != _FORMAT or meta["dim"] != dim or meta["model"] != model:
                log.info("saved index is of another format, model or dimension (%s): not loaded", meta.get("model"))
                return None
            if (size := (directory / _GRAPH).stat().st_size) != meta["graph_bytes"]:
                log.warning(
                    "saved index %s holds %s bytes, not %s: not loaded", directory / _GRAPH, size, meta["graph_bytes"]
                )
                return None
            for name in (_GRAPH, _LABELS):
                if not checksum_matches(directory / name, meta, name):
                    log.warning("saved index file %s does not match its checksum: not loaded", directory / name)
                    return None
            with open(directory / _LABELS, "rb") as fh, ARRAY_HEADERS:
                labels = np.load(fh, allow_pickle=False)
            if len(labels) != meta["labels"]:
                log.warning(
                    "saved index's labels in %s are %s, not %s: not loaded", directory, len(labels), meta["labels"]
                )
                return None
            native = hnswlib.Index(space="cosine", dim=dim)
            native.load_index(str(directory / _GRAPH), max_elements=max(len(labels), _MIN_CAPACITY))
            if native.get_current_count() != len(labels):
                log.warning("saved index in %s holds another count of vectors than its labels: not loaded", directory)
                return None
            index = cls(
                dim,
                model=model,
                m=int(meta["m"]),
                ef_construction=int(meta["ef_construction"]),
                ef_search=ef_search,
                threads=threads,
                search_threads=search_threads,
                _native=native,
            )
        except FileNotFoundError as exc:
            if any(
                (directory / name).exists() for name in (_META, _GRAPH, _LABELS)
            ):  # else none saved: built, not rebuilt
                log.warning("saved index in %s lacks a file (%s): not loaded", directory, exc.filename)
            return None
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            log.warning("saved index in %s cannot be read (%s): not loaded", directory, exc)
            return None
        # tolist() makes the strings in C: a comprehension over the array's own items
        # took 0.6 s at a million. A dead label is "".
        names: list[str] = labels.tolist()
        index._labels = [name or None for name in names]
        index._named = list(index._labels)
        index._by_id = dict(zip(names, range(len(names)), strict=True))
        index._by_id.pop("", None)
        index._grow_live(len(labels))
        index._live[: len(labels)] = labels != ""
        if len(index._by_id) != meta["live"]:
            return None
        index.applied_seq = int(meta["applied_seq"])
        return index


def _fsync(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())
