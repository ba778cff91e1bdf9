"""HTTP handlers and wire schemas of short-term sessions and the prompt context.

A session belongs to the agent that writes it (its token's agent; ``local`` without
tokens) in one namespace. Appending needs ``w`` on the namespace; reading, listing
and the prompt context need ``r`` or ``w``; closing (which promotes, so writes) needs
``w``. Another agent's session is reached only by an admin of the namespace, who names
it with ``agent``; for anyone else it does not exist under their own id, and naming
another agent is refused (403) before anything is looked up.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, get, post
from litestar.datastructures import State
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from pydantic import Field

from api.auth import Access, Caller
from api.schemas import Namespace, UtcDatetime, VisibilityIn, _Request
from engine.codec import to_iso
from engine.errors import Forbidden
from engine.prompt_context import Shares, context_out
from engine.records import DEFAULT_NAMESPACE, Reach, Scope
from engine.security import Permission
from engine.session_records import Role, SessionInfo, SessionRef
from engine.sessions import MAX_SESSIONS_PAGE, SESSIONS_PAGE, MessageDraft, Promotion, Sessions, Window

RoleIn = Annotated[Role, Field(strict=False)]
AgentParam = Annotated[
    str | None,
    QueryParameter(min_length=1, max_length=200, description="Another agent's session (namespace admins only)."),
]


class MessageIn(_Request):
    role: RoleIn
    content: str = Field(min_length=1)
    name: str | None = Field(default=None, min_length=1, max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)
    at: UtcDatetime | None = Field(default=None, description="When it was said; defaults to now.")

    def draft(self) -> MessageDraft:
        return MessageDraft(self.role, self.content, self.name, self.metadata, self.at)


class AppendIn(_Request):
    namespace: Namespace = DEFAULT_NAMESPACE
    messages: list[MessageIn] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000, description="The window's token budget.")
    expire_after_seconds: float | None = Field(
        default=None, gt=0, le=31_536_000, description="Time to live, refreshed by every append."
    )
    visibility: VisibilityIn | None = Field(
        default=None,
        description="Of the memories these messages' promotion writes; left out, the session's own "
        "(set by its first append; shared unless that one gives one).",
    )


class SessionIn(_Request):
    namespace: Namespace = DEFAULT_NAMESPACE
    agent: str | None = Field(default=None, min_length=1, max_length=200)


class SplitIn(_Request):
    window: float = Field(ge=0)
    memories: float = Field(ge=0)
    procedures: float = Field(ge=0)


class ContextIn(_Request):
    namespace: Namespace = DEFAULT_NAMESPACE
    agent: str | None = Field(default=None, min_length=1, max_length=200)
    budget_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    split: SplitIn | None = Field(default=None, description="Shares of the budget; default from [sessions].")
    query: str | None = Field(
        default=None,
        min_length=1,
        max_length=4000,
        description="Default: the latest user messages ([sessions] context_query_messages), joined.",
    )


def info_out(info: SessionInfo) -> dict[str, Any]:
    return {
        "session_id": info.ref.session_id,
        "namespace": info.ref.namespace,
        "agent": info.ref.agent,
        "state": info.state.value,
        "created_at": to_iso(info.created_at),
        "updated_at": to_iso(info.updated_at),
        "expires_at": to_iso(info.expires_at),
        "max_tokens": info.max_tokens,
        "expire_after_seconds": info.expire_after_seconds,
        "tokens": info.tokens,
        "messages": info.messages,
        "appended": info.appended,
        "visibility": info.visibility,
    }


def window_out(window: Window) -> dict[str, Any]:
    return {
        **info_out(window.info),
        "window": [
            {
                "role": m.role.value,
                "content": m.content,
                "name": m.name,
                "at": to_iso(m.at),
                "tokens": m.tokens,
                "metadata": dict(m.metadata),
            }
            for m in window.messages
        ],
        "window_tokens": window.tokens,
        "left_out": window.left_out,
    }


def promotion_out(promotion: Promotion) -> dict[str, Any]:
    return {
        "session_id": promotion.ref.session_id,
        "namespace": promotion.ref.namespace,
        "agent": promotion.ref.agent,
        "reason": promotion.reason,
        "messages": promotion.messages,
        "candidates": promotion.candidates,
        "created": promotion.created,
        "deduplicated": promotion.deduplicated,
        "already_promoted": promotion.already_promoted,
        "superseded": promotion.superseded,
        "dropped": promotion.dropped,
        "quarantined": promotion.quarantined,
        "linked": promotion.linked,
    }


def _sessions(state: State) -> Sessions:
    sessions: Sessions = state.sessions
    return sessions


def _ref(access: Access, namespace: str, session_id: str, agent: str | None, need: Permission) -> SessionRef:
    """The session asked for, once the caller may touch it: ``need`` on the namespace (a
    read also passes with ``w`` alone: an agent reads what it writes), and for another
    agent's session an admin grant on it."""
    access.record.namespaces.append(namespace)
    principal = access.principal
    if need is Permission.READ:
        allowed = principal.may(namespace, Permission.READ) or principal.may(namespace, Permission.WRITE)
        if not allowed:
            raise Forbidden(f"no read or write grant on namespace {namespace!r}")
    else:
        access.allow(namespace, need)
    if agent is not None and agent != access.actor:
        access.allow(namespace, Permission.ADMIN)
    return SessionRef(namespace, agent or access.actor, session_id)


class SessionController(Controller):
    path = "/v1/sessions"
    tags = ["sessions"]

    @post("/{session_id:str}/messages", sync_to_thread=True, status_code=200)
    def append_messages(
        self, state: State, access: Caller, session_id: FromPath[str], data: JSONBody[AppendIn]
    ) -> dict[str, Any]:
        """Append messages (oldest first) to the caller's session, opening it if needed; the
        oldest roll out past its token budget and its time to live starts again. The answer's
        ``visibility`` is what these messages' promotion writes; ``session_visibility`` the
        session's own, for appends that leave it out."""
        ref = _ref(access, data.namespace, session_id, None, Permission.WRITE)
        reach = access.write_scope(data.namespace).reach(data.namespace) or Reach.OWN
        access.note(content="\n".join(m.content for m in data.messages))
        info = _sessions(state).append(
            ref,
            [m.draft() for m in data.messages],
            reach=reach,
            max_tokens=data.max_tokens,
            expire_after_seconds=data.expire_after_seconds,
            visibility=data.visibility,
        )
        # What this append's messages are promoted with (each append's own travels with its
        # messages), and the session's own, which an append that leaves it out gets.
        own = data.visibility.value if data.visibility is not None else info.visibility
        return {**info_out(info), "visibility": own, "session_visibility": info.visibility}

    @get("/{session_id:str}", sync_to_thread=True)
    def session_window(
        self,
        state: State,
        access: Caller,
        session_id: FromPath[str],
        namespace: Annotated[str, QueryParameter(min_length=1, max_length=128)] = DEFAULT_NAMESPACE,
        max_tokens: Annotated[int | None, QueryParameter(ge=0, le=1_000_000)] = None,
        agent: AgentParam = None,
    ) -> dict[str, Any]:
        """The session's window, newest last, trimmed to ``max_tokens`` (default: the session's budget)."""
        ref = _ref(access, namespace, session_id, agent, Permission.READ)
        return window_out(_sessions(state).window(ref, max_tokens=max_tokens))

    @get("/", sync_to_thread=True)
    def list_sessions(
        self,
        state: State,
        access: Caller,
        namespace: Annotated[str, QueryParameter(min_length=1, max_length=128)] = DEFAULT_NAMESPACE,
        agent: AgentParam = None,
        limit: Annotated[int, QueryParameter(ge=1, le=MAX_SESSIONS_PAGE)] = SESSIONS_PAGE,
        cursor: FromQuery[str | None] = None,
    ) -> dict[str, Any]:
        """Open sessions of the namespace, oldest first, with cursor pagination (pass back
        ``next_cursor``): the caller's own; every agent's for a namespace admin (or one
        agent's, with ``agent``)."""
        _ref(access, namespace, "-", agent, Permission.READ)
        everyone = access.principal.may(namespace, Permission.ADMIN)
        who = agent if agent is not None else (None if everyone else access.actor)
        page = _sessions(state).sessions(namespace, who, limit=limit, cursor=cursor)
        return {"sessions": [info_out(info) for info in page.items], "next_cursor": page.next_cursor}

    @post("/{session_id:str}/close", sync_to_thread=True, status_code=200)
    def close_session(
        self, state: State, access: Caller, session_id: FromPath[str], data: JSONBody[SessionIn]
    ) -> dict[str, Any]:
        """Close the session and promote it now: what the rules keep is saved as long-term
        memories through the normal write path; the answer says what happened to each."""
        ref = _ref(access, data.namespace, session_id, data.agent, Permission.WRITE)
        promotion = _sessions(state).close(ref)
        access.note(memory_ids=[*promotion.created, *promotion.deduplicated])
        return promotion_out(promotion)

    @post("/{session_id:str}/context", sync_to_thread=True, status_code=200)
    def prompt_context(
        self, state: State, access: Caller, session_id: FromPath[str], data: JSONBody[ContextIn]
    ) -> dict[str, Any]:
        """What to put in the prompt for the next turn, within ``budget_tokens``: the session
        window, the long-term memories most relevant to the latest message and matching
        procedures; as text (each memory with its date and category) and as the pieces,
        with the ids of every memory used."""
        ref = _ref(access, data.namespace, session_id, data.agent, Permission.READ)
        scope: Scope = access.read_scope([data.namespace])
        split = data.split
        shares = Shares(split.window, split.memories, split.procedures) if split is not None else None
        if data.query is not None:  # noted before it is asked, as a recall's query is, so a failure keeps it
            access.note(query=data.query)
        context = _sessions(state).context(ref, scope=scope, budget=data.budget_tokens, shares=shares, query=data.query)
        # What the recall asked, given or made of the session's messages, as a recall notes it.
        if context.query is not None:
            access.note(query=context.query if context.focus is None else f"{context.query}\n{context.focus}")
        access.note(memory_ids=context.memory_ids)
        return context_out(context)
