"""HTTP handlers for the association network: a memory's neighbourhood, an entity's
memories, and a supersession chain. One engine call per handler."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, get
from litestar.datastructures import State
from litestar.params import FromPath, FromQuery, QueryParameter

from api import schemas
from api.auth import Caller
from engine.codec import to_iso
from engine.ports import Edge
from engine.records import DEFAULT_NAMESPACE, Memory
from engine.service import MemoryService

NamespaceParam = Annotated[str, QueryParameter(min_length=1, max_length=128, description="Memory space")]


def _service(state: State) -> MemoryService:
    service: MemoryService = state.service
    return service


def _linked(memory: Memory) -> dict[str, Any]:
    return {
        "memory_id": memory.memory_id,
        "content": memory.content,
        "status": memory.status.value,
        "category": memory.category,
        "created_at": to_iso(memory.created_at),
    }


def _edge(edge: Edge, me: str, linked: dict[str, Memory]) -> dict[str, Any]:
    other = edge.dst if edge.src == me else edge.src
    return {
        "kind": edge.kind,
        "direction": "out" if edge.src == me else "in",
        "src": edge.src,
        "dst": edge.dst,
        "created_at": to_iso(edge.created_at),
        "memory": _linked(linked[other]),
    }


class GraphController(Controller):
    path = "/v1"
    tags = ["graph"]

    @get("/memory/{memory_id:str}/graph", sync_to_thread=True)
    def neighbourhood(
        self, state: State, access: Caller, memory_id: FromPath[str], namespace: NamespaceParam = DEFAULT_NAMESPACE
    ) -> dict[str, Any]:
        """A memory, its entities, and its links in and out with the linked memories."""
        access.note(memory_ids=[memory_id])
        found = access.read_by_id(
            namespace, lambda scope: _service(state).neighbourhood(namespace, memory_id, scope=scope)
        )
        edges = [_edge(edge, memory_id, found.linked) for edge in found.edges]
        return {
            "memory": schemas.memory_out(found.memory),
            "entities": list(found.memory.entities),
            "edges_out": [edge for edge in edges if edge["direction"] == "out"],
            "edges_in": [edge for edge in edges if edge["direction"] == "in"],
        }

    @get("/entities/{name:str}/memories", sync_to_thread=True)
    def entity_memories(
        self,
        state: State,
        access: Caller,
        name: FromPath[str],
        namespace: NamespaceParam = DEFAULT_NAMESPACE,
        include_superseded: FromQuery[bool] = False,
        limit: Annotated[int, QueryParameter(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        """Memories that mention an entity, newest first. Names link by key: "Blue" finds "蓝色"."""
        return self._entity_memories(state, access, name, namespace, include_superseded, limit)

    @get("/entities/memories", sync_to_thread=True)
    def entity_memories_by_query(
        self,
        state: State,
        access: Caller,
        name: Annotated[str, QueryParameter(min_length=1, description="the entity's name")],
        namespace: NamespaceParam = DEFAULT_NAMESPACE,
        include_superseded: FromQuery[bool] = False,
        limit: Annotated[int, QueryParameter(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        """The same, the name given as a query parameter: a name holding "/" ("TCP/IP")
        cannot be one segment of a path, encoded or not (the router decodes it first)."""
        return self._entity_memories(state, access, name, namespace, include_superseded, limit)

    def _entity_memories(
        self, state: State, access: Caller, name: str, namespace: str, include_superseded: bool, limit: int
    ) -> dict[str, Any]:
        scope = access.read_scope([namespace])
        memories = _service(state).entity_memories(
            namespace, name, include_superseded=include_superseded, limit=limit, scope=scope
        )
        return {"entity": name, "memories": [schemas.memory_out(m) for m in memories]}

    @get("/memory/{memory_id:str}/chain", sync_to_thread=True)
    def chain(
        self, state: State, access: Caller, memory_id: FromPath[str], namespace: NamespaceParam = DEFAULT_NAMESPACE
    ) -> dict[str, Any]:
        """The supersession chain through a memory, newest first (along SUPERSEDES)."""
        access.note(memory_ids=[memory_id])
        chain = access.read_by_id(namespace, lambda scope: _service(state).chain(namespace, memory_id, scope=scope))
        return {"memory_id": memory_id, "chain": [schemas.memory_out(m) for m in chain]}
