"""Typed results: what the service answers, as frozen dataclasses.

Each keeps the JSON it was read from as ``raw``, so a field a newer service adds is
never lost to an older client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _when(value: Any) -> datetime:
    moment = _time(value)
    if moment is None:
        raise ValueError(f"expected an ISO 8601 time, got {value!r}")
    return moment


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory record, every field the service keeps."""

    memory_id: str
    namespace: str
    content: str
    category: str
    entities: tuple[str, ...]
    importance: float
    base_score: float
    source: str
    actor: str | None
    session_id: str | None
    visibility: str
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime
    access_count: int
    expire_at: datetime | None
    status: str
    embedding_model: str | None
    embedding_version: str | None
    version: int
    key: str | None
    metadata: dict[str, Any]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memory:
        return cls(
            memory_id=data["memory_id"],
            namespace=data["namespace"],
            content=data["content"],
            category=data["category"],
            entities=tuple(data.get("entities") or ()),
            importance=float(data.get("importance", 0.0)),
            base_score=float(data.get("base_score", 0.0)),
            source=data.get("source", ""),
            actor=data.get("actor"),
            session_id=data.get("session_id"),
            visibility=data.get("visibility", "shared"),
            created_at=_when(data["created_at"]),
            updated_at=_when(data.get("updated_at", data["created_at"])),
            last_accessed_at=_when(data.get("last_accessed_at", data["created_at"])),
            access_count=int(data.get("access_count", 0)),
            expire_at=_time(data.get("expire_at")),
            status=data.get("status", "active"),
            embedding_model=data.get("embedding_model"),
            embedding_version=data.get("embedding_version"),
            version=int(data.get("version", 1)),
            key=data.get("key"),
            metadata=dict(data.get("metadata") or {}),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class Hit:
    """A recalled memory and its score (higher is better); ``explanation`` with ``explain=True``,
    ``graph`` with ``expand=["graph"]``; ``contradicts`` lists memories it clashes with."""

    memory: Memory
    score: float
    contradicts: tuple[str, ...]
    explanation: dict[str, Any] | None
    graph: dict[str, Any] | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def memory_id(self) -> str:
        return self.memory.memory_id

    @property
    def content(self) -> str:
        return self.memory.content

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Hit:
        return cls(
            memory=Memory.from_json(data),
            score=float(data["score"]),
            contradicts=tuple(data.get("contradicts") or ()),
            explanation=data.get("explanation"),
            graph=data.get("graph"),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class SaveResult:
    """What a save did: created a memory, or reinforced one already stored (``deduplicated``),
    and which older memories it superseded, contradicted or flagged; ``follows``: the memory
    of the same session it was linked NEXT from."""

    memory: Memory
    created: bool
    deduplicated: bool
    deduplicated_by: str | None
    similarity: float | None
    superseded: tuple[str, ...]
    contradicted: tuple[str, ...]
    flagged: tuple[str, ...]
    guard: dict[str, Any]
    follows: str | None = None
    # Memories made active again: this one said the writer's last memory, which superseded
    # them, is a stay ("It's only for six months.").
    reinstated: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def memory_id(self) -> str:
        return self.memory.memory_id

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SaveResult:
        return cls(
            memory=Memory.from_json(data["memory"]),
            created=bool(data["created"]),
            deduplicated=bool(data.get("deduplicated", not data["created"])),
            deduplicated_by=data.get("deduplicated_by"),
            similarity=data.get("similarity"),
            superseded=tuple(data.get("superseded") or ()),
            contradicted=tuple(data.get("contradicted") or ()),
            flagged=tuple(data.get("flagged") or ()),
            guard=dict(data.get("guard") or {}),
            follows=data.get("follows"),
            reinstated=tuple(data.get("reinstated") or ()),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class BatchResult:
    results: tuple[SaveResult, ...]
    created: int
    deduplicated: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchResult:
        return cls(
            results=tuple(SaveResult.from_json(item) for item in data["results"]),
            created=int(data["created"]),
            deduplicated=int(data["deduplicated"]),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing, newest first; pass ``next_cursor`` back for the next (None: the last)."""

    memories: tuple[Memory, ...]
    next_cursor: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Page:
        return cls(tuple(Memory.from_json(item) for item in data["memories"]), data.get("next_cursor"), raw=data)


@dataclass(frozen=True, slots=True)
class Version:
    """One kept version of a memory: who changed it, when and why."""

    version: int
    changed_at: datetime
    changed_by: str | None
    reason: str | None
    memory: Memory
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Version:
        return cls(
            version=int(data["version"]),
            changed_at=_when(data["changed_at"]),
            changed_by=data.get("changed_by"),
            reason=data.get("reason"),
            memory=Memory.from_json(data["memory"]),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class Deleted:
    memory_id: str
    hard: bool
    version: int
    # The memories it had superseded, active again now that it is gone.
    reinstated: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Deleted:
        return cls(
            memory_id=data["memory_id"],
            hard=bool(data["hard"]),
            version=int(data["version"]),
            reinstated=tuple(data.get("reinstated", ())),
            raw=data,
        )
