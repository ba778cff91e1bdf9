"""The fast network beside the vectors: compact columns, lexical index, entity postings, links.

Everything recall filters and ranks on, held in process so that a recall touches the
store once, for its final hits (DESIGN.md, "The dual network"). One row per memory:

* numpy columns for every hard filter and score input: namespace, status, category,
  source, visibility, actor, session, key (interned codes), created_at, expire_at,
  last_accessed_at (int64 microseconds since the epoch), base_score, importance,
  access_count. ``sees`` and ``passes`` turn a ``Scope`` and a ``MemoryFilter`` into
  vectorised masks with exactly the store's semantics (the SQLite adapter's WHERE
  clause; a property test compares the two on random data);
* a lexical index per namespace (``LexicalScorer``, BM25 from a library), fed with
  ``engine.text.terms`` of the content, so statistics never mix namespaces;
* entity postings (namespace, entity key) → rows, and the typed links
  (``SUPERSEDES``, ``CONTRADICTS``, ``NEXT``, …) of every memory;
* the metadata of memories that have any, for the rare metadata filter;
* what the read guard's rules found in each text (``findings``), saved with the
  fingerprint of those rules (``read_rules``) and dropped on load under other ones;
* what the claims of each text are about (``conflicts.slots_of``), so that a save's
  conflict rules read only the candidates that can clash (``may_conflict``); kept,
  like the findings, under the fingerprint of the rules (``claim_rules``);
* each memory's vector of the current model as float16 (half the bytes; cosines
  within ~1e-3 of float32), for the exact cosine of candidates that the lexical or
  graph channel brings and for the exact scan of a selective filter: hnswlib's
  ``get_items`` copies element by element and costs milliseconds per recall. Given a
  ``RoughCosines``, the scan picks what it keeps by those first and computes only
  those exactly (``nearest``);
* the sum of each large namespace's vectors, kept with every change (``centre``), so
  a recall reads how typical of its namespace each candidate is (``typicality``)
  without a pass over the namespace.

It is derived data: ``apply`` takes the records (and links) of changed memories as
the store holds them now, and ``IndexKeeper`` calls it from the store's change
sequence exactly as it updates the vector index. Reinforcement writes no change, so
the engine mirrors it here with ``reinforce`` (same formula as the store's rescore).

Rows are never reused: a purged memory's row goes dead until the next rebuild.
Every public method takes the network's lock; ``reading()`` holds it across a whole
recall, so a recall never sees a half-applied change.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import itertools
import json
import logging
import os
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine import conflicts, text
from engine.category_indexes import CategoryIndexes, IndexFactory
from engine.config import ScoringConfig
from engine.episodes import NEXT
from engine.files import ARRAY_HEADERS, CHECKSUM, checksum_matches, checksum_of, read_npz_array_into
from engine.limits import MAX_COUNTER
from engine.ports import Edge, LexicalBuild, LexicalScorer, RoughCosines, VectorIndex
from engine.records import (
    JsonScalar,
    Memory,
    MemoryFilter,
    Scope,
    Source,
    Status,
    Visibility,
    entity_keys,
    micros,
)
from engine.scoring import best_of

log = logging.getLogger(__name__)

Rows = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]

STATUSES: tuple[Status, ...] = tuple(Status)
SOURCES: tuple[Source, ...] = tuple(Source)
VISIBILITIES: tuple[Visibility, ...] = tuple(Visibility)
_STATUS = {s: n for n, s in enumerate(STATUSES)}
_SOURCE = {s: n for n, s in enumerate(SOURCES)}
_VISIBILITY = {v: n for n, v in enumerate(VISIBILITIES)}
_PRIVATE, _PUBLIC = _VISIBILITY[Visibility.PRIVATE], _VISIBILITY[Visibility.PUBLIC]
NONE = -1  # the code of an absent actor, session or key
NEVER = np.iinfo(np.int64).max  # expire_at of a memory that never expires
MICROS_PER_DAY = 86_400 * 1_000_000

_FILE = "fastnet.npz"
_META = "fastnet.meta.json"
_FORMAT = 2  # 2: digests are of the normalised content (records.content_digest)
_MIN_CAPACITY = 1024
# The exact scan scores this many passing rows at a time, masked MASK_CHUNK at a time
# (see ``FastNetwork.nearest``).
SCAN_CHUNK = 4096
MASK_CHUNK = 65536
# The exact scan ranks by rough cosines first only past this many passing rows: numpy
# widens and multiplies about 0.9 µs a row of 512, torch's product about 0.3
# (engine/adapters/half_cosines.py), but after a pause, as a recall's scan comes, torch
# adds about 1.4 ms (benchmarks/plan_costs.py: 3.1 ms for 1,000 rows, 4.4 for 4,000,
# against numpy's 2.0 and 4.5 back to back; numpy after a pause is not measured), so
# below this numpy alone is as fast.
ROUGH_MIN_ROWS = 4000
# ``passes`` over more rows than this, for a filter naming a category or a session, takes
# that mask first and the others over what it lets through.
NARROW_FIRST = 512
# The most (namespace, categories) row lists kept between changes (``_of_categories``).
CATEGORY_LISTS_KEPT = 256
# The most categories given their own HNSW index (engine/category_indexes.py) by default,
# and the share of the network's memories those indexes may hold together.
CATEGORY_INDEXES = 8
CATEGORY_INDEXES_ROOM = 0.25
# A namespace's lexicon up to this size is rebuilt before it answers (see _Lexicon).
SYNC_REBUILD_DOCS = 5000
# After a background rebuild, the next waits this many times as long as the last took:
# under a steady stream of writes, rebuilds of a large namespace take at most a fifth
# of a core instead of following one another back to back.
REBUILD_PAUSE_FACTOR = 4.0
_monotonic = time.monotonic  # the lexicons' clock (a test replaces it)
_NO_ROWS = np.zeros(0, np.int64)
# A namespace of at least this many memories keeps the sum of its vectors, brought up
# to date with every change (``centre``, at most 8 bytes a dimension per this many
# memories). A smaller one's is summed when a recall asks, and the sums of the
# CENTRES_SMALL_KEPT smaller ones asked last are kept the same way (a recall across many
# small namespaces would otherwise sum each of them, about 0.2 ms for 256 of 512
# dimensions): 16 MB at most with 512 dimensions.
CENTRE_KEPT_ROWS = 256
CENTRES_SMALL_KEPT = 4096
_NO_DIGEST = bytes(16)  # the digest of a row whose memory was purged


class Interner:
    """Strings to dense codes and back (namespaces, categories, people, keys, entities, terms)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names: list[str] = []
        self.codes: dict[str, int] = {}
        for name in names:
            self.code(name)

    def code(self, name: str) -> int:
        found = self.codes.get(name)
        if found is None:
            found = self.codes[name] = len(self.names)
            self.names.append(name)
        return found

    def find(self, name: str | None) -> int:
        """The code of ``name``, or ``NONE`` when absent (a name nothing holds matches nothing)."""
        return NONE if name is None else self.codes.get(name, NONE)

    def optional(self, name: str | None) -> int:
        return NONE if name is None else self.code(name)


_INT_COLUMNS = (
    "namespace",
    "category",
    "actor",
    "session",
    "key",
    "created",
    "expire",
    "accessed",
    "access_count",
    "claim_text",
)
_SMALL_COLUMNS = ("status", "source", "visibility", "live", "findings")
# Columns a network saved before they were kept may lack: restored as zeros (not known).
_LATER_COLUMNS = frozenset({"claim_text"})
_LATER_INTERNERS = frozenset({"slots"})
_FLOAT_COLUMNS = ("base", "importance")


class _Columns:
    """Growable parallel arrays, one row per memory."""

    def __init__(self, capacity: int = _MIN_CAPACITY) -> None:
        self.size = 0
        self.namespace = np.zeros(capacity, np.int32)
        self.category = np.zeros(capacity, np.int32)
        self.actor = np.zeros(capacity, np.int32)
        self.session = np.zeros(capacity, np.int32)
        self.key = np.zeros(capacity, np.int32)
        self.created = np.zeros(capacity, np.int64)
        self.expire = np.zeros(capacity, np.int64)
        self.accessed = np.zeros(capacity, np.int64)
        self.access_count = np.zeros(capacity, np.int64)
        self.status = np.zeros(capacity, np.int8)
        self.source = np.zeros(capacity, np.int8)
        self.visibility = np.zeros(capacity, np.int8)
        self.live = np.zeros(capacity, np.bool_)
        self.findings = np.zeros(capacity, np.int8)  # the read guard's, kept (engine.guard.READ_*)
        # ``_text_key`` of the exact text whose claim slots ``FastNetwork._row_slots`` holds for
        # the row; 0 where they are not known.
        self.claim_text = np.zeros(capacity, np.int64)
        self.base = np.zeros(capacity, np.float64)
        self.importance = np.zeros(capacity, np.float32)

    @property
    def names(self) -> tuple[str, ...]:
        return _INT_COLUMNS + _SMALL_COLUMNS + _FLOAT_COLUMNS

    def new_row(self) -> int:
        if self.size == len(self.live):
            for name in self.names:
                old = getattr(self, name)
                grown = np.zeros(len(old) * 2, old.dtype)
                grown[: len(old)] = old
                setattr(self, name, grown)
        self.size += 1
        return self.size - 1

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        return {name: getattr(self, name)[: self.size] for name in self.names}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, npt.NDArray[Any]], size: int) -> _Columns:
        columns = cls(max(_MIN_CAPACITY, size))
        for name in columns.names:
            if name in arrays or name not in _LATER_COLUMNS:
                getattr(columns, name)[:size] = arrays[name]
        columns.size = size
        return columns


@dataclass(frozen=True, slots=True)
class Link:
    """A typed link as the fast network holds it: rows, not ids."""

    src: int
    dst: int
    kind: str
    created: int


class _RowTuples(MutableMapping[int, tuple[int, ...]]):
    """Tuples of codes by row: a lexicon's terms, the memories' entity keys. Those
    restored from a saved network stay in its flat arrays until asked for (at a million
    memories, a tuple made for each took 1.4 s of the start and some 300 MB); what is
    set since lives in a dict beside them."""

    def __init__(
        self,
        rows: Rows | None = None,
        ends: npt.NDArray[np.int64] | None = None,
        values: npt.NDArray[np.int64] | None = None,
    ) -> None:
        # Ascending rows; the codes of rows[i] are values[ends[i - 1] : ends[i]], while
        # kept[i] (a row removed or set anew since is not).
        self._rows = _NO_ROWS if rows is None else rows
        self._ends = _NO_ROWS if ends is None else ends
        self._values = _NO_ROWS if values is None else values
        self._kept = np.ones(len(self._rows), np.bool_)
        self._dropped = 0
        self._new: dict[int, tuple[int, ...]] = {}

    @classmethod
    def of_flat(
        cls,
        rows: Rows,
        lengths: npt.NDArray[np.int64],
        values: npt.NDArray[np.int64],
        picked: Rows | None = None,
        starts: npt.NDArray[np.int64] | None = None,
    ) -> _RowTuples:
        """The rows ``rows[picked]`` (each once, any order; all when None), where the
        codes of ``rows[i]`` are the ``lengths[i]`` values after those of ``rows[:i]``
        (``starts``: where each begins, when the caller has them already)."""
        starts = np.cumsum(lengths) - lengths if starts is None else starts
        chosen = np.arange(len(rows)) if picked is None else picked
        order = chosen[np.argsort(rows[chosen], kind="stable")]
        taken = lengths[order]
        ends = np.cumsum(taken)
        total = int(ends[-1]) if len(ends) else 0
        gather = np.repeat(starts[order] - (ends - taken), taken) + np.arange(total)
        return cls(rows[order], ends, values[gather])

    def _at(self, row: int) -> int:
        """The index of ``row`` among the flat rows, where they still hold it; else -1."""
        at = int(np.searchsorted(self._rows, row))
        return at if at < len(self._rows) and self._rows[at] == row and self._kept[at] else -1

    def __getitem__(self, row: int) -> tuple[int, ...]:
        found = self._new.get(row)
        if found is not None:
            return found
        at = self._at(row)
        if at < 0:
            raise KeyError(row)
        start = int(self._ends[at - 1]) if at else 0
        codes: list[int] = self._values[start : int(self._ends[at])].tolist()
        return tuple(codes)

    def __contains__(self, row: object) -> bool:
        if not isinstance(row, int | np.integer):
            return False
        return int(row) in self._new or self._at(int(row)) >= 0

    def __setitem__(self, row: int, codes: tuple[int, ...]) -> None:
        self._drop_flat(row)
        self._new[row] = codes

    def __delitem__(self, row: int) -> None:
        if self._new.pop(row, None) is None and not self._drop_flat(row):
            raise KeyError(row)

    def _drop_flat(self, row: int) -> bool:
        at = self._at(row)
        if at < 0:
            return False
        self._kept[at] = False
        self._dropped += 1
        return True

    def __len__(self) -> int:
        return len(self._rows) - self._dropped + len(self._new)

    def __iter__(self) -> Iterator[int]:
        yield from self._flat_held().tolist()
        yield from list(self._new)

    def _flat_held(self) -> Rows:
        held: Rows = self._rows[self._kept] if self._dropped else self._rows
        return held

    def held(self) -> Rows:
        """Every row held, in no particular order."""
        if not self._new:
            return self._flat_held()
        return np.concatenate([self._flat_held(), np.fromiter(self._new, np.int64, len(self._new))])

    def rows(self) -> Rows:
        """Every row held, ascending."""
        return self._flat_held() if not self._new else np.sort(self.held())

    def flat(self) -> tuple[Rows, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Every row held (ascending), its count of codes, and the codes one row after another."""
        lengths = np.diff(self._ends, prepend=0)
        if not self._dropped and not self._new:
            return self._rows, lengths, self._values
        new = list(self._new.items())
        rows = np.concatenate([self._rows[self._kept], np.asarray([row for row, _ in new], np.int64)])
        counts = np.concatenate([lengths[self._kept], np.asarray([len(codes) for _, codes in new], np.int64)])
        values = np.concatenate(
            [self._values[np.repeat(self._kept, lengths)], np.asarray([c for _, codes in new for c in codes], np.int64)]
        )
        merged = _RowTuples.of_flat(rows, counts, values)
        return merged._rows, np.diff(merged._ends, prepend=0), merged._values

    def nbytes(self) -> int:
        """An estimate of the memory held."""
        flat = self._rows.nbytes + self._ends.nbytes + self._values.nbytes + self._kept.nbytes
        return flat + sum(8 * len(codes) + 120 for codes in self._new.values())


class _Postings:
    """Rows by (namespace, code): the entity postings. Those restored from a saved network
    stay in flat arrays sorted by the pair, and are searched; a pair changed since gets a
    set of its own. Spread over 1,000 namespaces, a set made for every pair took about
    6 s of a start at a million memories."""

    def __init__(self, pairs: Rows | None = None, rows: Rows | None = None) -> None:
        self._pairs = _NO_ROWS if pairs is None else pairs  # namespace << 32 | code, ascending
        self._rows = _NO_ROWS if rows is None else rows
        self._changed: dict[int, set[int]] = {}
        self._changed_in: dict[int, list[int]] = {}  # namespace -> its pairs in ``_changed``

    @classmethod
    def of(cls, namespaces: npt.NDArray[Any], codes: npt.NDArray[Any], rows: Rows) -> _Postings:
        """Each of ``rows`` filed under its namespace and code."""
        pairs = (namespaces.astype(np.int64) << 32) | codes.astype(np.int64)
        order = np.argsort(pairs, kind="stable")
        return cls(pairs[order], rows[order])

    def _flat(self, pair: int) -> list[int]:
        start = int(np.searchsorted(self._pairs, pair, side="left"))
        end = int(np.searchsorted(self._pairs, pair, side="right"))
        found: list[int] = self._rows[start:end].tolist()
        return found

    def get(self, namespace: int, code: int) -> Iterable[int]:
        pair = namespace << 32 | code
        held = self._changed.get(pair)
        return held if held is not None else self._flat(pair)

    def count(self, namespace: int, code: int) -> int:
        """How many rows ``get`` would give, without listing them."""
        pair = namespace << 32 | code
        held = self._changed.get(pair)
        if held is not None:
            return len(held)
        return int(np.searchsorted(self._pairs, pair, side="right") - np.searchsorted(self._pairs, pair, side="left"))

    def rivals(self, namespace: int, codes: frozenset[int], least: int) -> bool:
        """Whether a code of ``namespace`` other than ``codes`` has at least ``least`` rows.
        Reads every pair of the namespace (those changed since the restore too)."""
        low, high = namespace << 32, (namespace + 1) << 32
        for pair in self._changed_in.get(namespace, ()):
            if pair - low not in codes and len(self._changed[pair]) >= least:
                return True
        start = int(np.searchsorted(self._pairs, low, side="left"))
        end = int(np.searchsorted(self._pairs, high, side="left"))
        found, counts = np.unique(self._pairs[start:end], return_counts=True)
        return any(int(pair) - low not in codes and int(pair) not in self._changed for pair in found[counts >= least])

    def _own(self, namespace: int, code: int) -> set[int]:
        pair = namespace << 32 | code
        held = self._changed.get(pair)
        if held is None:
            held = self._changed[pair] = set(self._flat(pair))
            self._changed_in.setdefault(namespace, []).append(pair)
        return held

    def add(self, namespace: int, code: int, row: int) -> None:
        self._own(namespace, code).add(row)

    def discard(self, namespace: int, code: int, row: int) -> None:
        self._own(namespace, code).discard(row)


class _DigestRows:
    """Rows by content digest. Nearly every digest is one row's, so a row is kept as an
    int and only a digest held twice or more gets a list: at a million memories, making
    a list for each took 1.1 s of the start, the dict of ints 0.3 s."""

    def __init__(self) -> None:
        self._one: dict[bytes, int] = {}
        self._many: dict[bytes, list[int]] = {}

    @classmethod
    def of(cls, digests: Sequence[bytes], rows: list[int]) -> _DigestRows:
        """``rows`` filed under their ``digests[row]``, in the order given."""
        held = cls()
        keys = list(map(digests.__getitem__, rows))
        held._one = dict(zip(keys, rows, strict=True))
        if len(held._one) < len(keys):
            twice = {key for key, count in collections.Counter(keys).items() if count > 1}
            for key, row in zip(keys, rows, strict=True):
                if key in twice:
                    held._many.setdefault(key, []).append(row)
            for key in twice:
                del held._one[key]
        return held

    def get(self, digest: bytes) -> list[int]:
        many = self._many.get(digest)
        if many is not None:
            return list(many)
        row = self._one.get(digest)
        return [] if row is None else [row]

    def add(self, digest: bytes, row: int) -> None:
        if digest in self._many:
            self._many[digest].append(row)
        elif digest in self._one:
            self._many[digest] = [self._one.pop(digest), row]
        else:
            self._one[digest] = row

    def remove(self, digest: bytes, row: int) -> None:
        many = self._many.get(digest)
        if many is None:
            if self._one.get(digest) == row:
                del self._one[digest]
            return
        if row in many:
            many.remove(row)
        if len(many) == 1:
            self._one[digest] = many[0]
            del self._many[digest]


@dataclass(slots=True)
class _Sum:
    """The sum of some float16 vectors, in float64. Every float16 is a multiple of 2^-24,
    so for vectors of unit length (every part under 1) the sum is exact up to 2^29 of
    them: one kept up to date change by change equals one summed again. Vectors with a
    part that is not finite (an imported vector beyond float16's range) are left out of
    every sum (``_summable``), so one such vector cannot make its namespace's NaN."""

    total: npt.NDArray[np.float64]
    count: int


class _Lexicon:
    """One namespace's documents (term codes per row) and its BM25 scorer.

    Libraries made for BM25 index a fixed corpus, so a change means a new build. A
    namespace of up to ``SYNC_REBUILD_DOCS`` documents (or one whose changes are a
    tenth of it or more) is rebuilt before it answers. A larger one answers from its
    previous build, leaving out the documents written or edited since (they still
    compete through the other channels), while a background thread rebuilds it:
    a save never makes the next recall wait for a rebuild of the whole namespace.
    Background rebuilds are spaced (``REBUILD_PAUSE_FACTOR``), so a steady stream of
    writes costs a bounded share of a core, not one rebuild after another.

    A namespace that answers only when rebuilt can also be rebuilt ahead, once its
    writes pause (``FastNetwork``'s ``warm_after``): a recall that comes while that
    build is under way waits for it instead of building again, and one that comes
    after it finds the namespace built. Saving then recalling (an agent's turn) then
    no longer rebuilds the namespace in the recall, where the two are far enough apart.
    """

    def __init__(self, lock: threading.RLock, sync_docs: int) -> None:
        self._lock = lock
        self._sync_docs = sync_docs
        self.docs = _RowTuples()
        self.rows: Rows = np.zeros(0, np.int64)
        self.scorer: LexicalScorer | None = None
        self.version = 0  # counts changes
        self.built = -1  # the version the scorer was built at
        self.changed: dict[int, int] = {}  # row -> the version of its last change
        self._builder: threading.Thread | None = None
        self._pending: _Build | None = None  # the background build under way
        self._members: Rows | None = None
        self.next_build_at = 0.0  # no background rebuild starts before (``_monotonic``)

    def members(self) -> Rows:
        """The namespace's rows (every memory it holds), cached until one comes or goes."""
        if self._members is None:
            self._members = self.docs.held()
        return self._members

    def put(self, row: int, terms: tuple[int, ...]) -> None:
        if row not in self.docs:
            self._members = None
        if self.docs.get(row) != terms:
            self.docs[row] = terms
            self.version += 1
            self.changed[row] = self.version

    def drop(self, row: int) -> None:
        if self.docs.pop(row, None) is not None:
            self._members = None
            self.version += 1
            self.changed[row] = self.version

    def may_hold(self, code: int) -> bool:
        """Whether a document may hold the term ``code``: one of its build does, or one
        changed since; True where it has no build yet (its documents not looked into)."""
        if self.scorer is None or self.scorer.ceiling([code]) > 0:
            return True
        return any(code in (self.docs.get(row) or ()) for row in self.changed)

    def answers_built(self) -> bool:
        """Whether a query now would rebuild the lexicon before answering."""
        stale = len(self.changed)  # only rows changed since the build (``_swap`` drops the rest)
        return self.scorer is None or len(self.docs) <= self._sync_docs or stale * 10 >= len(self.docs)

    def refresh(self, build: LexicalBuild) -> None:
        """What a query does first: rebuild now where the lexicon answers only when built,
        else start a background rebuild where one is due."""
        if self.built < self.version:
            if self.answers_built():
                self._swap(*self._built_for_now(build))
            elif self.due():
                self.build_ahead(build)

    def answer(self, query: Sequence[int], top: int | None = None) -> tuple[Rows, Floats]:
        """The query's matches from the current build (``refresh`` first), without what
        changed since it; only the ``top`` best of them, in no order, where given."""
        if self.scorer is None or not query:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        stale = len(self.changed) if self.built < self.version else 0
        # The top best that did not change are among the top + stale best of the build.
        hit, scores = self.scorer.matches(query) if top is None else self.scorer.top(query, top + stale)
        if not len(hit):
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        rows, found = self.rows[hit], scores.astype(np.float64) / self.scorer.ceiling(query)
        if stale:  # leave out what changed since the build
            since = np.fromiter(self.changed, dtype=np.int64, count=stale)
            fresh = ~np.isin(rows, since)
            rows, found = rows[fresh], found[fresh]
        return (rows, found) if top is None else best_of(rows, found, top)

    def _built_for_now(self, build: LexicalBuild) -> tuple[Rows, LexicalScorer | None, int]:
        """A build of the current documents: the background one under way, waited for,
        where it is of this version; else one made here. The caller holds the lock,
        which a background build takes only after handing its result over."""
        pending = self._pending
        if pending is not None and pending.version == self.version:
            pending.done.wait()
            if pending.result is not None:
                return (*pending.result, pending.version)
        rows, lengths, codes = self.docs.flat()
        return rows, build(lengths, codes) if len(rows) else None, self.version

    def due(self) -> bool:
        """Whether a background build may start now: stale, none under way, not too soon."""
        idle = self._builder is None or not self._builder.is_alive()
        return self.built < self.version and idle and _monotonic() >= self.next_build_at

    def _swap(self, rows: Rows, scorer: LexicalScorer | None, version: int) -> None:
        self.rows, self.scorer, self.built = rows, scorer, version
        self.changed = {row: at for row, at in self.changed.items() if at > version}

    def _build_later(self, build: LexicalBuild) -> None:
        with self._lock:
            if self.built >= self.version:
                return  # a query built it between this build's start and now
            rows, lengths, codes = self.docs.flat()
            pending = self._pending = _Build(self.version)
        started = _monotonic()
        try:
            pending.result = rows, build(lengths, codes) if len(rows) else None
        finally:
            pending.done.set()  # before taking the lock, which a recall waiting for it holds
        finished = _monotonic()
        with self._lock:
            self.next_build_at = finished + REBUILD_PAUSE_FACTOR * (finished - started)
            if pending.version > self.built:
                rows_built, scorer = pending.result
                self._swap(rows_built, scorer, pending.version)
            if self._pending is pending:
                self._pending = None

    def build_ahead(self, build: LexicalBuild) -> None:
        """Start a background build (the caller holds the lock and found it ``due``); the
        queries meanwhile answer as ``answer`` says."""
        builder = threading.Thread(target=self._build_later, args=(build,), daemon=True)
        builder.start()
        self._builder = builder  # only once started: ``settle`` joins it without the lock

    def settle(self) -> None:
        """Wait for a background build to finish."""
        builder = self._builder
        if builder is not None:
            builder.join()


@dataclass(slots=True)
class _Build:
    """A background build of a lexicon: the version it builds, its result once done."""

    version: int
    done: threading.Event = field(default_factory=threading.Event)
    result: tuple[Rows, LexicalScorer | None] | None = None


class FastNetwork:
    """See the module docstring. ``applied_seq`` is the store change it reflects."""

    def __init__(
        self,
        lexical: LexicalBuild,
        *,
        model: str = "",
        dim: int = 0,
        sync_rebuild_docs: int = SYNC_REBUILD_DOCS,
        rough: RoughCosines | None = None,
        warm_after: float | None = None,
        read_rules: str = "",
        analysis: str = "",
        claim_rules: str = "",
        entity_keys: str = "",
        category_index: IndexFactory | None = None,
        category_indexes: int = CATEGORY_INDEXES,
    ) -> None:
        self._build = lexical
        self._rough = rough
        # The fingerprint of the text analysis that made its terms (``engine.text.analysis``).
        self.analysis = analysis
        # The fingerprint of what made its entity keys (``engine.entities.key_rules``).
        self.entity_keys = entity_keys
        # The fingerprint of the read rules whose findings the ``findings`` column keeps
        # (``engine.guard.read_rules``): saved with them, and checked on load.
        self.read_rules = read_rules
        # The same for the rules that read the claims ``claim_text``/``_row_slots`` keep
        # (``engine.conflicts.rules``).
        self.claim_rules = claim_rules
        # Seconds a namespace's writes must pause before its lexicon, where a query would
        # rebuild it first, is rebuilt ahead in the background (None: only when asked).
        self._warm_after = warm_after
        self._warm_due: dict[int, float] = {}  # namespace -> when its build ahead may start
        self._warmer: threading.Thread | None = None
        self._sync_docs = sync_rebuild_docs
        self._lock = threading.RLock()
        self._warm_wake = threading.Condition(self._lock)
        self.applied_seq = 0
        self.model = model  # whose vectors ``_vectors`` holds
        self.dim = dim
        self._vectors = np.zeros((_MIN_CAPACITY, dim), np.float16)
        self._has_vector = np.zeros(_MIN_CAPACITY, np.bool_)
        # The longest vector ever held (the embedders' are of unit length): a rough
        # cosine's error bound grows with it (``RoughCosines``).
        self._widest = 1.0
        # Per row, its vector's handle in the index named by ``_handle_space`` (-1: not
        # looked up yet), kept so a filtered search need not look every id up (``handles``).
        self._handles = np.full(_MIN_CAPACITY, NONE, np.int64)
        self._handle_space = ""
        # The other way: per handle of the index named by ``_handle_rows_space``, the row
        # of the memory it names (NONE: not looked up yet), so a search's answer becomes
        # rows without ids (``rows_of_handles``).
        self._handle_rows = np.full(_MIN_CAPACITY, NONE, np.int64)
        self._handle_rows_space = ""
        self._centres: dict[int, _Sum] = {}  # namespace -> its vectors' sum (CENTRE_KEPT_ROWS)
        # The small namespaces among those, least recently asked first (CENTRES_SMALL_KEPT).
        self._small_centres: collections.OrderedDict[int, None] = collections.OrderedDict()
        self._cols = _Columns()
        self.ids: list[str] = []
        self._row: dict[str, int] = {}
        # Per row, the first 16 bytes of its ``content_digest``: a changed text re-feeds the
        # lexicon, and ``same_text`` finds an exact repeat without the store.
        self._digests: list[bytes] = []
        self._by_digest = _DigestRows()
        self._key_rows: dict[tuple[int, int], set[int]] = {}  # (namespace, key) -> rows
        self._session_rows: dict[tuple[int, int], set[int]] = {}  # (namespace, session) -> rows
        # (namespace, category codes) -> the namespace's rows of those categories: made
        # when a scan or a "how" question asks, dropped at the next change (``_of_categories``).
        self._category_rows: dict[tuple[int, tuple[int, ...]], Rows] = {}
        self.namespaces = Interner()
        self.categories = Interner()
        self.people = Interner()  # actors and sessions
        self.keys = Interner()  # explicit record keys
        self.entities = Interner()  # entity keys
        self.terms = Interner()  # lexical terms
        self.slots = Interner()  # what claims are about (``conflicts.slots_of``)
        self._entity_rows = _Postings()
        self._row_entities = _RowTuples()
        self._row_slots = _RowTuples()  # rows whose text holds a claim -> its slots
        self._links: dict[int, list[Link]] = {}
        self._metadata: dict[int, Mapping[str, Any]] = {}
        self._lexicons: dict[int, _Lexicon] = {}
        # The last lexical answer, with what it was asked and each lexicon's state then
        # (``_lexical``): a "how" question's second ranking, and the prompt context's
        # second recall, ask the same again.
        self._last_lexical: tuple[Any, tuple[Rows, Floats]] | None = None
        # The categories' own HNSW indexes (engine/category_indexes.py), built when a recall asks.
        self._category_indexes = (
            CategoryIndexes(
                category_index,
                self._category_members,
                self._lock,
                kept=category_indexes,
                room=lambda: int(len(self) * CATEGORY_INDEXES_ROOM),
            )
            if category_index is not None and category_indexes > 0
            else None
        )

    # --- size and identity ---------------------------------------------------------

    def __len__(self) -> int:
        """Memories held (purged ones excluded)."""
        with self._lock:
            return int(np.count_nonzero(self._cols.live[: self._cols.size]))

    def count_deleted(self) -> int:
        """Memories held with status ``deleted`` (the vector index leaves them out)."""
        with self._lock:
            size = self._cols.size
            return int(np.count_nonzero(self._cols.live[:size] & (self._cols.status[:size] == _STATUS[Status.DELETED])))

    def count_unquarantined(self, *, actor: str | None = None, session_id: str | None = None) -> int:
        """Memories held, in every namespace, that ``actor`` wrote (or of the session
        ``session_id``) and that are neither deleted nor quarantined: what a block of that
        source leaves to its quarantine pass."""
        with self._lock:
            size, cols = self._cols.size, self._cols
            code = self.people.find(actor if actor is not None else session_id)
            if code == NONE:
                return 0
            column = cols.actor if actor is not None else cols.session
            status = cols.status[:size]
            left = cols.live[:size] & (column[:size] == code)
            left &= (status != _STATUS[Status.DELETED]) & (status != _STATUS[Status.QUARANTINED])
            return int(np.count_nonzero(left))

    def __contains__(self, memory_id: object) -> bool:
        with self._lock:
            row = self._row.get(memory_id) if isinstance(memory_id, str) else None
            return row is not None and bool(self._cols.live[row])

    def reading(self) -> contextlib.AbstractContextManager[Any]:
        """Hold the network still (no change applied) for the duration of a read."""
        return self._lock

    def row_of(self, memory_id: str) -> int | None:
        row = self._row.get(memory_id)
        return row if row is not None and self._cols.live[row] else None

    def namespace_of(self, memory_id: str) -> str | None:
        """The namespace of a memory the network holds (any status), or None."""
        with self._lock:
            row = self.row_of(memory_id)
            return None if row is None else self.namespaces.names[int(self._cols.namespace[row])]

    def rows_of(self, ids: Iterable[str]) -> Rows:
        """The live rows of those ``ids`` the network holds, in order (unknown ids skipped)."""
        found = np.asarray([self._row.get(memory_id, NONE) for memory_id in ids], dtype=np.int64)
        found = found[found >= 0]
        return found[self._cols.live[found]]

    def live_rows(self, ids: Sequence[str]) -> Rows:
        """The live row of each of ``ids``, in order; ``NONE`` where the network holds none."""
        found = np.fromiter(map(self._row.get, ids, itertools.repeat(NONE)), dtype=np.int64, count=len(ids))
        known = found >= 0
        known[known] = self._cols.live[found[known]]
        held: Rows = np.where(known, found, NONE)
        return held

    def id_of(self, row: int) -> str:
        return self.ids[row]

    def ids_of(self, rows: Rows) -> list[str]:
        """The memory id of each of ``rows``, in order."""
        return list(map(self.ids.__getitem__, rows.tolist()))

    # --- keeping current -----------------------------------------------------------

    def apply(self, memories: Sequence[Memory], gone: Iterable[str], links: Sequence[Edge]) -> None:
        """Hold ``memories`` as the store has them now, forget ``gone`` (purged) ids, and
        replace the links touching any of those memories with ``links`` (every link the
        store holds from or to them)."""
        with self._lock:
            touched: set[int] = set()
            for memory_id in gone:
                row = self._row.get(memory_id)
                if row is not None:
                    self._forget(row)
                    touched.add(row)
            for memory in memories:
                row = self._row.get(memory.memory_id)
                if row is not None:  # its category may change: the old one's index hears of it
                    self._touched_in_category(row)
                touched.add(self._hold(memory))
            if touched:
                self._category_rows.clear()
                for row in touched:
                    self._touched_in_category(row)
            if self._warm_after is not None and touched:
                self._warm_later({int(ns) for ns in self._cols.namespace[list(touched)].tolist()})
            for row in touched:
                for link in self._links.pop(row, []):
                    other = link.dst if link.src == row else link.src
                    if other != row and other in self._links:
                        self._links[other] = [x for x in self._links[other] if not (x.src == row or x.dst == row)]
            for edge in links:
                src, dst = self._row.get(edge.src), self._row.get(edge.dst)
                if src is None or dst is None:
                    continue
                link = Link(src, dst, edge.kind, micros(edge.created_at))
                for end in {src, dst}:
                    held = self._links.setdefault(end, [])
                    if link not in held:
                        held.append(link)

    def _hold(self, memory: Memory) -> int:
        cols = self._cols
        row = self._row.get(memory.memory_id)
        if row is None:
            row = cols.new_row()
            self._grow_vectors(cols.size)
            self._row[memory.memory_id] = row
            self.ids.append(memory.memory_id)
            self._digests.append(_NO_DIGEST)
            cols.key[row] = NONE
            cols.session[row] = NONE
        else:
            self._set_key(row, NONE)
            self._set_session(row, NONE)
        namespace = self.namespaces.code(memory.namespace)
        if int(cols.namespace[row]) != namespace:
            self._leave_namespace(row)  # a row held before, in another namespace (a new row holds nothing)
            cols.namespace[row] = namespace
            self._centre_in(row)
        cols.category[row] = self.categories.code(memory.category)
        cols.actor[row] = self.people.optional(memory.actor)
        self._set_session(row, self.people.optional(memory.session_id))
        self._set_key(row, self.keys.optional(memory.key))
        cols.created[row] = micros(memory.created_at)
        cols.expire[row] = NEVER if memory.expire_at is None else micros(memory.expire_at)
        cols.accessed[row] = micros(memory.last_accessed_at)
        cols.access_count[row] = memory.access_count
        cols.status[row] = _STATUS[memory.status]
        cols.source[row] = _SOURCE[memory.source]
        cols.visibility[row] = _VISIBILITY[memory.visibility]
        cols.live[row] = True
        cols.base[row] = memory.base_score
        cols.importance[row] = memory.importance
        if memory.metadata:
            self._metadata[row] = memory.metadata
        else:
            self._metadata.pop(row, None)
        self._set_entities(row, namespace, tuple(sorted(self.entities.code(k) for k in entity_keys(memory.entities))))
        digest = bytes.fromhex(memory.digest[:32])
        lexicon = self._lexicons.setdefault(namespace, _Lexicon(self._lock, self._sync_docs))
        if self._digests[row] != digest or row not in lexicon.docs:
            self._set_digest(row, digest)
            cols.findings[row] = 0
            lexicon.put(row, tuple(self.terms.code(term) for term in text.terms(memory.content)))
        # By the exact text, not the digest: the rules read case and line breaks, which the
        # digest folds ("marco: I live in Rome" is the user's, "Marco: …" Marco's).
        key = _text_key(memory.content)
        if cols.claim_text[row] != key:
            self._set_slots(row, conflicts.slots_of(memory.content), key)
        return row

    def _leave_namespace(self, row: int) -> None:
        """Take ``row`` out of what its namespace holds of it (its lexicon, entity
        postings and kept vector sum) before it moves to another; ``_hold`` files it there.
        Its key and session postings it has left already."""
        old = int(self._cols.namespace[row])
        self._uncentre(row)
        self._set_entities(row, old, ())
        lexicon = self._lexicons.get(old)
        if lexicon is not None:
            lexicon.drop(row)

    def _set_slots(self, row: int, slots: Iterable[str], key: int) -> None:
        codes = tuple(sorted(self.slots.code(slot) for slot in slots))
        if codes:
            self._row_slots[row] = codes
        else:
            self._row_slots.pop(row, None)
        self._cols.claim_text[row] = key

    def _set_digest(self, row: int, digest: bytes) -> None:
        old = self._digests[row]
        if old != _NO_DIGEST:
            self._by_digest.remove(old, row)
        self._digests[row] = digest
        if digest != _NO_DIGEST:
            self._by_digest.add(digest, row)

    def _set_key(self, row: int, key: int) -> None:
        """File ``row`` under ``key`` (``NONE``: under none) in its namespace's key postings."""
        self._repost(self._key_rows, self._cols.key, row, key)

    def _set_session(self, row: int, session: int) -> None:
        """File ``row`` under ``session`` (``NONE``: under none) in its namespace's session postings."""
        self._repost(self._session_rows, self._cols.session, row, session)

    def _repost(
        self, postings: dict[tuple[int, int], set[int]], column: npt.NDArray[np.int32], row: int, code: int
    ) -> None:
        """Move ``row`` from the (namespace, old code) postings to (namespace, ``code``),
        and set ``column`` (whose value at ``row`` is the old code) to ``code``."""
        old, namespace = int(column[row]), int(self._cols.namespace[row])
        if old != NONE:
            held = postings.get((namespace, old))
            if held is not None:
                held.discard(row)
                if not held:
                    del postings[(namespace, old)]
        column[row] = code
        if code != NONE:
            postings.setdefault((namespace, code), set()).add(row)

    def _grow_vectors(self, size: int) -> None:
        if size > len(self._has_vector):
            capacity = max(size, 2 * len(self._has_vector))
            vectors = np.zeros((capacity, self.dim), np.float16)
            vectors[: len(self._vectors)] = self._vectors
            has = np.zeros(capacity, np.bool_)
            has[: len(self._has_vector)] = self._has_vector
            handles = np.full(capacity, NONE, np.int64)
            handles[: len(self._handles)] = self._handles
            self._vectors, self._has_vector, self._handles = vectors, has, handles

    def put_vectors(self, ids: Sequence[str], vectors: npt.NDArray[np.float32]) -> None:
        """Hold the current model's vectors of these memories (unknown ids are skipped)."""
        with self._lock:
            if len(vectors) and vectors.shape[1:] == (self.dim,):
                self._widest = max(self._widest, float(np.linalg.norm(vectors, axis=1).max()))
            for memory_id, vector in zip(ids, vectors, strict=True):
                row = self._row.get(memory_id)
                if row is not None and len(vector) == self.dim:
                    self._uncentre(row)
                    with np.errstate(over="ignore"):  # a part past float16's range is held as inf (``_Sum``)
                        self._vectors[row] = vector
                    self._has_vector[row] = True
                    self._centre_in(row)
                    self._touched_in_category(row)

    def cosines(
        self, vector: npt.NDArray[np.float32], rows: Rows, product: Callable[..., npt.NDArray[np.float32]] | None = None
    ) -> Floats:
        """The cosine of ``vector`` (unit length) to each row's vector; 0 where a row has none.
        ``product``: ``np.matmul`` to rank a scan's chunk by the matrix product (about twice
        as fast as row by row at 4,096 rows), whose last bits may depend on where a row
        sits; by default every row alike (``_row_dots``)."""
        found = (product or _row_dots)(self._widened(rows), np.asarray(vector, np.float32))
        cosines: Floats = np.where(self._has_vector[rows], found, 0.0).astype(np.float64)
        return cosines

    def cosine_matrix(self, rows: Rows, vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """The cosine of each of ``vectors`` (unit length, one a row) to each row's vector,
        rows by vectors, by one matrix product (the last bits may depend on where a row
        sits: for a threshold with a margin, not for a ranking); 0 where a row has none."""
        found: npt.NDArray[np.float32] = self._widened(rows) @ np.asarray(vectors, np.float32).T
        found[~self._has_vector[rows]] = 0.0
        return found

    def centre(self, namespace: str) -> tuple[npt.NDArray[np.float32], float] | None:
        """The mean of the vectors that the memories of ``namespace`` hold (every status
        but purged), and its squared length: where a typical memory there points
        (``typicality``). None where none holds a vector."""
        with self._lock:
            return self._centre(self.namespaces.find(namespace))

    def _centre(self, namespace: int) -> tuple[npt.NDArray[np.float32], float] | None:
        lexicon = self._lexicons.get(namespace)
        if lexicon is None:
            return None
        kept = self._centres.get(namespace)
        if kept is None:
            members = lexicon.members()
            kept = self._centres[namespace] = self._summed(members[self._has_vector[members]])
            if len(members) < CENTRE_KEPT_ROWS:
                self._small_centres[namespace] = None
                if len(self._small_centres) > CENTRES_SMALL_KEPT:
                    oldest, _ = self._small_centres.popitem(last=False)
                    del self._centres[oldest]
        elif namespace in self._small_centres:
            self._small_centres.move_to_end(namespace)
        if kept.count == 0:
            return None
        mean = kept.total / kept.count
        return mean.astype(np.float32), float(mean @ mean)

    def typicality(self, rows: Rows) -> Floats:
        """How much more each row's vector leans toward the centre of its own namespace
        (``centre``) than that namespace's average memory does: v·μ − μ·μ; 0 where a
        row has no vector. Near-template text (greetings, chatter that every query
        resembles a little) reads high, a memory about something particular low; what
        other namespaces hold changes nothing."""
        typical = np.zeros(len(rows), np.float64)
        with self._lock:
            namespaces = self._cols.namespace[rows]
            for namespace in np.unique(namespaces).tolist():
                centre = self._centre(namespace)
                if centre is None:
                    continue
                mean, square = centre
                at = np.flatnonzero(namespaces == namespace)
                here = rows[at]
                leaning = _row_dots(self._widened(here), mean).astype(np.float64)
                known = self._has_vector[here] & np.isfinite(leaning)
                typical[at] = np.where(known, leaning - square, 0.0)
        return typical

    def _summed(self, rows: Rows) -> _Sum:
        total = np.zeros(self.dim, np.float64)
        count = 0
        for start in range(0, len(rows), MASK_CHUNK):
            part = self._vectors[rows[start : start + MASK_CHUNK]]
            part = part[np.isfinite(part).all(axis=1)]
            total += part.sum(axis=0, dtype=np.float64)
            count += len(part)
        return _Sum(total, count)

    def _summable(self, row: int) -> bool:
        return bool(self._has_vector[row]) and bool(np.isfinite(self._vectors[row]).all())

    def _uncentre(self, row: int) -> None:
        """Take ``row``'s vector out of its namespace's kept sum (where it has both)."""
        kept = self._centres.get(int(self._cols.namespace[row]))
        if kept is not None and self._summable(row):
            kept.total -= self._vectors[row]
            kept.count -= 1

    def _centre_in(self, row: int) -> None:
        """Add ``row``'s vector to its namespace's kept sum (where it has both)."""
        kept = self._centres.get(int(self._cols.namespace[row]))
        if kept is not None and self._summable(row):
            kept.total += self._vectors[row]
            kept.count += 1

    def _widened(self, rows: Rows) -> npt.NDArray[np.float32]:
        """The vectors of ``rows`` as float32 (exactly their float16 values): through the
        rough cosines' library where it is loaded (``RoughCosines.widen``, torch's
        vectorised conversion, about 7× numpy's, which widens one value at a time)."""
        rough = self._rough
        if rough is not None and rough.ready():
            return rough.widen(self._vectors, rows)
        return self._vectors[rows].astype(np.float32)

    @property
    def scans_rough(self) -> bool:
        """Whether the exact scan ranks by rough cosines first (``nearest``), now."""
        return self._rough is not None and self._rough.ready()

    def has_vectors(self, rows: Rows) -> Mask:
        return self._has_vector[rows]

    def handles(self, index: VectorIndex, rows: Rows) -> Rows:
        """Each row's vector handle in ``index`` (``VectorIndex.handles``; -1 where it
        holds none). Kept from one call to the next: only rows never asked, or whose
        handle died (a replaced or removed vector), are looked up in the index, and all
        of them when the index is another than last time."""
        with self._lock:
            if self._handle_space != index.handle_space:
                self._handles[:] = NONE
                self._handle_space = index.handle_space
            found = self._handles[rows]
            stale = ~index.live(found)
            if stale.any():
                again = rows[stale]
                found[stale] = self._handles[again] = index.handles(self.ids_of(again))
            return found

    def rows_of_handles(self, index: VectorIndex, handles: Rows) -> Rows:
        """The live row of the memory each of ``index``'s handles names
        (``VectorIndex.search_handles``), NONE where the network holds none. A handle
        names one memory for the life of its index, and a memory keeps its row, so each
        handle is looked up once (``VectorIndex.ids_of``) and kept; whether the row is
        live is asked every time."""
        with self._lock:
            if self._handle_rows_space != index.handle_space:
                self._handle_rows = np.full(_MIN_CAPACITY, NONE, np.int64)  # sized anew for that index's handles
                self._handle_rows_space = index.handle_space
            needed = int(handles.max(initial=NONE)) + 1
            if needed > len(self._handle_rows):
                grown = np.full(max(needed, 2 * len(self._handle_rows)), NONE, np.int64)
                grown[: len(self._handle_rows)] = self._handle_rows
                self._handle_rows = grown
            known = handles >= 0
            rows = np.full(len(handles), NONE, np.int64)
            rows[known] = self._handle_rows[handles[known]]
            unknown = np.flatnonzero(known & (rows == NONE))
            if len(unknown):
                ids = index.ids_of(handles[unknown])
                found = np.fromiter((NONE if mid is None else self._row.get(mid, NONE) for mid in ids), np.int64)
                rows[unknown] = found
                held = found >= 0  # a memory the network does not hold yet is asked again next time
                self._handle_rows[handles[unknown][held]] = found[held]
            live = rows >= 0
            live[live] = self._cols.live[rows[live]]
            out: Rows = np.where(live, rows, NONE)
            return out

    def category_index(self, category: str) -> VectorIndex | None:
        """The HNSW index of ``category``'s memories alone (every namespace's), in step
        with the network; None where it has none (yet). The caller holds ``reading()``."""
        if self._category_indexes is None:
            return None
        return self._category_indexes.get(category)

    def ask_category_index(self, category: str) -> None:
        """Have ``category``'s own index built in the background (``engine.category_indexes``)."""
        if self._category_indexes is not None:
            with self._lock:
                self._category_indexes.ask(category)

    def category_indexes_held(self) -> dict[str, int]:
        """The categories with their own index, and the memories each holds."""
        if self._category_indexes is None:
            return {}
        with self._lock:
            return self._category_indexes.holds()

    def _touched_in_category(self, row: int) -> None:
        if self._category_indexes is not None:
            self._category_indexes.touched(self.categories.names[int(self._cols.category[row])], (self.ids[row],))

    def _category_members(
        self, category: str, ids: Sequence[str] | None, *, vectors: bool = True
    ) -> tuple[list[str], npt.NDArray[np.float16]]:
        """The memories of ``category`` that hold a vector and are not deleted (all of
        them, or those among ``ids``), and, unless ``vectors`` is False, a copy of their
        vectors."""
        cols, size, code = self._cols, self._cols.size, self.categories.find(category)
        if ids is None:
            rows = np.arange(size, dtype=np.int64)
        else:
            rows = np.fromiter((self._row.get(mid, NONE) for mid in ids), dtype=np.int64, count=len(ids))
            rows = rows[rows >= 0]
        keep = (
            cols.live[rows]
            & self._has_vector[rows]
            & (cols.category[rows] == code)
            & (cols.status[rows] != _STATUS[Status.DELETED])
        )
        rows = rows[keep]
        return self.ids_of(rows), self._vectors[rows if vectors else rows[:0]]

    def _set_entities(self, row: int, namespace: int, keys: tuple[int, ...]) -> None:
        old = self._row_entities.get(row, ())
        if old == keys:
            return
        for key in old:
            self._entity_rows.discard(namespace, key, row)
        for key in keys:
            self._entity_rows.add(namespace, key, row)
        self._row_entities[row] = keys

    def _forget(self, row: int) -> None:
        cols = self._cols
        namespace = int(cols.namespace[row])
        cols.live[row] = False
        self._set_key(row, NONE)
        self._set_session(row, NONE)
        self._set_digest(row, _NO_DIGEST)
        self._uncentre(row)
        self._has_vector[row] = False
        self._set_entities(row, namespace, ())
        self._row_entities.pop(row, None)
        self._row_slots.pop(row, None)
        cols.claim_text[row] = 0
        self._metadata.pop(row, None)
        lexicon = self._lexicons.get(namespace)
        if lexicon is not None:
            lexicon.drop(row)

    def reinforce(self, events: Iterable[tuple[str, float, datetime]], scoring: ScoringConfig) -> None:
        """Mirror ``Store.reinforce`` (which writes no change): for each (id, bonus, at),
        base = min(1, decayed base at ``at`` + bonus), one more access, last access
        = max(last, at) — the store's rescore (``scoring.reinforced_base``)."""
        with self._lock:
            cols = self._cols
            for memory_id, bonus, at in events:
                row = self.row_of(memory_id)
                if row is None:
                    continue
                when = micros(at)
                half_life = scoring.half_life(self.categories.names[cols.category[row]])
                elapsed = max(0.0, (when - int(cols.accessed[row])) / MICROS_PER_DAY)
                decayed = float(cols.base[row]) * 0.5 ** (elapsed / half_life)
                cols.base[row] = min(1.0, decayed + bonus)
                cols.access_count[row] = min(int(cols.access_count[row]) + 1, MAX_COUNTER)
                cols.accessed[row] = max(int(cols.accessed[row]), when)

    # --- masks ---------------------------------------------------------------------

    def all_rows(self) -> Rows:
        return np.flatnonzero(self._cols.live[: self._cols.size]).astype(np.int64)

    def rows_in(self, namespaces: Iterable[str], categories: Sequence[str] = ()) -> Rows:
        """Every row of these namespaces (any status), without walking the others, or
        only their rows of one of ``categories`` where it names any (read-only: one
        namespace's rows are a cached array, not a copy)."""
        with self._lock:
            found = self._members(namespaces, categories)
        if len(found) == 1:
            return found[0]
        return np.concatenate(found) if found else np.zeros(0, np.int64)

    def holds_category(self, namespaces: Iterable[str], category: str) -> bool:
        """Whether any memory of ``namespaces`` (any status but purged) is of ``category``."""
        code = self.categories.find(category)
        if code == NONE:
            return False
        with self._lock:
            return any(bool(np.any(self._cols.live[rows])) for rows in self._members(namespaces, (category,)))

    def _members(self, namespaces: Iterable[str], categories: Sequence[str] = ()) -> list[Rows]:
        """Each namespace's rows (every memory it holds), or only its rows of one of
        ``categories`` where it names any."""
        found = []
        for name in dict.fromkeys(namespaces):
            code = self.namespaces.find(name)
            lexicon = self._lexicons.get(code)
            if lexicon is not None:
                found.append(
                    self._of_categories(code, lexicon.members(), categories) if categories else lexicon.members()
                )
        return found

    def _of_categories(self, namespace: int, members: Rows, categories: Sequence[str]) -> Rows:
        """The rows of ``members`` (one namespace's) of one of ``categories``, kept until
        the network next changes: over a large namespace the one comparison a row costs
        more than scanning what it lets through (at 100,000 memories, masking them for one
        category took 1.4 ms of a 3.5 ms scan). At most ``CATEGORY_LISTS_KEPT`` lists are
        kept, and no more rows in all than the network has (8 bytes a memory); the
        oldest made go first."""
        codes = tuple(sorted({self.categories.find(name) for name in categories} - {NONE}))
        key = (namespace, codes)
        rows = self._category_rows.get(key)
        if rows is None:
            rows = members[_codes_in(self._cols.category[members], codes, len(self.categories.names))]
            kept = self._category_rows
            room = max(self._cols.size, len(rows)) - len(rows)
            while kept and (len(kept) >= CATEGORY_LISTS_KEPT or sum(map(len, kept.values())) > room):
                del kept[next(iter(kept))]
            kept[key] = rows
        return rows

    def nearest(
        self, vector: npt.NDArray[np.float32], scope: Scope, flt: MemoryFilter, now: datetime, k: int
    ) -> tuple[Rows, Floats]:
        """The exact scan: the ``k`` rows of ``scope``'s namespaces that ``scope`` sees and
        ``flt`` passes at ``now`` with the highest cosine to ``vector`` (unit length), and
        their cosines, in no particular order. It walks the passing rows ``SCAN_CHUNK`` at a
        time and keeps only the best ``k`` so far, so what it holds is the passing rows'
        numbers, one chunk's vectors and one ``MASK_CHUNK``'s masks, however many
        memories the namespaces hold or the filter lets through.

        With a ``RoughCosines`` and at least ``ROUGH_MIN_ROWS`` passing, the rows are
        ranked by its cosines, and every row whose
        rough cosine is within twice its error of the ``k``-th best is kept: none of the
        exact best ``k`` can fall below that. The kept rows' cosines are then computed
        exactly, so the answer is the one the exact product alone gives (ties aside)."""
        best_rows, best = np.zeros(0, np.int64), np.zeros(0, np.float64)
        if k <= 0:
            return best_rows, best
        with self._lock:
            passing = self._passing(scope, flt, now)
            rough = self._rough if self.scans_rough and len(passing) >= ROUGH_MIN_ROWS else None
            margin = 2 * rough.error * self._widest if rough is not None else 0.0
            for start in range(0, len(passing), SCAN_CHUNK):
                chunk = passing[start : start + SCAN_CHUNK]
                rows = np.concatenate((best_rows, chunk))
                found: Floats = (
                    self.cosines(vector, chunk, np.matmul)
                    if rough is None
                    else rough(self._vectors, chunk, vector).astype(np.float64)
                )
                cosines: Floats = np.concatenate((best, found))
                if len(rows) > k:
                    top = np.argpartition(-cosines, k - 1)[:k]
                    if rough is None:
                        rows, cosines = rows[top], cosines[top]
                    else:
                        near = cosines >= cosines[top].min() - margin
                        rows, cosines = rows[near], cosines[near]
                best_rows, best = rows, cosines
            if len(best_rows):  # what the scan returns read row by row, as ``cosines`` reads it
                best = self.cosines(vector, best_rows)
                if len(best_rows) > k:
                    top = np.argpartition(-best, k - 1)[:k]
                    best_rows, best = best_rows[top], best[top]
        return best_rows, best

    def _passing(self, scope: Scope, flt: MemoryFilter, now: datetime) -> Rows:
        """The rows with a vector of ``scope``'s namespaces that pass (8 bytes each),
        masked ``MASK_CHUNK`` at a time (a mask costs a few bytes a row, and each
        ``passes`` call some fixed work: masking per scan chunk cost about 2 ms of a
        category's scan at 100,000)."""
        parts = [np.zeros(0, np.int64)]
        for members in self._members(scope.namespaces, flt.categories):
            for start in range(0, len(members), MASK_CHUNK):
                part = members[start : start + MASK_CHUNK]
                parts.append(part[self.passes(scope, flt, now, part) & self._has_vector[part]])
        return np.concatenate(parts)

    def sees(self, scope: Scope, rows: Rows) -> Mask:
        """Which of ``rows`` ``scope`` sees (any status): the store's scope rule."""
        cols = self._cols
        namespace = cols.namespace[rows]
        agent = self.people.find(scope.agent)
        mine = cols.actor[rows] == agent if agent != NONE else np.zeros(len(rows), np.bool_)
        visibility = cols.visibility[rows]
        seen = _among(namespace, self.namespaces, scope.full)
        if scope.member:
            seen |= _among(namespace, self.namespaces, scope.member) & ((visibility != _PRIVATE) | mine)
        if scope.public:
            seen |= _among(namespace, self.namespaces, scope.public) & (visibility == _PUBLIC)
        if scope.own:
            seen |= _among(namespace, self.namespaces, scope.own) & mine
        live: Mask = seen & cols.live[rows]
        return live

    def passes(self, scope: Scope, flt: MemoryFilter, now: datetime, rows: Rows) -> Mask:
        """Which of ``rows`` ``scope`` sees and ``flt`` lets through at ``now``: the store's
        ``get_many`` rule, metadata included."""
        if len(rows) > NARROW_FIRST and (flt.categories or flt.session_id is not None):
            # A category or a session lets few rows through for one comparison: the other
            # masks (sight alone takes several) run only over those.
            picked = np.flatnonzero(self._named(flt, rows))
            ok = np.zeros(len(rows), np.bool_)
            ok[picked] = self.passes(scope, replace(flt, categories=(), session_id=None), now, rows[picked])
            return ok
        cols = self._cols
        ok = self.sees(scope, rows)
        if flt.statuses:
            ok &= _codes_in(cols.status[rows], [_STATUS[s] for s in flt.statuses], len(STATUSES))
        if flt.categories or flt.session_id is not None:
            ok &= self._named(flt, rows)
        if flt.sources:
            ok &= _codes_in(cols.source[rows], [_SOURCE[s] for s in flt.sources], len(SOURCES))
        if flt.created_after is not None:
            ok &= cols.created[rows] >= micros(flt.created_after)
        if flt.created_before is not None:
            ok &= cols.created[rows] < micros(flt.created_before)
        if not flt.include_expired:
            ok &= cols.expire[rows] > micros(now)
        if flt.metadata:
            for n in np.flatnonzero(ok):
                held = self._metadata.get(int(rows[n]), {})
                ok[n] = all(metadata_matches(held, key, value) for key, value in flt.metadata.items())
        return ok

    def _named(self, flt: MemoryFilter, rows: Rows) -> Mask:
        """Which of ``rows`` are of a category and in the session ``flt`` names (any, where
        it names none)."""
        cols = self._cols
        ok = np.ones(len(rows), np.bool_)
        if flt.categories:
            ok &= _among(cols.category[rows], self.categories, flt.categories)
        if flt.session_id is not None:
            session = self.people.find(flt.session_id)
            ok &= (cols.session[rows] == session) if session != NONE else False
        return ok

    # --- score inputs ----------------------------------------------------------------

    def created_of(self, rows: Rows) -> Rows:
        """Each row's created_at, microseconds since the epoch."""
        created: Rows = self._cols.created[rows]
        return created

    def decayed(self, rows: Rows, now: datetime, scoring: ScoringConfig) -> Floats:
        """``scoring.current_score`` of each row, vectorised."""
        cols = self._cols
        half_lives = np.asarray([scoring.half_life(name) for name in self.categories.names], dtype=np.float64)
        elapsed = np.maximum(0.0, (micros(now) - cols.accessed[rows]) / MICROS_PER_DAY)
        base = cols.base[rows] * 0.5 ** (elapsed / half_lives[cols.category[rows]])
        bonus = np.minimum(scoring.access_bonus_cap, scoring.access_bonus_step * cols.access_count[rows])
        decayed: Floats = np.minimum(1.0, base + bonus)
        return decayed

    def lexical(
        self, namespaces: Iterable[str], query_terms: Sequence[str], top: int | None = None
    ) -> tuple[Rows, Floats]:
        """Rows whose content shares a term with the query and their BM25 score, each
        scored within its own namespace's statistics and given as a share of the query's
        ceiling there (``LexicalScorer.ceiling``), in 0..1 (any status; filter with
        ``passes``). With ``top``, only the ``top`` best-scored of them (fewer than
        ``top`` rows: every match), in no order."""
        with self._lock:  # a lexicon may be rebuilt here
            return self._lexical(namespaces, query_terms, top)

    def _lexical(self, namespaces: Iterable[str], query_terms: Sequence[str], top: int | None) -> tuple[Rows, Floats]:
        codes = list(dict.fromkeys(self.terms.codes[t] for t in query_terms if t in self.terms.codes))
        if not codes:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        lexicons = [
            lexicon for name in namespaces if (lexicon := self._lexicons.get(self.namespaces.find(name))) is not None
        ]
        for lexicon in lexicons:
            lexicon.refresh(self._build)  # also when the answer is kept: a due rebuild starts
        asked = (_asked(lexicons, codes), top)  # ``answer`` changes none of it
        last = self._last_lexical
        if last is not None and last[0] == asked:
            return last[1]  # nothing either answer depends on has changed since
        rows: list[Rows] = []
        scores: list[Floats] = []
        for lexicon in lexicons:
            found, score = lexicon.answer(codes, top)
            rows.append(found)
            scores.append(score)
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        answer = np.concatenate(rows), np.concatenate(scores)
        if top is not None:  # each namespace's best, and the best of those
            answer = best_of(*answer, top)
        for array in answer:
            array.flags.writeable = False  # handed out again
        self._last_lexical = asked, answer
        return answer

    def settle(self) -> None:
        """Wait until no lexicon or category index is being built in the background
        (tests, shutdown); one due to be built ahead (``warm_after``), or asked for
        later, may still start later."""
        for lexicon in list(self._lexicons.values()):
            lexicon.settle()
        if self._category_indexes is not None:
            self._category_indexes.settle()

    def stop_warming(self) -> None:
        """Build nothing more ahead (closing): what is due is dropped, the thread ends; a
        lexicon build under way finishes (``settle`` waits for it), a category index's
        stops at its next chunk."""
        with self._lock:
            self._warm_after = None
            self._warm_due.clear()
            self._warm_wake.notify()
            if self._category_indexes is not None:
                self._category_indexes.stop()

    def _warm_later(self, namespaces: set[int]) -> None:
        """Build these namespaces' lexicons ahead once their writes pause (the caller holds
        the lock); one thread does it for the whole network, and ends when idle."""
        assert self._warm_after is not None
        due = _monotonic() + self._warm_after
        for namespace in namespaces:
            self._warm_due[namespace] = due
        if self._warmer is None or not self._warmer.is_alive():
            self._warmer = threading.Thread(target=self._warm, name="lexicon-warmer", daemon=True)
            self._warmer.start()
        self._warm_wake.notify()

    def _warm(self) -> None:
        with self._lock:
            pause = self._warm_after
            if pause is None:
                return  # stopped before this thread ran
            while self._warm_due:
                now = _monotonic()
                ready = [namespace for namespace, at in self._warm_due.items() if at <= now]
                if not ready:
                    self._warm_wake.wait(min(self._warm_due.values()) - now)
                    continue
                for namespace in ready:
                    del self._warm_due[namespace]
                    lexicon = self._lexicons.get(namespace)
                    # Only where a query would build first; a large namespace answers from
                    # its last build and rebuilds in the background when asked.
                    if lexicon is None or lexicon.built >= lexicon.version or not lexicon.answers_built():
                        continue
                    if lexicon.due():
                        lexicon.build_ahead(self._build)
                    else:  # a build under way, or the last one too recent: look again then
                        self._warm_due[namespace] = max(lexicon.next_build_at, now + pause)

    def may_mention(self, namespaces: Iterable[str], term: str) -> bool:
        """Whether a memory of these namespaces may hold the search term ``term``
        (``engine.text.terms``; any status): False only where none does."""
        with self._lock:
            code = self.terms.codes.get(term)
            if code is None:
                return False
            for name in namespaces:
                lexicon = self._lexicons.get(self.namespaces.find(name))
                if lexicon is not None and lexicon.may_hold(code):
                    return True
            return False

    def by_entity(self, namespaces: Iterable[str], key: str) -> Rows:
        """Rows that mention an entity with this key, in these namespaces (any order;
        ``newest`` orders them as ``memories_by_entity`` does)."""
        code = self.entities.find(key)
        if code == NONE:
            return np.zeros(0, np.int64)
        found: list[int] = []
        for name in namespaces:
            found += self._entity_rows.get(self.namespaces.find(name), code)
        return np.asarray(found, dtype=np.int64)

    def count_by_entity(self, namespace: str, key: str) -> int:
        """How many rows ``by_entity([namespace], key)`` gives (of every status), without them."""
        code = self.entities.find(key)
        if code == NONE:
            return 0
        return self._entity_rows.count(self.namespaces.find(namespace), code)

    def names_beside(self, namespaces: Iterable[str], keys: Iterable[str]) -> bool:
        """Whether, in one of these namespaces, at least a tenth of the memories mention an
        entity of ``keys`` (one name's forms: "anna", "anna's"; any status), and another
        entity is mentioned by at least half as many: a namespace that names several people
        about as often, not one person's own, nor one that names the person once or twice
        beside many lines of their own. Reads every entity posting of the namespace."""
        with self._lock:
            codes = frozenset(code for code in map(self.entities.find, keys) if code != NONE)
            size, cols = self._cols.size, self._cols
            for name in namespaces:
                namespace = self.namespaces.find(name)
                held = sum(self._entity_rows.count(namespace, code) for code in codes)
                if not held:
                    continue
                rows = int(np.count_nonzero(cols.live[:size] & (cols.namespace[:size] == namespace)))
                if held * 10 >= rows and self._entity_rows.rivals(namespace, codes, (held + 1) // 2):
                    return True
            return False

    def same_text(self, namespace: str, digest: str) -> Rows:
        """Live rows of ``namespace`` whose ``content_digest`` is ``digest`` (any status),
        oldest first, ties by memory id (the order of ``Store.find_by_digest``)."""
        held = self._by_digest.get(bytes.fromhex(digest[:32]))
        code = self.namespaces.find(namespace)
        rows = [row for row in held if self._cols.namespace[row] == code and self._cols.live[row]]
        rows.sort(key=lambda row: (int(self._cols.created[row]), self.ids[row]))
        return np.asarray(rows, dtype=np.int64)

    def by_key(self, namespace: str, key: str) -> Rows:
        """Live rows of ``namespace`` that carry this explicit ``key`` (any status)."""
        found = self._key_rows.get((self.namespaces.find(namespace), self.keys.find(key)), ())
        return np.asarray(sorted(found), dtype=np.int64)

    def findings(self, row: int, digest: str) -> int:
        """The read guard's findings kept for ``row``, if of the content with this
        ``content_digest``; 0 when none are (``keep_findings``)."""
        with self._lock:
            if self._digests[row] != bytes.fromhex(digest[:32]):
                return 0
            return int(self._cols.findings[row])

    def keep_findings(self, row: int, digest: str, findings: int) -> None:
        """Keep the read guard's ``findings`` for ``row``, unless its content changed
        since they were made from the content with this ``digest``."""
        with self._lock:
            if self._digests[row] == bytes.fromhex(digest[:32]):
                self._cols.findings[row] = findings

    def may_conflict(self, rows: Rows, slots: frozenset[str]) -> Mask:
        """Which of ``rows`` may hold a claim about one of ``slots`` (``conflicts.slots_of``):
        those whose slots meet them, and those whose slots are not known yet."""
        codes = {self.slots.find(slot) for slot in slots}
        meets = [not codes.isdisjoint(self._row_slots.get(row, ())) for row in rows.tolist()]
        return self.slots_unknown(rows) | np.asarray(meets, dtype=np.bool_)

    def slots_unknown(self, rows: Rows) -> Mask:
        """Which of ``rows`` have slots not known yet (``keep_slots`` files them)."""
        found: Mask = self._cols.claim_text[rows] == 0
        return found

    def keep_slots(self, row: int, memory: Memory, slots: frozenset[str]) -> None:
        """Keep the claim ``slots`` read in ``memory`` (as the store holds it) for its row,
        where they are not known yet and the row holds that content still."""
        with self._lock:
            cols = self._cols
            if cols.live[row] and cols.claim_text[row] == 0 and self._digests[row] == bytes.fromhex(memory.digest[:32]):
                self._set_slots(row, slots, _text_key(memory.content))

    def keyed(self, rows: Rows, key: str | None) -> Mask:
        """Which of ``rows`` carry this explicit ``key`` (none when ``key`` is None)."""
        code = self.keys.find(key)
        if code == NONE:
            return np.zeros(len(rows), np.bool_)
        found: Mask = self._cols.key[rows] == code
        return found

    def peers(self, memory: Memory, writer: Scope | None, rows: Rows) -> Mask:
        """Which of ``rows`` a save of ``memory`` may deduplicate into, supersede or
        contradict (``service._peers`` on columns): active, of the same audience
        (``records.same_audience``), and seen by the writer (``None``: the engine)."""
        cols = self._cols
        ok: Mask = cols.live[rows] & (cols.status[rows] == _STATUS[Status.ACTIVE])
        ok &= cols.namespace[rows] == self.namespaces.find(memory.namespace)
        ok &= cols.visibility[rows] == _VISIBILITY[memory.visibility]
        if memory.visibility is Visibility.PRIVATE:
            actor = self.people.find(memory.actor)  # NONE for a writer nothing holds yet
            if memory.actor is not None and actor == NONE:
                ok &= False
            else:
                ok &= cols.actor[rows] == actor
        if writer is not None:
            ok &= self.sees(writer, rows)
        return ok

    def last_written(self, memory: Memory) -> str | None:
        """The id of the newest memory of ``memory``'s namespace by its writer (the same
        actor and session, none for either where it has none), created no later than it
        and not deleted: what its writer said last before it (``writing.SaveJudge.stay_said``).
        None where there is none."""
        with self._lock:
            rows = self.rows_in([memory.namespace])
            if not len(rows):
                return None
            cols = self._cols
            actor = self.people.find(memory.actor) if memory.actor is not None else NONE
            session = self.people.find(memory.session_id) if memory.session_id is not None else NONE
            if (memory.actor is not None and actor == NONE) or (memory.session_id is not None and session == NONE):
                return None
            ok: Mask = cols.live[rows] & (cols.status[rows] != _STATUS[Status.DELETED])
            ok &= (cols.actor[rows] == actor) & (cols.session[rows] == session)
            ok &= cols.created[rows] <= micros(memory.created_at)
            found = self.newest(rows[ok], 1)
            return self.ids[int(found[0])] if len(found) else None

    def newest(self, rows: Rows, limit: int) -> Rows:
        """The ``limit`` newest of ``rows`` by ``created_at``, newest first, ties by memory
        id descending (the order of ``Store.memories_by_entity``)."""
        created = self._cols.created[rows]
        if len(rows) > limit:
            cut = np.partition(created, len(rows) - limit)[len(rows) - limit]
            newest = created >= cut  # the newest ``limit``, and any tied with the last of them
            rows, created = rows[newest], created[newest]
        order = np.argsort(-created, kind="stable")
        rows, created = rows[order], created[order]
        if len(rows) > 1 and bool(np.any(created[1:] == created[:-1])):  # ties: by id, looked up only then
            ordered = sorted(rows.tolist(), key=lambda row: (int(self._cols.created[row]), self.ids[row]), reverse=True)
            rows = np.asarray(ordered, dtype=np.int64)
        return rows[:limit]

    def holds_chinese(self) -> bool:
        """Whether a memory it holds, or held, has a Chinese search term."""
        with self._lock:
            names = list(self.terms.names)
        return any(text.is_chinese(name) for name in names)

    def entity_keys_of(self, row: int) -> frozenset[str]:
        return frozenset(self.entities.names[code] for code in self._row_entities.get(row, ()))

    def links(self, row: int, kind: str | None = None) -> list[Link]:
        return [link for link in self._links.get(row, ()) if kind is None or link.kind == kind]

    def session_ids(self, namespace: str, session_id: str) -> list[str]:
        """The ids of every memory held of this (namespace, session), whatever its status."""
        with self._lock:
            ns, session = self.namespaces.find(namespace), self.people.find(session_id)
            rows = self._session_rows.get((ns, session)) if NONE not in (ns, session) else None
            return [self.ids[row] for row in sorted(rows or ())]

    def session_place(self, namespace: str, session_id: str, at: datetime) -> tuple[str | None, str | None]:
        """Where new memories of this (namespace, session), none created after ``at``, go in
        its chain (``engine.episodes``): the memory they follow and the one that follows
        them. Where the session holds memories created after ``at`` (a later part of it
        promoted first: an expired window promoted at a restart after the next one was
        closed) and no older one links ``NEXT`` into them, they go before the oldest
        start of their chain, after the end of the older ones' chain; otherwise after the session's tail
        followed by none: a link the store holds is never undone. The tail: of the
        session's memories that are not deleted, the newest (by created_at, then row) among
        those with no ``NEXT`` to another of them, the end of the chain; the newest of all
        where every one has (a cycle only a hand-made edge can make). (None, None) when the
        session holds no such memory."""
        with self._lock:
            held = self._session_held(namespace, session_id)
            if not held:
                return None, None
            when = micros(at)
            created = self._cols.created
            later = {row for row in held if int(created[row]) > when}
            if later:
                earlier = held - later
                # Where an older memory links into the later ones, the new ones belong in the
                # middle of the chain, which only undoing a link could make room for.
                into = {
                    link.dst
                    for row in held
                    for link in self._links.get(row, ())
                    if link.kind == NEXT and link.src == row and link.dst != row and link.dst in held
                }
                heads = [row for row in later if row not in into]
                crossing = any(
                    link.kind == NEXT and link.src == row and link.dst in later
                    for row in earlier
                    for link in self._links.get(row, ())
                )
                if heads and not crossing and (not earlier or self._ends(earlier)):
                    # The heads are found by the links, not by row (a fast network rebuilt
                    # from the store may number rows otherwise); among several heads (a
                    # chain broken by deleted memories), the oldest, then the lowest row.
                    first = min(heads, key=lambda row: (int(created[row]), row))
                    before = self.ids[self._chain_end(earlier)] if earlier else None
                    return before, self.ids[first]
            return self.ids[self._chain_end(held)], None

    def _session_held(self, namespace: str, session_id: str) -> set[int]:
        """The rows of the session's memories that are not deleted (under the lock)."""
        ns, session = self.namespaces.find(namespace), self.people.find(session_id)
        rows = self._session_rows.get((ns, session)) if NONE not in (ns, session) else None
        deleted = _STATUS[Status.DELETED]
        return {row for row in rows or () if self._cols.status[row] != deleted}

    def _ends(self, held: set[int]) -> list[int]:
        """Those of ``held`` with no ``NEXT`` to another of them."""
        return [
            row
            for row in held
            if not any(
                link.kind == NEXT and link.src == row and link.dst != row and link.dst in held
                for link in self._links.get(row, ())
            )
        ]

    def _chain_end(self, held: set[int]) -> int:
        """The newest end of ``held``'s chain, or the newest of ``held`` where none ends."""
        return max(self._ends(held) or held, key=lambda row: (int(self._cols.created[row]), row))

    def any_linked(self, rows: Rows) -> bool:
        """Whether one of ``rows`` has a link of any kind (a dict look-up a row)."""
        links = self._links
        return any(row in links for row in rows.tolist())

    def neighbours(self, rows: Rows, kind: str) -> tuple[Rows, Rows]:
        """Pairs (row of ``rows``, a row linked to it by ``kind`` in either direction), live
        ends only: what the context channel walks (one hop along ``NEXT``)."""
        found: list[tuple[int, int]] = []
        live = self._cols.live
        for row in rows.tolist():
            for link in self._links.get(row, ()):
                other = link.dst if link.src == row else link.src
                if link.kind == kind and other != row and live[other]:
                    found.append((row, other))
        if not found:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        pairs = np.asarray(found, dtype=np.int64)
        return pairs[:, 0], pairs[:, 1]

    # --- persistence -----------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write the network beside the vector index: one ``.npz`` (no pickle), then a
        meta file naming its size and checksum, written last, so a torn save is
        detected on load and never served. The vectors are written from the network's
        own arrays after its lock is let go (a copy would double their memory), so the
        caller keeps changes out until it returns: ``IndexKeeper.save`` holds the lock
        every change to the network takes, and the kept vector sums saved beside them
        match them so."""
        directory.mkdir(parents=True, exist_ok=True)
        with self._lock:
            arrays = {f"col_{name}": array for name, array in self._cols.arrays().items()}
            entity_rows, entity_lengths, entity_values = self._row_entities.flat()
            slot_rows, slot_lengths, slot_values = self._row_slots.flat()
            links = [link for row in sorted(self._links) for link in self._links[row] if link.src == row]
            docs = [lexicon.docs.flat() for _, lexicon in sorted(self._lexicons.items())] or [(_NO_ROWS,) * 3]
            # The large namespaces' kept sums (a small one's is summed again when asked).
            centres = sorted((ns, kept) for ns, kept in self._centres.items() if ns not in self._small_centres)
            arrays |= {
                "vectors": self._vectors[: self._cols.size],
                "has_vector": self._has_vector[: self._cols.size],
                "widest": np.asarray([self._widest], dtype=np.float64),
                "ids": np.asarray(self.ids, dtype=np.str_),
                "digests": np.frombuffer(b"".join(self._digests), dtype=np.uint8),
                "entity_rows": entity_rows,
                "entity_lengths": entity_lengths,
                "entity_values": entity_values,
                "slot_rows": slot_rows,
                "slot_lengths": slot_lengths,
                "slot_values": slot_values,
                "link_src": np.asarray([x.src for x in links], dtype=np.int64),
                "link_dst": np.asarray([x.dst for x in links], dtype=np.int64),
                "link_created": np.asarray([x.created for x in links], dtype=np.int64),
                "link_kind": np.asarray([x.kind for x in links], dtype=np.str_),
                # A namespace's documents after another's (restored a namespace at a time).
                "doc_rows": np.concatenate([rows for rows, _, _ in docs]),
                "doc_lengths": np.concatenate([lengths for _, lengths, _ in docs]),
                "doc_values": np.concatenate([values for _, _, values in docs]),
                # The kept sums of the namespaces' vectors (``centre``), so a start need not sum them again.
                "centre_namespaces": np.asarray([namespace for namespace, _ in centres], dtype=np.int64),
                "centre_totals": np.asarray([kept.total for _, kept in centres] or np.zeros((0, self.dim)), np.float64),
                "centre_counts": np.asarray([kept.count for _, kept in centres], dtype=np.int64),
            }
            for name, interner in self._interners().items():
                arrays[f"names_{name}"] = np.asarray(interner.names, dtype=np.str_)
            for namespace, lexicon in self._lexicons.items():
                if lexicon.scorer is not None and lexicon.built == lexicon.version:
                    # A current build is kept, so a restart need not build it again.
                    arrays[f"lexicon_{namespace}_rows"] = lexicon.rows
                    for part, array in lexicon.scorer.state().items():
                        arrays[f"lexicon_{namespace}_{part}"] = array
            metadata = json.dumps({str(row): dict(meta) for row, meta in self._metadata.items()}, ensure_ascii=False)
            arrays["metadata"] = np.frombuffer(metadata.encode("utf-8"), dtype=np.uint8)
            seq, model, dim, rules, analysis = self.applied_seq, self.model, self.dim, self.read_rules, self.analysis
            claim_rules, entity_keys = self.claim_rules, self.entity_keys
        tmp = directory / (_FILE + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, allow_pickle=False, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / _FILE)
        meta = {
            "format": _FORMAT,
            "applied_seq": seq,
            "model": model,
            "dim": dim,
            "read_rules": rules,
            "claim_rules": claim_rules,
            "analysis": analysis,
            "entity_keys": entity_keys,
            "bytes": (directory / _FILE).stat().st_size,
            CHECKSUM: checksum_of(directory / _FILE),
        }
        tmp_meta = directory / (_META + ".tmp")
        with open(tmp_meta, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(meta))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_meta, directory / _META)

    @classmethod
    def load(
        cls,
        directory: Path,
        lexical: LexicalBuild,
        *,
        model: str,
        dim: int,
        rough: RoughCosines | None = None,
        warm_after: float | None = None,
        read_rules: str = "",
        analysis: str = "",
        claim_rules: str = "",
        entity_keys: str = "",
        category_index: IndexFactory | None = None,
        category_indexes: int = CATEGORY_INDEXES,
    ) -> FastNetwork | None:
        """The network saved in ``directory``, or None when it is absent, torn, of
        another format, holds another model's vectors, or terms another text analysis made
        (another ``analysis``, or none named: the caller rebuilds it), or entity keys other
        rules made (another ``entity_keys``, or none named). The
        read guard's findings it kept are dropped where other rules made them (another
        ``read_rules``, or none named): recall looks for them again, by the rules of now.
        So are the claim slots it kept under other ``claim_rules``: read again as the
        conflict rules meet them (``keep_slots``)."""
        try:
            meta = json.loads((directory / _META).read_text(encoding="utf-8"))
            path = directory / _FILE
            if meta.get("format") != _FORMAT:
                log.info("saved fast network is of another format: rebuilding it")
                return None
            if (size := path.stat().st_size) != meta["bytes"]:
                log.warning("saved fast network %s holds %s bytes, not %s: rebuilding it", path, size, meta["bytes"])
                return None
            if meta["model"] != model or meta["dim"] != dim:
                log.info("saved fast network holds vectors of %s, not %s: rebuilding it", meta["model"], model)
                return None
            if meta.get("analysis") != analysis:
                log.warning("saved fast network holds the terms of another text analysis: rebuilding it")
                return None
            if meta.get("entity_keys") != entity_keys:
                log.warning("saved fast network holds entity keys made by other rules: rebuilding it")
                return None
            if not checksum_matches(path, meta):
                log.warning("saved fast network %s does not match its checksum: rebuilding it", path)
                return None
            with ARRAY_HEADERS, np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files if name != "vectors"}
            net = cls(
                lexical,
                model=model,
                dim=dim,
                rough=rough,
                warm_after=warm_after,
                read_rules=read_rules,
                analysis=analysis,
                claim_rules=claim_rules,
                entity_keys=entity_keys,
                category_index=category_index,
                category_indexes=category_indexes,
            )
            net._restore(arrays, lambda out: read_npz_array_into(path, "vectors", out))
            net.applied_seq = int(meta["applied_seq"])
            if meta.get("read_rules") != read_rules:
                net._cols.findings[:] = 0
            if meta.get("claim_rules") != claim_rules:
                net._cols.claim_text[:] = 0
                net._row_slots = _RowTuples()
            return net
        except FileNotFoundError as exc:
            if any((directory / name).exists() for name in (_META, _FILE)):  # else none saved: built, not rebuilt
                log.warning("saved fast network in %s lacks a file (%s): rebuilding it", directory, exc.filename)
            return None
        except (OSError, ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile) as exc:
            log.warning("saved fast network in %s cannot be read (%s): rebuilding it", directory, exc)
            return None

    def _restore(
        self, arrays: Mapping[str, npt.NDArray[Any]], read_vectors: Callable[[npt.NDArray[np.float16]], None]
    ) -> None:
        """Adopt the saved arrays; ``read_vectors`` fills the rows' vectors in place.
        Postings are rebuilt a group at a time (numpy sorts, then one dict or set per
        group), not row by row: start-up at a million memories is bounded by reading the
        file, not by Python loops over rows."""
        net = self
        net.ids = arrays["ids"].tolist()
        size = len(net.ids)
        cols = {name[4:]: array for name, array in arrays.items() if name.startswith("col_")}
        net._cols = _Columns.from_arrays(cols, size)
        # Room for a quarter more, so the first saves after a start do not copy every
        # vector into a larger array (pages not yet written take no memory).
        net._grow_vectors(max(size + size // 4, _MIN_CAPACITY))
        read_vectors(net._vectors[:size])
        net._has_vector[:size] = arrays["has_vector"]
        if "widest" in arrays:
            net._widest = max(1.0, float(arrays["widest"][0]))
        else:  # saved before it was kept
            for start in range(0, size, SCAN_CHUNK):
                part = net._vectors[start : start + SCAN_CHUNK].astype(np.float32)
                net._widest = max(net._widest, float(np.linalg.norm(part, axis=1).max(initial=0.0)))
        net._row = dict(zip(net.ids, range(size), strict=True))
        digests = arrays["digests"].tobytes()
        if len(digests) != 16 * size:
            raise ValueError("digests do not match the rows")
        net._digests = [digests[at : at + 16] for at in range(0, 16 * size, 16)]
        live = net._cols.live[:size]
        held = live & arrays["digests"].reshape(size, 16).any(axis=1)
        net._by_digest = _DigestRows.of(net._digests, np.flatnonzero(held).tolist())
        keyed = np.flatnonzero(live & (net._cols.key[:size] != NONE))
        for (namespace, key), rows in _groups(net._cols.namespace[keyed], net._cols.key[keyed], keyed):
            net._key_rows[(namespace, key)] = set(rows)
        in_session = np.flatnonzero(live & (net._cols.session[:size] != NONE))
        for (namespace, session), rows in _groups(
            net._cols.namespace[in_session], net._cols.session[in_session], in_session
        ):
            net._session_rows[(namespace, session)] = set(rows)
        for name, interner in net._interners().items():
            if f"names_{name}" in arrays or name not in _LATER_INTERNERS:
                for value in arrays[f"names_{name}"].tolist():
                    interner.code(value)
        entity_rows = arrays["entity_rows"]
        entity_lengths = arrays["entity_lengths"]
        net._row_entities = _RowTuples.of_flat(
            entity_rows, entity_lengths, arrays["entity_values"], picked=np.flatnonzero(entity_lengths)
        )
        if "slot_rows" in arrays:  # else saved before they were kept: none known (``claim_text`` 0)
            net._row_slots = _RowTuples.of_flat(arrays["slot_rows"], arrays["slot_lengths"], arrays["slot_values"])
        mentions = np.repeat(entity_rows, entity_lengths)
        net._entity_rows = _Postings.of(net._cols.namespace[mentions], arrays["entity_values"], mentions)
        for src, dst, kind, created in zip(
            arrays["link_src"].tolist(),
            arrays["link_dst"].tolist(),
            arrays["link_kind"].tolist(),
            arrays["link_created"].tolist(),
            strict=True,
        ):
            link = Link(src, dst, kind, created)
            for end in {link.src, link.dst}:
                net._links.setdefault(end, []).append(link)
        doc_rows, doc_lengths, doc_values = arrays["doc_rows"], arrays["doc_lengths"], arrays["doc_values"]
        doc_starts = np.cumsum(doc_lengths) - doc_lengths
        spaces = net._cols.namespace[doc_rows]
        order = np.argsort(spaces, kind="stable")
        bounds = np.flatnonzero(np.diff(spaces[order])) + 1
        for group in np.split(order, bounds) if len(order) else []:
            lexicon = _Lexicon(net._lock, net._sync_docs)
            lexicon.docs = _RowTuples.of_flat(doc_rows, doc_lengths, doc_values, picked=group, starts=doc_starts)
            lexicon.version = 1  # built = -1: built when first asked, unless its saved build is adopted
            net._lexicons[int(spaces[group[0]])] = lexicon
        net._metadata = {int(row): meta for row, meta in json.loads(arrays["metadata"].tobytes()).items()}
        if "centre_namespaces" in arrays:  # else saved before they were kept: summed when first asked
            for namespace, total, count in zip(
                arrays["centre_namespaces"].tolist(),
                arrays["centre_totals"],
                arrays["centre_counts"].tolist(),
                strict=True,
            ):
                net._centres[namespace] = _Sum(np.array(total, np.float64), count)
        for namespace, lexicon in net._lexicons.items():
            net._restore_lexicon(lexicon, f"lexicon_{namespace}_", arrays)

    def _restore_lexicon(self, lexicon: _Lexicon, prefix: str, arrays: Mapping[str, npt.NDArray[Any]]) -> None:
        """Adopt the saved build of a lexicon when it is of exactly the documents restored;
        otherwise leave it to be built when first asked."""
        rows = arrays.get(prefix + "rows")
        if rows is None or not np.array_equal(rows, lexicon.docs.rows()):
            return
        state = {name[len(prefix) :]: array for name, array in arrays.items() if name.startswith(prefix)}
        try:
            scorer = self._build.restore(state)
        except (ValueError, KeyError, IndexError):
            return
        lexicon.rows, lexicon.scorer, lexicon.built, lexicon.changed = rows, scorer, lexicon.version, {}

    def _interners(self) -> dict[str, Interner]:
        return {
            "namespaces": self.namespaces,
            "categories": self.categories,
            "people": self.people,
            "keys": self.keys,
            "entities": self.entities,
            "terms": self.terms,
            "slots": self.slots,
        }

    def nbytes(self) -> int:
        """An estimate of the memory held, vectors excluded (for the benchmark's report)."""
        with self._lock:
            columns = sum(array.nbytes for array in self._cols.arrays().values())
            docs = sum(lex.docs.nbytes() for lex in self._lexicons.values()) + self._row_entities.nbytes()
            docs += self._row_slots.nbytes()
            vectors = self._vectors.nbytes + self._has_vector.nbytes
            handles = self._handles.nbytes + self._handle_rows.nbytes
            centres = sum(kept.total.nbytes for kept in self._centres.values())
            return columns + docs + vectors + handles + centres + 200 * len(self.ids)


def _row_dots(matrix: npt.NDArray[np.float32], vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Each row of ``matrix`` times ``vector``, every row summed alike. The matrix
    product sums a row in an order that depends on where it sits (OpenBLAS: the rows of
    a block and those left over differ in the last bits), so two memories with one
    vector could read different cosines, and replicas holding them in other orders
    ranked near-ties differently. ``vecdot`` takes one dot product a row: about 1.5×
    the matrix product's time, 35 against 23 µs for 600 rows of 512."""
    return np.vecdot(matrix, vector)  # type: ignore[no-any-return]


def _text_key(content: str) -> int:
    """A nonzero 64-bit key of exactly this text (``_Columns.claim_text``)."""
    key = int.from_bytes(hashlib.blake2b(content.encode("utf-8"), digest_size=8).digest(), "little", signed=True)
    return key or 1


def _asked(lexicons: Sequence[_Lexicon], codes: Sequence[int]) -> tuple[Any, ...]:
    """What a lexical answer depends on: the query's term codes and each lexicon asked,
    with the version of its documents and of its build (a lexicon answers from its build,
    leaving out what changed since, so equal states give equal answers)."""
    return tuple(codes), tuple((lexicon, lexicon.version, lexicon.built) for lexicon in lexicons)


def _codes_in(values: npt.NDArray[Any], codes: Sequence[int], size: int) -> Mask:
    """``np.isin`` by a lookup table: codes are small dense integers."""
    table = np.zeros(size + 1, np.bool_)
    table[[c for c in codes if c != NONE]] = True
    found: Mask = table[values]
    return found


def _among(values: npt.NDArray[Any], interner: Interner, names: Sequence[str]) -> Mask:
    """Which ``values`` (codes of ``interner``) name one of ``names``."""
    if not names:
        return np.zeros(len(values), np.bool_)
    return _codes_in(values, [interner.find(name) for name in names], len(interner.names))


def metadata_matches(metadata: Mapping[str, Any], key: str, value: JsonScalar) -> bool:
    """The stores' metadata filter: the value at the dotted path ``key`` equals ``value``
    with the same JSON type (``None`` matches a JSON null that is present; a number
    matches an equal integer or real, never a boolean)."""
    node: Any = metadata
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    if value is None:
        return node is None
    if isinstance(value, bool):
        return isinstance(node, bool) and node is value
    if isinstance(value, str):
        return isinstance(node, str) and node == value
    return isinstance(node, int | float) and not isinstance(node, bool) and node == value


def _groups(
    namespaces: npt.NDArray[Any], codes: npt.NDArray[Any], rows: Rows
) -> Iterator[tuple[tuple[int, int], list[int]]]:
    """``rows`` grouped by their (namespace, code) pairs, one group at a time."""
    if not len(rows):
        return
    order = np.lexsort((codes, namespaces))
    spaces, keys, held = namespaces[order], codes[order], rows[order]
    bounds = np.flatnonzero((np.diff(spaces) != 0) | (np.diff(keys) != 0)) + 1
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(held)]
    for start, end, space, key in zip(starts, ends, spaces[starts].tolist(), keys[starts].tolist(), strict=True):
        yield (space, key), held[start:end].tolist()


NetworkFactory = Callable[[], FastNetwork]
