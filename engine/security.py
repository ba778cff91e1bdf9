"""Who may do what, and the tamper-evident record of what was done.

Identities: an agent holds a bearer token (random, shown once, kept only as its
SHA-256) with grants on namespaces. A grant names a namespace exactly
(``user:42``) or by prefix (``user:*``; ``*`` is every namespace) and carries
permissions: ``r`` read, ``w`` write, ``a`` admin (admin implies read and write).

Audit: each entry is a flat JSON object. Its hash is the SHA-256 of the previous
entry's hash followed by the entry's canonical JSON (sorted keys, no spaces,
UTF-8), so editing, removing or reordering an entry breaks every hash after it.
``verify_chain`` walks the rows and reports the first break.

Pure code: the storage is behind ``engine.ports.SecurityStore``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from engine.codec import to_iso
from engine.errors import ConfigError, InvalidInput

TOKEN_BYTES = 32
GENESIS_HASH = "0" * 64

# The most memory ids one audit entry lists: twice a batch save's (``[limits] max_batch``).
AUDIT_MAX_IDS = 1000
# The identity of every request when ``[auth] mode = "local"``: no token, full rights,
# and only ever on a loopback address (``check_bind``).
LOCAL_AGENT = "local"
# The actors of audit entries that no token makes, and whose they are: the service's own
# (``twinmem``), the commands' (``cli``), requests that did not authenticate (``anonymous``)
# and local mode's (``local``). A token's agent so named would pass for them in the log, so
# no token is made for one, over HTTP, by ``twinmem token create`` or in the config file.
# Compared without case.
RESERVED_AGENTS: dict[str, str] = {
    "twinmem": "the service's own actions",
    "cli": "the command line's",
    "anonymous": "requests that did not authenticate",
    LOCAL_AGENT: 'every request in [auth] mode = "local"',
}


# A token's grants are checked on every request it makes: a bounded list, wherever the token
# is made (over HTTP, by ``twinmem token create``, in the config file).
GRANTS_MAX = 64


def reserved_agent(agent: str) -> str | None:
    """Why ``agent`` is no token's agent to have (``RESERVED_AGENTS``), or None."""
    reason = RESERVED_AGENTS.get(agent.lower())
    return None if reason is None else f"the agent name {agent!r} is reserved: the audit log gives it to {reason}"


# The id of a token the config file declares (``[[auth.tokens]]``) starts so: such a token
# holds only while the file of the running service still declares it.
CONFIG_TOKEN_PREFIX = "cfg-"
AUTH_MODES = ("local", "tokens")


class Permission(StrEnum):
    READ = "r"
    WRITE = "w"
    ADMIN = "a"


@dataclass(frozen=True, slots=True)
class Grant:
    """Permissions on one namespace or, with a trailing ``*``, on every namespace with that prefix."""

    pattern: str
    permissions: frozenset[Permission]

    def covers(self, namespace: str) -> bool:
        if self.pattern.endswith("*"):
            return namespace.startswith(self.pattern[:-1])
        return namespace == self.pattern

    def allows(self, permission: Permission) -> bool:
        return permission in self.permissions or Permission.ADMIN in self.permissions

    def __str__(self) -> str:
        letters = "".join(p.value for p in Permission if p in self.permissions)
        return f"{self.pattern}:{letters}"


# What a grant's namespace pattern may be: a namespace (engine.service.NAMESPACE_PATTERN),
# or a prefix of one ending in '*' ('*' alone: every namespace).
_GRANT_PATTERN = re.compile(r"[A-Za-z0-9_.:@\-]{1,128}|[A-Za-z0-9_.:@\-]{0,127}\*")


def parse_grant(text: str, *, new: bool = False) -> Grant:
    """``NAMESPACE:PERMS`` where PERMS is letters of ``rwa`` (``user:*:rw``, ``*:a``).

    The namespace may itself hold colons: the permissions follow the last one. ``new``: a
    grant being given now (a token created), whose namespace pattern must be one that
    can match; a grant stored or configured before that rule is read as it is (it
    matches nothing, and its token's other grants keep working)."""
    pattern, sep, letters = text.strip().rpartition(":")
    if not sep or not pattern or not letters:
        raise InvalidInput(f"a grant is NAMESPACE:PERMISSIONS such as 'user:*:rw', got {text!r}", field="grants")
    if "*" in pattern[:-1]:
        raise InvalidInput(f"'*' may only end a grant's namespace pattern, got {pattern!r}", field="grants")
    if new and not _GRANT_PATTERN.fullmatch(pattern):
        raise InvalidInput(
            f"a grant names a namespace (1-128 letters, digits or _ . : @ -), or a prefix of one ending in '*',"
            f" got {pattern[:64]!r}{'…' if len(pattern) > 64 else ''}: it could never match",
            field="grants",
        )
    try:
        permissions = frozenset(Permission(letter) for letter in letters)
    except ValueError as exc:
        raise InvalidInput(f"grant permissions are letters of 'rwa', got {letters!r}", field="grants") from exc
    return Grant(pattern, permissions)


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of one request: the agent and what it was granted."""

    agent: str
    grants: tuple[Grant, ...]
    token_id: str | None = None
    # When the token stops being accepted (None: never). Checked by the API on every request.
    expires_at: datetime | None = None

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def may(self, namespace: str, permission: Permission) -> bool:
        return any(g.covers(namespace) and g.allows(permission) for g in self.grants)

    @property
    def is_admin(self) -> bool:
        """Admin on every namespace: may manage tokens and read the audit log."""
        return self.may("*", Permission.ADMIN) and any(g.pattern == "*" for g in self.grants)


LOCAL_PRINCIPAL = Principal(LOCAL_AGENT, (Grant("*", frozenset({Permission.ADMIN})),))


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def content_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class TokenRecord:
    token_id: str
    agent: str
    grants: tuple[Grant, ...]
    created_at: datetime
    revoked_at: datetime | None = None
    expires_at: datetime | None = None  # None: never expires

    def principal(self) -> Principal:
        return Principal(self.agent, self.grants, self.token_id, self.expires_at)


class BlockKind(StrEnum):
    """What a block names: an agent (a memory's ``actor``) or a session (its ``session_id``)."""

    AGENT = "agent"
    SESSION = "session"


@dataclass(frozen=True, slots=True)
class Block:
    """A blocked source: its writes are refused and what it wrote is quarantined."""

    kind: BlockKind
    value: str
    blocked_by: str
    blocked_at: datetime
    reason: str | None = None


def listed_ids(
    memory_ids: Iterable[str], detail: str | None, most: int | None = None
) -> tuple[tuple[str, ...], str | None]:
    """What an audit entry lists of ``memory_ids``: each once, the first ``most`` of them
    (default ``AUDIT_MAX_IDS``), with ``detail`` saying how many more were left out (an
    import of 50,000 memories made one entry of about 2 MB, and every listing that held it
    as much)."""
    most = AUDIT_MAX_IDS if most is None else most
    ids = tuple(dict.fromkeys(memory_ids))
    if len(ids) <= most:
        return ids, detail
    more = f"{len(ids) - most} more memory ids not listed"
    return ids[:most], more if detail is None else f"{detail}; {more}"


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """What one audited action did. ``outcome`` is ``ok``, ``denied``, ``unauthenticated`` or ``error``."""

    actor: str
    action: str
    outcome: str
    at: datetime
    request_id: str
    namespaces: tuple[str, ...] = ()
    memory_ids: tuple[str, ...] = ()
    content_sha256: str | None = None
    status_code: int | None = None
    detail: str | None = None
    # Counts an entry stands for (failed authentications not logged one by one); only those
    # entries carry the key, so every other entry hashes as it always has.
    report: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "actor": self.actor,
            "action": self.action,
            "outcome": self.outcome,
            "at": to_iso(self.at),
            "request_id": self.request_id,
            "namespaces": list(self.namespaces),
            "memory_ids": list(self.memory_ids),
            "content_sha256": self.content_sha256,
            "status_code": self.status_code,
            "detail": self.detail,
        }
        if self.report is not None:
            entry["report"] = dict(self.report)
        return entry


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One stored entry: its position, the entry as written, and the chain hashes."""

    seq: int
    entry: Mapping[str, Any]
    prev_hash: str
    hash: str
    # What the store found wrong with the row beside the chain (the columns it is looked up
    # by disagree with the entry), for verification to report.
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class AuditQuery:
    actor: str | None = None
    action: str | None = None
    namespace: str | None = None
    since: datetime | None = None
    limit: int = 100


@dataclass(frozen=True, slots=True)
class AuditPage:
    """Entries after a position in the chain, oldest first, read with the chain's ``head``
    (its last position) and ``first_kept`` (the oldest position the store still holds, None
    when it keeps every entry since the first) as they were when the page was read."""

    rows: list[AuditRow]
    head: int
    first_kept: int | None = None


def canonical(entry: Mapping[str, Any]) -> bytes:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def chain_hash(prev_hash: str, entry: Mapping[str, Any]) -> str:
    return hashlib.sha256(prev_hash.encode("ascii") + canonical(entry)).hexdigest()


@dataclass(frozen=True, slots=True)
class ChainReport:
    entries: int
    head: str
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_chain(rows: Iterable[AuditRow]) -> ChainReport:
    """Walk the rows in stored order. Each entry records its own ``seq``, so a row moved
    to another position, a removed row and an edited row each break the chain."""
    prev, count, problems = GENESIS_HASH, 0, []
    for expected_seq, row in enumerate(rows, start=1):
        count += 1
        if row.problem is not None:  # found by the store (an unreadable line, say): the rest follows from it
            problems.append(f"entry {row.seq or expected_seq}: {row.problem}")
            break
        if row.entry.get("seq") != expected_seq or row.seq != expected_seq:
            problems.append(f"entry {row.seq}: out of sequence (expected entry {expected_seq})")
        if row.prev_hash != prev:
            problems.append(f"entry {row.seq}: does not follow the entry before it (removed or reordered)")
        if chain_hash(row.prev_hash, row.entry) != row.hash:
            problems.append(f"entry {row.seq}: content does not match its hash (edited)")
        if problems:
            break
        prev = row.hash
    return ChainReport(count, prev, problems)


def grants_from(texts: Sequence[str], *, new: bool = False) -> tuple[Grant, ...]:
    """A token's grants (``parse_grant``); ``new``: given now, by a token's creation."""
    if not texts:
        raise InvalidInput("a token needs at least one grant", field="grants")
    return tuple(parse_grant(text, new=new) for text in texts)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(mode: str, host: str) -> None:
    """Serving without tokens is for this machine only: refuse it on any other address."""
    if mode == "local" and not is_loopback(host):
        raise ConfigError(
            f'[auth] mode = "local" serves without tokens, so it binds only to a loopback address, '
            f'not {host!r}; set [auth] mode = "tokens" (and create tokens) to serve on {host}'
        )
