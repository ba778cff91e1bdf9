"""The memory record as plain JSON-ready data, and back.

One shape serves the stores' version snapshots, the HTTP layer and exports:
every field of DESIGN.md's record, timestamps as UTC ISO 8601 strings.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any

from engine.errors import InvalidInput
from engine.records import Memory, Source, Status, Visibility


def as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC. ``ValueError`` (never ``OverflowError``) when it has no timezone, or
    when its offset carries it outside the years 1..9999 (``9999-12-31T23:59:59-23:59``)."""
    if moment.tzinfo is None:
        raise ValueError(f"{moment.isoformat()} has no timezone; twinmem keeps every time in UTC")
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError(f"{moment.isoformat()} is out of range once converted to UTC") from exc


def to_iso(moment: datetime) -> str:
    """UTC, microseconds, fixed width: such strings sort in time order."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime: twinmem keeps every timestamp in UTC")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_iso(text: str) -> datetime:
    """An ISO 8601 time in UTC (a time without a zone is read as UTC); ``ValueError`` when
    it does not parse or falls outside the years 1..9999 in UTC."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return as_utc(moment)


def memory_to_dict(memory: Memory) -> dict[str, Any]:
    return {
        "memory_id": memory.memory_id,
        "namespace": memory.namespace,
        "content": memory.content,
        "category": memory.category,
        "entities": list(memory.entities),
        "importance": memory.importance,
        "base_score": memory.base_score,
        "source": memory.source.value,
        "actor": memory.actor,
        "session_id": memory.session_id,
        "visibility": memory.visibility.value,
        "created_at": to_iso(memory.created_at),
        "updated_at": to_iso(memory.updated_at),
        "last_accessed_at": to_iso(memory.last_accessed_at),
        "access_count": memory.access_count,
        "expire_at": to_iso(memory.expire_at) if memory.expire_at else None,
        "status": memory.status.value,
        "embedding_model": memory.embedding_model,
        "embedding_version": memory.embedding_version,
        "version": memory.version,
        "key": memory.key,
        "metadata": dict(memory.metadata),
    }


def memory_from_dict(data: dict[str, Any]) -> Memory:
    expire_at = data.get("expire_at")
    return Memory(
        memory_id=data["memory_id"],
        namespace=data["namespace"],
        content=data["content"],
        category=data["category"],
        entities=tuple(data.get("entities", ())),
        importance=float(data["importance"]),
        base_score=float(data["base_score"]),
        source=Source(data["source"]),
        actor=data.get("actor"),
        session_id=data.get("session_id"),
        visibility=Visibility(data.get("visibility", Visibility.SHARED.value)),
        created_at=from_iso(data["created_at"]),
        updated_at=from_iso(data["updated_at"]),
        last_accessed_at=from_iso(data["last_accessed_at"]),
        access_count=int(data.get("access_count", 0)),
        expire_at=from_iso(expire_at) if expire_at else None,
        status=Status(data.get("status", Status.ACTIVE.value)),
        embedding_model=data.get("embedding_model", ""),
        embedding_version=data.get("embedding_version", ""),
        version=int(data.get("version", 1)),
        key=data.get("key"),
        metadata=dict(data.get("metadata") or {}),
    )


def encode_cursor(created_at: str, memory_id: str) -> str:
    """A list page's cursor: the (created_at, memory_id) of its last memory, opaque to clients."""
    return base64.urlsafe_b64encode(json.dumps([created_at, memory_id]).encode()).decode()


def decode_cursor(cursor: str) -> tuple[str, str]:
    """``encode_cursor``'s pair back; ``InvalidInput`` for anything else a client sends
    (not base64, not JSON, JSON nested past the decoder's depth, another shape)."""
    try:
        pair = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) for part in pair)):
            raise ValueError("not a (created_at, memory_id) pair")
        created_at, memory_id = pair
        from_iso(created_at)
    except (ValueError, TypeError, RecursionError, binascii.Error) as exc:
        raise InvalidInput(f"cursor {cursor!r} is not one this service issued", field="cursor") from exc
    return created_at, memory_id
