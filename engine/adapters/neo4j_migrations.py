"""Applies the numbered Cypher migrations in ``graph_schema/`` to a Bolt database.

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
schema and data changes in one transaction.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import LiteralString

import neo4j

log = logging.getLogger(__name__)

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "graph_schema"
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.cypher$")
_REQUIRES = re.compile(r"^//\s*requires:\s*(\w+)\s*$", re.MULTILINE)

_RECORDED: LiteralString = """
MATCH (s:SchemaMigration)
RETURN s.number AS number
"""

_RECORD: LiteralString = """
MERGE (s:SchemaMigration {number: $number})
ON CREATE SET s.name = $name, s.applied_at = $applied_at, s.applied = $applied, s.note = $note
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


def load(directory: Path = SCHEMA_DIR) -> list[Migration]:
    """Every migration file in ``directory``, in number order."""
    found: list[Migration] = []
    for path in sorted(directory.glob("*.cypher")):
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


def migrate(driver: neo4j.Driver, database: str | None, directory: Path = SCHEMA_DIR) -> list[Applied]:
    """Apply every migration not yet recorded; return what this call did."""
    migrations = load(directory)
    neo4j_itself = is_neo4j(driver)
    with driver.session(database=database) as session:
        done = {record["number"] for record in session.run(_RECORDED)}
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
                    # The text is this repository's own migration file, never input.
                    session.run(statement).consume()
            session.run(
                _RECORD,
                number=migration.number,
                name=migration.name,
                applied_at=datetime.now(UTC).isoformat(timespec="microseconds"),
                applied=applied,
                note=note,
            ).consume()
            report.append(Applied(migration.number, migration.name, applied, note))
    return report
