"""HTTP handlers for admins: tokens (create, list, revoke), blocked sources and the audit log.

Every handler here needs an admin grant on ``*``. A new token is in the answer to
its creation and nowhere else: only its SHA-256 is stored.

Blocking a source (an agent, or a session) refuses its writes from then on and
quarantines what it already wrote; lifting the block lets it write again but
leaves those memories quarantined, for an admin to review and release one by one
(``PATCH /v1/memory/{id}`` with ``"status": "active"``, or a rollback to the version
before the quarantine; ``restore`` does not release a quarantined memory).
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from litestar import Controller, Response, delete, get, post
from litestar.datastructures import State
from litestar.openapi.spec.enums import OpenAPIFormat
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from pydantic import Field, Strict

from api import schemas
from api.auth import Caller
from engine.codec import as_utc, to_iso
from engine.errors import InvalidInput, NotFound
from engine.ports import SecurityStore
from engine.records import utcnow
from engine.security import (
    GRANTS_MAX,
    AuditPage,
    AuditQuery,
    AuditRow,
    Block,
    BlockKind,
    TokenRecord,
    grants_from,
    hash_token,
    new_token,
    reserved_agent,
)

if TYPE_CHECKING:
    from engine.service import MemoryService


def _security(state: State) -> SecurityStore:
    security: SecurityStore = state.security
    return security


# A token's agent: what its requests' memories record as their actor.
AGENT_CHARS = r"[A-Za-z0-9_.:@\-]"
AGENT_MAX = 128


# The largest audit position a cursor may name: what SQLite stores in an INTEGER (a larger
# one could not be compared with a seq and was a 500).
MAX_SEQ = 2**63 - 1


class TokenIn(schemas._Request):
    agent: str = Field(min_length=1, max_length=AGENT_MAX, pattern=rf"^{AGENT_CHARS}+$", description="Agent name.")
    grants: list[str] = Field(min_length=1, max_length=GRANTS_MAX, description="NAMESPACE:PERMS, e.g. 'user:*:rw'.")
    expires_at: schemas.UtcDatetime | None = Field(
        default=None, description="When the token stops being accepted (with its offset); none: never."
    )


# A memory's actor and session_id are at most 200 characters (api/schemas.py).
SOURCE_MAX = 200


def check_source(kind: str, value: str) -> tuple[BlockKind, str]:
    """The kind and value of a source to block, or InvalidInput saying what is wrong."""
    try:
        parsed = BlockKind(kind)
    except ValueError:
        raise InvalidInput(f"a block's kind is 'agent' or 'session', got {kind!r}", field="kind") from None
    if not value or not value.strip():
        raise InvalidInput(f"name the {parsed.value} to block", field="value")
    if value != value.strip() or len(value) > SOURCE_MAX:
        raise InvalidInput(
            f"a {parsed.value} is named exactly, without spaces around it and in at most {SOURCE_MAX} characters,"
            f" got {value!r}",
            field="value",
        )
    return parsed, value


class BlockIn(schemas._Request):
    kind: Annotated[BlockKind, Strict(False)] = Field(
        description="'agent' (a memory's actor, a token's agent) or 'session' (its session_id)."
    )
    value: str = Field(description="The agent's name or the session's id, exactly as its memories carry it.")
    reason: str | None = Field(default=None, max_length=1000, description="Why, for the admins who review it.")


class BlockNotFound(NotFound):
    def __init__(self, kind: BlockKind, value: str) -> None:
        super().__init__(f"no block on {kind.value} {value!r}")


def block_source(
    security: SecurityStore, service: MemoryService, kind: BlockKind, value: str, *, by: str, reason: str | None
) -> tuple[Block, bool, list[str]]:
    """Block a source and quarantine what it wrote: ``(block in force, newly blocked, quarantined ids)``.

    The block is recorded first, so nothing the source writes meanwhile escapes the
    quarantine pass. Blocking a source already blocked keeps the block as it was and
    runs the pass again (it quarantines only what is not quarantined yet)."""
    new = Block(kind, value, by, utcnow(), reason)
    created = security.block(new)
    block = next((b for b in security.blocks() if b.kind is kind and b.value == value), new)
    return block, created, service.quarantine_source(kind, value, actor=by)


def block_out(block: Block) -> dict[str, Any]:
    return {
        "kind": block.kind.value,
        "value": block.value,
        "reason": block.reason,
        "blocked_by": block.blocked_by,
        "blocked_at": to_iso(block.blocked_at),
    }


def source_id(kind: BlockKind, value: str) -> str:
    """How a blocked source appears among an audit entry's ids (as a token's id does)."""
    return f"{kind.value}:{value}"


class TokenNotFound(NotFound):
    def __init__(self, token_id: str) -> None:
        super().__init__(f"no live token {token_id!r}")
        self.token_id = token_id


def create_token(
    security: SecurityStore, agent: str, grants: list[str], expires_at: datetime | None = None
) -> tuple[TokenRecord, str]:
    """Store a new token for ``agent``; returns its record and the token itself (shown once).
    The agent and the number of grants are checked here too, for ``twinmem token create``,
    which no ``TokenIn`` checks (it stored 10,000 grants, each then read on every request).
    An agent named as the log names others (``engine.security.RESERVED_AGENTS``) is refused."""
    if len(grants) > GRANTS_MAX:
        raise InvalidInput(f"a token holds at most {GRANTS_MAX} grants, got {len(grants)}", field="grants")
    if not re.fullmatch(rf"{AGENT_CHARS}{{1,{AGENT_MAX}}}", agent):
        raise InvalidInput(
            f"an agent is named in 1-{AGENT_MAX} letters, digits or _ . : @ -, got {agent!r}", field="agent"
        )
    reserved = reserved_agent(agent)
    if reserved is not None:
        raise InvalidInput(f"{reserved}; choose another", field="agent")
    now = utcnow()
    if expires_at is not None:
        if expires_at.tzinfo is None:
            raise InvalidInput(
                "expires_at needs its offset (2027-01-31T00:00:00Z), or the time is ambiguous", field="expires_at"
            )
        try:  # 9999-12-31T23:00:00-05:00 is past the year 9999 in UTC
            expires_at = as_utc(expires_at)
        except ValueError as exc:
            raise InvalidInput(f"expires_at: {exc}", field="expires_at") from None
        if expires_at <= now:
            raise InvalidInput(f"expires_at {to_iso(expires_at)} is not in the future", field="expires_at")
    record = TokenRecord(
        "tok-" + secrets.token_hex(6), agent, grants_from(grants, new=True), now, expires_at=expires_at
    )
    token = new_token()
    security.add_token(record, hash_token(token))
    return record, token


def token_out(record: TokenRecord) -> dict[str, Any]:
    return {
        "token_id": record.token_id,
        "agent": record.agent,
        "grants": [str(g) for g in record.grants],
        "created_at": to_iso(record.created_at),
        "revoked_at": to_iso(record.revoked_at) if record.revoked_at else None,
        "expires_at": to_iso(record.expires_at) if record.expires_at else None,
        "expired": record.expires_at is not None and utcnow() >= record.expires_at,
    }


def audit_out(row: AuditRow) -> dict[str, Any]:
    return {**row.entry, "seq": row.seq, "prev_hash": row.prev_hash, "hash": row.hash}


class AdminController(Controller):
    path = "/v1/admin"
    tags = ["admin"]

    @post("/tokens", sync_to_thread=True, status_code=201)
    def create_token(self, state: State, access: Caller, data: JSONBody[TokenIn]) -> dict[str, Any]:
        """Create a token for an agent. The token is in this answer only; store it now."""
        access.require_admin()
        record, token = create_token(_security(state), data.agent, data.grants, data.expires_at)
        access.note(memory_ids=[record.token_id])
        return {**token_out(record), "token": token}

    @get("/tokens", sync_to_thread=True)
    def list_tokens(self, state: State, access: Caller) -> dict[str, Any]:
        """Every token (never the token itself), revoked ones included."""
        access.require_admin()
        return {"tokens": [token_out(record) for record in _security(state).tokens()]}

    @delete("/tokens/{token_id:str}", sync_to_thread=True, status_code=200)
    def revoke_token(self, state: State, access: Caller, token_id: FromPath[str]) -> Response[dict[str, Any]]:
        """Revoke a token; requests carrying it get 401 from now on."""
        access.require_admin()
        access.note(memory_ids=[token_id])
        if not _security(state).revoke(token_id, utcnow()):
            raise TokenNotFound(token_id)
        return Response({"token_id": token_id, "revoked": True})

    @post("/blocks", sync_to_thread=True, status_code=201)
    def block_source(self, state: State, access: Caller, data: JSONBody[BlockIn]) -> Response[dict[str, Any]]:
        """Block an agent or a session: its writes get 403 from now on, and every memory it
        wrote, in every namespace, is quarantined (a new version; out of recall) and listed
        in ``quarantined``. 201 for a new block; 200 when the source was already blocked:
        the block stays as it was and the quarantine pass runs again (catching anything
        left over). Lifting the block later does not un-quarantine anything."""
        access.require_admin()
        kind, value = check_source(data.kind, data.value)
        access.note(memory_ids=[source_id(kind, value)])
        service: MemoryService = state.service
        block, created, quarantined = block_source(
            _security(state), service, kind, value, by=access.actor, reason=data.reason
        )
        access.note(memory_ids=quarantined)
        body = {**block_out(block), "already_blocked": not created, "quarantined": quarantined}
        return Response(body, status_code=201 if created else 200)

    @get("/blocks", sync_to_thread=True)
    def list_blocks(self, state: State, access: Caller) -> dict[str, Any]:
        """Every block in force, oldest first."""
        access.require_admin()
        return {"blocks": [block_out(block) for block in _security(state).blocks()]}

    @delete("/blocks/{kind:str}/{value:path}", sync_to_thread=True, status_code=200)
    def unblock_source(self, state: State, access: Caller, kind: FromPath[str], value: FromPath[str]) -> dict[str, Any]:
        """Lift a block: the source may write again. What was quarantined when it was blocked
        stays quarantined; an admin reviews those memories and releases them one by one
        (``PATCH /v1/memory/{id}`` with ``"status": "active"``). 404 when the source is
        not blocked. A value holding ``/`` may be sent as is or percent-encoded."""
        access.require_admin()
        parsed, value = check_source(kind, value.removeprefix("/"))
        access.note(memory_ids=[source_id(parsed, value)])
        if not _security(state).unblock(parsed, value):
            raise BlockNotFound(parsed, value)
        return {"kind": parsed.value, "value": value, "unblocked": True}

    @get("/audit", sync_to_thread=True)
    def audit_log(
        self,
        state: State,
        access: Caller,
        actor: FromQuery[str | None] = None,
        action: FromQuery[str | None] = None,
        namespace: FromQuery[str | None] = None,
        since: Annotated[
            str | None,
            QueryParameter(
                format=OpenAPIFormat.DATE_TIME, description="ISO 8601, never a number; without a timezone, UTC"
            ),
        ] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
        after_seq: Annotated[
            int | None,
            QueryParameter(
                ge=0,
                le=MAX_SEQ,
                description="A position in the chain (an entry's seq): the entries after it, oldest first,"
                " and the cursor to pass next as next_after_seq. 0 reads from the first entry.",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Audit entries, filtered by actor, action, namespace and time: newest first, or,
        with ``after_seq``, those after that position oldest first, with the next cursor."""
        access.require_admin()
        after = schemas.query_time(since, "since", naive_is_utc=True)
        query = AuditQuery(actor=actor, action=action, namespace=namespace, since=after, limit=limit)
        if after_seq is None:
            return {"entries": [audit_out(row) for row in _security(state).audit(query)]}
        return audit_page_out(_security(state).audit_after(query, after_seq), after_seq, limit)


def audit_page_out(page: AuditPage, after_seq: int, limit: int) -> dict[str, Any]:
    """A page after ``after_seq`` and where to go on: from its last entry when the page is
    full (more may match), else from the head it was read at (every entry up to the head was
    looked at, matching or not). A cursor never moves back. ``archived_through`` says that the
    entries after the cursor up to that position were moved to the archive files (``[audit]
    max_entries``), which this listing does not read."""
    rows = page.rows
    following = rows[-1].seq if len(rows) == limit else max(page.head, rows[-1].seq if rows else 0)
    body: dict[str, Any] = {"entries": [audit_out(row) for row in rows], "next_after_seq": max(after_seq, following)}
    if page.first_kept is not None and page.first_kept > after_seq + 1:
        body["archived_through"] = page.first_kept - 1
    return body
