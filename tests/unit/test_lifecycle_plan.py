"""The pure consolidation plan, the rollback rules and the lifecycle config, with frozen time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.config import load_config
from engine.errors import ConfigError
from engine.lifecycle import Archive, Item, Merge, Policy, Purge, merge_id, merged_content, plan
from engine.ports import Vector
from engine.records import Memory, Source, Status, Version, Visibility, new_memory_id
from engine.rollback import differs, restored, state_at

T0 = datetime(2025, 1, 1, tzinfo=UTC)
POLICY = Policy.from_config(load_config(env={}))


def mem(content: str = "a memory", **fields: Any) -> Memory:
    values: dict[str, Any] = {
        "memory_id": new_memory_id(),
        "namespace": "ns",
        "content": content,
        "category": "fact",
        "base_score": 0.6,
        "importance": 0.6,
        "source": Source.USER_INPUT,
        "created_at": T0,
        "updated_at": T0,
        "last_accessed_at": T0,
    }
    values.update(fields)
    return Memory(**values)


def unit(*values: float) -> Vector:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


# --- config ----------------------------------------------------------------------------------


def test_archive_threshold_is_configured_per_category_in_the_file_and_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[archive_threshold]\ntask = 0.2\ndefault = 0.01\n\n[lifecycle]\npurge_after_days = 7\n")
    config = load_config(path, env={"TWINMEM_ARCHIVE_THRESHOLD__STATE": "0.3"})
    assert config.scoring.archive_below("task") == 0.2
    assert config.scoring.archive_below("state") == 0.3
    assert config.scoring.archive_below("fact") == 0.01
    assert config.lifecycle.purge_after_days == 7
    defaults = load_config(env={})
    assert defaults.scoring.archive_below("task") == 0.05
    assert defaults.lifecycle.consolidate_every_minutes == 0


@pytest.mark.parametrize(
    "toml",
    [
        "[archive_threshold]\ntask = 1.5",
        "[archive_threshold]\ntask = 'low'",
        "[lifecycle]\nmerge_cosine = 0",
        "[lifecycle]\npage_size = 0",
        "[lifecycle]\nconsolidate_every_minutes = -1",
        "[lifecycle]\nsweep = true",
    ],
)
def test_bad_lifecycle_settings_are_refused(tmp_path: Path, toml: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError):
        load_config(path, env={})


# --- archive -----------------------------------------------------------------------------------


def test_a_memory_is_archived_once_its_decayed_score_falls_below_its_category_threshold() -> None:
    task = mem(category="task")  # half-life 7 days: 0.6 -> 0.05 after log2(12) * 7 = 25.1 days
    assert plan([Item(task)], T0 + timedelta(days=25), POLICY) == []
    (action,) = plan([Item(task)], T0 + timedelta(days=25.2), POLICY)
    assert isinstance(action, Archive)
    assert (action.memory_id, action.version) == (task.memory_id, 1)
    assert "below the archive threshold 0.05" in action.reason
    # A fact (half-life 180 days) written at the same time is still well above it.
    assert plan([Item(mem())], T0 + timedelta(days=25.2), POLICY) == []


def test_access_bonus_keeps_a_used_memory_above_the_threshold() -> None:
    used = mem(category="task", access_count=5)  # +0.05, never below the threshold by decay alone
    assert plan([Item(used)], T0 + timedelta(days=3650), POLICY) == []


def test_a_stricter_category_threshold_archives_sooner() -> None:
    policy = Policy.from_config(load_config(env={}, archive_threshold={"task": 0.3}))
    task = mem(category="task")
    assert plan([Item(task)], T0 + timedelta(days=6.9), policy) == []
    assert [type(a) for a in plan([Item(task)], T0 + timedelta(days=7.1), policy)] == [Archive]


def test_a_memory_past_its_expiry_is_archived_and_one_before_it_is_not() -> None:
    expiring = mem(expire_at=T0 + timedelta(hours=1))
    assert plan([Item(expiring)], T0 + timedelta(minutes=59), POLICY) == []
    (action,) = plan([Item(expiring)], T0 + timedelta(hours=1), POLICY)
    assert isinstance(action, Archive) and action.reason.startswith("expired at")


@pytest.mark.parametrize("status", [Status.ARCHIVED, Status.SUPERSEDED, Status.QUARANTINED])
def test_only_active_memories_are_archived(status: Status) -> None:
    assert plan([Item(mem(category="state", status=status))], T0 + timedelta(days=365), POLICY) == []


# --- purge ---------------------------------------------------------------------------------------


def test_a_soft_deleted_memory_is_purged_after_the_retention_period() -> None:
    deleted = mem(status=Status.DELETED, version=2, updated_at=T0 + timedelta(days=1))
    assert plan([Item(deleted)], T0 + timedelta(days=30, hours=23), POLICY) == []
    (action,) = plan([Item(deleted)], T0 + timedelta(days=31), POLICY)
    assert isinstance(action, Purge) and (action.memory_id, action.version) == (deleted.memory_id, 2)


# --- merge ---------------------------------------------------------------------------------------


def test_near_duplicates_sharing_an_entity_merge_keeping_both_facts_counts_and_the_earliest_time() -> None:
    older = mem("Alice likes green tea", entities=("Alice",), access_count=3, created_at=T0 - timedelta(hours=9))
    newer = mem("Alice likes to drink green tea with honey", entities=("alice", "tea"), access_count=4)
    now = T0 + timedelta(days=1)
    (action,) = plan([Item(newer, unit(1, 0.1)), Item(older, unit(1, 0.0))], now, POLICY)
    assert isinstance(action, Merge)
    assert action.source_ids == (older.memory_id, newer.memory_id)
    merged = action.merged
    assert merged.content == "Alice likes green tea\nAlice likes to drink green tea with honey"
    assert merged.access_count == 7
    assert merged.created_at == older.created_at
    assert merged.entities == ("Alice", "tea")
    assert merged.status is Status.ACTIVE and merged.version == 1
    assert merged.memory_id == merge_id([newer.memory_id, older.memory_id])
    # Planning the same records again plans the same merged memory (deterministic id).
    assert plan([Item(older, unit(1, 0.0)), Item(newer, unit(1, 0.1))], now, POLICY) == [action]


@pytest.mark.parametrize(
    "other",
    [
        {"entities": ("Bob",)},  # no shared entity
        {"entities": ()},
        {"category": "preference"},
        {"visibility": Visibility.PRIVATE},
        {"status": Status.SUPERSEDED},
    ],
)
def test_similar_memories_that_do_not_qualify_are_not_merged(other: dict[str, Any]) -> None:
    a = mem("Alice likes green tea", entities=("Alice",))
    b = mem("Alice likes green tea a lot", **{"entities": ("Alice",), **other})
    assert plan([Item(a, unit(1, 0)), Item(b, unit(1, 0.01))], T0, POLICY) == []


@pytest.mark.parametrize(
    ("one", "two"),
    [
        ("Alice pays 1200 euros rent for the flat", "Alice pays 1500 euros rent for the flat"),
        ("Alice meets the landlord on Monday", "Alice meets the landlord on Tuesday"),
        ("Alice likes the new flat a lot", "Alice hates the new flat a lot"),
        ("Alice can keep a cat in the flat", "Alice can't keep a cat in the flat"),
        ("Alice says he will move the boxes", "Alice says she will move the boxes"),
        ("Alice 喜欢 新的 公寓", "Alice 不喜欢 新的 公寓"),
        ("Alice takes the blood pressure medication daily", "Alice stopped taking the blood pressure medication daily"),
        ("Alice is in favour of the proposal", "Alice is against the proposal"),
        ("Alice is sure she locked the door", "Alice is unsure she locked the door"),
        # Another word in the same place (USE, in the longer sentences of test_dedup_models.py:
        # cosines 0.940 to 0.961, above merge_cosine).
        ("Alice accepts the job offer from the design studio", "Alice rejects the job offer from the design studio"),
        ("Alice's team wins the regional final every year", "Alice's team loses the regional final every year"),
        ("Alice gave up smoking after the doctor warned her", "Alice smokes after the doctor warned her"),
        ("Alice prefers tea over coffee at the office", "Alice prefers coffee over tea at the office"),
    ],
)
def test_near_duplicates_that_give_other_numbers_or_turn_around_are_not_merged(one: str, two: str) -> None:
    """Write-time dedup keeps these apart (``text.repeats``); a merge took them as
    near-duplicates (vectors alike, most words shared) and made one memory of both values,
    dated when the first was said: which one holds now was no longer to be told. Said
    within a day of each other, so that only their wording keeps them apart (three days
    apart, as here before, they were never merged whatever they said)."""
    a = mem(one, entities=("Alice",), created_at=T0 - timedelta(hours=3))
    b = mem(two, entities=("Alice",))
    assert plan([Item(a, unit(1, 0)), Item(b, unit(1, 0.01))], T0, POLICY) == []


def test_near_duplicates_said_more_than_a_day_apart_are_not_merged() -> None:
    """The merged memory is dated when the first source was said: a recall with
    ``created_after`` between the two (or a query naming the later day) missed the later
    text, which sat in a memory dated months before it was said."""
    a = mem("Lisa: Hmm, I'll give it a try, thank you.", entities=("Lisa",), created_at=T0 - timedelta(days=71))
    b = mem("Lisa: Hmm, I'll give it a try. Thank you!", entities=("Lisa",))
    assert plan([Item(a, unit(1, 0)), Item(b, unit(1, 0.01))], T0, POLICY) == []
    c = mem("Lisa: Hmm, I'll give it a try, thank you!", entities=("Lisa",), created_at=T0 - timedelta(hours=20))
    (merge,) = plan([Item(a, unit(1, 0)), Item(b, unit(1, 0.01)), Item(c, unit(1, 0.02))], T0, POLICY)
    assert isinstance(merge, Merge) and set(merge.source_ids) == {b.memory_id, c.memory_id}


def test_memories_below_the_merge_cosine_are_not_merged() -> None:
    a = mem("Alice likes green tea", entities=("Alice",))
    b = mem("Alice owns a red bicycle", entities=("Alice",))
    assert plan([Item(a, unit(1, 0)), Item(b, unit(1, 1))], T0, POLICY) == []  # cosine 0.71


def test_a_memory_takes_part_in_one_merge_at_most() -> None:
    group = [
        mem(f"Alice fact {words}".strip(), entities=("Alice",), created_at=T0 + timedelta(seconds=n))
        for n, words in enumerate(("", "alpha", "alpha beta"))
    ]
    actions = plan([Item(m, unit(1, 0.01 * n)) for n, m in enumerate(group)], T0 + timedelta(days=1), POLICY)
    assert len(actions) == 1 and isinstance(actions[0], Merge)
    assert set(actions[0].source_ids) == {m.memory_id for m in group}


def test_merged_content_keeps_each_distinct_text_once() -> None:
    assert merged_content(["Likes tea", "likes  TEA", "Likes tea with lemon", "Owns a cat"]) == (
        "Likes tea with lemon\nOwns a cat"
    )


def test_plan_is_pure() -> None:
    items = [Item(mem(category="state")), Item(mem(status=Status.DELETED))]
    now = T0 + timedelta(days=60)
    assert plan(items, now, POLICY) == plan(items, now, POLICY)
    assert items[0].memory.status is Status.ACTIVE


# --- rollback rules -------------------------------------------------------------------------------


def test_state_at_is_the_last_version_written_at_or_before_the_moment() -> None:
    v1 = mem("first")
    v2 = v1.evolve(content="second", version=2, updated_at=T0 + timedelta(hours=1))
    versions = [
        Version(v1.memory_id, 1, v1, T0, None, "created"),
        Version(v1.memory_id, 2, v2, T0 + timedelta(hours=1), None, "updated"),
    ]
    assert state_at(versions, T0 - timedelta(microseconds=1)) is None
    assert state_at(versions, T0) == v1
    assert state_at(versions, T0 + timedelta(minutes=59)) == v1
    assert state_at(versions, T0 + timedelta(hours=1)) == v2


def test_restoration_brings_back_fields_but_not_use_counters() -> None:
    old = mem("first", category="fact", entities=("a",), metadata={"k": 1})
    current = old.evolve(
        content="second", category="event", status=Status.ARCHIVED, version=4, access_count=9, base_score=0.9
    )
    now = T0 + timedelta(days=2)
    back = restored(current, old, now)
    assert (back.content, back.category, back.status, back.entities) == ("first", "fact", Status.ACTIVE, ("a",))
    assert (back.version, back.updated_at, back.access_count, back.base_score) == (5, now, 9, 0.9)
    assert differs(current, old) and not differs(back, old)


def test_partners_that_say_another_word_than_each_other_do_not_join_one_merge() -> None:
    """Each partner was read against the group's first memory only: "the fast train" and
    "the slow train" each only add a word to "the train", and all three became one memory
    that held both. The second that says another word than the first partner is left out."""
    seed = mem("Alice will take the train to Rome", entities=("Alice",), created_at=T0 - timedelta(hours=3))
    fast = mem("Alice will take the fast train to Rome", entities=("Alice",), created_at=T0 - timedelta(hours=2))
    slow = mem("Alice will take the slow train to Rome", entities=("Alice",), created_at=T0 - timedelta(hours=1))
    items = [Item(seed, unit(1, 0)), Item(fast, unit(1, 0.01)), Item(slow, unit(1, 0.02))]
    (merge,) = plan(items, T0, POLICY)
    assert isinstance(merge, Merge) and set(merge.source_ids) == {seed.memory_id, fast.memory_id}
