"""A category's own HNSW index (engine/category_indexes.py): asked for by a recall narrowed
to that category that had to scan it, built in the background, kept in step with the
fast network, searched by the next such recall, never a way around the caller's sight.
Real SQLite, real HNSW. Half of one namespace lies next to the query (``near``), the other
half (``far``, the filter's category) elsewhere (``tests/huge_namespace.py``);
``EXACT_DIRECT`` is lowered so that a small namespace plans as a large one would, and the
indexes' room raised to the whole network (by default a quarter: not the half "far" is)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import fast_network, recall
from engine.records import MemoryDraft, MemoryFilter, MemoryPatch, Reach, Scope, Status, Visibility
from engine.service import MemoryService
from tests.huge_namespace import FAR, NAMESPACE, QUERY, open_filled

SIZE = 1200  # 600 of category "far"
DEFAULT_ROOM = fast_network.CATEGORY_INDEXES_ROOM


@pytest.fixture(autouse=True)
def _small_counts_as_large(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recall, "EXACT_DIRECT", 100)
    monkeypatch.setattr(fast_network, "CATEGORY_INDEXES_ROOM", 1.0)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MemoryService]:
    opened = open_filled(tmp_path, SIZE, category_indexes=8)
    yield opened
    opened.close()


def _far_recall(service: MemoryService, query: str = QUERY, **kwargs: Any) -> list[str]:
    result = service.recall(query, namespaces=[NAMESPACE], flt=FAR, reinforce=False, **kwargs)
    assert {hit.memory.category for hit in result.hits} == {"far"}
    return [hit.memory.memory_id for hit in result.hits]


def _built(service: MemoryService) -> dict[str, int]:
    """The categories with their own index, once no build is under way."""
    network = service.keeper.network
    network.settle()
    return network.category_indexes_held()


def _far_members(service: MemoryService) -> set[str]:
    """What the far index must hold: every memory of the category with a vector, not deleted."""
    net, now = service.keeper.network, service._clock()
    with net.reading():
        every = net.rows_in([NAMESPACE, "other"])
        flt = MemoryFilter(categories=("far",), statuses=(Status.ACTIVE, Status.ARCHIVED), include_expired=True)
        return set(net.ids_of(every[net.passes(Scope.whole([NAMESPACE, "other"]), flt, now, every)]))


def _searches(monkeypatch: pytest.MonkeyPatch, index: Any) -> list[int]:
    """The k of every search of ``index`` from now on."""
    asked: list[int] = []
    search = index.search
    monkeypatch.setattr(index, "search", lambda vector, k: asked.append(k) or search(vector, k))
    return asked


def test_a_recall_that_scanned_a_category_has_its_index_built_and_the_next_searches_it(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    network = service.keeper.network
    assert network.category_index("far") is None
    scanned = service.recall(QUERY, namespaces=[NAMESPACE], flt=FAR, reinforce=False)
    assert scanned.exact_scan  # nothing the plain search met was far: the scan
    assert _built(service) == {"far": SIZE // 2}
    with network.reading():
        index = network.category_index("far")
    assert index is not None
    asked, whole = _searches(monkeypatch, index), _searches(monkeypatch, service.keeper.index)
    again = service.recall(QUERY, namespaces=[NAMESPACE], flt=FAR, reinforce=False)
    assert asked == [100] and whole == []  # the pool, from the far index alone
    assert not again.exact_scan
    # 600 vectors, a search of 100 at ef 128: the exact scan's ten, in its order
    assert [hit.memory.memory_id for hit in again.hits] == [hit.memory.memory_id for hit in scanned.hits]


def test_the_index_follows_category_changes_deletions_and_new_memories(service: MemoryService) -> None:
    first = _far_recall(service)
    assert _built(service) == {"far": SIZE // 2}
    moved, deleted = first[0], first[1]
    service.update(NAMESPACE, moved, MemoryPatch(category="near"))
    service.delete(NAMESPACE, deleted)
    # the query's own words: the nearest memory there is, of the category
    new = service.save(MemoryDraft(QUERY, namespace=NAMESPACE, category="far")).memory.memory_id
    hits = _far_recall(service)
    assert hits[0] == new and moved not in hits and deleted not in hits
    held = service.keeper.network.category_indexes_held()
    assert held == {"far": SIZE // 2 - 1} == {"far": len(_far_members(service))}
    with service.keeper.network.reading():
        index = service.keeper.network.category_index("far")
        assert index is not None
        assert new in index and moved not in index and deleted not in index


def test_the_index_never_lets_through_what_the_caller_does_not_see(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    _far_recall(service)
    # Built before the saves below: a build still under way could take them in with its rows.
    assert _built(service) == {"far": SIZE // 2}
    # Far memories nearer the query than any in the namespace: in another namespace, and
    # one private to another agent in this one.
    elsewhere = service.save(MemoryDraft(QUERY, namespace="other", category="far")).memory.memory_id
    private = service.save(
        MemoryDraft(QUERY + " again", namespace=NAMESPACE, category="far", actor="b", visibility=Visibility.PRIVATE)
    ).memory.memory_id
    assert _built(service) == {"far": SIZE // 2}
    network = service.keeper.network
    with network.reading():
        index = network.category_index("far")
        assert index is not None
        nearest = [memory_id for memory_id, _ in index.search(service.embedder.embed_query(QUERY), 3)]
    assert {elsewhere, private} <= set(nearest)  # the index holds them, and they come first
    fetched: list[str] = []  # every id the final read asks the store for
    for read in ("get_many_and_seq", "get_many"):
        monkeypatch.setattr(service.store, read, _recording(getattr(service.store, read), fetched))
    asked = _searches(monkeypatch, index)
    sight = Scope.of({NAMESPACE: Reach.MEMBER}, "a")  # a member: shared memories and its own
    result = service.recall(QUERY, namespaces=[NAMESPACE], flt=FAR, scope=sight, reinforce=False)
    assert asked == [100]  # the far index answered, and returned them (above)
    found = {hit.memory.memory_id for hit in result.hits}
    assert len(found) == 10 and not found & {elsewhere, private}
    assert fetched and not set(fetched) & {elsewhere, private}  # not even offered to the store's check


def _recording(read: Any, fetched: list[str]) -> Any:
    """``read`` (a store read by ids), adding the ids it is asked for to ``fetched``."""
    return lambda sight, ids, *rest: fetched.extend(ids) or read(sight, ids, *rest)


def test_no_index_is_built_where_none_is_configured(tmp_path: Path) -> None:
    service = open_filled(tmp_path, SIZE, category_indexes=0)
    try:
        _far_recall(service)
        assert _built(service) == {}
        assert service.recall(QUERY, namespaces=[NAMESPACE], flt=FAR, reinforce=False).exact_scan
    finally:
        service.close()


def test_a_category_of_more_than_a_quarter_of_the_network_gets_no_index(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert DEFAULT_ROOM < 0.5
    monkeypatch.setattr(fast_network, "CATEGORY_INDEXES_ROOM", DEFAULT_ROOM)
    _far_recall(service)
    assert _built(service) == {}
    assert service.recall(QUERY, namespaces=[NAMESPACE], flt=FAR, reinforce=False).exact_scan


def test_a_how_question_searches_the_procedures_own_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service = open_filled(tmp_path, SIZE, far="procedure", category_indexes=8)
    try:
        vector = service.embedder.embed_query(QUERY)  # the vector the near half lies next to
        question = "how do we plan the quarterly meeting"
        before = service.recall(question, namespaces=[NAMESPACE], vector=vector, reinforce=False)
        assert _built(service) == {"procedure": SIZE // 2}
        network = service.keeper.network
        with network.reading():
            index = network.category_index("procedure")
        asked = _searches(monkeypatch, index)
        after = service.recall(question, namespaces=[NAMESPACE], vector=vector, reinforce=False)
        assert asked == [100]
        assert after.hits[0].memory.category == "procedure"  # procedures first, as before
        assert [hit.memory.memory_id for hit in after.hits] == [hit.memory.memory_id for hit in before.hits]
    finally:
        service.close()
