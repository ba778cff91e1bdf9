"""``CategoryIndexes`` on its own: what it builds, keeps in step and refuses, over a real
hnswlib index and members kept in a dict (the fast network's part is tested in
tests/integration/test_category_indexes.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from engine.adapters.hnsw_index import HnswIndex
from engine.category_indexes import CategoryIndexes
from engine.ports import Matrix

DIM = 16


class _Members:
    """Memories of each category code, with vectors, as the network would report them."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.vectors = {f"m{n}": rng.standard_normal(DIM).astype(np.float32) for n in range(60)}
        self.category = {memory_id: "abc"[n % 3] for n, memory_id in enumerate(self.vectors)}

    def __call__(self, category: str, ids: Sequence[str] | None, *, vectors: bool = True) -> tuple[list[str], Matrix]:
        asked = list(self.vectors) if ids is None else [mid for mid in ids if mid in self.vectors]
        members = [mid for mid in asked if self.category[mid] == category]
        if not vectors or not members:
            return members, np.zeros((0, DIM), np.float32)
        return members, np.vstack([self.vectors[mid] for mid in members])

    def of(self, category: str) -> set[str]:
        return {mid for mid, c in self.category.items() if c == category}


def _indexes(members: _Members, kept: int = 8, room: int = 60) -> CategoryIndexes:
    return CategoryIndexes(
        lambda: HnswIndex(DIM, model="test"), members, threading.RLock(), kept=kept, room=lambda: room
    )


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
