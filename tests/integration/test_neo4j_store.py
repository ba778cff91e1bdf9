"""Neo4jStore beyond the shared contract: its schema migrations and its error translation."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import neo4j
import numpy as np
import pytest
from neo4j import exceptions as neo4j_errors

from engine.adapters import neo4j_migrations
from engine.adapters.neo4j_store import Neo4jStore, _translate
from engine.errors import Conflict, StoreError, TwinmemError
from engine.records import Memory, Source, new_memory_id
from tests.bolt import BoltTarget, free_port

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def memory(memory_id: str) -> Memory:
    return Memory(
        memory_id=memory_id,
        namespace="ns",
        content="a memory",
        category="fact",
        base_score=0.5,
        importance=0.5,
        source=Source.USER_INPUT,
        created_at=T0,
        updated_at=T0,
        last_accessed_at=T0,
        embedding_model="m",
    )


# --- error translation ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("foreign", "engine_error"),
    [
        (neo4j_errors.ConstraintError("already exists"), Conflict),
        (neo4j_errors.ClientError("bad statement"), StoreError),
        (neo4j_errors.CypherSyntaxError("syntax"), StoreError),
        (neo4j_errors.AuthError("who are you"), StoreError),
        (neo4j_errors.TransientError("retries ran out"), StoreError),
        (neo4j_errors.DatabaseError("disk"), StoreError),
        (neo4j_errors.ServiceUnavailable("gone"), StoreError),
        (neo4j_errors.SessionExpired("expired"), StoreError),
        (neo4j_errors.ConfigurationError("bad config"), StoreError),
    ],
)
def test_every_driver_error_becomes_an_engine_error(foreign: Exception, engine_error: type[TwinmemError]) -> None:
    with pytest.raises(engine_error) as caught, _translate("test"):
        raise foreign
    assert type(caught.value) is engine_error
    assert caught.value.__cause__ is foreign


def test_engine_errors_pass_through_untouched() -> None:
    raised = Conflict("stale", memory_id="x")
    with pytest.raises(Conflict) as caught, _translate("test"):
        raise raised
    assert caught.value is raised


def test_no_server_is_a_store_error() -> None:
    store = Neo4jStore(f"bolt://127.0.0.1:{free_port()}", user="neo4j", password="x")
    with pytest.raises(StoreError) as caught:
        store.open()
    assert isinstance(caught.value.__cause__, neo4j_errors.DriverError | neo4j_errors.Neo4jError)


@pytest.mark.parametrize("uri", ["ftp://not-a-bolt-server", "bolt://[::1"])
def test_a_malformed_uri_is_a_store_error(uri: str) -> None:
    with pytest.raises(StoreError, match="open"):
        Neo4jStore(uri, user="neo4j", password="x").open()


def test_a_closed_store_refuses_work() -> None:
    with pytest.raises(StoreError, match="not open"):
        Neo4jStore("bolt://127.0.0.1:7687").last_seq()


def test_wrong_credentials_are_a_store_error(arcadedb: BoltTarget) -> None:
    store = Neo4jStore(arcadedb.uri, user=arcadedb.user, password="not-the-password", database=arcadedb.new_database())
    with pytest.raises(StoreError):
        store.open()


def test_a_uniqueness_violation_from_the_server_is_a_conflict(arcadedb: BoltTarget) -> None:
    store = arcadedb.store(arcadedb.new_database())
    store.open()
    try:
        # Both new, so the adapter's own check passes; the server's constraint refuses the second.
        twin = new_memory_id()
        with pytest.raises(Conflict) as caught:
            store.insert([memory(twin), memory(twin)], [np.ones(4, dtype=np.float32)] * 2, changed_by=None)
        assert isinstance(caught.value.__cause__, neo4j_errors.ConstraintError)
        assert store.last_seq() == 0
    finally:
        store.close()


# --- schema migrations ------------------------------------------------------------------


def test_migrations_run_once_and_are_recorded(arcadedb: BoltTarget) -> None:
    database = arcadedb.new_database()
    first = arcadedb.store(database)
    first.open()
    first.close()
    numbers = [m.number for m in neo4j_migrations.load()]
    assert [m.number for m in first.migrations] == numbers
    skipped = [m for m in first.migrations if not m.applied]
    # ArcadeDB's Cypher has no full-text index: the Neo4j-only file is recorded as skipped, with why.
    assert [m.name for m in skipped] == ["fulltext"]
    assert "ArcadeDB" in skipped[0].note

    again = arcadedb.store(database)
    again.open()
    again.close()
    assert again.migrations == []
    with (
        neo4j.GraphDatabase.driver(arcadedb.uri, auth=(arcadedb.user, arcadedb.password)) as driver,
        driver.session(database=database) as session,
    ):
        recorded = session.run("MATCH (s:SchemaMigration) RETURN s.number AS n, s.applied AS applied ORDER BY n")
        assert [(r["n"], r["applied"]) for r in recorded] == [(m.number, m.applied) for m in first.migrations]
        # The constraint from 0001 is in force.
        session.run("CREATE (:Memory {memory_id: 'same'})").consume()
        with pytest.raises(neo4j_errors.ConstraintError):
            session.run("CREATE (:Memory {memory_id: 'same'})").consume()


def test_migration_files_are_numbered_without_gaps(tmp_path: Path) -> None:
    (tmp_path / "0001_first.cypher").write_text("CREATE INDEX a IF NOT EXISTS FOR (n:A) ON (n.x);\n")
    (tmp_path / "0003_third.cypher").write_text("CREATE INDEX b IF NOT EXISTS FOR (n:B) ON (n.x);\n")
    with pytest.raises(ValueError, match="without gaps"):
        neo4j_migrations.load(tmp_path)


def test_migration_files_must_be_named_by_number(tmp_path: Path) -> None:
    (tmp_path / "constraints.cypher").write_text("RETURN 1;\n")
    with pytest.raises(ValueError, match="NNNN_name"):
        neo4j_migrations.load(tmp_path)


def test_statements_are_split_and_comments_dropped(tmp_path: Path) -> None:
    (tmp_path / "0001_x.cypher").write_text(
        "// requires: neo4j\n// a comment; with a semicolon\nCREATE INDEX a IF NOT EXISTS\nFOR (n:A) ON (n.x);\n\n"
        "MERGE (c:Counter {name: 'changes'})\nON CREATE SET c.seq = 0;\n"
    )
    (migration,) = neo4j_migrations.load(tmp_path)
    assert migration.requires == "neo4j"
    assert migration.statements == (
        "CREATE INDEX a IF NOT EXISTS\nFOR (n:A) ON (n.x)",
        "MERGE (c:Counter {name: 'changes'})\nON CREATE SET c.seq = 0",
    )
