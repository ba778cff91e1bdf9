"""Tokens, blocked sources and the audit chain in the graph database (server mode).

With ``store = "neo4j"`` several API replicas share one graph database; keeping the
security data there (not in a file per data directory) is what makes every replica
enforce the same tokens and blocks and append to one audit chain. The graph::

    (:Token {token_id, token_hash, agent, grants: [text], created_at, revoked_at, expires_at})
    (:Block {kind, value, blocked_by, blocked_at, reason})
    (:AuditEntry {seq, entry, prev_hash, hash, actor, action, at, namespaces: [text]})
    (:Counter {name: 'audit', seq, hash})    the head of the audit chain

Schema (uniqueness of ``Token.token_id``, ``Token.token_hash``, ``(Block.kind,
Block.value)``, ``AuditEntry.seq``; indexes for the audit filters; the head node) is
migration ``graph_schema/0008_security.cypher``, applied by ``open()`` like every other.

* **One chain.** ``append_audit`` is one transaction that first writes the head node
  (``SET h._lock``: Neo4j's exclusive lock, ArcadeDB's optimistic version check), then
  reads the last ``seq`` and hash from it, creates the entry and moves the head on.
  Appenders on every replica are serialised by that lock (the loser of an optimistic
  conflict is retried whole by the driver), so ``seq`` has no gap and no fork and each
  entry's ``prev_hash`` is the hash of the entry before it. The unique ``seq`` is a
  second guard: where the server checks the head's version only at commit (ArcadeDB),
  the later of two appenders fails on it, and tries again from the new head. The entry
  is stored as the JSON it was hashed from, so ``engine.security.verify_chain`` checks
  it exactly as it checks the SQLite store's.
* **Bounded staleness.** Every request checks its token and every write checks the
  block list, so those two answers are remembered for ``cache_seconds`` (a clock of
  this process, monotonic). A revoke or a block made through *this* store forgets
  them at once; one made on another replica takes effect here within
  ``cache_seconds``. Only a live token is remembered: an unknown one is looked up
  every time, so a token created on another replica works here at once. The checks
  run on the cluster's leader (a write-routed session that writes nothing), so a
  follower that lags adds nothing to that bound. ``cache_seconds = 0`` reads the
  graph on every check.
* The audit log is not bounded here (``[audit] max_entries`` moves old entries of the
  SQLite store to files of one data directory; the graph keeps every entry, on the
  database's own storage, for every replica to verify).

Driver errors become engine errors at this boundary (``neo4j_store._translate``).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from datetime import datetime
from typing import Any, Generic, LiteralString, TypeVar

import neo4j

from engine.adapters.neo4j_store import _translate, connect, reachability
from engine.codec import from_iso, to_iso
from engine.errors import Conflict, StoreError
from engine.security import (
    AuditEvent,
    AuditPage,
    AuditQuery,
    AuditRow,
    Block,
    BlockKind,
    Principal,
    TokenRecord,
    chain_hash,
    parse_grant,
)

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_CACHE_SECONDS = 1.0
# Answers remembered at most (least recently used go first).
_CACHE_SIZE = 10_000
# Appends tried when another replica took the same seq first (optimistic servers only).
_APPEND_TRIES = 50
# Entries per round trip when the whole chain is walked for verification.
_AUDIT_PAGE = 1000

_UPSERT_TOKEN: LiteralString = """
MERGE (t:Token {token_hash: $token_hash})
ON CREATE SET t.token_id = $token_id, t.created_at = $created_at, t.revoked_at = $revoked_at
SET t.agent = $agent, t.grants = $grants, t.expires_at = $expires_at
"""

_LIVE_TOKEN: LiteralString = """
MATCH (t:Token {token_hash: $token_hash})
WHERE t.revoked_at IS NULL
RETURN t.token_id AS token_id, t.agent AS agent, t.grants AS grants, t.created_at AS created_at,
       t.revoked_at AS revoked_at, t.expires_at AS expires_at
"""

_TOKENS: LiteralString = """
MATCH (t:Token)
RETURN t.token_id AS token_id, t.agent AS agent, t.grants AS grants, t.created_at AS created_at,
       t.revoked_at AS revoked_at, t.expires_at AS expires_at
ORDER BY created_at, token_id
"""

_REVOKE: LiteralString = """
MATCH (t:Token {token_id: $token_id})
WHERE t.revoked_at IS NULL
SET t.revoked_at = $at
RETURN count(t) AS revoked
"""

# Lock the head first, then read it: the read sees the last committed append.
_LOCK_HEAD: LiteralString = """
MATCH (h:Counter {name: 'audit'})
SET h._lock = true
RETURN h.seq AS seq, h.hash AS hash
"""

_APPEND: LiteralString = """
MATCH (h:Counter {name: 'audit'})
SET h.seq = $seq, h.hash = $hash
REMOVE h._lock
CREATE (:AuditEntry {seq: $seq, entry: $entry, prev_hash: $prev_hash, hash: $hash, actor: $actor,
                     action: $action, at: $at, namespaces: $namespaces})
"""

_AUDIT: LiteralString = """
MATCH (a:AuditEntry)
WHERE ($actor IS NULL OR a.actor = $actor)
  AND ($action IS NULL OR a.action = $action)
  AND ($since IS NULL OR a.at >= $since)
  AND ($namespace IS NULL OR $namespace IN a.namespaces)
RETURN a.seq AS seq, a.entry AS entry, a.prev_hash AS prev_hash, a.hash AS hash
ORDER BY seq DESC
LIMIT $limit
"""

# The head is read before the page: every entry up to it has committed (an append moves the
# head in the transaction that creates the entry), so the page holds all of them that match.
_AUDIT_HEAD: LiteralString = """
MATCH (h:Counter {name: 'audit'})
RETURN h.seq AS seq
"""

_AUDIT_AFTER: LiteralString = """
MATCH (a:AuditEntry)
WHERE a.seq > $after AND a.seq <= $head
  AND ($actor IS NULL OR a.actor = $actor)
  AND ($action IS NULL OR a.action = $action)
  AND ($since IS NULL OR a.at >= $since)
  AND ($namespace IS NULL OR $namespace IN a.namespaces)
RETURN a.seq AS seq, a.entry AS entry, a.prev_hash AS prev_hash, a.hash AS hash
ORDER BY seq
LIMIT $limit
"""

_AUDIT_PAGE_AFTER: LiteralString = """
MATCH (a:AuditEntry)
WHERE a.seq > $after
RETURN a.seq AS seq, a.entry AS entry, a.prev_hash AS prev_hash, a.hash AS hash
ORDER BY seq
LIMIT $limit
"""

_FIND_BLOCK: LiteralString = """
MATCH (b:Block {kind: $kind, value: $value})
RETURN count(b) AS found
"""

_CREATE_BLOCK: LiteralString = """
CREATE (b:Block {kind: $kind, value: $value, blocked_by: $blocked_by, blocked_at: $blocked_at})
SET b.reason = $reason
"""

_UNBLOCK: LiteralString = """
MATCH (b:Block {kind: $kind, value: $value})
DELETE b
RETURN count(*) AS lifted
"""

_BLOCKS: LiteralString = """
MATCH (b:Block)
RETURN b.kind AS kind, b.value AS value, b.blocked_by AS blocked_by, b.blocked_at AS blocked_at,
       b.reason AS reason
ORDER BY blocked_at, kind, value
"""

_IS_BLOCKED: LiteralString = """
UNWIND $sources AS source
MATCH (b:Block {kind: source.kind, value: source.value})
RETURN count(b) AS found
"""


class Recent(Generic[K, V]):
    """Answers remembered for at most ``seconds`` of ``clock``, the least recently used
    dropped past ``size``; thread-safe. ``seconds = 0`` remembers nothing."""

    def __init__(self, seconds: float, clock: Callable[[], float], size: int = _CACHE_SIZE) -> None:
        self._seconds = seconds
        self._clock = clock
        self._size = size
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()
        # Bumped by ``clear``: an answer read before a clear is never remembered after it.
        self._generation = 0

    def stamp(self) -> tuple[float, int]:
        """Take before reading: when the read began, and which clear it followed."""
        with self._lock:
            return self._clock(), self._generation

    def get(self, key: K) -> tuple[bool, V | None]:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return False, None
            if self._clock() - found[0] >= self._seconds:
                del self._entries[key]
                return False, None
            self._entries.move_to_end(key)
            return True, found[1]

    def put(self, key: K, value: V, stamp: tuple[float, int]) -> None:
        """Remember ``value``, read after ``stamp`` was taken; its age counts from then."""
        read_at, generation = stamp
        if self._seconds <= 0:
            return
        with self._lock:
            if generation != self._generation:
                return
            self._entries[key] = (read_at, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._generation += 1


class Neo4jSecurityStore:
    """``SecurityStore`` over a Bolt server (see ``engine.ports.SecurityStore``)."""

    def __init__(
        self,
        uri: str,
        *,
        user: str = "neo4j",
        password: str = "",
        database: str | None = None,
        max_connection_pool_size: int = 10,
        max_transaction_retry_time: float = 30.0,
        migrations: str = "apply",
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._uri = uri
        self._auth = (user, password)
        self._database = database or None
        self._pool_size = max_connection_pool_size
        self._retry_time = max_transaction_retry_time
        self._migrations = migrations
        self._driver: neo4j.Driver | None = None
        self._server = reachability(uri)
        self._bookmarks = neo4j.GraphDatabase.bookmark_manager()
        self._principals: Recent[str, Principal] = Recent(cache_seconds, monotonic)
        self._blocked: Recent[tuple[str | None, str | None], bool] = Recent(cache_seconds, monotonic)

    # --- lifecycle --------------------------------------------------------------

    def open(self) -> None:
        self._driver, _ = connect(
            self._uri,
            self._auth,
            database=self._database,
            pool_size=self._pool_size,
            retry_time=self._retry_time,
            migrations=self._migrations,
        )

    def close(self) -> None:
        if self._driver is not None:
            driver, self._driver = self._driver, None
            with _translate("close the security store"):
                driver.close()

    # --- tokens ----------------------------------------------------------------

    def add_token(self, record: TokenRecord, token_hash: str) -> None:
        params = {
            "token_hash": token_hash,
            "token_id": record.token_id,
            "agent": record.agent,
            "grants": [str(g) for g in record.grants],
            "created_at": to_iso(record.created_at),
            "revoked_at": to_iso(record.revoked_at) if record.revoked_at else None,
            "expires_at": to_iso(record.expires_at) if record.expires_at else None,
        }
        try:
            self._run("store a token", _UPSERT_TOKEN, params)
        except Conflict:
            # Replicas seeding the config's tokens at once: another created it first, where
            # the server does not make MERGE atomic. Now it matches, and is updated.
            self._run("store a token", _UPSERT_TOKEN, params)
        self._principals.clear()

    def principal_for(self, token_hash: str) -> Principal | None:
        hit, principal = self._principals.get(token_hash)
        if hit:
            return principal
        stamp = self._principals.stamp()
        rows = self._check("check a token", _LIVE_TOKEN, {"token_hash": token_hash})
        if not rows:
            return None
        principal = _token(rows[0]).principal()
        self._principals.put(token_hash, principal, stamp)
        return principal

    def tokens(self) -> list[TokenRecord]:
        return [_token(row) for row in self._rows("list tokens", _TOKENS, {})]

    def revoke(self, token_id: str, at: datetime) -> bool:
        rows = self._run("revoke a token", _REVOKE, {"token_id": token_id, "at": to_iso(at)})
        self._principals.clear()
        return bool(rows and rows[0]["revoked"])

    # --- audit -----------------------------------------------------------------

    def append_audit(self, event: AuditEvent) -> AuditRow:
        def work(tx: neo4j.ManagedTransaction) -> AuditRow:
            head = tx.run(_LOCK_HEAD).single()
            if head is None:
                raise StoreError("the audit chain's head node is missing: graph_schema/0008 has not run")
            seq, prev = int(head["seq"]) + 1, str(head["hash"])
            entry = {"seq": seq, **event.as_dict()}
            digest = chain_hash(prev, entry)
            tx.run(
                _APPEND,
                seq=seq,
                entry=json.dumps(entry, ensure_ascii=False),
                prev_hash=prev,
                hash=digest,
                actor=event.actor,
                action=event.action,
                at=to_iso(event.at),
                namespaces=list(event.namespaces),
            ).consume()
            return AuditRow(seq, entry, prev, digest)

        attempt = 1
        while True:
            try:
                with _translate("append to the audit log", self._server, self._retry_time), self._session() as session:
                    return session.execute_write(work)
            except Conflict:
                # Only the unique seq can clash: a server that checks the head's version at
                # commit (ArcadeDB) let another appender take this seq first. Try again.
                if attempt == _APPEND_TRIES:
                    raise
                time.sleep(random.uniform(0, 0.005 * attempt))
                attempt += 1

    def audit(self, query: AuditQuery) -> list[AuditRow]:
        params = {
            "actor": query.actor,
            "action": query.action,
            "namespace": query.namespace,
            "since": to_iso(query.since) if query.since is not None else None,
            "limit": query.limit,
        }
        return [_row(row) for row in self._rows("read the audit log", _AUDIT, params)]

    def audit_after(self, query: AuditQuery, after_seq: int) -> AuditPage:
        heads = self._rows("read the audit log", _AUDIT_HEAD, {})
        head = int(heads[0]["seq"]) if heads else 0
        params = {
            "after": after_seq,
            "head": head,
            "actor": query.actor,
            "action": query.action,
            "namespace": query.namespace,
            "since": to_iso(query.since) if query.since is not None else None,
            "limit": query.limit,
        }
        rows = self._rows("read the audit log", _AUDIT_AFTER, params)
        return AuditPage([_row(row) for row in rows], head)  # the graph keeps every entry

    def audit_rows(self) -> Iterator[AuditRow]:
        after = 0
        while True:
            page = self._rows("read the audit log", _AUDIT_PAGE_AFTER, {"after": after, "limit": _AUDIT_PAGE})
            for row in page:
                yield _row(row)
            if len(page) < _AUDIT_PAGE:
                return
            after = int(page[-1]["seq"])

    # --- blocked sources -------------------------------------------------------

    def block(self, block: Block) -> bool:
        def work(tx: neo4j.ManagedTransaction) -> bool:
            found = tx.run(_FIND_BLOCK, kind=block.kind.value, value=block.value).single()
            if found is not None and found["found"]:
                return False
            tx.run(
                _CREATE_BLOCK,
                kind=block.kind.value,
                value=block.value,
                blocked_by=block.blocked_by,
                blocked_at=to_iso(block.blocked_at),
                reason=block.reason,
            ).consume()
            return True

        try:
            with _translate("block a source", self._server, self._retry_time), self._session() as session:
                created = session.execute_write(work)
        except Conflict:
            created = False  # another replica blocked it at the same moment
        self._blocked.clear()
        return created

    def unblock(self, kind: BlockKind, value: str) -> bool:
        rows = self._run("lift a block", _UNBLOCK, {"kind": kind.value, "value": value})
        self._blocked.clear()
        return bool(rows and rows[0]["lifted"])

    def blocks(self) -> list[Block]:
        return [_block(row) for row in self._rows("list blocks", _BLOCKS, {})]

    def is_blocked(self, agent: str | None, session_id: str | None) -> bool:
        if agent is None and session_id is None:
            return False
        key = (agent, session_id)
        hit, blocked = self._blocked.get(key)
        if hit:
            return bool(blocked)
        stamp = self._blocked.stamp()
        sources = [
            {"kind": kind.value, "value": value}
            for kind, value in ((BlockKind.AGENT, agent), (BlockKind.SESSION, session_id))
            if value is not None
        ]
        rows = self._check("check the block list", _IS_BLOCKED, {"sources": sources})
        found = bool(rows and rows[0]["found"])
        self._blocked.put(key, found, stamp)
        return found

    # --- internals -------------------------------------------------------------

    @property
    def _open_driver(self) -> neo4j.Driver:
        if self._driver is None:
            raise StoreError("the security store is not open")
        return self._driver

    def _session(self) -> neo4j.Session:
        self._server.check(self._open_driver)
        return self._open_driver.session(database=self._database, bookmark_manager=self._bookmarks)

    def _run(self, what: str, query: LiteralString, params: dict[str, Any]) -> list[dict[str, Any]]:
        """One write transaction."""

        def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
            return [record.data() for record in tx.run(query, params)]

        with _translate(what, self._server, self._retry_time), self._session() as session:
            return session.execute_write(work)

    def _rows(self, what: str, query: LiteralString, params: dict[str, Any]) -> list[dict[str, Any]]:
        """One read transaction (on a cluster, any member that has this process's bookmarks)."""

        def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
            return [record.data() for record in tx.run(query, params)]

        with _translate(what, self._server, self._retry_time), self._session() as session:
            return session.execute_read(work)

    def _check(self, what: str, query: LiteralString, params: dict[str, Any]) -> list[dict[str, Any]]:
        """A token or block check: read on the leader, where every replica's revoke and block
        has committed, so a lagging follower cannot stretch the staleness bound."""
        return self._run(what, query, params)


def _token(row: dict[str, Any]) -> TokenRecord:
    return TokenRecord(
        row["token_id"],
        row["agent"],
        tuple(parse_grant(text) for text in row["grants"]),
        from_iso(row["created_at"]),
        from_iso(row["revoked_at"]) if row["revoked_at"] else None,
        from_iso(row["expires_at"]) if row.get("expires_at") else None,
    )


def _block(row: dict[str, Any]) -> Block:
    return Block(BlockKind(row["kind"]), row["value"], row["blocked_by"], from_iso(row["blocked_at"]), row["reason"])


def _row(row: dict[str, Any]) -> AuditRow:
    try:
        parsed = json.loads(row["entry"])
    except (TypeError, ValueError):
        parsed = None
    # A damaged entry is still a row: verification reports it instead of failing to read it.
    entry = parsed if isinstance(parsed, dict) else {"unreadable": row["entry"]}
    return AuditRow(int(row["seq"]), entry, str(row["prev_hash"]), str(row["hash"]))
