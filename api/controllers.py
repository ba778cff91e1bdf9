"""HTTP handlers: parse, make one engine call, shape the answer.

Handlers are synchronous and run in Litestar's thread pool: embedding and
SQLite are blocking, CPU- or disk-bound calls.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Response, delete, get, patch, post
from litestar.datastructures import State
from litestar.openapi.spec.enums import OpenAPIFormat
from litestar.params import FromPath, FromQuery, HeaderParameter, JSONBody, QueryParameter

from api import schemas
from api.auth import Caller
from api.errors import etag
from engine import limits
from engine.errors import InvalidInput
from engine.records import DEFAULT_NAMESPACE, Memory, Source, Status
from engine.security import Permission
from engine.service import MemoryService

NamespaceParam = Annotated[str, QueryParameter(min_length=1, max_length=128, description="Memory space")]
# Taken as text and read by ``schemas.query_time``: Litestar's read of a ``datetime``
# parameter takes a number as Unix seconds (``created_after=86400`` meant 1970-01-02).
QueryTime = Annotated[
    str | None,
    QueryParameter(format=OpenAPIFormat.DATE_TIME, description="ISO 8601, e.g. 2026-01-31T09:00:00Z; never a number"),
]
IfMatch = Annotated[
    str | None,
    HeaderParameter(
        name="If-Match", description='Change only while the memory is at this version: its ETag ("7") or 7.'
    ),
]


def with_etag(memory: Memory, body: dict[str, Any]) -> Response[dict[str, Any]]:
    """A single memory's answer, with its version as the ETag (send it back as If-Match)."""
    return Response(body, headers={"ETag": etag(memory.version)})


def _service(state: State) -> MemoryService:
    service: MemoryService = state.service
    return service


class MemoryController(Controller):
    path = "/v1"
    tags = ["memory"]

    @post("/memory/save", sync_to_thread=True, status_code=200)
    def save(self, state: State, access: Caller, data: JSONBody[schemas.MemoryIn]) -> Response[dict[str, Any]]:
        """Save one memory. Saving what is already stored reinforces it instead (idempotent).

        201 when a memory was created, 200 when an existing one was reinforced.
        """
        draft = access.own(data.draft())
        scope = access.write_scope(draft.namespace)
        access.note(content=draft.content)
        result = _service(state).save(draft, scope=scope)
        access.note(memory_ids=[result.memory.memory_id])
        return Response(schemas.save_out(result), status_code=201 if result.created else 200)

    @post("/memory/save_batch", sync_to_thread=True, status_code=200)
    def save_batch(self, state: State, access: Caller, data: JSONBody[schemas.BatchIn]) -> dict[str, Any]:
        """Save many memories in one transaction, embedded in one batch."""
        namespace = data.namespace or DEFAULT_NAMESPACE
        drafts = [access.own(item.draft(namespace, data.conflicts)) for item in data.memories]
        scope = access.write_scope(*dict.fromkeys(d.namespace for d in drafts))
        access.note(content="\n".join(d.content for d in drafts))
        results = _service(state).save_batch(drafts, scope=scope)
        access.note(memory_ids=[result.memory.memory_id for result in results])
        return {
            "results": [schemas.save_out(result) for result in results],
            "created": sum(result.created for result in results),
            "deduplicated": sum(not result.created for result in results),
        }

    @post("/memory/recall", sync_to_thread=True, status_code=200)
    def recall(self, state: State, access: Caller, data: JSONBody[schemas.RecallIn]) -> dict[str, Any]:
        """The memories most relevant to a query, ranked by similarity and decayed score."""
        limits.check_query(data.query, _service(state).config.limits)
        if data.focus is not None:
            limits.check_query(data.focus, _service(state).config.limits, field="focus")
        scope = access.read_scope(data.scope())
        access.note(query=data.query if data.focus is None else f"{data.query}\n{data.focus}")
        service = _service(state)
        result = service.recall(
            data.query,
            namespaces=data.scope(),
            top_k=data.top_k,
            flt=data.recall_filter(),
            scope=scope,
            focus=data.focus,
        )
        access.note(memory_ids=[hit.memory.memory_id for hit in result.hits])
        graphs = None
        if "graph" in data.expand:
            graphs = {
                hit.memory.memory_id: service.neighbourhood(hit.memory.namespace, hit.memory.memory_id, scope=scope)
                for hit in result.hits
            }
        return schemas.recall_out(result, data.explain, graphs)

    @get("/memory/{memory_id:str}", sync_to_thread=True)
    def get_memory(
        self, state: State, access: Caller, memory_id: FromPath[str], namespace: NamespaceParam = DEFAULT_NAMESPACE
    ) -> Response[dict[str, Any]]:
        """One memory by id, whatever its status except deleted; its version is the ETag."""
        access.note(memory_ids=[memory_id])
        memory = access.read_by_id(namespace, lambda scope: _service(state).get(namespace, memory_id, scope=scope))
        return with_etag(memory, schemas.memory_out(memory))

    @get("/memory/{memory_id:str}/history", sync_to_thread=True)
    def history(
        self, state: State, access: Caller, memory_id: FromPath[str], namespace: NamespaceParam = DEFAULT_NAMESPACE
    ) -> dict[str, Any]:
        """Every kept version of a memory, oldest first."""
        access.note(memory_ids=[memory_id])
        versions = access.read_by_id(
            namespace, lambda scope: _service(state).history(namespace, memory_id, scope=scope)
        )
        return {"memory_id": memory_id, "versions": [schemas.version_out(v) for v in versions]}

    @get("/memories", sync_to_thread=True)
    def list_memories(
        self,
        state: State,
        access: Caller,
        namespace: NamespaceParam = DEFAULT_NAMESPACE,
        category: FromQuery[list[str] | None] = None,
        source: FromQuery[list[Source] | None] = None,
        status: FromQuery[list[Status] | None] = None,
        created_after: QueryTime = None,
        created_before: QueryTime = None,
        session_id: FromQuery[str | None] = None,
        include_expired: Annotated[
            bool, QueryParameter(description="Also memories whose expire_at passed (archived by expiry, say).")
        ] = False,
        limit: Annotated[int, QueryParameter(ge=1, le=500)] = 50,
        cursor: FromQuery[str | None] = None,
        key: Annotated[str | None, QueryParameter(description="Only active memories with this explicit key.")] = None,
    ) -> dict[str, Any]:
        """Memories newest first, with cursor pagination (pass back ``next_cursor``); with ``key``,
        the active memories that carry that explicit key (one page; no other filter applies)."""
        scope = access.read_scope([namespace])
        if key is not None:
            others: dict[str, object] = {"category": category, "source": source, "status": status, "cursor": cursor}
            others |= {"created_after": created_after, "created_before": created_before, "session_id": session_id}
            others |= {"include_expired": include_expired or None}
            given = sorted(name for name, value in others.items() if value is not None)
            if given:
                raise InvalidInput(f"key cannot be combined with {', '.join(given)}", field="key")
            found = _service(state).by_key(namespace, key, scope=scope)
            return {"memories": [schemas.memory_out(m) for m in found[:limit]], "next_cursor": None}
        flt = schemas.FilterIn(
            category=category,
            source=source,
            status=status,
            created_after=schemas.query_time(created_after, "created_after"),
            created_before=schemas.query_time(created_before, "created_before"),
            session_id=session_id,
            include_expired=include_expired,
        ).to_filter()
        page = _service(state).list_page([namespace], flt, limit=limit, cursor=cursor, scope=scope)
        return {"memories": [schemas.memory_out(m) for m in page.items], "next_cursor": page.next_cursor}

    @get("/namespaces", sync_to_thread=True)
    def list_namespaces(
        self,
        state: State,
        access: Caller,
        prefix: Annotated[str, QueryParameter(max_length=128, description="Only namespaces starting so.")] = "",
        limit: Annotated[int, QueryParameter(ge=1, le=10000)] = 1000,
    ) -> dict[str, Any]:
        """The namespaces that hold memories of any status (soft-deleted ones count until purged)
        and that the caller may read, in order."""
        names = [ns for ns in _service(state).namespaces(prefix) if access.principal.may(ns, Permission.READ)]
        return {"namespaces": names[:limit]}

    @patch("/memory/{memory_id:str}", sync_to_thread=True)
    def update(
        self,
        state: State,
        access: Caller,
        memory_id: FromPath[str],
        data: JSONBody[schemas.MemoryPatchIn],
        if_match: IfMatch = None,
    ) -> Response[dict[str, Any]]:
        """Change a memory: a new version (re-embedded when the content changes).

        With ``If-Match`` or ``expected_version``, only while the memory is still at that
        version: 412 otherwise, and nothing is changed (read it again and retry)."""
        expected = schemas.expected_version(if_match, data.expected_version)
        scope = access.write_scope(data.namespace)
        patch = data.patch()
        access.note(memory_ids=[memory_id], content=patch.content)
        memory = _service(state).update(
            data.namespace,
            memory_id,
            patch,
            actor=access.actor,
            reason=data.reason,
            scope=scope,
            expected_version=expected,
        )
        return with_etag(memory, schemas.memory_out(memory))

    @delete("/memory/{memory_id:str}", sync_to_thread=True, status_code=200)
    def delete_memory(
        self,
        state: State,
        access: Caller,
        memory_id: FromPath[str],
        namespace: NamespaceParam = DEFAULT_NAMESPACE,
        hard: FromQuery[bool] = False,
        expected_version: Annotated[int | None, QueryParameter(ge=1)] = None,
        if_match: IfMatch = None,
    ) -> dict[str, Any]:
        """Soft-delete (kept with its history, gone from recall), or purge with ``hard=true``
        (which erases the history too, so it needs an admin grant on the namespace).
        With ``If-Match`` or ``expected_version``, only while the memory is at that version (412)."""
        expected = schemas.expected_version(if_match, expected_version)
        scope = access.write_scope(namespace)
        if hard:
            access.allow(namespace, Permission.ADMIN)
        access.note(memory_ids=[memory_id])
        deletion = _service(state).delete(
            namespace, memory_id, hard=hard, actor=access.actor, scope=scope, expected_version=expected
        )
        memory = deletion.memory
        return {
            "memory_id": memory.memory_id,
            "deleted": True,
            "hard": hard,
            "version": memory.version,
            "reinstated": list(deletion.reinstated),
        }


class HealthController(Controller):
    path = "/health"
    tags = ["service"]

    @get("/", sync_to_thread=True)
    def health(self, state: State, access: Caller) -> dict[str, Any]:
        """Liveness plus the state of the index and background work (the latter for admins
        only when serving with tokens: counts over every namespace are nobody else's business)."""
        if access.tokens_mode and not access.principal.is_admin:
            return {"status": "ok"}
        service = _service(state)
        stats = service.stats()
        # A damaged store still serves what it can read, but says so; so does a session
        # backend that is away (long-term memory goes on without it).
        sessions = getattr(state, "sessions", None)
        if sessions is not None:
            stats["sessions"] = sessions.store.health()
        healthy = stats["store_integrity"] in ("ok", "checking", "unchecked") and stats.get("sessions", "ok") == "ok"
        return {
            "status": "ok" if healthy else "degraded",
            "index_current": stats["index_seq"] == stats["store_seq"],
            **stats,
        }
