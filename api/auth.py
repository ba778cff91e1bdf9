"""Who is calling, what they may touch, and the audit entry every request leaves.

Three parts, in the order a request meets them:

* ``AuditMiddleware`` wraps every routed request. It opens the request's audit
  record (a request id, returned as ``X-Request-Id``), lets the request run, and
  appends one entry to the audit log with the status it ended with, before the
  response's first byte is sent (a streamed export included) or when the request
  failed. When the entry cannot be written (the disk is full), the client gets a 503
  that says so in place of the answer, never an answer the log does not hold.
  Handlers only add detail to the record; the entry is written whether or not
  they do, so no handler can leave a request out of the log.
* ``authenticate`` (an app-wide guard) resolves the ``Principal``: in ``[auth]
  mode = "local"`` the local agent with full rights, in ``"tokens"`` the owner
  of the bearer token, or 401; then applies the per-token rate limit, if one is
  configured (429 with ``Retry-After``, ``api/ratelimit.py``), to every route but
  ``/health``. A failed authentication
  is counted against its client address: past that address's budget it is answered 429,
  and the failures the log does not record one by one are counted in one entry now and
  then (``FailedAuthReport``). A handler missing from ``ACTIONS`` is refused to
  everyone but admins, so a new endpoint is closed until someone decides what it is.
* ``Access`` (the ``access`` dependency) is the one helper handlers call. It
  turns the caller's grants into the ``Scope`` every engine read takes
  (``read_scope``; ``write_scope`` for changes, 403 without a write grant, before
  the engine is asked anything), and ``read_by_id`` answers a memory out of sight
  exactly like a missing one.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import anyio.to_thread
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency
from litestar.enums import ScopeType
from litestar.exceptions import TooManyRequestsException
from litestar.handlers.base import BaseRouteHandler
from litestar.types import ASGIApp, Message, Receive, Send
from litestar.types import Scope as ASGIScope

from api.ratelimit import FailedAuthLimiter, RateLimiter, Tally, address_key, retry_after
from engine import guard
from engine.codec import to_iso
from engine.errors import Forbidden, MemoryNotFound, SourceBlocked, StoreError, Unauthenticated
from engine.ports import BlockList, SecurityStore
from engine.records import MemoryDraft, Reach, Scope, utcnow
from engine.security import (
    AUDIT_MAX_IDS,
    CONFIG_TOKEN_PREFIX,
    LOCAL_PRINCIPAL,
    AuditEvent,
    Permission,
    Principal,
    content_sha256,
    hash_token,
    listed_ids,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

ANONYMOUS = "anonymous"
AUDIT_KEY = "twinmem_audit"
# app.state key of the RateLimiter ([limits] requests_per_minute), absent when off.
RATE_LIMITER = "rate_limiter"
# app.state key of the FailedAuthLimiter ([limits] failed_auths_per_second; tokens mode), absent when off.
AUTH_LIMITER = "auth_limiter"
# The action of the entries that count failed authentications not logged one by one.
AUTHENTICATE = "authenticate"
# The addresses such an entry names, the most failures first; the rest are counted together.
REPORT_ADDRESSES = 20

# Handler name → the action its audit entries record (None: authenticated, not audited).
ACTIONS: dict[str, str | None] = {
    "save": "save",
    "save_batch": "save",
    "recall": "recall",
    "get_memory": "read",
    "history": "read",
    "list_memories": "list",
    "list_namespaces": "list",
    "update": "update",
    "delete_memory": "delete",
    "export": "export",
    "import_": "import",
    "consolidate": "consolidate",
    "rollback_namespace": "rollback",
    "rollback_memory": "rollback",
    "restore": "restore",
    "neighbourhood": "read",
    "entity_memories": "read",
    "entity_memories_by_query": "read",
    "chain": "read",
    "reembed": "admin",
    "create_token": "admin",
    "list_tokens": "admin",
    "revoke_token": "admin",
    "audit_log": "admin",
    "block_source": "admin",
    "list_blocks": "admin",
    "unblock_source": "admin",
    "append_messages": "session",
    "session_window": "session",
    "list_sessions": "session",
    "close_session": "session",
    "prompt_context": "recall",
    "mem0_add": "save",
    "mem0_list": "list",
    "mem0_get": "read",
    "mem0_history": "read",
    "mem0_search": "recall",
    "mem0_update": "update",
    "mem0_delete": "delete",
    "mem0_delete_all": "delete",
    "mem0_reset": "delete",
    "health": None,
    "options_handler": None,  # Litestar's automatic OPTIONS answer
}
# Handlers the per-token rate limit leaves alone: a liveness probe neither spends the
# budget of the agent whose token it carries nor is refused when that budget is spent. It is
# still authenticated (a probe without a valid token is a failed authentication, counted per
# address), and answers a non-admin a constant: it is no way round the limit to more work.
NOT_RATE_LIMITED = frozenset({"health"})
# Served to anyone: the API description.
OPEN_PATHS = ("/schema",)
# Where the mem0-compatible routes live (api/mem0.py).
MEM0_PATH = "/mem0"


@dataclass
class AuditRecord:
    """What one request did, filled in as it runs."""

    request_id: str
    action: str | None = None
    actor: str = ANONYMOUS
    namespaces: list[str] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)
    content_sha256: str | None = None
    principal: Principal | None = None
    # The SHA-256 of the token the request carried, so a long request can ask again
    # whether it still holds (``Access.revoked``); never written to the log.
    token_hash: str | None = None
    # False for a failed authentication past the log's budget: counted, not written one by one.
    logged: bool = True
    # What the entry says of a refusal the status alone does not explain (an expired token).
    detail: str | None = None


def _record(scope: ASGIScope) -> AuditRecord | None:
    state: dict[str, Any] = scope.setdefault("state", {})
    record = state.get(AUDIT_KEY)
    return record if isinstance(record, AuditRecord) else None


def _outcome(status: int) -> str:
    if status < 400:
        return "ok"
    return {401: "unauthenticated", 403: "denied"}.get(status, "rejected" if status < 500 else "error")


class AuditMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        record = AuditRecord(uuid.uuid4().hex)
        state: dict[str, Any] = scope.setdefault("state", {})
        state[AUDIT_KEY] = record
        status, written, refused = 500, False, False

        async def send_with_id(message: Message) -> None:
            # The entry is committed before the response's first byte goes out, so a client
            # that has its answer can rely on the entry being in the log.
            nonlocal status, written, refused
            if refused:
                return  # the rest of an answer the log could not record
            if message["type"] == "http.response.start":
                status, written = message["status"], True
                try:
                    await self._write(scope, record, status, None)
                except StoreError as exc:
                    refused = True
                    await _unavailable(send, record.request_id, exc)
                    return
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", record.request_id.encode("ascii")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except BaseException:
            if not written:
                await self._write(scope, record, 500, "request failed")
            raise
        if not written:
            await self._write(scope, record, status, "no response was sent")

    async def _write(self, scope: ASGIScope, record: AuditRecord, status: int, detail: str | None) -> None:
        if record.action is None or not record.logged:
            return
        security: SecurityStore = scope["app"].state.security
        event = audit_event(record, status, detail if detail is not None else record.detail)
        await anyio.to_thread.run_sync(security.append_audit, event)


def audit_event(record: AuditRecord, status: int, detail: str | None) -> AuditEvent:
    """The audit entry of ``record``'s request, ended with ``status``: its first
    ``AUDIT_MAX_IDS`` memory ids, and how many more in ``detail`` (an import of 50,000
    memories made one entry of about 2 MB, and every listing that held it as much)."""
    memory_ids, detail = listed_ids(record.memory_ids, detail, AUDIT_MAX_IDS)
    return AuditEvent(
        actor=record.actor,
        action=record.action or "admin",
        outcome=_outcome(status),
        at=utcnow(),
        request_id=record.request_id,
        namespaces=tuple(dict.fromkeys(record.namespaces)),
        memory_ids=memory_ids,
        content_sha256=record.content_sha256,
        status_code=status,
        detail=detail,
    )


async def _unavailable(send: Send, request_id: str, exc: StoreError) -> None:
    """A 503 in place of an answer whose audit entry could not be written. A change the
    request made may be stored, as when a connection drops before the answer arrives."""
    log.error("the audit entry of request %s could not be written: %s", request_id, exc, exc_info=exc)
    body = {
        "status_code": 503,
        "detail": f"the audit log could not record this request: {exc}",
        "request_id": request_id,
    }
    payload = json.dumps(body).encode("utf-8")
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode("ascii")),
        (b"x-request-id", request_id.encode("ascii")),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": payload, "more_body": False})


def authenticate(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """The app-wide guard: resolve the principal, or 401; unlisted handlers are admin-only."""
    if connection.url.path.startswith(OPEN_PATHS):
        return
    record = _record(connection.scope)
    if record is None:  # the middleware runs on every route; this is a wiring mistake
        raise RuntimeError("AuditMiddleware is not installed")
    name = handler.handler_name
    record.action = ACTIONS.get(name, "admin")
    try:
        principal, record.token_hash = _principal(connection)
    except Unauthenticated:
        _failed_authentication(connection, record)
        raise
    record.principal, record.actor = principal, principal.agent
    limiter: RateLimiter | None = connection.app.state.get(RATE_LIMITER)
    if limiter is not None and name not in NOT_RATE_LIMITED:
        wait = limiter.wait(principal.token_id or principal.agent)
        if wait > 0:
            raise TooManyRequestsException(
                detail=f"too many requests from {principal.agent!r}: retry in {retry_after(wait)} s",
                headers={"Retry-After": retry_after(wait)},
            )
    if name not in ACTIONS and not principal.is_admin:
        raise Forbidden("this endpoint needs an admin grant on '*'")


def _failed_authentication(connection: ASGIConnection[Any, Any, Any, Any], record: AuditRecord) -> None:
    """Count a failed authentication against the client's address: 429 past its budget; the
    audit entry left out (counted for the next report) past the log's budget."""
    limiter: FailedAuthLimiter | None = connection.app.state.get(AUTH_LIMITER)
    if limiter is None:
        return
    address = connection.client.host if connection.client else None
    verdict = limiter.failed(address)
    record.logged = verdict.logged
    if verdict.wait > 0:
        wait = retry_after(verdict.wait)
        raise TooManyRequestsException(
            detail=f"too many failed authentications from {address_key(address)}: retry in {wait} s",
            headers={"Retry-After": wait},
        ) from None


def failed_auth_event(tallies: dict[str, Tally]) -> AuditEvent:
    """One audit entry for the failed authentications tallied since the last: how many, how
    they were answered, when, and from where (the ``REPORT_ADDRESSES`` addresses with the most)."""
    ordered = sorted(tallies.items(), key=lambda item: (-item[1].failures, item[0]))
    named, rest = ordered[:REPORT_ADDRESSES], ordered[REPORT_ADDRESSES:]
    refused = sum(tally.refused for tally in tallies.values())
    unlogged = sum(tally.unlogged for tally in tallies.values())
    first = min(tally.first for tally in tallies.values())
    last = max(tally.last for tally in tallies.values())
    report = {
        "failures": refused + unlogged,
        "answered_429": refused,
        "answered_401": unlogged,
        "first_at": to_iso(first),
        "last_at": to_iso(last),
        "addresses": len(tallies),
        "by_address": {key: tally.failures for key, tally in named},
        "other_addresses_failures": sum(tally.failures for _, tally in rest),
    }
    shown = ", ".join(f"{key} {tally.failures}" for key, tally in named)
    more = f" and {len(rest)} more addresses" if rest else ""
    detail = (
        f"{refused + unlogged} failed authentications not logged one by one ({refused} answered 429 past their"
        f" address's limit, {unlogged} answered 401 past the log's) from {shown}{more},"
        f" {to_iso(first)} to {to_iso(last)}"
    )
    return AuditEvent(
        actor=ANONYMOUS,
        action=AUTHENTICATE,
        outcome="unauthenticated",
        at=utcnow(),
        request_id=uuid.uuid4().hex,
        status_code=429 if refused else 401,
        detail=detail,
        report=report,
    )


class FailedAuthReport:
    """Writes the failed authentications a ``FailedAuthLimiter`` tallied to the audit log, one
    entry every ``every`` seconds while there are any, and once more when stopped: under a
    flood from any number of addresses the log grows by one entry a period, not one a request."""

    def __init__(self, limiter: FailedAuthLimiter, security: SecurityStore, every: float) -> None:
        self._limiter = limiter
        self._security = security
        self._every = every
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="twinmem-failed-auth-report", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop reporting and write what is left (before the security store closes)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        self.report()

    def report(self) -> None:
        tallies = self._limiter.drain()
        if not tallies:
            return
        try:
            self._security.append_audit(failed_auth_event(tallies))
        except StoreError:
            self._limiter.restore(tallies)  # reported with the next, once the log can be written
            raise

    def _run(self) -> None:
        while not self._stopped.wait(self._every):
            try:
                self.report()
            except StoreError as exc:
                log.error("the failed authentications since the last report could not be logged: %s", exc)


def _presented_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The token the request carries: ``Authorization: Bearer <token>``; on the mem0 routes
    also as mem0's clients send a key (``X-API-Key: <token>``, ``Authorization: Token <token>``)."""
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    mem0 = connection.url.path == MEM0_PATH or connection.url.path.startswith(MEM0_PATH + "/")
    if token.strip() and (scheme.lower() == "bearer" or (mem0 and scheme.lower() == "token")):
        return token.strip()
    if mem0 and connection.headers.get("x-api-key", "").strip():
        return connection.headers["x-api-key"].strip()
    if mem0:
        raise Unauthenticated("a token is required (Authorization: Bearer <token>, or X-API-Key: <token>)")
    raise Unauthenticated("a bearer token is required (Authorization: Bearer <token>)")


def _principal(connection: ASGIConnection[Any, Any, Any, Any]) -> tuple[Principal, str | None]:
    """The caller and the hash of the token it presented (none in local mode)."""
    if connection.app.state.config.auth.mode == "local":
        return LOCAL_PRINCIPAL, None
    token_hash = hash_token(_presented_token(connection))
    security: SecurityStore = connection.app.state.security
    principal = security.principal_for(token_hash)
    if principal is None or not _still_declared(connection, principal, token_hash):
        raise Unauthenticated("the bearer token is not valid")
    expires = principal.expires_at
    if expires is not None and utcnow() >= expires:
        record = _record(connection.scope)
        if record is not None:  # the entry names whose token it was, and why it was refused
            record.actor = principal.agent
            record.detail = f"token {principal.token_id} expired at {to_iso(expires)}"
        raise Unauthenticated(f"the bearer token expired at {to_iso(expires)}: ask an admin for a new one")
    return principal, token_hash


def _still_declared(connection: ASGIConnection[Any, Any, Any, Any], principal: Principal, token_hash: str) -> bool:
    """A token the config file declared holds while the file still declares it: one the
    operator took out of the file (a leaked one, say) is refused from the next start on,
    though the store keeps its row, as it keeps a revoked token's."""
    if principal.token_id is None or not principal.token_id.startswith(CONFIG_TOKEN_PREFIX):
        return True
    return any(seed.token_hash == token_hash for seed in connection.app.state.config.auth.tokens)


@dataclass(frozen=True, slots=True)
class Access:
    """The caller of one request and its audit record: what handlers check and note."""

    principal: Principal
    record: AuditRecord
    tokens_mode: bool
    blocks: BlockList
    security: SecurityStore

    @property
    def actor(self) -> str:
        return self.principal.agent

    def allow(self, namespace: str, permission: Permission) -> None:
        """Raise 403 unless the caller holds ``permission`` on ``namespace``; a write or
        admin action of a blocked agent is refused whatever its grants (import, rollback
        and consolidate included, which do not go through ``service.save``)."""
        self.record.namespaces.append(namespace)
        if not self.principal.may(namespace, permission):
            raise Forbidden(f"no {permission.name.lower()} grant on namespace {namespace!r}")
        if permission is not Permission.READ and self.blocks.is_blocked(self.principal.agent, None):
            raise SourceBlocked(f"writes from agent {self.principal.agent!r} are blocked by an admin")

    def allow_all(self, namespaces: list[str], permission: Permission) -> None:
        for namespace in namespaces:
            self.allow(namespace, permission)

    def read_scope(self, namespaces: list[str]) -> Scope:
        """What the caller may read of ``namespaces``: every memory of a namespace it
        administers; shared, public and its own private memories of one it may read;
        public memories of any other (so a read outside the grants is not refused: it
        sees what every authenticated agent sees)."""
        self.record.namespaces.extend(namespaces)
        return Scope.of({ns: self._reach(ns) or Reach.PUBLIC for ns in namespaces}, self.actor)

    def write_scope(self, *namespaces: str) -> Scope:
        """What the caller may change in ``namespaces`` (403 without a write grant on each):
        every memory as an admin; those it sees as a reader (never others' private ones);
        with a write grant alone, only the memories it wrote (writing must not be a way to read)."""
        self.allow_all(list(namespaces), Permission.WRITE)
        return Scope.of({ns: self._reach(ns) or Reach.OWN for ns in namespaces}, self.actor)

    def read_by_id(self, namespace: str, read: Callable[[Scope], T]) -> T:
        """``read(scope)`` of one memory asked for by id. When it is not found and the
        caller holds no read grant on ``namespace`` the answer is 403, the same as for a
        memory that exists but is not public: nobody learns what exists where."""
        try:
            return read(self.read_scope([namespace]))
        except MemoryNotFound:
            if not self.principal.may(namespace, Permission.READ):
                raise Forbidden(f"no read grant on namespace {namespace!r}") from None
            raise

    def find_scope(self, namespaces: list[str], permission: Permission) -> Scope:
        """What the caller sees of ``namespaces`` when it names a memory by id alone (the mem0
        routes): as ``read_scope`` gives for READ; for WRITE, as ``write_scope`` gives on the
        namespaces it may write, the others left out. Nothing is noted in the audit entry:
        the handler notes the one namespace that held the memory."""
        if permission is Permission.READ:
            return Scope.of({ns: self._reach(ns) or Reach.PUBLIC for ns in namespaces}, self.actor)
        writable = [ns for ns in namespaces if self.principal.may(ns, Permission.WRITE)]
        return Scope.of({ns: self._reach(ns) or Reach.OWN for ns in writable}, self.actor)

    def _reach(self, namespace: str) -> Reach | None:
        """The caller's reach by its grants: full as an admin, member as a reader."""
        if self.principal.may(namespace, Permission.ADMIN):
            return Reach.FULL
        return Reach.MEMBER if self.principal.may(namespace, Permission.READ) else None

    def revoked(self) -> bool:
        """Whether the token this request was authenticated with has been revoked since. A
        request that runs long (a streamed export, an import whose body takes minutes to
        arrive) asks before it goes on, so a revocation holds for it too, not only for the
        requests that start after it."""
        return self.lapsed() is not None

    def lapsed(self) -> str | None:
        """Why the token this request was authenticated with no longer holds ("was revoked",
        or "expired at …"), or None while it does: what ``revoked`` asks, with the reason."""
        if self.record.token_hash is None:
            return None
        current = self.security.principal_for(self.record.token_hash)
        if current is None or current.token_id != self.principal.token_id:
            return "was revoked"
        if current.expires_at is not None and current.expired(utcnow()):
            return f"expired at {to_iso(current.expires_at)}"
        return None

    def require_admin(self) -> None:
        self.record.namespaces.append("*")
        if not self.principal.is_admin:
            raise Forbidden("this endpoint needs an admin grant on '*'")

    def note(
        self,
        *,
        memory_ids: list[str] | tuple[str, ...] = (),
        content: str | None = None,
        query: str | None = None,
        namespaces: list[str] | tuple[str, ...] = (),
    ) -> None:
        """Add what the request touched to its audit entry: the ids, the namespaces it wrote
        beyond those its checks named (an import under ``*`` writes the file's), and the
        digest of the text written (``content``) or asked (``query``). Written text is hashed
        with its personal data replaced by the guard's placeholders (``[phone]``), as a memory
        stores it by default: the digest of the text as sent, beside the stored memory, would
        let anyone who reads both try every value in the placeholder's place until the
        digest matched."""
        self.record.memory_ids.extend(memory_ids)
        self.record.namespaces.extend(ns for ns in namespaces if ns not in self.record.namespaces)
        if content is not None:
            self.record.content_sha256 = content_sha256(guard.redact(content, guard.find_pii(content)))
        if query is not None:
            self.record.content_sha256 = content_sha256(query)

    def own(self, draft: MemoryDraft) -> MemoryDraft:
        """With tokens, a memory's actor is the authenticated agent, whatever the body claims."""
        return replace(draft, actor=self.actor) if self.tokens_mode else draft


def provide_access(request: Request[Any, Any, Any]) -> Access:
    record = _record(request.scope)
    if record is None or record.principal is None:
        raise Unauthenticated("the request was not authenticated")
    state = request.app.state
    return Access(record.principal, record, state.config.auth.mode == "tokens", state.security, state.security)


# What handlers declare to receive the caller: ``access: Caller``.
Caller = NamedDependency[Access]
