"""Tokens, blocked sources and the audit log in their own SQLite file, apart from the memories.

A separate file, so that the memory store's backups, exports and rollbacks never
touch the record of who did what, and so that a token can be created with the
CLI while a server holds the data directory (SQLite's own locking serialises the
writers; WAL lets readers go on). Each call opens a short transaction; appending
to the audit log takes the write lock first (``BEGIN IMMEDIATE``), so reading the
last hash and writing the next entry cannot interleave with another appender.

The audit log may be bounded (``[audit] max_entries``): when it holds a tenth more than
that, the oldest entries are moved out to a JSON Lines file in ``audit-archive/``
beside it (``audit-<first seq>-<last seq>.jsonl``, one row a line, fsynced before the
rows leave the table), so that the table stays small and nothing is ever dropped.
``audit_rows`` reads the archive files first and then the table, so verifying the hash
chain still walks every entry since the first one (a file a rotation wrote meanwhile,
beside a running server, is read before the table is read again).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.adapters.sqlite_store import run_migrations
from engine.codec import from_iso, to_iso
from engine.errors import StoreError
from engine.files import make_data_dir
from engine.security import (
    GENESIS_HASH,
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

SECURITY_FILE = "security.sqlite3"
ARCHIVE_DIR = "audit-archive"

_MIGRATIONS = (
    """
    CREATE TABLE tokens (
        token_id    TEXT PRIMARY KEY,
        token_hash  TEXT NOT NULL UNIQUE,
        agent       TEXT NOT NULL,
        grants      TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        revoked_at  TEXT
    );
    CREATE TABLE audit (
        seq         INTEGER PRIMARY KEY,
        entry       TEXT NOT NULL,
        prev_hash   TEXT NOT NULL,
        hash        TEXT NOT NULL,
        actor       TEXT NOT NULL,
        action      TEXT NOT NULL,
        at          TEXT NOT NULL
    );
    CREATE INDEX audit_actor ON audit (actor, seq);
    CREATE INDEX audit_action ON audit (action, seq);
    CREATE TABLE audit_namespaces (
        seq         INTEGER NOT NULL REFERENCES audit (seq),
        namespace   TEXT NOT NULL,
        PRIMARY KEY (namespace, seq)
    );
    """,
    # 2: blocked sources (an agent or a session). Its primary key is the lookup
    # ``is_blocked`` makes on every write, so it is one index probe per kind.
    """
    CREATE TABLE blocks (
        kind        TEXT NOT NULL CHECK (kind IN ('agent', 'session')),
        value       TEXT NOT NULL,
        blocked_by  TEXT NOT NULL,
        blocked_at  TEXT NOT NULL,
        reason      TEXT,
        PRIMARY KEY (kind, value)
    ) WITHOUT ROWID;
    """,
    # 3: a token may expire; the tokens stored before keep NULL: they never do.
    """
    ALTER TABLE tokens ADD COLUMN expires_at TEXT;
    """,
)


class SqliteSecurityStore:
    def __init__(self, path: Path, *, max_entries: int = 0) -> None:
        """``max_entries`` > 0 bounds the audit table (older entries move to the archive)."""
        self._path = path
        self._max_entries = max_entries
        self._archive = path.parent / ARCHIVE_DIR
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------

    def open(self) -> None:
        with self._translate("open the security store"):
            make_data_dir(self._path.parent)
            conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._conn = conn
        try:
            with self._transaction() as db:
                # A newer schema is refused: it may hold what this code would not enforce (a
                # token's expiry), so the file is not used at all.
                run_migrations(db, _MIGRATIONS, f"the security store {self._path}")
        except BaseException:
            self.close()  # a file it cannot use is not held open
            raise

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # --- tokens ----------------------------------------------------------------

    def add_token(self, record: TokenRecord, token_hash: str) -> None:
        grants = json.dumps([str(g) for g in record.grants])
        with self._transaction() as db:
            db.execute(
                "INSERT INTO tokens (token_id, token_hash, agent, grants, created_at, revoked_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (token_hash) DO UPDATE SET agent = excluded.agent, grants = excluded.grants,"
                " expires_at = excluded.expires_at",
                (
                    record.token_id,
                    token_hash,
                    record.agent,
                    grants,
                    to_iso(record.created_at),
                    to_iso(record.revoked_at) if record.revoked_at else None,
                    to_iso(record.expires_at) if record.expires_at else None,
                ),
            )

    def principal_for(self, token_hash: str) -> Principal | None:
        with self._transaction() as db:
            row = db.execute(
                "SELECT * FROM tokens WHERE token_hash = ? AND revoked_at IS NULL", (token_hash,)
            ).fetchone()
        return _token(row).principal() if row else None

    def tokens(self) -> list[TokenRecord]:
        with self._transaction() as db:
            rows = db.execute("SELECT * FROM tokens ORDER BY created_at, token_id").fetchall()
        return [_token(row) for row in rows]

    def revoke(self, token_id: str, at: datetime) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL", (to_iso(at), token_id)
            )
            return cursor.rowcount == 1

    # --- audit -----------------------------------------------------------------

    def append_audit(self, event: AuditEvent) -> AuditRow:
        with self._transaction() as db:
            last = db.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
            seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS_HASH)
            entry = {"seq": seq, **event.as_dict()}
            digest = chain_hash(prev, entry)
            db.execute(
                "INSERT INTO audit (seq, entry, prev_hash, hash, actor, action, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (seq, json.dumps(entry, ensure_ascii=False), prev, digest, event.actor, event.action, to_iso(event.at)),
            )
            db.executemany(
                "INSERT OR IGNORE INTO audit_namespaces (seq, namespace) VALUES (?, ?)",
                [(seq, namespace) for namespace in event.namespaces],
            )
            if self._max_entries:
                self._rotate(db, seq)
        return AuditRow(seq, entry, prev, digest)

    def _rotate(self, db: sqlite3.Connection, last: int) -> None:
        """Move the oldest entries to an archive file once the table holds a tenth more than
        ``max_entries`` (in the appender's transaction: the file is on disk before the rows go)."""
        first = db.execute("SELECT MIN(seq) FROM audit").fetchone()[0]
        if last - first + 1 <= self._max_entries + max(1, self._max_entries // 10):
            return
        upto = last - self._max_entries
        rows = db.execute(
            "SELECT seq, entry, prev_hash, hash FROM audit WHERE seq <= ? ORDER BY seq", (upto,)
        ).fetchall()
        self._archive.mkdir(parents=True, exist_ok=True)
        target = self._archive / f"audit-{rows[0][0]:012d}-{rows[-1][0]:012d}.jsonl"
        partial = target.with_suffix(".tmp")
        with partial.open("w", encoding="utf-8") as out:
            for seq, entry, prev_hash, digest in rows:
                out.write(json.dumps({"seq": seq, "entry": entry, "prev_hash": prev_hash, "hash": digest}) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, target)
        db.execute("DELETE FROM audit_namespaces WHERE seq <= ?", (upto,))
        db.execute("DELETE FROM audit WHERE seq <= ?", (upto,))

    def audit(self, query: AuditQuery) -> list[AuditRow]:
        where, params = _audit_where(query)
        with self._transaction() as db:
            rows = db.execute(
                f"SELECT seq, entry, prev_hash, hash FROM audit {where} ORDER BY seq DESC LIMIT ?",
                (*params, query.limit),
            ).fetchall()
        return [_row(row) for row in rows]

    def audit_after(self, query: AuditQuery, after_seq: int) -> AuditPage:
        where, params = _audit_where(query, "seq > ?")
        # One read transaction: the head, the oldest kept entry and the page from one snapshot.
        with self._snapshot() as db:
            first, head = db.execute("SELECT MIN(seq), MAX(seq) FROM audit").fetchone()
            rows = db.execute(
                f"SELECT seq, entry, prev_hash, hash FROM audit {where} ORDER BY seq LIMIT ?",
                (after_seq, *params, query.limit),
            ).fetchall()
        return AuditPage([_row(row) for row in rows], head or 0, first)

    def audit_rows(self) -> Iterator[AuditRow]:
        archived = 0
        # The rows of the file before and of this one, by position: a rotation whose transaction
        # failed after its file was written leaves its rows in the next rotation's file too,
        # which starts where it did. Such a second copy is read once; any other row at a
        # position already read (a forged line beside the real one) goes to verification.
        before: dict[int, AuditRow] = {}
        read: set[str] = set()
        while True:
            for path in self._archives():
                if path.name in read:
                    continue
                read.add(path.name)
                current: dict[int, AuditRow] = {}
                with path.open(encoding="utf-8") as lines:
                    for number, line in enumerate(lines, start=1):
                        row = _archived(line, f"line {number} of {ARCHIVE_DIR}/{path.name}")
                        copy = 0 < row.seq <= archived and row == current.get(row.seq, before.get(row.seq))
                        current[row.seq] = row  # a copy too: a third file of a twice-failed rotation holds it
                        if copy:
                            continue  # the same row archived twice
                        archived = max(archived, row.seq)
                        yield row
                before = current
            with self._transaction() as db:
                rows = db.execute(
                    "SELECT seq, entry, prev_hash, hash, actor, action, at,"
                    " (SELECT json_group_array(namespace) FROM audit_namespaces n WHERE n.seq = audit.seq)"
                    " FROM audit WHERE seq > ? ORDER BY seq",
                    (archived,),
                ).fetchall()
            # A rotation (a server appending meanwhile) that ran after the files were listed
            # moved the table's oldest rows to a file not read yet: read it, then the table
            # again. Verifying beside a running server reported the chain broken there.
            if (rows[0][0] if rows else None) != archived + 1 and any(p.name not in read for p in self._archives()):
                continue
            break
        for seq, entry, prev_hash, digest, *columns in rows:
            row = _row((seq, entry, prev_hash, digest))
            yield replace(row, problem=_columns_problem(row.entry, *columns))

    def _archives(self) -> list[Path]:
        return sorted(self._archive.glob("audit-*.jsonl")) if self._archive.is_dir() else []

    # --- blocked sources -------------------------------------------------------

    def block(self, block: Block) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO blocks (kind, value, blocked_by, blocked_at, reason) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (kind, value) DO NOTHING",
                (block.kind.value, block.value, block.blocked_by, to_iso(block.blocked_at), block.reason),
            )
            return cursor.rowcount == 1

    def unblock(self, kind: BlockKind, value: str) -> bool:
        with self._transaction() as db:
            cursor = db.execute("DELETE FROM blocks WHERE kind = ? AND value = ?", (kind.value, value))
            return cursor.rowcount == 1

    def blocks(self) -> list[Block]:
        with self._read() as db:
            rows = db.execute(
                "SELECT kind, value, blocked_by, blocked_at, reason FROM blocks ORDER BY blocked_at, kind, value"
            ).fetchall()
        return [_block(row) for row in rows]

    def is_blocked(self, agent: str | None, session_id: str | None) -> bool:
        # Read from the file on every call (no cache): a block made by another process
        # (the CLI) or another connection counts from its commit on.
        if agent is None and session_id is None:
            return False
        with self._read() as db:
            # fetchall: the statement runs to its end, so no read snapshot stays open.
            ((found,),) = db.execute(
                "SELECT EXISTS (SELECT 1 FROM blocks WHERE kind = 'agent' AND value = ?)"
                " OR EXISTS (SELECT 1 FROM blocks WHERE kind = 'session' AND value = ?)",
                (agent, session_id),
            ).fetchall()
        return bool(found)

    # --- internals -------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._translate("use the security store"):
            if self._conn is None:
                raise StoreError(f"the security store {self._path} is not open")
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: its statements see one committed state (WAL), without the
        write lock."""
        with self._lock, self._translate("read the security store"):
            if self._conn is None:
                raise StoreError(f"the security store {self._path} is not open")
            self._conn.execute("BEGIN DEFERRED")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One statement outside a transaction: it reads the last committed state (WAL)
        without taking the write lock, so it never waits on an appender."""
        with self._lock, self._translate("read the security store"):
            if self._conn is None:
                raise StoreError(f"the security store {self._path} is not open")
            yield self._conn

    @contextmanager
    def _translate(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"could not {what} ({self._path}): {exc}") from exc


def _audit_where(query: AuditQuery, *first: str) -> tuple[str, list[Any]]:
    """The WHERE clause of an audit listing and its parameters (after those of ``first``)."""
    clauses = list(first)
    params: list[Any] = []
    if query.actor is not None:
        clauses.append("actor = ?")
        params.append(query.actor)
    if query.action is not None:
        clauses.append("action = ?")
        params.append(query.action)
    if query.namespace is not None:
        clauses.append("seq IN (SELECT seq FROM audit_namespaces WHERE namespace = ?)")
        params.append(query.namespace)
    if query.since is not None:
        clauses.append("at >= ?")
        params.append(to_iso(query.since))
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params


def _token(row: tuple[Any, ...]) -> TokenRecord:
    token_id, _, agent, grants, created_at, revoked_at, expires_at = row
    return TokenRecord(
        token_id,
        agent,
        tuple(parse_grant(text) for text in json.loads(grants)),
        from_iso(created_at),
        from_iso(revoked_at) if revoked_at else None,
        from_iso(expires_at) if expires_at else None,
    )


def _block(row: tuple[Any, ...]) -> Block:
    kind, value, blocked_by, blocked_at, reason = row
    return Block(BlockKind(kind), value, blocked_by, from_iso(blocked_at), reason)


def _columns_problem(entry: Mapping[str, Any], actor: str, action: str, at: str, namespaces: str) -> str | None:
    """What is wrong with the columns the audit log is looked up by (``audit``: actor, action,
    time; ``audit_namespaces``), which the chain's hash does not cover: an edit there would hide
    an entry from the admins' filtered listing while the chain still verified."""
    if "unreadable" in entry:
        return None  # the hash check reports it
    stored = json.loads(namespaces) if namespaces else []
    named = entry.get("namespaces")
    differing = [
        name
        for name, column, value in (("actor", actor, entry.get("actor")), ("action", action, entry.get("action")))
        if column != value
    ]
    if at != entry.get("at"):
        differing.append("time")
    if not isinstance(named, list) or sorted(set(stored)) != sorted({str(n) for n in named}):
        differing.append("namespaces")
    if not differing:
        return None
    return f"the audit listing's index disagrees with the entry on its {', '.join(differing)} (edited)"


def _archived(line: str, where: str) -> AuditRow:
    """A row of an archive file; a damaged line is still a row, for verification to report
    ``where`` it is."""
    try:
        data = json.loads(line)
        return _row((int(data["seq"]), data["entry"], data["prev_hash"], data["hash"]))
    except (ValueError, KeyError, TypeError):
        return AuditRow(0, {"unreadable": line}, "", "", problem=f"an unreadable line ({where})")


def _row(row: tuple[Any, ...]) -> AuditRow:
    seq, entry, prev_hash, digest = row
    try:
        parsed = json.loads(entry)
    except ValueError:
        # A damaged entry is still a row: verification reports it instead of failing to read it.
        parsed = {"unreadable": entry}
    return AuditRow(seq, parsed if isinstance(parsed, dict) else {"unreadable": entry}, prev_hash, digest)
