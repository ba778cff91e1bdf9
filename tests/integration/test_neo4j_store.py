"""Neo4jStore beyond the shared contract: its schema migrations and its error translation."""

from __future__ import annotations

import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import neo4j
import numpy as np
import pytest
from neo4j import exceptions as neo4j_errors

from engine.adapters import neo4j_migrations, neo4j_store
from engine.adapters.neo4j_store import Neo4jStore, _translate
from engine.errors import Conflict, StaleWrite, StoreError, TwinmemError
from engine.ports import Edge
from engine.records import Memory, MemoryFilter, Scope, Source, Status, entity_keys, new_memory_id
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


def test_every_session_carries_the_bookmarks_of_the_last_write(arcadedb: BoltTarget) -> None:
    """Read-your-writes on a cluster: the store's sessions share one bookmark manager, so
    a read starts from (at least) the transaction of the write before it. A single
    server can't show a lagging member; what it shows is that the write's bookmark is
    held and handed to the next session, and that the server takes it."""
    store = arcadedb.store(arcadedb.new_database())
    store.open()
    try:
        before = store._bookmarks.get_bookmarks()
        store.insert([memory("first")], [np.ones(4, np.float32)], changed_by=None)
        after_write = store._bookmarks.get_bookmarks()
        assert after_write and after_write != before
        assert store.last_seq() > 0  # a read started from those bookmarks: the server takes them
        store.insert([memory("second")], [np.ones(4, np.float32)], changed_by=None)
        assert store._bookmarks.get_bookmarks() not in (before, after_write)  # each write moves them on
        assert arcadedb.store("elsewhere")._bookmarks is not store._bookmarks  # one manager per store
    finally:
        store.close()


def _recorded(target: BoltTarget, database: str) -> list[int]:
    with (
        neo4j.GraphDatabase.driver(target.uri, auth=(target.user, target.password)) as driver,
        driver.session(database=database) as session,
    ):
        return sorted(r["n"] for r in session.run("MATCH (s:SchemaMigration) RETURN s.number AS n"))


def test_check_mode_refuses_an_unmigrated_database_and_changes_nothing(arcadedb: BoltTarget) -> None:
    database = arcadedb.new_database()
    checking = Neo4jStore(
        arcadedb.uri, user=arcadedb.user, password=arcadedb.password, database=database, migrations="check"
    )
    with pytest.raises(StoreError, match=r'0001_constraints.*not recorded.*migrations = "apply"'):
        checking.open()
    assert _recorded(arcadedb, database) == []
    with (
        neo4j.GraphDatabase.driver(arcadedb.uri, auth=(arcadedb.user, arcadedb.password)) as driver,
        driver.session(database=database) as session,
    ):
        assert session.run("MATCH (c:Counter) RETURN count(c) AS n").single()["n"] == 0  # type: ignore[index]


def test_check_mode_opens_a_migrated_database(arcadedb: BoltTarget) -> None:
    database = arcadedb.new_database()
    applying = arcadedb.store(database)
    applying.open()
    applying.close()
    checking = Neo4jStore(
        arcadedb.uri, user=arcadedb.user, password=arcadedb.password, database=database, migrations="check"
    )
    checking.open()
    try:
        assert checking.migrations == []
        assert checking.last_seq() == 0
    finally:
        checking.close()


@pytest.mark.parametrize("mode", ["apply", "check"])
def test_a_database_migrated_by_a_newer_twinmem_is_refused(arcadedb: BoltTarget, mode: str) -> None:
    """A migration recorded that this code does not ship was ignored: an older twinmem ran
    on a newer schema as if it were its own. It is now refused on open, in either mode."""
    database = arcadedb.new_database()
    applying = arcadedb.store(database)
    applying.open()
    applying.close()
    newer = len(neo4j_migrations.load()) + 1
    with (
        neo4j.GraphDatabase.driver(arcadedb.uri, auth=(arcadedb.user, arcadedb.password)) as driver,
        driver.session(database=database) as session,
    ):
        session.run("CREATE (:SchemaMigration {number: $n, name: 'future', applied: true})", n=newer).consume()
    store = Neo4jStore(arcadedb.uri, user=arcadedb.user, password=arcadedb.password, database=database, migrations=mode)
    with pytest.raises(StoreError, match=rf"migration {newer:04d} recorded, newer than this twinmem knows"):
        store.open()
    assert store.migrations == []
    store.close()


def test_three_replicas_starting_at_once_migrate_once(arcadedb: BoltTarget) -> None:
    database = arcadedb.new_database()
    stores = [arcadedb.store(database) for _ in range(3)]
    start = threading.Barrier(len(stores))

    def open_one(store: Neo4jStore) -> None:
        start.wait()
        store.open()

    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            for opened in [pool.submit(open_one, store) for store in stores]:
                opened.result(timeout=120)  # re-raises what an open raised
        numbers = [m.number for m in neo4j_migrations.load()]
        assert _recorded(arcadedb, database) == numbers  # each recorded once
        # Whoever ran a migration reports it; together they ran every one.
        assert {m.number for store in stores for m in store.migrations} == set(numbers)
        seq = stores[0].last_seq()
        assert all(store.last_seq() == seq for store in stores)
    finally:
        for store in stores:
            store.close()


def test_replicas_saving_at_once_take_the_next_change_numbers_in_turn(arcadedb: BoltTarget) -> None:
    """Two replicas' writes that read the change counter at the same moment both create a
    ``(:Change)`` with the next seq: ArcadeDB refuses the later one on the unique seq index
    before its counter check, as a constraint violation the driver does not retry. It
    reached the client as a 409 "Duplicated key [919] found on index 'Change[seq]'" for a
    plain save (4 of 120 saves through two API processes); it is tried again, like the
    counter conflict it is."""
    database = arcadedb.new_database()
    stores = [arcadedb.store(database) for _ in range(2)]
    for store in stores:
        store.open()
    start = threading.Barrier(4)

    def save(store: Neo4jStore) -> None:
        start.wait()
        for _ in range(25):
            store.insert([memory(new_memory_id())], [np.ones(4, dtype=np.float32) / 2], changed_by="test")

    try:
        with ThreadPoolExecutor(4) as pool:
            for saved in [pool.submit(save, stores[i % 2]) for i in range(4)]:
                saved.result(timeout=300)  # re-raises what a save raised
        assert stores[0].last_seq() == stores[1].last_seq() == 100
        assert [c.seq for c in stores[0].changes_since(0, 1000)] == list(range(1, 101))
    finally:
        for store in stores:
            store.close()


def test_no_migration_files_is_an_error_not_an_empty_schema(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no graph schema migrations found"):
        neo4j_migrations.load(tmp_path)


def test_the_migrations_ship_inside_the_package() -> None:
    shipped = sorted(p.name for p in neo4j_migrations.SCHEMA_DIR.iterdir() if p.name.endswith(".cypher"))
    in_repo = sorted(p.name for p in (Path(__file__).resolve().parents[2] / "graph_schema").glob("*.cypher"))
    assert shipped == in_repo and shipped
    assert [m.number for m in neo4j_migrations.load()] == list(range(1, len(shipped) + 1))


@pytest.mark.slow
def test_a_built_wheel_carries_the_migrations(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run(
        [*build, "-w", str(tmp_path), str(root)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("twinmem-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {f"graph_schema/{p.name}" for p in (root / "graph_schema").glob("*.cypher")}
    assert wanted and wanted <= names
    assert "graph_schema/__init__.py" in names


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


# --- statements per operation ------------------------------------------------------------


def _statements(store: Neo4jStore, work: Callable[[], object]) -> tuple[int, int]:
    before = store.round_trips.totals()
    work()
    after = store.round_trips.totals()
    return after[0] - before[0], after[1] - before[1]


def test_a_write_runs_the_same_statements_whatever_its_size(arcadedb: BoltTarget) -> None:
    """Each statement is a round trip to the server: a batch save, and a save that
    supersedes many older memories, cost what a single one does."""
    store = arcadedb.store(arcadedb.new_database())
    store.open()
    try:
        vector = np.ones(4, dtype=np.float32)

        def batch(size: int, superseding: int) -> tuple[int, int]:
            olds = [memory(new_memory_id()).evolve(entities=("tea", "Kyoto")) for _ in range(superseding)]
            if olds:
                store.insert(olds, [vector] * len(olds), changed_by=None)
            news = [memory(new_memory_id()).evolve(entities=("tea",)) for _ in range(size)]
            updates = [(old.evolve(version=2, status=Status.SUPERSEDED, entities=()), "superseded") for old in olds]
            # One of them twice: consecutive versions in one transaction.
            updates += [(updates[0][0].evolve(version=3, content="edited"), "edited")] if olds else []
            edges = [Edge("ns", news[0].memory_id, old.memory_id, "SUPERSEDES", T0) for old in olds]
            return _statements(
                store,
                lambda: store.insert_linked(
                    news, [vector] * size, updates=updates, edges=edges, changed_by=None, reason="created"
                ),
            )

        assert batch(100, 0) == batch(1, 0)
        assert batch(100, 30) == batch(1, 2)
        statements, transactions = batch(1, 2)
        assert transactions == 1 and statements <= 15
        stored = store.get(Scope.whole(["ns"]), store.changes_since(store.last_seq() - 1, 1)[0].memory_id)
        assert stored is not None and (stored.version, stored.content) == (3, "edited")
    finally:
        store.close()


def test_a_read_of_one_statement_is_one_round_trip(arcadedb: BoltTarget) -> None:
    """The freshness check and the final read of a recall run as auto-commit statements:
    no BEGIN and COMMIT around them."""
    store = arcadedb.store(arcadedb.new_database())
    store.open()
    try:
        stored = memory(new_memory_id())
        store.insert([stored], [np.ones(4, dtype=np.float32)], changed_by=None)
        assert _statements(store, store.last_seq) == (1, 0)
        found: list[Memory] = []

        def read() -> None:
            found.extend(store.get_many(Scope.whole(["ns"]), [stored.memory_id], MemoryFilter(), T0))

        assert _statements(store, read) == (1, 0)
        assert [m.memory_id for m in found] == [stored.memory_id]
    finally:
        store.close()


class _Failing:
    """A driver whose first ``failures`` sessions fail to run with ``error`` (the rest are the real one's)."""

    def __init__(self, driver: neo4j.Driver, error: Exception, failures: int) -> None:
        self._driver = driver
        self._error = error
        self.failures = failures
        self.sessions = 0

    def session(self, **config: object) -> object:
        self.sessions += 1
        if self.failures <= 0:
            return self._driver.session(**config)  # type: ignore[arg-type]
        self.failures -= 1
        error = self._error

        class Broken:
            def __enter__(self) -> Broken:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def run(self, *args: object, **kwargs: object) -> None:
                raise error

            def execute_write(self, *args: object, **kwargs: object) -> None:
                raise error

        return Broken()


@contextmanager
def _failing_sessions(store: Neo4jStore, error: Exception) -> Iterator[_Failing]:
    """``store`` opened, its driver's sessions failing with ``error`` (on a read or a
    write) as often as the
    yielded ``_Failing``'s ``failures`` says (none at first); closed after."""
    store.open()
    real = store.driver
    failing = _Failing(real, error, failures=0)
    store._driver = failing  # type: ignore[assignment]
    try:
        yield failing
    finally:
        store._driver = real
        store.close()


def test_a_read_that_fails_retryably_is_tried_again(arcadedb: BoltTarget) -> None:
    store = arcadedb.store(arcadedb.new_database())
    with _failing_sessions(store, neo4j_errors.ServiceUnavailable("the leader moved")) as failing:
        expected = store.last_seq()
        failing.failures, failing.sessions = 2, 0
        assert store.last_seq() == expected
        assert failing.sessions == 3


def test_a_read_that_fails_for_good_is_not_repeated(arcadedb: BoltTarget) -> None:
    store = arcadedb.store(arcadedb.new_database())
    with _failing_sessions(store, neo4j_errors.ClientError("bad statement")) as failing:
        failing.failures = 5
        with pytest.raises(StoreError, match="last_seq"):
            store.last_seq()
        assert failing.sessions == 1


def test_retrying_a_read_stops_at_the_retry_time(arcadedb: BoltTarget) -> None:
    store = Neo4jStore(
        arcadedb.uri,
        user=arcadedb.user,
        password=arcadedb.password,
        database=arcadedb.new_database(),
        max_transaction_retry_time=0.5,
    )
    with _failing_sessions(store, neo4j_errors.TransientError("busy")) as failing:
        failing.failures = 100
        with pytest.raises(StoreError, match="last_seq failed"):
            store.last_seq()
        assert 2 <= failing.sessions <= 4  # pauses of 0.1, 0.2 (and no 0.4: past the 0.5 s)


# ArcadeDB's word for a record that a transaction committed meanwhile deleted, met when
# pruners race (test_pruners_racing_forget_each_change_once_and_keep_the_newest): the
# timing cannot be forced from outside, so the error is injected here.
class _Vanished(neo4j_errors.ClientError):
    @property
    def code(self) -> str:
        return "Neo.ClientError.Statement.EntityNotFound"


_VANISHED = _Vanished("Error executing Cypher command")


def test_a_write_that_reached_a_record_deleted_meanwhile_is_tried_again(arcadedb: BoltTarget) -> None:
    store = arcadedb.store(arcadedb.new_database())
    with _failing_sessions(store, _VANISHED) as failing:
        store.insert([memory(new_memory_id()) for _ in range(3)], [np.ones(4, np.float32)] * 3, changed_by=None)
        failing.failures, failing.sessions = 2, 0
        assert store.prune_changes(1, 10) == 2
        assert failing.sessions == 3
        assert store.low_water_seq() == 2


def test_a_write_that_fails_for_good_is_not_repeated(arcadedb: BoltTarget) -> None:
    store = arcadedb.store(arcadedb.new_database())
    with _failing_sessions(store, neo4j_errors.ClientError("bad statement")) as failing:
        failing.failures = 5
        with pytest.raises(StoreError, match="prune_changes"):
            store.prune_changes(1, 10)
        assert failing.sessions == 1


@contextmanager
def _cut_in_before_logging(monkeypatch: pytest.MonkeyPatch, other: Callable[[], object]) -> Iterator[list[object]]:
    """The first write transaction to log its change runs ``other`` (another replica's
    write, on a thread of its own, committed) first: the two were under way at once, and
    the other committed between this one's reads and its commit. Yields what ``other``
    returned, once it has run."""
    log = neo4j_store._log
    done: list[object] = []

    def logged_after_the_other(tx: neo4j.ManagedTransaction, changes: list[dict[str, str]]) -> int:
        if not done:
            done.append(None)
            with ThreadPoolExecutor(1) as pool:
                done[0] = pool.submit(other).result(timeout=60)
        return log(tx, changes)

    monkeypatch.setattr(neo4j_store, "_log", logged_after_the_other)
    yield done


def test_an_edit_another_replica_made_first_is_a_stale_write(
    arcadedb: BoltTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas edit one memory at once, each over version 1. ArcadeDB's optimistic
    transactions let both read version 1; the later one's version 2 met the earlier one's
    on the unique (memory_id, version) index, a constraint violation that reached the
    client as a 409 "Duplicated key [..., 2] found on index 'MemoryVersion[memory_id,version]'"
    (7 of 8 conditional PATCH races through two API processes) instead of the 412 a
    stale ``If-Match`` gets, and an unconditional edit was refused instead of applied again.
    It is tried again: the write then reads version 2 and is a ``StaleWrite``."""
    database = arcadedb.new_database()
    first, second = arcadedb.store(database), arcadedb.store(database)
    try:
        for store in (first, second):
            store.open()
        stored = memory(new_memory_id())
        first.insert([stored], [np.ones(4, dtype=np.float32) / 2], changed_by="test")
        theirs = stored.evolve(version=2, content="the second replica's edit")
        with _cut_in_before_logging(
            monkeypatch, lambda: second.update(theirs, None, changed_by="b", reason="edited")
        ) as cut_in:
            with pytest.raises(StaleWrite) as stale:
                first.update(
                    stored.evolve(version=2, content="the first's edit"), None, changed_by="a", reason="edited"
                )
        assert cut_in
        assert stale.value.current_version == 2
        scope = Scope.whole(["ns"])
        assert [(v.version, v.record.content) for v in first.versions(scope, stored.memory_id)] == [
            (1, "a memory"),
            (2, "the second replica's edit"),
        ]
    finally:
        for store in (first, second):
            store.close()


def test_an_entity_another_replica_created_meanwhile_is_linked(
    arcadedb: BoltTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas save memories about a new entity at once: both MERGE it, the later
    one's creation meets the earlier one's on the unique (namespace, key) index. Tried
    again, the MERGE finds it; both memories mention the one entity."""
    database = arcadedb.new_database()
    first, second = arcadedb.store(database), arcadedb.store(database)
    try:
        for store in (first, second):
            store.open()
        mine, theirs = (memory(new_memory_id()).evolve(entities=("Zorblax",)) for _ in range(2))
        vector = np.ones(4, dtype=np.float32) / 2
        with _cut_in_before_logging(monkeypatch, lambda: second.insert([theirs], [vector], changed_by="b")) as cut_in:
            first.insert([mine], [vector], changed_by="a")
        assert cut_in
        (key,) = entity_keys(["Zorblax"])
        about = first.memories_by_entity(Scope.whole(["ns"]), key, MemoryFilter(), T0, limit=10)
        assert {m.memory_id for m in about} == {mine.memory_id, theirs.memory_id}
    finally:
        for store in (first, second):
            store.close()
