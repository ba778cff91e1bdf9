"""The synchronous client: every endpoint of the twinmem HTTP API, typed.

from twinmem_client import TwinmemClient

with TwinmemClient("http://127.0.0.1:8420", namespace="user:42", token=...) as memory:
    memory.save("User's favourite colour is blue", category="preference")
    for hit in memory.recall("any suggestions for cool-toned colours?", top_k=5):
        print(hit.score, hit.content)
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterator, Mapping, Sequence
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


class TwinmemClient(ClientBase):
    """A connection pool to one twinmem service; close it (or use ``with``) when done."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        token: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, namespace, token, timeout, retries)
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=self.headers,
            timeout=timeout,
            transport=transport,
            limits=httpx.Limits(keepalive_expiry=KEEP_ALIVE_S),
        )

    def __enter__(self) -> TwinmemClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, call: calls.Call[T]) -> T:
        """Send one call; retry an idempotent one after a connection error; raise typed errors."""
        attempts = self._attempts(call)
        for attempt in range(attempts):
            try:
                response = self._http.request(call.method, call.path, **self._request_args(call))
            except httpx.TransportError as exc:
                if attempt + 1 == attempts or not self._sent_again(call.method, exc):
                    raise self._failed(call, exc) from exc
                time.sleep(BACKOFF_S * 2**attempt)
                continue
            return self._answer(call, response)
        raise AssertionError("unreachable")  # pragma: no cover

    # --- memories ------------------------------------------------------------------

    def health(self) -> JsonDict:
        return self.send(calls.health())

    def save(self, content: str, *, namespace: str | None = None, **fields: Any) -> SaveResult:
        """Save one memory; ``fields`` are the optional record fields (category, entities, key,
        metadata, source, visibility, expire_at, created_at, conflicts, ...)."""
        return self.send(calls.save(self._ns(namespace), content, fields))

    def save_batch(
        self, memories: Sequence[Mapping[str, Any]], *, namespace: str | None = None, conflicts: str | None = None
    ) -> BatchResult:
        return self.send(calls.save_batch(self._ns(namespace), memories, conflicts))

    def recall(
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
        return self.send(calls.recall(namespace, namespaces, query, fields))

    def get(self, memory_id: str, *, namespace: str | None = None) -> Memory:
        return self.send(calls.get(self._ns(namespace), memory_id))

    def history(self, memory_id: str, *, namespace: str | None = None) -> builtins.list[Version]:
        return self.send(calls.history(self._ns(namespace), memory_id))

    def list(self, *, namespace: str | None = None, limit: int = 50, cursor: str | None = None, **filters: Any) -> Page:
        """One page, newest first; filters: category, source, status, created_after, created_before,
        session_id, include_expired (a filter the service does not take is refused: ``ValidationFailed``)."""
        return self.send(calls.list_page(self._ns(namespace), {"limit": limit, "cursor": cursor, **filters}))

    def iter_memories(self, *, namespace: str | None = None, page_size: int = 200, **filters: Any) -> Iterator[Memory]:
        """Every memory of a listing, page after page."""
        cursor: str | None = None
        while True:
            page = self.list(namespace=namespace, limit=page_size, cursor=cursor, **filters)
            yield from page.memories
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def by_key(self, key: str, *, namespace: str | None = None) -> builtins.list[Memory]:
        """The active memories that carry the explicit ``key``, newest first."""
        return self.send(calls.by_key(self._ns(namespace), key))

    def namespaces(self, prefix: str = "", *, limit: int = 1000) -> builtins.list[str]:
        """Namespaces that hold memories and that this caller may read."""
        return self.send(calls.namespaces(prefix, limit))

    def update(self, memory_id: str, *, namespace: str | None = None, **changes: Any) -> Memory:
        """A new version; pass ``expected_version=N`` to change it only while it is at version N."""
        return self.send(calls.update(self._ns(namespace), memory_id, changes))

    def delete(
        self, memory_id: str, *, namespace: str | None = None, hard: bool = False, expected_version: int | None = None
    ) -> Deleted:
        return self.send(calls.delete(self._ns(namespace), memory_id, hard, expected_version))

    # --- lifecycle -----------------------------------------------------------------

    def restore(self, memory_id: str, *, namespace: str | None = None) -> Memory:
        return self.send(calls.restore(self._ns(namespace), memory_id))

    def rollback(
        self, memory_id: str, version: int, *, namespace: str | None = None, expected_version: int | None = None
    ) -> Memory:
        return self.send(calls.rollback(self._ns(namespace), memory_id, version, expected_version))

    def rollback_namespace(self, as_of: datetime, *, namespace: str | None = None) -> JsonDict:
        return self.send(calls.rollback_namespace(self._ns(namespace), as_of))

    def consolidate(self, *, namespace: str | None = None, dry_run: bool = False) -> JsonDict:
        return self.send(calls.consolidate(self._ns(namespace), dry_run))

    def reembed_status(self) -> JsonDict:
        return self.send(calls.reembed_status())

    # --- the association network ---------------------------------------------------

    def neighbourhood(self, memory_id: str, *, namespace: str | None = None) -> JsonDict:
        return self.send(calls.neighbourhood(self._ns(namespace), memory_id))

    def chain(self, memory_id: str, *, namespace: str | None = None) -> builtins.list[Memory]:
        return self.send(calls.chain(self._ns(namespace), memory_id))

    def entity_memories(
        self, name: str, *, namespace: str | None = None, include_superseded: bool = False, limit: int = 50
    ) -> builtins.list[Memory]:
        return self.send(calls.entity_memories(self._ns(namespace), name, include_superseded, limit))

    # --- portability ---------------------------------------------------------------

    def export(self, *, namespace: str | None = None, versions: bool = False, vectors: bool = False) -> Iterator[bytes]:
        """The namespace as JSON Lines, streamed: one line (bytes, with its newline) at a time."""
        params = calls.export_params(self._ns(namespace), versions, vectors)
        attempts = 1 + self.retries
        for attempt in range(attempts):
            started = False  # once a line is handed out, a failure is not retried
            try:
                with self._http.stream("GET", "/v1/export", params=params) as response:
                    if response.is_error:
                        response.read()
                        raise error_for(response)
                    for line in response.iter_lines():
                        started = True
                        yield (line + "\n").encode()
                return
            except httpx.TransportError as exc:
                if started or attempt + 1 == attempts:
                    raise self._export_failed(exc) from exc
                time.sleep(BACKOFF_S * 2**attempt)

    def import_file(
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
        return self.send(calls.import_file(body, fields))

    # --- admin ---------------------------------------------------------------------

    def create_token(self, agent: str, grants: Sequence[str]) -> JsonDict:
        """A new agent token (the answer's ``token`` is shown this once)."""
        return self.send(calls.create_token(agent, grants))

    def tokens(self) -> builtins.list[JsonDict]:
        return self.send(calls.tokens())

    def revoke_token(self, token_id: str) -> JsonDict:
        return self.send(calls.revoke_token(token_id))

    def block(self, kind: str, value: str, reason: str | None = None) -> JsonDict:
        """Block an agent or a session (``kind`` is ``"agent"`` or ``"session"``): its writes
        are refused and what it wrote is quarantined; the answer lists those ids."""
        return self.send(calls.block(kind, value, reason))

    def blocks(self) -> builtins.list[JsonDict]:
        return self.send(calls.blocks())

    def unblock(self, kind: str, value: str) -> JsonDict:
        return self.send(calls.unblock(kind, value))

    def audit(self, **filters: Any) -> builtins.list[JsonDict]:
        """Audit entries, newest first; filters: actor, action, namespace, since, limit."""
        return self.send(calls.audit(filters))

    def audit_after(self, after_seq: int, **filters: Any) -> JsonDict:
        """Audit entries after position ``after_seq`` (0: from the first), oldest first, with
        ``next_after_seq``, the cursor to pass next: tailing the log this way sees every entry
        once (``since`` can miss some: times are not in chain order). Same filters as ``audit``."""
        return self.send(calls.audit_after(after_seq, filters))

    # --- short-term sessions and the prompt context ------------------------------------

    def append_messages(
        self, session_id: str, messages: Sequence[Mapping[str, Any]], *, namespace: str | None = None, **options: Any
    ) -> JsonDict:
        """Append messages (``{"role", "content", "name"?, "metadata"?, "at"?}``, oldest first) to
        a session, opening it if needed; ``options``: max_tokens, expire_after_seconds, visibility."""
        return self.send(calls.append_messages(self._ns(namespace), session_id, messages, options))

    def session_window(
        self, session_id: str, *, namespace: str | None = None, max_tokens: int | None = None, agent: str | None = None
    ) -> JsonDict:
        """The session's window (``window``: messages oldest first) within ``max_tokens``."""
        return self.send(calls.session_window(self._ns(namespace), session_id, max_tokens, agent))

    def sessions_page(
        self, *, namespace: str | None = None, agent: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> JsonDict:
        """One page of open sessions, oldest first (``sessions``; ``next_cursor`` to pass back
        for the next, None on the last): the caller's own; every agent's (or ``agent``'s) for
        a namespace admin."""
        return self.send(calls.sessions_page(self._ns(namespace), agent, limit, cursor))

    def iter_sessions(
        self, *, namespace: str | None = None, agent: str | None = None, page_size: int = 200
    ) -> Iterator[JsonDict]:
        """Every open session, page after page."""
        cursor: str | None = None
        while True:
            page = self.sessions_page(namespace=namespace, agent=agent, limit=page_size, cursor=cursor)
            yield from page["sessions"]
            cursor = page.get("next_cursor")
            if cursor is None:
                return

    def sessions(self, *, namespace: str | None = None, agent: str | None = None) -> builtins.list[JsonDict]:
        """Every open session (read page after page): the caller's own; every agent's (or
        ``agent``'s) for a namespace admin."""
        return builtins.list(self.iter_sessions(namespace=namespace, agent=agent))

    def close_session(self, session_id: str, *, namespace: str | None = None, agent: str | None = None) -> JsonDict:
        """Close a session and promote it into long-term memory; the answer says what was kept."""
        return self.send(calls.close_session(self._ns(namespace), session_id, agent))

    def prompt_context(
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
        return self.send(calls.prompt_context(self._ns(namespace), session_id, fields))
