"""Wire schemas: what travels over HTTP, separate from the engine's records.

Requests are strict (unknown fields are refused with 422, so a typo never
silently does nothing); responses carry every field of the record.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict, TypeAdapter, ValidationError

from engine.codec import as_utc, memory_to_dict, to_iso
from engine.errors import InvalidInput
from engine.procedures import STEPS_KEY, steps_of
from engine.recall import RecallResult
from engine.records import (
    DEFAULT_NAMESPACE,
    JsonScalar,
    Memory,
    MemoryDraft,
    MemoryFilter,
    MemoryPatch,
    Source,
    Status,
    Version,
    Visibility,
)
from engine.scoring import Hit
from engine.service import Neighbourhood, SaveResult


def _utc(moment: datetime | None) -> datetime | None:
    """A time on the wire, in UTC; one without a timezone, or whose offset carries it
    outside the years 1..9999 once converted to UTC, is refused (422)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise ValueError("timestamps must carry a timezone, e.g. 2026-01-31T09:00:00Z")
    return as_utc(moment)


# What the lax datetime read takes from a string as Unix seconds: "86400", "-1.5", ".5",
# and with an exponent, "8.64e4" (a day into 1970 as well).
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _text_time(value: object) -> object:
    """A time on the wire is ISO 8601 text. The lax datetime read that takes the text would
    take a number as Unix seconds too, and a number in quotes as well: ``expire_at: 86400``
    (meant as a day to live) expired the memory in 1970, out of recall at once, and a
    rollback ``as_of: 12345`` (or ``"12345"``) soft-deleted every memory of the namespace."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER_TEXT.fullmatch(value)):
        raise ValueError("a time is ISO 8601 text with a timezone, e.g. 2026-01-31T09:00:00Z, not a number")
    return value


_QUERY_TIME: TypeAdapter[datetime] = TypeAdapter(Annotated[datetime, Strict(False), BeforeValidator(_text_time)])
# A query string reads "+" as a space, and a time's "+08:00" sent without URL encoding
# (curl '...?created_after=2026-01-31T09:00:00+08:00') arrives as " 08:00". A space is
# nothing else right after a time of day and before an offset's hours, so it was that "+".
_UNENCODED_PLUS = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?) ([0-9]{2}(?::?[0-9]{2})?)"
)


def query_time(text: str | None, name: str, *, naive_is_utc: bool = False) -> datetime | None:
    """A time given as a query parameter, read as a body's ``UtcDatetime`` is: ISO 8601 text,
    never a number. The handler takes the parameter as text, because Litestar's own read of a
    ``datetime`` parameter takes ``86400`` (or ``8.64e4``) as Unix seconds, a day into 1970.
    With ``naive_is_utc``, a time without a timezone is read as UTC; else it is refused."""
    if text is None:
        return None
    if plus := _UNENCODED_PLUS.fullmatch(text):
        text = f"{plus[1]}+{plus[2]}"
    try:
        moment = _QUERY_TIME.validate_python(text)
        if naive_is_utc and moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return _utc(moment)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
        if "ISO 8601" not in reason:
            reason = f"not an ISO 8601 time ({reason}), e.g. 2026-01-31T09:00:00Z"
        raise InvalidInput(f"{name}: {reason}", field=name) from exc
    except ValueError as exc:
        raise InvalidInput(f"{name}: {exc}", field=name) from exc


# Requests are validated strictly (``true`` is not 1, ``"yes"`` is not a boolean, a number is
# not a string); times and enumerations arrive as JSON strings, so those alone are read laxly
# (a time from a string only: ``_text_time``).
UtcDatetime = Annotated[datetime, Strict(False), BeforeValidator(_text_time), AfterValidator(_utc)]
SourceIn = Annotated[Source, Strict(False)]
StatusIn = Annotated[Status, Strict(False)]
VisibilityIn = Annotated[Visibility, Strict(False)]
ConflictMode = Literal["off", "flag", "supersede"]
Namespace = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@\-]+$")]


def expected_version(if_match: str | None, given: int | None) -> int | None:
    """The version a conditional write expects: from ``If-Match`` (an ETag such as ``"7"`` or
    ``W/"7"``, a bare ``7``, or ``*`` for any), and/or ``expected_version``; both must agree."""
    from_header: int | None = None
    if if_match is not None and if_match.strip() != "*":
        tags = {tag.strip().removeprefix("W/").strip('"') for tag in if_match.split(",") if tag.strip()}
        if len(tags) != 1 or not next(iter(tags)).isdigit() or int(next(iter(tags))) < 1:
            raise InvalidInput(
                f'If-Match must name one version, as the ETag a read returned ("7") or the number, got {if_match!r}',
                field="If-Match",
            )
        from_header = int(next(iter(tags)))
    if from_header is not None and given is not None and from_header != given:
        raise InvalidInput(
            f"If-Match names version {from_header}, expected_version {given}: send one, or the same in both",
            field="expected_version",
        )
    return from_header if from_header is not None else given


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @classmethod
    def model_validate(cls, obj: Any, *, strict: bool | None = None, **options: Any) -> Self:
        # Litestar validates bodies with ``strict=False``, which would override the config
        # above and every field's own strictness: the model's config decides instead.
        return super().model_validate(obj, **options)


class StepIn(_Request):
    """One step of a procedure: what to do, and optionally which tool to call with which arguments."""

    description: str = Field(min_length=1, max_length=2000)
    tool: str | None = Field(default=None, min_length=1, max_length=200)
    arguments: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def _with_steps(metadata: dict[str, Any] | None, steps: list[StepIn] | None) -> dict[str, Any] | None:
    """A procedure's steps travel in its metadata (``engine/procedures.py``)."""
    if steps is None:
        return metadata
    return {**(metadata or {}), STEPS_KEY: [step.as_dict() for step in steps]}


class MemoryIn(_Request):
    content: str = Field(min_length=1, description="Short natural-language text to remember.")
    namespace: Namespace | None = Field(default=None, description="Memory space; `default` when absent.")
    category: str = "fact"
    base_score: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Defaults to `importance`, else by source."
    )
    importance: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Initial importance: the base score where none is given."
    )
    source: SourceIn = Source.USER_INPUT
    entities: list[str] = Field(default_factory=list)
    actor: str | None = Field(default=None, max_length=200)
    session_id: str | None = Field(default=None, max_length=200)
    visibility: VisibilityIn = Visibility.SHARED
    expire_at: UtcDatetime | None = None
    key: str | None = Field(default=None, min_length=1, max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime | None = Field(default=None, description="When it happened; defaults to now.")
    steps: list[StepIn] | None = Field(
        default=None, min_length=1, description="A procedure's ordered steps (category `procedure` only)."
    )
    conflicts: ConflictMode | None = Field(
        default=None,
        description="What this save does with older memories it replaces or contradicts: `supersede` (they leave "
        "recall), `flag` (linked only, nothing changes status) or `off`; default: the namespace's configured mode.",
    )

    def draft(self, default_namespace: str = DEFAULT_NAMESPACE, conflicts: str | None = None) -> MemoryDraft:
        return MemoryDraft(
            content=self.content,
            namespace=self.namespace or default_namespace,
            category=self.category,
            base_score=self.base_score,
            importance=self.importance,
            source=self.source,
            entities=tuple(self.entities),
            actor=self.actor,
            session_id=self.session_id,
            visibility=self.visibility,
            expire_at=self.expire_at,
            key=self.key,
            metadata=_with_steps(self.metadata, self.steps) or {},
            created_at=self.created_at,
            conflicts=self.conflicts or conflicts,
        )


class BatchIn(_Request):
    namespace: Namespace | None = Field(default=None, description="Default namespace of the batch's memories.")
    memories: list[MemoryIn] = Field(min_length=1)
    conflicts: ConflictMode | None = Field(
        default=None, description="The conflict mode of every memory of the batch that does not set its own."
    )


class MemoryPatchIn(_Request):
    namespace: Namespace = DEFAULT_NAMESPACE
    content: str | None = Field(default=None, min_length=1)
    category: str | None = None
    entities: list[str] | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    base_score: float | None = Field(default=None, ge=0.0, le=1.0)
    visibility: VisibilityIn | None = None
    expire_at: UtcDatetime | None = None
    clear_expire_at: bool = False
    key: str | None = Field(default=None, min_length=1, max_length=200)
    metadata: dict[str, Any] | None = None
    steps: list[StepIn] | None = Field(default=None, min_length=1, description="Replace a procedure's steps.")
    status: StatusIn | None = None
    reason: str = Field(default="updated", max_length=500)
    expected_version: int | None = Field(
        default=None, ge=1, description="Change only while the memory is at this version (else 412); or If-Match."
    )

    def patch(self) -> MemoryPatch:
        return MemoryPatch(
            content=self.content,
            category=self.category,
            entities=tuple(self.entities) if self.entities is not None else None,
            importance=self.importance,
            base_score=self.base_score,
            visibility=self.visibility,
            expire_at=self.expire_at,
            clear_expire_at=self.clear_expire_at,
            key=self.key,
            metadata=_with_steps(self.metadata, self.steps),
            status=self.status,
            merge_metadata=self.metadata is None,  # steps alone leave the other metadata keys
        )


def _many(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    return tuple(value) if isinstance(value, list) else (value,)


class FilterIn(_Request):
    category: str | list[str] | None = None
    source: SourceIn | list[SourceIn] | None = None
    status: StatusIn | list[StatusIn] | None = Field(default=None, description="Default: active only.")
    created_after: UtcDatetime | None = None
    created_before: UtcDatetime | None = None
    session_id: str | None = None
    metadata: dict[str, JsonScalar] = Field(default_factory=dict, description="Equality on metadata keys.")
    include_expired: bool = False
    include_superseded: bool = Field(default=False, description="Also memories a newer one superseded.")

    def to_filter(self, *, include_superseded: bool = False) -> MemoryFilter:
        statuses = _many(self.status) or (Status.ACTIVE,)
        if (include_superseded or self.include_superseded) and Status.SUPERSEDED not in statuses:
            statuses = (*statuses, Status.SUPERSEDED)
        return MemoryFilter(
            categories=_many(self.category),
            sources=_many(self.source),
            statuses=statuses,
            created_after=self.created_after,
            created_before=self.created_before,
            metadata=self.metadata,
            session_id=self.session_id,
            include_expired=self.include_expired,
        )


class RecallIn(_Request):
    query: str = Field(min_length=1)
    top_k: int = Field(default=10, ge=1, le=100)
    namespace: Namespace | None = None
    namespaces: list[Namespace] | None = Field(default=None, description="Several namespaces at once.")
    filter: FilterIn = Field(default_factory=FilterIn)
    focus: str | None = Field(
        default=None,
        min_length=1,
        description="A part of the query to weigh more (e.g. the latest message, the query being the latest "
        "few joined): each candidate's cosine blends its cosines to both ([fusion] focus).",
    )
    explain: bool = Field(default=False, description="Include each hit's score breakdown.")
    expand: list[Literal["graph"]] = Field(
        default_factory=list, description='["graph"]: each hit with its entities and typed links.'
    )
    include_superseded: bool = Field(
        default=False, description="Also return memories a newer one superseded (same as filter.include_superseded)."
    )

    def recall_filter(self) -> MemoryFilter:
        return self.filter.to_filter(include_superseded=self.include_superseded)

    def scope(self) -> list[str]:
        """``namespaces``, else ``namespace``, else the default; a ``namespace`` beside
        ``namespaces`` must be one of them (two scopes that disagree are refused, not
        settled by a rule the caller cannot see)."""
        if self.namespaces is None:
            return [self.namespace or DEFAULT_NAMESPACE]
        if not self.namespaces:
            raise InvalidInput("namespaces must name at least one namespace", field="namespaces")
        if self.namespace is not None and self.namespace not in self.namespaces:
            raise InvalidInput(
                f"namespace {self.namespace!r} is not among namespaces {self.namespaces!r}: give one of the two",
                field="namespace",
            )
        return list(dict.fromkeys(self.namespaces))


# --- responses -------------------------------------------------------------------


def memory_out(memory: Memory) -> dict[str, Any]:
    out = memory_to_dict(memory)
    steps = steps_of(memory.metadata)
    if steps:
        out["steps"] = steps
    return out


def save_out(result: SaveResult) -> dict[str, Any]:
    return {
        "memory_id": result.memory.memory_id,
        "created": result.created,
        "deduplicated": not result.created,
        "deduplicated_by": result.deduplicated_by,
        "similarity": result.similarity,
        "superseded": list(result.superseded),
        "contradicted": list(result.contradicted),
        "flagged": list(result.flagged),
        "reinstated": list(result.reinstated),
        "follows": result.follows,
        "guard": {"action": result.guard.action.value, "findings": list(result.guard.kinds)},
        "version": result.memory.version,
        "namespace": result.memory.namespace,
        "memory": memory_out(result.memory),
    }


def hit_out(hit: Hit, explain: bool) -> dict[str, Any]:
    out = memory_out(hit.memory)
    out["score"] = round(hit.score, 6)
    if explain:
        out["explanation"] = hit.breakdown.as_dict()
    return out


def links_out(neighbourhood: Neighbourhood) -> dict[str, Any]:
    me = neighbourhood.memory.memory_id
    return {
        "entities": list(neighbourhood.memory.entities),
        "edges": [
            {
                "kind": edge.kind,
                "direction": "out" if edge.src == me else "in",
                "memory_id": edge.dst if edge.src == me else edge.src,
                "status": neighbourhood.linked[edge.dst if edge.src == me else edge.src].status.value,
            }
            for edge in neighbourhood.edges
        ],
    }


def recall_out(
    result: RecallResult, explain: bool, graphs: Mapping[str, Neighbourhood] | None = None
) -> dict[str, Any]:
    return {
        "memories": [
            {
                **hit_out(hit, explain),
                "contradicts": result.contradicts.get(hit.memory.memory_id, []),
                **({"graph": links_out(graphs[hit.memory.memory_id])} if graphs is not None else {}),
            }
            for hit in result.hits
        ],
        "candidates": result.candidates,
        "exact_scan": result.exact_scan,
        **({"time_windows": [window.as_dict() for window in result.windows]} if explain else {}),
        **({"query_read_by_model": result.read_by_model} if explain else {}),
        **({"query_phrasing": result.phrasing} if explain else {}),
    }


def version_out(version: Version) -> dict[str, Any]:
    return {
        "version": version.version,
        "changed_at": to_iso(version.changed_at),
        "changed_by": version.changed_by,
        "reason": version.reason,
        "memory": memory_out(version.record),
    }
