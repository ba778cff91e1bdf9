"""Applies the numbered Cypher migrations of the ``graph_schema`` package to a Bolt database.

Each ``NNNN_name.cypher`` file holds statements separated by ``;`` and ``//``
comments. Files are append-only: a released file is never edited, a change is a
new number. Each file is applied once, in order, and recorded as a
``(:SchemaMigration {number, name, applied_at, applied, note})`` node; a file
already recorded is skipped. Statements are written to be idempotent (``IF NOT
EXISTS``, ``MERGE``), so two processes starting at once, or a start that died
half-way through a file, do no harm: the file runs again.

A file whose header says ``// requires: neo4j`` uses syntax that only Neo4j
itself accepts (its full-text index, for one). On another Bolt server
(ArcadeDB answers as "Neo4j/5.x compatible (ArcadeDB ...)") such a file is
recorded with ``applied: false`` and a note saying why, and a warning is logged.

Schema statements run each in its own auto-commit transaction: Neo4j refuses
schema and data changes in one transaction. Replicas starting together race: a
statement another process got in first ("already exists", "equivalent") counts as
done, a transient error is retried, and a migration recorded by several at once keeps
one record (the earliest). On Neo4j itself the start-up then waits for the indexes
to come online (``db.awaitIndexes``).

The files ship inside the package (``graph_schema`` is package data), so an
installed twinmem finds them; finding none is an error, never an empty schema.
``mode = "check"`` is for a user without schema rights: it verifies that every
migration is recorded and changes nothing. In either mode a database with a migration
recorded that this code does not ship (a newer twinmem's) is refused.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from importlib.resources.abc import Traversable
from typing import LiteralString

import neo4j
from neo4j import exceptions as neo4j_errors

from engine.errors import StoreError

log = logging.getLogger(__name__)

SCHEMA_DIR: Traversable = resources.files("graph_schema")
MODES = ("apply", "check")
# Server answers that mean another process made the same schema object first.
_ALREADY = ("alreadyexists", "already exists", "equivalent")
_TRANSIENT_TRIES = 5
_INDEX_WAIT_SECONDS = 300
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.cypher$")
_REQUIRES = re.compile(r"^//\s*requires:\s*(\w+)\s*$", re.MULTILINE)

_RECORDED: LiteralString = """
MATCH (s:SchemaMigration)
RETURN s.number AS number
"""

_RECORD: LiteralString = """
MERGE (s:SchemaMigration {number: $number})
ON CREATE SET s.name = $name, s.applied_at = $applied_at, s.applied = $applied, s.note = $note, s.token = $token
"""

# Where the server does not make MERGE atomic, replicas racing through one migration can
# record it twice: every one of them keeps the same record (the earliest, ties by token).
_DEDUPE: LiteralString = """
MATCH (s:SchemaMigration {number: $number})
WITH s ORDER BY s.applied_at, s.token
WITH collect(s) AS records
UNWIND records[1..] AS extra
DETACH DELETE extra
"""


@dataclass(frozen=True, slots=True)
class Migration:
    number: int
    name: str
    statements: tuple[str, ...]
    # "neo4j" when the file holds syntax only Neo4j itself accepts; None for any Bolt + Cypher server.
    requires: str | None


@dataclass(frozen=True, slots=True)
class Applied:
    """What one start-up did with one migration file."""

    number: int
    name: str
    applied: bool
    note: str


def load(directory: Traversable = SCHEMA_DIR) -> list[Migration]:
    """Every migration file in ``directory``, in number order; ``StoreError`` when there
    are none (an installation without its schema must not start on an empty one)."""
    found: list[Migration] = []
    files = sorted((p for p in directory.iterdir() if p.name.endswith(".cypher")), key=lambda p: p.name)
    if not files:
        raise StoreError(
            f"no graph schema migrations found in {directory}: the installation is incomplete "
            "(graph_schema/NNNN_name.cypher ship with the package)"
        )
    for path in files:
        match = _FILE_NAME.match(path.name)
        if match is None:
            raise ValueError(f"migration file {path.name} is not named NNNN_name.cypher")
        text = path.read_text(encoding="utf-8")
        requires = _REQUIRES.search(text)
        found.append(
            Migration(int(match[1]), match[2], tuple(split_statements(text)), requires[1] if requires else None)
        )
    numbers = [m.number for m in found]
    if numbers != list(range(1, len(found) + 1)):
        raise ValueError(f"migrations in {directory} must be numbered 1, 2, 3... without gaps, got {numbers}")
    return found


def split_statements(text: str) -> list[str]:
    """Statements of a Cypher script: ``//`` comment lines dropped, split on ``;`` at line ends."""
    body = "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))
    return [statement.strip() for statement in re.split(r";\s*(?:\n|$)", body) if statement.strip()]


def is_neo4j(driver: neo4j.Driver) -> bool:
    """Whether the server is Neo4j itself rather than another server speaking Bolt."""
    agent = driver.get_server_info().agent
    return agent.startswith("Neo4j/") and "compatible" not in agent


def migrate(
    driver: neo4j.Driver, database: str | None, directory: Traversable = SCHEMA_DIR, *, mode: str = "apply"
) -> list[Applied]:
    """Apply every migration not yet recorded and return what this call did; with
    ``mode="check"``, change nothing and raise ``StoreError`` naming any not recorded."""
    if mode not in MODES:
        raise ValueError(f"migrations mode must be one of {MODES}, got {mode!r}")
    migrations = load(directory)
    neo4j_itself = is_neo4j(driver)
    with driver.session(database=database) as session:
        done = {record["number"] for record in session.run(_RECORDED)}
        newer = sorted(number for number in done if number > len(migrations))
        if newer:
            # A newer twinmem's schema: its nodes hold what this one would misread.
            raise StoreError(
                f"the graph schema has migration {newer[-1]:04d} recorded, newer than this twinmem knows"
                f" ({len(migrations):04d}): the database was migrated by a newer twinmem; run that one"
            )
        if mode == "check":
            missing = [f"{m.number:04d}_{m.name}" for m in migrations if m.number not in done]
            if missing:
                raise StoreError(
                    f"the graph schema is behind: migrations {', '.join(missing)} are not recorded; "
                    'start once with [neo4j] migrations = "apply" as a user with schema rights'
                )
            return []
        report: list[Applied] = []
        for migration in migrations:
            if migration.number in done:
                continue
            applied, note = True, ""
            if migration.requires == "neo4j" and not neo4j_itself:
                applied = False
                note = f"needs Neo4j itself; skipped on {driver.get_server_info().agent}"
                log.warning("graph schema migration %04d_%s %s", migration.number, migration.name, note)
            else:
                for statement in migration.statements:
                    _run_schema(session, statement)
            _record(session, migration, applied, note)
            report.append(Applied(migration.number, migration.name, applied, note))
        if neo4j_itself:
            # Indexes build in the background on Neo4j: reads must not start before them.
            session.run(f"CALL db.awaitIndexes({_INDEX_WAIT_SECONDS})").consume()
    return report


def _run_schema(session: neo4j.Session, statement: str) -> None:
    """One schema statement; done already by another process counts as done, and a
    transient error (a lock held by a replica starting at the same time) is retried."""
    for attempt in range(_TRANSIENT_TRIES):
        try:
            # The text is this repository's own migration file, never input.
            session.run(statement).consume()
            return
        except neo4j_errors.ClientError as exc:
            said = f"{exc.code or ''} {exc.message or ''}".lower()
            if any(word in said for word in _ALREADY):
                log.info("graph schema statement already applied by another process: %s", said.strip())
                return
            raise
        except neo4j_errors.TransientError:
            if attempt == _TRANSIENT_TRIES - 1:
                raise
            time.sleep(0.2 * 2**attempt)


def _record(session: neo4j.Session, migration: Migration, applied: bool, note: str) -> None:
    """Record the migration as done, once, even when replicas record it at the same time."""
    with contextlib.suppress(neo4j_errors.ConstraintError):  # another replica's record won
        session.run(
            _RECORD,
            number=migration.number,
            name=migration.name,
            applied_at=datetime.now(UTC).isoformat(timespec="microseconds"),
            applied=applied,
            note=note,
            token=secrets.token_hex(8),
        ).consume()
    session.run(_DEDUPE, number=migration.number).consume()
