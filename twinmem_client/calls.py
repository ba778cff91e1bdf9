"""Every endpoint as a ``Call``: method, path, parameters, body, and how to read the answer.

The sync and async clients send the same calls; only how they wait differs. A call is
idempotent when its HTTP method is (GET, PUT, DELETE): only those are retried after a
connection error, since a retried POST or PATCH could apply twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any, Generic, TypeVar
from urllib.parse import quote
from uuid import UUID

from twinmem_client.models import BatchResult, Deleted, Hit, Memory, Page, SaveResult, Version

T = TypeVar("T")
JsonDict = dict[str, Any]

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[Any], T]
    params: Mapping[str, Any] | None = None
    json: Any = None
    content: bytes | None = None

    @property
    def idempotent(self) -> bool:
        return self.method in IDEMPOTENT_METHODS


def _id(value: str) -> str:
    return quote(value, safe="")


def _wire(value: Any) -> Any:
    """``value`` as a request's JSON holds it: a datetime, date or time as its ISO 8601 text
    and a UUID as its text, inside mappings and lists too (a memory's metadata); the rest
    as it is (what JSON cannot hold, the encoder refuses)."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {key: _wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_wire(item) for item in value]
    return value


def _body(namespace: str, fields: Mapping[str, Any]) -> JsonDict:
    """A request body: ``fields`` without the ones left unset, as ``_wire`` holds them."""
    body: JsonDict = {"namespace": namespace}
    for name, value in fields.items():
        if value is not None:
            body[name] = _wire(value)
    return body


def _params(**values: Any) -> JsonDict:
    out: JsonDict = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            out[name] = value.isoformat()
        else:
            out[name] = value
    return out


def _json(data: Any) -> JsonDict:
    return dict(data)


def _memories(data: Any) -> list[Memory]:
    return [Memory.from_json(item) for item in data["memories"]]


def health() -> Call[JsonDict]:
    return Call("GET", "/health", _json)


def save(namespace: str, content: str, fields: Mapping[str, Any]) -> Call[SaveResult]:
    return Call("POST", "/v1/memory/save", SaveResult.from_json, json={**_body(namespace, fields), "content": content})


def save_batch(namespace: str, memories: Sequence[Mapping[str, Any]], conflicts: str | None) -> Call[BatchResult]:
    body = _body(namespace, {"conflicts": conflicts})
    body["memories"] = [_wire(memory) for memory in memories]
    return Call("POST", "/v1/memory/save_batch", BatchResult.from_json, json=body)


def recall(
    namespace: str | None, namespaces: Sequence[str] | None, query: str, fields: Mapping[str, Any]
) -> Call[list[Hit]]:
    """``namespace`` and ``namespaces`` go as given (the service refuses an empty list, or a
    namespace that is not among the namespaces)."""
    body: JsonDict = {k: v for k, v in fields.items() if v is not None and v != []}
    body["query"] = query
    if namespace is not None:
        body["namespace"] = namespace
    if namespaces is not None:
        body["namespaces"] = list(namespaces)
    if isinstance(body.get("filter"), Mapping):
        body["filter"] = _wire(body["filter"])
    return Call("POST", "/v1/memory/recall", lambda data: [Hit.from_json(item) for item in data["memories"]], json=body)


def get(namespace: str, memory_id: str) -> Call[Memory]:
    return Call("GET", f"/v1/memory/{_id(memory_id)}", Memory.from_json, params={"namespace": namespace})


def history(namespace: str, memory_id: str) -> Call[list[Version]]:
    return Call(
        "GET",
        f"/v1/memory/{_id(memory_id)}/history",
        lambda data: [Version.from_json(item) for item in data["versions"]],
        params={"namespace": namespace},
    )


def list_page(namespace: str, filters: Mapping[str, Any]) -> Call[Page]:
    return Call("GET", "/v1/memories", Page.from_json, params=_params(namespace=namespace, **filters))


def by_key(namespace: str, key: str) -> Call[list[Memory]]:
    return Call("GET", "/v1/memories", _memories, params={"namespace": namespace, "key": key, "limit": 500})


def namespaces(prefix: str, limit: int) -> Call[list[str]]:
    return Call(
        "GET", "/v1/namespaces", lambda data: list(data["namespaces"]), params={"prefix": prefix, "limit": limit}
    )


def update(namespace: str, memory_id: str, changes: Mapping[str, Any]) -> Call[Memory]:
    return Call("PATCH", f"/v1/memory/{_id(memory_id)}", Memory.from_json, json=_body(namespace, changes))


def delete(namespace: str, memory_id: str, hard: bool, expected_version: int | None) -> Call[Deleted]:
    params = _params(namespace=namespace, hard=hard or None, expected_version=expected_version)
    return Call("DELETE", f"/v1/memory/{_id(memory_id)}", Deleted.from_json, params=params)


def restore(namespace: str, memory_id: str) -> Call[Memory]:
    return Call("POST", f"/v1/memory/{_id(memory_id)}/restore", Memory.from_json, json={"namespace": namespace})


def rollback(namespace: str, memory_id: str, version: int, expected_version: int | None) -> Call[Memory]:
    body = _body(namespace, {"version": version, "expected_version": expected_version})
    return Call("POST", f"/v1/memory/{_id(memory_id)}/rollback", Memory.from_json, json=body)


def rollback_namespace(namespace: str, as_of: datetime) -> Call[JsonDict]:
    return Call("POST", "/v1/memory/rollback", _json, json=_body(namespace, {"as_of": as_of}))


def consolidate(namespace: str, dry_run: bool) -> Call[JsonDict]:
    return Call("POST", "/v1/memory/consolidate", _json, json={"namespace": namespace, "dry_run": dry_run})


def reembed_status() -> Call[JsonDict]:
    return Call("GET", "/v1/admin/reembed", _json)


def neighbourhood(namespace: str, memory_id: str) -> Call[JsonDict]:
    return Call("GET", f"/v1/memory/{_id(memory_id)}/graph", _json, params={"namespace": namespace})


def chain(namespace: str, memory_id: str) -> Call[list[Memory]]:
    return Call(
        "GET",
        f"/v1/memory/{_id(memory_id)}/chain",
        lambda data: [Memory.from_json(item) for item in data["chain"]],
        params={"namespace": namespace},
    )


def entity_memories(namespace: str, name: str, include_superseded: bool, limit: int) -> Call[list[Memory]]:
    # The name as a query parameter: one holding "/" ("TCP/IP") cannot be a path segment.
    params = _params(name=name, namespace=namespace, include_superseded=include_superseded, limit=limit)
    return Call("GET", "/v1/entities/memories", _memories, params=params)


def import_file(data: bytes, fields: Mapping[str, Any]) -> Call[JsonDict]:
    return Call("POST", "/v1/import", _json, params=_params(**fields), content=data)


def export_params(namespace: str, versions: bool, vectors: bool) -> JsonDict:
    return _params(namespace=namespace, versions=versions, vectors=vectors)


def create_token(agent: str, grants: Sequence[str]) -> Call[JsonDict]:
    return Call("POST", "/v1/admin/tokens", _json, json={"agent": agent, "grants": list(grants)})


def tokens() -> Call[list[JsonDict]]:
    return Call("GET", "/v1/admin/tokens", lambda data: list(data["tokens"]))


def revoke_token(token_id: str) -> Call[JsonDict]:
    return Call("DELETE", f"/v1/admin/tokens/{_id(token_id)}", _json)


def block(kind: str, value: str, reason: str | None) -> Call[JsonDict]:
    return Call("POST", "/v1/admin/blocks", _json, json={"kind": kind, "value": value, "reason": reason})


def blocks() -> Call[list[JsonDict]]:
    return Call("GET", "/v1/admin/blocks", lambda data: list(data["blocks"]))


def unblock(kind: str, value: str) -> Call[JsonDict]:
    return Call("DELETE", f"/v1/admin/blocks/{_id(kind)}/{_id(value)}", _json)


def audit(filters: Mapping[str, Any]) -> Call[list[JsonDict]]:
    return Call("GET", "/v1/admin/audit", lambda data: list(data["entries"]), params=_params(**filters))


def audit_after(after_seq: int, filters: Mapping[str, Any]) -> Call[JsonDict]:
    return Call("GET", "/v1/admin/audit", _json, params=_params(**filters, after_seq=after_seq))


# --- short-term sessions and the prompt context ------------------------------------------


def append_messages(
    namespace: str, session_id: str, messages: Sequence[Mapping[str, Any]], fields: Mapping[str, Any]
) -> Call[JsonDict]:
    body = {**_body(namespace, fields), "messages": [_wire(message) for message in messages]}
    return Call("POST", f"/v1/sessions/{_id(session_id)}/messages", _json, json=body)


def session_window(namespace: str, session_id: str, max_tokens: int | None, agent: str | None) -> Call[JsonDict]:
    params = _params(namespace=namespace, max_tokens=max_tokens, agent=agent)
    return Call("GET", f"/v1/sessions/{_id(session_id)}", _json, params=params)


def sessions_page(namespace: str, agent: str | None, limit: int, cursor: str | None) -> Call[JsonDict]:
    params = _params(namespace=namespace, agent=agent, limit=limit, cursor=cursor)
    return Call("GET", "/v1/sessions", _json, params=params)


def close_session(namespace: str, session_id: str, agent: str | None) -> Call[JsonDict]:
    return Call("POST", f"/v1/sessions/{_id(session_id)}/close", _json, json=_body(namespace, {"agent": agent}))


def prompt_context(namespace: str, session_id: str, fields: Mapping[str, Any]) -> Call[JsonDict]:
    return Call("POST", f"/v1/sessions/{_id(session_id)}/context", _json, json=_body(namespace, fields))
