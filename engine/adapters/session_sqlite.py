"""Sessions in one SQLite file in the data directory: the embedded default.

One process owns the data directory, so one connection behind a lock serves every
thread, and each method is one transaction. The file is in WAL mode with
``synchronous=NORMAL``: a session survives the process being killed (so an expiry
while the service is down is promoted at the next start), while a power cut may cost
the last appends. Times are kept as Unix milliseconds, compared with the ``now`` each
call is given (``engine.ports.SessionStore``).

Because the process that opens this file holds the data directory (its lock), a
claim found at ``open`` was left by a promotion whose process died: ``open`` makes it
due at once, so the start's sweep finishes it instead of waiting for it to go stale.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from engine.errors import StoreError
from engine.files import make_data_dir
from engine.session_records import (
    Candidate,
    Claimed,
    Message,
    SessionInfo,
    SessionRef,
    SessionState,
    candidate_from_json,
    candidate_to_json,
    message_from_json,
    message_to_json,
)

SESSIONS_FILE = "sessions.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    generation TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    deadline_ms INTEGER NOT NULL,
    claimed_ms INTEGER,
    max_tokens INTEGER NOT NULL,
    ttl_ms INTEGER NOT NULL,
    tokens INTEGER NOT NULL DEFAULT 0,
    appended INTEGER NOT NULL DEFAULT 0,
    reach TEXT NOT NULL,
    visibility TEXT NOT NULL,
    closed_ms INTEGER
);
CREATE INDEX IF NOT EXISTS generations_ref ON generations (namespace, agent, session_id, state);
CREATE INDEX IF NOT EXISTS generations_deadline ON generations (deadline_ms);
CREATE INDEX IF NOT EXISTS generations_listing ON generations (namespace, created_ms, generation);
CREATE TABLE IF NOT EXISTS messages (
    generation TEXT NOT NULL,
    seq INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (generation, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS candidates (
    generation TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (generation, seq)
) WITHOUT ROWID;
"""

_COLUMNS = (
    "generation, namespace, agent, session_id, state, created_ms, updated_ms, deadline_ms, max_tokens, ttl_ms, "
    "tokens, appended, reach, visibility"
)
# What a read returns: the columns a generation is written with, and when a close ended it.
_READ = _COLUMNS + ", closed_ms"


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _exact_ms(moment: datetime) -> int:
    """A time this store wrote (whole milliseconds) back in milliseconds, whatever the float
    rounding of ``timestamp()``: a listing's position must match the row it was read from."""
    return round(moment.timestamp() * 1000)


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _info(row: sqlite3.Row | tuple[object, ...], messages: int) -> SessionInfo:
    gen, ns, agent, sid, state, created, updated, deadline, max_tokens, ttl, tokens, appended, reach, vis, closed = row
    if closed is None and str(state) == "closed":  # closed by a release before the close was recorded
        closed = updated
    return SessionInfo(
        ref=SessionRef(str(ns), str(agent), str(sid)),
        generation=str(gen),
        state=SessionState(str(state)),
        created_at=_time(int(str(created))),
        updated_at=_time(int(str(updated))),
        expires_at=_time(int(str(deadline))),
        max_tokens=int(str(max_tokens)),
        expire_after_seconds=int(str(ttl)) / 1000,
        tokens=int(str(tokens)),
        messages=messages,
        appended=int(str(appended)),
        reach=str(reach),
        visibility=str(vis),
        closed_at=None if closed is None else _time(int(str(closed))),
    )


class SqliteSessionStore:
    def __init__(self, path: str | Path) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def open(self) -> None:
        try:
            make_data_dir(self._path.parent)
            conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=10000")
            conn.executescript(_SCHEMA)
            # A file a release before the close was recorded made has no column for it.
            if "closed_ms" not in {str(row[1]) for row in conn.execute("PRAGMA table_info(generations)")}:
                try:
                    conn.execute("ALTER TABLE generations ADD COLUMN closed_ms INTEGER")
                except sqlite3.OperationalError as exc:  # another process added it first
                    if "duplicate column" not in str(exc):
                        raise
            # No promotion of this process has begun: a claim still held is a dead one's.
            conn.execute(
                "UPDATE generations SET deadline_ms = COALESCE(claimed_ms, 0) "
                "WHERE state = 'promoting' AND deadline_ms > COALESCE(claimed_ms, 0)"
            )
        except sqlite3.Error as exc:
            raise StoreError(f"could not open the session store {self._path}: {exc}") from exc
        self._conn = conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def health(self) -> str:
        with self._lock:
            if self._conn is None:
                return "closed"
            try:
                self._conn.execute("SELECT 1 FROM generations LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                return f"failing: {exc}"
        return "ok"

    @contextmanager
    def _tx(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                raise StoreError("the session store is not open")
            db = self._conn
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"session store {what} failed: {exc}") from exc

    def _open_generation(self, db: sqlite3.Connection, ref: SessionRef, now_ms: int) -> tuple[object, ...] | None:
        row: tuple[object, ...] | None = db.execute(
            f"SELECT {_READ} FROM generations WHERE namespace = ? AND agent = ? AND session_id = ? "
            "AND state = 'open' AND deadline_ms > ?",
            (ref.namespace, ref.agent, ref.session_id, now_ms),
        ).fetchone()
        return row

    def _count(self, db: sqlite3.Connection, generation: str) -> int:
        return int(db.execute("SELECT count(*) FROM messages WHERE generation = ?", (generation,)).fetchone()[0])

    def append(
        self,
        ref: SessionRef,
        messages: Sequence[Message],
        candidates: Sequence[Candidate],
        *,
        now: datetime,
        expire_after_seconds: float | None,
        max_tokens: int | None,
        default_expire_after_seconds: float,
        default_max_tokens: int,
        reach: str,
        visibility: str,
        new_generation: str,
    ) -> SessionInfo:
        now_ms = _ms(now)
        with self._tx("append") as db:
            row = self._open_generation(db, ref, now_ms)
            # Settings not given: the generation's own, read in this transaction.
            if max_tokens is None:
                max_tokens = default_max_tokens if row is None else int(str(row[8]))
            if expire_after_seconds is None:
                ttl_ms = int(default_expire_after_seconds * 1000) if row is None else int(str(row[9]))
            else:
                ttl_ms = int(expire_after_seconds * 1000)
            if row is None:
                generation = new_generation
                db.execute(
                    f"INSERT INTO generations ({_COLUMNS}) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, ?, ?, 0, 0, ?, ?)",
                    (
                        generation,
                        ref.namespace,
                        ref.agent,
                        ref.session_id,
                        now_ms,
                        now_ms,
                        now_ms + ttl_ms,
                        max_tokens,
                        ttl_ms,
                        reach,
                        visibility,
                    ),
                )
            else:
                generation = str(row[0])
            last = db.execute("SELECT max(seq) FROM messages WHERE generation = ?", (generation,)).fetchone()[0]
            start = 0 if last is None else int(last) + 1
            db.executemany(
                "INSERT INTO messages (generation, seq, tokens, body) VALUES (?, ?, ?, ?)",
                [(generation, start + n, m.tokens, message_to_json(m)) for n, m in enumerate(messages)],
            )
            last_c = db.execute("SELECT max(seq) FROM candidates WHERE generation = ?", (generation,)).fetchone()[0]
            start_c = 0 if last_c is None else int(last_c) + 1
            db.executemany(
                "INSERT INTO candidates (generation, seq, body) VALUES (?, ?, ?)",
                [(generation, start_c + n, candidate_to_json(c)) for n, c in enumerate(candidates)],
            )
            rows = db.execute(
                "SELECT seq, tokens FROM messages WHERE generation = ? ORDER BY seq", (generation,)
            ).fetchall()
            total = sum(int(tokens) for _, tokens in rows)
            dropped = 0
            while total > max_tokens and len(rows) - dropped > 1:
                total -= int(rows[dropped][1])
                dropped += 1
            if dropped:
                db.execute(
                    "DELETE FROM messages WHERE generation = ? AND seq <= ?", (generation, int(rows[dropped - 1][0]))
                )
            db.execute(
                "UPDATE generations SET updated_ms = ?, deadline_ms = ?, ttl_ms = ?, max_tokens = ?, tokens = ?, "
                "appended = appended + ? WHERE generation = ?",
                (now_ms, now_ms + ttl_ms, ttl_ms, max_tokens, total, len(messages), generation),
            )
            stored = db.execute(f"SELECT {_READ} FROM generations WHERE generation = ?", (generation,)).fetchone()
            return _info(stored, len(rows) - dropped)

    def window(self, ref: SessionRef, now: datetime) -> tuple[SessionInfo, list[Message]] | None:
        with self._tx("window") as db:
            row = self._open_generation(db, ref, _ms(now))
            if row is None:
                return None
            bodies = db.execute(
                "SELECT body FROM messages WHERE generation = ? ORDER BY seq", (str(row[0]),)
            ).fetchall()
            return _info(row, len(bodies)), [message_from_json(body) for (body,) in bodies]

    def sessions(
        self,
        namespace: str,
        agent: str | None,
        now: datetime,
        *,
        limit: int | None = None,
        after: tuple[datetime, str] | None = None,
    ) -> list[SessionInfo]:
        after_ms, after_gen = (_exact_ms(after[0]), after[1]) if after is not None else (None, "")
        with self._tx("sessions") as db:
            rows = db.execute(
                f"SELECT {_READ} FROM generations WHERE namespace = ? AND state = 'open' AND deadline_ms > ? "
                "AND (? IS NULL OR agent = ?) AND (? IS NULL OR (created_ms, generation) > (?, ?)) "
                "ORDER BY created_ms, generation LIMIT ?",
                (namespace, _ms(now), agent, agent, after_ms, after_ms, after_gen, -1 if limit is None else limit),
            ).fetchall()
            return [_info(row, self._count(db, str(row[0]))) for row in rows]

    def close_session(self, ref: SessionRef, now: datetime, stale_after_seconds: float) -> Claimed | None:
        now_ms = _ms(now)
        with self._tx("close") as db:
            row = self._open_generation(db, ref, now_ms)
            if row is None:
                return None
            generation = str(row[0])
            db.execute(
                "UPDATE generations SET state = 'promoting', updated_ms = ?, claimed_ms = ?, deadline_ms = ?, "
                "closed_ms = ? WHERE generation = ?",
                (now_ms, now_ms, now_ms + int(stale_after_seconds * 1000), now_ms, generation),
            )
            return self._claimed(db, generation)

    def due(self, now: datetime, limit: int) -> list[str]:
        now_ms = _ms(now)
        with self._tx("due") as db:
            rows = db.execute(
                "SELECT generation FROM generations WHERE (state = 'open' AND deadline_ms <= ?) OR state = 'closed' "
                "OR (state = 'promoting' AND deadline_ms <= ?) ORDER BY deadline_ms LIMIT ?",
                (now_ms, now_ms, limit),
            ).fetchall()
            return [str(gen) for (gen,) in rows]

    def claim(self, generation: str, now: datetime, stale_after_seconds: float) -> Claimed | None:
        now_ms = _ms(now)
        with self._tx("claim") as db:
            row = db.execute(f"SELECT {_READ} FROM generations WHERE generation = ?", (generation,)).fetchone()
            if row is None:
                return None
            state, deadline = str(row[4]), int(row[7])
            if state in ("open", "promoting") and deadline > now_ms:
                return None
            # While promoting, the deadline is when the claim goes stale.
            db.execute(
                "UPDATE generations SET state = 'promoting', claimed_ms = ?, deadline_ms = ? WHERE generation = ?",
                (now_ms, now_ms + int(stale_after_seconds * 1000), generation),
            )
            return self._claimed(db, generation)

    def _claimed(self, db: sqlite3.Connection, generation: str) -> Claimed:
        bodies = db.execute("SELECT body FROM candidates WHERE generation = ? ORDER BY seq", (generation,)).fetchall()
        claimed = db.execute(f"SELECT {_READ} FROM generations WHERE generation = ?", (generation,)).fetchone()
        info = _info(claimed, self._count(db, generation))
        return Claimed(info, tuple(candidate_from_json(body) for (body,) in bodies))

    def finish(self, generation: str) -> None:
        with self._tx("finish") as db:
            for table in ("messages", "candidates", "generations"):
                db.execute(f"DELETE FROM {table} WHERE generation = ?", (generation,))
