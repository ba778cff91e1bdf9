"""HTTP handlers for admins: tokens (create, list, revoke) and the audit log.

Every handler here needs an admin grant on ``*``. A new token is in the answer to
its creation and nowhere else: only its SHA-256 is stored.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Annotated, Any

from litestar import Controller, Response, delete, get, post
from litestar.datastructures import State
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from pydantic import Field

from api import schemas
from api.auth import Caller
from engine.codec import to_iso
from engine.errors import NotFound
from engine.ports import SecurityStore
from engine.records import utcnow
from engine.security import AuditQuery, AuditRow, TokenRecord, grants_from, hash_token, new_token


def _security(state: State) -> SecurityStore:
    security: SecurityStore = state.security
    return security


class TokenIn(schemas._Request):
    agent: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@\-]+$", description="Agent name.")
    grants: list[str] = Field(min_length=1, max_length=64, description="NAMESPACE:PERMS, e.g. 'user:*:rw'.")


class TokenNotFound(NotFound):
    def __init__(self, token_id: str) -> None:
        super().__init__(f"no live token {token_id!r}")
        self.token_id = token_id


def create_token(security: SecurityStore, agent: str, grants: list[str]) -> tuple[TokenRecord, str]:
    """Store a new token for ``agent``; returns its record and the token itself (shown once)."""
    record = TokenRecord("tok-" + secrets.token_hex(6), agent, grants_from(grants), utcnow())
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
        record, token = create_token(_security(state), data.agent, data.grants)
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

    @get("/audit", sync_to_thread=True)
    def audit_log(
        self,
        state: State,
        access: Caller,
        actor: FromQuery[str | None] = None,
        action: FromQuery[str | None] = None,
        namespace: FromQuery[str | None] = None,
        since: FromQuery[datetime | None] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """Audit entries, newest first, filtered by actor, action, namespace and time."""
        access.require_admin()
        if since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        query = AuditQuery(actor=actor, action=action, namespace=namespace, since=since, limit=limit)
        return {"entries": [audit_out(row) for row in _security(state).audit(query)]}
