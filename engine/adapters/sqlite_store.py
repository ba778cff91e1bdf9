"""The embedded system of record: one SQLite file in WAL mode.

One connection serves the process, guarded by a lock; every write is one
``BEGIN IMMEDIATE`` transaction, so a concurrent writer (another process on the
same file) waits instead of interleaving. With ``durable=True`` each commit is
fsynced (``synchronous=FULL``): a save that returned survives power loss.

Schema changes are numbered, append-only steps in ``_MIGRATIONS``; the file's
``PRAGMA user_version`` records how many ran.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from engine import limits
from engine.adapters.round_trips import RoundTrips
from engine.codec import decode_cursor, encode_cursor, from_iso, memory_from_dict, memory_to_dict, to_iso
from engine.errors import Conflict, InvalidInput, MemoryNotFound, SaveOvertaken, StaleWrite, StoreError, expect_version
from engine.files import make_data_dir
from engine.ports import Edge, ImportedRecord, Matrix, Reinforcement, Rescore, Vector
from engine.records import (
    Change,
    Memory,
    MemoryFilter,
    Page,
    Scope,
    Source,
    Status,
    Version,
    Visibility,
    entity_keys,
    metadata_key_problem,
    overtaking,
    utcnow,
)

log = logging.getLogger(__name__)

_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE memories (
        memory_id        TEXT PRIMARY KEY,
        namespace        TEXT NOT NULL,
        content          TEXT NOT NULL,
        digest           TEXT NOT NULL,
        category         TEXT NOT NULL,
        entities         TEXT NOT NULL,
        importance       REAL NOT NULL,
        base_score       REAL NOT NULL,
        source           TEXT NOT NULL,
        actor            TEXT,
        session_id       TEXT,
        visibility       TEXT NOT NULL,
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        last_accessed_at TEXT NOT NULL,
        access_count     INTEGER NOT NULL,
        expire_at        TEXT,
        status           TEXT NOT NULL,
        embedding_model  TEXT NOT NULL,
        embedding_version TEXT NOT NULL,
        version          INTEGER NOT NULL,
        key              TEXT,
        metadata         TEXT NOT NULL
    );
    CREATE INDEX memories_by_time ON memories (namespace, created_at DESC, memory_id DESC);
    CREATE INDEX memories_by_digest ON memories (namespace, digest);
    CREATE INDEX memories_by_status ON memories (status);
    CREATE TABLE memory_versions (
        memory_id  TEXT NOT NULL,
        version    INTEGER NOT NULL,
        namespace  TEXT NOT NULL,
        record     TEXT NOT NULL,
        changed_at TEXT NOT NULL,
        changed_by TEXT,
        reason     TEXT NOT NULL,
        PRIMARY KEY (memory_id, version)
    ) WITHOUT ROWID;
    CREATE TABLE memory_entities (
        memory_id TEXT NOT NULL,
        entity    TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name      TEXT NOT NULL,
        PRIMARY KEY (memory_id, entity)
    ) WITHOUT ROWID;
    CREATE INDEX entities_by_name ON memory_entities (namespace, entity);
    CREATE TABLE edges (
        src        TEXT NOT NULL,
        dst        TEXT NOT NULL,
        kind       TEXT NOT NULL,
        namespace  TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (src, dst, kind)
    ) WITHOUT ROWID;
    CREATE INDEX edges_by_dst ON edges (dst);
    CREATE TABLE vectors (
        memory_id TEXT NOT NULL,
        model     TEXT NOT NULL,
        dim       INTEGER NOT NULL,
        vector    BLOB NOT NULL,
        PRIMARY KEY (memory_id, model)
    ) WITHOUT ROWID;
    CREATE TABLE changes (
        seq       INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_id TEXT NOT NULL,
        namespace TEXT NOT NULL,
        op        TEXT NOT NULL,
        at        TEXT NOT NULL
    );
    """,
    # 2: was an FTS5 index of search terms, fed by triggers; the lexical channel lives in
    # the fast network now (BM25 per namespace, in process), and step 5 drops what this
    # step made in files that ran it.
    """
    SELECT 1;
    """,
    # 3: entity lookups newest first without walking every memory of a popular entity.
    """
    ALTER TABLE memory_entities ADD COLUMN created_at TEXT NOT NULL DEFAULT '';
    UPDATE memory_entities SET created_at =
        (SELECT m.created_at FROM memories m WHERE m.memory_id = memory_entities.memory_id);
    CREATE INDEX entities_by_time ON memory_entities (namespace, entity, created_at DESC, memory_id DESC);
    """,
    # 4: a save that names a key finds the memories it may replace without walking the namespace.
    """
    CREATE INDEX memories_by_key ON memories (namespace, key) WHERE key IS NOT NULL;
    """,
    # 5: the FTS5 index of step 2 goes (see there): no write pays for it any more, and any
    # SQLite client may write the file again (its triggers called a function only
    # twinmem registered).
    """
    DROP TRIGGER IF EXISTS memory_terms_insert;
    DROP TRIGGER IF EXISTS memory_terms_update;
    DROP TRIGGER IF EXISTS memory_terms_delete;
    DROP TABLE IF EXISTS memory_terms;
    DROP TABLE IF EXISTS term_docs;
    """,
    # 6: vectors move to a table with rowids. A WITHOUT ROWID table keeps its rows in an
    # index b-tree, whose cells hold about 1 KB in the page: a 384-dimension vector (1.5 KB)
    # spilled to an overflow page, and a vector took ~4.7 KB of the file. A rowid table
    # keeps the whole row in its leaf page; (memory_id, model) stays unique.
    """
    CREATE TABLE vectors_by_row (
        memory_id TEXT NOT NULL,
        model     TEXT NOT NULL,
        dim       INTEGER NOT NULL,
        vector    BLOB NOT NULL,
        UNIQUE (memory_id, model)
    );
    INSERT INTO vectors_by_row (memory_id, model, dim, vector) SELECT memory_id, model, dim, vector FROM vectors;
    DROP TABLE vectors;
    ALTER TABLE vectors_by_row RENAME TO vectors;
    """,
    # 7: step 1's entity index is a prefix of step 3's, which answers every lookup it did;
    # each entity row a save writes no longer updates a third b-tree (8 MB of the file at
    # 100,000 memories).
    """
    DROP INDEX IF EXISTS entities_by_name;
    """,
)


def _statements(script: str) -> Iterator[str]:
    """The SQL statements of a migration script, each whole (a trigger's body keeps its ``;``),
    as ``executescript`` would run them: also a last statement without its ``;`` and a
    comment after the last statement."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\n;"):
                yield pending
            pending = ""
    # What is left ends inside a line comment (the ';' added to it is the comment's) or is
    # cut off. A line end closes the comment: a comment alone runs as an empty statement.
    tail = pending[:-1] + "\n;"
    if pending.strip(" \t\n;"):
        if not sqlite3.complete_statement(tail):
            raise ValueError(f"a migration ends mid-statement: {pending.strip()!r}")
        yield tail


def run_migrations(db: sqlite3.Connection, migrations: Sequence[str], store: str) -> None:
    """Run, in the caller's open transaction (which also read the version: of processes
    opening one old file at once, the first runs the steps and the others find them done),
    the steps of ``migrations`` the file lacks, statement by statement (``executescript``
    would commit the transaction first), and record each in ``user_version``. A file of a
    newer schema than ``migrations`` knows (``store`` names it in the error) is refused:
    its tables hold what this code would misread."""
    done = db.execute("PRAGMA user_version").fetchone()[0]
    if done > len(migrations):
        raise StoreError(
            f"{store} has schema version {done}, newer than this twinmem knows ({len(migrations)}):"
            " it was written by a newer twinmem; run that one"
        )
    for number, script in enumerate(migrations[done:], start=done + 1):
        for statement in _statements(script):
            db.execute(statement)
        db.execute(f"PRAGMA user_version={number}")


_COLUMNS = (
    "memory_id, namespace, content, category, entities, importance, base_score, source, actor, "
    "session_id, visibility, created_at, updated_at, last_accessed_at, access_count, expire_at, "
    "status, embedding_model, embedding_version, version, key, metadata"
)

# The writing connection's page cache. A batch of saves lands on random pages of every
# index keyed by memory id; with SQLite's default 2 MiB most of them are read back from
# the file for each batch (measured at 100k memories: a third off the store write's time).
WRITER_CACHE_KIB = 64 * 1024


class SqliteStore:
    """``Store`` over one SQLite file (see ``engine.ports.Store`` for the contract)."""

    def __init__(self, path: str | Path, *, durable: bool = True) -> None:
        self._path = Path(path)
        self._durable = durable
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        # Reads outside a write go to a second connection: in WAL mode they see every
        # committed write and never wait for a writer's commit (or its fsync).
        self._read_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        self._writing: int | None = None  # the thread inside a write transaction
        self._checker: threading.Thread | None = None
        self._checking: sqlite3.Connection | None = None
        self._integrity = "unchecked"
        self.round_trips = RoundTrips()

    # --- lifecycle --------------------------------------------------------------

    def open(self) -> None:
        with self._translate("open"):
            make_data_dir(self._path.parent)
            conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
            self._conn = conn
            try:
                # The wait first: switching a new file to WAL takes a lock another opener may hold.
                conn.execute("PRAGMA busy_timeout=10000")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={'FULL' if self._durable else 'NORMAL'}")
                conn.execute("PRAGMA foreign_keys=ON")
                conn.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")
                self._migrate(conn)
            except BaseException:
                self._conn = None
                conn.close()  # a file it cannot use is not held open
                raise
            reader = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
            reader.execute("PRAGMA busy_timeout=10000")
            self._reader = reader
            self._checking = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        self._integrity = "checking"
        self._checker = threading.Thread(target=self._quick_check, name="sqlite-quick-check", daemon=True)
        self._checker.start()

    def integrity(self) -> str:
        return self._integrity

    def wait_checked(self, timeout: float | None = None) -> str:
        """``integrity()`` once the start-up check has finished (or ``timeout`` passed)."""
        if self._checker is not None:
            self._checker.join(timeout)
        return self._integrity

    def _quick_check(self) -> None:
        """``PRAGMA quick_check`` (every page read, indexes not compared with their tables)
        on a connection of its own, beside the service: a damaged page is found at
        start-up, not when an export reaches it, and a large file does not hold the
        start-up back (``integrity()`` is ``"checking"`` meanwhile)."""
        conn = self._checking
        if conn is None:
            return
        # At the lowest priority (Linux sets a thread's own): at a million memories the
        # check reads 4 GB, and on two cores it took a core from loading the index.
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            rows = conn.execute("PRAGMA quick_check(20)").fetchall()
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                return  # the store was closed first
            found = str(exc)
        except sqlite3.DatabaseError as exc:
            found = str(exc)
        else:
            found = "; ".join(str(row[0]) for row in rows)
        finally:
            self._checking = None
            conn.close()
        if found != "ok":
            log.error("SQLite store %s is damaged (PRAGMA quick_check): %s", self._path, found)
        self._integrity = found

    def close(self) -> None:
        checking, checker = self._checking, self._checker
        if checking is not None:
            with contextlib.suppress(sqlite3.Error):
                checking.interrupt()
        if checker is not None:
            checker.join()
        with self._lock, self._read_lock:
            for conn in (self._conn, self._reader):
                if conn is not None:
                    conn.close()
            self._conn = self._reader = None

    def count_round_trips(self) -> None:
        """Count every statement and transaction from now on in ``round_trips``.

        Off until asked (``benchmarks/store_latency.py`` asks): SQLite reports each
        statement it runs through a trace callback, which gets the statement's SQL with
        its parameters written in (every vector as hex), once per row of a batch; on a
        batch save of new memories that cost 5-10% of the save.
        """
        with self._lock, self._read_lock:
            self._db.set_trace_callback(self._count_writer)
            if self._reader is not None:
                self._reader.set_trace_callback(self._count_reader)

    def _count_writer(self, statement: str) -> None:
        if statement.startswith("BEGIN"):
            self.round_trips.transaction()
        elif not statement.startswith(("COMMIT", "ROLLBACK")):
            self.round_trips.statement()

    def _count_reader(self, statement: str) -> None:
        # Reads run in autocommit mode: each statement is a transaction of its own.
        self.round_trips.transaction()
        self.round_trips.statement()

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Run the steps the file lacks, all in one ``BEGIN IMMEDIATE`` transaction that also
        reads the file's version: of processes opening one old file at once, the first runs
        them and the others, waiting for its commit, find them done (read before the
        transaction, each ran them again: 'duplicate column name', 'table memories already
        exists'). A file of a newer schema than this code knows is refused."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            run_migrations(conn, _MIGRATIONS, f"the memory store {self._path}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("store is not open")
        return self._conn

    @contextmanager
    def _translate(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.IntegrityError as exc:
            raise Conflict(f"{what}: {exc}") from exc
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorname", None)  # SQLITE_IOERR_WRITE says more than "disk I/O error"
            raise StoreError(f"{what} failed in SQLite: {exc}{f' ({code})' if code else ''}") from exc

    @contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock, self._translate(what):
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            outer, self._writing = self._writing, threading.get_ident()
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                # Also when COMMIT itself failed: never leave the connection mid-transaction.
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            finally:
                self._writing = outer

    @contextmanager
    def _read(self, what: str) -> Iterator[sqlite3.Connection]:
        if self._writing == threading.get_ident():
            # Inside this thread's own write: read what it has written so far.
            with self._lock, self._translate(what):
                yield self._db
            return
        with self._read_lock, self._translate(what):
            if self._reader is None:
                raise StoreError("store is not open")
            yield self._reader

    # --- writes -----------------------------------------------------------------

    def insert(
        self,
        memories: Sequence[Memory],
        vectors: Sequence[Vector],
        *,
        changed_by: str | None,
        reason: str = "created",
    ) -> int:
        if len(memories) != len(vectors):
            raise ValueError("insert needs one vector per memory")
        with self._write("insert") as db:
            return self._insert_rows(db, memories, vectors, changed_by, reason)

    def update(
        self,
        memory: Memory,
        vector: Vector | None,
        *,
        changed_by: str | None,
        reason: str,
        sets_base_score: bool = False,
        also: Sequence[tuple[Memory, str]] = (),
    ) -> int:
        with self._write("update") as db:
            seq = self._update_row(db, memory, vector, changed_by, reason, sets_base_score)
            for record, why in also:
                seq = self._update_row(db, record, None, changed_by, why)
            return seq

    def insert_linked(
        self,
        memories: Sequence[Memory],
        vectors: Sequence[Vector],
        *,
        updates: Sequence[tuple[Memory, str]],
        edges: Sequence[Edge],
        changed_by: str | None,
        reason: str = "created",
        seen_seq: int | None = None,
    ) -> int:
        if len(memories) != len(vectors):
            raise ValueError("insert_linked needs one vector per memory")
        with self._write("insert_linked") as db:
            seq = self._insert_rows(db, memories, vectors, changed_by, reason)
            if memories and seen_seq is not None and seq - len(memories) > seen_seq:
                namespaces = sorted({memory.namespace for memory in memories})
                rows = db.execute(
                    "SELECT m.memory_id, m.namespace, m.session_id, m.digest FROM changes c"
                    " JOIN memories m ON m.memory_id = c.memory_id"
                    f" WHERE c.seq > ? AND c.seq <= ? AND c.op = 'insert' AND c.namespace IN ({_marks(namespaces)})",
                    [seen_seq, seq - len(memories), *namespaces],
                )
                first = overtaking(memories, rows)
                if first is not None:
                    raise SaveOvertaken(first)
            for record, why in updates:
                seq = self._update_row(db, record, None, changed_by, why)
            self._put_edges(db, edges)
            return seq

    def _insert_rows(
        self,
        db: sqlite3.Connection,
        memories: Sequence[Memory],
        vectors: Sequence[Vector],
        changed_by: str | None,
        reason: str,
    ) -> int:
        """New memories with their entities, vectors, first versions and changes, each
        table written by one statement for all of them; the last change's seq (0 for none)."""
        if not memories:
            return 0
        ids = [memory.memory_id for memory in memories]
        taken: set[str] = set()
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            taken.update(
                row[0]
                for row in db.execute(f"SELECT memory_id FROM memories WHERE memory_id IN ({_marks(chunk)})", chunk)
            )
        seen: set[str] = set()
        for memory_id in ids:
            if memory_id in taken or memory_id in seen:
                raise Conflict(f"memory {memory_id} already exists", memory_id=memory_id)
            seen.add(memory_id)
        db.executemany(
            f"INSERT INTO memories ({_COLUMNS}, digest) VALUES ({', '.join('?' * 23)})",
            [(*_row(memory), memory.digest) for memory in memories],
        )
        db.executemany(_INSERT_ENTITY, [row for memory in memories for row in _entity_rows(memory)])
        db.executemany(
            _INSERT_VECTOR,
            [
                _vector_row(memory.memory_id, memory.embedding_model, vector)
                for memory, vector in zip(memories, vectors, strict=True)
            ],
        )
        db.executemany(_INSERT_VERSION, [_version_row(memory, changed_by, reason) for memory in memories])
        db.executemany(_INSERT_CHANGE, [_change_row(memory, "insert") for memory in memories])
        seq = db.execute("SELECT last_insert_rowid()").fetchone()[0]
        return int(seq)

    def _update_row(
        self,
        db: sqlite3.Connection,
        memory: Memory,
        vector: Vector | None,
        changed_by: str | None,
        reason: str,
        sets_base_score: bool = False,
    ) -> int:
        row = db.execute(f"SELECT {_COLUMNS} FROM memories WHERE memory_id = ?", (memory.memory_id,)).fetchone()
        stored = _memory(row) if row is not None else None
        if stored is None or stored.namespace != memory.namespace:
            raise MemoryNotFound(memory.memory_id, memory.namespace)
        if memory.version != stored.version + 1:  # another writer came first
            raise StaleWrite(memory.memory_id, replaces=memory.version - 1, current=stored.version)
        # Use and vectors that landed after the edit's record was read are kept.
        memory = memory.over(stored, revectored=vector is not None, sets_base_score=sets_base_score)
        self._overwrite(db, memory, vector)
        self._put_version(db, memory, changed_by, reason)
        return self._log(db, memory, "update")

    def reinforce(self, events: Sequence[Reinforcement], rescore: Rescore) -> None:
        if not events:
            return
        with self._write("reinforce") as db:
            for memory_id, bonus, at in events:
                row = db.execute(f"SELECT {_COLUMNS} FROM memories WHERE memory_id = ?", (memory_id,)).fetchone()
                if row is None:
                    continue
                memory = _memory(row)
                last = max(memory.last_accessed_at, at)
                db.execute(
                    "UPDATE memories SET base_score = ?, access_count = MIN(access_count + 1, ?), "
                    "last_accessed_at = ? WHERE memory_id = ?",
                    (rescore(memory, bonus, at), limits.MAX_COUNTER, to_iso(last), memory_id),
                )

    def put_vectors(self, vectors: Mapping[str, Vector], model: str, *, embedding_version: str | None = None) -> None:
        with self._write("put_vectors") as db:
            at = to_iso(utcnow())
            for memory_id, vector in vectors.items():
                row = db.execute("SELECT namespace FROM memories WHERE memory_id = ?", (memory_id,)).fetchone()
                if row is None:
                    continue  # purged meanwhile: a vector without its memory would never be cleaned up
                if (
                    embedding_version is not None
                    and db.execute(
                        "SELECT 1 FROM vectors v JOIN memories m ON m.memory_id = v.memory_id "
                        "WHERE v.memory_id = ? AND v.model = ? AND m.embedding_model = ?",
                        (memory_id, model, model),
                    ).fetchone()
                ):
                    continue  # re-embedding: a vector an edit stored since the caller looked is newer
                self._put_vector(db, memory_id, model, vector)
                if embedding_version is not None:
                    db.execute(
                        "UPDATE memories SET embedding_model = ?, embedding_version = ? WHERE memory_id = ?",
                        (model, embedding_version, memory_id),
                    )
                    # Other processes over the file index the new vector from this change.
                    db.execute(
                        "INSERT INTO changes (memory_id, namespace, op, at) VALUES (?, ?, 'reembed', ?)",
                        (memory_id, row[0], at),
                    )

    def purge(self, namespace: str, memory_id: str, *, version: int | None = None) -> int:
        with self._write("purge") as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE memory_id = ? AND namespace = ?",
                (memory_id, namespace),
            ).fetchone()
            if row is None:
                raise MemoryNotFound(memory_id, namespace)
            expect_version(memory_id, _memory(row).version, version)
            for table in ("memories", "memory_versions", "memory_entities", "vectors"):
                db.execute(f"DELETE FROM {table} WHERE memory_id = ?", (memory_id,))
            db.execute("DELETE FROM edges WHERE src = ? OR dst = ?", (memory_id, memory_id))
            return self._log(db, _memory(row), "purge")

    def add_edges(self, edges: Sequence[Edge]) -> None:
        with self._write("add_edges") as db:
            self._put_edges(db, edges)

    @staticmethod
    def _put_edges(db: sqlite3.Connection, edges: Sequence[Edge]) -> None:
        db.executemany(
            "INSERT OR IGNORE INTO edges (src, dst, kind, namespace, created_at) VALUES (?, ?, ?, ?, ?)",
            [(e.src, e.dst, e.kind, e.namespace, to_iso(e.created_at)) for e in edges],
        )

    def import_records(self, records: Sequence[ImportedRecord], *, changed_by: str | None) -> list[str]:
        stored: set[str] = set()
        with self._write("import_records") as db:
            later: list[tuple[ImportedRecord, Memory]] = []
            for record in records:
                memory = record.memory
                row = db.execute(f"SELECT {_COLUMNS} FROM memories WHERE memory_id = ?", (memory.memory_id,)).fetchone()
                if row is not None:
                    there = _memory(row)
                    if there.namespace != memory.namespace:
                        raise Conflict(
                            f"memory id {memory.memory_id} is taken by another namespace", memory_id=memory.memory_id
                        )
                    if record.forward_from is not None and there.version == record.forward_from:
                        later.append((record, there))
                    continue
                self._import_new(db, record, changed_by)
                stored.add(memory.memory_id)
            # After the new records: a link from a memory brought forward may point to one.
            for record, there in later:
                self._bring_forward(db, record, there)
                stored.add(record.memory.memory_id)
        return [record.memory.memory_id for record in records if record.memory.memory_id in stored]

    def _import_new(self, db: sqlite3.Connection, record: ImportedRecord, changed_by: str | None) -> None:
        memory = record.memory
        db.execute(
            f"INSERT INTO memories ({_COLUMNS}, digest) VALUES ({', '.join('?' * 23)})",
            (*_row(memory), memory.digest),
        )
        self._put_entities(db, memory)
        if record.vector is not None:
            self._put_vector(db, memory.memory_id, memory.embedding_model, record.vector)
        if not record.versions:
            self._put_version(db, memory, changed_by, "imported")
        self._put_imported_versions(db, memory, record.versions)
        self._put_edges(db, record.edges)
        self._log(db, memory, "import")

    def _overwrite(self, db: sqlite3.Connection, memory: Memory, vector: Vector | None) -> None:
        """The stored row of ``memory`` and its entities made ``memory``'s; its vector too,
        where one is given."""
        assignments = ", ".join(f"{col} = ?" for col in (name.strip() for name in _COLUMNS.split(",")[1:]))
        db.execute(
            f"UPDATE memories SET {assignments}, digest = ? WHERE memory_id = ?",
            (*_row(memory)[1:], memory.digest, memory.memory_id),
        )
        db.execute("DELETE FROM memory_entities WHERE memory_id = ?", (memory.memory_id,))
        self._put_entities(db, memory)
        if vector is not None:
            db.execute("DELETE FROM vectors WHERE memory_id = ?", (memory.memory_id,))
            self._put_vector(db, memory.memory_id, memory.embedding_model, vector)

    def _bring_forward(self, db: sqlite3.Connection, record: ImportedRecord, there: Memory) -> None:
        """``record`` written over ``there``, the stored record at ``record.forward_from``."""
        memory = record.memory.over(there, revectored=record.vector is not None, sets_base_score=True)
        self._overwrite(db, memory, record.vector)
        self._put_imported_versions(db, memory, [v for v in record.versions if v.version > there.version])
        self._put_edges(db, record.edges)
        self._log(db, memory, "import")

    @staticmethod
    def _put_imported_versions(db: sqlite3.Connection, memory: Memory, versions: Sequence[Version]) -> None:
        db.executemany(
            _INSERT_VERSION,
            [
                (
                    memory.memory_id,
                    version.version,
                    memory.namespace,
                    json.dumps(memory_to_dict(version.record), ensure_ascii=False),
                    to_iso(version.changed_at),
                    version.changed_by,
                    version.reason,
                )
                for version in versions
            ],
        )

    @staticmethod
    def _put_entities(db: sqlite3.Connection, memory: Memory) -> None:
        db.executemany(_INSERT_ENTITY, _entity_rows(memory))

    @staticmethod
    def _put_vector(db: sqlite3.Connection, memory_id: str, model: str, vector: Vector) -> None:
        db.execute(_INSERT_VECTOR, _vector_row(memory_id, model, vector))

    @staticmethod
    def _put_version(db: sqlite3.Connection, memory: Memory, changed_by: str | None, reason: str) -> None:
        db.execute(_INSERT_VERSION, _version_row(memory, changed_by, reason))

    @staticmethod
    def _log(db: sqlite3.Connection, memory: Memory, op: str) -> int:
        cur = db.execute(_INSERT_CHANGE, _change_row(memory, op))
        assert cur.lastrowid is not None
        return cur.lastrowid

    # --- scoped reads -----------------------------------------------------------

    def get(self, scope: Scope, memory_id: str) -> Memory | None:
        if not scope.namespaces:
            return None
        where, params = _scope(scope, by_id=True)
        with self._read("get") as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE memory_id = ? AND {where}", (memory_id, *params)
            ).fetchone()
        return _memory(row) if row else None

    def get_many(
        self,
        scope: Scope,
        ids: Sequence[str],
        flt: MemoryFilter,
        now: datetime,
    ) -> list[Memory]:
        if not ids or not scope.namespaces:
            return []
        with self._read("get_many") as db:
            rows = _rows_of(db, scope, ids, flt, now)
        return [_memory(row) for row in rows]

    def get_many_and_seq(
        self,
        scope: Scope,
        ids: Sequence[str],
        flt: MemoryFilter,
        now: datetime,
    ) -> tuple[list[Memory], int]:
        with self._read("get_many_and_seq") as db:
            rows = _rows_of(db, scope, ids, flt, now) if ids and scope.namespaces else []
            seq = db.execute(_NEWEST_SEQ).fetchone()[0]
        return [_memory(row) for row in rows], int(seq or 0)

    def find_by_digest(self, scope: Scope, digest: str) -> list[Memory]:
        # "+" keeps the planner on memories_by_digest instead of walking the time index.
        return self._active("find_by_digest", scope, "digest = ?", digest, "+created_at, memory_id")

    def list_page(
        self,
        scope: Scope,
        flt: MemoryFilter,
        now: datetime,
        *,
        limit: int,
        cursor: str | None = None,
    ) -> Page:
        if not scope.namespaces:
            return Page((), None)
        where, params = _where(scope, flt, now)
        if cursor is not None:
            created_at, memory_id = decode_cursor(cursor)
            where += " AND (created_at < ? OR (created_at = ? AND memory_id < ?))"
            params += [created_at, created_at, memory_id]
        with self._read("list") as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {where} ORDER BY created_at DESC, memory_id DESC LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        items = tuple(_memory(row) for row in rows[:limit])
        next_cursor = None
        if len(rows) > limit:
            last = items[-1]
            next_cursor = encode_cursor(to_iso(last.created_at), last.memory_id)
        return Page(items, next_cursor)

    def filtered_ids(self, scope: Scope, flt: MemoryFilter, now: datetime, limit: int) -> list[str]:
        if not scope.namespaces:
            return []
        where, params = _where(scope, flt, now)
        with self._read("filtered_ids") as db:
            rows = db.execute(f"SELECT memory_id FROM memories WHERE {where} LIMIT ?", (*params, limit)).fetchall()
        return [row[0] for row in rows]

    def versions(self, scope: Scope, memory_id: str) -> list[Version]:
        if self.get(scope, memory_id) is None:  # no history of a memory out of sight
            return []
        with self._read("versions") as db:
            rows = db.execute(
                "SELECT version, record, changed_at, changed_by, reason FROM memory_versions "
                "WHERE memory_id = ? ORDER BY version",
                (memory_id,),
            ).fetchall()
        kept = [
            Version(memory_id, row[0], memory_from_dict(json.loads(row[1])), from_iso(row[2]), row[3], row[4])
            for row in rows
        ]
        return [version for version in kept if scope.sees(version.record)]

    def edges(self, scope: Scope, memory_id: str) -> list[Edge]:
        if not scope.namespaces:
            return []
        where, params = _scope(scope, by_id=True)
        with self._read("edges") as db:
            rows = db.execute(
                "SELECT namespace, src, dst, kind, created_at FROM edges "
                f"WHERE (src = ? OR dst = ?) AND namespace IN ({_marks(scope.namespaces)}) ORDER BY created_at",
                (memory_id, memory_id, *scope.namespaces),
            ).fetchall()
            ends = list({end for row in rows for end in row[1:3]} | {memory_id})
            # Both ends must be in sight: a link must not reveal a memory the caller cannot read.
            seen = {
                row[0]
                for row in db.execute(
                    f"SELECT memory_id FROM memories WHERE {where} AND memory_id IN ({_marks(ends)})",
                    (*params, *ends),
                )
            }
        if memory_id not in seen:
            return []
        return [
            Edge(row[0], row[1], row[2], row[3], from_iso(row[4])) for row in rows if row[1] in seen and row[2] in seen
        ]

    def versions_of(self, scope: Scope, ids: Sequence[str]) -> dict[str, list[Version]]:
        found: dict[str, list[Version]] = {memory_id: [] for memory_id in ids}
        if not found or not scope.namespaces:
            return found
        with self._read("versions_of") as db:
            seen = _seen(db, scope, list(found))
            rows = [
                row
                for chunk in _chunks(sorted(seen), _IN_CHUNK)
                for row in db.execute(
                    "SELECT memory_id, version, record, changed_at, changed_by, reason FROM memory_versions "
                    f"WHERE memory_id IN ({_marks(chunk)}) ORDER BY memory_id, version",
                    chunk,
                )
            ]
        for memory_id, number, record, changed_at, changed_by, reason in rows:
            version = Version(
                memory_id, number, memory_from_dict(json.loads(record)), from_iso(changed_at), changed_by, reason
            )
            if scope.sees(version.record):  # no history of a memory out of sight, nor its hidden past
                found[memory_id].append(version)
        return found

    def edges_of(self, scope: Scope, ids: Sequence[str]) -> dict[str, list[Edge]]:
        found: dict[str, list[Edge]] = {memory_id: [] for memory_id in ids}
        if not found or not scope.namespaces:
            return found
        spaces = _marks(scope.namespaces)
        with self._read("edges_of") as db:
            rows: set[tuple[str, str, str, str, str]] = set()
            for chunk in _chunks(list(found), _IN_CHUNK):
                marks = _marks(chunk)
                rows.update(
                    db.execute(
                        f"SELECT namespace, src, dst, kind, created_at FROM edges WHERE src IN ({marks}) "
                        f"AND namespace IN ({spaces}) UNION SELECT namespace, src, dst, kind, created_at FROM edges "
                        f"WHERE dst IN ({marks}) AND namespace IN ({spaces})",
                        (*chunk, *scope.namespaces, *chunk, *scope.namespaces),
                    )
                )
            # Both ends must be in sight: a link must not reveal a memory the caller cannot read.
            seen = _seen(db, scope, list({end for row in rows for end in row[1:3]} | set(found)))
        for namespace, src, dst, kind, created_at in sorted(rows, key=lambda row: (row[4], row[1], row[2], row[3])):
            if src in seen and dst in seen:
                edge = Edge(namespace, src, dst, kind, from_iso(created_at))
                for end in {src, dst} & found.keys():
                    found[end].append(edge)
        return found

    def find_by_key(self, scope: Scope, key: str) -> list[Memory]:
        return self._active("find_by_key", scope, "key = ?", key, "+created_at DESC, memory_id DESC")

    def _active(self, what: str, scope: Scope, condition: str, value: str, order: str) -> list[Memory]:
        """Active memories in ``scope`` meeting ``condition`` (one placeholder, ``value``), in ``order``."""
        if not scope.namespaces:
            return []
        where, params = _scope(scope)
        with self._read(what) as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {where} AND {condition} AND +status = ? ORDER BY {order}",
                (*params, value, Status.ACTIVE.value),
            ).fetchall()
        return [_memory(row) for row in rows]

    def memories_by_entity(
        self,
        scope: Scope,
        entity_key: str,
        flt: MemoryFilter,
        now: datetime,
        limit: int,
    ) -> list[Memory]:
        namespaces = scope.namespaces
        if not namespaces:
            return []
        where, params = _where(scope, flt, now, by_id=True)
        # Walk the entity's links newest first (entities_by_time), a page at a time, and
        # keep those whose memory passes the filter: a popular entity costs a page or
        # two, not every memory that mentions it.
        found: list[Memory] = []
        page = max(2 * limit, 50)
        with self._read("memories_by_entity") as db:
            for offset in itertools.count(0, page):
                ids = [
                    row[0]
                    for row in db.execute(
                        f"SELECT memory_id FROM memory_entities WHERE namespace IN ({_marks(namespaces)}) "
                        "AND entity = ? ORDER BY created_at DESC, memory_id DESC LIMIT ? OFFSET ?",
                        (*namespaces, entity_key, page, offset),
                    )
                ]
                if ids:
                    rows = db.execute(
                        f"SELECT {_COLUMNS} FROM memories WHERE {where} AND memory_id IN ({_marks(ids)})",
                        (*params, *ids),
                    ).fetchall()
                    by_id = {row[0]: row for row in rows}
                    found += [_memory(by_id[mid]) for mid in ids if mid in by_id]
                if len(found) >= limit or len(ids) < page:
                    break
        found.sort(key=lambda m: (m.created_at, m.memory_id), reverse=True)
        return found[:limit]

    def vectors(self, ids: Sequence[str], model: str) -> dict[str, Vector]:
        found: dict[str, Vector] = {}
        with self._read("vectors") as db:
            for chunk in _chunks(ids, 500):
                for memory_id, blob in db.execute(
                    f"SELECT memory_id, vector FROM vectors WHERE model = ? AND memory_id IN ({_marks(chunk)})",
                    (model, *chunk),
                ):
                    found[memory_id] = np.frombuffer(blob, dtype=np.float32)
        return found

    # --- change sequence ----------------------------------------------------------

    def last_seq(self) -> int:
        with self._read("last_seq") as db:
            row = db.execute(_NEWEST_SEQ).fetchone()
        return int(row[0] or 0)

    def changes_since(self, seq: int, limit: int) -> list[Change]:
        with self._read("changes_since") as db:
            rows = db.execute(
                "SELECT seq, memory_id, namespace, op FROM changes WHERE seq > ? ORDER BY seq LIMIT ?",
                (seq, limit),
            ).fetchall()
        return [Change(*row) for row in rows]

    def low_water_seq(self) -> int:
        # Seqs are consecutive and the newest change is always kept: the oldest one
        # left says how far the log was pruned.
        with self._read("low_water_seq") as db:
            row = db.execute("SELECT min(seq) FROM changes").fetchone()
        return int(row[0]) - 1 if row[0] is not None else 0

    def prune_changes(self, keep: int, limit: int) -> int:
        if keep < 1:
            raise ValueError("the change log keeps at least its newest change")
        with self._write("prune_changes") as db:
            oldest, newest = db.execute("SELECT min(seq), max(seq) FROM changes").fetchone()
            if oldest is None:
                return 0
            mark = min(newest - keep, oldest - 1 + limit)
            return db.execute("DELETE FROM changes WHERE seq <= ?", (mark,)).rowcount if mark >= oldest else 0

    def index_status(self, ids: Sequence[str]) -> dict[str, Status]:
        found: dict[str, Status] = {}
        with self._read("index_status") as db:
            for chunk in _chunks(ids, 500):
                for memory_id, status in db.execute(
                    f"SELECT memory_id, status FROM memories WHERE memory_id IN ({_marks(chunk)})", chunk
                ):
                    found[memory_id] = Status(status)
        return found

    def links(self, ids: Sequence[str]) -> list[Edge]:
        found: dict[tuple[str, str, str], Edge] = {}
        with self._read("links") as db:
            for chunk in _chunks(ids, 400):
                marks = _marks(chunk)
                for namespace, src, dst, kind, created_at in db.execute(
                    "SELECT namespace, src, dst, kind, created_at FROM edges "
                    f"WHERE src IN ({marks}) UNION SELECT namespace, src, dst, kind, created_at FROM edges "
                    f"WHERE dst IN ({marks})",
                    (*chunk, *chunk),
                ):
                    found[(src, dst, kind)] = Edge(namespace, src, dst, kind, from_iso(created_at))
        return list(found.values())

    def iter_indexable(self, model: str, batch: int) -> Iterator[tuple[list[str], Matrix, list[str]]]:
        after = ""
        while True:
            with self._read("iter_indexable") as db:
                rows = db.execute(
                    "SELECT m.memory_id, v.vector FROM memories m "
                    "LEFT JOIN vectors v ON v.memory_id = m.memory_id AND v.model = ? "
                    "WHERE m.status != ? AND m.memory_id > ? ORDER BY m.memory_id LIMIT ?",
                    (model, Status.DELETED.value, after, batch),
                ).fetchall()
            if not rows:
                return
            after = rows[-1][0]
            have = [(mid, blob) for mid, blob in rows if blob is not None]
            missing = [mid for mid, blob in rows if blob is None]
            matrix = (
                np.vstack([np.frombuffer(blob, dtype=np.float32) for _, blob in have])
                if have
                else np.zeros((0, 0), dtype=np.float32)
            )
            yield [mid for mid, _ in have], matrix, missing

    def contents(self, ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        with self._read("contents") as db:
            for chunk in _chunks(ids, 500):
                found.update(
                    db.execute(
                        f"SELECT memory_id, content FROM memories WHERE memory_id IN ({_marks(chunk)})", chunk
                    ).fetchall()
                )
        return found

    def namespaces(self) -> list[str]:
        with self._read("namespaces") as db:
            rows = db.execute("SELECT DISTINCT namespace FROM memories ORDER BY namespace").fetchall()
        return [row[0] for row in rows]

    def scan(self, scope: Scope, after: str, limit: int) -> list[Memory]:
        if not scope.namespaces:
            return []
        where, params = _scope(scope)
        with self._read("scan") as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {where} AND memory_id > ? ORDER BY memory_id LIMIT ?",
                (*params, after, limit),
            ).fetchall()
        return [_memory(row) for row in rows]

    def missing_vectors(self, model: str, after: str, limit: int) -> list[str]:
        with self._read("missing_vectors") as db:
            rows = db.execute(
                "SELECT m.memory_id FROM memories m WHERE m.status != ? AND m.memory_id > ? "
                "AND (m.embedding_model != ? OR NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.memory_id = m.memory_id AND v.model = ?)) "
                "ORDER BY m.memory_id LIMIT ?",
                (Status.DELETED.value, after, model, model, limit),
            ).fetchall()
        return [row[0] for row in rows]

    def missing_vector_models(self, model: str) -> dict[str, int]:
        with self._read("missing_vector_models") as db:
            rows = db.execute(
                "SELECT m.embedding_model, count(*) FROM memories m WHERE m.status != ? "
                "AND (m.embedding_model != ? OR NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.memory_id = m.memory_id AND v.model = ?)) "
                "GROUP BY m.embedding_model",
                (Status.DELETED.value, model, model),
            ).fetchall()
        return {row[0]: int(row[1]) for row in rows}

    def count_indexable(self) -> int:
        with self._read("count_indexable") as db:
            row = db.execute("SELECT count(*) FROM memories WHERE status != ?", (Status.DELETED.value,)).fetchone()
        return int(row[0])


# --- row mapping and query building ---------------------------------------------


def _row(memory: Memory) -> tuple[Any, ...]:
    return (
        memory.memory_id,
        memory.namespace,
        memory.content,
        memory.category,
        json.dumps(list(memory.entities), ensure_ascii=False),
        memory.importance,
        memory.base_score,
        memory.source.value,
        memory.actor,
        memory.session_id,
        memory.visibility.value,
        to_iso(memory.created_at),
        to_iso(memory.updated_at),
        to_iso(memory.last_accessed_at),
        memory.access_count,
        to_iso(memory.expire_at) if memory.expire_at else None,
        memory.status.value,
        memory.embedding_model,
        memory.embedding_version,
        memory.version,
        memory.key,
        json.dumps(dict(memory.metadata), ensure_ascii=False, sort_keys=True),
    )


def _rows_of(db: sqlite3.Connection, scope: Scope, ids: Sequence[str], flt: MemoryFilter, now: datetime) -> list[Any]:
    """The rows of ``get_many``: those of ``ids`` that ``scope`` sees and ``flt`` passes."""
    where, params = _where(scope, flt, now, by_id=True)
    rows: list[Any] = []
    for chunk in _chunks(ids, _IN_CHUNK):
        rows += db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE {where} AND memory_id IN ({_marks(chunk)})",
            (*params, *chunk),
        ).fetchall()
    return rows


def _memory(row: Sequence[Any]) -> Memory:
    return Memory(
        memory_id=row[0],
        namespace=row[1],
        content=row[2],
        category=row[3],
        entities=tuple(json.loads(row[4])),
        importance=row[5],
        base_score=row[6],
        source=Source(row[7]),
        actor=row[8],
        session_id=row[9],
        visibility=Visibility(row[10]),
        created_at=from_iso(row[11]),
        updated_at=from_iso(row[12]),
        last_accessed_at=from_iso(row[13]),
        access_count=row[14],
        expire_at=from_iso(row[15]) if row[15] else None,
        status=Status(row[16]),
        embedding_model=row[17],
        embedding_version=row[18],
        version=row[19],
        key=row[20],
        metadata=json.loads(row[21]),
    )


_INSERT_ENTITY = (
    "INSERT OR IGNORE INTO memory_entities (memory_id, entity, namespace, name, created_at) VALUES (?, ?, ?, ?, ?)"
)
_INSERT_VECTOR = "INSERT OR REPLACE INTO vectors (memory_id, model, dim, vector) VALUES (?, ?, ?, ?)"
_INSERT_VERSION = (
    "INSERT INTO memory_versions (memory_id, version, namespace, record, changed_at, changed_by, reason) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_CHANGE = "INSERT INTO changes (memory_id, namespace, op, at) VALUES (?, ?, ?, ?)"
_NEWEST_SEQ = "SELECT max(seq) FROM changes"
# Ids bound in one ``IN (...)`` (SQLite's default limit on variables is 32,766).
_IN_CHUNK = 500


def _entity_rows(memory: Memory) -> list[tuple[str, str, str, str, str]]:
    names = {key: name for name, key in zip(memory.entities, _keys(memory.entities), strict=True)}
    created = to_iso(memory.created_at)
    return [(memory.memory_id, key, memory.namespace, name, created) for key, name in names.items()]


def _vector_row(memory_id: str, model: str, vector: Vector) -> tuple[str, str, int, bytes]:
    data = np.ascontiguousarray(vector, dtype=np.float32)
    return (memory_id, model, int(data.shape[0]), data.tobytes())


def _version_row(memory: Memory, changed_by: str | None, reason: str) -> tuple[object, ...]:
    return (
        memory.memory_id,
        memory.version,
        memory.namespace,
        json.dumps(memory_to_dict(memory), ensure_ascii=False),
        to_iso(memory.updated_at),
        changed_by,
        reason,
    )


def _change_row(memory: Memory, op: str) -> tuple[str, str, str, str]:
    return (memory.memory_id, memory.namespace, op, to_iso(memory.updated_at))


def _keys(entities: Sequence[str]) -> list[str]:
    return [next(iter(entity_keys([name]))) for name in entities]


def _marks(items: Sequence[object]) -> str:
    return ", ".join("?" * len(items))


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _seen(db: sqlite3.Connection, scope: Scope, ids: list[str]) -> set[str]:
    """Those of ``ids`` that ``scope`` sees (``get`` finds)."""
    where, params = _scope(scope, by_id=True)
    return {
        row[0]
        for chunk in _chunks(ids, _IN_CHUNK)
        for row in db.execute(
            f"SELECT memory_id FROM memories WHERE {where} AND memory_id IN ({_marks(chunk)})", (*params, *chunk)
        )
    }


def _scope(scope: Scope, *, by_id: bool = False) -> tuple[str, list[Any]]:
    """SQL conditions for what a scope sees; values always travel as parameters.

    ``by_id``: the query also names its memory ids; "+" then keeps the planner on the
    primary key instead of walking every row of the namespace through another index.
    The namespace list comes first so that other queries can be driven by a
    namespace index; visibility is then checked on the rows it finds.
    """
    clauses = [f"{'+' if by_id else ''}namespace IN ({_marks(scope.namespaces)})"]
    params: list[Any] = list(scope.namespaces)
    if scope.restricted:
        sights: list[str] = []
        if scope.full:
            sights.append(f"+namespace IN ({_marks(scope.full)})")
            params += scope.full
        if scope.member:
            own = " OR actor = ?" if scope.agent is not None else ""
            sights.append(f"(+namespace IN ({_marks(scope.member)}) AND (visibility != 'private'{own}))")
            params += [*scope.member, *([scope.agent] if scope.agent is not None else [])]
        if scope.public:
            sights.append(f"(+namespace IN ({_marks(scope.public)}) AND visibility = 'public')")
            params += scope.public
        if scope.own and scope.agent is not None:
            sights.append(f"(+namespace IN ({_marks(scope.own)}) AND actor = ?)")
            params += [*scope.own, scope.agent]
        if not sights:
            sights.append("0")
        clauses.append("(" + " OR ".join(sights) + ")")
    return " AND ".join(clauses), params


def _where(scope: Scope, flt: MemoryFilter, now: datetime, *, by_id: bool = False) -> tuple[str, list[Any]]:
    """SQL conditions for a scope and a filter; values always travel as parameters."""
    where, params = _scope(scope, by_id=by_id)
    clauses = [where]
    for column, values in (
        ("status", [s.value for s in flt.statuses]),
        ("category", list(flt.categories)),
        ("source", [s.value for s in flt.sources]),
    ):
        if values:
            # "+": never drive a query from the low-selectivity status index (a get_many by
            # id would otherwise walk every active row instead of the primary key).
            clauses.append(f"+{column} IN ({_marks(values)})")
            params += values
    if flt.created_after is not None:
        clauses.append("created_at >= ?")
        params.append(to_iso(flt.created_after))
    if flt.created_before is not None:
        clauses.append("created_at < ?")
        params.append(to_iso(flt.created_before))
    if flt.session_id is not None:
        clauses.append("session_id = ?")
        params.append(flt.session_id)
    if not flt.include_expired:
        clauses.append("(expire_at IS NULL OR expire_at > ?)")
        params.append(to_iso(now))
    for key, value in flt.metadata.items():
        problem = metadata_key_problem(key)
        if problem:
            raise InvalidInput(problem, field="filter.metadata")
        # As stored (not \u-escaped): SQLite's JSON paths read a quoted label as it is.
        path = "$." + ".".join(json.dumps(part, ensure_ascii=False) for part in key.split("."))
        if value is None:
            clauses.append("json_type(metadata, ?) = 'null'")
            params.append(path)
        elif isinstance(value, bool):
            clauses.append("json_type(metadata, ?) = ?")
            params += [path, "true" if value else "false"]
        else:
            # json_extract gives 1 for true and the JSON text of an object, so the
            # JSON type is checked too: {"x": 1} must not match {"x": true}.
            kinds = "('text')" if isinstance(value, str) else "('integer', 'real')"
            clauses.append(f"json_type(metadata, ?) IN {kinds} AND json_extract(metadata, ?) = ?")
            params += [path, path, value]
    return " AND ".join(clauses), params
