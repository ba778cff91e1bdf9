"""MemoryService end to end: real SQLite file, real HNSW index, the hashing embedder, frozen time."""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine import entities, records, text
from engine.adapters import DB_FILE, INDEX_DIR
from engine.adapters.time_worker import WorkerTimeExpressions
from engine.config import load_config
from engine.errors import InvalidInput, MemoryNotFound, StoreError
from engine.ports import Vector
from engine.recall import EXACT_DIRECT
from engine.records import (
    Memory,
    MemoryDraft,
    MemoryFilter,
    MemoryPatch,
    Scope,
    Source,
    Status,
    new_memory_id,
)
from engine.service import MemoryService
from tests.conftest import HashingEmbedder

OpenService = Callable[..., MemoryService]
NS = "user-1"
OTHER_NS = "user-2"


def draft(content: str, **fields: Any) -> MemoryDraft:
    fields.setdefault("namespace", NS)
    return MemoryDraft(content=content, **fields)


def recalled(service: MemoryService, query: str, **kwargs: Any) -> list[str]:
    kwargs.setdefault("namespaces", [NS])
    kwargs.setdefault("reinforce", False)
    return [hit.memory.memory_id for hit in service.recall(query, **kwargs).hits]


def fresh(service: MemoryService, memory_id: str) -> Memory:
    return service.get(NS, memory_id)


# --- save and dedup ---------------------------------------------------------------------------


def test_save_creates_a_memory_with_the_configured_defaults(service: MemoryService, clock: Any) -> None:
    result = service.save(draft("  Alice drinks green tea  ", entities=(" Alice ",), source=Source.INFERENCE))
    assert result.created
    assert result.deduplicated_by is None
    m = result.memory
    assert m.content == "Alice drinks green tea"
    assert m.entities == ("Alice",)
    assert m.base_score == 0.4
    assert m.version == 1
    assert m.status is Status.ACTIVE
    assert m.created_at == m.updated_at == m.last_accessed_at == clock.now
    assert m.embedding_model == service.embedder.name
    assert fresh(service, m.memory_id) == m
    assert recalled(service, "green tea") == [m.memory_id]


@pytest.mark.parametrize(
    "variant", ["alice drinks green tea", "  ALICE   drinks green\ttea ", "Ａｌｉｃｅ drinks green tea"]
)
def test_same_content_again_reinforces_instead_of_adding(service: MemoryService, variant: str) -> None:
    first = service.save(draft("Alice drinks green tea")).memory
    again = service.save(draft(variant))
    assert not again.created
    assert again.deduplicated_by == "digest"
    assert again.memory.memory_id == first.memory_id
    stored = fresh(service, first.memory_id)
    assert stored.access_count == 1
    assert stored.base_score == pytest.approx(first.base_score + 0.1)
    service.save(draft(variant))
    assert fresh(service, first.memory_id).access_count == 2
    assert len(service.list_page([NS], MemoryFilter()).items) == 1


def test_same_content_in_another_namespace_is_a_new_memory(service: MemoryService) -> None:
    first = service.save(draft("Alice drinks green tea")).memory
    other = service.save(draft("Alice drinks green tea", namespace=OTHER_NS))
    assert other.created
    assert other.memory.memory_id != first.memory_id


NEAR_A = "alice keeps her spare house key under the blue flower pot beside the back door of the cottage"
NEAR_B = "alice keeps her spare house key under the blue flower pot beside the back door of the old cottage"


def _cosine(service: MemoryService, a: str, b: str) -> float:
    va, vb = service.embedder.embed_documents([a, b])
    return float(va @ vb)


def test_near_duplicate_with_shared_entities_reinforces_the_existing_memory(service: MemoryService) -> None:
    assert _cosine(service, NEAR_A, NEAR_B) >= 0.95
    first = service.save(draft(NEAR_A, entities=("Alice", "cottage"))).memory
    again = service.save(draft(NEAR_B, entities=("ALICE",)))
    assert not again.created
    assert again.deduplicated_by == "similar"
    assert again.memory.memory_id == first.memory_id
    assert again.similarity is not None and again.similarity >= 0.95
    assert fresh(service, first.memory_id).access_count == 1
    assert len(service.list_page([NS], MemoryFilter()).items) == 1


def test_near_duplicate_about_other_entities_is_a_new_memory(service: MemoryService) -> None:
    first = service.save(draft(NEAR_A, entities=("Alice",))).memory
    again = service.save(draft(NEAR_B, entities=("Bob",)))
    assert again.created
    assert again.memory.memory_id != first.memory_id
    assert fresh(service, first.memory_id).access_count == 0


def test_shared_entities_without_close_content_is_a_new_memory(service: MemoryService) -> None:
    other = "alice plays chess on sundays"
    assert _cosine(service, NEAR_A, other) < 0.95
    service.save(draft(NEAR_A, entities=("Alice",)))
    assert service.save(draft(other, entities=("Alice",))).created


class BlindToChinese(HashingEmbedder):
    """Like MiniLM, reads every Chinese character as the same unknown token."""

    def _vector(self, text: str) -> Vector:
        return super()._vector(re.sub(r"[\u4e00-\u9fff]", "", text) + " unk")


def test_a_close_vector_with_other_words_is_not_a_duplicate(open_svc: OpenService) -> None:
    service = open_svc(embedder=BlindToChinese())
    roast = service.save(draft("Lisa: 今天晚饭有我的最爱，烤鸡！", entities=("Lisa",)))
    pizza = service.save(draft("Lisa: 今天晚饭吃什么呢？我想吃披萨！", entities=("Lisa",)))
    assert (
        service.embedder.embed_query(roast.memory.content) @ service.embedder.embed_query(pizza.memory.content) > 0.99
    )
    assert roast.created and pizza.created
    again = service.save(draft("Lisa: 今天晚饭吃什么呢？我好想吃披萨！", entities=("Lisa",)))
    assert (again.created, again.deduplicated_by, again.memory.memory_id) == (False, "similar", pizza.memory.memory_id)


def test_batch_save_deduplicates_within_the_batch(service: MemoryService) -> None:
    results = service.save_batch(
        [
            draft("Bob likes jazz"),
            draft("bob LIKES   jazz"),
            draft(NEAR_A, entities=("Alice",)),
            draft(NEAR_B, entities=("alice",)),
            draft("Carol moved to Lisbon"),
        ]
    )
    assert [r.created for r in results] == [True, False, True, False, True]
    assert results[1].deduplicated_by == "digest"
    assert results[1].memory.memory_id == results[0].memory.memory_id
    assert results[3].deduplicated_by == "similar"
    assert results[3].memory.memory_id == results[2].memory.memory_id
    assert fresh(service, results[0].memory.memory_id).access_count == 1
    assert fresh(service, results[2].memory.memory_id).access_count == 1
    assert len(service.list_page([NS], MemoryFilter()).items) == 3
    assert len(service.keeper.index) == 3


# --- update and delete -------------------------------------------------------------------------


def test_update_writes_version_two_and_re_embeds(service: MemoryService, clock: Any) -> None:
    v1 = service.save(draft("the meeting is on monday")).memory
    clock.advance(hours=1)
    v2 = service.update(NS, v1.memory_id, MemoryPatch(content="the standup moved to friday"), actor="agent-x")
    assert v2.version == 2
    assert v2.content == "the standup moved to friday"
    assert v2.updated_at == clock.now
    assert v2.created_at == v1.created_at
    assert fresh(service, v1.memory_id) == v2
    stored = service.store.vectors([v1.memory_id], service.embedder.name)[v1.memory_id]
    np.testing.assert_allclose(stored, service.embedder.embed_documents([v2.content])[0], atol=1e-6)
    assert recalled(service, "standup friday") == [v1.memory_id]
    history = service.history(NS, v1.memory_id)
    assert [(v.version, v.record.content) for v in history] == [
        (1, "the meeting is on monday"),
        (2, "the standup moved to friday"),
    ]
    assert history[1].changed_by == "agent-x"


def test_update_without_new_content_keeps_the_vector(service: MemoryService) -> None:
    m = service.save(draft("the meeting is on monday")).memory
    before = service.store.vectors([m.memory_id], service.embedder.name)[m.memory_id]
    updated = service.update(NS, m.memory_id, MemoryPatch(importance=0.9, metadata={"room": "4B"}))
    assert (updated.importance, dict(updated.metadata), updated.version) == (0.9, {"room": "4B"}, 2)
    after = service.store.vectors([m.memory_id], service.embedder.name)[m.memory_id]
    np.testing.assert_array_equal(before, after)


def test_update_of_an_unknown_memory_is_not_found(service: MemoryService) -> None:
    m = service.save(draft("a memory")).memory
    with pytest.raises(MemoryNotFound):
        service.update(NS, new_memory_id(), MemoryPatch(content="x"))
    with pytest.raises(MemoryNotFound):
        service.update(OTHER_NS, m.memory_id, MemoryPatch(content="x"))
    assert fresh(service, m.memory_id) == m


def test_soft_delete_hides_the_memory_but_keeps_its_history(service: MemoryService) -> None:
    gone = service.save(draft("the locker code is 4711")).memory
    kept = service.save(draft("the gym opens at six")).memory
    deleted = service.delete(NS, gone.memory_id, actor="agent-x").memory
    assert deleted.status is Status.DELETED
    with pytest.raises(MemoryNotFound):
        service.get(NS, gone.memory_id)
    assert service.get(NS, gone.memory_id, include_deleted=True).status is Status.DELETED
    assert gone.memory_id not in recalled(service, "locker code 4711")
    assert [m.memory_id for m in service.list_page([NS], MemoryFilter()).items] == [kept.memory_id]
    assert [v.reason for v in service.history(NS, gone.memory_id)] == ["created", "deleted"]
    assert gone.memory_id not in service.keeper.index
    with pytest.raises(MemoryNotFound):
        service.delete(NS, gone.memory_id)
    with pytest.raises(MemoryNotFound):
        service.update(NS, gone.memory_id, MemoryPatch(content="back"))
    # The same content can be saved again as a new memory.
    assert service.save(draft("the locker code is 4711")).created


def test_hard_delete_purges_everything(service: MemoryService) -> None:
    m = service.save(draft("the locker code is 4711")).memory
    service.delete(NS, m.memory_id, hard=True)
    with pytest.raises(MemoryNotFound):
        service.get(NS, m.memory_id, include_deleted=True)
    with pytest.raises(MemoryNotFound):
        service.history(NS, m.memory_id)
    assert service.store.vectors([m.memory_id], service.embedder.name) == {}
    assert recalled(service, "locker code 4711") == []
    assert len(service.keeper.index) == 0
    with pytest.raises(MemoryNotFound):
        service.delete(NS, m.memory_id, hard=True)


def test_hard_delete_of_a_soft_deleted_memory_purges_it(service: MemoryService) -> None:
    m = service.save(draft("the locker code is 4711")).memory
    service.delete(NS, m.memory_id)
    service.delete(NS, m.memory_id, hard=True)
    assert service.store.get(Scope.whole([NS]), m.memory_id) is None


def test_delete_in_another_namespace_is_not_found(service: MemoryService) -> None:
    m = service.save(draft("the locker code is 4711")).memory
    with pytest.raises(MemoryNotFound):
        service.delete(OTHER_NS, m.memory_id, hard=True)
    assert fresh(service, m.memory_id) == m


# --- recall ------------------------------------------------------------------------------------


def test_recall_applies_hard_filters(service: MemoryService, clock: Any) -> None:
    day = timedelta(days=1)
    saved = service.save_batch(
        [
            draft("tea fact from the user", category="fact", created_at=clock.now - 30 * day),
            draft(
                "tea preference from a tool",
                category="preference",
                source=Source.TOOL_RESULT,
                created_at=clock.now - 20 * day,
            ),
            draft(
                "tea event with metadata",
                category="event",
                metadata={"project": "apollo", "prio": 2},
                created_at=clock.now - 10 * day,
            ),
            draft("tea task in a session", category="task", session_id="s-9", created_at=clock.now - 1 * day),
        ]
    )
    fact, pref, event, task = (r.memory.memory_id for r in saved)

    def matching(flt: MemoryFilter) -> set[str]:
        return set(recalled(service, "tea", flt=flt))

    assert matching(MemoryFilter()) == {fact, pref, event, task}
    assert matching(MemoryFilter(categories=("fact", "task"))) == {fact, task}
    assert matching(MemoryFilter(sources=(Source.TOOL_RESULT,))) == {pref}
    assert matching(MemoryFilter(metadata={"project": "apollo"})) == {event}
    assert matching(MemoryFilter(metadata={"project": "apollo", "prio": 3})) == set()
    assert matching(MemoryFilter(session_id="s-9")) == {task}
    assert matching(MemoryFilter(created_after=clock.now - 15 * day)) == {event, task}
    assert matching(MemoryFilter(created_after=clock.now - 25 * day, created_before=clock.now - 5 * day)) == {
        pref,
        event,
    }


def test_recall_leaves_out_expired_memories(service: MemoryService, clock: Any) -> None:
    lasting = service.save(draft("parking is on level 2")).memory
    brief = service.save(draft("parking is on level 3 today", expire_at=clock.now + timedelta(hours=8))).memory
    assert set(recalled(service, "parking level")) == {lasting.memory_id, brief.memory_id}
    clock.advance(hours=9)
    assert recalled(service, "parking level") == [lasting.memory_id]
    assert set(recalled(service, "parking level", flt=MemoryFilter(include_expired=True))) == {
        lasting.memory_id,
        brief.memory_id,
    }


def test_recall_is_scoped_to_its_namespaces(service: MemoryService) -> None:
    mine = service.save(draft("my bank is in the old town")).memory
    theirs = service.save(draft("my bank is in the old town", namespace=OTHER_NS)).memory
    assert recalled(service, "bank old town") == [mine.memory_id]
    assert recalled(service, "bank old town", namespaces=[OTHER_NS]) == [theirs.memory_id]
    assert recalled(service, "bank old town", namespaces=["user-3"]) == []
    assert set(recalled(service, "bank old town", namespaces=[NS, OTHER_NS])) == {mine.memory_id, theirs.memory_id}


def test_recall_prefers_the_fresher_of_two_equally_similar_memories(service: MemoryService, clock: Any) -> None:
    old = service.save(draft("call the plumber about the leak", category="task")).memory
    clock.advance(days=14)
    new = service.save(draft("call the plumber about the leak", category="task", namespace=OTHER_NS)).memory
    result = service.recall("plumber leak", namespaces=[NS, OTHER_NS], reinforce=False)
    assert [h.memory.memory_id for h in result.hits] == [new.memory_id, old.memory_id]
    stale, current = result.hits[1].breakdown.decay.value, result.hits[0].breakdown.decay.value
    assert stale == pytest.approx(0.6 / 4)  # two half-lives of a task
    assert current == pytest.approx(0.6)


def test_a_very_selective_filter_still_finds_its_memory(
    open_svc: OpenService, data_dir: Path, make_embedder: Any
) -> None:
    # Widening stops at 256 candidates here, well below the 3000 memories, so the
    # one memory that passes the filter (and shares no word with the query) can
    # only be found by the exact scan of the filtered set. 3000 distinct texts
    # need more hash buckets than the default fake's 64.
    service = open_svc(
        config=load_config(env={}, data_dir=data_dir, recall={"max_widened_candidates": 256}),
        embedder=make_embedder(dim=256),
    )
    rng = np.random.default_rng(7)
    drafts = [
        draft("coffee note " + " ".join(f"w{n}" for n in rng.choice(5000, 5, replace=False))) for _ in range(2999)
    ]
    for start in range(0, len(drafts), 500):
        assert all(r.created for r in service.save_batch(drafts[start : start + 500]))
    target = service.save(draft("zebra quantum umbrella", category="procedure")).memory
    assert len(service.keeper.index) == 3000
    assert _cosine(service, "coffee", target.content) < 0.1

    result = service.recall("coffee", namespaces=[NS], flt=MemoryFilter(categories=("procedure",)), reinforce=False)
    assert [h.memory.memory_id for h in result.hits] == [target.memory_id]
    assert result.exact_scan


def test_a_narrow_filter_is_scanned_without_a_search_and_a_wide_one_searched_once(
    open_svc: OpenService, data_dir: Path, make_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2,700 memories, past EXACT_DIRECT: 100 procedures, 2,600 notes.
    service = open_svc(config=load_config(env={}, data_dir=data_dir), embedder=make_embedder(dim=256))
    rng = np.random.default_rng(11)

    def text(kind: str) -> str:
        return f"{kind} " + " ".join(f"w{n}" for n in rng.choice(5000, 5, replace=False))

    notes = [draft(text("note")) for _ in range(2600)] + [draft(text("step"), category="procedure") for _ in range(100)]
    for start in range(0, len(notes), 500):
        service.save_batch(notes[start : start + 500])
    assert len(service.keeper.index) == 2700 > EXACT_DIRECT
    searched: list[int] = []
    search = service.keeper.index.search_handles  # the semantic channel's plain search
    monkeypatch.setattr(service.keeper.index, "search_handles", lambda v, k: searched.append(k) or search(v, k))

    narrow = service.recall("step w1", namespaces=[NS], flt=MemoryFilter(categories=("procedure",)), reinforce=False)
    assert searched == []  # about 100 pass: the filtered set is scanned, no search first
    assert narrow.exact_scan and len(narrow.hits) == 10
    assert {h.memory.category for h in narrow.hits} == {"procedure"}

    wide = service.recall("note w1", namespaces=[NS], flt=MemoryFilter(categories=("fact",)), reinforce=False)
    assert searched == [service.config.recall.min_candidates]  # nearly all pass: one search of the pool
    assert not wide.exact_scan and len(wide.hits) == 10


def test_a_how_question_recalls_procedures_first_only_where_a_procedure_is_held(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    service.save(draft("the release checklist lives in the wiki"))
    service.save(draft("publish a release: tag it, build it, upload it", category="procedure", namespace=OTHER_NS))
    rankings: list[tuple[str, ...]] = []
    reads: list[list[str]] = []
    ranking, get_many = service.recaller._ranking, service.store.get_many_and_seq
    monkeypatch.setattr(
        service.recaller, "_ranking", lambda n, q, **kw: rankings.append(q.flt.categories) or ranking(n, q, **kw)
    )
    monkeypatch.setattr(
        service.store, "get_many_and_seq", lambda sight, ids, *a: reads.append(list(ids)) or get_many(sight, ids, *a)
    )

    plain = service.recall("how do I publish a release", namespaces=[NS], reinforce=False)
    assert rankings == [()]  # no procedure in NS: one ranking, its hits as they are
    assert [h.memory.category for h in plain.hits] == ["fact"]
    assert len(reads) == 1

    rankings.clear()
    reads.clear()
    both = service.recall("how do I publish a release", namespaces=[NS, OTHER_NS], reinforce=False)
    assert rankings == [(), ("procedure",)]
    assert [h.memory.category for h in both.hits] == ["procedure", "fact"]
    assert len(reads) == 1  # the two rankings' hits in one read of the store
    assert sorted(reads[0]) == sorted(h.memory.memory_id for h in both.hits)


def test_recall_reinforces_the_top_five_by_rank(service: MemoryService) -> None:
    words = ["crema", "grinder", "beans", "roast", "tamper", "portafilter", "kettle"]
    for n in range(1, 8):
        service.save(draft("espresso " + " ".join(words[:n])))
    result = service.recall("espresso", namespaces=[NS], top_k=7)
    assert len(result.hits) == 7
    service.flush()
    expected_bonus = [0.1, 0.05, 0.05, 0.05, 0.05, 0.0, 0.0]
    for hit, bonus in zip(result.hits, expected_bonus, strict=True):
        after = fresh(service, hit.memory.memory_id)
        assert after.base_score == pytest.approx(0.6 + bonus)
        assert after.access_count == (1 if bonus else 0)
        assert after.version == 1


def test_recall_without_reinforcement_changes_nothing(service: MemoryService) -> None:
    m = service.save(draft("espresso needs fine beans")).memory
    service.recall("espresso", namespaces=[NS], reinforce=False)
    service.flush()
    assert fresh(service, m.memory_id) == m


def test_edits_beside_recalls_lose_no_reinforcement(service: MemoryService) -> None:
    target = service.save(draft("the wifi password is on the fridge")).memory
    service.save(draft("the spare bulbs are in the garage"))
    start = threading.Barrier(9)

    def recaller() -> None:
        start.wait()
        for _ in range(10):
            service.recall("wifi password", namespaces=[NS], top_k=1)

    def editor() -> None:
        start.wait()
        for n in range(20):
            service.update(NS, target.memory_id, MemoryPatch(metadata={"edit": n}))

    with ThreadPoolExecutor(max_workers=9) as pool:
        for future in [pool.submit(recaller) for _ in range(8)] + [pool.submit(editor)]:
            future.result()
    service.flush()
    after = fresh(service, target.memory_id)
    assert after.access_count == 80
    assert after.version == 21 and after.metadata == {"edit": 19}


def test_concurrent_recalls_reinforce_exactly(service: MemoryService) -> None:
    target = service.save(draft("the wifi password is on the fridge")).memory
    service.save(draft("the spare bulbs are in the garage"))
    service.save(draft("the dog eats at seven"))
    start = threading.Barrier(16)

    def worker() -> list[list[str]]:
        start.wait()
        return [
            [h.memory.memory_id for h in service.recall("wifi password", namespaces=[NS], top_k=1).hits]
            for _ in range(10)
        ]

    with ThreadPoolExecutor(max_workers=16) as pool:
        tops = [top for future in [pool.submit(worker) for _ in range(16)] for top in future.result()]
    assert tops == [[target.memory_id]] * 160
    service.flush()
    after = fresh(service, target.memory_id)
    assert after.access_count == 160
    assert after.base_score == 1.0
    assert service.reinforcer.failures == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.recall("   ", namespaces=[NS]),
        lambda s: s.recall("tea", namespaces=[NS], top_k=0),
        lambda s: s.recall("tea", namespaces=[NS], top_k=101),
        lambda s: s.recall("tea", namespaces=[]),
        lambda s: s.recall("tea", namespaces=["bad namespace!"]),
        lambda s: s.recall("tea", namespaces=[NS], flt=MemoryFilter(categories=("gossip",))),
        lambda s: s.recall("tea", namespaces=["user-1\n"]),
        lambda s: s.recall("tea", namespaces=[NS], flt=MemoryFilter(metadata={"a') OR 1=1 --": 1})),
        lambda s: s.recall("tea", namespaces=[NS], flt=MemoryFilter(metadata={"a": [1, 2]})),  # type: ignore[dict-item]
        lambda s: s.list_page([NS], MemoryFilter(metadata={"a\n": 1})),
        lambda s: s.list_page([NS], MemoryFilter(metadata={"a": {"b": 1}})),  # type: ignore[dict-item]
        lambda s: s.save(draft("tea", namespace="user-1\n")),
        lambda s: s.save(draft("tea", category="gossip")),
        lambda s: s.save(draft("   ")),
        lambda s: s.save(draft("tea", base_score=1.5)),
        lambda s: s.update(NS, "any", MemoryPatch()),
    ],
)
def test_requests_the_engine_cannot_act_on_are_invalid_input(service: MemoryService, call: Any) -> None:
    # Refused whether or not the namespace holds anything a filter could reach.
    with pytest.raises(InvalidInput):
        call(service)
    service.save(draft("tea with lemon"))
    with pytest.raises(InvalidInput):
        call(service)


def test_save_refuses_a_creation_time_in_the_future(service: MemoryService, clock: Any) -> None:
    with pytest.raises(InvalidInput):
        service.save(draft("tea", created_at=clock.now + timedelta(minutes=1)))


# --- restart, crash and model change ------------------------------------------------------------


def _save_some(service: MemoryService) -> dict[str, str]:
    contents = [
        "the boiler service is due in march",
        "grandma's birthday is on june 4",
        "the car insurance renews in october",
        "the passport expires next spring",
        "the cat needs her vaccine in may",
    ]
    return {service.save(draft(c)).memory.memory_id: c for c in contents}


def _assert_recall_finds(service: MemoryService, memories: dict[str, str]) -> None:
    for memory_id, content in memories.items():
        assert recalled(service, content, top_k=1) == [memory_id]


def test_restart_loads_the_saved_index(open_svc: OpenService) -> None:
    first = open_svc()
    memories = _save_some(first)
    gone = next(iter(memories))
    first.delete(NS, gone)
    del memories[gone]
    first.close()

    second = open_svc()
    assert not second.keeper.rebuilt_at_start
    assert len(second.keeper.index) == 4
    assert second.keeper.is_current()
    _assert_recall_finds(second, memories)
    assert gone not in recalled(second, "boiler service march")


def test_writes_the_index_never_saw_are_caught_up_at_start(open_svc: OpenService, embedder: Any) -> None:
    first = open_svc()
    memories = _save_some(first)
    edited, purged = list(memories)[:2]
    # Write through the store behind the index's back, as a crash after commit
    # (or another replica) leaves it; close() then saves an index that lags.
    now = first.store.get(Scope.whole([NS]), edited)
    assert now is not None
    late = Memory(
        memory_id=new_memory_id(),
        namespace=NS,
        content="the roof was repaired in august",
        category="event",
        base_score=0.6,
        importance=0.6,
        source=Source.USER_INPUT,
        created_at=now.created_at,
        updated_at=now.created_at,
        last_accessed_at=now.created_at,
        embedding_model=embedder.name,
        embedding_version=embedder.version,
    )
    first.store.insert([late], [embedder.embed_documents([late.content])[0]], changed_by=None)
    new_text = "the boiler was replaced in april"
    first.store.update(
        now.evolve(content=new_text, version=2), embedder.embed_documents([new_text])[0], changed_by=None, reason="x"
    )
    first.store.purge(NS, purged)
    first.close()

    second = open_svc()
    assert not second.keeper.rebuilt_at_start
    assert second.keeper.is_current()
    del memories[purged]
    memories[edited] = new_text
    memories[late.memory_id] = late.content
    assert len(second.keeper.index) == len(memories)
    _assert_recall_finds(second, memories)


@pytest.mark.parametrize("damage", ["delete", "truncate", "stale-meta"])
def test_a_missing_or_torn_index_is_rebuilt_from_the_store(open_svc: OpenService, data_dir: Path, damage: str) -> None:
    first = open_svc()
    memories = _save_some(first)
    first.close()
    index_dir = data_dir / INDEX_DIR
    if damage == "delete":
        for path in index_dir.iterdir():
            path.unlink()
    elif damage == "truncate":
        graph = index_dir / "hnsw.bin"
        graph.write_bytes(graph.read_bytes()[:100])
    else:
        (index_dir / "hnsw.meta.json").write_text('{"format": 1}', encoding="utf-8")

    second = open_svc()
    assert second.keeper.rebuilt_at_start
    assert len(second.keeper.index) == len(memories)
    _assert_recall_finds(second, memories)
    second.close()
    # The rebuilt index was saved: the next start loads it.
    assert not open_svc().keeper.rebuilt_at_start


def _copy_db(source_dir: Path, target_dir: Path) -> None:
    target_dir.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        (target_dir / (DB_FILE + suffix)).unlink(missing_ok=True)
        if (source_dir / (DB_FILE + suffix)).exists():
            shutil.copy(source_dir / (DB_FILE + suffix), target_dir / (DB_FILE + suffix))


def test_an_index_ahead_of_a_restored_store_is_rebuilt(open_svc: OpenService, data_dir: Path, tmp_path: Path) -> None:
    first = open_svc()
    memories = _save_some(first)
    first.close()
    _copy_db(data_dir, tmp_path / "backup")
    # After the backup: one memory deleted, one added, so the index holds as many
    # vectors as the backup holds memories, and has applied changes the backup never saw.
    second = open_svc()
    deleted_later = next(iter(memories))
    second.delete(NS, deleted_later)
    ghost = second.save(draft("a memory only the lost store had")).memory
    second.close()
    _copy_db(tmp_path / "backup", data_dir)

    third = open_svc()
    assert third.keeper.rebuilt_at_start
    _assert_recall_finds(third, memories)
    assert ghost.memory_id not in recalled(third, "a memory only the lost store had")
    # Changes after the restore reuse sequence numbers the stale index had applied;
    # they must still reach the index.
    later = third.save(draft("the chimney was swept in november")).memory
    assert recalled(third, "the chimney was swept in november", top_k=1) == [later.memory_id]


def test_a_second_service_on_the_same_data_dir_is_refused(open_svc: OpenService) -> None:
    first = open_svc()
    with pytest.raises(StoreError):
        open_svc()
    # The refused open changed nothing for the first.
    m = first.save(draft("still works")).memory
    first.close()
    second = open_svc()
    assert second.get(NS, m.memory_id) == m


def test_a_new_embedding_model_re_embeds_every_memory_at_start(open_svc: OpenService, make_embedder: Any) -> None:
    first = open_svc()
    memories = _save_some(first)
    first.close()

    other = make_embedder("fake-other", dim=48)
    second = open_svc(embedder=other)
    assert second.keeper.rebuilt_at_start
    assert other.documents_embedded == len(memories)
    stored = second.store.vectors(list(memories), "fake-other")
    assert set(stored) == set(memories)
    assert all(v.shape == (48,) for v in stored.values())
    _assert_recall_finds(second, memories)
    second.close()

    third = open_svc(embedder=make_embedder("fake-other", dim=48))
    assert not third.keeper.rebuilt_at_start
    _assert_recall_finds(third, memories)


def test_a_memory_without_a_vector_for_the_current_model_is_embedded_on_catch_up(
    open_svc: OpenService, embedder: Any
) -> None:
    first = open_svc()
    memories = _save_some(first)
    template = first.store.get(Scope.whole([NS]), next(iter(memories)))
    assert template is not None
    imported = template.evolve(
        memory_id=new_memory_id(),
        content="the piano was tuned in january",
        embedding_model="legacy-model",
        source=Source.IMPORT,
    )
    first.store.insert([imported], [np.ones(3, dtype=np.float32) / np.sqrt(3)], changed_by=None)
    first.close()

    second = open_svc()
    assert imported.memory_id in second.store.vectors([imported.memory_id], embedder.name)
    memories[imported.memory_id] = imported.content
    _assert_recall_finds(second, memories)


def test_an_edit_re_extracts_entities_it_extracted_and_keeps_the_clients_own(service: MemoryService) -> None:
    moved = service.save(MemoryDraft("Alice moved to Berlin last spring", namespace=NS)).memory
    assert "Berlin" in moved.entities
    edited = service.update(NS, moved.memory_id, MemoryPatch(content="Alice moved to Lisbon last spring"))
    assert "Lisbon" in edited.entities and "Berlin" not in edited.entities
    assert [m.memory_id for m in service.entity_memories(NS, "Lisbon")] == [moved.memory_id]
    assert service.entity_memories(NS, "Berlin") == []
    given = service.save(MemoryDraft("The launch slipped a week", namespace=NS, entities=("Project Kite",))).memory
    kept = service.update(NS, given.memory_id, MemoryPatch(content="The launch slipped two weeks"))
    assert kept.entities == ("Project Kite",)


def _await_language_data(deadline_s: float = 120.0) -> None:
    """Wait for the background loads ``open_service`` started (its "language-data" threads)."""
    for loader in [t for t in threading.enumerate() if t.name == "language-data"]:
        loader.join(timeout=deadline_s)


def _loaded(service: MemoryService, *, chinese: bool) -> bool:
    """Whether the background load of ``open_service`` loaded dateparser, and JioNLP when
    ``chinese``: here, or, where a worker process reads the times, dateparser here (for
    which texts to send) and JioNLP in the worker it starts."""
    _await_language_data()
    times: Any = service.times
    if isinstance(times, WorkerTimeExpressions):
        return times._inline._dateparser is not None and times._inline._jionlp is None and times._chinese == chinese
    return times._dateparser is not None and (times._jionlp is not None) == chinese


def test_the_text_libraries_load_in_the_background_once_the_service_is_open(open_svc: OpenService) -> None:
    english = open_svc()
    # No query asked: open_service started the load; no Chinese in the store, no JioNLP.
    assert _loaded(english, chinese=False)
    english.save(MemoryDraft("我喜欢喝绿茶", namespace="n"))
    english.close()
    chinese = open_svc()  # the same store, now holding Chinese
    assert chinese.keeper.network.holds_chinese()
    assert _loaded(chinese, chinese=True)


def test_a_close_waits_for_what_the_service_loads_in_the_background(
    open_svc: OpenService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process that ended while such a thread was inside a native import aborted, or
    # printed half a traceback ("Exception in thread"): `twinmem serve` stopped at once
    # after its start, about 1 run in 20.
    from engine import entities as entity_rules

    slow = entity_rules.extract_entities

    def slow_load(text: str, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.5)  # jieba's dictionary, in a store that holds Chinese
        return slow(text, *args, **kwargs)

    first = open_svc()
    first.save(MemoryDraft("我喜欢喝绿茶", namespace="n"))
    first.close()
    monkeypatch.setattr("engine.adapters.extract_entities", slow_load)
    service = open_svc()
    loading = [t for t in threading.enumerate() if t.name in ("language-data", "torch-import")]
    assert any(t.name == "language-data" and t.is_alive() for t in loading)
    service.close()
    assert not any(t.is_alive() for t in loading)


def test_without_the_time_signal_the_time_parsers_are_not_loaded(open_svc: OpenService, config: Any) -> None:
    service = open_svc(config=replace(config, fusion=replace(config.fusion, time=0.0)))
    service.recall("what did I say last week", namespaces=["n"])
    _await_language_data()
    times: Any = service.times
    assert isinstance(times, WorkerTimeExpressions)  # the default
    assert times._inline._dateparser is None and times._inline._jionlp is None and times.worker_pid is None


def forget_readings() -> None:
    """Drop the texts ``engine.text`` read under the other analysis: a process reads its
    last texts once (``_terms_of``, ``_wording_of``, ``_aligned_of``), and one release never
    changes its analysis while it runs, as this test does."""
    text._terms_of.cache_clear()
    text._wording_of.cache_clear()
    text._aligned_of.cache_clear()


def test_a_fast_network_saved_under_another_text_analysis_is_rebuilt(
    open_svc: OpenService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A release whose terms were the words unstemmed saved its fast network.
    monkeypatch.setattr(text, "analysis", lambda: "words unstemmed")
    monkeypatch.setattr(text, "_stem", lambda word: word)
    forget_readings()
    older = open_svc()
    saved = older.save(MemoryDraft("The user keeps running shoes by the door", namespace="u1"))
    older.close()
    # This release stems ("running" is "run"): the saved terms would never meet a query's.
    monkeypatch.undo()
    forget_readings()
    now = open_svc()
    assert now.keeper.network_rebuilt_at_start
    (hit,) = now.recall("running", namespaces=["u1"], top_k=1).hits
    assert hit.memory.memory_id == saved.memory.memory_id and hit.breakdown.lexical.value > 0
    now.close()
    again = open_svc()
    assert not again.keeper.network_rebuilt_at_start  # saved under this analysis: loaded


def test_entity_keys_made_by_other_rules_are_made_again(open_svc: OpenService, monkeypatch: pytest.MonkeyPatch) -> None:
    # A release whose alias table did not know "咖啡" as coffee keyed it as itself.
    monkeypatch.setattr(entities, "key_rules", lambda: "no coffee alias")
    monkeypatch.setattr(records, "canonical_key", lambda name: name.casefold())
    older = open_svc()
    saved = older.save(MemoryDraft("用户每天早上喝咖啡", namespace="u1", entities=("咖啡",)))
    assert older.entity_memories("u1", "coffee") == []
    older.close()
    # This release links it to "coffee": the keys the saved network holds are made again.
    monkeypatch.undo()
    now = open_svc()
    assert now.keeper.network_rebuilt_at_start
    assert [m.memory_id for m in now.entity_memories("u1", "coffee")] == [saved.memory.memory_id]
    assert [m.memory_id for m in now.entity_memories("u1", "咖啡")] == [saved.memory.memory_id]
    now.close()
    assert not open_svc().keeper.network_rebuilt_at_start  # saved under these rules: loaded


def test_entity_memories_fills_its_limit_when_a_hit_goes_before_it_is_read(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = [
        service.save(MemoryDraft(f"Trip {n} to Lisbon", namespace=NS, entities=("Lisbon",))).memory for n in range(4)
    ]
    newest_first = [m.memory_id for m in sorted(saved, key=lambda m: (m.created_at, m.memory_id), reverse=True)]
    read = service.store.get_many

    def deleting_first(*args: Any, **kwargs: Any) -> list[Memory]:
        monkeypatch.setattr(service.store, "get_many", read)
        service.delete(NS, newest_first[0])  # another writer, between the network and the read
        return read(*args, **kwargs)

    monkeypatch.setattr(service.store, "get_many", deleting_first)
    assert [m.memory_id for m in service.entity_memories(NS, "Lisbon", limit=2)] == newest_first[1:3]


def test_entity_memories_refuses_a_limit_below_one(service: MemoryService) -> None:
    service.save(MemoryDraft("The user lives in Lisbon", namespace=NS, entities=("Lisbon",)))
    with pytest.raises(InvalidInput, match="limit must be at least 1"):
        service.entity_memories(NS, "Lisbon", limit=0)
    assert len(service.entity_memories(NS, "Lisbon", limit=1)) == 1
