"""Neo4jStore's vectors on the Bolt tier: float32 bytes, one per (memory, model), old
list vectors still read, re-embedding seen by another replica, and the lease that
lets one replica re-embed at a time."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import neo4j
import numpy as np
import pytest
from neo4j import exceptions as neo4j_errors

from engine.adapters import neo4j_migrations, open_service
from engine.adapters.neo4j_store import Neo4jStore
from engine.config import load_config
from engine.records import Memory, MemoryDraft, new_memory_id
from engine.reembed import LEASE, Reembedder
from engine.service import MemoryService
from tests.bolt import BoltTarget
from tests.conftest import HashingEmbedder
from tests.integration.test_neo4j_store import memory as stored_memory

T0 = datetime(2025, 1, 1, tzinfo=UTC)
MODEL = "m"  # the model of test_neo4j_store.memory
TTL = timedelta(seconds=30)


def memory(memory_id: str | None = None) -> Memory:
    return stored_memory(memory_id or new_memory_id())


@pytest.fixture
def database(arcadedb: BoltTarget) -> str:
    return arcadedb.new_database()


@pytest.fixture
def store(arcadedb: BoltTarget, database: str) -> Iterator[Neo4jStore]:
    opened = arcadedb.store(database)
    opened.open()
    yield opened
    opened.close()


def cypher(target: BoltTarget, database: str, query: str, **params: Any) -> list[dict[str, Any]]:
    with (
        neo4j.GraphDatabase.driver(target.uri, auth=(target.user, target.password)) as driver,
        driver.session(database=database) as session,
    ):
        return session.run(query, params).data()  # type: ignore[arg-type]


# --- float32 bytes ------------------------------------------------------------------------


def test_vectors_are_stored_as_float32_bytes_and_come_back_exactly(
    arcadedb: BoltTarget, database: str, store: Neo4jStore
) -> None:
    rng = np.random.default_rng(7)
    vector = rng.standard_normal(384).astype(np.float32)
    # The edges of float32: a subnormal, the largest, negative zero, the smallest normal.
    vector[:4] = [np.float32(1e-45), np.finfo(np.float32).max, -0.0, np.finfo(np.float32).tiny]
    m = memory()
    store.insert([m], [vector], changed_by=None)
    (row,) = cypher(arcadedb, database, "MATCH (e:Embedding {memory_id: $id}) RETURN e.vector AS v", id=m.memory_id)
    assert isinstance(row["v"], bytes) and len(row["v"]) == 4 * 384
    found = store.vectors([m.memory_id], MODEL)[m.memory_id]
    assert found.dtype == np.float32
    assert found.tobytes() == vector.tobytes()  # bit for bit, negative zero included
    ((ids, matrix, missing),) = list(store.iter_indexable(MODEL, 10))
    assert (ids, missing) == ([m.memory_id], [])
    assert matrix.dtype == np.float32 and matrix.tobytes() == vector.tobytes()


def test_list_vectors_of_earlier_versions_are_still_read(
    arcadedb: BoltTarget, database: str, store: Neo4jStore
) -> None:
    old, new = sorted([new_memory_id(), new_memory_id()])
    values = [np.float32(v) for v in (0.1, -0.25, 3.5, 1e-7)]
    store.insert([memory(old), memory(new)], [np.ones(4, np.float32)] * 2, changed_by=None)
    # As versions before 0006 wrote it: a list of 64-bit floats.
    cypher(
        arcadedb,
        database,
        "MATCH (e:Embedding {memory_id: $id}) SET e.vector = $values",
        id=old,
        values=[float(v) for v in values],
    )
    found = store.vectors([old, new], MODEL)
    np.testing.assert_array_equal(found[old], np.asarray(values, np.float32))
    np.testing.assert_array_equal(found[new], np.ones(4, np.float32))
    # A page mixing both formats, as a rebuild reads it.
    ((ids, matrix, _),) = list(store.iter_indexable(MODEL, 10))
    assert ids == [old, new]
    np.testing.assert_array_equal(matrix, np.vstack([np.asarray(values, np.float32), np.ones(4, np.float32)]))


# --- one vector per (memory, model) ---------------------------------------------------------


def embeddings(target: BoltTarget, database: str, memory_id: str) -> list[tuple[str, int]]:
    rows = cypher(
        target,
        database,
        "MATCH (e:Embedding {memory_id: $id}) RETURN e.model AS model, count(e) AS n ORDER BY model",
        id=memory_id,
    )
    return [(row["model"], row["n"]) for row in rows]


def test_racing_put_vectors_leave_one_vector_per_memory_and_model(
    arcadedb: BoltTarget, database: str, store: Neo4jStore
) -> None:
    m = memory()
    store.insert([m], [np.zeros(8, np.float32)], changed_by=None)
    other = arcadedb.store(database)
    other.open()
    start = threading.Barrier(4)

    def writer(instance: Neo4jStore, seed: int) -> None:
        start.wait()
        for i in range(10):
            instance.put_vectors({m.memory_id: np.full(8, seed * 100 + i, np.float32)}, "model-b")

    try:
        with ThreadPoolExecutor(4) as pool:
            for done in [pool.submit(writer, s, seed) for seed, s in enumerate([store, other, store, other])]:
                done.result()
    finally:
        other.close()
    assert embeddings(arcadedb, database, m.memory_id) == [(MODEL, 1), ("model-b", 1)]
    last = store.vectors([m.memory_id], "model-b")[m.memory_id]
    assert last[0] in {seed * 100 + 9 for seed in range(4)}  # some writer's last vector, whole
    assert np.all(last == last[0])


def test_a_second_vector_of_one_model_is_refused_by_the_schema(
    arcadedb: BoltTarget, database: str, store: Neo4jStore
) -> None:
    m = memory()
    store.insert([m], [np.zeros(4, np.float32)], changed_by=None)
    with pytest.raises(neo4j_errors.ConstraintError):
        cypher(arcadedb, database, "CREATE (:Embedding {memory_id: $id, model: $model})", id=m.memory_id, model=MODEL)


def test_migration_0006_keeps_one_of_the_duplicates_an_older_version_left(
    arcadedb: BoltTarget, database: str, tmp_path: Path
) -> None:
    # A database as versions before 0006 left it: migrations 1-5, list vectors, duplicates.
    for source in resources.files("graph_schema").iterdir():
        if source.name.endswith(".cypher") and int(source.name[:4]) <= 5:
            with resources.as_file(source) as path:
                shutil.copy(path, tmp_path / source.name)
    with neo4j.GraphDatabase.driver(arcadedb.uri, auth=(arcadedb.user, arcadedb.password)) as driver:
        neo4j_migrations.migrate(driver, database, tmp_path)
    m = memory()
    cypher(
        arcadedb,
        database,
        "CREATE (m:Memory {memory_id: $id, namespace: 'ns'}) "
        "CREATE (m)-[:EMBEDDED_AS]->(:Embedding {memory_id: $id, model: $model, dim: 2, vector: [0.5, 1.5]}) "
        "CREATE (m)-[:EMBEDDED_AS]->(:Embedding {memory_id: $id, model: $model, dim: 2, vector: [0.5, 1.5]})",
        id=m.memory_id,
        model=MODEL,
    )
    upgraded = arcadedb.store(database)
    upgraded.open()
    try:
        assert [a.number for a in upgraded.migrations] == [6, 7, 8]  # every step after 5, 0006 first
        assert embeddings(arcadedb, database, m.memory_id) == [(MODEL, 1)]
        np.testing.assert_array_equal(upgraded.vectors([m.memory_id], MODEL)[m.memory_id], [0.5, 1.5])
        with pytest.raises(neo4j_errors.ConstraintError):
            cypher(
                arcadedb, database, "CREATE (:Embedding {memory_id: $id, model: $model})", id=m.memory_id, model=MODEL
            )
    finally:
        upgraded.close()


# --- the re-embedding lease -------------------------------------------------------------------


def test_one_holder_at_a_time_and_an_expired_lease_is_taken_over(arcadedb: BoltTarget, database: str) -> None:
    a, b = arcadedb.store(database), arcadedb.store(database)
    a.open()
    b.open()
    try:
        assert a.take_lease(LEASE, "a", T0, TTL)
        assert not b.take_lease(LEASE, "b", T0 + timedelta(seconds=1), TTL)
        assert a.take_lease(LEASE, "a", T0 + timedelta(seconds=20), TTL)  # renewed: runs to T0 + 50 s
        assert not b.take_lease(LEASE, "b", T0 + timedelta(seconds=45), TTL)
        assert b.take_lease(LEASE, "b", T0 + timedelta(seconds=50), TTL)  # expired: taken over
        assert not a.take_lease(LEASE, "a", T0 + timedelta(seconds=51), TTL)
        a.release_lease(LEASE, "a")  # not a's to give up: nothing happens
        assert not a.take_lease(LEASE, "a", T0 + timedelta(seconds=52), TTL)
        b.release_lease(LEASE, "b")
        assert a.take_lease(LEASE, "a", T0 + timedelta(seconds=53), TTL)
    finally:
        a.close()
        b.close()


def test_replicas_racing_for_a_free_lease_get_one_holder(arcadedb: BoltTarget, database: str) -> None:
    stores = [arcadedb.store(database) for _ in range(2)]
    for s in stores:
        s.open()
    start = threading.Barrier(6)

    def take(number: int) -> bool:
        start.wait()
        return stores[number % 2].take_lease(LEASE, f"replica-{number}", T0, TTL)

    try:
        with ThreadPoolExecutor(6) as pool:
            taken = list(pool.map(take, range(6)))
    finally:
        for s in stores:
            s.close()
    assert taken.count(True) == 1


# --- re-embedding across replicas -------------------------------------------------------------


def replica(
    arcadedb: BoltTarget, database: str, data_dir: Path, embedder: HashingEmbedder, **options: Any
) -> MemoryService:
    config = load_config(env={}, data_dir=data_dir, **arcadedb.config(database))
    return open_service(config, embedder=embedder, background_reembed=False, **options)


def test_a_re_embedding_on_one_replica_reaches_the_others_index(
    arcadedb: BoltTarget, database: str, tmp_path: Path
) -> None:
    old, new = HashingEmbedder("bow-old"), HashingEmbedder("bow-new", version="2", dim=32)
    first = replica(arcadedb, database, tmp_path / "first", old)
    texts = ["the user keeps bees", "the sister lives in Porto", "coffee at nine", "a cat called Miso"]
    try:
        saved = [first.save(MemoryDraft(text, namespace="ns")).memory.memory_id for text in texts]
    finally:
        first.close()
    # Two replicas of the new model; the memories have only the old model's vectors.
    # closing(): a replica opened is closed even when the next one fails to open
    with (
        closing(replica(arcadedb, database, tmp_path / "a", new, previous_embedder=old)) as a,
        closing(replica(arcadedb, database, tmp_path / "b", new, previous_embedder=old)) as b,
    ):
        assert a.keeper.legacy_size == b.keeper.legacy_size == len(texts)
        assert a.reembedder.run().state == "done"
        b.keeper.catch_up()  # what every read on b does first
        assert b.keeper.legacy_size == 0
        assert b.keeper.index.applied_seq == a.store.last_seq()
        expected = new.embed_documents(texts)
        for memory_id, vector in zip(saved, expected, strict=True):
            ((_, cosine),) = b.keeper.index.similarities(vector, [memory_id])
            assert cosine == pytest.approx(1.0, abs=1e-5)
        assert b.reembedder.remaining() == 0


def test_a_second_replica_waits_while_the_lease_is_held_then_finds_the_work_done(
    arcadedb: BoltTarget, database: str, tmp_path: Path
) -> None:
    old, new = HashingEmbedder("bow-old"), HashingEmbedder("bow-new", version="2")
    first = replica(arcadedb, database, tmp_path / "first", old)
    try:
        first.save(MemoryDraft("the user keeps bees", namespace="ns"))
    finally:
        first.close()
    with (
        closing(replica(arcadedb, database, tmp_path / "a", new, previous_embedder=old)) as a,
        closing(replica(arcadedb, database, tmp_path / "b", new, previous_embedder=old)) as b,
    ):
        shared = b.store
        assert isinstance(shared, Neo4jStore)
        # Replica a's re-embedder holds the lease (as an operator sees it: a holder name).
        a.reembedder.holder = "replica-a"
        assert shared.take_lease(LEASE, "replica-a", datetime.now(UTC), TTL)
        waiting = Reembedder(b.store, b.keeper, new, lock=threading.Lock(), batch=16, lease=shared, lease_poll_s=0.05)
        runner = threading.Thread(target=waiting.run)
        runner.start()
        try:
            deadline = time.monotonic() + 10
            while waiting.progress().state != "waiting":
                assert time.monotonic() < deadline, "the second re-embedder did not wait for the lease"
                time.sleep(0.01)
            assert waiting.remaining() == 1  # it stored nothing while it waited
            assert a.reembedder.run().state == "done"  # renews the lease it holds, then gives it up
        finally:
            runner.join(timeout=30)
        assert not runner.is_alive()
        finished = waiting.progress()
        assert (finished.state, finished.done, finished.remaining) == ("done", 0, 0)
