"""The write path from the fast network: dedup and conflict candidates are found in
process, the store reads only the records a rule then needs, a batch is one transaction,
and the store calls a save makes do not grow with the namespace."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine import scoring
from engine.adapters.bm25_lexical import build_scorer
from engine.adapters.hnsw_index import HnswIndex
from engine.adapters.sqlite_store import _MIGRATIONS, SqliteStore, _statements
from engine.config import load_config
from engine.conflicts import CANDIDATES_PER_CHANNEL
from engine.errors import InvalidInput, StoreError
from engine.fast_network import FastNetwork
from engine.index_keeper import IndexKeeper
from engine.recall import EXACT_DIRECT
from engine.records import MemoryDraft, MemoryFilter, MemoryPatch, Scope, Status
from engine.service import MemoryService, SaveResult
from engine.writing import DEDUP_NEIGHBOURS
from tests.conftest import FrozenClock, HashingEmbedder
from tests.contract.test_store_contract import NS as CONTRACT_NS
from tests.contract.test_store_contract import mem, put
from tests.contract.test_store_contract import store_factory as store_factory  # the parametrized fixture
from tests.integration.test_recall import NS, _fill
from tests.integration.test_recall import make_service as make_service  # the fixture, over every store tier

# What a save may read from the store: the records a rule needs, by id, in one call.
RECORD_READS = {
    "get_many",
    "get_many_and_seq",
    "get",
    "find_by_digest",
    "find_by_key",
    "memories_by_entity",
    "list_page",
}
MakeService = Callable[[], tuple[MemoryService, Any]]


def _reads(calls: Counter[str]) -> Counter[str]:
    return Counter({name: count for name, count in calls.items() if name in RECORD_READS})


def _asked(store: Any) -> list[str]:
    """The ids a save read by id: its candidates (read with the store's newest change seq,
    ``WriteJudge.reads_for``) and the records of its catch-up."""
    asked: list[str] = store.read_with_seq + store.read
    return asked


VOCABULARY = """apple anchor bridge candle desert engine feather glacier harbor island jungle kettle
ladder meadow needle orchard pillow quarry ribbon saddle tunnel umbrella valley wagon yarn zipper""".split()


def _plain(count: int, seed: int) -> list[MemoryDraft]:
    """Memories the conflict rules read no claim in, unlike one another and the stored ones."""
    rng = random.Random(seed)
    return [MemoryDraft(" ".join(rng.sample(VOCABULARY, 4)) + f" {n}", namespace=NS) for n in range(count)]


def test_a_batch_that_repeats_and_claims_nothing_reads_no_record(make_service: MakeService) -> None:
    service, store = make_service()
    _fill(service, random.Random(3), 300)
    store.clear()
    results = service.save_batch(_plain(20, 0))
    assert all(result.created for result in results)
    # One read: the fast network catching up with the batch's own new records.
    assert _reads(store.calls) == Counter({"get_many": 1})
    assert sorted(_asked(store)) == sorted(result.memory.memory_id for result in results)
    assert store.calls["insert_linked"] == 1  # the whole batch in one transaction


def test_the_store_calls_of_a_save_do_not_grow_with_the_namespace(make_service: MakeService) -> None:
    service, store = make_service()
    counts = []
    for size, (held, claim) in (
        (50, ("My favourite colour is green", "My favourite colour is blue")),
        (600, ("My favourite season is summer", "My favourite season is winter")),
    ):
        while len(service.keeper.network) < size:
            _fill(service, random.Random(len(service.keeper.network)), 50)
        service.save(MemoryDraft(held, namespace=NS))  # what the claim is judged against
        store.clear()
        service.save_batch(_plain(10, size))
        service.save_batch([MemoryDraft(claim, namespace=NS)])
        counts.append((_reads(store.calls), store.calls["insert_linked"]))
    # Each save: its candidates (with the newest change seq), then its catch-up.
    assert counts[0] == counts[1] == (Counter({"get_many_and_seq": 1, "get_many": 2}), 2)


def test_a_claim_reads_no_candidate_whose_claims_are_about_something_else(make_service: MakeService) -> None:
    service, store = make_service()
    _fill(service, random.Random(5), 100)
    season = service.save(MemoryDraft("My favourite season is summer", namespace=NS)).memory
    claim = "My favourite colour is blue"
    # Close enough for the rules' verdict to count, were they about the same thing.
    embedder = service.embedder
    cosine = float(np.dot(*embedder.embed_documents([season.content, claim])))
    assert scoring.calibrated_similarity(cosine, embedder.similarity_floor) >= service.config.conflicts.min_similarity
    store.clear()
    result = service.save(MemoryDraft(claim, namespace=NS))
    assert result.superseded == result.contradicted == ()
    assert _reads(store.calls) == Counter({"get_many": 1})  # the catch-up only
    assert season.memory_id not in _asked(store)


def test_the_store_calls_of_a_batch_do_not_grow_with_the_batch(make_service: MakeService) -> None:
    """Every candidate the batch's dedup and conflict judgments read comes from one read."""
    service, store = make_service()
    _fill(service, random.Random(9), 200)
    # What the claims are judged against (a claim about nothing stored reads nothing).
    service.save_batch([MemoryDraft(f"My favourite {word} is number 0", namespace=NS) for word in VOCABULARY])
    counts = []
    for size in (2, 40):
        claims = [
            MemoryDraft(f"My favourite {VOCABULARY[n % 26]} is number {size + n}", namespace=NS) for n in range(size)
        ]
        store.clear()
        service.save_batch(claims)
        counts.append((_reads(store.calls), store.calls["insert_linked"]))
    # The candidates of every judgment, then the catch-up of what the batch wrote.
    assert counts[0] == counts[1] == (Counter({"get_many_and_seq": 1, "get_many": 1}), 1)


def _one_then_another(make_service: MakeService, first: str, then: str) -> tuple[Any, SaveResult, SaveResult]:
    """Among 200 memories, save ``first``, clear the store's counts, save ``then``."""
    service, store = make_service()
    _fill(service, random.Random(len(first)), 200)
    earlier = service.save(MemoryDraft(first, namespace=NS))
    store.clear()
    return store, earlier, service.save(MemoryDraft(then, namespace=NS))


def test_an_exact_repeat_reads_only_the_memory_it_repeats(make_service: MakeService) -> None:
    text = "The quarterly report is due on Friday"
    store, first, again = _one_then_another(make_service, text, "the quarterly  report is due on friday")
    assert again.deduplicated_by == "digest"
    assert again.memory.memory_id == first.memory.memory_id
    assert _asked(store) == [first.memory.memory_id]  # nothing to catch up: a repeat writes nothing


def test_a_claim_supersedes_through_candidates_found_in_process(make_service: MakeService) -> None:
    store, old, new = _one_then_another(make_service, "My favourite colour is blue", "My favourite colour is green")
    reads = _reads(store.calls)
    assert new.superseded == (old.memory.memory_id,)
    assert store.get(Scope.whole([NS]), old.memory.memory_id).status is Status.SUPERSEDED
    # The conflict candidates that are close enough to count (a bounded few, never the
    # namespace), then the catch-up of what the save wrote.
    assert reads == Counter({"get_many_and_seq": 1, "get_many": 1})
    assert old.memory.memory_id in store.read_with_seq
    assert len(set(_asked(store))) <= 2 * CANDIDATES_PER_CHANNEL + 2


def test_a_key_finds_the_memory_it_replaces_without_a_claim(make_service: MakeService) -> None:
    service, _ = make_service()
    _fill(service, random.Random(6), 100)
    old = service.save(MemoryDraft("dark", namespace=NS, key="ui.theme"))
    elsewhere = service.save(MemoryDraft("dark", namespace="elsewhere", key="ui.theme"))
    new = service.save(MemoryDraft("light", namespace=NS, key="ui.theme"))
    assert new.superseded == (old.memory.memory_id,)
    assert service.get("elsewhere", elsewhere.memory.memory_id).status is Status.ACTIVE


@pytest.mark.parametrize("key", ["", "k" * 201])
def test_a_key_holds_1_to_200_characters_in_the_engine(make_service: MakeService, key: str) -> None:
    """Every entry point's saves and patches (mem0 routes, importers, sessions, in process)."""
    service, _ = make_service()
    kept = service.save(MemoryDraft("The office wifi rotates monthly", namespace=NS, key="wifi"))
    with pytest.raises(InvalidInput, match="a key holds 1-200 characters"):
        service.save(MemoryDraft("Bob likes cats", namespace=NS, key=key))
    with pytest.raises(InvalidInput, match="a key holds 1-200 characters"):
        service.update(NS, kept.memory.memory_id, MemoryPatch(key=key))
    assert service.get(NS, kept.memory.memory_id).status is Status.ACTIVE


def test_a_repeat_of_an_expired_memory_is_saved_anew(make_service: MakeService, clock: FrozenClock) -> None:
    """An expired memory is out of recall: folding a new save into it would hide the save."""
    service, _ = make_service()
    gone = service.save(
        MemoryDraft("Parking is on level 3 today", namespace=NS, expire_at=clock.now + timedelta(hours=1))
    )
    clock.advance(hours=2)
    again = service.save(MemoryDraft("Parking is on level 3 today", namespace=NS))
    assert again.created
    assert again.memory.memory_id != gone.memory.memory_id
    assert [hit.memory.memory_id for hit in service.recall("parking level", namespaces=[NS]).hits] == [
        again.memory.memory_id
    ]


def test_a_store_file_with_the_old_full_text_index_loses_it_and_keeps_its_memories(tmp_path: Path) -> None:
    """Schema step 5 drops the FTS5 index (and its triggers) that step 2 once made."""
    path = tmp_path / "memories.db"
    store = SqliteStore(path)
    store.open()
    kept = put(store, mem("The user lives in Lisbon"))[0]
    store.close()
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE term_docs (doc INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL UNIQUE);
            CREATE VIRTUAL TABLE memory_terms USING fts5(terms);
            CREATE TRIGGER memory_terms_insert AFTER INSERT ON memories BEGIN
                INSERT INTO term_docs (memory_id) VALUES (new.memory_id);
            END;
            PRAGMA user_version = 4;
            """
        )
    reopened = SqliteStore(path)
    reopened.open()
    try:
        with sqlite3.connect(path) as db:
            left = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE name LIKE '%term%'")}
            version = db.execute("PRAGMA user_version").fetchone()[0]
        assert left == set()
        assert version == len(_MIGRATIONS)
        assert reopened.get(Scope.whole([CONTRACT_NS]), kept.memory_id) == kept
        put(reopened, mem("The user likes tea"))  # no trigger calls a function it lacks
    finally:
        reopened.close()


def _overflow_pages(path: Path) -> int:
    with sqlite3.connect(path) as db:
        query = "SELECT count(*) FROM dbstat WHERE name = 'vectors' AND pagetype = 'overflow'"
        found: int = db.execute(query).fetchone()[0]
    return found


def test_a_vector_sits_in_its_row_and_a_file_made_before_keeps_its_vectors(tmp_path: Path) -> None:
    """Schema step 6: a 384-dimension vector (1.5 KB) takes no overflow page, as it did in
    the WITHOUT ROWID table before; a file made before the step keeps every vector."""
    path = tmp_path / "memories.db"
    store = SqliteStore(path)
    store.open()
    memories = [mem(f"note {n}") for n in range(60)]
    vectors = [np.random.default_rng(n).standard_normal(384).astype(np.float32) for n in range(60)]
    store.insert(memories, vectors, changed_by=None)
    store.close()
    assert _overflow_pages(path) == 0
    with sqlite3.connect(path) as db:  # back to the layout of a file made before step 6
        db.executescript(
            """
            CREATE TABLE old_vectors (
                memory_id TEXT NOT NULL, model TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL,
                PRIMARY KEY (memory_id, model)
            ) WITHOUT ROWID;
            INSERT INTO old_vectors SELECT memory_id, model, dim, vector FROM vectors;
            DROP TABLE vectors;
            ALTER TABLE old_vectors RENAME TO vectors;
            PRAGMA user_version = 5;
            """
        )
    assert _overflow_pages(path) >= 60  # at least one per vector
    reopened = SqliteStore(path)
    reopened.open()
    try:
        assert _overflow_pages(path) == 0
        model = memories[0].embedding_model
        found = reopened.vectors([m.memory_id for m in memories], model)
        assert len(found) == 60
        for memory, vector in zip(memories, vectors, strict=True):
            assert np.array_equal(found[memory.memory_id], vector)
        reopened.put_vectors({memories[0].memory_id: vectors[1]}, model)  # one per (memory, model)
        assert np.array_equal(reopened.vectors([memories[0].memory_id], model)[memories[0].memory_id], vectors[1])
    finally:
        reopened.close()


def test_entity_lookups_use_the_newest_first_index_alone(tmp_path: Path) -> None:
    """Schema step 7: the (namespace, entity) index goes, also from a file made before the
    step; the entity lookup reads the newest-first index that step 3 made."""
    path = tmp_path / "memories.db"
    store = SqliteStore(path)
    store.open()
    lisbon = put(store, mem("The user lives in Lisbon", entities=("Lisbon",)))[0]
    store.close()
    with sqlite3.connect(path) as db:  # as a file made before step 7
        db.executescript(
            "CREATE INDEX entities_by_name ON memory_entities (namespace, entity); PRAGMA user_version = 6;"
        )
    reopened = SqliteStore(path)
    reopened.open()
    try:
        with sqlite3.connect(path) as db:
            indexes = {
                row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'memory_entities'")
            }
            plan = " ".join(
                str(row[3])
                for row in db.execute(
                    "EXPLAIN QUERY PLAN SELECT memory_id FROM memory_entities WHERE namespace IN (?) AND entity = ? "
                    "ORDER BY created_at DESC, memory_id DESC LIMIT 20",
                    (CONTRACT_NS, "lisbon"),
                )
            )
        assert "entities_by_name" not in indexes and "entities_by_time" in indexes
        assert "USING COVERING INDEX entities_by_time" in plan
        found = reopened.memories_by_entity(Scope.whole([CONTRACT_NS]), "lisbon", MemoryFilter(), lisbon.created_at, 5)
        assert [memory.memory_id for memory in found] == [lisbon.memory_id]
    finally:
        reopened.close()


def test_a_batch_finds_the_neighbours_one_search_each_would(tmp_path: Path) -> None:
    """``SaveJudge.neighbours`` searches the whole batch at once (past ``EXACT_DIRECT``,
    where the semantic channel is HNSW): the same rows and cosines as one
    ``Recaller.nearest`` per memory, including a memory whose closest neighbours all fail
    the filter (archived), which widens alone."""
    store = SqliteStore(tmp_path / "store.sqlite3")
    store.open()
    embedder = HashingEmbedder()
    keeper = IndexKeeper(
        store,
        embedder,
        new_index=lambda: HnswIndex(embedder.dim, model=embedder.name, search_threads=2),
        new_network=lambda: FastNetwork(build_scorer, model=embedder.name, dim=embedder.dim),
        directory=tmp_path,
    )
    keeper.start(None)
    service = MemoryService(load_config(env={}, data_dir=tmp_path), store, keeper, embedder)
    try:
        rng = random.Random(11)
        texts = [" ".join(rng.sample(VOCABULARY, 5)) + f" {n}" for n in range(EXACT_DIRECT + 300)]
        hidden = [f"{' '.join(['saddle'] * 6)} quarry {n}" for n in range(40)]  # all archived
        memories = [mem(text, namespace=NS, embedding_model=embedder.name) for text in texts]
        memories += [mem(text, namespace=NS, embedding_model=embedder.name, status=Status.ARCHIVED) for text in hidden]
        store.insert(memories, list(embedder.embed_documents([m.content for m in memories])), changed_by=None)
        keeper.catch_up()
        asked = [*rng.sample(texts, 30), "saddle saddle saddle saddle saddle saddle quarry"]
        vectors = embedder.embed_documents(asked)
        now = service.now()
        for pool in (DEDUP_NEIGHBOURS, CANDIDATES_PER_CHANNEL):
            batch = service.judge.neighbours([NS] * len(asked), vectors, now, pool)
            net, whole = keeper.network, Scope.whole([NS])
            with net.reading():
                alone = [service.recaller.nearest(net, v, whole, MemoryFilter(), now, pool=pool) for v in vectors]
            for (rows, cosines), (one_rows, one_cosines) in zip(batch, alone, strict=True):
                assert rows.tolist() == one_rows.tolist()
                assert cosines.tolist() == one_cosines.tolist()
            assert all(len(rows) == pool for rows, _ in batch[:-1])
            hidden_rows = {net.row_of(m.memory_id) for m in memories[-len(hidden) :]}
            assert len(batch[-1][0]) and not set(batch[-1][0].tolist()) & hidden_rows
    finally:
        service.close()


def test_a_batch_is_indexed_while_its_transaction_commits_and_only_once(make_service: MakeService) -> None:
    """HNSW's insertion of a batch runs on the keeper's worker thread beside the store
    transaction; the catch-up after the commit finds the vectors there and inserts none
    again (a second insertion would leave a dead label for each)."""
    service, _ = make_service()
    _fill(service, random.Random(5), 40)
    index = service.keeper.index
    assert isinstance(index, HnswIndex)
    threads: list[str] = []
    add = index._add

    def spied(ids: Any, vectors: Any) -> None:
        threads.append(threading.current_thread().name)
        add(ids, vectors)

    index._add = spied  # type: ignore[method-assign]
    asked: list[str] = []
    paired = index.paired_similarities

    def reading(ids: Any, vectors: Any) -> Any:
        asked.extend(ids)
        return paired(ids, vectors)

    index.paired_similarities = reading  # type: ignore[method-assign]
    dead = index.dead_labels
    results = service.save_batch(_plain(25, 1))
    assert all(result.created for result in results)
    assert len(threads) == 1 and threads[0].startswith("twinmem-index-ahead")
    assert index.dead_labels == dead
    # The catch-up knows what it put there: no vector of the batch is read back.
    assert not set(asked) & {result.memory.memory_id for result in results}
    assert all(result.memory.memory_id in index for result in results)
    found = service.recall(results[7].memory.content, namespaces=[NS], top_k=1).hits
    assert [hit.memory.memory_id for hit in found] == [results[7].memory.memory_id]


def test_the_fast_network_takes_a_batch_while_its_vectors_are_still_going_into_the_index(
    make_service: MakeService,
) -> None:
    """The catch-up after a batch's commit reads the changed records and applies them to
    the fast network without waiting for HNSW's insertion; the index waits for it."""
    service, _ = make_service()
    _fill(service, random.Random(7), 40)
    index = service.keeper.index
    network = service.keeper.network
    assert isinstance(index, HnswIndex)
    known_before_inserted: list[bool] = []
    add = index._add

    def slow(ids: Any, vectors: Any) -> None:
        if threading.current_thread().name.startswith("twinmem-index-ahead"):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not all(network.row_of(i) is not None for i in ids):
                time.sleep(0.005)
            known_before_inserted.append(all(network.row_of(i) is not None for i in ids))
        add(ids, vectors)

    index._add = slow  # type: ignore[method-assign]
    results = service.save_batch(_plain(20, 3))
    assert known_before_inserted == [True]
    assert all(result.memory.memory_id in index for result in results)
    assert index.applied_seq == network.applied_seq == service.store.last_seq()
    found = service.recall(results[4].memory.content, namespaces=[NS], top_k=1).hits
    assert [hit.memory.memory_id for hit in found] == [results[4].memory.memory_id]


def test_a_memory_purged_right_after_its_batch_commits_does_not_stay_in_the_index(
    make_service: MakeService,
) -> None:
    """Another replica purges a memory of the batch between the commit and the catch-up,
    while HNSW is still inserting the batch: the catch-up waits for the insertion before
    it removes what the store no longer holds, so the purged vector does not come back."""
    service, store = make_service()
    _fill(service, random.Random(8), 40)
    keeper, index = service.keeper, service.keeper.index
    put_ahead = keeper._put_ahead

    def late(*args: Any) -> list[str]:
        time.sleep(0.3)  # not inserting yet when the catch-up starts
        return put_ahead(*args)

    keeper._put_ahead = late  # type: ignore[method-assign]
    inserted = store.insert_linked
    purged: list[str] = []

    def then_purged(memories: Any, *args: Any, **kwargs: Any) -> None:
        inserted(memories, *args, **kwargs)
        purged.append(memories[0].memory_id)
        store.purge(NS, memories[0].memory_id)  # as another replica sharing the store would

    store.insert_linked = then_purged
    results = service.save_batch(_plain(10, 4))
    assert purged and purged[0] == results[0].memory.memory_id
    assert purged[0] not in index
    assert all(result.memory.memory_id in index for result in results[1:])
    assert len(index) == store.count_indexable()
    assert index.applied_seq == store.last_seq()


def test_a_batch_whose_transaction_fails_leaves_nothing_in_the_index(make_service: MakeService) -> None:
    """The vectors indexed ahead of a transaction that then fails come out again: the
    index holds what the store holds, and the same batch saves once the store works."""
    service, store = make_service()
    _fill(service, random.Random(6), 40)
    index = service.keeper.index
    before = len(index)
    tried: list[str] = []

    def failing(memories: Any, *args: Any, **kwargs: Any) -> None:
        tried.extend(memory.memory_id for memory in memories)
        raise StoreError("insert_linked failed in SQLite: database or disk is full")

    store.insert_linked = failing  # the store refuses this one call
    drafts = _plain(12, 2)
    with pytest.raises(StoreError):
        service.save_batch(drafts)
    del store.insert_linked
    assert len(tried) == 12
    assert len(index) == before
    assert not any(memory_id in index for memory_id in tried)
    vector = service.embedder.embed_query(drafts[3].content)
    assert not {memory_id for memory_id, _ in index.search(vector, 20)} & set(tried)
    results = service.save_batch(drafts)
    assert all(result.created for result in results)
    assert len(index) == before + 12
    assert service.keeper.is_current()


def test_the_sqlite_store_counts_its_statements_only_when_asked(tmp_path: Path) -> None:
    """The count (for benchmarks/store_latency.py) costs a trace call per row written, so
    a store counts nothing until ``count_round_trips()``; then each row of a batch is a
    statement, the batch one transaction, and each read one of each."""
    store = SqliteStore(tmp_path / "memories.db")
    store.open()
    try:
        put(store, mem("not counted"))
        assert store.round_trips.totals() == (0, 0)
        store.count_round_trips()
        put(store, *(mem(f"three {n}") for n in range(3)))
        three = store.round_trips.totals()
        put(store, *(mem(f"six {n}") for n in range(6)))
        six = store.round_trips.totals()
        # Four tables take a row per memory (memories, vectors, versions, changes).
        assert (six[0] - three[0]) - three[0] == 3 * 4
        assert three[1] == 1 and six[1] == 2
        store.get(Scope.whole([CONTRACT_NS]), "no such memory")
        assert store.round_trips.totals() == (six[0] + 1, six[1] + 1)
    finally:
        store.close()


OPEN_STORES = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from engine.adapters.sqlite_store import SqliteStore\n"
    "go = Path(sys.argv[1])\n"
    "print('ready', flush=True)\n"
    "while not go.exists():\n"
    "    time.sleep(0.001)\n"
    "for path in sys.argv[2:]:\n"
    "    store = SqliteStore(path)\n"
    "    try:\n"
    "        store.open()\n"
    "    except Exception as exc:\n"
    "        print(f'{path}: {exc}', flush=True)\n"
    "    else:\n"
    "        print(f'{path}: ok', flush=True)\n"
    "    finally:\n"
    "        store.close()\n"
)


def _file_of_version(path: Path, version: int) -> None:
    """A store file as a twinmem of schema ``version`` left it (0: no file at all)."""
    if version == 0:
        return
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        for number, script in enumerate(_MIGRATIONS[:version], start=1):
            db.executescript(f"BEGIN;\n{script}\nPRAGMA user_version={number};\nCOMMIT;")
    finally:
        db.close()


@pytest.mark.parametrize("version", [0, 2])
def test_processes_opening_one_old_store_file_at_once_migrate_it_once(tmp_path: Path, version: int) -> None:
    """Four processes open the same old (or new) file at once, ten files over. The version
    was read outside the migration's transaction: each opener ran the steps the file lacked,
    and all but one failed with 'duplicate column name: created_at' or 'table memories
    already exists'. Now one migrates and the others find the file migrated."""
    paths = [tmp_path / f"memories-{n}.db" for n in range(10)]
    for path in paths:
        _file_of_version(path, version)
    go = tmp_path / "go"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_STORES, str(go), *map(str, paths)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
            env=env,
        )
        for _ in range(4)
    ]
    for opener in openers:
        assert opener.stdout is not None and opener.stdout.readline() == "ready\n"
    go.touch()
    results = [opener.communicate(timeout=120) for opener in openers]
    assert [opener.returncode for opener in openers] == [0] * 4, [err for _, err in results]
    lines = [line for out, _ in results for line in out.splitlines()]
    assert sorted(lines) == sorted(f"{path}: ok" for path in paths for _ in range(4))
    for path in paths:
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == len(_MIGRATIONS)
            columns = [row[1] for row in db.execute("PRAGMA table_info(memory_entities)")]
        assert columns.count("created_at") == 1


def test_a_store_file_of_a_newer_twinmem_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    """An older twinmem ran no step on a newer file and then read it as its own. A newer
    schema is now refused on open, the file left as it was and not held open."""
    path = tmp_path / "memories.db"
    store = SqliteStore(path)
    store.open()
    kept = put(store, mem("The user lives in Lisbon"))[0]
    store.close()
    newer = len(_MIGRATIONS) + 1
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {newer}")
    store = SqliteStore(path)
    with pytest.raises(
        StoreError, match=rf"schema version {newer}, newer than this twinmem knows \({len(_MIGRATIONS)}\)"
    ):
        store.open()
    with pytest.raises(StoreError, match="not open"):
        store.get(Scope.whole([CONTRACT_NS]), kept.memory_id)
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == newer
        db.execute(f"PRAGMA user_version = {len(_MIGRATIONS)}")
    store = SqliteStore(path)
    store.open()
    try:
        assert store.get(Scope.whole([CONTRACT_NS]), kept.memory_id) == kept
    finally:
        store.close()


@pytest.mark.parametrize(
    "script",
    [
        "CREATE TABLE t (x TEXT); INSERT INTO t VALUES ('a;b');",
        "-- a note; with a semicolon\nCREATE TABLE t (x TEXT);",
        "/* x; y */ CREATE TABLE t (x TEXT);",
        "CREATE TABLE t (x TEXT); CREATE TABLE u (x TEXT);\n"
        "CREATE TRIGGER t_copy AFTER INSERT ON t BEGIN INSERT INTO u VALUES (new.x); INSERT INTO u VALUES ('2;'); END;"
        "\nINSERT INTO t VALUES ('1');",
        "CREATE TABLE t (x TEXT); -- the last step; done",
        "CREATE TABLE t (x TEXT);\n-- the last step",
        "CREATE TABLE t (x TEXT);\nINSERT INTO t VALUES ('no final semicolon')",
    ],
)
def test_a_migration_script_runs_statement_by_statement_as_executescript_runs_it(script: str) -> None:
    """A migration runs statement by statement inside its transaction (executescript would
    commit first). The split keeps a ';' inside a string, a comment or a trigger's body, and
    takes what executescript takes: a comment after the last statement was 'a migration ends
    mid-statement', and so was a last statement without its ';'."""
    split = list(_statements(script))
    by_statement = sqlite3.connect(":memory:", isolation_level=None)
    by_statement.execute("BEGIN")
    for statement in split:
        by_statement.execute(statement)
    by_statement.execute("COMMIT")
    whole = sqlite3.connect(":memory:", isolation_level=None)
    whole.executescript(script)
    dump = [list(db.iterdump()) for db in (by_statement, whole)]
    assert dump[0] == dump[1]
    assert any("CREATE TABLE" in line for line in dump[0])


def test_every_migration_step_splits_into_what_executescript_makes() -> None:
    """Each step of _MIGRATIONS, run statement by statement in one transaction, leaves the
    schema executescript would."""
    by_statement = sqlite3.connect(":memory:", isolation_level=None)
    whole = sqlite3.connect(":memory:", isolation_level=None)
    by_statement.execute("BEGIN")
    for script in _MIGRATIONS:
        for statement in _statements(script):
            by_statement.execute(statement)
        whole.executescript(script)
    by_statement.execute("COMMIT")
    schema = "SELECT type, name, sql FROM sqlite_master ORDER BY name"
    assert by_statement.execute(schema).fetchall() == whole.execute(schema).fetchall()


def _old_file_with_memories(tmp_path: Path, version: int, count: int) -> tuple[Path, list[Any], list[Any]]:
    """A store file of schema ``version`` (1 and up) holding ``count`` memories with their
    entities, versions and 384-dimension vectors, written as this twinmem writes them (every
    table copied holds the same columns in every schema since step 1)."""
    source = SqliteStore(tmp_path / "source.db")
    source.open()
    memories = [mem(f"The user note {n}; lives in Lisbon", entities=("Lisbon", f"Note {n}")) for n in range(count)]
    vectors = [np.random.default_rng(n).standard_normal(384).astype(np.float32) for n in range(count)]
    source.insert(memories, vectors, changed_by="tester")
    source.close()
    path = tmp_path / f"memories-v{version}.db"
    _file_of_version(path, version)
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("ATTACH DATABASE ? AS source", (str(tmp_path / "source.db"),))
        db.execute("BEGIN")
        db.execute("INSERT INTO memories SELECT * FROM source.memories")
        db.execute("INSERT INTO memory_versions SELECT * FROM source.memory_versions")
        db.execute(
            "INSERT INTO memory_entities (memory_id, entity, namespace, name) "
            "SELECT memory_id, entity, namespace, name FROM source.memory_entities"
        )
        db.execute(
            "INSERT INTO vectors (memory_id, model, dim, vector) "
            "SELECT memory_id, model, dim, vector FROM source.vectors"
        )
        db.execute("INSERT INTO changes SELECT * FROM source.changes")
        db.execute("COMMIT")
        db.execute("DETACH DATABASE source")
    return path, memories, vectors


def _keeps(path: Path, memories: list[Any], vectors: list[Any]) -> None:
    store = SqliteStore(path)
    store.open()
    try:
        scope = Scope.whole([CONTRACT_NS])
        assert [store.get(scope, memory.memory_id) for memory in memories] == memories
        found = store.vectors([memory.memory_id for memory in memories], memories[0].embedding_model)
        assert all(np.array_equal(found[m.memory_id], v) for m, v in zip(memories, vectors, strict=True))
        by_entity = store.memories_by_entity(scope, "lisbon", MemoryFilter(), memories[0].created_at, len(memories) + 1)
        assert {m.memory_id for m in by_entity} == {m.memory_id for m in memories}
        put(store, mem("The user likes tea"))
        assert store.wait_checked(timeout=60) == "ok"
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(_MIGRATIONS)


@pytest.mark.parametrize("version", range(1, len(_MIGRATIONS)))
def test_a_store_file_of_every_older_schema_opens_with_its_memories(tmp_path: Path, version: int) -> None:
    """Every step a file lacks runs in the one transaction of the open: a file of each older
    schema comes up current with every memory, entity and vector it held."""
    _keeps(*_old_file_with_memories(tmp_path, version, 30))


KILLED_AT = (
    "import os, signal, sqlite3, sys\n"
    "from engine.adapters.sqlite_store import SqliteStore\n"
    "connect, at = sqlite3.connect, sys.argv[2]\n"
    "def traced(*args, **kwargs):\n"
    "    conn = connect(*args, **kwargs)\n"
    "    conn.set_trace_callback(lambda sql: at in sql and os.kill(os.getpid(), signal.SIGKILL))\n"
    "    return conn\n"
    "sqlite3.connect = traced\n"
    "SqliteStore(sys.argv[1]).open()\n"
)


@pytest.mark.parametrize(
    "at",
    [
        "DROP TABLE vectors",
        "ALTER TABLE vectors_by_row",
        "CREATE INDEX memories_by_key",
        f"user_version={len(_MIGRATIONS)}",
    ],
)
def test_a_process_killed_mid_migration_leaves_a_file_the_next_start_migrates(tmp_path: Path, at: str) -> None:
    """The open that migrates a file is SIGKILLed mid-step (the vectors copied and the old
    table not yet dropped, dropped and the copy not yet renamed, ...): the transaction
    never committed, the file is as it was, and the next open migrates it whole."""
    path, memories, vectors = _old_file_with_memories(tmp_path, 3, 300)
    root = Path(__file__).resolve().parents[2]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT, str(path), at],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "vectors" in tables and "vectors_by_row" not in tables
    _keeps(path, memories, vectors)
