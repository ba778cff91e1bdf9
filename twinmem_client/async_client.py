"""The asynchronous client: the same calls as ``TwinmemClient``, awaited.

from twinmem_client import AsyncTwinmemClient

async with AsyncTwinmemClient("http://127.0.0.1:8420", namespace="user:42") as memory:
    await memory.save("User's favourite colour is blue", category="preference")
    hits = await memory.recall("any suggestions for cool-toned colours?", top_k=5)
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import IO, Any, TypeVar

import httpx

from twinmem_client import calls
from twinmem_client._base import (
    BACKOFF_S,
    DEFAULT_NAMESPACE,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    KEEP_ALIVE_S,
    ClientBase,
)
from twinmem_client.errors import error_for
from twinmem_client.models import BatchResult, Deleted, Hit, Memory, Page, SaveResult, Version

T = TypeVar("T")
JsonDict = dict[str, Any]


class AsyncTwinmemClient(ClientBase):
    """Connection pools to one twinmem service; ``aclose`` it (or use ``async with``) when done.

    A connection belongs to the event loop that opened it, so the client keeps one pool per
    running loop: it works in every loop it is used in (each ``asyncio.run`` of an agent, say),
    and a loop's pool is closed when ``asyncio.run`` (or ``loop.shutdown_asyncgens``) shuts
    that loop down, by ``aclose`` in that loop, or, once the loop is closed, by ``aclose`` in
    any loop. A ``transport`` given is the one pool's, in whichever loop uses it: the caller
    manages it.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        token: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, namespace, token, timeout, retries)
        self._transport = transport
        self._shared: httpx.AsyncClient | None = self._new_pool() if transport is not None else None
        self._pools: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}
        # Per loop, an async generator that closes the loop's pool when it is finalised: a
        # loop's shutdown (``asyncio.run`` calls ``shutdown_asyncgens``) closes its generators.
        self._closers: dict[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = {}

    async def __aenter__(self) -> AsyncTwinmemClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool of the running loop and those of loops already closed; a pool of
        another loop still running is left to it (it closes when that loop shuts down, or by
        ``aclose`` there). A loop closed without ``shutdown_asyncgens`` did not close its
        pool: its idle connections are closed here, and one whose socket only that loop
        could close (its transport calls into the loop) is left to the garbage collector."""
        if self._shared is not None:
            await self._shared.aclose()
            return
        closer = self._closers.pop(asyncio.get_running_loop(), None)
        if closer is not None:
            await closer.aclose()
        for gone in [loop for loop in self._pools if loop.is_closed()]:
            self._closers.pop(gone, None)
            await _close_orphan(self._pools.pop(gone))

    def _new_pool(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers=self.headers,
            timeout=self.timeout,
            transport=self._transport,
            limits=httpx.Limits(keepalive_expiry=KEEP_ALIVE_S),
        )

    async def _http(self) -> httpx.AsyncClient:
        """The running loop's pool, opened on its first call there."""
        if self._shared is not None:
            return self._shared
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            for gone in [other for other in self._pools if other.is_closed()]:  # closed without shutting down
                self._closers.pop(gone, None)
                await _close_orphan(self._pools.pop(gone))
            pool = self._pools[loop] = self._new_pool()
            closer = self._closes(loop, pool)
            await closer.__anext__()
            self._closers[loop] = closer
        return pool

    async def _closes(self, loop: asyncio.AbstractEventLoop, pool: httpx.AsyncClient) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            if self._pools.get(loop) is pool:
                del self._pools[loop]
                self._closers.pop(loop, None)
            await pool.aclose()

    async def send(self, call: calls.Call[T]) -> T:
        """Send one call; retry an idempotent one after a connection error; raise typed errors."""
        attempts = self._attempts(call)
        for attempt in range(attempts):
            try:
                http = await self._http()
                response = await http.request(call.method, call.path, **self._request_args(call))
            except httpx.TransportError as exc:
                if attempt + 1 == attempts or not self._sent_again(call.method, exc):
                    raise self._failed(call, exc) from exc
                await asyncio.sleep(BACKOFF_S * 2**attempt)
                continue
            return self._answer(call, response)
        raise AssertionError("unreachable")  # pragma: no cover

    # --- memories ------------------------------------------------------------------

    async def health(self) -> JsonDict:
        return await self.send(calls.health())

    async def save(self, content: str, *, namespace: str | None = None, **fields: Any) -> SaveResult:
        """Save one memory; ``fields`` are the optional record fields (category, entities, key,
        metadata, source, visibility, expire_at, created_at, conflicts, ...)."""
        return await self.send(calls.save(self._ns(namespace), content, fields))

    async def save_batch(
        self, memories: Sequence[Mapping[str, Any]], *, namespace: str | None = None, conflicts: str | None = None
    ) -> BatchResult:
        return await self.send(calls.save_batch(self._ns(namespace), memories, conflicts))

    async def recall(
        self,
        query: str,
        *,
        top_k: int = 10,
        namespace: str | None = None,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        explain: bool = False,
        expand: Sequence[str] = (),
        include_superseded: bool = False,
        focus: str | None = None,
    ) -> list[Hit]:
        """``focus``: a part of ``query`` to weigh more (the latest message of several joined).
        ``namespaces``: several at once (with ``namespace`` too, it must be among them); the
        client's namespace only where neither is given."""
        if namespaces is None:
            namespace = self._ns(namespace)
        fields: dict[str, Any] = {"top_k": top_k, "filter": filter, "explain": explain or None}
        fields |= {"expand": list(expand), "include_superseded": include_superseded or None, "focus": focus}
        return await self.send(calls.recall(namespace, namespaces, query, fields))

    async def get(self, memory_id: str, *, namespace: str | None = None) -> Memory:
        return await self.send(calls.get(self._ns(namespace), memory_id))

    async def history(self, memory_id: str, *, namespace: str | None = None) -> builtins.list[Version]:
        return await self.send(calls.history(self._ns(namespace), memory_id))

    async def list(
        self, *, namespace: str | None = None, limit: int = 50, cursor: str | None = None, **filters: Any
    ) -> Page:
        """One page, newest first; filters: category, source, status, created_after, created_before, session_id."""
        return await self.send(calls.list_page(self._ns(namespace), {"limit": limit, "cursor": cursor, **filters}))

    async def iter_memories(
        self, *, namespace: str | None = None, page_size: int = 200, **filters: Any
    ) -> AsyncIterator[Memory]:
        """Every memory of a listing, page after page."""
        cursor: str | None = None
        while True:
            page = await self.list(namespace=namespace, limit=page_size, cursor=cursor, **filters)
            for memory in page.memories:
                yield memory
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def by_key(self, key: str, *, namespace: str | None = None) -> builtins.list[Memory]:
        """The active memories that carry the explicit ``key``, newest first."""
        return await self.send(calls.by_key(self._ns(namespace), key))

    async def namespaces(self, prefix: str = "", *, limit: int = 1000) -> builtins.list[str]:
        """Namespaces that hold memories and that this caller may read."""
        return await self.send(calls.namespaces(prefix, limit))

    async def update(self, memory_id: str, *, namespace: str | None = None, **changes: Any) -> Memory:
        """A new version; pass ``expected_version=N`` to change it only while it is at version N."""
        return await self.send(calls.update(self._ns(namespace), memory_id, changes))

    async def delete(
        self, memory_id: str, *, namespace: str | None = None, hard: bool = False, expected_version: int | None = None
    ) -> Deleted:
        return await self.send(calls.delete(self._ns(namespace), memory_id, hard, expected_version))

    # --- lifecycle -----------------------------------------------------------------

    async def restore(self, memory_id: str, *, namespace: str | None = None) -> Memory:
        return await self.send(calls.restore(self._ns(namespace), memory_id))

    async def rollback(
        self, memory_id: str, version: int, *, namespace: str | None = None, expected_version: int | None = None
    ) -> Memory:
        return await self.send(calls.rollback(self._ns(namespace), memory_id, version, expected_version))

    async def rollback_namespace(self, as_of: datetime, *, namespace: str | None = None) -> JsonDict:
        return await self.send(calls.rollback_namespace(self._ns(namespace), as_of))

    async def consolidate(self, *, namespace: str | None = None, dry_run: bool = False) -> JsonDict:
        return await self.send(calls.consolidate(self._ns(namespace), dry_run))

    async def reembed_status(self) -> JsonDict:
        return await self.send(calls.reembed_status())

    # --- the association network ---------------------------------------------------

    async def neighbourhood(self, memory_id: str, *, namespace: str | None = None) -> JsonDict:
        return await self.send(calls.neighbourhood(self._ns(namespace), memory_id))

    async def chain(self, memory_id: str, *, namespace: str | None = None) -> builtins.list[Memory]:
        return await self.send(calls.chain(self._ns(namespace), memory_id))

    async def entity_memories(
        self, name: str, *, namespace: str | None = None, include_superseded: bool = False, limit: int = 50
    ) -> builtins.list[Memory]:
        return await self.send(calls.entity_memories(self._ns(namespace), name, include_superseded, limit))

    # --- portability ---------------------------------------------------------------

    async def export(
        self, *, namespace: str | None = None, versions: bool = False, vectors: bool = False
    ) -> AsyncIterator[bytes]:
        """The namespace as JSON Lines, streamed: one line (bytes, with its newline) at a time."""
        params = calls.export_params(self._ns(namespace), versions, vectors)
        attempts = 1 + self.retries
        for attempt in range(attempts):
            started = False  # once a line is handed out, a failure is not retried
            try:
                http = await self._http()
                async with http.stream("GET", "/v1/export", params=params) as response:
                    if response.is_error:
                        await response.aread()
                        raise error_for(response)
                    async for line in response.aiter_lines():
                        started = True
                        yield (line + "\n").encode()
                return
            except httpx.TransportError as exc:
                if started or attempt + 1 == attempts:
                    raise self._export_failed(exc) from exc
                await asyncio.sleep(BACKOFF_S * 2**attempt)

    async def import_file(
        self,
        data: bytes | IO[bytes],
        *,
        namespace: str | None = None,
        format: str = "twinmem",
        map: str | None = None,
        session_id: str | None = None,
    ) -> JsonDict:
        """Import a file (all or nothing): the report, or ``ValidationFailed`` whose ``body`` holds it."""
        body = data if isinstance(data, bytes) else data.read()
        fields = {"namespace": namespace, "format": format, "map": map, "session_id": session_id}
        return await self.send(calls.import_file(body, fields))

    # --- admin ---------------------------------------------------------------------

    async def create_token(self, agent: str, grants: Sequence[str]) -> JsonDict:
        """A new agent token (the answer's ``token`` is shown this once)."""
        return await self.send(calls.create_token(agent, grants))

    async def tokens(self) -> builtins.list[JsonDict]:
        return await self.send(calls.tokens())

    async def revoke_token(self, token_id: str) -> JsonDict:
        return await self.send(calls.revoke_token(token_id))

    async def block(self, kind: str, value: str, reason: str | None = None) -> JsonDict:
        """Block an agent or a session (``kind`` is ``"agent"`` or ``"session"``): its writes
        are refused and what it wrote is quarantined; the answer lists those ids."""
        return await self.send(calls.block(kind, value, reason))

    async def blocks(self) -> builtins.list[JsonDict]:
        return await self.send(calls.blocks())

    async def unblock(self, kind: str, value: str) -> JsonDict:
        return await self.send(calls.unblock(kind, value))

    async def audit(self, **filters: Any) -> builtins.list[JsonDict]:
        """Audit entries, newest first; filters: actor, action, namespace, since, limit."""
        return await self.send(calls.audit(filters))

    async def audit_after(self, after_seq: int, **filters: Any) -> JsonDict:
        """Audit entries after position ``after_seq`` (0: from the first), oldest first, with
        ``next_after_seq``, the cursor to pass next: tailing the log this way sees every entry
        once (``since`` can miss some: times are not in chain order). Same filters as ``audit``."""
        return await self.send(calls.audit_after(after_seq, filters))

    # --- short-term sessions and the prompt context ------------------------------------

    async def append_messages(
        self, session_id: str, messages: Sequence[Mapping[str, Any]], *, namespace: str | None = None, **options: Any
    ) -> JsonDict:
        """Append messages (``{"role", "content", "name"?, "metadata"?, "at"?}``, oldest first) to
        a session, opening it if needed; ``options``: max_tokens, expire_after_seconds, visibility."""
        return await self.send(calls.append_messages(self._ns(namespace), session_id, messages, options))

    async def session_window(
        self, session_id: str, *, namespace: str | None = None, max_tokens: int | None = None, agent: str | None = None
    ) -> JsonDict:
        """The session's window (``window``: messages oldest first) within ``max_tokens``."""
        return await self.send(calls.session_window(self._ns(namespace), session_id, max_tokens, agent))

    async def sessions_page(
        self, *, namespace: str | None = None, agent: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> JsonDict:
        """One page of open sessions, oldest first (``sessions``; ``next_cursor`` to pass back
        for the next, None on the last): the caller's own; every agent's (or ``agent``'s) for
        a namespace admin."""
        return await self.send(calls.sessions_page(self._ns(namespace), agent, limit, cursor))

    async def iter_sessions(
        self, *, namespace: str | None = None, agent: str | None = None, page_size: int = 200
    ) -> AsyncIterator[JsonDict]:
        """Every open session, page after page."""
        cursor: str | None = None
        while True:
            page = await self.sessions_page(namespace=namespace, agent=agent, limit=page_size, cursor=cursor)
            for session in page["sessions"]:
                yield session
            cursor = page.get("next_cursor")
            if cursor is None:
                return

    async def sessions(self, *, namespace: str | None = None, agent: str | None = None) -> builtins.list[JsonDict]:
        """Every open session (read page after page): the caller's own; every agent's (or
        ``agent``'s) for a namespace admin."""
        return [session async for session in self.iter_sessions(namespace=namespace, agent=agent)]

    async def close_session(
        self, session_id: str, *, namespace: str | None = None, agent: str | None = None
    ) -> JsonDict:
        """Close a session and promote it into long-term memory; the answer says what was kept."""
        return await self.send(calls.close_session(self._ns(namespace), session_id, agent))

    async def prompt_context(
        self,
        session_id: str,
        *,
        namespace: str | None = None,
        budget_tokens: int | None = None,
        split: Mapping[str, float] | None = None,
        query: str | None = None,
        agent: str | None = None,
    ) -> JsonDict:
        """What to put in the prompt for the next turn: ``text``, and ``sections`` and ``memory_ids``
        saying what went in. ``split``: shares of ``window``, ``memories`` and ``procedures``."""
        fields: JsonDict = {"budget_tokens": budget_tokens, "query": query, "agent": agent}
        fields["split"] = dict(split) if split else None
        return await self.send(calls.prompt_context(self._ns(namespace), session_id, fields))


async def _close_orphan(pool: httpx.AsyncClient) -> None:
    """Close ``pool``, whose event loop is closed. Closing a connection still open there
    calls into that loop, which raises "Event loop is closed": such a connection is left,
    its socket closed when the garbage collector takes its transport."""
    try:
        await pool.aclose()
    except RuntimeError:
        if not pool.is_closed:  # httpx marks the client closed before it closes its connections
            raise
