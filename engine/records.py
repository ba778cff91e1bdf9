"""The memory record and the small value types around it.

These are the engine's own types. The HTTP layer has separate wire schemas and
converts at its edge, so the record can grow without changing the protocol.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import unicodedata
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from engine.entities import canonical_key

JsonScalar = str | int | float | bool | None


class Source(StrEnum):
    USER_INPUT = "user_input"
    INFERENCE = "inference"
    TOOL_RESULT = "tool_result"
    IMPORT = "import"


class Visibility(StrEnum):
    PRIVATE = "private"
    SHARED = "shared"
    PUBLIC = "public"


class Status(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"
    QUARANTINED = "quarantined"
    DELETED = "deleted"


BUILTIN_CATEGORIES: tuple[str, ...] = ("fact", "preference", "event", "task", "state", "procedure")
DEFAULT_NAMESPACE = "default"

_SPACE = re.compile(r"\s+")


def utcnow() -> datetime:
    return datetime.now(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(moment: datetime) -> int:
    """Microseconds since the epoch: exact, and ordered as the stores order ISO strings."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def new_memory_id() -> str:
    """A UUID of version 7 (RFC 9562): the millisecond it was made, then 74 random bits.
    Ids made one after another sort one after another, so each index keyed by memory id
    takes a batch's new keys at its end instead of on a random page each: a batch of 256
    saves at 100,000 memories wrote 55 KB of log a memory with random ids, 26 KB with these."""
    ms = time.time_ns() // 1_000_000 & (1 << 48) - 1
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits, 74 of them used
    rand_a, rand_b = rand >> 68, rand & (1 << 62) - 1
    return str(uuid.UUID(int=ms << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b))


def content_digest(content: str) -> str:
    """sha256 of the content as a reader would compare it.

    Unicode is NFKC-normalised, case-folded and whitespace-collapsed first, so
    "User likes  Blue" and "user likes blue" are the same memory for dedup.
    """
    normal = _SPACE.sub(" ", unicodedata.normalize("NFKC", content).casefold()).strip()
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()


def normalize_entities(entities: Sequence[str]) -> tuple[str, ...]:
    """Trimmed, de-duplicated entity names, order of first appearance kept."""
    seen: dict[str, None] = {}
    for name in entities:
        cleaned = _SPACE.sub(" ", name).strip()
        if cleaned:
            seen.setdefault(cleaned, None)
    return tuple(seen)


def entity_keys(entities: Sequence[str]) -> frozenset[str]:
    """Entity names as they are compared and linked: ``engine.entities.canonical_key``
    (NFKC, case-folded, common concepts mapped across languages: "Blue", "蓝色" → "blue")."""
    return frozenset(canonical_key(e) for e in entities)


@dataclass(frozen=True, slots=True)
class Memory:
    """One stored memory, as the system of record holds it (see DESIGN.md)."""

    memory_id: str
    namespace: str
    content: str
    category: str
    base_score: float
    importance: float
    source: Source
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime
    entities: tuple[str, ...] = ()
    actor: str | None = None
    session_id: str | None = None
    visibility: Visibility = Visibility.SHARED
    access_count: int = 0
    expire_at: datetime | None = None
    status: Status = Status.ACTIVE
    embedding_model: str = ""
    embedding_version: str = ""
    version: int = 1
    key: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return content_digest(self.content)

    def evolve(self, **changes: Any) -> Memory:
        return replace(self, **changes)

    def over(self, stored: Memory, *, revectored: bool, sets_base_score: bool) -> Memory:
        """This edit written over ``stored``, the record as it is now (see ``Store.update``).

        Use and vectors write no version, so they may have changed since the edit's
        record was read, perhaps by another process: accesses only accumulate, the
        base score is the edit's only when it sets one, and the vector fields only
        when the edit stores a vector."""
        return replace(
            self,
            access_count=max(self.access_count, stored.access_count),
            last_accessed_at=max(self.last_accessed_at, stored.last_accessed_at),
            base_score=self.base_score if sets_base_score else stored.base_score,
            embedding_model=self.embedding_model if revectored else stored.embedding_model,
            embedding_version=self.embedding_version if revectored else stored.embedding_version,
        )


@dataclass(frozen=True, slots=True)
class MemoryDraft:
    """What a client asks to save. Unset fields take the configured defaults."""

    content: str
    namespace: str = DEFAULT_NAMESPACE
    category: str = "fact"
    base_score: float | None = None
    importance: float | None = None
    source: Source = Source.USER_INPUT
    entities: tuple[str, ...] = ()
    actor: str | None = None
    session_id: str | None = None
    visibility: Visibility = Visibility.SHARED
    expire_at: datetime | None = None
    key: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    # What this save does with memories it replaces or contradicts ("off", "flag",
    # "supersede"); None: the namespace's configured mode (engine.config.ConflictsConfig).
    conflicts: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryPatch:
    """A change to an existing memory; ``None`` leaves a field as it is."""

    content: str | None = None
    category: str | None = None
    entities: tuple[str, ...] | None = None
    importance: float | None = None
    base_score: float | None = None
    visibility: Visibility | None = None
    expire_at: datetime | None = None
    clear_expire_at: bool = False
    key: str | None = None
    metadata: Mapping[str, Any] | None = None
    status: Status | None = None
    # The keys of ``metadata`` are set over the memory's own, which it otherwise replaces
    # (a procedure's new steps leave the rest of its metadata as it was).
    merge_metadata: bool = False

    def is_empty(self) -> bool:
        return all(getattr(self, name) is None for name in _PATCH_FIELDS) and not self.clear_expire_at


_PATCH_FIELDS = (
    "content",
    "category",
    "entities",
    "importance",
    "base_score",
    "visibility",
    "expire_at",
    "key",
    "metadata",
    "status",
)


def metadata_key_problem(key: str) -> str | None:
    """What is wrong with ``key`` as a metadata filter's key (a dotted path: ``room.floor``),
    or None: 1-128 characters, each a letter, mark or digit of any script, ``_``, ``-`` or
    ``.``. Marks, because the letters of many scripts carry them: the vowel signs of नाम or
    ชื่อ, a decomposed é. Every store checks it again: the SQLite store puts it into a JSON path."""
    if 0 < len(key) <= 128 and all(
        char.isalnum() or char in "_-." or unicodedata.category(char).startswith("M") for char in key
    ):
        return None
    return f"metadata filter key {key!r} must be 1-128 letters, digits, '_', '-' or '.'"


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Hard filters applied before ranking. Empty tuples mean "any"."""

    categories: tuple[str, ...] = ()
    sources: tuple[Source, ...] = ()
    statuses: tuple[Status, ...] = (Status.ACTIVE,)
    created_after: datetime | None = None
    created_before: datetime | None = None
    metadata: Mapping[str, JsonScalar] = field(default_factory=dict)
    session_id: str | None = None
    include_expired: bool = False


class Reach(StrEnum):
    """How much of one namespace a caller sees."""

    FULL = "full"  # every memory: namespace admins, and the engine's own jobs
    MEMBER = "member"  # shared and public memories, and the private ones the caller wrote
    PUBLIC = "public"  # public memories only: every authenticated agent, in every namespace
    OWN = "own"  # only the memories the caller wrote: a write grant without read


@dataclass(frozen=True, slots=True)
class Scope:
    """What one caller may read; every scoped store query takes one.

    Each namespace the caller may look into has a ``Reach``; a namespace in none of
    the three tuples is out of sight, and so is every memory in it. ``agent`` is
    the caller, the one whose private memories ``member`` reach includes (a
    memory's writer is its ``actor``).
    """

    full: tuple[str, ...] = ()
    member: tuple[str, ...] = ()
    public: tuple[str, ...] = ()
    agent: str | None = None
    own: tuple[str, ...] = ()

    @classmethod
    def whole(cls, namespaces: Sequence[str]) -> Scope:
        """Every memory of these namespaces: for the engine's own reads and for admins."""
        return cls(full=tuple(dict.fromkeys(namespaces)))

    @classmethod
    def of(cls, reaches: Mapping[str, Reach], agent: str | None) -> Scope:
        def named(reach: Reach) -> tuple[str, ...]:
            return tuple(ns for ns, r in reaches.items() if r is reach)

        return cls(named(Reach.FULL), named(Reach.MEMBER), named(Reach.PUBLIC), agent, named(Reach.OWN))

    @property
    def namespaces(self) -> tuple[str, ...]:
        return self.full + self.member + self.public + self.own

    @property
    def restricted(self) -> bool:
        """Whether visibility hides anything here (some namespace is not in full reach)."""
        return bool(self.member or self.public or self.own)

    def reach(self, namespace: str) -> Reach | None:
        for reach, names in (
            (Reach.FULL, self.full),
            (Reach.MEMBER, self.member),
            (Reach.PUBLIC, self.public),
            (Reach.OWN, self.own),
        ):
            if namespace in names:
                return reach
        return None

    def sees(self, memory: Memory) -> bool:
        reach = self.reach(memory.namespace)
        if reach is Reach.FULL:
            return True
        mine = self.agent is not None and memory.actor == self.agent
        if reach is Reach.MEMBER:
            return memory.visibility is not Visibility.PRIVATE or mine
        if reach is Reach.OWN:
            return mine
        return reach is Reach.PUBLIC and memory.visibility is Visibility.PUBLIC

    def administers(self, namespace: str) -> bool:
        """Whether the caller sees (and may manage) every memory of ``namespace``."""
        return self.reach(namespace) is Reach.FULL

    def owns(self, memory: Memory) -> bool:
        """Whether the caller may change who sees ``memory``: its writer, or an admin of its namespace."""
        return self.reach(memory.namespace) is Reach.FULL or (self.agent is not None and memory.actor == self.agent)

    def narrowed(self, namespaces: Sequence[str]) -> Scope:
        """This scope over only those of ``namespaces`` it already holds."""
        keep = set(namespaces)
        return Scope(
            tuple(n for n in self.full if n in keep),
            tuple(n for n in self.member if n in keep),
            tuple(n for n in self.public if n in keep),
            self.agent,
            tuple(n for n in self.own if n in keep),
        )


def sight_of(namespaces: Sequence[str], scope: Scope | None) -> Scope:
    """What a read of ``namespaces`` sees: the caller's scope narrowed to them, or, for the
    engine's own reads (no scope), every memory of them."""
    return Scope.whole(namespaces) if scope is None else scope.narrowed(namespaces)


def same_audience(a: Memory, b: Memory) -> bool:
    """Whether two memories are seen by exactly the same callers: same namespace and
    visibility, and for private ones the same writer. Only such memories may be
    deduplicated, superseded, contradicted or merged into one another; otherwise a
    private memory could change what others see, or reveal itself through them."""
    return (
        a.namespace == b.namespace
        and a.visibility is b.visibility
        and (a.visibility is not Visibility.PRIVATE or a.actor == b.actor)
    )


# How widely each visibility is read: a memory made more widely read is no longer hidden
# under a memory its new readers cannot read.
_READERS = {Visibility.PRIVATE: 0, Visibility.SHARED: 1, Visibility.PUBLIC: 2}


def more_widely_read(new: Memory, old: Memory) -> bool:
    """Whether ``new`` (a later record of a memory) is read by more callers than ``old``:
    private made shared or public, shared made public."""
    return _READERS[new.visibility] > _READERS[old.visibility]


@dataclass(frozen=True, slots=True)
class Version:
    """One kept version of a memory: the record as it was, and why it changed."""

    memory_id: str
    version: int
    record: Memory
    changed_at: datetime
    changed_by: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of the store's change sequence."""

    seq: int
    memory_id: str
    namespace: str
    op: str


@dataclass(frozen=True, slots=True)
class Page:
    items: tuple[Memory, ...]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A time a query names ("last week", "上周", "in May"), as [start, end) in UTC,
    with the words it was read from and the library that read them."""

    start: datetime
    end: datetime
    text: str
    parser: str

    def micros(self) -> tuple[int, int]:
        return micros(self.start), micros(self.end)

    def as_dict(self) -> dict[str, str]:
        return {
            "text": self.text,
            "start": self.start.isoformat().replace("+00:00", "Z"),
            "end": self.end.isoformat().replace("+00:00", "Z"),
            "parser": self.parser,
        }


@dataclass(frozen=True, slots=True)
class TimesRead:
    """A reading of a query's times (``engine.ports.TimesReading``) already done: a text
    that names none, or a recall without a time signal."""

    windows: tuple[TimeWindow, ...] = ()

    def ready(self, wait: float) -> bool:
        return True

    def __call__(self) -> tuple[TimeWindow, ...]:
        return self.windows


def overtaking(new: Sequence[Memory], inserted: Iterable[tuple[str, str, str | None, str]]) -> str | None:
    """Of memories another writer ``inserted`` (memory_id, namespace, session_id, digest)
    while ``new`` ones were being judged, the first that judgment had to see: one of a new
    memory's (namespace, session), whose ``NEXT`` chain the new ones go on, or of its
    (namespace, digest), its repeat (``Store.insert_linked``'s ``seen_seq``)."""
    sessions = {(m.namespace, m.session_id) for m in new if m.session_id is not None}
    digests = {(m.namespace, m.digest) for m in new}
    for memory_id, namespace, session_id, digest in inserted:
        if (namespace, session_id) in sessions or (namespace, digest) in digests:
            return memory_id
    return None
