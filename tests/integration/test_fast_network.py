"""The fast network against the store it mirrors: the same memories in sight, the same
filter answers, kept current from the change sequence, persisted and rebuilt.

Each store tier (SQLite, and the Bolt tiers where they run) is the oracle: the fast
network's masks must select exactly the ids the store's own scoped queries return.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine import fast_network
from engine.adapters.bm25_lexical import build_scorer
from engine.adapters.hnsw_index import HnswIndex
from engine.conflicts import CONTRADICTS, SUPERSEDES
from engine.fast_network import FastNetwork
from engine.index_keeper import IndexKeeper
from engine.ports import Edge, Store
from engine.records import (
    JsonScalar,
    Memory,
    MemoryFilter,
    Scope,
    Source,
    Status,
    Visibility,
    entity_keys,
    new_memory_id,
)
from tests.conftest import HashingEmbedder
from tests.contract.test_store_contract import StoreFactory
from tests.contract.test_store_contract import store_factory as store_factory  # the parametrized fixture

T0 = datetime(2025, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=50)
NAMESPACES = ("ns-a", "ns-b", "ns-c")
AGENTS = ("alice", "bob", "carol", None)
CATEGORIES = ("fact", "preference", "event", "task")
SESSIONS = ("s1", "s2", None)
METADATA: tuple[dict[str, Any], ...] = (
    {},
    {"a": 1},
    {"a": 1.0},
    {"a": True},
    {"a": "1"},
    {"a": None},
    {"b": {"c": 2}},
    {"b": {"c": "x"}, "a": 2},
)
WORDS = "coffee tea berlin lisbon boots hiking blue green quarterly report deadline cat dog".split()
EVERYTHING = MemoryFilter(statuses=(), include_expired=True)
MODEL, DIM = HashingEmbedder().name, HashingEmbedder().dim


def _memory(rng: random.Random, n: int) -> Memory:
    created = T0 + timedelta(days=rng.randint(0, 40), seconds=rng.randint(0, 86_399), microseconds=n)
    expire = rng.choice([None, None, NOW - timedelta(days=1), NOW + timedelta(days=1), NOW])
    return Memory(
        memory_id=new_memory_id(),
        namespace=rng.choice(NAMESPACES),
        content=" ".join(rng.sample(WORDS, rng.randint(1, 4))) + f" item {n}",
        category=rng.choice(CATEGORIES),
        base_score=rng.random(),
        importance=rng.random(),
        source=rng.choice(list(Source)),
        created_at=created,
        updated_at=created,
        last_accessed_at=created + timedelta(hours=rng.randint(0, 100)),
        entities=tuple(rng.sample(["Berlin", "coffee", "Blue", "蓝色", "Acme"], rng.randint(0, 2))),
        actor=rng.choice(AGENTS),
        session_id=rng.choice(SESSIONS),
        visibility=rng.choice(list(Visibility)),
        access_count=rng.randint(0, 30),
        expire_at=expire,
        status=rng.choice([*Status, Status.ACTIVE, Status.ACTIVE]),
        embedding_model="fake-bow",
        embedding_version="1",
        metadata=rng.choice(METADATA),
    )


def _scope(rng: random.Random) -> Scope:
    names = [*NAMESPACES, "nowhere"]
    rng.shuffle(names)
    reaches: dict[str, list[str]] = {"full": [], "member": [], "public": [], "own": []}
    for name in names[: rng.choice([0, 1, 2, 3, 3, 4, 4])]:
        reaches[rng.choice(list(reaches))].append(name)
    return Scope(
        tuple(reaches["full"]),
        tuple(reaches["member"]),
        tuple(reaches["public"]),
        rng.choice([*AGENTS, "zed"]),
        tuple(reaches["own"]),
    )


def _filter(rng: random.Random) -> MemoryFilter:
    """A filter of a few random conditions (each one alone is often selective enough)."""

    def maybe(chance: float) -> bool:
        return rng.random() < chance

    metadata: dict[str, JsonScalar] = rng.choice(
        [{"a": 1}, {"a": True}, {"a": "1"}, {"a": None}, {"b.c": 2}, {"b.c": "x"}, {"zz": 1}]
    )
    statuses = rng.choice([(), (Status.ACTIVE,), tuple(rng.sample(list(Status), rng.randint(1, 3)))])
    return MemoryFilter(
        categories=tuple(rng.sample([*CATEGORIES, "nope"], rng.randint(1, 3))) if maybe(0.3) else (),
        sources=tuple(rng.sample(list(Source), rng.randint(1, 3))) if maybe(0.3) else (),
        statuses=statuses,
        created_after=T0 + timedelta(days=rng.randint(0, 40)) if maybe(0.3) else None,
        created_before=T0 + timedelta(days=rng.randint(0, 45)) if maybe(0.3) else None,
        metadata=metadata if maybe(0.25) else {},
        session_id=rng.choice(["s1", "s2", "s9"]) if maybe(0.2) else None,
        include_expired=maybe(0.5),
    )


def _keeper(store: Store, directory: Path) -> IndexKeeper:
    embedder = HashingEmbedder()
    return IndexKeeper(
        store,
        embedder,
        new_index=lambda: HnswIndex(embedder.dim, model=embedder.name),
        new_network=lambda: FastNetwork(build_scorer, model=embedder.name, dim=embedder.dim),
        directory=directory,
    )


def _vectors(memories: list[Memory]) -> list[Any]:
    return list(HashingEmbedder().embed_documents([m.content for m in memories]))


@pytest.fixture
def store(store_factory: StoreFactory) -> Iterator[Store]:
    instance = store_factory()
    instance.open()
    yield instance
    instance.close()


def _selected(net: FastNetwork, scope: Scope, flt: MemoryFilter) -> set[str]:
    rows = net.all_rows()
    return {net.id_of(int(row)) for row in rows[net.passes(scope, flt, NOW, rows)]}


@pytest.mark.parametrize("narrow_first", ["never", "always"])
def test_masks_select_what_the_store_selects_for_random_scopes_and_filters(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, narrow_first: str
) -> None:
    # "always": a category or session the filter names is masked first, the rest over what
    # it lets through, as for a large namespace (``NARROW_FIRST``)
    monkeypatch.setattr(fast_network, "NARROW_FIRST", 10**9 if narrow_first == "never" else 0)
    rng = random.Random(17)
    memories = [_memory(rng, n) for n in range(240)]
    store.insert(memories, _vectors(memories), changed_by=None)
    keeper = _keeper(store, tmp_path)
    keeper.start(None)
    net = keeper.network
    every = [m.memory_id for m in memories]
    selected = []
    for _ in range(150):
        scope, flt = _scope(rng), _filter(rng)
        selected.append(len(_selected(net, scope, flt)))
        assert _selected(net, scope, flt) == set(store.filtered_ids(scope, flt, NOW, 10_000)), (scope, flt)
        seen = {m.memory_id for m in store.get_many(scope, every, EVERYTHING, NOW)}
        rows = net.all_rows()
        assert {net.id_of(int(r)) for r in rows[net.sees(scope, rows)]} == seen, scope
    assert sum(n > 0 for n in selected) > len(selected) / 3  # the cases are not all empty


def test_it_follows_saves_updates_status_changes_links_and_purges(store: Store, tmp_path: Path) -> None:
    rng = random.Random(5)
    first = [_memory(rng, n).evolve(namespace="ns-a", status=Status.ACTIVE, expire_at=None) for n in range(6)]
    store.insert(first, _vectors(first), changed_by=None)
    keeper = _keeper(store, tmp_path)
    keeper.start(None)
    net = keeper.network
    a, b, c, d, e, _ = first
    # A save with links (as a superseding save lands), an edit, a status change, a purge.
    newer = _memory(rng, 99).evolve(namespace="ns-a", status=Status.ACTIVE, expire_at=None, content="lisbon now")
    superseded = a.evolve(status=Status.SUPERSEDED, version=2)
    store.insert_linked(
        [newer],
        _vectors([newer]),
        updates=[(superseded, "superseded")],
        edges=[
            Edge("ns-a", newer.memory_id, a.memory_id, SUPERSEDES, NOW),
            Edge("ns-a", newer.memory_id, b.memory_id, CONTRADICTS, NOW),
        ],
        changed_by=None,
    )
    edited = c.evolve(content="quarterly deadline moved", version=2, visibility=Visibility.PRIVATE, actor="bob")
    store.update(edited, _vectors([edited])[0], changed_by=None, reason="edit")
    store.update(d.evolve(status=Status.DELETED, version=2), None, changed_by=None, reason="deleted")
    store.purge("ns-a", e.memory_id)
    assert not keeper.is_current()
    keeper.ensure_current()
    assert keeper.is_current()
    whole = Scope.whole(["ns-a"])
    for flt in (MemoryFilter(), EVERYTHING, MemoryFilter(statuses=(Status.SUPERSEDED,))):
        assert _selected(net, whole, flt) == set(store.filtered_ids(whole, flt, NOW, 100))
    assert e.memory_id not in net and newer.memory_id in net
    bob_only = Scope(member=("ns-a",), agent="alice")
    assert edited.memory_id not in _selected(net, bob_only, EVERYTHING)
    # The links of the new memory, from either end, and none of the purged one.
    row = net.row_of(newer.memory_id)
    assert row is not None
    kinds = {(net.id_of(x.src), net.id_of(x.dst), x.kind) for x in net.links(row)}
    assert kinds == {(newer.memory_id, a.memory_id, SUPERSEDES), (newer.memory_id, b.memory_id, CONTRADICTS)}
    b_row = net.row_of(b.memory_id)
    assert b_row is not None and [x.kind for x in net.links(b_row)] == [CONTRADICTS]
    # The lexicon follows the edit: the new words are found.
    c_row = net.row_of(edited.memory_id)
    rows, _ = net.lexical(["ns-a"], ["quarter", "deadlin"])
    assert c_row in rows.tolist()
    rows, _ = net.lexical(["ns-a"], ["lisbon"])
    assert newer.memory_id in {net.id_of(int(r)) for r in rows}
    # Entity postings follow too.
    by_berlin = net.by_entity(["ns-a"], "berlin")
    newest = store.memories_by_entity(whole, "berlin", EVERYTHING, NOW, 3)
    assert [net.id_of(int(row)) for row in net.newest(by_berlin, 3)] == [m.memory_id for m in newest]
    assert set(by_berlin.tolist()) == {
        net.row_of(m.memory_id) for m in (*first, newer) if "Berlin" in m.entities and m is not e
    } - {None}


def test_newest_orders_as_the_store_does_ties_by_memory_id(store: Store, tmp_path: Path) -> None:
    # Memories saved in one batch share their moment: the store orders them by id,
    # newest first, and so must the graph channel's cut (``FastNetwork.newest``).
    rng = random.Random(11)
    memories = [
        _memory(rng, n).evolve(
            namespace="ns-a",
            status=Status.ACTIVE,
            expire_at=None,
            entities=("Berlin",),
            created_at=T0 + timedelta(days=n % 3),
        )
        for n in range(12)
    ]
    store.insert(memories, _vectors(memories), changed_by=None)
    keeper = _keeper(store, tmp_path)
    keeper.start(None)
    net = keeper.network
    rows = net.by_entity(["ns-a"], "berlin")
    for limit in (1, 3, 4, 5, 12, 20):
        expected = store.memories_by_entity(Scope.whole(["ns-a"]), "berlin", EVERYTHING, NOW, limit)
        assert [net.id_of(int(row)) for row in net.newest(rows, limit)] == [m.memory_id for m in expected], limit


def test_lexical_statistics_stay_within_a_namespace(store: Store, tmp_path: Path) -> None:
    rng = random.Random(3)
    base = _memory(rng, 0).evolve(status=Status.ACTIVE, expire_at=None)
    here = [base.evolve(memory_id=new_memory_id(), namespace="ns-a", content=f"coffee note {n}") for n in range(5)]
    mine = base.evolve(memory_id=new_memory_id(), namespace="ns-b", content="coffee and boots")
    store.insert([*here, mine], _vectors([*here, mine]), changed_by=None)
    keeper = _keeper(store, tmp_path)
    keeper.start(None)
    _, alone = keeper.network.lexical(["ns-b"], ["coffe"])
    # Flooding another namespace with the same word leaves ns-b's scores exactly as they were.
    more = [base.evolve(memory_id=new_memory_id(), namespace="ns-a", content=f"coffee {n}") for n in range(50)]
    store.insert(more, _vectors(more), changed_by=None)
    keeper.ensure_current()
    _, after = keeper.network.lexical(["ns-b"], ["coffe"])
    np.testing.assert_array_equal(alone, after)


def test_a_lexical_answer_asked_again_is_given_again_until_a_change(store: Store, tmp_path: Path) -> None:
    """The same query over the same lexicons gets the answer already made (a "how"
    question's second ranking asks it again); a write to a namespace asked, or another
    set of terms or namespaces, is scored anew."""
    rng = random.Random(4)
    base = _memory(rng, 0).evolve(status=Status.ACTIVE, expire_at=None)
    first = [base.evolve(memory_id=new_memory_id(), namespace="ns-a", content=f"coffee note {n}") for n in range(6)]
    first.append(base.evolve(memory_id=new_memory_id(), namespace="ns-b", content="coffee elsewhere"))
    store.insert(first, _vectors(first), changed_by=None)
    keeper = _keeper(store, tmp_path)
    keeper.start(None)
    net = keeper.network
    rows, scores = net.lexical(["ns-a"], ["coffe"])
    again = net.lexical(["ns-a"], ["coffe"])
    assert again[0] is rows and again[1] is scores
    assert not rows.flags.writeable and not scores.flags.writeable  # shared: nobody may change them
    assert net.lexical(["ns-a", "ns-b"], ["coffe"])[0] is not rows
    assert net.lexical(["ns-a"], ["coffe", "note"])[0] is not rows
    # A new matching memory in the namespace: its row is in the next answer.
    more = [base.evolve(memory_id=new_memory_id(), namespace="ns-a", content="coffee beans")]
    store.insert(more, _vectors(more), changed_by=None)
    keeper.ensure_current()
    after, _ = net.lexical(["ns-a"], ["coffe"])
    assert net.row_of(more[0].memory_id) in after.tolist() and len(after) == len(rows) + 1


def test_a_search_answer_becomes_rows_through_handles_as_through_ids(store: Store, tmp_path: Path) -> None:
    """``rows_of_handles`` gives for each handle of a search the row ``rows_of`` gives
    for its id, purged and re-embedded memories and a new index included."""
    rng = random.Random(31)
    memories = [_memory(rng, n).evolve(namespace="ns-a", status=Status.ACTIVE, expire_at=None) for n in range(80)]
    store.insert(memories, _vectors(memories), changed_by=None)
    keeper = _keeper(store, tmp_path)
    keeper.start(None)
    net, index = keeper.network, keeper.index
    queries = HashingEmbedder().embed_documents(["coffee berlin", "hiking boots", "quarterly report", "cat dog"])

    def agree() -> None:
        for query in queries:
            handles, _ = index.search_handles(query, 40)
            rows = net.rows_of_handles(index, handles)
            expected = [net.row_of(memory_id) for memory_id, _ in index.search(query, 40)]
            assert rows.tolist() == [fast_network.NONE if row is None else row for row in expected]
            assert (rows >= 0).sum() > 0

    agree()
    agree()  # from the kept table
    edited = memories[0].evolve(content="coffee in lisbon now", version=2)
    store.update(edited, _vectors([edited])[0], changed_by=None, reason="edit")
    store.purge("ns-a", memories[1].memory_id)
    keeper.ensure_current()
    agree()
    assert net.row_of(memories[1].memory_id) is None  # purged: no row, and the index answers it no more
    # Purged in the network alone (as between a write's two steps): its handle, still
    # answered by the index, finds a row that is no longer live, and gives NONE.
    gone = index.ids_of(index.search_handles(queries[0], 1)[0])[0]
    assert gone is not None
    net.apply([], [gone], [])
    agree()
    assert fast_network.NONE in net.rows_of_handles(index, index.search_handles(queries[0], 1)[0]).tolist()
    fresh = HnswIndex(DIM, model=MODEL)  # another handle space: the kept table is not read for it
    ids = [m.memory_id for m in memories[2:]]
    fresh.upsert(list(reversed(ids)), np.vstack(_vectors(list(reversed(memories[2:])))))
    handles, _ = fresh.search_handles(queries[0], 20)
    assert net.rows_of_handles(fresh, handles).tolist() == [net.row_of(mid) for mid in fresh.ids_of(handles)]


def _centre_of(store: Store, namespace: str) -> np.ndarray:
    """The mean of the float16 vectors the store holds for a namespace's memories (every
    status but purged), summed in float64."""
    ids = store.filtered_ids(Scope.whole([namespace]), EVERYTHING, NOW, 10_000)
    held = store.vectors(ids, MODEL)
    vectors = np.vstack([np.asarray(held[mid], np.float16) for mid in ids if mid in held])
    mean: np.ndarray = vectors.astype(np.float64).sum(axis=0) / len(vectors)
    return mean


@pytest.mark.parametrize(("kept_from", "small_kept"), [(1, 4096), (10**9, 4096), (10**9, 1), (10**9, 0)])
def test_a_namespaces_centre_follows_every_change_to_the_bit(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept_from: int, small_kept: int
) -> None:
    """Kept change by change (``kept_from`` 1: every namespace keeps its sum, as a large
    one does; ``small_kept``: as many small ones asked last keep theirs, 1: each asked
    puts the other out) or summed when asked (0), a namespace's centre is the mean of its memories' vectors, exactly,
    after saves, an edit, a deletion and a purge; and so is a restarted network's."""
    monkeypatch.setattr(fast_network, "CENTRE_KEPT_ROWS", kept_from)
    monkeypatch.setattr(fast_network, "CENTRES_SMALL_KEPT", small_kept)
    rng = random.Random(23)
    first = [_memory(rng, n).evolve(namespace=("ns-a", "ns-b")[n % 2]) for n in range(60)]
    store.insert(first, _vectors(first), changed_by=None)
    keeper = _keeper(store, tmp_path)
    keeper.start(None)
    net = keeper.network
    for namespace in ("ns-a", "ns-b"):
        centre = net.centre(namespace)
        assert centre is not None
        np.testing.assert_array_equal(centre[0], _centre_of(store, namespace).astype(np.float32))

    a, b, c = [m for m in first if m.namespace == "ns-a" and m.status is not Status.DELETED][:3]
    more = [_memory(rng, 100 + n).evolve(namespace="ns-a") for n in range(5)]
    store.insert(more, _vectors(more), changed_by=None)
    edited = a.evolve(content="hiking boots for lisbon", version=a.version + 1)
    store.update(edited, _vectors([edited])[0], changed_by=None, reason="edit")
    store.update(b.evolve(status=Status.DELETED, version=b.version + 1), None, changed_by=None, reason="deleted")
    store.purge("ns-a", c.memory_id)
    keeper.ensure_current()
    expected = _centre_of(store, "ns-a")
    centre = net.centre("ns-a")
    assert centre is not None
    np.testing.assert_array_equal(centre[0], expected.astype(np.float32))
    assert centre[1] == pytest.approx(float(expected @ expected), rel=1e-12)
    assert net.centre("nowhere") is None

    # Typicality: each vector's lean toward its own namespace's centre beyond the average
    # memory's there, whatever other namespaces are asked beside it.
    rows = np.concatenate([net.rows_in(["ns-a"]), net.rows_in(["ns-b"])])
    ids = [net.id_of(int(row)) for row in rows]
    held = store.vectors(ids, MODEL)
    typical = net.typicality(rows)
    for namespace in ("ns-a", "ns-b"):
        here = np.flatnonzero([net.namespace_of(mid) == namespace for mid in ids])
        own = net.centre(namespace)
        assert own is not None and len(here)
        vectors = np.asarray([held[ids[n]] for n in here], np.float16).astype(np.float32)
        np.testing.assert_allclose(typical[here], vectors @ own[0] - own[1], atol=1e-6)
        np.testing.assert_array_equal(net.typicality(rows[here]), typical[here])
        assert abs(float(typical[here].mean())) < 1e-3  # about 0 over the namespace itself

    keeper.save()
    loaded = FastNetwork.load(tmp_path, build_scorer, model=MODEL, dim=DIM)
    assert loaded is not None
    if kept_from == 1:  # the kept sums come back with the network, not summed again
        assert loaded._centres.keys() == net._centres.keys()
    restarted = _keeper(store, tmp_path)
    restarted.start(None, loaded)
    later = [_memory(rng, 200 + n).evolve(namespace="ns-a") for n in range(3)]
    store.insert(later, _vectors(later), changed_by=None)
    restarted.ensure_current()
    again = restarted.network.centre("ns-a")
    assert again is not None
    np.testing.assert_array_equal(again[0], _centre_of(store, "ns-a").astype(np.float32))


def test_it_is_saved_loaded_and_rebuilt_when_torn_or_behind(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(11)
    memories = [_memory(rng, n) for n in range(50)]
    store.insert(memories, _vectors(memories), changed_by=None)
    keeper = _keeper(store, tmp_path)
    keeper.start(None)
    assert keeper.network_rebuilt_at_start
    keeper.save()
    scope, flt = Scope.whole(list(NAMESPACES)), MemoryFilter()
    expected = _selected(keeper.network, scope, flt)

    loaded = FastNetwork.load(tmp_path, build_scorer, model=MODEL, dim=DIM)
    assert loaded is not None and loaded.applied_seq == keeper.network.applied_seq
    # Another model's vectors are not this one's: such a network is rebuilt.
    assert FastNetwork.load(tmp_path, build_scorer, model="another-model", dim=DIM) is None
    some = [m.memory_id for m in memories if m.status is not Status.DELETED][:5]
    vectors = keeper.index.similarities(HashingEmbedder().embed_query("coffee"), some)
    np.testing.assert_allclose(
        loaded.cosines(HashingEmbedder().embed_query("coffee"), loaded.rows_of(some)),
        [sim for _, sim in vectors],
        atol=2e-3,
    )
    again = _keeper(store, tmp_path)
    again.start(None, loaded)
    assert not again.network_rebuilt_at_start
    assert _selected(again.network, scope, flt) == expected
    rows, scores = again.network.lexical(NAMESPACES, ["coffe"])
    before_rows, before_scores = keeper.network.lexical(NAMESPACES, ["coffe"])
    assert rows.tolist() == before_rows.tolist() and scores.tolist() == before_scores.tolist()
    for key in entity_keys(["Berlin", "coffee", "Blue", "蓝色", "Acme"]):
        found = sorted(loaded.by_entity(NAMESPACES, key).tolist())
        assert found and found == sorted(keeper.network.by_entity(NAMESPACES, key).tolist()), key

    # A save from long ago is caught up from the change sequence on load.
    later = [_memory(rng, 100).evolve(namespace="ns-a", status=Status.ACTIVE, expire_at=None)]
    store.insert(later, _vectors(later), changed_by=None)
    caught = _keeper(store, tmp_path)
    caught.start(None, FastNetwork.load(tmp_path, build_scorer, model=MODEL, dim=DIM))
    assert not caught.network_rebuilt_at_start and later[0].memory_id in caught.network

    data = tmp_path / "fastnet.npz"
    raw = data.read_bytes()
    data.write_bytes(raw[: len(raw) // 2])
    with caplog.at_level(logging.WARNING, logger="engine.fast_network"):
        assert FastNetwork.load(tmp_path, build_scorer, model=MODEL, dim=DIM) is None
    assert f"holds {len(raw) // 2} bytes, not {len(raw)}: rebuilding it" in caplog.text  # and says why
    data.write_bytes(raw[:-8] + bytes(8))  # same size, other bytes: the checksum tells
    assert FastNetwork.load(tmp_path, build_scorer, model=MODEL, dim=DIM) is None
    assert "does not match its checksum: rebuilding it" in caplog.text
    (tmp_path / "fastnet.meta.json").unlink()
    assert FastNetwork.load(tmp_path, build_scorer, model=MODEL, dim=DIM) is None
    rebuilt = _keeper(store, tmp_path)
    rebuilt.start(None, None)
    assert rebuilt.network_rebuilt_at_start
    assert _selected(rebuilt.network, scope, flt) == _selected(caught.network, scope, flt)
