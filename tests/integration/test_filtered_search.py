"""Past a short plain search, the semantic channel searches HNSW keeping only what passes
(``VectorIndex.search_among``) or scans it, instead of widening and then scanning. Real
SQLite, real HNSW; half the namespace lies next to the query and fails the filter, the
other half passes it (``tests/huge_namespace.py``). The ``filled`` service makes no plain
search for the filter (``widest`` below the pool), so it takes the filtered search."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.procedures import PROCEDURE
from engine.records import Reach, Scope, Visibility
from engine.service import MemoryService
from tests.huge_namespace import FAR, NAMESPACE, QUERY, open_filled

# 6,000 pass FAR: past EXACT_DIRECT, and the filtered search costs less than the scan
# (even with rough cosines first: recall.ROUGH_SCAN_US_PER_ROW)
SIZE = 12_000


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryService]:
    service = open_filled(tmp_path_factory.mktemp("filtered"), SIZE, widest=64)
    yield service
    service.close()


def _calls(monkeypatch: pytest.MonkeyPatch, target: Any, name: str) -> list[tuple[Any, ...]]:
    """The arguments of every call of ``target.name`` from now on."""
    calls: list[tuple[Any, ...]] = []
    method = getattr(target, name)
    monkeypatch.setattr(target, name, lambda *args: calls.append(args) or method(*args))
    return calls


def test_a_filter_too_narrow_for_a_plain_search_is_searched_once_among_what_passes(
    filled: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = filled.keeper.index
    plain, among = _calls(monkeypatch, index, "search_handles"), _calls(monkeypatch, index, "search_among")
    result = filled.recall(QUERY, namespaces=[NAMESPACE], flt=FAR, reinforce=False)
    # no plain search, one filtered one among the 6,000 that pass
    assert plain == [] and [(k, len(h)) for _, k, h in among] == [(100, SIZE // 2)]
    assert not result.exact_scan
    assert len(result.hits) == 10 and {hit.memory.category for hit in result.hits} == {"far"}


def test_the_filtered_search_finds_the_best_of_what_passes(filled: MemoryService) -> None:
    net, now = filled.keeper.network, filled._clock()
    vector = filled.embedder.embed_query(QUERY)
    sight = Scope.whole([NAMESPACE])
    with net.reading():
        rows, cosines = filled.recaller.nearest(net, vector, sight, FAR, now, pool=10)
        every = net.rows_in([NAMESPACE])
        passing = every[net.passes(sight, FAR, now, every)]
        exact = net.cosines(vector, passing)
    assert len(passing) == SIZE // 2 and set(rows.tolist()) <= set(passing.tolist()) and len(rows) == 10
    assert float(cosines.max()) == pytest.approx(float(exact.max()), abs=1e-3)  # the best one, found
    # Approximate, as any HNSW search: on this cheaply built graph (m=8, ef_construction=32)
    # over noise vectors, 8 of the exact ten best were found when this was written; a
    # search that ignored the filter would find none of them.
    best = set(passing[np.argsort(-exact)[:10]].tolist())
    assert len(best & set(rows.tolist())) >= 7


def test_the_filtered_search_never_returns_what_the_caller_does_not_see(
    filled: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The passing memories nearest the query turn private to another agent.
    net, now = filled.keeper.network, filled._clock()
    vector = filled.embedder.embed_query(QUERY)
    with net.reading():
        every = net.rows_in([NAMESPACE])
        passing = every[net.passes(Scope.whole([NAMESPACE]), FAR, now, every)]
        nearest = passing[np.argsort(-net.cosines(vector, passing))[:30]]
        hidden = net.ids_of(nearest)
    for memory in filled.store.get_many(Scope.whole([NAMESPACE]), hidden, FAR, now):
        private = replace(memory, visibility=Visibility.PRIVATE, actor="agent-b", version=memory.version + 1)
        filled.store.update(private, None, changed_by=None, reason="made private")
    filled.keeper.catch_up()
    among = _calls(monkeypatch, filled.keeper.index, "search_among")
    sight = Scope.of({NAMESPACE: Reach.MEMBER}, "agent-a")
    result = filled.recall(QUERY, namespaces=[NAMESPACE], flt=FAR, scope=sight, reinforce=False)
    assert len(among) == 1  # and the search was not even offered the hidden ones
    assert not set(filled.keeper.index.handles(hidden).tolist()) & set(among[0][2].tolist())
    assert len(result.hits) == 10 and not {hit.memory.memory_id for hit in result.hits} & set(hidden)
    assert {hit.memory.category for hit in result.hits} == {"far"}
    # the whole namespace's view still finds them: they were hidden by sight, not lost
    whole = filled.recall(QUERY, namespaces=[NAMESPACE], flt=FAR, top_k=30, reinforce=False)
    assert set(hidden) & {hit.memory.memory_id for hit in whole.hits}


def test_the_handles_kept_follow_replaced_vectors_and_a_rebuilt_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = open_filled(tmp_path, SIZE, widest=64)
    try:
        net, now = service.keeper.network, service._clock()
        every = net.rows_in([NAMESPACE])
        far = every[net.passes(Scope.whole([NAMESPACE]), FAR, now, every)]

        def current() -> bool:
            index = service.keeper.index
            with net.reading():
                return net.handles(index, far).tolist() == index.handles(net.ids_of(far)).tolist()

        assert current()
        asked = _calls(monkeypatch, service.keeper.index, "handles")
        assert current() and len(asked) == 1  # kept: only the check's own look-up asked the index
        # A far memory gets a vector next to the query: its old handle dies, the new one is found.
        moved = net.id_of(int(far[0]))
        (memory,) = service.store.get_many(Scope.whole([NAMESPACE]), [moved], FAR, now)
        vector = service.embedder.embed_query(QUERY)
        service.store.update(replace(memory, version=memory.version + 1), vector, changed_by=None, reason="moved")
        service.keeper.catch_up()
        assert current()
        result = service.recall(QUERY, namespaces=[NAMESPACE], flt=FAR, reinforce=False)
        assert result.hits[0].memory.memory_id == moved and not result.exact_scan
        service.keeper.rebuild()  # another index, other handles
        assert current()
    finally:
        service.close()


def test_a_filter_none_of_a_plain_search_passes_is_scanned_not_searched_among(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With a plain search first: its 100 neighbours all lie next to the query and fail, and
    # so do the 256 of the widest search allowed here. A filtered search would walk out of
    # that neighbourhood before keeping anything.
    service = open_filled(tmp_path, SIZE)
    try:
        index = service.keeper.index
        plain, among = _calls(monkeypatch, index, "search_handles"), _calls(monkeypatch, index, "search_among")
        result = service.recall(QUERY, namespaces=[NAMESPACE], flt=FAR, reinforce=False)
        assert [k for _, k in plain] == [100, 256] and among == []  # the pool, then as wide as allowed
        assert result.exact_scan and {hit.memory.category for hit in result.hits} == {"far"}
    finally:
        service.close()


def test_a_how_query_whose_whole_ranking_met_no_procedure_does_not_search_its_pool_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Half the namespace is procedures, all far from the query. "How …" ranks twice: the
    # whole ranking, then the one narrowed to procedures (recall._first_of). The whole one's
    # search met no procedure among its neighbours, so the narrowed one does not search
    # that many again: it goes on as after a short search, to the one wide search allowed
    # (256), then the scan.
    service = open_filled(tmp_path, SIZE, far=PROCEDURE)
    try:
        plain = _calls(monkeypatch, service.keeper.index, "search_handles")
        vector = service.embedder.embed_query(QUERY)  # the vector the near half lies next to
        question = "how do we plan the quarterly meeting"
        result = service.recall(question, namespaces=[NAMESPACE], vector=vector, reinforce=False)
        assert [k for _, k in plain] == [service.config.recall.min_candidates, 256]
        assert result.hits[0].memory.category == PROCEDURE  # procedures first, found by the scan
    finally:
        service.close()
