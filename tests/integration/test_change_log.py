"""Replicas over one store: the bounded change log (pruning, replicas that fell below its
low-water mark), a recall that reads a change its replica lacks, and a purge decided on a
read that another replica writes over before it lands.

Two services over one graph database stand for two replicas (each with a data
directory, so a vector index and fast network, of its own). On SQLite, where one
process owns the file, the replica that slept is a saved index older than the
low-water mark, found at start-up.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine import change_log
from engine.adapters import INDEX_DIR, open_service
from engine.config import Config, load_config
from engine.errors import VersionMismatch
from engine.records import MemoryDraft, MemoryPatch, Scope, Status
from engine.service import MemoryService
from tests.bolt import BoltTarget

NS = "team"
BELOW_MARK = "below the store's low-water mark"
# Pruning runs by hand here, not on the service's schedule.
NO_SCHEDULE = {"change_log_prune_seconds": 0}
# Words that share nothing, so that no save is taken for a repeat of another.
WORDS = (
    "apple basalt cello dingo ember fjord gecko heron iris jackal kelp lotus mango nectar oboe "
    "pumice quartz raven sorrel tundra umber violet walrus xenon yarrow zephyr"
).split()


def _config(data_dir: Path, **overrides: Any) -> Config:
    return load_config(env={}, data_dir=data_dir, conflicts={"min_similarity": 0.0}, lifecycle=NO_SCHEDULE, **overrides)


def _save(service: MemoryService, *contents: str) -> list[str]:
    results = service.save_batch([MemoryDraft(content=text, namespace=NS) for text in contents])
    return [result.memory.memory_id for result in results]


def _mirror(service: MemoryService) -> tuple[set[str], set[str], int]:
    """What a replica's derived data holds: ids in its vector index, ids its fast network
    knows, and the change it reflects."""
    stored = [m.memory_id for m in service.store.scan(Scope.whole([NS]), "", 10_000)]
    indexed = {memory_id for memory_id in stored if memory_id in service.keeper.index}
    known = {memory_id for memory_id in stored if service.keeper.network.row_of(memory_id) is not None}
    assert service.keeper.index.applied_seq == service.keeper.network.applied_seq
    return indexed, known, service.keeper.index.applied_seq


def _recalled(service: MemoryService, query: str) -> list[str]:
    return [hit.memory.memory_id for hit in service.recall(query, namespaces=[NS], top_k=5).hits]


@pytest.fixture
def replicas(arcadedb: BoltTarget, tmp_path: Path, embedder: Any, clock: Any) -> Any:
    database = arcadedb.new_database()
    opened = [
        open_service(_config(tmp_path / name, **arcadedb.config(database)), embedder=embedder, clock=clock)
        for name in ("replica-a", "replica-b")
    ]
    yield opened
    for service in opened:
        service.close()


def test_pruning_keeps_the_log_bounded(replicas: list[MemoryService]) -> None:
    a, _ = replicas
    for n in range(12):
        _save(a, f"{WORDS[n]} {WORDS[n + 1]}")
    assert a.store.last_seq() == 12
    assert change_log.prune(a.store, 5, batch=3) == 7
    assert a.store.low_water_seq() == 7
    assert a.stats()["store_low_water_seq"] == 7  # /health reports it
    assert len(a.store.changes_since(0, 100)) == 5
    _save(a, "quartz and raven")
    change_log.prune(a.store, 5)
    assert len(a.store.changes_since(0, 100)) == 5


def _recall_reads(service: MemoryService, monkeypatch: pytest.MonkeyPatch, first: Any = None) -> list[int]:
    """The change seq each of ``service``'s recall reads (``get_many_and_seq``) comes back
    with, from now on; ``first`` runs just before the first of them."""
    seqs: list[int] = []
    read = service.store.get_many_and_seq

    def recorded(*args: Any) -> Any:
        if first is not None and not seqs:
            first()
        found = read(*args)
        seqs.append(found[1])
        return found

    monkeypatch.setattr(service.store, "get_many_and_seq", recorded)
    return seqs


def test_a_recall_that_reads_a_change_its_replica_lacks_catches_up_and_ranks_again(
    replicas: list[MemoryService], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = replicas
    _save(a, "apple and basalt")
    _recalled(a, "apple")
    seqs = _recall_reads(a, monkeypatch)
    (written,) = _save(b, "cello dingo ember")  # through the other replica: a's network lacks it
    assert written in _recalled(a, "cello dingo")
    # The first read came back with a seq a's network lacked; it caught up and read again.
    assert seqs == [2, 2]
    assert _mirror(a) == _mirror(b)
    seqs.clear()
    assert written in _recalled(a, "cello dingo")
    assert seqs == [2]  # nothing written since: one read


def test_a_replica_that_keeps_up_never_needs_what_was_pruned(
    replicas: list[MemoryService], caplog: pytest.LogCaptureFixture
) -> None:
    a, b = replicas
    caplog.set_level(logging.WARNING, logger="engine.index_keeper")
    for n in range(15):
        _save(a, f"the user planted {WORDS[n]} by the {WORDS[n + 5]}")
        change_log.prune(a.store, 2)
        b.keeper.ensure_current()
    assert a.store.low_water_seq() == 13
    assert BELOW_MARK not in caplog.text
    assert _mirror(b) == _mirror(a)
    assert len(_mirror(b)[0]) == 15


def test_a_replica_that_slept_below_the_mark_rebuilds_and_ends_identical(
    replicas: list[MemoryService], caplog: pytest.LogCaptureFixture
) -> None:
    a, b = replicas
    kept = _save(a, "the user keeps bees on the garage roof", "the sister lives in Porto")
    assert _recalled(b, "bees on the roof")[0] == kept[0]
    # B sleeps while A writes, deletes and prunes far past B's position.
    _save(a, *(f"a book on {WORDS[n]} and {WORDS[n + 10]}" for n in range(10)))
    a.delete(NS, kept[1])
    a.update(NS, kept[0], MemoryPatch(content="the user keeps bees on the shed roof"))
    change_log.prune(a.store, 3)
    assert b.keeper.index.applied_seq < a.store.low_water_seq()
    caplog.set_level(logging.WARNING, logger="engine.index_keeper")
    recalled = _recalled(b, "bees on the shed roof")
    assert "vector index is at change 2, " + BELOW_MARK in caplog.text
    assert "fast network is at change 2, " + BELOW_MARK in caplog.text
    assert recalled == _recalled(a, "bees on the shed roof")
    assert recalled[0] == kept[0]
    assert kept[1] not in _recalled(b, "sister in Porto")
    assert _mirror(b) == _mirror(a)
    assert _mirror(b)[2] == a.store.last_seq()


def test_a_saved_index_below_the_mark_is_rebuilt_at_start(
    tmp_path: Path, embedder: Any, clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir, saved = tmp_path / "data", tmp_path / "old-index"
    config = _config(data_dir)
    first = open_service(config, embedder=embedder, clock=clock)
    kept = _save(first, "the user keeps bees on the garage roof", "the sister lives in Porto")
    first.close()
    shutil.copytree(data_dir / INDEX_DIR, saved)
    second = open_service(config, embedder=embedder, clock=clock)
    _save(second, *(f"a book on {WORDS[n]} and {WORDS[n + 10]}" for n in range(10)))
    second.delete(NS, kept[1])
    change_log.prune(second.store, 3)
    expected = _mirror(second)
    second.close()
    # The index directory as it was when the log still held everything after it.
    shutil.rmtree(data_dir / INDEX_DIR)
    shutil.copytree(saved, data_dir / INDEX_DIR)
    caplog.set_level(logging.WARNING, logger="engine.index_keeper")
    third = open_service(config, embedder=embedder, clock=clock)
    try:
        assert "saved vector index is at change 2, " + BELOW_MARK in caplog.text
        assert "saved fast network is at change 2, " + BELOW_MARK in caplog.text
        assert third.keeper.rebuilt_at_start and third.keeper.network_rebuilt_at_start
        assert _mirror(third) == expected
        assert kept[1] not in _recalled(third, "sister in Porto")
    finally:
        third.close()


def test_an_idle_replica_catches_up_on_the_pruning_schedule(
    arcadedb: BoltTarget, tmp_path: Path, embedder: Any, clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    database = arcadedb.new_database()
    scheduled = {"lifecycle": {"change_log_prune_seconds": 60, "change_log_keep": 3}}
    opened = [
        open_service(
            load_config(env={}, data_dir=tmp_path / name, **arcadedb.config(database), **scheduled),
            embedder=embedder,
            clock=clock,
        )
        for name in ("replica-a", "replica-b")
    ]
    a, b = opened
    try:
        caplog.set_level(logging.WARNING, logger="engine.index_keeper")
        for round_ in range(3):
            _save(a, *(f"{WORDS[n]} beside {WORDS[n + round_ + 1]}" for n in range(5)))
            clock.advance(seconds=61)
            assert b.change_log_pruning is not None and b.change_log_pruning.run_due()
            assert b.keeper.index.applied_seq == a.store.last_seq()  # B served nothing, yet kept up
            assert b.store.low_water_seq() == a.store.last_seq() - 3
        assert BELOW_MARK not in caplog.text
        assert _mirror(b) == _mirror(a)
    finally:
        for service in opened:
            service.close()


def test_consolidation_does_not_purge_a_memory_another_replica_restored_since_its_read(
    replicas: list[MemoryService], clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = replicas
    (gone,) = _save(a, "the old address was five elm street")
    a.delete(NS, gone)
    clock.advance(days=31)  # past the purge age of a deleted memory
    purge = a.store.purge
    restored: list[Any] = []

    def restored_on_b_first(namespace: str, memory_id: str, **kwargs: Any) -> int:
        # a's consolidation read the deleted record and planned its purge; b restores it now.
        restored.append(b.rollbacks.restore(namespace, memory_id, actor="user"))
        return purge(namespace, memory_id, **kwargs)

    monkeypatch.setattr(a.store, "purge", restored_on_b_first)
    report = a.consolidator.run(NS)
    assert len(restored) == 1 and report.purged == 0
    kept = a.store.get(Scope.whole([NS]), gone)
    assert kept is not None and kept.version == restored[0].version == 3
    assert len(a.store.versions(Scope.whole([NS]), gone)) == 3


def test_a_conditional_hard_delete_does_not_purge_a_version_another_replica_wrote(
    replicas: list[MemoryService], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = replicas
    (memory_id,) = _save(a, "the locker code is one two three four")
    purge = a.store.purge

    def edited_on_b_first(namespace: str, memory_id: str, **kwargs: Any) -> int:
        b.update(namespace, memory_id, MemoryPatch(content="the locker code is nine eight seven six"))
        return purge(namespace, memory_id, **kwargs)

    monkeypatch.setattr(a.store, "purge", edited_on_b_first)
    with pytest.raises(VersionMismatch):
        a.delete(NS, memory_id, hard=True, expected_version=1)  # If-Match: "1": 412
    kept = a.store.get(Scope.whole([NS]), memory_id)
    assert kept is not None and kept.version == 2


def _edited_on_first(a: MemoryService, b: MemoryService, monkeypatch: pytest.MonkeyPatch, content: str) -> None:
    """Make a's next store update find that b edited the memory to ``content`` just before it."""
    update = a.store.update
    done: list[bool] = []

    def edited_on_b_first(memory: Any, *args: Any, **kwargs: Any) -> int:
        if not done:
            done.append(True)
            b.update(memory.namespace, memory.memory_id, MemoryPatch(content=content))
        return update(memory, *args, **kwargs)

    monkeypatch.setattr(a.store, "update", edited_on_b_first)


def test_an_edit_another_replica_beat_is_412_when_conditional_and_applied_on_top_when_not(
    replicas: list[MemoryService], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = replicas
    (memory_id,) = _save(a, "the meeting room is on floor two")
    _edited_on_first(a, b, monkeypatch, "the meeting room is on floor three")
    with pytest.raises(VersionMismatch) as refused:
        a.update(NS, memory_id, MemoryPatch(content="the meeting room is on floor four"), expected_version=1)
    assert refused.value.current_version == 2
    _edited_on_first(a, b, monkeypatch, "the meeting room is on floor five")
    edited = a.update(NS, memory_id, MemoryPatch(importance=0.9))  # unconditional: read again, applied
    assert (edited.version, edited.content, edited.importance) == (4, "the meeting room is on floor five", 0.9)
    assert [v.record.content for v in a.store.versions(Scope.whole([NS]), memory_id)][-2:] == [
        "the meeting room is on floor five",
        "the meeting room is on floor five",
    ]


def test_a_recall_ranked_before_another_thread_caught_up_ranks_again(
    replicas: list[MemoryService], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = replicas
    _save(a, "apple and basalt")
    _recalled(a, "apple")
    (written,) = _save(b, "cello dingo ember")  # a's network lacks it
    # Another thread (a save, a recall) catches a up while this recall ranks without it.
    reads = _recall_reads(a, monkeypatch, first=a.keeper.catch_up)
    assert written in _recalled(a, "cello dingo")
    assert reads == [2, 2]  # the first ranking lacked change 2, though the network had it by the read


def test_consolidation_skips_a_memory_another_replica_purged_since_its_read_and_goes_on(
    replicas: list[MemoryService], clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = replicas
    first, second = _save(a, "the old phone was a nokia", "the old car was a saab")
    a.delete(NS, first)
    a.delete(NS, second)
    clock.advance(days=31)
    purge = a.store.purge
    gone: list[str] = []

    def purged_on_b_first(namespace: str, memory_id: str, **kwargs: Any) -> int:
        if not gone:  # b purges the first of them for good just before a does
            gone.append(memory_id)
            b.delete(namespace, memory_id, hard=True)
        return purge(namespace, memory_id, **kwargs)

    monkeypatch.setattr(a.store, "purge", purged_on_b_first)
    report = a.consolidator.run(NS)
    assert report.purged == 1  # the other one: the run went on
    assert [o.status for o in report.outcomes if o.action.memory_id in gone] == ["skipped"]
    assert a.store.get(Scope.whole([NS]), first) is None and a.store.get(Scope.whole([NS]), second) is None


def _edit_on_b_before_as_next_write(
    a: MemoryService, b: MemoryService, memory_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replica ``b`` edits ``memory_id`` (its metadata) just before ``a``'s next store update."""
    update = a.store.update
    done: list[bool] = []

    def edited_on_b_first(memory: Any, *args: Any, **kwargs: Any) -> int:
        if not done:
            done.append(True)
            b.update(NS, memory_id, MemoryPatch(metadata={"checked": True}))
        return update(memory, *args, **kwargs)

    monkeypatch.setattr(a.store, "update", edited_on_b_first)


def test_an_edit_and_what_it_reinstates_land_together_when_another_replica_wrote_first(
    replicas: list[MemoryService], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reinstatement an edit decides was a second transaction: where it failed (here the
    older memory edited on another replica just before; a crash does the same), the edit had
    landed alone, and "I live in Berlin" stayed superseded by "The weather is nice today"."""
    a, b = replicas
    berlin, paris = _save(a, "I live in Berlin", "I moved to Paris")
    assert a.get(NS, berlin).status is Status.SUPERSEDED
    _edit_on_b_before_as_next_write(a, b, berlin, monkeypatch)
    edited = a.update(NS, paris, MemoryPatch(content="The weather is nice today"))
    assert edited.content == "The weather is nice today"
    back = a.get(NS, berlin)
    assert (back.status, back.metadata) == (Status.ACTIVE, {"checked": True})
    reasons = [v.reason for v in a.history(NS, berlin)]
    assert reasons[-1] == f"reinstated: {paris}, which superseded it, no longer replaces it"


def test_a_conditional_edit_is_not_refused_for_another_memorys_version(
    replicas: list[MemoryService], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An If-Match edit whose reinstatement found the older memory edited on another replica
    first was answered 412, as though the edited memory had moved, with the older one's
    version as its current one: the caller's condition held; the edit is read again and lands."""
    a, b = replicas
    berlin, paris = _save(a, "I live in Berlin", "I moved to Paris")
    _edit_on_b_before_as_next_write(a, b, berlin, monkeypatch)
    edited = a.update(NS, paris, MemoryPatch(content="The weather is nice today"), expected_version=1)
    assert (edited.version, edited.content) == (2, "The weather is nice today")
    assert a.get(NS, berlin).status is Status.ACTIVE


@pytest.mark.parametrize("expected_version", [None, 1])
def test_a_deletion_whose_reinstatement_meets_another_replicas_write_is_read_again_and_lands(
    replicas: list[MemoryService], monkeypatch: pytest.MonkeyPatch, expected_version: int | None
) -> None:
    """Deleting "I moved to Paris" while another replica edited "I live in Berlin", which the
    deletion reinstates, was answered 409 and deleted nothing, though the caller's request (and
    its If-Match, on Paris) held: the deletion is read again and lands, Berlin back with the edit."""
    a, b = replicas
    berlin, paris = _save(a, "I live in Berlin", "I moved to Paris")
    _edit_on_b_before_as_next_write(a, b, berlin, monkeypatch)
    deletion = a.delete(NS, paris, expected_version=expected_version)
    assert (deletion.memory.status, deletion.reinstated) == (Status.DELETED, (berlin,))
    back = a.get(NS, berlin)
    assert (back.status, back.metadata) == (Status.ACTIVE, {"checked": True})
    reasons = [v.reason for v in a.history(NS, berlin)]
    assert reasons[-1] == f"reinstated: {paris}, which superseded it, was deleted"


def test_a_deletion_after_another_replica_edited_the_memory_itself(
    replicas: list[MemoryService], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unconditional, the deletion is read again and deletes the edited version; with
    If-Match on the version read, it is a stale condition (412), and nothing changes."""
    a, b = replicas
    berlin, paris = _save(a, "I live in Berlin", "I moved to Paris")
    _edit_on_b_before_as_next_write(a, b, paris, monkeypatch)
    with pytest.raises(VersionMismatch):
        a.delete(NS, paris, expected_version=1)
    assert (a.get(NS, paris).status, a.get(NS, berlin).status) == (Status.ACTIVE, Status.SUPERSEDED)
    monkeypatch.undo()
    _edit_on_b_before_as_next_write(a, b, paris, monkeypatch)
    deletion = a.delete(NS, paris)
    # Saved, edited twice on b, deleted on a.
    assert (deletion.memory.status, deletion.memory.version, deletion.reinstated) == (Status.DELETED, 4, (berlin,))
