"""mem0-compatible routes, for applications moving from mem0's open-source REST server.

An application written against mem0's server (``POST/GET/DELETE /memories``,
``GET/PUT/DELETE /memories/{id}``, ``GET /memories/{id}/history``, ``POST /search``,
``POST /reset``) keeps its requests and its parsing of the answers: only its base URL
changes, to ``http://host:8420/mem0``. The routes are served under ``/mem0`` alone, never
at the bare paths, so they cannot clash with twinmem's own routes.

Mapping (mem0 → twinmem):

* **Who a memory belongs to.** The first of ``user_id``, ``agent_id``, ``run_id`` that a
  request names picks the namespace: ``user:<user_id>``, else ``agent:<agent_id>``, else
  ``run:<run_id>``. A character a namespace does not allow (anything but letters, digits,
  ``_``, ``-``, ``@``) is written ``.xx`` per UTF-8 byte, the rule of the LangGraph store,
  so mem0's ``user_id="42"`` and LangGraph's ``("user", "42")`` share one memory.
  The other identifiers narrow within it: ``agent_id`` is kept in the memory's metadata
  (and, without tokens, is its ``actor``), ``run_id`` is its ``session_id``. A read names
  the owner the write named: ``GET /memories?agent_id=a`` reads ``agent:a``, not the
  memories some user's request tagged with agent ``a``.
* **Adding without an LLM.** twinmem extracts nothing with a model. With ``infer`` true
  (mem0's default) each non-blank user message becomes one memory, verbatim, as
  ``user_input``; assistant, tool and system messages are context, not memories. With
  ``infer`` false, as in mem0, every non-system message is stored verbatim with its
  ``role`` (and the message's ``name`` as ``actor_id``); an assistant's as
  ``inference``, a tool's as ``tool_result``. twinmem's own write path stands in for
  mem0's LLM decisions: a message that repeats a stored memory reinforces it (event
  ``NONE``, with that memory's id); one that replaces an older memory on the same subject
  ("switch my theme to black") supersedes it, and the older one is reported with event
  ``DELETE``, since it leaves search and listing. ``memory_type="procedural_memory"``
  stores the messages as ``procedure`` memories; ``prompt`` is accepted and unused.
* **Answers** are mem0's: ``{"results": [...]}`` of items with ``id``, ``memory``,
  ``hash`` (MD5 of the text, as mem0 computes it), ``metadata`` (what the caller gave,
  without the identifiers), ``score`` (search: twinmem's fused score; ``None`` for a
  read by id), ``created_at``, ``updated_at`` and the identifiers ``user_id``,
  ``agent_id``, ``run_id``, ``actor_id``, ``role`` that apply. A history is mem0's list of
  events built from twinmem's versions: the first is ``ADD``; one that took the memory out
  of the live set (deleted, superseded, archived) is ``DELETE``; every other is ``UPDATE``.
  An add's entry for a message the write guard redacted or quarantined also carries
  ``guard`` (its action and findings), so a memory stored out of sight is not a bare ``ADD``.
* **Search** is twinmem's recall in the owner's namespace. ``limit`` (or ``top_k``,
  default 20, at most the service's 100); ``threshold`` drops hits below that fused
  score (it is not mem0's cosine scale, so tune it anew); ``filters`` may hold the
  identifiers and equality on metadata keys; mem0's operators are refused (422).
* **Differences a client can see.** A missing memory is a 404 with a message where mem0
  answers ``null`` (get), ``[]`` (history) or a 500; deleting is soft (the history stays,
  ``/v1`` can restore it); ``POST /reset`` soft-deletes every memory of the ``user:``,
  ``agent:`` and ``run:`` namespaces and needs an admin grant on ``*`` when serving with
  tokens; unknown body fields are refused (422) instead of ignored; ``POST /configure``
  is not served (twinmem is configured by its TOML file).
* **Auth** is twinmem's: with ``[auth] mode = "tokens"`` every route needs a token, sent
  as ``Authorization: Bearer <token>`` or, as mem0's clients send a key, ``X-API-Key:
  <token>`` or ``Authorization: Token <token>``; it gets exactly the grants it has on
  ``/v1`` for the namespace the request maps to, and every request is audited.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from litestar import Controller, delete, get, post, put
from litestar.datastructures import State
from litestar.exceptions import ClientException
from litestar.params import FromPath, JSONBody, QueryParameter
from pydantic import Field

from api.auth import MEM0_PATH, Access, Caller
from api.schemas import _Request
from engine import limits
from engine.codec import to_iso
from engine.errors import InvalidInput, MemoryNotFound, NotFound
from engine.guard import Action as GuardAction
from engine.owners import MAX_NAMESPACE, OWNERS, PREFIX, from_label, namespace_of, too_long
from engine.records import Memory, MemoryDraft, MemoryFilter, MemoryPatch, Scope, Source, Status, Version
from engine.security import Permission
from engine.service import MemoryService
from engine.text import is_blank

# The identifiers mem0 answers beside an item's fields rather than inside its metadata.
PROMOTED = ("user_id", "agent_id", "run_id", "actor_id", "role")
DEFAULT_SEARCH_LIMIT = 20
DEFAULT_LIST_LIMIT = 100
PAGE = 500
SOURCE_BY_ROLE = {"user": Source.USER_INPUT, "assistant": Source.INFERENCE, "tool": Source.TOOL_RESULT}
# Every status but deleted: what deleting all of an owner's memories sweeps.
UNDELETED = (Status.ACTIVE, Status.SUPERSEDED, Status.ARCHIVED, Status.QUARANTINED)
RETIRED = (Status.DELETED, Status.SUPERSEDED, Status.ARCHIVED)

IdParam = Annotated[str | None, QueryParameter(max_length=MAX_NAMESPACE)]
# The field a save's error names: ``memories[3].content``, or ``content`` for a save of one.
_SAVED_FIELD = re.compile(r"(?:memories\[(?P<index>\d+)\]\.)?(?P<name>content|metadata)")


@dataclass(frozen=True, slots=True)
class Owner:
    """The identifiers of one request, and the namespace the first of them picks."""

    namespace: str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    @classmethod
    def of(cls, user_id: str | None, agent_id: str | None, run_id: str | None) -> Owner:
        given: dict[str, str | None] = {}
        for name, value in zip(OWNERS, (user_id, agent_id, run_id), strict=True):
            if value is not None and not value.strip():
                raise InvalidInput(f"{name} must not be empty", field=name)
            given[name] = value.strip() if value is not None else None
        first = next((name for name in OWNERS if given[name]), None)
        if first is None:
            # mem0's server answers this with 400 and these words.
            raise ClientException("At least one identifier (user_id, agent_id, run_id) is required.")
        namespace = namespace_of(first, given[first] or "")
        problem = too_long(first, namespace)
        if problem:
            raise InvalidInput(problem, field=first)
        return cls(namespace, **given)

    def narrowing(self, base: MemoryFilter | None = None) -> MemoryFilter:
        """``base`` narrowed by the identifiers after the first (the first picked the namespace)."""
        base = base or MemoryFilter()
        metadata = dict(base.metadata)
        if self.agent_id and self.user_id:
            metadata["agent_id"] = self.agent_id
        session = self.run_id if self.run_id and (self.user_id or self.agent_id) else base.session_id
        return replace(base, metadata=metadata, session_id=session)


def identifiers(memory: Memory) -> dict[str, Any]:
    """The mem0 identifiers of a memory: the owner from its namespace, ``run_id`` from its
    session, ``agent_id``, ``actor_id`` and ``role`` from its metadata."""
    found = {key: memory.metadata[key] for key in PROMOTED if key in memory.metadata}
    for name, prefix in PREFIX.items():
        if memory.namespace.startswith(prefix):
            value = from_label(memory.namespace.removeprefix(prefix))
            if value is not None:
                found[name] = value
    if memory.session_id:
        found["run_id"] = memory.session_id
    return found


def item_out(memory: Memory, *, score: float | None = None, scored: bool = True) -> dict[str, Any]:
    """A memory as mem0's ``MemoryItem``, its identifiers beside it (``score`` only where
    mem0 has one: a read by id answers None, a listing leaves it out)."""
    metadata = {key: value for key, value in memory.metadata.items() if key not in PROMOTED}
    out: dict[str, Any] = {
        "id": memory.memory_id,
        "memory": memory.content,
        "hash": hashlib.md5(memory.content.encode()).hexdigest(),
        "metadata": metadata or None,
    }
    if scored:
        out["score"] = None if score is None else round(score, 6)
    out["created_at"] = to_iso(memory.created_at)
    out["updated_at"] = to_iso(memory.updated_at)
    return out | identifiers(memory)


def history_out(versions: Sequence[Version]) -> list[dict[str, Any]]:
    """mem0's history events of a memory, oldest first, from its kept versions."""
    events: list[dict[str, Any]] = []
    previous: Memory | None = None
    for version in versions:
        record = version.record
        if previous is None:
            event, old, new = "ADD", None, record.content
        elif record.status in RETIRED and previous.status not in RETIRED:
            event, old, new = "DELETE", previous.content, None
        else:
            event, old, new = "UPDATE", previous.content, record.content
        events.append(
            {
                "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"twinmem:{version.memory_id}:{version.version}")),
                "memory_id": version.memory_id,
                "old_memory": old,
                "new_memory": new,
                "event": event,
                "created_at": to_iso(record.created_at),
                "updated_at": None if event == "ADD" else to_iso(version.changed_at),
                "is_deleted": event == "DELETE",
                "actor_id": record.metadata.get("actor_id"),
                "role": record.metadata.get("role"),
            }
        )
        previous = record
    return events


# --- requests ----------------------------------------------------------------------

Identifier = Annotated[str | None, Field(default=None, max_length=MAX_NAMESPACE)]


class Message(_Request):
    role: str = Field(min_length=1, max_length=50, description="user, assistant, tool or system.")
    content: str = Field(description="The message's text.")
    name: str | None = Field(default=None, max_length=200, description="Who spoke; kept as actor_id.")


class AddIn(_Request):
    messages: list[Message] | str = Field(description="The conversation, or one user message as a string.")
    user_id: Identifier = None
    agent_id: Identifier = None
    run_id: Identifier = None
    metadata: dict[str, Any] | None = None
    infer: bool | None = Field(default=None, description="true (default): user messages only; false: all but system.")
    memory_type: Literal["procedural_memory"] | None = Field(
        default=None, description="procedural_memory: stored as `procedure` memories."
    )
    prompt: str | None = Field(default=None, description="Accepted for mem0's clients; twinmem runs no extraction.")


class UpdateIn(_Request):
    text: str | None = Field(default=None, min_length=1, description="The new text.")
    data: str | None = Field(default=None, min_length=1, description="The new text, as mem0's older servers named it.")
    metadata: dict[str, Any] | None = Field(default=None, description="Merged into the memory's metadata.")


class SearchIn(_Request):
    query: str = Field(min_length=1)
    user_id: Identifier = None
    agent_id: Identifier = None
    run_id: Identifier = None
    filters: dict[str, Any] | None = Field(
        default=None, description="The identifiers, and equality on metadata keys: {'topic': 'travel'}."
    )
    limit: int | None = Field(default=None, ge=1, description="At most this many results (default 20).")
    top_k: int | None = Field(default=None, ge=1, description="The same as limit, as mem0's library names it.")
    threshold: float | None = Field(default=None, ge=0.0, description="Leave out hits scoring below this.")


def _search_owner(data: SearchIn) -> tuple[Owner, dict[str, Any]]:
    """The owner named at the top level or in ``filters`` (which must agree), and the
    metadata equalities the other filter keys ask for."""
    named: dict[str, str | None] = {"user_id": data.user_id, "agent_id": data.agent_id, "run_id": data.run_id}
    metadata: dict[str, Any] = {}
    for key, value in (data.filters or {}).items():
        if key in OWNERS:
            if not isinstance(value, str):
                raise InvalidInput(f"filters.{key} must be a string", field=f"filters.{key}")
            if named[key] is not None and named[key] != value:
                raise InvalidInput(
                    f"filters.{key} ({value!r}) and {key} ({named[key]!r}) disagree: give one, or the same in both",
                    field=f"filters.{key}",
                )
            named[key] = value
        elif isinstance(value, str | int | float | bool) and value != "*":
            metadata[key] = value
        else:
            raise InvalidInput(
                f"filters.{key}: only equality with one value is supported ({{{key!r}: 'value'}}); mem0's operators, "
                "lists, '*' and AND/OR/NOT are not",
                field=f"filters.{key}",
            )
    return Owner.of(named["user_id"], named["agent_id"], named["run_id"]), metadata


# --- handlers ----------------------------------------------------------------------


def _service(state: State) -> MemoryService:
    service: MemoryService = state.service
    return service


def _drafts(data: AddIn, owner: Owner) -> Iterator[tuple[int, MemoryDraft]]:
    """The memories an add stores, each with the position of the message it comes from."""
    messages = [Message(role="user", content=data.messages)] if isinstance(data.messages, str) else data.messages
    infer = data.infer is not False
    # The identifiers come from the request and its messages, never from the given metadata
    # (a client's "role" or "actor_id" there would name another speaker), as an update's do.
    base = {k: v for k, v in (data.metadata or {}).items() if k not in PROMOTED}
    if owner.agent_id:
        base["agent_id"] = owner.agent_id
    for position, message in enumerate(messages):
        if message.role not in (*SOURCE_BY_ROLE, "system"):
            raise InvalidInput(
                f"messages[{position}].role must be user, assistant, tool or system, got {message.role!r}",
                field=f"messages[{position}].role",
            )
        if message.role == "system" or (infer and message.role != "user") or is_blank(message.content):
            continue
        metadata = dict(base)
        if not infer:
            metadata["role"] = message.role
            if message.name:
                metadata["actor_id"] = message.name
        yield (
            position,
            MemoryDraft(
                content=message.content,
                namespace=owner.namespace,
                category="procedure" if data.memory_type == "procedural_memory" else "fact",
                source=SOURCE_BY_ROLE[message.role],
                actor=owner.agent_id,
                session_id=owner.run_id,
                metadata=metadata,
            ),
        )


def _check_lengths(drafts: Sequence[MemoryDraft], positions: Sequence[int], cap: int, one_string: bool) -> None:
    """A 422 that says how to split a message longer than one memory may be. Not split here:
    each message of an add is one memory that the write path judges on its own (a repeat
    reinforces, a newer statement supersedes), and a cut piece judged alone could retire an
    unrelated memory or reinforce the wrong one; with ``infer`` true, mem0 would distil such
    a text into a few short facts, which twinmem does not do with a model."""
    for draft, position in zip(drafts, positions, strict=True):
        if len(draft.content) > cap:
            where = "messages" if one_string else f"messages[{position}].content"
            raise InvalidInput(
                f"{where} holds {len(draft.content)} characters, at most {cap} may be one memory"
                f" ([limits] max_content_chars): send it as several messages of at most {cap} characters"
                " each, in this add or in several (each message is one memory; an add stores all of its"
                " messages or none), or import a long conversation with POST /v1/import?format=langchain,"
                " which keeps a long message as ordered parts (metadata.part) linked by NEXT edges;"
                " nothing of this add was stored",
                field=where,
            )


def _at_message(error: InvalidInput, positions: Sequence[int], *, one_string: bool) -> InvalidInput:
    """A save's error about the memories of an add, naming the add's own field: the memory
    at ``memories[1]`` (or, alone in the save, ``content``) is the text of the message at
    ``positions[1]``, or ``messages`` itself where they were sent as one string (no list
    to index); the metadata is the request's."""
    found = _SAVED_FIELD.fullmatch(error.field or "")
    if found is None:
        return error
    index, name = int(found["index"] or 0), found["name"]
    if name == "content":
        error.field = "messages" if one_string else f"messages[{positions[index]}].content"
    elif name == "metadata":
        error.field = "metadata"
    return error


def _owned(
    service: MemoryService, namespace: str, flt: MemoryFilter, scope: Scope, limit: int | None = None
) -> list[Memory]:
    """The memories of ``namespace`` that pass ``flt`` (up to ``limit``), newest first."""
    found: list[Memory] = []
    cursor: str | None = None
    while limit is None or len(found) < limit:
        size = PAGE if limit is None else min(PAGE, limit - len(found))
        page = service.list_page([namespace], flt, limit=size, cursor=cursor, scope=scope)
        found.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


def _delete_owned(service: MemoryService, access: Access, namespace: str, flt: MemoryFilter) -> int:
    """Soft-delete every memory of ``namespace`` that passes ``flt`` and the caller may change."""
    scope = access.write_scope(namespace)
    doomed = _owned(service, namespace, replace(flt, statuses=UNDELETED, include_expired=True), scope)
    for memory in doomed:
        try:
            service.delete(namespace, memory.memory_id, actor=access.actor, scope=scope)
        except MemoryNotFound:
            continue  # deleted meanwhile by someone else: the outcome asked for
    access.note(memory_ids=[m.memory_id for m in doomed])
    return len(doomed)


def _locate(
    service: MemoryService, access: Access, memory_id: str, permission: Permission, *, include_deleted: bool = False
) -> tuple[Memory, Scope]:
    """A memory named by id alone, among those the caller may read (or change), and the
    scope to act on it with; the audit entry names its namespace."""
    access.note(memory_ids=[memory_id])
    home = service.home_of(memory_id)
    scope = access.find_scope([home] if home is not None else service.namespaces(), permission)
    try:
        memory = service.find(memory_id, scope.namespaces, include_deleted=include_deleted, scope=scope)
    except MemoryNotFound:
        if permission is Permission.READ:
            raise
        raise NotFound(f"memory {memory_id} not found among the memories this caller may change") from None
    if permission is Permission.READ:
        return memory, access.read_scope([memory.namespace])
    return memory, access.write_scope(memory.namespace)


class Mem0Controller(Controller):
    path = MEM0_PATH
    tags = ["mem0"]

    @post("/memories", sync_to_thread=True, status_code=200)
    def mem0_add(self, state: State, access: Caller, data: JSONBody[AddIn]) -> dict[str, Any]:
        """mem0's add: one memory per user message, or per non-system message with ``infer`` false."""
        owner = Owner.of(data.user_id, data.agent_id, data.run_id)
        positions, drafts = [], []
        for position, draft in _drafts(data, owner):
            positions.append(position)
            drafts.append(access.own(draft))
        scope = access.write_scope(owner.namespace)
        if not drafts:
            return {"results": []}
        access.note(content="\n".join(d.content for d in drafts))
        service = _service(state)
        most = service.config.limits.max_batch
        if len(drafts) > most:
            # One add is one transaction: all of it is stored, or none.
            stored = "every message but the system's" if data.infer is False else "each user message"
            raise InvalidInput(
                f"an add stores at most {most} messages as memories, got {len(drafts)} ({stored} is one): "
                "send the conversation in several adds",
                field="messages",
            )
        _check_lengths(drafts, positions, service.config.limits.max_content_chars, isinstance(data.messages, str))
        try:
            saved = service.save_batch(drafts, scope=scope)
        except InvalidInput as exc:
            raise _at_message(exc, positions, one_string=isinstance(data.messages, str)) from None
        access.note(memory_ids=[result.memory.memory_id for result in saved])
        results: list[dict[str, Any]] = []
        retired: dict[str, None] = {}
        for result in saved:
            entry: dict[str, Any] = {"id": result.memory.memory_id, "memory": result.memory.content}
            entry["event"] = "ADD" if result.created else "NONE"
            if "role" in result.memory.metadata:
                entry["actor_id"] = result.memory.metadata.get("actor_id")
                entry["role"] = result.memory.metadata["role"]
            if result.guard.action is not GuardAction.ALLOWED:
                # Beyond mem0's shape (its clients read past it): a quarantined memory is
                # stored but out of get_all and search, which a bare ADD would not say.
                entry["guard"] = {"action": result.guard.action.value, "findings": list(result.guard.kinds)}
            results.append(entry)
            retired.update(dict.fromkeys(result.superseded))
        for memory_id in retired:
            older = service.get(owner.namespace, memory_id, scope=scope)
            results.append({"id": memory_id, "memory": older.content, "event": "DELETE"})
        return {"results": results}

    @get("/memories", sync_to_thread=True)
    def mem0_list(
        self,
        state: State,
        access: Caller,
        user_id: IdParam = None,
        agent_id: IdParam = None,
        run_id: IdParam = None,
        limit: Annotated[int, QueryParameter(ge=1, le=10000)] = DEFAULT_LIST_LIMIT,
    ) -> dict[str, Any]:
        """mem0's get_all: the owner's active memories, newest first (``limit``: twinmem's, default 100)."""
        owner = Owner.of(user_id, agent_id, run_id)
        scope = access.read_scope([owner.namespace])
        found = _owned(_service(state), owner.namespace, owner.narrowing(), scope, limit)
        return {"results": [item_out(memory, scored=False) for memory in found]}

    @get("/memories/{memory_id:str}", sync_to_thread=True)
    def mem0_get(self, state: State, access: Caller, memory_id: FromPath[str]) -> dict[str, Any]:
        """One memory by id (any status but deleted)."""
        memory, _ = _locate(_service(state), access, memory_id, Permission.READ)
        return item_out(memory)

    @get("/memories/{memory_id:str}/history", sync_to_thread=True)
    def mem0_history(self, state: State, access: Caller, memory_id: FromPath[str]) -> list[dict[str, Any]]:
        """A memory's changes as mem0's events (ADD, UPDATE, DELETE), oldest first."""
        service = _service(state)
        memory, scope = _locate(service, access, memory_id, Permission.READ, include_deleted=True)
        return history_out(service.history(memory.namespace, memory_id, scope=scope))

    @post("/search", sync_to_thread=True, status_code=200)
    def mem0_search(self, state: State, access: Caller, data: JSONBody[SearchIn]) -> dict[str, Any]:
        """mem0's search: twinmem's recall within the owner's namespace."""
        service = _service(state)
        limits.check_query(data.query, service.config.limits)
        if data.limit is not None and data.top_k is not None and data.limit != data.top_k:
            raise InvalidInput(f"limit ({data.limit}) and top_k ({data.top_k}) disagree: give one", field="top_k")
        top_k = data.limit or data.top_k or DEFAULT_SEARCH_LIMIT
        if top_k > service.config.recall.max_top_k:
            raise InvalidInput(f"limit must be within 1..{service.config.recall.max_top_k}", field="limit")
        owner, metadata = _search_owner(data)
        scope = access.read_scope([owner.namespace])
        access.note(query=data.query)
        flt = owner.narrowing(MemoryFilter(metadata=metadata))
        result = service.recall(data.query, namespaces=[owner.namespace], top_k=top_k, flt=flt, scope=scope)
        hits = [hit for hit in result.hits if data.threshold is None or hit.score >= data.threshold]
        access.note(memory_ids=[hit.memory.memory_id for hit in hits])
        return {"results": [item_out(hit.memory, score=hit.score) for hit in hits]}

    @put("/memories/{memory_id:str}", sync_to_thread=True)
    def mem0_update(
        self, state: State, access: Caller, memory_id: FromPath[str], data: JSONBody[UpdateIn]
    ) -> dict[str, Any]:
        """New text and/or metadata for a memory (metadata is merged, as mem0 merges it)."""
        if data.text is not None and data.data is not None and data.text != data.data:
            raise InvalidInput("text and data are the same field: give one", field="data")
        text = data.text or data.data
        if text is None and data.metadata is None:
            raise InvalidInput("an update needs text (or data) or metadata", field="text")
        service = _service(state)
        memory, scope = _locate(service, access, memory_id, Permission.WRITE)
        # The given keys merged into the metadata under the write lock, on the record as
        # it is then (not as read here: another replica may have changed it meanwhile).
        given = None if data.metadata is None else {k: v for k, v in data.metadata.items() if k not in PROMOTED}
        access.note(content=text)
        service.update(
            memory.namespace,
            memory_id,
            MemoryPatch(content=text, metadata=given, merge_metadata=True),
            actor=access.actor,
            reason="updated through the mem0 API",
            scope=scope,
        )
        return {"message": "Memory updated successfully!"}

    @delete("/memories/{memory_id:str}", sync_to_thread=True, status_code=200)
    def mem0_delete(self, state: State, access: Caller, memory_id: FromPath[str]) -> dict[str, Any]:
        """Delete one memory (soft: its history stays)."""
        service = _service(state)
        memory, scope = _locate(service, access, memory_id, Permission.WRITE)
        service.delete(memory.namespace, memory_id, actor=access.actor, scope=scope)
        return {"message": "Memory deleted successfully"}

    @delete("/memories", sync_to_thread=True, status_code=200)
    def mem0_delete_all(
        self, state: State, access: Caller, user_id: IdParam = None, agent_id: IdParam = None, run_id: IdParam = None
    ) -> dict[str, Any]:
        """Delete every memory of the owner (soft), whatever its status."""
        owner = Owner.of(user_id, agent_id, run_id)
        _delete_owned(_service(state), access, owner.namespace, owner.narrowing())
        return {"message": "All relevant memories deleted"}

    @post("/reset", sync_to_thread=True, status_code=200)
    def mem0_reset(self, state: State, access: Caller, data: JSONBody[dict[str, Any] | None] = None) -> dict[str, Any]:
        """Delete (soft) every memory of the ``user:``, ``agent:`` and ``run:`` namespaces; admins only.
        It takes no fields (mem0's client sends none): a body that names any is refused."""
        if data:
            raise InvalidInput(f"reset takes no fields, got {', '.join(sorted(data))}", field=sorted(data)[0])
        access.require_admin()
        service = _service(state)
        for namespace in service.namespaces():
            if namespace.startswith(tuple(PREFIX.values())):
                _delete_owned(service, access, namespace, MemoryFilter())
        return {"message": "All memories reset"}
