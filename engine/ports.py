"""The ports the engine depends on, and what each promises.

Adapters in ``engine/adapters`` implement them; the engine never imports a
backend library. A new backend is one adapter file plus a run of the contract
suite in ``tests/contract``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from engine.records import Change, Memory, MemoryFilter, Page, Scope, Status, TimeWindow, Version
from engine.security import AuditEvent, AuditPage, AuditQuery, AuditRow, Block, BlockKind, Principal, TokenRecord
from engine.session_records import Candidate, Claimed, Message, SessionInfo, SessionRef

Vector = npt.NDArray[np.float32]
Matrix = npt.NDArray[np.float32]

# Given the stored record, the bonus its recall rank earned and when it was
# recalled, the new base score.
Rescore = Callable[[Memory, float, datetime], float]
# One reinforcement: (memory id, bonus, when).
Reinforcement = tuple[str, float, datetime]


@dataclass(frozen=True, slots=True)
class Edge:
    """A typed link between two memories of one namespace (SUPERSEDES, RELATED_TO, ...)."""

    namespace: str
    src: str
    dst: str
    kind: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ImportedRecord:
    """A memory as another deployment held it: the record, its history, vector and links.

    ``versions`` is its history, oldest first, the last one at ``memory.version``;
    empty when the history did not travel. ``vector`` is stored under
    ``memory.embedding_model``; ``None`` leaves the index keeper to embed it.
    ``edges`` are links from this memory, and links to it from a memory already
    stored (``NEXT`` from the end of its session's chain, ``engine.episodes``).

    ``forward_from``: set when the memory is already stored in its namespace at
    that version, as ``versions`` has it there (a later export of the same memory,
    imported after an older one): the import brings it forward to ``memory``
    (``Store.import_records``). ``None``: a memory new to the target.
    """

    memory: Memory
    versions: tuple[Version, ...]
    vector: Vector | None
    edges: tuple[Edge, ...]
    forward_from: int | None = None


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length float32 vectors.

    ``name`` and ``version`` are recorded on every memory the embedder writes, so
    a later model change can tell which vectors are stale. Both methods return
    L2-normalised rows, so a dot product is the cosine similarity. Some models
    embed a query differently from a stored passage (e5's "query:" prefix); the
    two methods exist so callers never have to know. Failures raise
    ``EmbedderError``.
    """

    name: str
    version: str
    dim: int
    # The cosine that unrelated texts typically score with this model; the
    # ranker maps [floor, 1] onto [0, 1] so that models are comparable.
    similarity_floor: float

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """One row per text, in order; an empty input gives a ``(0, dim)`` matrix."""
        ...

    def embed_query(self, text: str) -> Vector:
        """The vector to search with for ``text``."""
        ...


@runtime_checkable
class EmbedsQueries(Protocol):
    """An embedder that embeds several queries at once for about the cost of one (a
    query with its focus and its other phrasing): the rows ``embed_query`` gives, in one
    call. One without it embeds them one at a time."""

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        """One row per text, each the vector ``embed_query`` gives for it."""
        ...


@runtime_checkable
class ReadsText(Protocol):
    """An embedder that can tell how much of a text it has no word for (a tokenizer's
    unknown token). One that cannot is taken to read everything."""

    def unread_share(self, text: str) -> float:
        """The share of ``text``'s tokens the model has no word for, 0..1 (0 for no tokens)."""
        ...

    def unread_parts(self, text: str) -> frozenset[str]:
        """The pieces of ``text`` the model has no word for, as written (MiniLM: "宫", "鸡"
        and "丁" of "宫保鸡丁"); empty where it reads all of it."""
        ...


def model_reads(embedder: Embedder, text: str, most_unread: float) -> bool:
    """Whether ``embedder`` reads ``text``: no more than ``most_unread`` (``[recall]
    unread_query_share``; 1 asks nothing) of its tokens unknown. One that cannot tell
    (not ``ReadsText``) reads everything."""
    return most_unread >= 1 or not isinstance(embedder, ReadsText) or embedder.unread_share(text) <= most_unread


@runtime_checkable
class TimeExpressions(Protocol):
    """Reads the times a query names ("last week", "in May", "上周", "三天前"), relative
    to ``now`` (UTC).

    ``windows`` returns one ``TimeWindow`` [start, end) per time named, each at least
    a day long, ending after it starts and starting no later than ``now`` (nothing is
    written in the future), without repeats; an empty tuple when the text names no
    time. What the parser cannot read is no time, never an error: a query is never
    refused for its wording.
    """

    name: str

    def windows(self, text: str, now: datetime) -> tuple[TimeWindow, ...]: ...

    def begin(self, text: str, now: datetime) -> TimesReading:
        """Start reading ``text``'s windows: an adapter that reads elsewhere (a worker
        process) reads them meanwhile; one that does not reads them when asked."""
        ...


class TimesReading(Protocol):
    """A reading of the times a text names, begun (``TimeExpressions.begin``). Its
    answer is to be taken (called), so that whatever reads it is free for the next."""

    def ready(self, wait: float) -> bool:
        """Whether the answer is in, waiting up to ``wait`` seconds for it (one read when
        asked always is)."""
        ...

    def __call__(self) -> tuple[TimeWindow, ...]:
        """The windows (``TimeExpressions.windows``'s answer), waiting where they are not
        read yet; the same on every call."""
        ...


@runtime_checkable
class VectorIndex(Protocol):
    """Approximate nearest neighbours over memory ids, by cosine similarity.

    The index is derived data: everything in it can be rebuilt from the store.
    ``applied_seq`` is the store change sequence number it reflects; the engine
    compares it with ``Store.last_seq()`` and catches up before it serves from it.
    All methods are safe to call from several threads at once.
    """

    dim: int
    applied_seq: int
    handle_space: str  # names this index's ``handles``: another index (a rebuild, a load) has another

    def __len__(self) -> int:
        """Number of live (not removed) ids."""
        ...

    def __contains__(self, memory_id: object) -> bool: ...

    def upsert(self, ids: Sequence[str], vectors: Matrix) -> None:
        """Add ids, replacing the vector of any id already present."""
        ...

    def insert_absent(self, ids: Sequence[str], vectors: Matrix) -> list[str]:
        """Add those of ``ids`` the index does not hold, leaving the others as they are;
        the ids added. The check and the insertion are one step: a concurrent ``upsert``
        of the same id lands before or after it, never in between."""
        ...

    def remove(self, ids: Iterable[str]) -> None:
        """Forget ids; ids that are not present are ignored."""
        ...

    def search(self, vector: Vector, k: int) -> list[tuple[str, float]]:
        """Up to ``k`` (id, cosine similarity) pairs, most similar first.

        Similarity, not distance: 1.0 is identical, higher is closer.
        """
        ...

    def search_many(self, vectors: Matrix, k: int) -> list[list[tuple[str, float]]]:
        """``search`` for each row of ``vectors``, in row order: the same answers, found
        in one call (the write path asks for a whole batch's neighbours at once)."""
        ...

    def search_handles(self, vector: Vector, k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """``search``'s answer as the handles (``handles``) of the vectors found and
        their similarities, two arrays in the same order: for a caller that keeps what
        each handle names (``ids_of``) and need not turn every answer into ids."""
        ...

    def ids_of(self, handles: npt.NDArray[np.int64]) -> list[str | None]:
        """The id each handle was given, also once its vector has been replaced or
        removed (a handle names one id for the life of the index: a search's answer
        still names its ids after a write that came between); None for -1 and unknown
        handles."""
        ...

    def handles(self, ids: Sequence[str]) -> npt.NDArray[np.int64]:
        """A handle for each id's vector, -1 where the id is absent: a small integer that
        names that vector in this index. The index never gives a handle to another id;
        it stays ``live`` until the id's vector is replaced or removed. Handles hold for
        this index only (``handle_space``), so a caller may keep them and ask ``live``
        instead of looking the ids up again."""
        ...

    def live(self, handles: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Whether each handle (from ``handles``; -1 and unknown ones are not) still names
        a present vector."""
        ...

    def search_among(self, vector: Vector, k: int, handles: npt.NDArray[np.int64]) -> list[tuple[str, float]]:
        """``search`` restricted to the vectors these handles name (dead or -1 ones
        ignored): up to ``k`` of them, most similar first, similarity as ``search``'s.
        For a filter that lets a small share of the index through, whose plain
        neighbours would mostly fail it: the search walks the whole graph but keeps only
        these. As approximate as ``search``; never fewer than ``min(k, live handles)``."""
        ...

    def similarities(self, vector: Vector, ids: Sequence[str]) -> list[tuple[str, float]]:
        """Exact cosine similarity of ``vector`` to each present id (absent ids skipped)."""
        ...

    def paired_similarities(self, ids: Sequence[str], vectors: Matrix) -> npt.NDArray[np.float64]:
        """The exact cosine similarity of each of ``ids`` to the row of ``vectors`` beside
        it, in one call; NaN for an id the index does not hold."""
        ...

    def sample(self, n: int) -> list[str]:
        """Up to ``n`` present ids, spread over the index (the start-up self-check reads
        their vectors back from the store)."""
        ...

    def save(self, directory: Path) -> None:
        """Persist atomically enough that a torn save is detected on load, never served."""
        ...


# Stored and indexed vectors this close are the same vector (float32 round-off).
UNCHANGED_COSINE = 1.0 - 1e-5


def held_as(index: VectorIndex, ids: Sequence[str], vectors: Matrix) -> npt.NDArray[np.bool_]:
    """Whether ``index`` holds each of ``ids`` with the row of ``vectors`` beside it
    already (to float precision), in one read of the index."""
    held: npt.NDArray[np.bool_] = index.paired_similarities(ids, vectors) >= UNCHANGED_COSINE  # NaN: not held
    return held


class LexicalScorer(Protocol):
    """BM25 over one fixed set of documents (one namespace's), given at build time as
    lists of term codes (``engine.text.terms`` of each content, interned).

    Statistics (document frequencies, average length) are those of the documents
    given, so scores of one namespace never depend on another's text. A scorer is
    immutable: a changed corpus is a new build.
    """

    def matches(self, query_terms: Sequence[int]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The documents (positions in build order, ascending) that hold a query term,
        and their scores (above 0, higher is better; comparable within one scorer only).
        Its cost follows the query terms' postings, not the number of documents."""
        ...

    def top(self, query_terms: Sequence[int], k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ``k`` best-scored of ``matches`` (all of them where fewer match), in no
        order, with the same scores; at the last place a tie may be broken either way."""
        ...

    def ceiling(self, query_terms: Sequence[int]) -> float:
        """The score no document reaches for this query, though one that holds every
        query term many times comes close: how much the query's terms weigh in this
        corpus, what a match's score is read against (0 when it holds none of them)."""
        ...

    def state(self) -> dict[str, npt.NDArray[Any]]:
        """Arrays (no objects) from which ``LexicalBuild.restore`` makes an equal scorer:
        a saved fast network starts without building its lexicons again."""
        ...


class LexicalBuild(Protocol):
    """Builds a scorer over documents given flat: ``lengths[i]`` term codes for document
    ``i`` (0: an empty document), the codes one document after another in ``codes``;
    or restores one from its ``state``."""

    def __call__(self, lengths: npt.NDArray[np.int64], codes: npt.NDArray[np.int64]) -> LexicalScorer: ...

    def restore(self, state: Mapping[str, npt.NDArray[Any]]) -> LexicalScorer:
        """The scorer ``state`` came from; ``ValueError`` when it is not one."""
        ...


class RoughCosines(Protocol):
    """A fast first pass of the exact scan: the cosines of some rows of a float16
    matrix to a unit vector, each within ``error`` of the float32 product of those
    rows (widened) and the vector. The scan keeps every row whose rough cosine comes
    within twice ``error`` of the best it holds, and computes those exactly, so its
    answer is the one the exact product alone gives."""

    error: float

    def ready(self) -> bool:
        """Whether it can answer now (one that loads a library may load it meanwhile)."""
        ...

    def __call__(
        self, vectors: npt.NDArray[np.float16], rows: npt.NDArray[np.int64], vector: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]: ...

    def widen(self, vectors: npt.NDArray[np.float16], rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """``vectors[rows]`` as float32: exactly numpy's ``astype`` (every float16 is a
        float32), only faster; asked only when ``ready``."""
        ...


@runtime_checkable
class Store(Protocol):
    """The system of record: memories, their versions, vectors, edges and a change sequence.

    Every read of memories is scoped: it takes the caller's ``Scope`` (the
    namespaces it may look into and, in each, which visibilities it sees), and a
    memory outside it is treated as absent. There is no unscoped read of memory
    content outside index maintenance. Writes name the namespace of each record. Each write method is
    one transaction: it either happens whole, with its version and change rows,
    or raises ``StoreError`` and leaves the store as it was. When a write method
    returns, the write is durable. ``seq`` numbers grow strictly with every
    change that can alter what recall may find.
    """

    def open(self) -> None:
        """Create or migrate the schema; must be called before anything else."""
        ...

    def close(self) -> None: ...

    def integrity(self) -> str:
        """What the backend's own consistency check found when the store was opened:
        ``"ok"``, its report of damage (the store still serves; /health shows it),
        ``"checking"`` while the check still runs (beside the service, so a large store
        starts at once), or ``"unchecked"`` where the backend has no such check."""
        ...

    # --- writes -----------------------------------------------------------------

    def insert(
        self,
        memories: Sequence[Memory],
        vectors: Sequence[Vector],
        *,
        changed_by: str | None,
        reason: str = "created",
    ) -> int:
        """Store new memories (version 1) with their vectors; return the last seq.

        ``vectors[i]`` belongs to ``memories[i]`` and is stored under that
        memory's ``embedding_model``. An id that already exists raises ``Conflict``.
        """
        ...

    def update(
        self,
        memory: Memory,
        vector: Vector | None,
        *,
        changed_by: str | None,
        reason: str,
        sets_base_score: bool = False,
        also: Sequence[tuple[Memory, str]] = (),
    ) -> int:
        """Replace a memory's record with ``memory`` (whose version must be the
        stored version + 1, else ``Conflict``), keep the old version, replace the
        vector when one is given; return the seq. ``also``: other memories' next
        versions (record, why), written as ``insert_linked``'s ``updates`` in the same
        transaction (an edit and what it reinstates land together or not at all).

        Applied to the stored record as it is when the write takes its lock, so that
        use landing after the caller read the record (from this process or another)
        is kept: ``access_count`` and ``last_accessed_at`` never go back; the stored
        ``base_score`` stays unless ``sets_base_score`` (an edit that sets the score);
        ``embedding_model`` and ``embedding_version`` stay unless a vector is given.
        The record kept as the new version is the one written."""
        ...

    def reinforce(self, events: Sequence[Reinforcement], rescore: Rescore) -> None:
        """Apply each (id, bonus, at) in order: base_score = rescore(record, bonus, at),
        access_count += 1 (up to ``limits.MAX_COUNTER``, where it stays),
        last_accessed_at = max(last_accessed_at, at); all in one
        transaction, read-modify-write under the store's write lock, so that
        concurrent calls never lose an increment. An id may appear several times;
        ids that no longer exist are skipped. Creates no version and no change:
        reinforcement is use, not an edit."""
        ...

    def put_vectors(self, vectors: Mapping[str, Vector], model: str, *, embedding_version: str | None = None) -> None:
        """Store (or replace) vectors of ``model`` for existing memories, for a
        model change or a rebuild; one vector per (memory, model) however many
        writers race, and no version. With ``embedding_version``, each record's
        ``embedding_model`` and ``embedding_version`` are set to say that this
        vector is now the one in use, and each such memory is one change (op
        ``reembed``), so that every replica's index picks up the new vector;
        without it, no change. With ``embedding_version`` (a re-embedding), a
        memory that has a ``model`` vector in use (its record names ``model``) by the
        time of the write keeps it: one stored since the caller looked came with an
        edit and is of the newer text."""
        ...

    def purge(self, namespace: str, memory_id: str, *, version: int | None = None) -> int:
        """Delete a memory, its versions, vectors and edges for good; return the seq.
        Raises ``MemoryNotFound`` when absent. With ``version``, only while the memory is
        at that version, checked in the purge's own transaction (``VersionMismatch``
        otherwise): a purge decided on a read must not erase what another process wrote
        since (a restore, an edit)."""
        ...

    def add_edges(self, edges: Sequence[Edge]) -> None:
        """Store typed links; an identical (src, dst, kind) link is kept once."""
        ...

    def insert_linked(
        self,
        memories: Sequence[Memory],
        vectors: Sequence[Vector],
        *,
        updates: Sequence[tuple[Memory, str]],
        edges: Sequence[Edge],
        changed_by: str | None,
        reason: str = "created",
        seen_seq: int | None = None,
    ) -> int:
        """One transaction: ``insert(memories, vectors, reason=reason)``, then
        ``update(record, None, reason=why)`` for each (record, why) of
        ``updates`` in order (a memory inserted here may be updated too; each
        update follows ``update``'s version rule, and several updates of one id
        must carry consecutive versions), then ``add_edges(edges)``. Returns the
        last seq. On any failure (``Conflict``, ``MemoryNotFound``, ``StoreError``)
        nothing of it is stored. This is how a save that supersedes older
        memories lands: the new memory, the older ones turned ``superseded`` and
        the ``SUPERSEDES`` edges appear together or not at all; and how a merge
        does (the merged memory, its sources superseded, ``MERGED_INTO``).

        ``seen_seq``: the change the save was judged at. Where a memory another writer
        inserted after it, before this transaction, shares a new memory's (namespace,
        session) or (namespace, digest), nothing is stored and ``SaveOvertaken`` names it:
        judged without it, the save would fork the session's ``NEXT`` chain or keep its
        text twice. Checked only where the change sequence moved past ``seen_seq`` before
        this transaction's changes (no statement otherwise)."""
        ...

    def import_records(self, records: Sequence[ImportedRecord], *, changed_by: str | None) -> list[str]:
        """Store records exactly as given (an import); return the ids stored, in order.

        A record whose id is already in its namespace is skipped and left as
        stored, edges included (so a repeated import changes nothing), unless it
        has a ``forward_from`` and is stored at that version: then it is brought
        forward, after every new record. Its stored record becomes ``memory``
        (with the larger of the two ``access_count`` and ``last_accessed_at``, as
        an update keeps use; with the stored vector and vector fields unless a
        vector is given, which then replaces the stored one), the ``versions``
        after ``forward_from`` are added as given, its ``edges`` are added (an
        identical link is kept once; none is removed), and it is one change in
        the sequence. Stored at another version (written since the caller looked),
        it is left as stored and its id is not returned; not stored at all, it is
        stored as a new record. Each new record keeps every field (version,
        timestamps, access count, status) and its ``versions`` as given; without
        versions it gets one, of the record as it is, with reason ``imported``.
        Each new memory is one change in the sequence. An id held by another
        namespace raises ``Conflict``; like every write, all of it happens in one
        transaction or none of it does.
        """
        ...

    # --- scoped reads -----------------------------------------------------------

    def get(self, scope: Scope, memory_id: str) -> Memory | None:
        """The memory if ``scope`` sees it, whatever its status, or None."""
        ...

    def get_many(
        self,
        scope: Scope,
        ids: Sequence[str],
        flt: MemoryFilter,
        now: datetime,
    ) -> list[Memory]:
        """Those of ``ids`` that ``scope`` sees and that pass ``flt``, in no set order."""
        ...

    def get_many_and_seq(
        self,
        scope: Scope,
        ids: Sequence[str],
        flt: MemoryFilter,
        now: datetime,
    ) -> tuple[list[Memory], int]:
        """``get_many`` and then ``last_seq`` in one read (one round trip to a server),
        the seq read after the records, so no change they show is newer than it. Recall
        ranks on the fast network first and checks with this that nothing was written
        that its ranking lacked (``Ranking.current_to``); also for no ``ids``, where only
        the seq is read."""
        ...

    def find_by_digest(self, scope: Scope, digest: str) -> list[Memory]:
        """Active memories in ``scope`` with this content digest, oldest first."""
        ...

    def list_page(
        self,
        scope: Scope,
        flt: MemoryFilter,
        now: datetime,
        *,
        limit: int,
        cursor: str | None = None,
    ) -> Page:
        """Memories passing ``flt``, newest first, ``limit`` at a time.

        ``next_cursor`` is opaque; passing it back continues after the last item.
        A cursor that cannot be read raises ``InvalidInput``.
        """
        ...

    def filtered_ids(self, scope: Scope, flt: MemoryFilter, now: datetime, limit: int) -> list[str]:
        """Up to ``limit`` ids passing ``flt`` (the exact-scan fallback of recall)."""
        ...

    def versions(self, scope: Scope, memory_id: str) -> list[Version]:
        """Every kept version of the memory that ``scope`` sees, oldest first; empty
        when it does not see the memory as it is now. A version is seen as its own
        record says (a version from when the memory was private to another agent
        stays hidden after the memory is shared)."""
        ...

    def edges(self, scope: Scope, memory_id: str) -> list[Edge]:
        """Links from or to the memory whose both ends ``scope`` sees (a link must not
        reveal a memory out of sight); empty when it does not see the memory."""
        ...

    def versions_of(self, scope: Scope, ids: Sequence[str]) -> dict[str, list[Version]]:
        """``versions`` of each of ``ids`` in one read (one round trip to a server, or a
        few for very many ids): a key for each id, ``[]`` for one out of sight."""
        ...

    def edges_of(self, scope: Scope, ids: Sequence[str]) -> dict[str, list[Edge]]:
        """``edges`` of each of ``ids`` in one read (one round trip to a server, or a few
        for very many ids): a key for each id, ``[]`` for one out of sight; a link
        between two of them is in the lists of both."""
        ...

    def find_by_key(self, scope: Scope, key: str) -> list[Memory]:
        """Active memories in ``scope`` whose ``key`` equals ``key`` exactly,
        newest ``created_at`` first (ties by ``memory_id`` descending)."""
        ...

    def memories_by_entity(
        self,
        scope: Scope,
        entity_key: str,
        flt: MemoryFilter,
        now: datetime,
        limit: int,
    ) -> list[Memory]:
        """Up to ``limit`` memories in scope passing ``flt`` that mention an entity
        whose key (``engine.records.entity_keys``) equals ``entity_key``, newest
        ``created_at`` first (ties by ``memory_id`` descending). The caller passes
        the key, not a raw name; a key nothing mentions gives ``[]``."""
        ...

    def vectors(self, ids: Sequence[str], model: str) -> dict[str, Vector]:
        """Stored vectors of ``model`` for those ids that have one."""
        ...

    # --- the change sequence, for keeping derived indexes in step ----------------

    def last_seq(self) -> int:
        """The newest change seq, 0 for an empty store."""
        ...

    def changes_since(self, seq: int, limit: int) -> list[Change]:
        """Changes with seq > ``seq``, oldest first, at most ``limit``.

        Seq numbers are consecutive: a reader that finds ``seq + 1`` missing before
        a later change either reads below ``low_water_seq()`` (those changes were
        pruned) or reads too early (the change is not visible to it yet)."""
        ...

    def low_water_seq(self) -> int:
        """The newest seq pruned from the change log (0 when none ever was).

        ``changes_since(seq, ...)`` returns every change after ``seq`` only while
        ``seq >= low_water_seq()``: a reader whose position is below it has missed
        changes for good and must rebuild what it derives from the store."""
        ...

    def prune_changes(self, keep: int, limit: int) -> int:
        """Forget up to ``limit`` of the oldest changes that are not among the newest
        ``keep`` (at least 1, else ``ValueError``), raising the low-water mark to the
        newest one forgotten; return how many went. One short transaction; several
        processes may prune at once."""
        ...

    def index_status(self, ids: Sequence[str]) -> dict[str, Status]:
        """Status of each id that still exists, in any namespace.

        For index maintenance and for choosing ids on import only: it reveals
        no content.
        """
        ...

    def links(self, ids: Sequence[str]) -> list[Edge]:
        """Every link from or to any of ``ids``, in any namespace, each once.

        For keeping the fast network in step only (like ``index_status``): it is
        not scoped, so no caller-facing read may use it.
        """
        ...

    def iter_indexable(self, model: str, batch: int) -> Iterator[tuple[list[str], Matrix, list[str]]]:
        """Walk every memory that belongs in the vector index (not deleted):
        yields (ids with a ``model`` vector, their vectors, ids lacking one)."""
        ...

    def count_indexable(self) -> int: ...

    def contents(self, ids: Sequence[str]) -> dict[str, str]:
        """Content of each id that exists, for re-embedding only."""
        ...

    # --- walks for lifecycle jobs (bounded memory: one page at a time) -------------

    def namespaces(self) -> list[str]:
        """Every namespace that holds at least one memory (any status), sorted."""
        ...

    def scan(self, scope: Scope, after: str, limit: int) -> list[Memory]:
        """Up to ``limit`` memories in ``scope``, any status, with ``memory_id >
        after``, ordered by ``memory_id``. Pass the last id back as ``after`` for the
        next page; a page shorter than ``limit`` is the last. Memories written while
        a walk runs are seen if their id sorts after the cursor."""
        ...

    def missing_vectors(self, model: str, after: str, limit: int) -> list[str]:
        """Ids of memories that belong in the vector index (not deleted) and have
        no ``model`` vector in use: none, or one kept from an earlier time on ``model``
        while their record names another (the model was changed and changed back),
        with ``memory_id > after``, ordered, at most ``limit``."""
        ...

    def missing_vector_models(self, model: str) -> dict[str, int]:
        """For the memories ``missing_vectors`` would walk: how many there are, by
        the ``embedding_model`` their record names (the model of the vector they have)."""
        ...


@runtime_checkable
class Leases(Protocol):
    """Named leases with an expiry, held by one holder at a time across every process
    sharing the store (one re-embedder among replicas). A store that only one process
    opens at a time needs none."""

    def take_lease(self, name: str, holder: str, now: datetime, ttl: timedelta) -> bool:
        """Take or renew the lease ``name`` for ``holder`` until ``now + ttl``; True when
        ``holder`` holds it now. Refused (False) while another holder's lease runs; an
        expired lease is taken over. ``now`` comes from the caller's clock: replicas'
        clocks must agree to well within ``ttl``."""
        ...

    def release_lease(self, name: str, holder: str) -> None:
        """Give the lease up at once, if ``holder`` holds it (else nothing happens)."""
        ...


class BlockList(Protocol):
    """Which sources are blocked; read on every call, so a block takes effect at once."""

    def is_blocked(self, agent: str | None, session_id: str | None) -> bool:
        """Whether the agent or the session (either may be None: not named) is blocked."""
        ...


class SecurityStore(BlockList, Protocol):
    """Tokens and the audit log, kept apart from the memories (their own file or database).

    Token lookups read the stored state on every call, so a revocation takes effect
    at once. ``append_audit`` assigns the next ``seq`` and chains the entry to the
    last one atomically, even with several processes appending to the same store.
    """

    def open(self) -> None: ...

    def close(self) -> None: ...

    def add_token(self, record: TokenRecord, token_hash: str) -> None:
        """Store a token; a ``token_hash`` already stored updates its agent and grants
        (config bootstrap) but never un-revokes it."""
        ...

    def principal_for(self, token_hash: str) -> Principal | None:
        """The principal of a live token, or None when unknown or revoked."""
        ...

    def tokens(self) -> list[TokenRecord]:
        """Every token, revoked ones included, oldest first."""
        ...

    def revoke(self, token_id: str, at: datetime) -> bool:
        """Revoke a live token; False when there is no such live token."""
        ...

    def append_audit(self, event: AuditEvent) -> AuditRow: ...

    def audit(self, query: AuditQuery) -> list[AuditRow]:
        """Entries matching the query, newest first, at most ``query.limit``."""
        ...

    def audit_after(self, query: AuditQuery, after_seq: int) -> AuditPage:
        """Entries matching the query whose ``seq`` is past ``after_seq``, oldest first, at
        most ``query.limit``, with the head of the chain they were read at: every entry up to
        ``head`` was committed and looked at, so none at or below it can turn up later.
        (Positions are given under the append lock and commit in order.)"""
        ...

    def audit_rows(self) -> Iterator[AuditRow]:
        """Every entry since the first, in order (by ``seq``), for verification: those moved
        out to an archive by a bound on the log too."""
        ...

    def block(self, block: Block) -> bool:
        """Record a block; False (and nothing changes) when that source is already blocked."""
        ...

    def unblock(self, kind: BlockKind, value: str) -> bool:
        """Lift a block; False when that source was not blocked."""
        ...

    def blocks(self) -> list[Block]:
        """Every block in force, oldest first."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens as a model would: the budget of session windows and prompt contexts."""

    name: str

    def count(self, text: str) -> int:
        """The number of tokens of ``text``, without the model's special tokens; 0 for ""."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``count`` of each text, in order (one batch call where the backend has one)."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    """Where short-term sessions live (``engine/sessions.py``): windows of messages and the
    candidates their promotion will write, per generation (``engine/session_records.py``).

    Time is what the caller says it is: every method that needs it takes ``now``, and a
    generation is expired once ``now`` reaches its ``expires_at``, whatever the backend's
    own clock says. An expired generation is never readable nor appendable again, and its
    data stays until ``finish`` is called for it after its promotion: expiry loses nothing.
    Each method is atomic: concurrent callers, in one process or several sharing the
    backend, never see half an append, and only one of them claims a generation.
    """

    def open(self) -> None: ...

    def close(self) -> None: ...

    def health(self) -> str:
        """ "ok" when the backend answers a trivial request now, else what is wrong
        ("unreachable: …"), for ``/health``; never raises."""
        ...

    def append(
        self,
        ref: SessionRef,
        messages: Sequence[Message],
        candidates: Sequence[Candidate],
        *,
        now: datetime,
        expire_after_seconds: float | None,
        max_tokens: int | None,
        default_expire_after_seconds: float,
        default_max_tokens: int,
        reach: str,
        visibility: str,
        new_generation: str,
    ) -> SessionInfo:
        """Add messages (oldest first) and candidates to the open generation of ``ref``, or
        to a new one with id ``new_generation`` when there is none (or it has expired,
        which leaves that one waiting for promotion). Then drop the oldest messages while
        the window holds more than the session's token budget and more than one message
        (candidates stay), and set the deadline to ``now`` plus its time to live.

        ``max_tokens`` and ``expire_after_seconds`` given become the session's own; None
        keeps the generation's own, or, for a new one, takes the ``default_…`` value.
        Which of those applies is decided inside the atomic step: two first appends at
        once, one with settings and one without, leave the settings given, whichever
        comes first. ``reach`` and ``visibility`` are kept from the generation's first
        append."""
        ...

    def window(self, ref: SessionRef, now: datetime) -> tuple[SessionInfo, list[Message]] | None:
        """The open, unexpired generation of ``ref`` and its window (oldest first); None if none."""
        ...

    def sessions(
        self,
        namespace: str,
        agent: str | None,
        now: datetime,
        *,
        limit: int | None = None,
        after: tuple[datetime, str] | None = None,
    ) -> list[SessionInfo]:
        """Open, unexpired generations of ``namespace`` (of ``agent`` only, unless None),
        oldest first: by ``created_at``, then by generation id. At most ``limit`` (None:
        all); with ``after`` (a ``created_at`` and a generation id), only those that sort
        after it, so a listing goes on where its last page ended."""
        ...

    def close_session(self, ref: SessionRef, now: datetime, stale_after_seconds: float) -> Claimed | None:
        """Close the open, unexpired generation of ``ref`` and claim it for promotion (as
        ``claim`` does), in one atomic step, so no sweep can claim it in between; the next
        append starts a new one. The generation records ``now`` as its ``closed_at``, which
        every later read of it (a claim taken again after this one died) returns. None if
        there is none."""
        ...

    def due(self, now: datetime, limit: int) -> list[str]:
        """Generations waiting for promotion: closed, expired, or claimed at least
        ``stale_after`` (as given to ``claim``) ago by a promotion that never finished."""
        ...

    def claim(self, generation: str, now: datetime, stale_after_seconds: float) -> Claimed | None:
        """Take a due generation for promotion, atomically; None when it is not due, gone,
        or claimed by another promotion less than ``stale_after_seconds`` ago. A claim not
        finished within that time is due again."""
        ...

    def finish(self, generation: str) -> None:
        """Forget a promoted generation: its record, messages and candidates."""
        ...
