"""The Store contract (engine/ports.py), run against every Store adapter.

Each adapter registers a factory in ``STORE_BACKENDS``: given a ``tmp_path`` it
returns a callable that makes a new, unopened store instance over the same
backing data, so durability can be checked by closing one instance and opening
another. A backend that cannot honour a clause skips that test with a reason.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.adapters.sqlite_store import SqliteStore
from engine.errors import Conflict, InvalidInput, MemoryNotFound, SaveOvertaken, VersionMismatch
from engine.ports import Edge, ImportedRecord, Store, Vector
from engine.records import (
    Change,
    Memory,
    MemoryFilter,
    Scope,
    Source,
    Status,
    Version,
    Visibility,
    content_digest,
    entity_keys,
    new_memory_id,
)
from tests.bolt import BoltTarget

T0 = datetime(2025, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=100)
NS = "ns-a"
SCOPE = Scope.whole([NS])  # the engine's own sight of NS: every memory in it
OTHER_NS = "ns-b"
MODEL = "model-a"
DIM = 8

StoreFactory = Callable[[], Store]


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    path = tmp_path / "store.sqlite3"
    return lambda: SqliteStore(path)


def _bolt(fixture: str) -> Callable[[pytest.FixtureRequest, Path], StoreFactory]:
    """Neo4jStore on a fresh database of a Bolt server fixture (which skips when it cannot run)."""

    def factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
        target: BoltTarget = request.getfixturevalue(fixture)
        database = target.new_database()
        return lambda: target.store(database)

    return factory


# Each factory gets the test's request (to reach server fixtures) and its tmp_path.
STORE_BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], StoreFactory]] = {
    "sqlite": _sqlite,
    "arcadedb": _bolt("arcadedb"),
    "neo4j": _bolt("neo4j_server"),
}


@pytest.fixture(params=sorted(STORE_BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    return STORE_BACKENDS[request.param](request, tmp_path)


@pytest.fixture
def store(store_factory: StoreFactory) -> Iterator[Store]:
    instance = store_factory()
    instance.open()
    yield instance
    instance.close()


def vec(seed: int) -> Vector:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


_counter = iter(range(10**9))


def mem(content: str | None = None, **fields: Any) -> Memory:
    n = next(_counter)
    values: dict[str, Any] = {
        "memory_id": new_memory_id(),
        "namespace": NS,
        "content": content if content is not None else f"memory number {n}",
        "category": "fact",
        "base_score": 0.5,
        "importance": 0.5,
        "source": Source.USER_INPUT,
        "created_at": T0,
        "updated_at": T0,
        "last_accessed_at": T0,
        "embedding_model": MODEL,
        "embedding_version": "1",
    }
    values.update(fields)
    return Memory(**values)


def put(store: Store, *memories: Memory) -> list[Memory]:
    store.insert(list(memories), [vec(i) for i in range(len(memories))], changed_by="tester")
    return list(memories)


def ids(memories: list[Memory] | tuple[Memory, ...]) -> set[str]:
    return {m.memory_id for m in memories}


def test_adapter_satisfies_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)


# --- insert ------------------------------------------------------------------------


def test_a_fresh_store_reports_its_integrity_check(store: Store) -> None:
    # SQLite runs PRAGMA quick_check when it opens; a Bolt store has no portable check.
    assert store.integrity() in ("ok", "checking", "unchecked")
    if isinstance(store, SqliteStore):
        assert store.wait_checked(timeout=60) == "ok"


def test_insert_stores_the_record_as_written(store: Store) -> None:
    original = mem(
        "喜欢蓝色",
        entities=("蓝色", "Alice"),
        metadata={"n": 1, "nested": {"a": [1, 2]}},
        expire_at=T0 + timedelta(days=365),
        key="colour",
        actor="agent",
        session_id="s-1",
    )
    seq = store.insert([original], [vec(1)], changed_by="tester")
    assert store.get(SCOPE, original.memory_id) == original
    assert seq == store.last_seq()


def test_insert_creates_version_one(store: Store) -> None:
    (m,) = put(store, mem())
    (version,) = store.versions(SCOPE, m.memory_id)
    assert version.version == 1
    assert version.record == m
    assert version.changed_by == "tester"
    assert version.reason == "created"


def test_insert_stores_each_vector_under_the_memory_model(store: Store) -> None:
    a, b = mem(), mem(embedding_model="model-b")
    store.insert([a, b], [vec(1), vec(2)], changed_by=None)
    found = store.vectors([a.memory_id, b.memory_id], MODEL)
    assert set(found) == {a.memory_id}
    np.testing.assert_array_equal(found[a.memory_id], vec(1))
    np.testing.assert_array_equal(store.vectors([b.memory_id], "model-b")[b.memory_id], vec(2))


def test_insert_of_an_existing_id_conflicts_and_writes_nothing(store: Store) -> None:
    (existing,) = put(store, mem())
    seq = store.last_seq()
    fresh = mem()
    with pytest.raises(Conflict):
        store.insert([fresh, existing.evolve(content="again")], [vec(1), vec(2)], changed_by=None)
    assert store.get(SCOPE, fresh.memory_id) is None
    assert store.get(SCOPE, existing.memory_id) == existing
    assert store.last_seq() == seq


def test_get_many_and_seq_reads_what_get_many_does_and_the_newest_seq(store: Store) -> None:
    assert store.get_many_and_seq(SCOPE, [], MemoryFilter(), NOW) == ([], store.last_seq())
    kept, dropped, gone = put(store, mem(metadata={"n": 1}), mem(metadata={"n": 2}), mem())
    asked = [kept.memory_id, dropped.memory_id, gone.memory_id, "never-stored"]
    store.purge(NS, gone.memory_id)
    flt = MemoryFilter(metadata={"n": 1})
    found, seq = store.get_many_and_seq(SCOPE, asked, flt, NOW)
    assert ids(found) == ids(store.get_many(SCOPE, asked, flt, NOW)) == {kept.memory_id}
    assert seq == store.last_seq() > 0
    assert store.get_many_and_seq(Scope.whole([]), asked, MemoryFilter(), NOW) == ([], seq)
    (later,) = put(store, mem())
    assert store.get_many_and_seq(SCOPE, [later.memory_id], MemoryFilter(), NOW) == ([later], seq + 1)


# --- update ------------------------------------------------------------------------


def test_update_replaces_the_record_and_keeps_the_old_version(store: Store) -> None:
    (v1,) = put(store, mem("first words"))
    v2 = v1.evolve(content="second words", version=2, updated_at=T0 + timedelta(hours=1))
    seq = store.update(v2, vec(9), changed_by="editor", reason="fixed a typo")
    assert seq == store.last_seq()
    assert store.get(SCOPE, v1.memory_id) == v2
    history = store.versions(SCOPE, v1.memory_id)
    assert [v.version for v in history] == [1, 2]
    assert history[0].record.content == "first words"
    assert history[1].record == v2
    assert (history[1].changed_by, history[1].reason) == ("editor", "fixed a typo")
    assert history[1].changed_at == T0 + timedelta(hours=1)


def test_update_digest_follows_the_new_content(store: Store) -> None:
    (v1,) = put(store, mem("first words"))
    store.update(v1.evolve(content="second words", version=2), None, changed_by=None, reason="edit")
    assert store.find_by_digest(SCOPE, content_digest("first words")) == []
    (found,) = store.find_by_digest(SCOPE, content_digest("Second  Words"))
    assert found.memory_id == v1.memory_id


@pytest.mark.parametrize("version", [1, 3, 0])
def test_update_must_write_the_next_version(store: Store, version: int) -> None:
    (v1,) = put(store, mem("kept"))
    with pytest.raises(Conflict):
        store.update(v1.evolve(content="lost", version=version), vec(3), changed_by=None, reason="stale")
    assert store.get(SCOPE, v1.memory_id) == v1
    assert len(store.versions(SCOPE, v1.memory_id)) == 1
    np.testing.assert_array_equal(store.vectors([v1.memory_id], MODEL)[v1.memory_id], vec(0))


def test_update_replaces_the_vector_when_given_and_keeps_it_otherwise(store: Store) -> None:
    (v1,) = put(store, mem())
    store.update(v1.evolve(version=2, importance=0.9), None, changed_by=None, reason="importance")
    np.testing.assert_array_equal(store.vectors([v1.memory_id], MODEL)[v1.memory_id], vec(0))
    store.update(v1.evolve(version=3, content="new"), vec(7), changed_by=None, reason="content")
    np.testing.assert_array_equal(store.vectors([v1.memory_id], MODEL)[v1.memory_id], vec(7))


def test_update_of_a_memory_in_another_namespace_is_not_found(store: Store) -> None:
    (m,) = put(store, mem())
    with pytest.raises(MemoryNotFound):
        store.update(m.evolve(namespace=OTHER_NS, version=2), None, changed_by=None, reason="hijack")
    assert store.get(SCOPE, m.memory_id) == m


# --- namespace scoping ----------------------------------------------------------------


def test_reads_from_another_namespace_see_nothing(store: Store) -> None:
    (m,) = put(store, mem("private thoughts"))
    other = mem(namespace=OTHER_NS)
    put(store, other)
    store.add_edges([Edge(NS, m.memory_id, other.memory_id, "RELATED_TO", T0)])
    assert store.get(Scope.whole([OTHER_NS]), m.memory_id) is None
    assert store.get(Scope.whole([]), m.memory_id) is None
    assert store.get_many(Scope.whole([OTHER_NS]), [m.memory_id], MemoryFilter(), NOW) == []
    assert store.get_many_and_seq(Scope.whole([OTHER_NS]), [m.memory_id], MemoryFilter(), NOW)[0] == []
    assert store.versions(Scope.whole([OTHER_NS]), m.memory_id) == []
    assert store.edges(Scope.whole([OTHER_NS]), m.memory_id) == []
    assert store.find_by_digest(Scope.whole([OTHER_NS]), m.digest) == []
    assert ids(store.list_page(Scope.whole([OTHER_NS]), MemoryFilter(), NOW, limit=10).items) == {other.memory_id}
    assert store.filtered_ids(Scope.whole([OTHER_NS]), MemoryFilter(), NOW, 10) == [other.memory_id]


def test_reads_over_several_namespaces_see_each(store: Store) -> None:
    a, b = put(store, mem(), mem(namespace=OTHER_NS))
    both = Scope.whole([NS, OTHER_NS])
    assert store.get(both, b.memory_id) == b
    assert ids(store.get_many(both, [a.memory_id, b.memory_id], MemoryFilter(), NOW)) == ids([a, b])
    assert ids(store.list_page(both, MemoryFilter(), NOW, limit=10).items) == ids([a, b])


# --- visibility: what a caller's scope sees ---------------------------------------------


def _audience(store: Store) -> dict[str, Memory]:
    """In NS: alice's private, bob's private, a shared and a public memory, all naming
    one entity and one key, linked to one another; one more public memory in OTHER_NS."""
    made = {
        "alice": mem("alice private note on hiking boots", actor="alice", visibility=Visibility.PRIVATE),
        "bob": mem("bob private note on hiking boots", actor="bob", visibility=Visibility.PRIVATE),
        "shared": mem("shared note on hiking boots", actor="bob", visibility=Visibility.SHARED),
        "public": mem("public note on hiking boots", actor="carol", visibility=Visibility.PUBLIC),
        "elsewhere": mem("public note on hiking boots elsewhere", namespace=OTHER_NS, visibility=Visibility.PUBLIC),
    }
    made = {name: m.evolve(entities=("Boots",), key="boots") for name, m in made.items()}
    put(store, *made.values())
    store.add_edges(
        [Edge(NS, made["shared"].memory_id, made[other].memory_id, "RELATED_TO", T0) for other in ("bob", "public")]
    )
    return made


def _names(made: dict[str, Memory], memories: list[Memory] | tuple[Memory, ...]) -> set[str]:
    by_id = {m.memory_id: name for name, m in made.items()}
    return {by_id[m.memory_id] for m in memories}


SIGHTS = {
    # scope -> the memories of _audience it must see
    "admin": (Scope(full=(NS,), agent="zed"), {"alice", "bob", "shared", "public"}),
    "alice as member": (Scope(member=(NS,), agent="alice"), {"alice", "shared", "public"}),
    "member without agent": (Scope(member=(NS,)), {"shared", "public"}),
    "outsider": (Scope(public=(NS,), agent="mallory"), {"public"}),
    "member here, outsider there": (
        Scope(member=(NS,), public=(OTHER_NS,), agent="alice"),
        {"alice", "shared", "public", "elsewhere"},
    ),
    "writer without read": (Scope(own=(NS,), agent="bob"), {"bob", "shared"}),
    "own reach without an agent": (Scope(own=(NS,)), set()),
    "nothing": (Scope(agent="alice"), set()),
}


@pytest.mark.parametrize("sight", SIGHTS)
def test_every_scoped_read_sees_what_the_scope_allows(store: Store, sight: str) -> None:
    scope, expected = SIGHTS[sight]
    made = _audience(store)
    everything = MemoryFilter(statuses=())
    all_ids = [m.memory_id for m in made.values()]
    assert {name for name, m in made.items() if store.get(scope, m.memory_id) is not None} == expected
    assert _names(made, store.get_many(scope, all_ids, everything, NOW)) == expected
    assert _names(made, store.get_many_and_seq(scope, all_ids, everything, NOW)[0]) == expected
    assert _names(made, store.list_page(scope, everything, NOW, limit=50).items) == expected
    assert set(store.filtered_ids(scope, everything, NOW, 50)) == {made[n].memory_id for n in expected}
    assert _names(made, store.memories_by_entity(scope, "boots", everything, NOW, 50)) == expected
    assert _names(made, store.find_by_key(scope, "boots")) == expected
    assert _names(made, store.find_by_digest(scope, made["alice"].digest)) == expected & {"alice"}
    assert _names(made, store.scan(scope, "", 50)) == expected
    for name, m in made.items():
        assert bool(store.versions(scope, m.memory_id)) == (name in expected)


def test_links_to_a_memory_out_of_sight_are_hidden(store: Store) -> None:
    made = _audience(store)
    shared = made["shared"].memory_id

    def linked(scope: Scope) -> set[str]:
        return {e.dst for e in store.edges(scope, shared)}

    assert linked(Scope(full=(NS,))) == {made["bob"].memory_id, made["public"].memory_id}
    assert linked(Scope(member=(NS,), agent="bob")) == {made["bob"].memory_id, made["public"].memory_id}
    assert linked(Scope(member=(NS,), agent="alice")) == {made["public"].memory_id}
    # An outsider does not see the shared memory at all, so none of its links either.
    assert store.edges(Scope(public=(NS,), agent="alice"), shared) == []
    assert {e.src for e in store.edges(Scope(public=(NS,)), made["public"].memory_id)} == set()


@pytest.mark.parametrize("sight", SIGHTS)
def test_links_and_histories_of_many_memories_are_each_ones_own_in_one_call(store: Store, sight: str) -> None:
    """``edges_of`` and ``versions_of`` answer for each id what ``edges`` and ``versions``
    answer for it alone: the links whose ends both are in sight (one between two of the ids
    in the lists of both), and the history as far as the scope sees it."""
    scope, _ = SIGHTS[sight]
    made = _audience(store)
    alice = made["alice"]
    # Version 1 alice's alone, version 2 shared with the namespace.
    store.update(alice.evolve(version=2, visibility=Visibility.SHARED), None, changed_by="alice", reason="shared")
    store.add_edges([Edge(NS, alice.memory_id, made["public"].memory_id, "SUPERSEDES", T0 + timedelta(seconds=1))])
    asked = [m.memory_id for m in made.values()] + [new_memory_id()]
    edges, versions = store.edges_of(scope, asked), store.versions_of(scope, asked)
    assert edges.keys() == versions.keys() == set(asked)

    def order(links: list[Edge]) -> list[Edge]:  # ties of created_at in any order
        return sorted(links, key=lambda e: (e.created_at, e.src, e.dst, e.kind))

    for memory_id in asked:
        assert order(edges[memory_id]) == order(store.edges(scope, memory_id))
        assert [e.created_at for e in edges[memory_id]] == sorted(e.created_at for e in edges[memory_id])
        assert versions[memory_id] == store.versions(scope, memory_id)
    assert store.edges_of(scope, []) == {} and store.versions_of(scope, []) == {}


def test_links_and_histories_of_many_memories_come_with_every_kind_and_version(store: Store) -> None:
    a, b, c = put(store, mem(), mem(), mem())
    links = [
        Edge(NS, b.memory_id, a.memory_id, kind, T0 + timedelta(seconds=n))
        for n, kind in enumerate(("SUPERSEDES", "CONTRADICTS", "MERGED_INTO", "RELATED_TO", "NEXT"))
    ]
    store.add_edges(links)
    for version in (2, 3):
        store.update(a.evolve(version=version, content=f"a, version {version}"), None, changed_by="t", reason="edit")
    edges = store.edges_of(SCOPE, [a.memory_id, b.memory_id, c.memory_id])
    assert edges == {a.memory_id: links, b.memory_id: links, c.memory_id: []}
    versions = store.versions_of(SCOPE, [a.memory_id, c.memory_id])
    assert [v.version for v in versions[a.memory_id]] == [1, 2, 3]
    assert versions[a.memory_id] == store.versions(SCOPE, a.memory_id)
    assert versions[c.memory_id] == store.versions(SCOPE, c.memory_id)


def test_private_memories_follow_their_writer_through_updates(store: Store) -> None:
    made = _audience(store)
    alice = made["alice"]
    store.update(alice.evolve(version=2, visibility=Visibility.SHARED), None, changed_by="alice", reason="shared")
    assert store.get(Scope(member=(NS,), agent="bob"), alice.memory_id) is not None
    # Its history shows bob the shared version only: version 1 was alice's alone.
    assert [v.version for v in store.versions(Scope(member=(NS,), agent="bob"), alice.memory_id)] == [2]
    assert [v.version for v in store.versions(Scope(member=(NS,), agent="alice"), alice.memory_id)] == [1, 2]
    store.update(alice.evolve(version=3, visibility=Visibility.PRIVATE), None, changed_by="alice", reason="hidden")
    assert store.get(Scope(member=(NS,), agent="bob"), alice.memory_id) is None
    assert store.versions(Scope(member=(NS,), agent="bob"), alice.memory_id) == []  # nor its shared past


# --- find_by_digest -----------------------------------------------------------------


def test_find_by_digest_finds_active_memories_only(store: Store) -> None:
    (m,) = put(store, mem("User likes blue"))
    (twin,) = put(store, mem("user likes BLUE", created_at=T0 + timedelta(seconds=1)))
    assert store.find_by_digest(SCOPE, content_digest("user  LIKES blue")) == [m, twin]  # oldest first
    store.update(m.evolve(version=2, status=Status.SUPERSEDED), None, changed_by=None, reason="superseded")
    assert store.find_by_digest(SCOPE, content_digest("user likes blue")) == [twin]
    assert store.find_by_digest(SCOPE, content_digest("something else")) == []


# --- list and filters ------------------------------------------------------------------


def _listed(store: Store, flt: MemoryFilter, now: datetime = NOW) -> set[str]:
    listed = ids(store.list_page(SCOPE, flt, now, limit=1000).items)
    assert set(store.filtered_ids(SCOPE, flt, now, 1000)) == listed
    return listed


def test_list_is_newest_first(store: Store) -> None:
    memories = put(store, *(mem(created_at=T0 + timedelta(minutes=i)) for i in range(5)))
    page = store.list_page(SCOPE, MemoryFilter(), NOW, limit=10)
    assert [m.memory_id for m in page.items] == [m.memory_id for m in reversed(memories)]
    assert page.next_cursor is None


def test_filter_by_category_and_source(store: Store) -> None:
    fact, pref, tool = put(
        store,
        mem(category="fact"),
        mem(category="preference"),
        mem(category="fact", source=Source.TOOL_RESULT),
    )
    assert _listed(store, MemoryFilter(categories=("fact",))) == ids([fact, tool])
    assert _listed(store, MemoryFilter(categories=("fact", "preference"))) == ids([fact, pref, tool])
    assert _listed(store, MemoryFilter(sources=(Source.TOOL_RESULT,))) == ids([tool])
    assert _listed(store, MemoryFilter(categories=("preference",), sources=(Source.TOOL_RESULT,))) == set()


def test_filter_by_status_defaults_to_active(store: Store) -> None:
    active, archived = put(store, mem(), mem(status=Status.ARCHIVED))
    assert _listed(store, MemoryFilter()) == ids([active])
    assert _listed(store, MemoryFilter(statuses=(Status.ARCHIVED,))) == ids([archived])
    assert _listed(store, MemoryFilter(statuses=())) == ids([active, archived])


def test_filter_by_created_range(store: Store) -> None:
    old, mid, new = put(
        store,
        mem(created_at=T0),
        mem(created_at=T0 + timedelta(days=10)),
        mem(created_at=T0 + timedelta(days=20)),
    )
    assert _listed(store, MemoryFilter(created_after=T0 + timedelta(days=5))) == ids([mid, new])
    assert _listed(store, MemoryFilter(created_before=T0 + timedelta(days=15))) == ids([old, mid])
    window = MemoryFilter(created_after=T0 + timedelta(days=5), created_before=T0 + timedelta(days=15))
    assert _listed(store, window) == ids([mid])


def test_filter_by_session(store: Store) -> None:
    in_session, _ = put(store, mem(session_id="s-1"), mem(session_id="s-2"))
    put(store, mem())
    assert _listed(store, MemoryFilter(session_id="s-1")) == ids([in_session])


def test_expired_memories_are_left_out_unless_asked_for(store: Store) -> None:
    lasting, expired, expiring_later = put(
        store,
        mem(),
        mem(expire_at=NOW - timedelta(seconds=1)),
        mem(expire_at=NOW + timedelta(days=1)),
    )
    assert _listed(store, MemoryFilter()) == ids([lasting, expiring_later])
    assert _listed(store, MemoryFilter(include_expired=True)) == ids([lasting, expired, expiring_later])
    assert _listed(store, MemoryFilter(), now=NOW + timedelta(days=2)) == ids([lasting])
    everything = [lasting.memory_id, expired.memory_id, expiring_later.memory_id]
    assert ids(store.get_many(SCOPE, everything, MemoryFilter(), NOW)) == ids([lasting, expiring_later])
    # get() is a direct read: it returns the record whatever its expiry.
    assert store.get(SCOPE, expired.memory_id) == expired


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"colour": "blue"}, {"blue"}),
        ({"n": 3}, {"blue"}),
        ({"n": 3.0}, {"blue"}),
        ({"ratio": 0.25}, {"green"}),
        ({"pinned": True}, {"blue"}),
        ({"pinned": False}, {"green"}),
        ({"pinned": 1}, {"one"}),
        ({"note": "null"}, {"one"}),
        ({"note": None}, {"green"}),
        ({"deep.level": "x"}, {"blue"}),
        # Keys in any script (they were refused: only ASCII letters passed).
        ({"颜色": "蓝"}, {"blue"}),
        ({"deep.niveau_é": "y"}, {"blue"}),
        # Scripts whose letters take vowel signs or marks, and a decomposed accent.
        ({"नाम": "x"}, {"blue"}),
        ({"ชื่อ": "x"}, {"blue"}),
        ({"cafe\u0301": "x"}, {"blue"}),
        ({"colour": "blue", "pinned": False}, set()),
        ({"colour": "purple"}, set()),
        ({"absent": "x"}, set()),
    ],
)
def test_filter_by_metadata_equality(store: Store, flt: dict[str, Any], expected: set[str]) -> None:
    blue, green, one = put(
        store,
        mem(
            metadata={
                "colour": "blue",
                "n": 3,
                "pinned": True,
                "deep": {"level": "x", "niveau_é": "y"},
                "颜色": "蓝",
                "नाम": "x",
                "ชื่อ": "x",
                "cafe\u0301": "x",
            }
        ),
        mem(metadata={"colour": "green", "n": 4, "ratio": 0.25, "pinned": False, "note": None}),
        # JSON's 1 is not true, and the string "null" is not null.
        mem(metadata={"pinned": 1, "note": "null"}),
    )
    by_name = {"blue": blue.memory_id, "green": green.memory_id, "one": one.memory_id}
    assert _listed(store, MemoryFilter(metadata=flt)) == {by_name[name] for name in expected}


@pytest.mark.parametrize(
    "key",
    [
        "a') OR 1=1 --",
        "a'b",
        'a"b',
        "a b",
        "",
        "$.x",
        "a[0]",
        "a;DROP TABLE memories",
        "颜色'",
        "x" * 129,
        'नाम"',
        "\u0301'",
    ],
)
def test_metadata_filter_keys_that_could_inject_are_refused(store: Store, key: str) -> None:
    put(store, mem(metadata={"a": 1}))
    flt = MemoryFilter(metadata={key: 1})
    with pytest.raises(InvalidInput):
        store.list_page(SCOPE, flt, NOW, limit=10)
    with pytest.raises(InvalidInput):
        store.filtered_ids(SCOPE, flt, NOW, 10)
    with pytest.raises(InvalidInput):
        store.get_many(SCOPE, ["x"], flt, NOW)
    with pytest.raises(InvalidInput):
        store.get_many_and_seq(SCOPE, ["x"], flt, NOW)
    assert store.count_indexable() == 1


def test_filtered_ids_honours_the_limit(store: Store) -> None:
    put(store, *(mem() for _ in range(7)))
    got = store.filtered_ids(SCOPE, MemoryFilter(), NOW, 3)
    assert len(got) == 3
    assert len(set(got)) == 3


# --- pagination ----------------------------------------------------------------------


def test_cursor_pagination_has_no_duplicates_and_no_gaps(store: Store) -> None:
    # Several memories share a created_at, so the cursor must break ties.
    memories = put(store, *(mem(created_at=T0 + timedelta(minutes=i // 3)) for i in range(25)))
    seen: list[Memory] = []
    cursor = None
    sizes = []
    for _ in range(10):
        page = store.list_page(SCOPE, MemoryFilter(), NOW, limit=10, cursor=cursor)
        sizes.append(len(page.items))
        seen.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sizes == [10, 10, 5]
    assert len(seen) == 25
    assert ids(seen) == ids(memories)
    order = [(m.created_at, m.memory_id) for m in seen]
    assert order == sorted(order, reverse=True)


def test_pagination_respects_the_filter(store: Store) -> None:
    facts = put(store, *(mem(category="fact", created_at=T0 + timedelta(seconds=i)) for i in range(12)))
    put(store, *(mem(category="event", created_at=T0 + timedelta(seconds=i)) for i in range(12)))
    flt = MemoryFilter(categories=("fact",))
    first = store.list_page(SCOPE, flt, NOW, limit=10)
    assert first.next_cursor is not None
    second = store.list_page(SCOPE, flt, NOW, limit=10, cursor=first.next_cursor)
    assert second.next_cursor is None
    assert ids(first.items) | ids(second.items) == ids(facts)
    assert len(first.items) + len(second.items) == 12


def test_exactly_one_full_page_has_no_next_cursor(store: Store) -> None:
    put(store, *(mem() for _ in range(10)))
    assert store.list_page(SCOPE, MemoryFilter(), NOW, limit=10).next_cursor is None


@pytest.mark.parametrize("cursor", ["not-a-cursor", "", "bnVsbA==", "WzEsIDJd", "eyJhIjogMX0=", "WyJ4IiwgInkiXQ=="])
def test_an_unreadable_cursor_is_invalid_input(store: Store, cursor: str) -> None:
    put(store, mem())
    with pytest.raises(InvalidInput):
        store.list_page(SCOPE, MemoryFilter(), NOW, limit=10, cursor=cursor)


# --- reinforce ----------------------------------------------------------------------


def _add_bonus(memory: Memory, bonus: float, at: datetime) -> float:
    return min(1.0, memory.base_score + bonus)


def test_reinforce_applies_every_event_in_order(store: Store) -> None:
    (m,) = put(store, mem(base_score=0.2))
    seq, versions = store.last_seq(), len(store.versions(SCOPE, m.memory_id))
    at = [T0 + timedelta(days=d) for d in (3, 1, 2)]
    store.reinforce([(m.memory_id, 0.1, at[0]), (m.memory_id, 0.05, at[1]), (m.memory_id, 0.05, at[2])], _add_bonus)
    after = store.get(SCOPE, m.memory_id)
    assert after is not None
    assert after.access_count == 3
    assert after.base_score == pytest.approx(0.4)
    assert after.last_accessed_at == T0 + timedelta(days=3)
    # Use, not an edit: no version, no change, nothing else touched.
    assert after.version == m.version
    assert after.updated_at == m.updated_at
    assert store.last_seq() == seq
    assert len(store.versions(SCOPE, m.memory_id)) == versions


def _read_before_a_reinforcement(store: Store) -> Memory:
    (m,) = put(store, mem(base_score=0.2))
    read_before = store.get(SCOPE, m.memory_id)
    assert read_before is not None
    store.reinforce([(m.memory_id, 0.1, T0 + timedelta(days=2))], _add_bonus)
    return read_before


def test_an_edit_from_a_record_read_before_a_reinforcement_keeps_its_access(store: Store) -> None:
    read_before = _read_before_a_reinforcement(store)
    store.update(read_before.evolve(content="edited", version=2), None, changed_by="tester", reason="edit")
    after = store.get(SCOPE, read_before.memory_id)
    assert after is not None and after.content == "edited"
    assert (after.access_count, after.base_score) == (1, pytest.approx(0.3))
    assert after.last_accessed_at == T0 + timedelta(days=2)
    # The version kept is the record as written, use included.
    assert store.versions(SCOPE, after.memory_id)[-1].record == after


def test_an_edit_that_sets_the_score_sets_it_over_a_reinforcement(store: Store) -> None:
    read_before = _read_before_a_reinforcement(store)
    edit = read_before.evolve(base_score=0.9, version=2)
    store.update(edit, None, changed_by="tester", reason="edit", sets_base_score=True)
    after = store.get(SCOPE, read_before.memory_id)
    assert after is not None
    assert (after.base_score, after.access_count) == (pytest.approx(0.9), 1)


def test_an_edit_without_a_vector_keeps_a_re_embedding_that_landed_after_its_read(store: Store) -> None:
    (m,) = put(store, mem())
    read_before = store.get(SCOPE, m.memory_id)
    assert read_before is not None
    store.put_vectors({m.memory_id: vec(40)}, "model-b", embedding_version="2")
    store.update(read_before.evolve(content="edited", version=2), None, changed_by="tester", reason="edit")
    after = store.get(SCOPE, m.memory_id)
    assert after is not None and (after.embedding_model, after.embedding_version) == ("model-b", "2")


def test_reinforce_hands_rescore_the_current_record(store: Store) -> None:
    (m,) = put(store, mem(base_score=0.5))
    seen: list[tuple[int, float, float, datetime]] = []

    def rescore(memory: Memory, bonus: float, at: datetime) -> float:
        seen.append((memory.access_count, memory.base_score, bonus, at))
        return memory.base_score / 2

    store.reinforce([(m.memory_id, 0.1, T0), (m.memory_id, 0.05, T0)], rescore)
    assert seen == [(0, 0.5, 0.1, T0), (1, 0.25, 0.05, T0)]
    after = store.get(SCOPE, m.memory_id)
    assert after is not None and after.base_score == pytest.approx(0.125)


def test_reinforce_skips_ids_that_do_not_exist(store: Store) -> None:
    (m,) = put(store, mem())
    store.reinforce([("no-such-id", 0.1, T0), (m.memory_id, 0.1, T0), ("gone", 0.1, T0)], _add_bonus)
    after = store.get(SCOPE, m.memory_id)
    assert after is not None and after.access_count == 1
    store.reinforce([], _add_bonus)


def test_reinforce_never_loses_an_increment_under_concurrency(store: Store) -> None:
    (m,) = put(store, mem(base_score=0.0))
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        for _ in range(50):
            store.reinforce([(m.memory_id, 0.001, T0)], _add_bonus)

    with ThreadPoolExecutor(max_workers=8) as pool:
        for future in [pool.submit(worker) for _ in range(8)]:
            future.result()
    after = store.get(SCOPE, m.memory_id)
    assert after is not None
    assert after.access_count == 400
    assert after.base_score == pytest.approx(0.4)


def test_reinforce_from_two_store_instances_over_the_same_data_adds_up(store_factory: StoreFactory) -> None:
    # Replicas share one system of record; the store's write lock must hold across instances.
    first, second = store_factory(), store_factory()
    first.open()
    second.open()
    try:
        (m,) = put(first, mem(base_score=0.0))

        def worker(instance: Store) -> None:
            for _ in range(25):
                instance.reinforce([(m.memory_id, 0.0, T0)], _add_bonus)

        with ThreadPoolExecutor(max_workers=8) as pool:
            for future in [pool.submit(worker, inst) for inst in (first, second) * 4]:
                future.result()
        after = second.get(SCOPE, m.memory_id)
        assert after is not None and after.access_count == 200
    finally:
        first.close()
        second.close()


# --- vectors ----------------------------------------------------------------------------


def test_put_vectors_stores_another_model_without_a_change(store: Store) -> None:
    a, b = put(store, mem(), mem())
    seq = store.last_seq()
    store.put_vectors({a.memory_id: vec(10), b.memory_id: vec(11)}, "model-b")
    found = store.vectors([a.memory_id, b.memory_id, "absent"], "model-b")
    assert set(found) == {a.memory_id, b.memory_id}
    np.testing.assert_array_equal(found[b.memory_id], vec(11))
    np.testing.assert_array_equal(store.vectors([a.memory_id], MODEL)[a.memory_id], vec(0))
    assert store.last_seq() == seq
    assert len(store.versions(SCOPE, a.memory_id)) == 1


def test_put_vectors_replaces(store: Store) -> None:
    (m,) = put(store, mem())
    store.put_vectors({m.memory_id: vec(20)}, MODEL)
    np.testing.assert_array_equal(store.vectors([m.memory_id], MODEL)[m.memory_id], vec(20))


def test_vectors_come_back_as_float32_of_the_stored_dimension(store: Store) -> None:
    (m,) = put(store, mem())
    got = store.vectors([m.memory_id], MODEL)[m.memory_id]
    assert got.dtype == np.float32
    assert got.shape == (DIM,)


# --- purge ------------------------------------------------------------------------------


def test_purge_removes_everything_about_the_memory(store: Store) -> None:
    gone, kept = put(store, mem("forget me"), mem())
    store.update(gone.evolve(version=2, content="forget me now"), vec(5), changed_by=None, reason="edit")
    store.add_edges(
        [
            Edge(NS, gone.memory_id, kept.memory_id, "RELATED_TO", T0),
            Edge(NS, kept.memory_id, gone.memory_id, "SUPERSEDES", T0),
        ]
    )
    before = store.last_seq()
    seq = store.purge(NS, gone.memory_id)
    assert seq > before
    assert seq == store.last_seq()
    assert store.get(SCOPE, gone.memory_id) is None
    assert store.versions(SCOPE, gone.memory_id) == []
    assert store.vectors([gone.memory_id], MODEL) == {}
    assert store.edges(SCOPE, gone.memory_id) == []
    assert store.edges(SCOPE, kept.memory_id) == []
    assert store.index_status([gone.memory_id]) == {}
    assert store.contents([gone.memory_id]) == {}
    assert store.find_by_digest(SCOPE, content_digest("forget me now")) == []
    assert store.get(SCOPE, kept.memory_id) == kept
    assert store.changes_since(before, 10)[-1].memory_id == gone.memory_id


def test_a_purge_at_a_version_purges_only_that_version(store: Store) -> None:
    (v1,) = put(store, mem("first words"))
    store.update(v1.evolve(content="second words", version=2), None, changed_by=None, reason="edited")
    seq = store.last_seq()
    with pytest.raises(VersionMismatch) as refused:
        store.purge(NS, v1.memory_id, version=1)
    assert refused.value.current_version == 2
    assert store.last_seq() == seq and len(store.versions(SCOPE, v1.memory_id)) == 2  # nothing written
    store.purge(NS, v1.memory_id, version=2)
    assert store.get(SCOPE, v1.memory_id) is None


def test_purge_of_an_absent_memory_is_not_found(store: Store) -> None:
    (m,) = put(store, mem())
    with pytest.raises(MemoryNotFound):
        store.purge(NS, "no-such-id")
    with pytest.raises(MemoryNotFound):
        store.purge(OTHER_NS, m.memory_id)
    assert store.get(SCOPE, m.memory_id) == m


# --- the change sequence ------------------------------------------------------------------


def test_change_sequence_grows_with_every_change(store: Store) -> None:
    assert store.last_seq() == 0
    assert store.changes_since(0, 10) == []
    a, b = put(store, mem(), mem(namespace=OTHER_NS))
    s_insert = store.last_seq()
    s_update = store.update(a.evolve(version=2, content="x"), None, changed_by=None, reason="edit")
    s_purge = store.purge(OTHER_NS, b.memory_id)
    assert 0 < s_insert < s_update < s_purge == store.last_seq()
    changes = store.changes_since(0, 100)
    seqs = [c.seq for c in changes]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert seqs[-1] == s_purge
    assert [(c.memory_id, c.namespace) for c in changes] == [
        (a.memory_id, NS),
        (b.memory_id, OTHER_NS),
        (a.memory_id, NS),
        (b.memory_id, OTHER_NS),
    ]


def test_changes_since_pages_oldest_first(store: Store) -> None:
    put(store, *(mem() for _ in range(5)))
    first = store.changes_since(0, 2)
    assert len(first) == 2
    rest = store.changes_since(first[-1].seq, 10)
    assert len(rest) == 3
    assert first[-1].seq < rest[0].seq
    assert store.changes_since(store.last_seq(), 10) == []


def test_seq_numbers_are_consecutive(store: Store) -> None:
    # The index keeper reads a missing number as a pruned (or not yet visible) change.
    a = put(store, mem(), mem(), mem())[0]
    store.update(a.evolve(version=2, content="x"), None, changed_by=None, reason="edit")
    store.purge(NS, a.memory_id)
    assert [c.seq for c in store.changes_since(0, 100)] == list(range(1, store.last_seq() + 1))


def test_pruning_keeps_the_newest_changes_and_raises_the_low_water_mark(store: Store) -> None:
    assert store.low_water_seq() == 0
    assert store.prune_changes(1, 100) == 0  # an empty log
    for _ in range(6):
        put(store, *(mem() for _ in range(5)))
    assert store.last_seq() == 30
    assert store.prune_changes(40, 100) == 0  # nothing beyond what is kept
    # Small batches: each call forgets at most `limit`, the oldest first.
    assert store.prune_changes(10, 7) == 7
    assert store.low_water_seq() == 7
    assert [c.seq for c in store.changes_since(7, 100)] == list(range(8, 31))
    assert store.prune_changes(10, 100) == 13
    assert store.prune_changes(10, 100) == 0
    assert store.low_water_seq() == 20
    # The newest ten are all there, the counter unchanged, and writes go on numbering from it.
    assert [c.seq for c in store.changes_since(20, 100)] == list(range(21, 31))
    assert store.last_seq() == 30
    put(store, mem())
    assert store.last_seq() == 31
    assert [c.seq for c in store.changes_since(20, 100)][-1] == 31


def test_the_log_keeps_at_least_its_newest_change(store: Store) -> None:
    put(store, mem(), mem())
    with pytest.raises(ValueError, match="newest"):
        store.prune_changes(0, 10)
    assert store.prune_changes(1, 10) == 1
    assert [c.seq for c in store.changes_since(store.low_water_seq(), 10)] == [2]


def test_pruners_racing_forget_each_change_once_and_keep_the_newest(store: Store) -> None:
    # Every serving process prunes on its own schedule: several may run at once.
    for _ in range(8):
        put(store, *(mem() for _ in range(5)))

    def prune_all() -> int:
        pruned = 0
        while went := store.prune_changes(5, 3):
            pruned += went
        return pruned

    with ThreadPoolExecutor(max_workers=4) as pool:
        pruned = sum(pool.map(lambda _: prune_all(), range(4)))
    assert pruned == 35
    assert store.low_water_seq() == 35
    assert [c.seq for c in store.changes_since(35, 100)] == list(range(36, 41))


def test_the_low_water_mark_survives_a_reopen(store_factory: StoreFactory) -> None:
    first = store_factory()
    first.open()
    put(first, *(mem() for _ in range(4)))
    first.prune_changes(2, 10)
    first.close()
    again = store_factory()
    again.open()
    try:
        assert (again.low_water_seq(), again.last_seq()) == (2, 4)
    finally:
        again.close()


# --- index maintenance ----------------------------------------------------------------------


def test_index_status_reports_every_namespace_and_skips_absent(store: Store) -> None:
    a, b = put(store, mem(), mem(namespace=OTHER_NS, status=Status.QUARANTINED))
    store.update(a.evolve(version=2, status=Status.DELETED), None, changed_by=None, reason="deleted")
    assert store.index_status([a.memory_id, b.memory_id, "absent"]) == {
        a.memory_id: Status.DELETED,
        b.memory_id: Status.QUARANTINED,
    }
    assert store.index_status([]) == {}


def test_iter_indexable_walks_everything_not_deleted_once(store: Store) -> None:
    with_vector = put(store, *(mem() for _ in range(4)))
    other_model = [mem(embedding_model="model-b") for _ in range(3)]
    store.insert(other_model, [vec(100 + i) for i in range(3)], changed_by=None)
    (deleted,) = put(store, mem(namespace=OTHER_NS))
    store.update(deleted.evolve(version=2, status=Status.DELETED), None, changed_by=None, reason="deleted")
    (archived,) = put(store, mem(status=Status.ARCHIVED))

    have: dict[str, Vector] = {}
    missing: list[str] = []
    for batch_ids, matrix, batch_missing in store.iter_indexable(MODEL, batch=2):
        assert len(batch_ids) + len(batch_missing) <= 2
        assert matrix.shape[0] == len(batch_ids)
        for memory_id, row in zip(batch_ids, matrix, strict=True):
            assert memory_id not in have
            have[memory_id] = row
        missing.extend(batch_missing)
    assert set(have) == ids([*with_vector, archived])
    assert sorted(missing) == sorted(m.memory_id for m in other_model)
    stored = store.vectors(list(have), MODEL)
    for memory_id, row in have.items():
        np.testing.assert_array_equal(row, stored[memory_id])
    assert store.count_indexable() == len(with_vector) + len(other_model) + 1


def test_iter_indexable_of_an_empty_store_yields_nothing(store: Store) -> None:
    assert list(store.iter_indexable(MODEL, batch=10)) == []
    assert store.count_indexable() == 0


def test_contents_returns_content_of_existing_ids(store: Store) -> None:
    a, b = put(store, mem("alpha"), mem("beta", namespace=OTHER_NS))
    assert store.contents([a.memory_id, b.memory_id, "absent"]) == {a.memory_id: "alpha", b.memory_id: "beta"}


# --- edges ---------------------------------------------------------------------------------


def test_edges_are_kept_once_and_found_from_either_end(store: Store) -> None:
    a, b, c = put(store, mem(), mem(), mem())
    sup = Edge(NS, b.memory_id, a.memory_id, "SUPERSEDES", T0)
    rel = Edge(NS, b.memory_id, c.memory_id, "RELATED_TO", T0 + timedelta(seconds=1))
    store.add_edges([sup, rel])
    store.add_edges([sup])
    store.add_edges([sup, rel])
    assert store.edges(SCOPE, b.memory_id) == [sup, rel]
    assert store.edges(SCOPE, a.memory_id) == [sup]
    assert store.edges(SCOPE, c.memory_id) == [rel]
    # Same ends, another kind: a different link.
    related_too = Edge(NS, b.memory_id, a.memory_id, "RELATED_TO", T0 + timedelta(seconds=2))
    store.add_edges([related_too])
    assert len(store.edges(SCOPE, a.memory_id)) == 2


def test_links_are_every_edge_touching_the_ids_in_any_namespace(store: Store) -> None:
    a, b, c = put(store, mem(), mem(), mem())
    (d,) = put(store, mem(namespace=OTHER_NS, visibility=Visibility.PRIVATE, actor="bob"))
    sup = Edge(NS, b.memory_id, a.memory_id, "SUPERSEDES", T0)
    rel = Edge(NS, b.memory_id, c.memory_id, "RELATED_TO", T0 + timedelta(seconds=1))
    other = Edge(OTHER_NS, d.memory_id, d.memory_id, "NEXT", T0)
    store.add_edges([sup, rel, other])

    def kinds(edges: list[Edge]) -> list[str]:
        return sorted(e.kind for e in edges)

    assert kinds(store.links([a.memory_id, b.memory_id])) == ["RELATED_TO", "SUPERSEDES"]
    assert set(store.links([a.memory_id, b.memory_id])) == {sup, rel}
    assert store.links([c.memory_id]) == [rel]
    # Unscoped (index maintenance): a private link of another namespace is there, once.
    assert store.links([d.memory_id]) == [other]
    assert store.links([a.memory_id, "nothing"]) == [sup]
    assert store.links([]) == []


# --- durability ------------------------------------------------------------------------------


def test_every_returned_write_is_there_after_reopening(store_factory: StoreFactory) -> None:
    first = store_factory()
    first.open()
    a, b, c = put(first, mem("alpha"), mem("beta"), mem("gamma", namespace=OTHER_NS))
    a2 = a.evolve(version=2, content="alpha two")
    first.update(a2, vec(42), changed_by="editor", reason="edit")
    first.reinforce([(b.memory_id, 0.1, T0 + timedelta(days=1))], _add_bonus)
    first.put_vectors({c.memory_id: vec(43)}, "model-b")
    first.add_edges([Edge(NS, a.memory_id, b.memory_id, "RELATED_TO", T0)])
    first.purge(OTHER_NS, c.memory_id)
    seq = first.last_seq()
    first.close()

    second = store_factory()
    second.open()
    try:
        assert second.get(SCOPE, a.memory_id) == a2
        assert [v.version for v in second.versions(SCOPE, a.memory_id)] == [1, 2]
        np.testing.assert_array_equal(second.vectors([a.memory_id], MODEL)[a.memory_id], vec(42))
        reinforced = second.get(SCOPE, b.memory_id)
        assert reinforced is not None
        assert (reinforced.access_count, reinforced.base_score) == (1, pytest.approx(0.6))
        assert reinforced.last_accessed_at == T0 + timedelta(days=1)
        assert second.get(Scope.whole([OTHER_NS]), c.memory_id) is None
        assert len(second.edges(SCOPE, a.memory_id)) == 1
        assert second.last_seq() == seq
        # The sequence keeps growing after a reopen; it never reuses a number.
        assert second.insert([mem()], [vec(1)], changed_by=None) > seq
    finally:
        second.close()


# --- walks for lifecycle jobs ------------------------------------------------------------------


def test_put_vectors_can_mark_the_model_in_use_and_skips_purged_ids(store: Store) -> None:
    a, b = put(store, mem(), mem())
    seq = store.last_seq()
    store.put_vectors({a.memory_id: vec(30), "absent": vec(31)}, "model-b", embedding_version="7")
    marked, untouched = store.get(SCOPE, a.memory_id), store.get(SCOPE, b.memory_id)
    assert marked is not None and (marked.embedding_model, marked.embedding_version) == ("model-b", "7")
    assert marked.version == 1
    assert untouched == b
    assert store.vectors(["absent"], "model-b") == {}
    # The record names another vector now: one change, so that other replicas index it.
    assert store.changes_since(seq, 10) == [Change(seq + 1, a.memory_id, NS, "reembed")]


def test_a_re_embedding_leaves_a_vector_an_edit_stored_meanwhile(store: Store) -> None:
    (m,) = put(store, mem())
    # The re-embedder found no model-b vector and embedded the text it read; meanwhile an
    # edit stored the new text's vector under model-b.
    edit = m.evolve(content="new text", version=2, embedding_model="model-b")
    store.update(edit, vec(50), changed_by=None, reason="edit")
    seq = store.last_seq()
    store.put_vectors({m.memory_id: vec(51)}, "model-b", embedding_version="2")
    np.testing.assert_array_equal(store.vectors([m.memory_id], "model-b")[m.memory_id], vec(50))
    assert store.last_seq() == seq


def test_scan_walks_one_namespace_in_id_order_whatever_the_status(store: Store) -> None:
    mine = put(store, *(mem() for _ in range(7)))
    deleted = mine[3].evolve(status=Status.DELETED, version=2)
    store.update(deleted, None, changed_by=None, reason="deleted")
    put(store, mem(namespace=OTHER_NS))
    pages, after = [], ""
    while True:
        page = store.scan(SCOPE, after, 3)
        pages.append(page)
        if len(page) < 3:
            break
        after = page[-1].memory_id
    walked = [m.memory_id for page in pages for m in page]
    assert walked == sorted(m.memory_id for m in mine)
    assert [len(page) for page in pages] == [3, 3, 1]
    assert deleted in pages[0] + pages[1] + pages[2]
    assert store.scan(SCOPE, walked[-1], 3) == []
    assert store.scan(Scope.whole(["nobody"]), "", 3) == []


def test_namespaces_lists_every_namespace_with_memories(store: Store) -> None:
    assert store.namespaces() == []
    put(store, mem(namespace=OTHER_NS), mem(), mem())
    assert store.namespaces() == sorted([NS, OTHER_NS])


def test_missing_vectors_lists_indexable_memories_without_a_vector_of_the_model_in_use(store: Store) -> None:
    a, b, c, d, e = put(store, mem(), mem(), mem(), mem(embedding_model="model-c"), mem())
    store.put_vectors({b.memory_id: vec(1)}, "model-b", embedding_version="2")
    # A model-b vector kept from an earlier time on model-b (the model was changed and
    # changed back): the record names another model, so it is not the one in use.
    store.put_vectors({e.memory_id: vec(4)}, "model-b")
    store.update(c.evolve(status=Status.DELETED, version=2), None, changed_by=None, reason="deleted")
    missing = store.missing_vectors("model-b", "", 10)
    assert missing == sorted([a.memory_id, d.memory_id, e.memory_id])
    assert store.missing_vectors("model-b", missing[0], 10) == missing[1:]
    assert store.missing_vectors("model-b", "", 1) == missing[:1]
    assert store.missing_vector_models("model-b") == {MODEL: 2, "model-c": 1}
    store.put_vectors({a.memory_id: vec(2), d.memory_id: vec(3), e.memory_id: vec(5)}, "model-b", embedding_version="2")
    assert store.missing_vectors("model-b", "", 10) == []
    assert store.missing_vector_models("model-b") == {}
    np.testing.assert_array_equal(store.vectors([e.memory_id], "model-b")[e.memory_id], vec(5))
    assert store.get(SCOPE, e.memory_id).embedding_model == "model-b"  # type: ignore[union-attr]


# --- import ------------------------------------------------------------------------------------


def imported(
    memory: Memory, *, history: int = 0, vector: Vector | None = None, edges: tuple[Edge, ...] = ()
) -> ImportedRecord:
    versions = (
        tuple(
            Version(
                memory.memory_id,
                n,
                memory.evolve(version=n, content=f"{memory.content} v{n}" if n < memory.version else memory.content),
                T0 + timedelta(hours=n),
                f"editor-{n}",
                f"edit {n}",
            )
            for n in range(memory.version - history + 1, memory.version + 1)
        )
        if history
        else ()
    )
    return ImportedRecord(memory, versions, vector, edges)


def test_import_records_keeps_every_field_history_vector_and_edge(store: Store) -> None:
    old = mem(
        "kept as it was",
        status=Status.SUPERSEDED,
        version=3,
        access_count=9,
        base_score=0.91,
        last_accessed_at=T0 + timedelta(days=3),
        updated_at=T0 + timedelta(days=2),
        key="k",
    )
    new = mem("the newer one", entities=("Alice",), metadata={"深": [1, {"x": None}]})
    records = [
        imported(old, history=3, vector=vec(5)),
        imported(new, vector=vec(6), edges=(Edge(NS, new.memory_id, old.memory_id, "SUPERSEDES", T0),)),
    ]
    seq = store.last_seq()
    assert store.import_records(records, changed_by="importer") == [old.memory_id, new.memory_id]
    assert store.get(SCOPE, old.memory_id) == old
    assert store.get(SCOPE, new.memory_id) == new
    assert store.versions(SCOPE, old.memory_id) == list(records[0].versions)
    (only,) = store.versions(SCOPE, new.memory_id)
    assert (only.record, only.changed_by, only.reason) == (new, "importer", "imported")
    np.testing.assert_array_equal(store.vectors([old.memory_id], MODEL)[old.memory_id], vec(5))
    assert [(e.src, e.dst, e.kind) for e in store.edges(SCOPE, old.memory_id)] == [
        (new.memory_id, old.memory_id, "SUPERSEDES")
    ]
    changes = store.changes_since(seq, 10)
    assert [c.memory_id for c in changes] == [old.memory_id, new.memory_id]
    assert store.last_seq() == changes[-1].seq
    assert store.find_by_digest(SCOPE, content_digest("The newer ONE")) == [new]


def test_import_records_skips_ids_already_in_the_namespace(store: Store) -> None:
    (existing,) = put(store, mem("stored first"))
    seq = store.last_seq()
    fresh = mem()
    again = imported(existing.evolve(content="a different story", version=4), vector=vec(9))
    assert store.import_records([again, imported(fresh)], changed_by=None) == [fresh.memory_id]
    assert store.get(SCOPE, existing.memory_id) == existing
    assert len(store.versions(SCOPE, existing.memory_id)) == 1
    assert [c.memory_id for c in store.changes_since(seq, 10)] == [fresh.memory_id]
    assert store.import_records([again, imported(fresh)], changed_by=None) == []
    assert store.last_seq() == seq + 1


def test_import_records_without_a_vector_stores_none(store: Store) -> None:
    m = mem()
    store.import_records([imported(m)], changed_by=None)
    assert store.vectors([m.memory_id], MODEL) == {}
    assert store.index_status([m.memory_id]) == {m.memory_id: Status.ACTIVE}


def test_import_records_of_an_id_held_by_another_namespace_conflicts_and_writes_nothing(store: Store) -> None:
    (theirs,) = put(store, mem(namespace=OTHER_NS))
    seq = store.last_seq()
    fresh = mem()
    with pytest.raises(Conflict):
        store.import_records([imported(fresh), imported(theirs.evolve(namespace=NS))], changed_by=None)
    assert store.get(SCOPE, fresh.memory_id) is None
    assert store.get(Scope.whole([OTHER_NS]), theirs.memory_id) == theirs
    assert store.last_seq() == seq


def test_import_records_brings_forward_a_memory_stored_at_forward_from(store: Store) -> None:
    """A later export of a memory imported after an older one (engine/portability.py): the
    stored record becomes the file's, with the file's later versions and links, after the
    memories the import adds (a link may point to one); one change each."""
    first = mem("lives in Berlin", entities=("Berlin",), access_count=5, last_accessed_at=T0 + timedelta(days=5))
    before = imported(first, history=1, vector=vec(1))
    assert store.import_records([before], changed_by=None) == [first.memory_id]
    seq = store.last_seq()
    now = first.evolve(
        status=Status.SUPERSEDED,
        version=3,
        entities=("Berlin", "home"),
        access_count=2,
        base_score=0.8,
        updated_at=T0 + timedelta(days=2),
        embedding_model="model-of-the-file",
    )
    fresh = mem("moved to Paris")
    onward = replace(
        imported(now, history=3, edges=(Edge(NS, first.memory_id, fresh.memory_id, "RELATED_TO", T0),)),
        forward_from=1,
    )
    assert store.import_records([onward, imported(fresh)], changed_by=None) == [first.memory_id, fresh.memory_id]
    # Use only accumulates, and the stored vector (with its model) is kept without a new one.
    assert store.get(SCOPE, first.memory_id) == now.evolve(
        access_count=5, last_accessed_at=T0 + timedelta(days=5), embedding_model=MODEL
    )
    assert store.versions(SCOPE, first.memory_id) == [*before.versions, *onward.versions[1:]]
    np.testing.assert_array_equal(store.vectors([first.memory_id], MODEL)[first.memory_id], vec(1))
    assert [(e.src, e.dst, e.kind) for e in store.links([fresh.memory_id])] == [
        (first.memory_id, fresh.memory_id, "RELATED_TO")
    ]
    (home,) = entity_keys(["home"])
    mentions = store.memories_by_entity(SCOPE, home, MemoryFilter(statuses=tuple(Status)), NOW, 10)
    assert [m.memory_id for m in mentions] == [first.memory_id]
    assert [c.memory_id for c in store.changes_since(seq, 10)] == [fresh.memory_id, first.memory_id]
    assert store.index_status([first.memory_id]) == {first.memory_id: Status.SUPERSEDED}


def test_import_records_brings_forward_a_vector_when_given(store: Store) -> None:
    first = mem("lives in Berlin")
    store.import_records([imported(first, vector=vec(1))], changed_by=None)
    now = first.evolve(content="lives in Paris", version=2, embedding_model="model-b", embedding_version="2")
    onward = replace(imported(now, history=2, vector=vec(2)), forward_from=1)
    assert store.import_records([onward], changed_by=None) == [first.memory_id]
    assert store.get(SCOPE, first.memory_id) == now
    assert store.vectors([first.memory_id], "model-b")[first.memory_id].tolist() == vec(2).tolist()
    assert store.find_by_digest(SCOPE, content_digest("lives in Paris")) == [now]


def test_import_records_leaves_a_memory_written_since_forward_from(store: Store) -> None:
    first = mem("lives in Berlin")
    store.import_records([imported(first)], changed_by=None)
    edited = first.evolve(content="lives in Munich", version=2)
    store.update(edited, None, changed_by="here", reason="edited here")
    seq = store.last_seq()
    onward = replace(imported(first.evolve(status=Status.DELETED, version=2), history=2), forward_from=1)
    assert store.import_records([onward], changed_by=None) == []
    assert store.get(SCOPE, first.memory_id) == edited
    assert [v.reason for v in store.versions(SCOPE, first.memory_id)] == ["imported", "edited here"]
    assert store.last_seq() == seq


def test_import_records_stores_a_record_to_bring_forward_that_is_not_stored_as_new(store: Store) -> None:
    now = mem("lives in Paris", version=2)
    onward = replace(imported(now, history=2), forward_from=1)
    assert store.import_records([onward], changed_by=None) == [now.memory_id]
    assert store.get(SCOPE, now.memory_id) == now
    assert store.versions(SCOPE, now.memory_id) == list(onward.versions)


# --- linked writes, keys and entities (conflicts on write, graph endpoints) --------------------


def test_insert_linked_stores_memories_updates_and_edges_together(store: Store) -> None:
    (old,) = put(store, mem("user lives in Berlin"))
    seq = store.last_seq()
    new = mem("user moved to Lisbon")
    older = old.evolve(status=Status.SUPERSEDED, version=2, updated_at=NOW)
    edge = Edge(NS, new.memory_id, old.memory_id, "SUPERSEDES", NOW)
    last = store.insert_linked(
        [new], [vec(1)], updates=[(older, f"superseded by {new.memory_id}")], edges=[edge], changed_by="tester"
    )
    assert last == store.last_seq() == seq + 2
    assert store.get(SCOPE, new.memory_id) == new
    assert store.get(SCOPE, old.memory_id) == older
    history = store.versions(SCOPE, old.memory_id)
    assert [(v.version, v.reason) for v in history] == [(1, "created"), (2, f"superseded by {new.memory_id}")]
    assert history[0].record.status is Status.ACTIVE
    assert store.edges(SCOPE, old.memory_id) == [edge]
    assert [(c.memory_id, c.op) for c in store.changes_since(seq, 10)] == [
        (new.memory_id, "insert"),
        (old.memory_id, "update"),
    ]


def test_next_links_from_a_stored_memory_land_with_the_new_ones(store: Store) -> None:
    """How a save of a session's memories links them (engine/episodes.py): NEXT from the
    end of the chain already stored to the first new one, then in batch order, in the
    insert's transaction; the change sequence names only the new memories, and the links
    of those (what a fast network catching up reads) include the edge from the stored one."""
    (tail,) = put(store, mem("said first", session_id="chat"))
    seq = store.last_seq()
    first, second = mem("said second", session_id="chat"), mem("said third", session_id="chat")
    edges = [
        Edge(NS, tail.memory_id, first.memory_id, "NEXT", NOW),
        Edge(NS, first.memory_id, second.memory_id, "NEXT", NOW),
    ]
    store.insert_linked([first, second], [vec(1), vec(2)], updates=[], edges=edges, changed_by="tester")
    assert [c.memory_id for c in store.changes_since(seq, 10)] == [first.memory_id, second.memory_id]
    found = {(e.src, e.dst, e.kind) for e in store.links([first.memory_id, second.memory_id])}
    assert found == {(e.src, e.dst, "NEXT") for e in edges}
    assert [(e.src, e.dst) for e in store.edges(SCOPE, tail.memory_id)] == [(tail.memory_id, first.memory_id)]


def test_insert_linked_refuses_a_save_another_writer_overtook(store: Store) -> None:
    """``seen_seq``: a save judged at one change, where another writer inserted a memory
    of the same session (whose chain the save goes on) or the same text in the namespace
    since, stores nothing and names that memory; one of another session, text or
    namespace, or one the save was judged after, lets it land."""
    seen = store.last_seq()
    (other,) = put(store, mem("said on the other replica", session_id="chat"))
    put(store, mem("said in another session", session_id="other"), mem("said elsewhere", namespace=OTHER_NS))
    (text,) = put(store, mem("the same text"))
    for overtaken in (mem("said here", session_id="chat"), mem("the same text")):
        with pytest.raises(SaveOvertaken) as raised:
            store.insert_linked([overtaken], [vec(1)], updates=[], edges=[], changed_by="tester", seen_seq=seen)
        wanted = other if overtaken.session_id else text
        assert raised.value.memory_id == wanted.memory_id
        assert store.get(SCOPE, overtaken.memory_id) is None
    apart = [mem("said in a third session", session_id="third"), mem("said elsewhere", session_id="other2")]
    store.insert_linked(apart, [vec(1), vec(2)], updates=[], edges=[], changed_by="tester", seen_seq=seen)
    late = mem("the same text", session_id="chat")
    store.insert_linked([late], [vec(1)], updates=[], edges=[], changed_by="tester", seen_seq=store.last_seq())
    assert store.get(SCOPE, late.memory_id) == late


def test_import_records_may_carry_a_next_link_from_a_stored_memory(store: Store) -> None:
    (tail,) = put(store, mem("said first", session_id="chat"))
    new = mem("said later, imported", session_id="chat")
    link = Edge(NS, tail.memory_id, new.memory_id, "NEXT", T0)
    assert store.import_records([imported(new, edges=(link,))], changed_by="importer") == [new.memory_id]
    assert [(e.src, e.dst, e.kind) for e in store.links([new.memory_id])] == [(tail.memory_id, new.memory_id, "NEXT")]


def test_insert_linked_may_update_a_memory_it_inserts(store: Store) -> None:
    first, second = mem("likes coffee"), mem("quit coffee")
    first_superseded = first.evolve(status=Status.SUPERSEDED, version=2)
    edge = Edge(NS, second.memory_id, first.memory_id, "SUPERSEDES", T0)
    store.insert_linked(
        [first, second], [vec(1), vec(2)], updates=[(first_superseded, "superseded")], edges=[edge], changed_by=None
    )
    assert store.get(SCOPE, first.memory_id) == first_superseded
    assert [v.version for v in store.versions(SCOPE, first.memory_id)] == [1, 2]


def test_insert_linked_writes_nothing_when_an_update_is_stale(store: Store) -> None:
    (old,) = put(store, mem("user lives in Berlin"))
    seq = store.last_seq()
    new = mem("user moved to Lisbon")
    stale = old.evolve(status=Status.SUPERSEDED, version=3)
    with pytest.raises(Conflict):
        store.insert_linked(
            [new],
            [vec(1)],
            updates=[(stale, "superseded")],
            edges=[Edge(NS, new.memory_id, old.memory_id, "SUPERSEDES", NOW)],
            changed_by=None,
        )
    assert store.get(SCOPE, new.memory_id) is None
    assert store.get(SCOPE, old.memory_id) == old
    assert store.edges(SCOPE, old.memory_id) == []
    assert store.last_seq() == seq


def test_insert_linked_writes_nothing_when_an_update_is_in_another_namespace(store: Store) -> None:
    (theirs,) = put(store, mem(namespace=OTHER_NS))
    new = mem()
    with pytest.raises(MemoryNotFound):
        store.insert_linked(
            [new], [vec(1)], updates=[(theirs.evolve(namespace=NS, version=2), "x")], edges=[], changed_by=None
        )
    assert store.get(SCOPE, new.memory_id) is None
    assert store.get(Scope.whole([OTHER_NS]), theirs.memory_id) == theirs


def test_update_writes_also_in_its_transaction(store: Store) -> None:
    old, new = put(store, mem("user lives in Berlin", status=Status.SUPERSEDED), mem("user moved to Paris"))
    edited = new.evolve(content="the weather is nice", version=2)
    back = old.evolve(status=Status.ACTIVE, version=2)
    seq = store.update(edited, vec(5), changed_by="editor", reason="edit", also=[(back, "reinstated")])
    assert seq == store.last_seq()
    assert (store.get(SCOPE, new.memory_id), store.get(SCOPE, old.memory_id)) == (edited, back)
    np.testing.assert_array_equal(store.vectors([new.memory_id], MODEL)[new.memory_id], vec(5))
    assert [(v.reason, v.changed_by) for v in store.versions(SCOPE, old.memory_id)][-1] == ("reinstated", "editor")
    assert [change.memory_id for change in store.changes_since(seq - 2, 10)] == [new.memory_id, old.memory_id]


def test_update_writes_nothing_when_one_of_also_is_stale(store: Store) -> None:
    old, new = put(store, mem("user lives in Berlin", status=Status.SUPERSEDED), mem("user moved to Paris"))
    seq = store.last_seq()
    with pytest.raises(Conflict):
        store.update(
            new.evolve(content="the weather is nice", version=2),
            vec(5),
            changed_by=None,
            reason="edit",
            also=[(old.evolve(status=Status.ACTIVE, version=3), "reinstated")],
        )
    assert (store.get(SCOPE, new.memory_id), store.get(SCOPE, old.memory_id)) == (new, old)
    np.testing.assert_array_equal(store.vectors([new.memory_id], MODEL)[new.memory_id], vec(1))
    assert store.last_seq() == seq


def test_find_by_key_returns_active_memories_of_the_namespace_newest_first(store: Store) -> None:
    old, new, _gone, other, _unkeyed = put(
        store,
        mem("theme is blue", key="ui.theme", created_at=T0),
        mem("theme is black", key="ui.theme", created_at=T0 + timedelta(days=1)),
        mem("theme is red", key="ui.theme", created_at=T0 + timedelta(days=2), status=Status.SUPERSEDED),
        mem("theme is green", key="ui.theme", namespace=OTHER_NS),
        mem("theme is white"),
    )
    assert [m.memory_id for m in store.find_by_key(SCOPE, "ui.theme")] == [new.memory_id, old.memory_id]
    assert [m.memory_id for m in store.find_by_key(Scope.whole([OTHER_NS]), "ui.theme")] == [other.memory_id]
    assert store.find_by_key(SCOPE, "UI.THEME") == []
    assert store.find_by_key(SCOPE, "absent") == []


def test_memories_by_entity_links_names_by_their_key(store: Store) -> None:
    blue_en, blue_zh, coffee, elsewhere = put(
        store,
        mem("likes Blue", entities=("Blue",), created_at=T0),
        mem("喜欢蓝色", entities=("蓝色",), created_at=T0 + timedelta(days=1)),
        mem("drinks coffee", entities=("coffee",)),
        mem("likes blue too", entities=("blue",), namespace=OTHER_NS),
    )
    found = store.memories_by_entity(SCOPE, "blue", MemoryFilter(), NOW, 10)
    assert [m.memory_id for m in found] == [blue_zh.memory_id, blue_en.memory_id]
    assert found[0].entities == ("蓝色",)  # the name as given is kept; only the key is shared
    both = store.memories_by_entity(Scope.whole([NS, OTHER_NS]), "blue", MemoryFilter(), NOW, 10)
    assert {m.memory_id for m in both} == {blue_en.memory_id, blue_zh.memory_id, elsewhere.memory_id}
    assert [m.memory_id for m in store.memories_by_entity(SCOPE, "blue", MemoryFilter(), NOW, 1)] == [blue_zh.memory_id]
    assert store.memories_by_entity(SCOPE, "Blue", MemoryFilter(), NOW, 10) == []  # a key, not a raw name
    assert store.memories_by_entity(SCOPE, "tea", MemoryFilter(), NOW, 10) == []
    assert [m.memory_id for m in store.memories_by_entity(SCOPE, "coffee", MemoryFilter(), NOW, 10)] == [
        coffee.memory_id
    ]


def test_memories_by_entity_respects_the_filter_and_follows_updates(store: Store) -> None:
    a, b = put(store, mem("a", entities=("Berlin",)), mem("b", entities=("Berlin",), category="event"))
    events = store.memories_by_entity(SCOPE, "berlin", MemoryFilter(categories=("event",)), NOW, 10)
    assert [m.memory_id for m in events] == [b.memory_id]
    store.update(a.evolve(version=2, status=Status.SUPERSEDED), None, changed_by=None, reason="superseded")
    assert [m.memory_id for m in store.memories_by_entity(SCOPE, "berlin", MemoryFilter(), NOW, 10)] == [b.memory_id]
    any_status = MemoryFilter(statuses=())
    assert {m.memory_id for m in store.memories_by_entity(SCOPE, "berlin", any_status, NOW, 10)} == {
        a.memory_id,
        b.memory_id,
    }
    store.update(b.evolve(version=2, entities=("Lisbon",)), None, changed_by=None, reason="moved")
    assert store.memories_by_entity(SCOPE, "berlin", MemoryFilter(), NOW, 10) == []
    assert [m.memory_id for m in store.memories_by_entity(SCOPE, "lisbon", MemoryFilter(), NOW, 10)] == [b.memory_id]
