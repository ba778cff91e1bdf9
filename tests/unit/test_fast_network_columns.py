"""The fast network's pure parts: the metadata rule, and decay and reinforcement computed
over columns exactly as ``engine.scoring`` computes them over records."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from engine import conflicts, fast_network, scoring, text
from engine.adapters.bm25_lexical import build_scorer
from engine.config import ScoringConfig
from engine.fast_network import FastNetwork, metadata_matches, micros
from engine.guard import READ_CHECKED, READ_INJECTION
from engine.ports import LexicalScorer
from engine.records import Memory, MemoryFilter, Scope, Source, Status, content_digest, new_memory_id
from engine.text import terms

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _memory(rng: random.Random, category: str) -> Memory:
    accessed = T0 + timedelta(days=rng.uniform(0, 30))
    return Memory(
        memory_id=new_memory_id(),
        namespace="ns",
        content=f"note {rng.random()}",
        category=category,
        base_score=rng.random(),
        importance=0.5,
        source=Source.USER_INPUT,
        created_at=T0,
        updated_at=T0,
        last_accessed_at=accessed,
        access_count=rng.randint(0, 40),
        status=Status.ACTIVE,
    )


@pytest.mark.parametrize(
    ("metadata", "key", "value", "matches"),
    [
        ({"a": 1}, "a", 1, True),
        ({"a": 1.0}, "a", 1, True),
        ({"a": 1}, "a", 1.0, True),
        ({"a": True}, "a", 1, False),  # a boolean is not a number
        ({"a": 1}, "a", True, False),
        ({"a": True}, "a", True, True),
        ({"a": False}, "a", False, True),
        ({"a": "1"}, "a", 1, False),
        ({"a": "1"}, "a", "1", True),
        ({"a": None}, "a", None, True),
        ({}, "a", None, False),  # absent is not null
        ({"b": {"c": 2}}, "b.c", 2, True),
        ({"b": {"c": 2}}, "b", 2, False),
        ({"b": [2]}, "b.0", 2, False),  # a dotted part names a key, never an index
        ({"b": {"c": {"d": "x"}}}, "b.c.d", "x", True),
    ],
)
def test_metadata_matches_as_the_stores_do(metadata: dict[str, object], key: str, value: object, matches: bool) -> None:
    assert metadata_matches(metadata, key, value) is matches  # type: ignore[arg-type]


def test_micros_is_exact_and_ordered() -> None:
    a = T0 + timedelta(microseconds=1)
    assert micros(a) - micros(T0) == 1
    assert micros(datetime(1970, 1, 1, tzinfo=UTC)) == 0


def test_decay_over_columns_equals_the_scoring_function() -> None:
    rng = random.Random(1)
    policy = ScoringConfig()
    net = FastNetwork(build_scorer)
    memories = [_memory(rng, rng.choice(["fact", "task", "state", "made-up"])) for _ in range(200)]
    net.apply(memories, (), [])
    now = T0 + timedelta(days=45)
    rows = net.rows_of([m.memory_id for m in memories])
    expected = [scoring.current_score(m, now, policy) for m in memories]
    np.testing.assert_allclose(net.decayed(rows, now, policy), expected, rtol=1e-12)


def test_reinforcement_mirrors_the_stores_rescore() -> None:
    rng = random.Random(2)
    policy = ScoringConfig()
    net = FastNetwork(build_scorer)
    memory = _memory(rng, "event")
    net.apply([memory], (), [])
    events = [
        (memory.memory_id, 0.1, T0 + timedelta(days=40)),
        (memory.memory_id, 0.05, T0 + timedelta(days=40, hours=1)),
        (memory.memory_id, 0.05, T0 + timedelta(days=2)),  # older than the last access: no decay, no rewind
        ("absent", 0.1, T0),
    ]
    net.reinforce(events, policy)
    expected = memory
    for _, bonus, at in events[:3]:
        expected = expected.evolve(
            base_score=scoring.reinforced_base(expected, bonus, at, policy),
            access_count=expected.access_count + 1,
            last_accessed_at=max(expected.last_accessed_at, at),
        )
    now = T0 + timedelta(days=60)
    rows = net.rows_of([memory.memory_id])
    assert net.decayed(rows, now, policy)[0] == pytest.approx(scoring.current_score(expected, now, policy))


def test_a_purged_memory_leaves_every_structure() -> None:
    rng = random.Random(3)
    net = FastNetwork(build_scorer)
    memory = _memory(rng, "fact").evolve(content="coffee in Berlin", entities=("Berlin",))
    net.apply([memory], (), [])
    assert memory.memory_id in net and len(net) == 1
    assert len(net.by_entity(["ns"], "berlin")) == 1
    assert len(net.lexical(["ns"], ["coffe"])[0]) == 1
    net.apply([], [memory.memory_id], [])
    assert memory.memory_id not in net and len(net) == 0
    assert len(net.by_entity(["ns"], "berlin")) == 0
    assert len(net.lexical(["ns"], ["coffe"])[0]) == 0
    assert len(net.rows_of([memory.memory_id])) == 0


@pytest.mark.parametrize(("kept_from", "small_kept"), [(1, 4096), (10**9, 4096), (10**9, 0)])
def test_a_memory_moved_to_another_namespace_leaves_everything_the_first_held_of_it(
    monkeypatch: pytest.MonkeyPatch, kept_from: int, small_kept: int
) -> None:
    """Its lexicon, entity postings and vector sum go with it, as if it had been saved
    there (``kept_from`` 1: each namespace keeps its sum change by change)."""
    monkeypatch.setattr(fast_network, "CENTRE_KEPT_ROWS", kept_from)
    monkeypatch.setattr(fast_network, "CENTRES_SMALL_KEPT", small_kept)
    rng = random.Random(8)
    dim = 8
    memories = [
        _memory(rng, "fact").evolve(namespace=("a", "b")[n % 2], content=f"coffee in Berlin {n}", entities=("Berlin",))
        for n in range(8)
    ]
    vectors = np.random.default_rng(8).standard_normal((8, dim)).astype(np.float32)
    moved = memories[0].evolve(namespace="b")
    net, fresh = FastNetwork(build_scorer, dim=dim), FastNetwork(build_scorer, dim=dim)
    net.apply(memories, (), [])
    net.put_vectors([m.memory_id for m in memories], vectors)
    assert net.centre("a") is not None and net.centre("b") is not None  # kept from here (kept_from 1)
    net.apply([moved], (), [])
    fresh.apply([moved, *memories[1:]], (), [])
    fresh.put_vectors([m.memory_id for m in memories], vectors)
    for namespace in ("a", "b"):
        assert sorted(net.ids_of(net.rows_in([namespace]))) == sorted(fresh.ids_of(fresh.rows_in([namespace])))
        assert sorted(net.ids_of(net.by_entity([namespace], "berlin"))) == sorted(
            fresh.ids_of(fresh.by_entity([namespace], "berlin"))
        )
        found, want = net.lexical([namespace], ["coffe"])[0], fresh.lexical([namespace], ["coffe"])[0]
        assert sorted(net.ids_of(found)) == sorted(fresh.ids_of(want))
        centre, expected = net.centre(namespace), fresh.centre(namespace)
        assert centre is not None and expected is not None
        np.testing.assert_array_equal(centre[0], expected[0])
    assert moved.memory_id not in net.ids_of(net.rows_in(["a"]))


@pytest.mark.parametrize(("kept_from", "small_kept"), [(1, 4096), (10**9, 4096), (10**9, 0)])
def test_a_vector_beyond_float16s_range_leaves_its_namespaces_centre_finite(
    monkeypatch: pytest.MonkeyPatch, kept_from: int, small_kept: int
) -> None:
    """An imported vector with a part past float16's range (65504) is held as inf; it is
    left out of the centre, kept or summed, through its purge too, and reads a
    typicality of 0, so the others' typicality stays finite."""
    monkeypatch.setattr(fast_network, "CENTRE_KEPT_ROWS", kept_from)
    monkeypatch.setattr(fast_network, "CENTRES_SMALL_KEPT", small_kept)
    rng = random.Random(9)
    dim = 8
    memories = [_memory(rng, "fact") for _ in range(6)]
    vectors = np.random.default_rng(9).standard_normal((6, dim)).astype(np.float32)
    vectors[0, 3] = 1e6
    net = FastNetwork(build_scorer, dim=dim)
    net.apply(memories, (), [])
    assert net.centre("ns") is None  # no vector yet; the (empty) sum is kept from here (kept_from 1)
    net.put_vectors([m.memory_id for m in memories], vectors)
    centre = net.centre("ns")
    assert centre is not None and np.isfinite(centre[0]).all()
    expected = vectors[1:].astype(np.float16).astype(np.float64).mean(axis=0).astype(np.float32)
    np.testing.assert_array_equal(centre[0], expected)
    typical = net.typicality(net.rows_of([m.memory_id for m in memories]))
    assert np.isfinite(typical).all() and typical[0] == 0.0
    net.apply([], [memories[0].memory_id], [])  # purged: the sum never held it
    after = net.centre("ns")
    assert after is not None
    np.testing.assert_array_equal(after[0], expected)


def test_memories_holding_one_vector_read_one_cosine_and_typicality_wherever_they_sit() -> None:
    """Recall breaks ties by memory id, so two memories with one vector must tie exactly:
    whichever rows are asked beside them, in whatever order, and in the exact scan. (The
    matrix product read them a few float32 steps apart by their place in the matrix, and
    two replicas holding them in other orders ranked them differently.)"""
    rng, np_rng = random.Random(4), np.random.default_rng(4)
    dim = 384
    memories = [_memory(rng, "fact") for _ in range(90)]
    vectors = np_rng.standard_normal((90, dim)).astype(np.float32)
    twins = list(range(3, 90, 3))
    vectors[twins] = vectors[3]
    net = FastNetwork(build_scorer, dim=dim)
    net.apply(memories, (), [])
    net.put_vectors([m.memory_id for m in memories], vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    query = np_rng.standard_normal(dim).astype(np.float32)
    query /= np.linalg.norm(query)
    all_rows = net.rows_of([m.memory_id for m in memories])
    twin_rows = set(all_rows[twins].tolist())
    alone_cosine = net.cosines(query, all_rows[twins[:1]])[0]
    alone_typical = net.typicality(all_rows[twins[:1]])[0]
    for size in (2, 5, 17, 33, 64, 90):
        rows = np_rng.permutation(all_rows)[:size]
        held = [n for n, row in enumerate(rows.tolist()) if row in twin_rows]
        assert set(net.cosines(query, rows)[held].tolist()) <= {alone_cosine}
        assert set(net.typicality(rows)[held].tolist()) <= {alone_typical}
    rows, cosines = net.nearest(query, Scope.whole(["ns"]), MemoryFilter(), T0, 60)
    assert {cosine for row, cosine in zip(rows.tolist(), cosines.tolist(), strict=True) if row in twin_rows} == {
        alone_cosine
    }


def test_a_namespaces_rows_of_a_category_follow_edits_and_purges(monkeypatch: pytest.MonkeyPatch) -> None:
    """``rows_in`` with categories keeps a list per (namespace, categories) until the next
    change: each answer must be the mask of the columns as they are now."""
    monkeypatch.setattr(fast_network, "CATEGORY_LISTS_KEPT", 2)  # evicted and made again
    rng = random.Random(11)
    net = FastNetwork(build_scorer)
    memories = [_memory(rng, rng.choice(["fact", "procedure", "event"])) for _ in range(60)]
    memories += [_memory(rng, "procedure").evolve(namespace="elsewhere") for _ in range(5)]
    net.apply(memories, (), [])

    def expected(namespaces: list[str], categories: tuple[str, ...]) -> list[str]:
        live = [m for m in memories if m.namespace in namespaces and m.category in categories]
        return sorted(m.memory_id for m in live)

    def check() -> None:
        for namespaces in (["ns"], ["elsewhere"], ["ns", "elsewhere"]):
            for categories in (("procedure",), ("fact", "event"), ("unknown",)):
                found = sorted(net.id_of(int(row)) for row in net.rows_in(namespaces, categories))
                assert found == expected(namespaces, categories), (namespaces, categories)
            assert net.holds_category(namespaces, "procedure") == bool(expected(namespaces, ("procedure",)))

    check()
    # However many lists are asked for, those kept hold no more rows than the network.
    monkeypatch.setattr(fast_network, "CATEGORY_LISTS_KEPT", 100)
    for categories in (("fact", "procedure", "event"), ("fact", "event"), ("procedure",), ("fact",)):
        assert len(net.rows_in(["ns"], categories)) == len(expected(["ns"], categories))
        assert sum(len(rows) for rows in net._category_rows.values()) <= len(net)
    monkeypatch.setattr(fast_network, "CATEGORY_LISTS_KEPT", 2)
    # A fact becomes a procedure, a procedure an event; then a namespace is purged.
    fact = next(n for n, m in enumerate(memories) if m.namespace == "ns" and m.category == "fact")
    memories[fact] = memories[fact].evolve(category="procedure", version=2)
    procedure = next(
        n for n, m in enumerate(memories) if n != fact and m.namespace == "ns" and m.category == "procedure"
    )
    memories[procedure] = memories[procedure].evolve(category="event", version=2)
    net.apply([memories[fact], memories[procedure]], (), [])
    check()
    purged = [m for m in memories if m.namespace == "elsewhere"]
    net.apply([], [m.memory_id for m in purged], [])
    memories = [m for m in memories if m.namespace != "elsewhere"]
    check()
    assert not net.holds_category(["elsewhere"], "procedure")


def test_digest_and_key_postings_follow_edits_purges_and_a_reload(tmp_path: Path) -> None:
    rng = random.Random(5)
    net = FastNetwork(build_scorer)
    memory = _memory(rng, "fact").evolve(content="Theme is  DARK", key="ui.theme")
    other = _memory(rng, "fact").evolve(content="theme is dark", namespace="elsewhere", key="ui.theme")
    net.apply([memory, other], (), [])
    row = net.rows_of([memory.memory_id]).tolist()
    assert net.same_text("ns", content_digest("theme is dark")).tolist() == row  # its namespace only
    assert net.by_key("ns", "ui.theme").tolist() == row
    edited = memory.evolve(content="Theme is light", key="ui.mode", version=2)
    net.apply([edited], (), [])
    assert len(net.same_text("ns", content_digest("theme is dark"))) == 0
    assert net.same_text("ns", content_digest("theme is light")).tolist() == row
    assert len(net.by_key("ns", "ui.theme")) == 0 and net.by_key("ns", "ui.mode").tolist() == row
    net.save(tmp_path)
    loaded = FastNetwork.load(tmp_path, build_scorer, model="", dim=0)
    assert loaded is not None
    assert loaded.same_text("ns", content_digest("theme is light")).tolist() == row
    assert loaded.by_key("ns", "ui.mode").tolist() == row
    assert len(loaded.by_key("elsewhere", "ui.theme")) == 1
    loaded.apply([], [memory.memory_id], [])
    assert len(loaded.same_text("ns", content_digest("theme is light"))) == 0
    assert len(loaded.by_key("ns", "ui.mode")) == 0


def test_the_lexicon_matches_stemmed_english_and_segmented_chinese() -> None:
    rng = random.Random(6)
    net = FastNetwork(build_scorer)
    colour, style, other = (
        _memory(rng, "fact").evolve(content=text)
        for text in ("The user's favourite colour is blue", "用户偏好极简风格", "Quarterly taxes are due in April")
    )
    net.apply([colour, style, other], (), [])
    english, _ = net.lexical(["ns"], terms("suggestions for cool colours"))
    chinese, _ = net.lexical(["ns"], terms("极简的界面"))
    assert english.tolist() == net.rows_of([colour.memory_id]).tolist()
    assert chinese.tolist() == net.rows_of([style.memory_id]).tolist()
    assert len(net.lexical(["ns"], [])[0]) == 0


def test_a_saved_lexicon_answers_after_a_load_without_a_build(tmp_path: Path) -> None:
    rng = random.Random(7)
    built: list[int] = []

    class CountingBuild:
        def __call__(self, lengths: npt.NDArray[np.int64], codes: npt.NDArray[np.int64]) -> LexicalScorer:
            built.append(len(lengths))
            return build_scorer(lengths, codes)

        def restore(self, state: Mapping[str, Any]) -> LexicalScorer:
            return build_scorer.restore(state)

    net = FastNetwork(CountingBuild())
    words = "coffee tea berlin lisbon boots hiking blue green report deadline".split()
    memories = [_memory(rng, "fact").evolve(content=" ".join(rng.sample(words, 3))) for _ in range(40)]
    net.apply(memories, (), [])
    query = terms("hiking boots in Lisbon")
    before = net.lexical(["ns"], query)
    assert built == [40] and len(before[0]) > 0
    net.save(tmp_path)
    loaded = FastNetwork.load(tmp_path, CountingBuild(), model="", dim=0)
    assert loaded is not None
    after = loaded.lexical(["ns"], query)
    assert built == [40]  # restored, not built again
    assert after[0].tolist() == before[0].tolist()
    assert np.allclose(after[1], before[1])
    loaded.apply([memories[0].evolve(content="hiking boots, version two", version=2)], (), [])
    assert len(loaded.lexical(["ns"], query)[0]) > 0
    assert built == [40, 40]  # a change means a new build, as before


@pytest.mark.parametrize("k", [1, 3, 8, 50])
def test_the_top_lexical_matches_are_the_best_of_every_match_also_with_changes_since_the_build(k: int) -> None:
    """``lexical(top=k)`` against every match: the k best shares of the query's ceiling,
    over two namespaces, and (from the previous build, while the next is made) without
    the memories changed since it, even where those scored best."""
    rng = random.Random(k)
    builds_may_end = threading.Event()
    builds_may_end.set()

    class HeldBuild:  # a background build ends only when let (so the checks see one build)
        def __call__(self, lengths: npt.NDArray[np.int64], codes: npt.NDArray[np.int64]) -> LexicalScorer:
            builds_may_end.wait()
            return build_scorer(lengths, codes)

        def restore(self, state: Mapping[str, Any]) -> LexicalScorer:
            return build_scorer.restore(state)

    net = FastNetwork(HeldBuild(), sync_rebuild_docs=5)
    words = "coffee coffee tea berlin lisbon boots hiking blue green report deadline".split()
    memories = [
        _memory(rng, "fact").evolve(namespace=("ns", "other")[n % 2], content=" ".join(rng.sample(words, 4)))
        for n in range(120)
    ]
    net.apply(memories, (), [])
    query = terms("coffee in Lisbon, hiking boots")

    def check() -> None:
        rows, scores = net.lexical(["ns", "other"], query)
        top_rows, top_scores = net.lexical(["ns", "other"], query, top=k)
        assert len(top_rows) == min(k, len(rows)) == len(set(top_rows.tolist()))
        assert sorted(top_scores.tolist()) == sorted(scores.tolist())[max(len(rows) - k, 0) :]
        share = dict(zip(rows.tolist(), scores.tolist(), strict=True))
        assert all(share[row] == score for row, score in zip(top_rows.tolist(), top_scores.tolist(), strict=True))

    check()
    best, _ = net.lexical(["ns", "other"], query, top=3)
    by_id = {m.memory_id: m for m in memories}
    changed = [by_id[mid].evolve(content="coffee lisbon hiking boots coffee", version=2) for mid in net.ids_of(best)]
    builds_may_end.clear()
    net.apply(changed, (), [])  # the previous build answers, without these, while the next is made
    assert not set(net.ids_of(net.lexical(["ns", "other"], query, top=k)[0])) & {m.memory_id for m in changed}
    check()
    builds_may_end.set()
    net.settle()
    assert set(net.ids_of(net.lexical(["ns", "other"], query, top=3)[0])) == {m.memory_id for m in changed}
    check()


def test_a_large_lexicon_answers_from_its_last_build_while_the_next_is_made() -> None:
    rng = random.Random(4)
    net = FastNetwork(build_scorer, sync_rebuild_docs=5)
    first = [_memory(rng, "fact").evolve(content=f"coffee note {n}") for n in range(20)]
    net.apply(first, (), [])
    assert len(net.lexical(["ns"], ["coffe"])[0]) == 20  # no build yet: built before answering
    late = _memory(rng, "fact").evolve(content="coffee again")
    edited = first[0].evolve(content="tea only")
    net.apply([late, edited], (), [])
    rows, _ = net.lexical(["ns"], ["coffe"])
    # The previous build answers, without the memories written or edited since.
    ids = {net.id_of(int(row)) for row in rows}
    assert ids == {m.memory_id for m in first[1:]}
    net.settle()
    rows, _ = net.lexical(["ns"], ["coffe"])
    assert {net.id_of(int(row)) for row in rows} == {m.memory_id for m in [*first[1:], late]}
    assert {net.id_of(int(row)) for row in net.lexical(["ns"], ["tea"])[0]} == {edited.memory_id}
    # Many changes at once (a tenth of the namespace or more): rebuilt before answering.
    more = [_memory(rng, "fact").evolve(content=f"piano lesson {n}") for n in range(5)]
    net.apply(more, (), [])
    assert len(net.lexical(["ns"], ["piano"])[0]) == 5


def test_a_settle_while_a_background_build_is_being_started_waits_only_for_started_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``settle`` joins the builder without the lock; a builder seen before its
    ``start`` would raise "cannot join thread before it is started" (a reopened
    service's save, racing a recall's build ahead)."""
    rng = random.Random(12)
    net = FastNetwork(build_scorer, sync_rebuild_docs=5)
    net.apply([_memory(rng, "fact").evolve(content=f"coffee note {n}") for n in range(20)], (), [])
    net.lexical(["ns"], ["coffe"])  # the first build, before answering

    class SettledFirst(threading.Thread):
        def start(self) -> None:
            net.settle()  # what another thread may do at this very moment
            super().start()

    monkeypatch.setattr(fast_network, "threading", SimpleNamespace(**{**vars(threading), "Thread": SettledFirst}))
    net.apply([_memory(rng, "fact").evolve(content="coffee again")], (), [])
    net.lexical(["ns"], ["coffe"])  # starts a background build
    net.settle()
    assert len(net.lexical(["ns"], ["coffe"])[0]) == 21


def test_background_rebuilds_under_steady_writes_are_spaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that took a second is followed by the next no sooner than four seconds
    later; meanwhile the last build answers, without what changed since."""
    now = [100.0]
    monkeypatch.setattr(fast_network, "_monotonic", lambda: now[0])
    built: list[int] = []

    class SlowBuild:
        def __call__(self, lengths: npt.NDArray[np.int64], codes: npt.NDArray[np.int64]) -> LexicalScorer:
            built.append(len(lengths))
            now[0] += 1.0  # the build takes a second
            return build_scorer(lengths, codes)

        def restore(self, state: Mapping[str, Any]) -> LexicalScorer:
            return build_scorer.restore(state)

    rng = random.Random(5)
    net = FastNetwork(SlowBuild(), sync_rebuild_docs=5)
    first = [_memory(rng, "fact").evolve(content=f"coffee note {n}") for n in range(40)]
    net.apply(first, (), [])
    net.lexical(["ns"], ["coffe"])  # the first build, before answering
    second = _memory(rng, "fact").evolve(content="coffee again")
    net.apply([second], (), [])
    net.lexical(["ns"], ["coffe"])
    net.settle()  # a background build: done at 102, the next not before 106
    assert built == [40, 41]
    third = _memory(rng, "fact").evolve(content="coffee, third time")
    net.apply([third], (), [])
    now[0] = 105.5
    rows, _ = net.lexical(["ns"], ["coffe"])
    net.settle()
    assert built == [40, 41]  # too soon: no build started
    assert third.memory_id not in {net.id_of(int(row)) for row in rows}
    now[0] = 106.0
    net.lexical(["ns"], ["coffe"])
    net.settle()
    assert built == [40, 41, 42]
    rows, _ = net.lexical(["ns"], ["coffe"])
    assert third.memory_id in {net.id_of(int(row)) for row in rows}


class _CountingBuild:
    """bm25s builds, counted; a build can be held until ``gate`` is set."""

    def __init__(self) -> None:
        self.built: list[int] = []
        self.started = threading.Event()
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, lengths: npt.NDArray[np.int64], codes: npt.NDArray[np.int64]) -> LexicalScorer:
        self.started.set()
        self.gate.wait()
        self.built.append(len(lengths))
        return build_scorer(lengths, codes)

    def restore(self, state: Mapping[str, Any]) -> LexicalScorer:
        return build_scorer.restore(state)


def _wait_for(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not done():
        assert time.monotonic() < deadline, "the build ahead never came"
        time.sleep(0.005)


def _notes(seed: int, **network: Any) -> tuple[FastNetwork, _CountingBuild, random.Random]:
    """A network (``FastNetwork(**network)``) of 40 coffee notes, its counted build, and
    the random source for more memories."""
    rng = random.Random(seed)
    build = _CountingBuild()
    net = FastNetwork(build, **network)
    net.apply([_memory(rng, "fact").evolve(content=f"coffee note {n}") for n in range(40)], (), [])
    return net, build, rng


def test_a_small_namespace_is_built_ahead_once_its_writes_pause() -> None:
    net, build, rng = _notes(8, warm_after=0.01)
    late = _memory(rng, "fact").evolve(content="hiking boots")
    _wait_for(lambda: build.built == [40])  # built ahead, before any query
    net.apply([late], (), [])
    _wait_for(lambda: build.built == [40, 41])
    net.settle()
    rows, _ = net.lexical(["ns"], ["hike"])
    assert {net.id_of(int(row)) for row in rows} == {late.memory_id}
    assert build.built == [40, 41]  # the query built nothing


def test_a_query_during_the_build_ahead_waits_for_it_instead_of_building_again() -> None:
    net, build, rng = _notes(9, warm_after=0.01)
    _wait_for(lambda: build.built == [40])
    build.started.clear()
    build.gate.clear()  # the next build is held
    late = _memory(rng, "fact").evolve(content="hiking boots")
    net.apply([late], (), [])
    assert build.started.wait(10)
    threading.Timer(0.2, build.gate.set).start()
    rows, _ = net.lexical(["ns"], ["hike"])  # waits for the held build
    assert {net.id_of(int(row)) for row in rows} == {late.memory_id}
    net.settle()
    assert build.built == [40, 41]


def test_a_namespace_that_answers_from_its_last_build_is_not_built_ahead() -> None:
    net, build, rng = _notes(10, sync_rebuild_docs=5, warm_after=0.01)
    # built ahead once: with no build at all, a query would have built it first
    _wait_for(lambda: build.built == [40])
    net.apply([_memory(rng, "fact").evolve(content="hiking boots")], (), [])
    time.sleep(0.2)
    net.settle()
    assert build.built == [40]  # a query answers from the last build and rebuilds in the background


def test_nothing_is_built_ahead_once_warming_stops() -> None:
    net, build, rng = _notes(11, warm_after=0.05)
    net.stop_warming()  # as a closing service does, before its last save
    net.apply([_memory(rng, "fact").evolve(content="hiking boots")], (), [])
    time.sleep(0.2)
    net.settle()
    assert build.built == []
    assert len(net.lexical(["ns"], ["hike"])[0]) == 1  # a query still builds what it needs
    assert build.built == [41]


def test_digest_rows_agree_with_a_dict_of_lists_through_restores_adds_and_removals() -> None:
    rng = random.Random(5)
    digests = [bytes([rng.randrange(6)]) * 16 for _ in range(300)]  # six digests, many rows each
    digests[:40] = [row.to_bytes(16, "big") for row in range(40)]  # and forty held once
    rows = sorted(rng.sample(range(300), 200))
    held = fast_network._DigestRows.of(digests, rows)
    model: dict[bytes, list[int]] = {}
    for row in rows:
        model.setdefault(digests[row], []).append(row)
    for _ in range(600):
        digest = rng.choice(digests)
        row = rng.randrange(300)
        if rng.random() < 0.5 and row not in model.get(digest, []):
            held.add(digest, row)
            model.setdefault(digest, []).append(row)
        elif row in model.get(digest, []):
            held.remove(digest, row)
            model[digest].remove(row)
        for key in {digest, *digests[:3]}:
            assert sorted(held.get(key)) == sorted(model.get(key, [])), key
    assert all(sorted(held.get(key)) == sorted(model.get(key, [])) for key in set(digests))


def test_row_tuples_restored_flat_agree_with_a_dict_through_sets_and_removals() -> None:
    rng = random.Random(9)
    model = {row: tuple(rng.randrange(50) for _ in range(rng.randrange(4))) for row in rng.sample(range(400), 150)}
    saved = list(model.items())
    rng.shuffle(saved)  # saved in any order
    rows = np.asarray([row for row, _ in saved], np.int64)
    lengths = np.asarray([len(codes) for _, codes in saved], np.int64)
    values = np.asarray([c for _, codes in saved for c in codes], np.int64)
    picked = np.flatnonzero(rows % 3 != 0)  # a namespace's share of the saved rows
    model = {int(rows[at]): model[int(rows[at])] for at in picked}
    held = fast_network._RowTuples.of_flat(rows, lengths, values, picked=picked)
    for step in range(500):
        row = rng.randrange(400)
        if rng.random() < 0.5:
            codes = tuple(rng.randrange(50) for _ in range(rng.randrange(4)))
            held[row], model[row] = codes, codes
        elif row in model:
            del held[row], model[row]
        else:
            assert row not in held
            with pytest.raises(KeyError):
                del held[row]
        assert (row in held) == (row in model) and held.get(row) == model.get(row), step
        assert len(held) == len(model)
    assert dict(held.items()) == model and sorted(held) == sorted(model)
    assert held.rows().tolist() == sorted(model)
    flat_rows, flat_lengths, flat_values = held.flat()
    again = fast_network._RowTuples.of_flat(flat_rows, flat_lengths, flat_values)
    assert flat_rows.tolist() == sorted(model) and dict(again.items()) == model


def test_entity_postings_restored_flat_agree_with_sets_through_additions_and_removals() -> None:
    rng = random.Random(13)
    mentions = [(rng.randrange(4), rng.randrange(30), row) for row in range(500) for _ in range(rng.randrange(3))]
    spaces, codes, rows = (np.asarray(column, np.int64) for column in zip(*mentions, strict=True))
    held = fast_network._Postings.of(spaces.astype(np.int32), codes, rows)
    model: dict[tuple[int, int], set[int]] = {}
    for space, code, row in mentions:
        model.setdefault((space, code), set()).add(row)
    for _ in range(800):
        space, code, row = rng.randrange(4), rng.randrange(30), rng.randrange(500)
        if rng.random() < 0.5:
            held.add(space, code, row)
            model.setdefault((space, code), set()).add(row)
        else:
            held.discard(space, code, row)
            model.get((space, code), set()).discard(row)
        assert set(held.get(space, code)) == model.get((space, code), set())
    for space in range(-1, 4):  # -1: a namespace the network does not know
        for code in range(31):
            assert sorted(held.get(space, code)) == sorted(model.get((space, code), set())), (space, code)


def test_kept_read_findings_are_loaded_only_under_the_rules_that_made_them(tmp_path: Path) -> None:
    rng = random.Random(12)
    net = FastNetwork(build_scorer, read_rules="rules-a")
    memory = _memory(rng, "fact")
    net.apply([memory], (), [])
    row = int(net.rows_of([memory.memory_id])[0])
    net.keep_findings(row, memory.digest, READ_CHECKED | READ_INJECTION)
    net.save(tmp_path)

    def findings(rules: str) -> int:
        loaded = FastNetwork.load(tmp_path, build_scorer, model="", dim=0, read_rules=rules)
        assert loaded is not None and loaded.read_rules == rules
        return loaded.findings(row, memory.digest)

    assert findings("rules-a") == READ_CHECKED | READ_INJECTION
    assert findings("rules-b") == 0
    # A network saved before the rules were named: none of its findings is trusted.
    meta_path = tmp_path / fast_network._META
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    del meta["read_rules"]
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    assert findings("rules-a") == 0


def test_a_network_saved_under_another_text_analysis_is_not_loaded(tmp_path: Path) -> None:
    rng = random.Random(13)
    net = FastNetwork(build_scorer, analysis="analysis-a")
    net.apply([_memory(rng, "fact")], (), [])
    net.save(tmp_path)
    loaded = FastNetwork.load(tmp_path, build_scorer, model="", dim=0, analysis="analysis-a")
    assert loaded is not None and loaded.analysis == "analysis-a" and len(loaded) == 1
    assert FastNetwork.load(tmp_path, build_scorer, model="", dim=0, analysis="analysis-b") is None
    # Saved before the analysis was named: its terms may be any analysis's.
    meta_path = tmp_path / fast_network._META
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    del meta["analysis"]
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    assert FastNetwork.load(tmp_path, build_scorer, model="", dim=0, analysis="analysis-a") is None


def test_the_text_analysis_fingerprint_follows_what_terms_depend_on(monkeypatch: pytest.MonkeyPatch) -> None:
    now = text.analysis()
    assert now == text.analysis() and len(now) == 16
    monkeypatch.setattr(text, "ENGLISH_STOP_WORDS", text.ENGLISH_STOP_WORDS - {"the"})
    fewer_stop_words = text.analysis()
    monkeypatch.undo()
    monkeypatch.setattr(text, "TERMS_REVISION", text.TERMS_REVISION + 1)
    revised = text.analysis()
    monkeypatch.undo()
    real = text.version
    monkeypatch.setattr(text, "version", lambda name: "0.0" if name == "jieba" else real(name))
    other_jieba = text.analysis()
    assert len({now, fewer_stop_words, revised, other_jieba}) == 4


def _rewrite_saved(directory: Path, drop: tuple[str, ...]) -> None:
    """Rewrite a saved network without the arrays ``drop`` names, as an earlier release saved it."""
    path = directory / fast_network._FILE
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files if name not in drop}
    with open(path, "wb") as fh:
        np.savez(fh, allow_pickle=False, **arrays)
    meta_path = directory / fast_network._META
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["bytes"] = path.stat().st_size
    meta[fast_network.CHECKSUM] = fast_network.checksum_of(path)
    meta_path.write_text(json.dumps(meta), encoding="utf-8")


def test_claim_slots_are_kept_per_text_and_loaded_only_under_the_rules_that_read_them(tmp_path: Path) -> None:
    rng = random.Random(14)
    colour, plain = _memory(rng, "fact"), _memory(rng, "fact")
    colour = colour.evolve(content="My favourite colour is blue")
    net = FastNetwork(build_scorer, claim_rules="rules-a")
    net.apply([colour, plain], (), [])
    rows = net.rows_of([colour.memory_id, plain.memory_id])
    about_colour = conflicts.slots_of("My favourite colour is green")
    about_home = conflicts.slots_of("I live in Rome")
    assert about_colour and about_home
    assert net.may_conflict(rows, about_colour).tolist() == [True, False]
    assert net.may_conflict(rows, about_home).tolist() == [False, False]
    net.save(tmp_path)

    def loaded(rules: str) -> FastNetwork:
        found = FastNetwork.load(tmp_path, build_scorer, model="", dim=0, claim_rules=rules)
        assert found is not None and found.claim_rules == rules
        return found

    assert loaded("rules-a").may_conflict(rows, about_home).tolist() == [False, False]
    # Read by other rules: not known, so every row may conflict until its text is read again.
    other = loaded("rules-b")
    assert other.slots_unknown(rows).tolist() == [True, True]
    assert other.may_conflict(rows, about_home).tolist() == [True, True]
    other.keep_slots(int(rows[0]), plain, conflicts.slots_of(colour.content))  # of another text: ignored
    other.keep_slots(int(rows[1]), plain, conflicts.slots_of(plain.content))
    assert other.may_conflict(rows, about_colour).tolist() == [True, False]
    other.keep_slots(int(rows[0]), colour, conflicts.slots_of(colour.content))
    assert other.may_conflict(rows, about_home).tolist() == [False, False]
    # A text changed since: read again when held.
    moved = colour.evolve(content="I live in Rome now")
    other.apply([moved], (), [])
    assert other.may_conflict(rows, about_home).tolist() == [True, False]
    # Saved before slots were kept: loaded (no rebuild), none known.
    _rewrite_saved(tmp_path, ("col_claim_text", "slot_rows", "slot_lengths", "slot_values", "names_slots"))
    assert loaded("rules-a").slots_unknown(rows).tolist() == [True, True]


def test_the_entity_postings_tell_whether_another_entity_is_named_as_often() -> None:
    """``rivals`` reads the flat postings a restore leaves and the pairs changed since,
    a changed pair in place of its flat rows, and only the namespace asked about."""
    postings = fast_network._Postings.of(np.array([1, 1, 1, 1, 2]), np.array([4, 4, 9, 9, 9]), np.arange(5))
    assert postings.rivals(1, frozenset({4}), 2)  # 9 holds two of namespace 1's rows
    assert not postings.rivals(1, frozenset({4}), 3)
    assert not postings.rivals(1, frozenset({4, 9}), 1)  # the name's own forms are no rival
    assert not postings.rivals(3, frozenset(), 1)  # a namespace with none
    postings.discard(1, 9, 2)  # changed: 9 holds one row now, not the flat two
    assert not postings.rivals(1, frozenset({4}), 2)
    for row in (7, 8, 9):
        postings.add(1, 5, row)
    assert postings.rivals(1, frozenset({4}), 3)
    assert not postings.rivals(2, frozenset(), 2)  # namespace 1's changes are not namespace 2's
