"""``CategoryIndexes`` on its own: what it builds, keeps in step and refuses, over a real
hnswlib index and members kept in a dict (the fast network's part is tested in
tests/integration/test_category_indexes.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from engine import category_indexes
from engine.adapters.hnsw_index import HnswIndex
from engine.category_indexes import CategoryIndexes, HalfMatrix, IndexFactory
from engine.errors import VectorIndexError
from engine.ports import VectorIndex

DIM = 16


class _Members:
    """Memories of each category code, with vectors, as the network would report them."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.vectors = {f"m{n}": rng.standard_normal(DIM).astype(np.float32) for n in range(60)}
        self.category = {memory_id: "abc"[n % 3] for n, memory_id in enumerate(self.vectors)}

    def __call__(
        self, category: str, ids: Sequence[str] | None, *, vectors: bool = True
    ) -> tuple[list[str], HalfMatrix]:
        asked = list(self.vectors) if ids is None else [mid for mid in ids if mid in self.vectors]
        members = [mid for mid in asked if self.category[mid] == category]
        if not vectors or not members:
            return members, np.zeros((0, DIM), np.float16)
        return members, np.vstack([self.vectors[mid] for mid in members]).astype(np.float16)

    def of(self, category: str) -> set[str]:
        return {mid for mid, c in self.category.items() if c == category}


def _hnsw() -> VectorIndex:
    return HnswIndex(DIM, model="test")


def _indexes(members: _Members, kept: int = 8, room: int = 60, new_index: IndexFactory = _hnsw) -> CategoryIndexes:
    return CategoryIndexes(new_index, members, threading.RLock(), kept=kept, room=lambda: room)


def _held(indexes: CategoryIndexes, category: str) -> set[str]:
    index = indexes.get(category)
    assert index is not None
    return {mid for mid in index.sample(1000)}


def test_an_index_asked_for_holds_the_category_and_follows_what_was_touched() -> None:
    members = _Members()
    indexes = _indexes(members)
    assert indexes.get("b") is None
    indexes.ask("b")
    indexes.settle()
    assert indexes.holds() == {"b": 20} and _held(indexes, "b") == members.of("b")
    # one leaves the category, one joins it, one gets another vector, one is gone
    members.category["m1"], members.category["m0"] = "a", "b"
    members.vectors["m4"] = -members.vectors["m4"]
    del members.vectors["m7"]
    for memory_id in ("m0", "m1", "m4", "m7"):
        indexes.touched("b", (memory_id,))
    assert _held(indexes, "b") == members.of("b") - {"m7"}
    index = indexes.get("b")
    assert index is not None
    assert index.search(members.vectors["m4"], 1)[0][0] == "m4"  # its new vector


def test_touches_of_a_category_without_an_index_are_not_kept() -> None:
    indexes = _indexes(_Members())
    indexes.touched("c", ("m2",))
    assert indexes.get("c") is None and indexes._dirty == {}


def test_no_more_than_kept_categories_get_an_index() -> None:
    indexes = _indexes(_Members(), kept=1)
    indexes.ask("a")
    indexes.ask("c")
    indexes.settle()
    assert set(indexes.holds()) == {"a"}


def test_a_category_past_the_room_left_gets_no_index_and_is_not_asked_again() -> None:
    indexes = _indexes(_Members(), room=30)  # 20 memories a category
    indexes.ask("a")
    indexes.settle()
    indexes.ask("b")  # 20 more would hold 40
    indexes.settle()
    assert indexes.holds() == {"a": 20}
    indexes.ask("b")
    assert not indexes._building


def test_nothing_is_built_once_stopped() -> None:
    indexes = _indexes(_Members())
    indexes.stop()
    indexes.ask("a")
    indexes.settle()
    assert indexes.holds() == {}


def test_what_changes_while_an_index_is_built_is_brought_in_when_it_is_first_asked_for() -> None:
    members, begun, go_on = _Members(), threading.Event(), threading.Event()

    def slow() -> VectorIndex:  # called once the snapshot is taken
        begun.set()
        go_on.wait(10)
        return _hnsw()

    indexes = _indexes(members, new_index=slow)
    indexes.ask("a")
    assert begun.wait(10)
    members.category["m0"] = "c"  # leaves "a" after the snapshot
    members.category["m1"] = "a"  # joins it
    indexes.touched("a", ("m0", "m1"))
    go_on.set()
    indexes.settle()
    assert _held(indexes, "a") == members.of("a")


def test_a_large_backlog_is_built_again_in_the_background_not_in_the_recall() -> None:
    members = _Members()
    members.vectors.update({f"n{n}": np.ones(DIM, np.float32) * (n + 1) for n in range(80)})
    members.category.update({f"n{n}": "c" for n in range(80)})
    indexes = _indexes(members, room=200)
    indexes.ask("b")
    indexes.settle()
    new = {f"n{n}" for n in range(80)}
    members.category.update(dict.fromkeys(new, "b"))
    indexes.touched("b", new)  # more than SYNC_IN_RECALL
    assert len(new) > category_indexes.SYNC_IN_RECALL
    assert indexes.get("b") is None  # set aside, not caught up here
    indexes.settle()
    assert _held(indexes, "b") == members.of("b") and new <= members.of("b")


def test_a_build_the_index_refuses_leaves_no_index_and_a_later_ask_builds_it() -> None:
    fails = [False, True]  # the first build fails

    def refusing() -> VectorIndex:
        if fails.pop():
            raise VectorIndexError("no room for the vectors")
        return _hnsw()

    members = _Members()
    indexes = _indexes(members, new_index=refusing)
    indexes.ask("a")
    indexes.settle()
    assert indexes.holds() == {} and indexes._dirty == {} and not indexes._building
    indexes.ask("a")
    indexes.settle()
    assert _held(indexes, "a") == members.of("a")
