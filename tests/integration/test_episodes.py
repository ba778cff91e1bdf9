"""A session's memories linked NEXT as they are saved (engine/episodes.py), the context
channel that reads the links back, and the time signal of a query that names a time.

Real SQLite file, real HNSW index and fast network, the hashing embedder; the time
expressions are read by the real libraries. The same links over the Bolt store are
checked through the API (tests/api/test_episodes_api.py).
"""

from __future__ import annotations

import io
import itertools
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.config import Config, load_config
from engine.episodes import NEXT
from engine.importers import run_import
from engine.portability import open_export
from engine.procedures import PROCEDURE
from engine.records import MemoryDraft, MemoryFilter, Scope, Status
from engine.service import MemoryService
from tests.conftest import FrozenClock
from tests.integration.conftest import OpenService

NS = "user:7"


def next_links(service: MemoryService, namespace: str = NS) -> set[tuple[str, str]]:
    ids = [m.memory_id for m in service.list_page([namespace], MemoryFilter(statuses=tuple(Status)), limit=500).items]
    return {(e.src, e.dst) for e in service.store.links(ids) if e.kind == NEXT}


def said(content: str, session: str | None = "chat-1", **fields: object) -> MemoryDraft:
    return MemoryDraft(content, namespace=NS, session_id=session, **fields)  # type: ignore[arg-type]


def with_weights(data_dir: Path, **fusion: float) -> Config:
    return load_config(env={}, data_dir=data_dir, conflicts={"min_similarity": 0.0}, fusion=fusion)


# --- NEXT on save ------------------------------------------------------------------------


def test_saves_of_a_session_follow_one_another(service: MemoryService) -> None:
    first = service.save(said("We planned a trip to Lisbon")).memory
    other = service.save(said("The printer needs toner", session="chat-2")).memory
    loose = service.save(said("Water the ferns on Sunday", session=None))
    second = service.save(said("The flight leaves at nine"))
    elsewhere = service.save(MemoryDraft("Same session id, another namespace", namespace="user:8", session_id="chat-1"))
    assert second.follows == first.memory_id
    assert loose.follows is None and elsewhere.follows is None
    assert next_links(service) == {(first.memory_id, second.memory.memory_id)}
    assert next_links(service, "user:8") == set()
    third = service.save(said("A taxi to the airport at seven", session="chat-2"))
    assert third.follows == other.memory_id


def test_a_batch_is_linked_in_batch_order_after_the_end_of_the_chain(service: MemoryService) -> None:
    start = service.save(said("Opening remarks about the budget")).memory
    batch = service.save_batch(
        [
            said("Rent goes up in March"),
            said("An unrelated note", session="chat-9"),
            said("Groceries cost more this year"),
            said("We agreed to save ten percent"),
        ]
    )
    chat1 = [start.memory_id] + [batch[n].memory.memory_id for n in (0, 2, 3)]
    assert [r.follows for r in batch] == [chat1[0], None, chat1[1], chat1[2]]
    assert next_links(service) == set(itertools.pairwise(chat1))


def test_a_repeat_adds_no_link_and_the_chain_goes_on_from_its_end(service: MemoryService) -> None:
    a = service.save(said("My sister lives in Ghent")).memory
    b = service.save(said("She teaches chemistry")).memory
    again = service.save(said("my sister lives in ghent"))  # the same text: reinforces a
    assert not again.created and again.memory.memory_id == a.memory_id and again.follows is None
    in_batch = service.save_batch([said("She has two dogs"), said("She has two dogs")])
    assert in_batch[0].created and not in_batch[1].created
    c = in_batch[0].memory
    assert next_links(service) == {(a.memory_id, b.memory_id), (b.memory_id, c.memory_id)}


def test_a_deleted_end_is_passed_over(service: MemoryService) -> None:
    a = service.save(said("The boiler was serviced")).memory
    b = service.save(said("The plumber left a card")).memory
    service.delete(NS, b.memory_id)
    assert service.save(said("The radiator still knocks")).follows == a.memory_id


def test_the_chain_goes_on_after_a_restart(open_svc: OpenService) -> None:
    service = open_svc()
    a = service.save(said("Chapter one of the story")).memory
    service.close()
    reopened = open_svc()  # the fast network comes back from disk
    assert reopened.save(said("Chapter two of the story")).follows == a.memory_id


def test_an_import_links_a_sessions_records_by_time_from_the_end_of_the_chain(
    service: MemoryService, clock: FrozenClock
) -> None:
    before = service.save(said("Kick-off of the chat", created_at=clock() - timedelta(days=3))).memory
    lines = [
        {"content": "Third thing said", "session_id": "chat-1", "created_at": "2025-02-28T10:02:00Z"},
        {"content": "First thing said", "session_id": "chat-1", "created_at": "2025-02-28T10:00:00Z"},
        {"content": "No session here", "created_at": "2025-02-28T10:01:00Z"},
        {"content": "Second thing said", "session_id": "chat-1", "created_at": "2025-02-28T10:01:00Z"},
    ]
    raw = "\n".join(json.dumps(line) for line in lines).encode()
    report = run_import(service, io.BytesIO(raw), format_name="jsonl", namespace=NS)
    assert report.written, report.errors
    by_text = {m.content: m.memory_id for m in service.list_page([NS], MemoryFilter(), limit=50).items}
    chain = [before.memory_id] + [by_text[f"{n} thing said"] for n in ("First", "Second", "Third")]
    assert next_links(service) == set(itertools.pairwise(chain))
    # A repeated import stores nothing, links included.
    again = run_import(service, io.BytesIO(raw), format_name="jsonl", namespace=NS)
    assert again.inserted == 0 and next_links(service) == set(itertools.pairwise(chain))


def test_an_export_keeps_its_own_chain_on_import(open_svc: OpenService, tmp_path: Path) -> None:
    source = open_svc()
    ids = [r.memory.memory_id for r in source.save_batch([said(f"step {n} of the recipe") for n in range(3)])]
    exported = b"".join(open_export(source, NS, source_deployment="test").chunks())
    target = open_svc(config=load_config(env={}, data_dir=tmp_path / "other"))
    report = run_import(target, io.BytesIO(exported))
    assert report.written, report.errors
    assert next_links(target) == {(ids[0], ids[1]), (ids[1], ids[2])}


# --- the context channel -------------------------------------------------------------------


def _episode(service: MemoryService) -> list[str]:
    drafts = [
        said("we landed late and took a cab", category="event"),
        said("the hotel in Porto had a rooftop pool", category="event"),
        said("breakfast was served until eleven", category="event"),
    ]
    noise = [said(f"note {n} about gardening tomatoes and basil", session=None) for n in range(6)]
    return [r.memory.memory_id for r in service.save_batch(drafts + noise)][:3]


def test_neighbours_of_a_strong_hit_join_with_a_bounded_boost(open_svc: OpenService, data_dir: Path) -> None:
    service = open_svc(config=with_weights(data_dir, context=0.3))
    before, hit, after = _episode(service)
    result = service.recall("hotel rooftop pool Porto", namespaces=[NS], top_k=3, reinforce=False)
    by_id = {h.memory.memory_id: h for h in result.hits}
    assert result.hits[0].memory.memory_id == hit
    assert set(by_id) == {before, hit, after}
    for neighbour in (before, after):
        context = by_id[neighbour].breakdown.context
        assert context.value == pytest.approx(1.0) and context.weight == 0.3
        assert by_id[neighbour].breakdown.next_to == hit
        explained = by_id[neighbour].breakdown.as_dict()
        assert explained["next_to"] == hit
        assert explained["signals"]["context"]["contribution"] == pytest.approx(0.3)  # type: ignore[index]
    # The hit itself gets at most what its weaker neighbours lend, relative to it.
    assert by_id[hit].breakdown.context.value < 1.0


def test_without_the_context_weight_neighbours_get_nothing(open_svc: OpenService, data_dir: Path) -> None:
    service = open_svc(config=with_weights(data_dir, context=0.0))
    _before, hit, _after = _episode(service)
    hits = service.recall("hotel rooftop pool Porto", namespaces=[NS], top_k=3, reinforce=False).hits
    assert hits[0].memory.memory_id == hit
    assert all(h.breakdown.context.value == 0.0 and h.breakdown.next_to is None for h in hits)


def test_the_context_channel_keeps_to_the_filter(open_svc: OpenService, data_dir: Path) -> None:
    service = open_svc(config=with_weights(data_dir, context=0.3))
    drafts = [
        said("a private aside", category="fact"),
        said("the hotel in Porto had a rooftop pool", category="event"),
        said("checkout was at noon", category="event"),
    ]
    aside, hit, after = (r.memory.memory_id for r in service.save_batch(drafts))
    found = service.recall(
        "hotel rooftop pool Porto", namespaces=[NS], top_k=5, reinforce=False, flt=MemoryFilter(categories=("event",))
    )
    ids = [h.memory.memory_id for h in found.hits]
    assert ids[:2] == [hit, after] and aside not in ids


# --- the time signal ----------------------------------------------------------------------


def _dated(service: MemoryService, clock: FrozenClock) -> dict[str, str]:
    now = clock()
    drafts = {
        "yesterday": said("we talked about the garden shed", created_at=now - timedelta(days=1)),
        "last month": said("we talked about the garden fence", created_at=now - timedelta(days=30)),
        "last year": said("we talked about the garden gate", created_at=now - timedelta(days=365)),
    }
    results = service.save_batch(list(drafts.values()))
    return {name: r.memory.memory_id for name, r in zip(drafts, results, strict=True)}


def test_a_query_without_a_time_is_ranked_bit_for_bit_as_without_the_signal(
    open_svc: OpenService, data_dir: Path, clock: FrozenClock
) -> None:
    service = open_svc(config=with_weights(data_dir, time=0.5))
    _dated(service, clock)
    query = "what did we say about the garden"
    with_time = service.recall(query, namespaces=[NS], top_k=3, reinforce=False)
    assert with_time.windows == ()
    service.close()
    plain = open_svc(config=with_weights(data_dir, time=0.0)).recall(query, namespaces=[NS], top_k=3, reinforce=False)
    assert [(h.memory.memory_id, h.score) for h in with_time.hits] == [
        (h.memory.memory_id, h.score) for h in plain.hits
    ]
    assert all(h.breakdown.time is None and "time" not in h.breakdown.as_dict()["signals"] for h in with_time.hits)  # type: ignore[operator]


@pytest.mark.parametrize("query", ["what did we say yesterday about the garden", "昨天我们聊了花园的什么 garden"])
def test_a_time_named_lifts_what_was_written_then(
    open_svc: OpenService, data_dir: Path, clock: FrozenClock, query: str
) -> None:
    service = open_svc(config=with_weights(data_dir, time=0.5, decay=0.0))
    ids = _dated(service, clock)
    result = service.recall(query, namespaces=[NS], top_k=3, reinforce=False)
    (window,) = result.windows
    yesterday = (clock() - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    assert (window.start, window.end) == (yesterday, yesterday + timedelta(days=1))
    assert result.hits[0].memory.memory_id == ids["yesterday"]
    fits = {h.memory.memory_id: h.breakdown.time for h in result.hits}
    assert fits[ids["yesterday"]] is not None and fits[ids["yesterday"]].value == 1.0  # type: ignore[union-attr]
    assert 0.0 < fits[ids["last year"]].value < fits[ids["last month"]].value < 1.0  # type: ignore[union-attr]


@pytest.mark.parametrize("worker", [False, True], ids=["in the request", "in a worker"])
def test_the_times_are_read_once_after_the_candidate_channels(
    open_svc: OpenService, data_dir: Path, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch, worker: bool
) -> None:
    """A parse leaves the CPU's caches cold for what runs after it, so a recall that reads
    its query's times in its own thread reads them once the channels have found the
    candidates; one that has a worker read them begins the reading before the channels
    (before the query is embedded) and takes the answer after them. Either way only once
    for a "how" question, which ranks twice (the second time over procedures)."""
    config = with_weights(data_dir, time=0.5, decay=0.0)
    service = open_svc(config=replace(config, recall=replace(config.recall, time_worker=worker)))
    ids = _dated(service, clock)
    steps = service.save(
        MemoryDraft("how we fixed the garden fence: sand it, then paint two coats", namespace=NS, category=PROCEDURE)
    ).memory.memory_id
    net, times = service.keeper.network, service.times
    assert times is not None
    calls: list[str] = []
    lexical, windows, begin = net.lexical, times.windows, times.begin

    def scored(*args: Any, **kwargs: Any) -> Any:
        calls.append("lexical")
        return lexical(*args, **kwargs)

    def read(*args: Any) -> Any:
        calls.append("times")
        return windows(*args)

    class Taken:
        def __init__(self, answer: Any) -> None:
            self.answer = answer

        def ready(self, wait: float) -> bool:
            return bool(self.answer.ready(wait))

        def __call__(self) -> Any:
            calls.append("answer")
            return self.answer()

    def begun(text: str, now: Any) -> Any:
        calls.append("begin")
        return Taken(begin(text, now))

    monkeypatch.setattr(net, "lexical", scored)
    monkeypatch.setattr(times, "begin" if worker else "windows", begun if worker else read)
    result = service.recall("how did we fix the garden fence yesterday", namespaces=[NS], top_k=4, reinforce=False)
    # The whole ranking, its times, the procedures' ranking.
    assert calls == (["begin", "lexical", "answer", "lexical"] if worker else ["lexical", "times", "lexical"])
    (window,) = result.windows
    assert window.start == (clock() - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    found = [h.memory.memory_id for h in result.hits]
    assert found[0] == steps and found[1] == ids["yesterday"]  # the procedure first, then the time's fit
    assert result.hits[1].breakdown.time is not None and result.hits[1].breakdown.time.value == 1.0


def test_a_time_off_by_config_is_not_read(open_svc: OpenService, data_dir: Path) -> None:
    service = open_svc(config=with_weights(data_dir, time=0.0))
    assert service.recall("what did I say yesterday", namespaces=[NS], top_k=1, reinforce=False).windows == ()


def test_the_engine_sees_every_link_it_wrote(service: MemoryService) -> None:
    """The links land in the change sequence with their memories: a second reader of the
    store (a replica) rebuilding its fast network from the store finds them too."""
    ids = [r.memory.memory_id for r in service.save_batch([said("one"), said("two"), said("three")])]
    edges = service.store.edges(Scope.whole([NS]), ids[1])
    assert {(e.src, e.dst, e.kind) for e in edges} == {(ids[0], ids[1], NEXT), (ids[1], ids[2], NEXT)}


def test_memories_older_than_the_sessions_stored_ones_go_before_them(
    service: MemoryService, clock: FrozenClock
) -> None:
    """A part of a session written after a later part (a window promoted at a restart after
    the next one was closed, an old chat imported) is linked as it was said, not after it."""
    landed = service.save(said("We landed in Lisbon")).memory.memory_id
    taxi = service.save(said("The taxi took an hour")).memory.memory_id
    hour_ago = clock() - timedelta(hours=1)
    packed, left = (
        r.memory.memory_id
        for r in service.save_batch(
            [said("We packed the bags", created_at=hour_ago), said("We left for the airport", created_at=hour_ago)]
        )
    )
    assert next_links(service) == {(packed, left), (left, landed), (landed, taxi)}
    line = {"content": "We booked the flight", "session_id": "chat-1", "created_at": "1999-01-01T00:00:00Z"}
    report = run_import(service, io.BytesIO(json.dumps(line).encode()), format_name="jsonl", namespace=NS)
    assert report.written, report.errors
    booked = next(m.memory_id for m in service.list_page([NS], MemoryFilter(), limit=50).items if "booked" in m.content)
    assert next_links(service) == {(booked, packed), (packed, left), (left, landed), (landed, taxi)}
    # Between two linked ones only undoing a link would make room: it goes at the end, as before.
    boarded = service.save(said("We boarded the plane", created_at=clock() - timedelta(minutes=30)))
    assert boarded.follows == taxi
