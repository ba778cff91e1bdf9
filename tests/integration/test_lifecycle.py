"""Consolidation, restore, rollback and re-embedding on a real SQLite file and HNSW index, frozen time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest

from engine import lifecycle, recall
from engine.adapters.sqlite_store import SqliteStore
from engine.codec import to_iso
from engine.config import Config, load_config
from engine.conflicts import CONTRADICTS, MERGED_INTO, SUPERSEDES
from engine.errors import Conflict, InvalidInput, MemoryNotFound, StoreError
from engine.lifecycle import Merge
from engine.ports import Edge
from engine.records import MemoryDraft, MemoryFilter, MemoryPatch, Reach, Scope, Source, Status, Visibility
from engine.service import MemoryService
from tests.conftest import HashingEmbedder
from tests.integration.conftest import count_calls

OpenService = Callable[..., MemoryService]
NS = "user-1"
# Two near-duplicates that consolidation merges and write-time dedup keeps apart (cosine
# 0.92-0.95 with the test model). The second adds words and says no other word where the
# first says one (one with "lemon" where the first said "honey" is not merged).
ALICES_TEAS = tuple(
    f"alice likes to drink hot green tea with {words} in the garden every single sunny morning"
    for words in ("honey", "honey and mint")
)


def draft(content: str, **fields: Any) -> MemoryDraft:
    fields.setdefault("namespace", NS)
    return MemoryDraft(content=content, **fields)


def recalled(service: MemoryService, query: str, **kwargs: Any) -> list[str]:
    kwargs.setdefault("namespaces", [NS])
    kwargs.setdefault("reinforce", False)
    return [hit.memory.memory_id for hit in service.recall(query, **kwargs).hits]


def small_pages(config: Config, **lifecycle: Any) -> Config:
    return load_config(env={}, data_dir=config.data_dir, lifecycle={"page_size": 2, "apply_batch": 2, **lifecycle})


# --- consolidate: archive, purge, merge --------------------------------------------------------


def test_consolidate_archives_faded_and_expired_memories_and_restore_brings_them_back(
    service: MemoryService, clock: Any
) -> None:
    faded = service.save(draft("buy oat milk on the way home", category="task")).memory
    expiring = service.save(draft("the door code is 4711 this week", expire_at=clock.now + timedelta(days=7))).memory
    lasting = service.save(draft("the user was born in Lisbon")).memory
    clock.advance(days=26)
    report = service.consolidator.run(NS)
    assert (report.archived, report.purged, report.merged, report.scanned) == (2, 0, 0, 3)
    for memory_id in (faded.memory_id, expiring.memory_id):
        archived = service.get(NS, memory_id)
        assert archived.status is Status.ARCHIVED and archived.version == 2
        assert service.history(NS, memory_id)[-1].reason.startswith("archived: ")
    assert service.get(NS, lasting.memory_id).status is Status.ACTIVE
    assert faded.memory_id not in recalled(service, "oat milk")
    assert faded.memory_id in recalled(service, "oat milk", flt=MemoryFilter(statuses=(Status.ARCHIVED,)))

    back = service.rollbacks.restore(NS, faded.memory_id)
    assert back.status is Status.ACTIVE and back.version == 3
    assert service.history(NS, faded.memory_id)[-1].reason == "restored from archived, its decay restarted"
    assert recalled(service, "oat milk")[0] == faded.memory_id
    # Restoring an active memory changes nothing; PATCH status=active restores too.
    assert service.rollbacks.restore(NS, faded.memory_id) == back
    service.update(NS, expiring.memory_id, MemoryPatch(status=Status.ACTIVE, clear_expire_at=True))
    assert recalled(service, "door code")[0] == expiring.memory_id


def test_a_memory_saved_as_important_starts_from_its_importance_and_fades_later(
    service: MemoryService, clock: Any
) -> None:
    """``importance`` was stored and nothing read it: an event saved with importance 1.0
    started from its source's 0.6 like any other and was archived with them. Without a
    base score of its own a memory now starts from its importance (the seed's initial
    importance); a base score given beside it still wins."""
    plain = service.save(draft("we had the team offsite at the lake", category="event")).memory
    important = service.save(draft("our daughter was born at the city hospital", category="event", importance=1.0))
    both = service.save(draft("the old office closed down", category="event", importance=1.0, base_score=0.3))
    assert (plain.base_score, important.memory.base_score, both.memory.base_score) == (0.6, 1.0, 0.3)
    # 120 days of a 30-day half-life: 0.6 -> 0.0375 and 0.3 -> 0.019 fade below 0.05, 1.0 -> 0.0625 does not.
    clock.advance(days=120)
    assert service.consolidator.run(NS).archived == 2
    assert service.get(NS, important.memory.memory_id).status is Status.ACTIVE
    assert service.get(NS, plain.memory_id).status is Status.ARCHIVED


def test_a_memory_restored_from_decay_is_not_archived_again_by_the_next_run(service: MemoryService, clock: Any) -> None:
    """Restore made a faded memory active with its decayed score as it was, still below the
    threshold: the next consolidation archived it again, the restore undone without a word."""
    faded = service.save(draft("buy oat milk on the way home", category="task")).memory
    clock.advance(days=40)
    assert service.consolidator.run(NS).archived == 1
    back = service.rollbacks.restore(NS, faded.memory_id)
    assert service.consolidator.run(NS).archived == 0
    assert recalled(service, "oat milk") == [faded.memory_id]
    assert back.status is Status.ACTIVE and back.last_accessed_at == clock.now
    assert service.history(NS, faded.memory_id)[-1].reason == "restored from archived, its decay restarted"
    # It fades again from the restore on, as a new memory does.
    clock.advance(days=40)
    assert service.consolidator.run(NS).archived == 1


def test_a_memory_restored_from_decay_keeps_the_base_score_its_restore_gave_it(
    service: MemoryService, clock: Any
) -> None:
    """Restore raised a faded memory's base score to a new memory's of its source, and
    answered with it, but the store kept the old one (an update keeps the stored base score
    unless it says it sets one): the restored memory read back with another score than the
    restore returned, and faded from the old, lower base."""
    faded = service.save(draft("buy oat milk on the way home", category="task", base_score=0.2)).memory
    clock.advance(days=40)
    assert service.consolidator.run(NS).archived == 1
    back = service.rollbacks.restore(NS, faded.memory_id)
    initial = service.config.scoring.initial_score(Source.USER_INPUT)
    assert back.base_score == initial
    stored = service.get(NS, faded.memory_id)
    assert (stored.base_score, stored.last_accessed_at) == (initial, clock.now)
    assert service.history(NS, faded.memory_id)[-1].record.base_score == initial
    # It fades as a new memory of its source would: still in recall after 20 days (0.6 → 0.083).
    clock.advance(days=20)
    assert service.consolidator.run(NS).archived == 0


def test_a_deleted_or_merged_memory_restored_after_its_score_faded_is_not_archived_by_the_next_run(
    service: MemoryService, clock: Any
) -> None:
    """Only a memory restored from archived had its decay restarted. One restored from its
    deletion, or a merge undone as the README says (delete the merged memory, restore its
    sources), came back active with the score it had faded to meanwhile, below the threshold:
    the next consolidation archived it, the restore undone without a word."""
    deleted = service.save(draft("the kettle is on the top shelf today", category="state")).memory
    one, two = ALICES_TEAS
    sources = [service.save(draft(text, entities=["Alice"], category="task")).memory for text in (one, two)]
    clock.advance(days=1)
    service.delete(NS, deleted.memory_id)
    (outcome,) = service.consolidator.run(NS).outcomes
    assert isinstance(outcome.action, Merge)
    clock.advance(days=28)  # within the retention of the deleted memories
    service.delete(NS, outcome.action.merged.memory_id)
    for memory in (deleted, *sources):
        back = service.rollbacks.restore(NS, memory.memory_id)
        assert back.status is Status.ACTIVE
        assert service.history(NS, memory.memory_id)[-1].reason.endswith("its decay restarted")

    report = service.consolidator.run(NS)
    assert report.archived == 0
    assert {service.get(NS, m.memory_id).status for m in (deleted, *sources)} == {Status.ACTIVE}


def test_a_faded_memory_rolled_back_to_an_active_version_is_not_archived_by_the_next_run(
    service: MemoryService, clock: Any
) -> None:
    """A rollback that made a faded memory active again (out of its archiving, out of its
    deletion, a namespace rolled back to before either) left its decayed score as it was,
    below the threshold: the next consolidation archived all three again, the rollback
    undone without a word, as a restore was before its decay restarted."""
    archived, deleted, rolled = (
        service.save(draft(text, category="task")).memory
        for text in ("buy oat milk on the way home", "call the plumber about the sink", "renew the gym card")
    )
    start = clock.now
    clock.advance(days=1)
    service.delete(NS, deleted.memory_id)
    clock.advance(days=28)  # within the retention of the deleted memory
    assert service.consolidator.run(NS).archived == 2
    for memory in (archived, deleted):
        back = service.rollbacks.to_version(NS, memory.memory_id, 1)
        assert back.status is Status.ACTIVE and back.last_accessed_at == clock.now
        assert service.history(NS, memory.memory_id)[-1].reason.endswith("its decay restarted")
    report = service.rollbacks.to_time(NS, start + timedelta(hours=1))
    assert rolled.memory_id in report.restored
    assert service.get(NS, rolled.memory_id).last_accessed_at == clock.now

    assert service.consolidator.run(NS).archived == 0
    assert {service.get(NS, m.memory_id).status for m in (archived, deleted, rolled)} == {Status.ACTIVE}
    assert archived.memory_id in recalled(service, "oat milk")


def test_consolidate_purges_soft_deleted_memories_after_the_retention_period(
    service: MemoryService, clock: Any
) -> None:
    gone = service.save(draft("an old address")).memory
    service.delete(NS, gone.memory_id)
    clock.advance(days=29)
    assert service.consolidator.run(NS).purged == 0
    assert service.store.get(Scope.whole([NS]), gone.memory_id) is not None
    clock.advance(days=2)
    report = service.consolidator.run(NS)
    assert report.purged == 1
    assert service.store.get(Scope.whole([NS]), gone.memory_id) is None
    assert service.store.versions(Scope.whole([NS]), gone.memory_id) == []


def test_a_purge_keeps_the_chain_that_ran_through_the_purged_memory(service: MemoryService, clock: Any) -> None:
    """Berlin ← Paris ← Lisbon, Paris deleted while superseded: its purge took both links, so
    deleting Lisbon later left Berlin superseded by nothing, out of recall for good."""
    berlin, paris, lisbon = (
        r.memory
        for r in service.save_batch([draft("I live in Berlin"), draft("I moved to Paris"), draft("I moved to Lisbon")])
    )
    assert service.get(NS, berlin.memory_id).status is Status.SUPERSEDED
    service.delete(NS, paris.memory_id)
    clock.advance(days=31)
    assert service.consolidator.run(NS).purged == 1
    links = {(e.src, e.dst, e.kind) for e in service.store.edges(Scope.whole([NS]), berlin.memory_id)}
    assert links == {(lisbon.memory_id, berlin.memory_id, SUPERSEDES)}
    assert service.delete(NS, lisbon.memory_id).reinstated == (berlin.memory_id,)
    assert service.get(NS, berlin.memory_id).status is Status.ACTIVE


def test_a_purge_carries_no_link_past_a_memory_that_no_longer_hid_the_older_one(
    service: MemoryService, clock: Any
) -> None:
    """ "I moved to Paris" edited into "I work at Google" brought Berlin back; Rome superseded
    Berlin since, Acme the edited memory. Purging that memory carried its stale link on as
    Acme → Berlin, so deleting Rome left Berlin superseded by an employer."""
    berlin = service.save(draft("I live in Berlin")).memory
    paris = service.save(draft("I moved to Paris")).memory
    service.update(NS, paris.memory_id, MemoryPatch(content="I work at Google"))
    assert service.get(NS, berlin.memory_id).status is Status.ACTIVE
    rome = service.save(draft("I moved to Rome")).memory
    acme = service.save(draft("I work at Acme")).memory
    assert service.get(NS, berlin.memory_id).status is Status.SUPERSEDED
    assert service.get(NS, paris.memory_id).status is Status.SUPERSEDED
    service.delete(NS, paris.memory_id)
    clock.advance(days=31)
    assert service.consolidator.run(NS).purged == 1
    links = {(e.src, e.dst) for e in service.store.edges(Scope.whole([NS]), berlin.memory_id) if e.kind == SUPERSEDES}
    assert links == {(rome.memory_id, berlin.memory_id)}
    assert acme.memory_id not in {src for src, _ in links}
    assert service.delete(NS, rome.memory_id).reinstated == (berlin.memory_id,)
    assert service.get(NS, berlin.memory_id).status is Status.ACTIVE


def test_consolidate_merges_near_duplicates_sharing_an_entity(service: MemoryService, clock: Any) -> None:
    one, two = ALICES_TEAS
    cosine = float(service.embedder.embed_query(one) @ service.embedder.embed_query(two))
    assert 0.92 <= cosine < 0.95  # merged by consolidation, yet not deduplicated at write time
    first = service.save(draft(one, entities=["Alice"])).memory
    clock.advance(days=1)
    second = service.save(draft(two, entities=["alice", "tea"])).memory
    other = service.save(draft(one.replace("alice", "bob"), entities=["Bob"])).memory
    assert second.memory_id != first.memory_id
    service.recall("alice green tea", namespaces=[NS], top_k=1)
    service.flush()
    clock.advance(days=1)

    report = service.consolidator.run(NS)
    assert (report.merged, report.merged_sources, report.archived) == (1, 2, 0)
    (outcome,) = report.outcomes
    assert isinstance(outcome.action, Merge) and outcome.status == "applied"
    merged = service.get(NS, outcome.action.merged.memory_id)
    assert merged.content == f"{one}\n{two}"
    assert merged.created_at == first.created_at
    assert merged.access_count == 1  # one recall reinforced one of the sources
    assert set(merged.entities) == {"Alice", "tea"}
    for source in (first, second):
        kept = service.get(NS, source.memory_id)
        assert kept.status is Status.SUPERSEDED
        assert service.history(NS, source.memory_id)[-1].reason == f"merged into {merged.memory_id}"
        edges = service.store.edges(Scope.whole([NS]), source.memory_id)
        assert [(e.src, e.dst, e.kind) for e in edges] == [(source.memory_id, merged.memory_id, MERGED_INTO)]
    hits = recalled(service, one, top_k=10)
    assert merged.memory_id in hits and first.memory_id not in hits and second.memory_id not in hits
    assert service.get(NS, other.memory_id).status is Status.ACTIVE
    # A second run finds nothing more to do.
    again = service.consolidator.run(NS)
    assert (again.merged, again.archived, again.purged) == (0, 0, 0)
    # Restored sources are near-duplicates of each other: they merge again, into their merged
    # memory (the same id), still active and saying what they say. Not with it: each says
    # "morning" once, the merged memory twice, and a text with a marker more is not merged.
    for source in (first, second):
        service.rollbacks.restore(NS, source.memory_id)
    remerged = service.consolidator.run(NS)
    assert (remerged.merged, remerged.merged_sources, remerged.skipped) == (1, 2, 0)
    (outcome,) = remerged.outcomes
    assert isinstance(outcome.action, Merge) and outcome.action.merged.memory_id == merged.memory_id
    rejoined = service.get(NS, merged.memory_id)
    assert (rejoined.content, rejoined.status) == (f"{one}\n{two}", Status.ACTIVE)
    assert {service.get(NS, s.memory_id).status for s in (first, second)} == {Status.SUPERSEDED}
    # A merged memory that was deleted does not take its sources back.
    for source in (first, second):
        service.rollbacks.restore(NS, source.memory_id)
    service.delete(NS, merged.memory_id)
    refused = service.consolidator.run(NS)
    assert (refused.merged, refused.skipped) == (0, 1)
    assert {service.get(NS, s.memory_id).status for s in (first, second)} == {Status.ACTIVE}


def test_restored_sources_do_not_rejoin_a_merged_memory_that_no_longer_holds_their_text(
    service: MemoryService, clock: Any
) -> None:
    """Sources merged, their merged memory edited to say something else, the sources restored:
    the next run planned the same merge again (the merged id comes from the source ids) and,
    the merged memory being active, superseded the sources into it. Their text then sat in no
    active memory: out of recall, linked to a memory that no longer says it."""
    one, two = ALICES_TEAS
    sources = [service.save(draft(text, entities=["Alice"])).memory for text in (one, two)]
    clock.advance(days=1)
    (outcome,) = service.consolidator.run(NS).outcomes
    assert isinstance(outcome.action, Merge)
    merged = outcome.action.merged.memory_id
    service.update(NS, merged, MemoryPatch(content="bob keeps bees on the roof", category="event"))
    for source in sources:
        service.rollbacks.restore(NS, source.memory_id)

    report = service.consolidator.run(NS)
    assert (report.merged, report.skipped) == (0, 1)
    assert "says something else" in (report.outcomes[0].detail or "")
    assert [service.get(NS, m.memory_id).status for m in sources] == [Status.ACTIVE, Status.ACTIVE]
    assert {m.memory_id for m in sources} <= set(recalled(service, one, top_k=10))
    assert service.get(NS, merged).content == "bob keeps bees on the roof"


def test_restored_sources_do_not_rejoin_a_merged_memory_whose_score_faded(
    open_svc: OpenService, config: Config, clock: Any
) -> None:
    """Sources merged, left unused until their merged memory's score faded, then restored (their
    decay restarted): a run whose pages put the sources before their merged memory superseded
    them into it, then archived it for its faded score, so the text the user had just brought
    back left recall in the run right after. A faded merged memory does not take them back."""
    service = open_svc(config=small_pages(config))
    one, two = ALICES_TEAS
    sources = [service.save(draft(text, entities=["Alice"], category="task")).memory for text in (one, two)]
    clock.advance(days=1)
    (outcome,) = service.consolidator.run(NS).outcomes
    assert isinstance(outcome.action, Merge)
    merged = outcome.action.merged.memory_id
    assert merged > max(m.memory_id for m in sources)  # scanned on a later page than the sources
    clock.advance(days=40)  # no run meanwhile: the merged memory faded, still active
    for source in sources:
        service.rollbacks.restore(NS, source.memory_id)

    planned = service.consolidator.run(NS, dry_run=True)
    report = service.consolidator.run(NS)
    joined = f"near-duplicates (cosine ≥ {outcome.action.cosine:.3f}) sharing an entity"
    faded = "score 0.0104 fell below the archive threshold 0.05 of 'task'"
    refused = f"their merged memory exists and is due for archiving: {faded}"
    assert [(o.action.reason, o.status, o.detail) for o in report.outcomes] == [
        (joined, "skipped", refused),
        (faded, "applied", None),
    ]
    assert [(o.action.reason, o.status, o.detail) for o in planned.outcomes] == [
        (joined, "skipped", refused),
        (faded, "planned", None),
    ]
    assert [service.get(NS, m.memory_id).status for m in sources] == [Status.ACTIVE, Status.ACTIVE]
    assert service.get(NS, merged).status is Status.ARCHIVED
    assert {m.memory_id for m in sources} <= set(recalled(service, one, top_k=10))


def test_a_dry_run_reports_a_merge_whose_deleted_merged_memory_the_run_purges_first_as_planned(
    service: MemoryService, clock: Any
) -> None:
    """A merge undone (merged memory deleted, sources restored), then the retention passed: the
    run purges the deleted merged memory and then merges the sources anew, but the dry run
    read the deleted memory still stored and reported the merge skipped."""
    one, two = ALICES_TEAS
    sources = [service.save(draft(text, entities=["Alice"])).memory for text in (one, two)]
    clock.advance(days=1)
    (outcome,) = service.consolidator.run(NS).outcomes
    assert isinstance(outcome.action, Merge)
    service.delete(NS, outcome.action.merged.memory_id)
    for source in sources:
        service.rollbacks.restore(NS, source.memory_id)
    clock.advance(days=31)  # past the retention of the deleted merged memory

    planned = service.consolidator.run(NS, dry_run=True)
    report = service.consolidator.run(NS)
    assert [(type(o.action), o.status, o.detail) for o in planned.outcomes] == [
        (lifecycle.Purge, "planned", None),
        (Merge, "planned", None),
    ]
    assert [(type(o.action), o.status, o.detail) for o in report.outcomes] == [
        (lifecycle.Purge, "applied", None),
        (Merge, "applied", None),
    ]


def test_restored_sources_do_not_rejoin_a_merged_memory_made_private_or_otherwise_edited(
    service: MemoryService, clock: Any
) -> None:
    """The merged memory's writer made it private (or gave it an expiry, another category,
    a key or other entities), the sources were restored: the next run superseded the shared sources into it again,
    their text unchanged, so every other member of the namespace lost it from recall (or it
    left recall with the merged memory's expiry)."""
    one, two = ALICES_TEAS
    edits = {
        "private": MemoryPatch(visibility=Visibility.PRIVATE),
        "expiring": MemoryPatch(expire_at=clock.now + timedelta(days=3)),
        "event": MemoryPatch(category="event"),
        "keyed": MemoryPatch(key="tea"),  # the next save of that key supersedes it
        "entities": MemoryPatch(entities=("Bob",)),  # no longer found by Alice
    }
    kept: dict[str, list[str]] = {}
    for namespace, patch in edits.items():
        sources = [
            service.save(draft(t, entities=["Alice"], actor="bob", namespace=namespace)).memory for t in (one, two)
        ]
        kept[namespace] = [m.memory_id for m in sources]
        clock.advance(days=1)
        (outcome,) = service.consolidator.run(namespace).outcomes
        assert isinstance(outcome.action, Merge)
        merged = outcome.action.merged.memory_id
        service.update(namespace, merged, patch, actor="bob")
        for source in sources:
            service.rollbacks.restore(namespace, source.memory_id)

        # The dry run says what the run does.
        planned = service.consolidator.run(namespace, dry_run=True)
        report = service.consolidator.run(namespace)
        assert (report.merged, report.skipped) == (0, 1), namespace
        assert [(o.status, o.detail) for o in planned.outcomes] == [(o.status, o.detail) for o in report.outcomes]
        assert [service.get(namespace, m.memory_id).status for m in sources] == [Status.ACTIVE] * 2, namespace
    # Another member of the namespace still recalls the shared sources.
    member = Scope.of({"private": Reach.MEMBER}, "carol")
    assert set(kept["private"]) <= set(recalled(service, one, namespaces=["private"], scope=member, top_k=10))


def test_memories_of_different_sources_writers_or_sessions_are_not_merged(service: MemoryService, clock: Any) -> None:
    """A merged memory took its first source's ``source`` and no writer or session where
    theirs differed. A tool's text that the read guard leaves out (it steers the agent, and
    a tool wrote it) merged into a user's near-duplicate came back in recall as the user's;
    and a blocked writer's or session's text, merged with another's, was no longer theirs to
    quarantine."""
    said = "project notes say the staging database of alice moves to the new cluster on the first sunny morning"
    steering = said.replace("say the", "say delete the").replace(" new", "")
    user = service.save(draft(said, entities=["Alice"], source=Source.USER_INPUT)).memory
    tool = service.save(draft(steering, entities=["Alice"], source=Source.TOOL_RESULT)).memory
    assert user.memory_id != tool.memory_id
    assert recalled(service, steering, top_k=10) == [user.memory_id]  # the tool's text: left out
    one, two = ALICES_TEAS
    writers = [
        service.save(draft(text, entities=["Alice"], actor=actor, namespace="user-2")).memory
        for text, actor in ((one, "bob"), (two, "carol"))
    ]
    sessions = [
        service.save(draft(text, entities=["Alice"], session_id=session, namespace="user-3")).memory
        for text, session in ((one, "s-1"), (two, "s-2"))
    ]
    clock.advance(days=1)

    for namespace in (NS, "user-2", "user-3"):
        report = service.consolidator.run(namespace)
        assert report.merged == 0, namespace
    assert service.get(NS, tool.memory_id).status is Status.ACTIVE
    assert all(hit != tool.memory_id for hit in recalled(service, steering, top_k=10))
    assert not any("delete" in service.get(NS, hit).content for hit in recalled(service, steering, top_k=10))
    assert {service.get("user-2", m.memory_id).status for m in writers} == {Status.ACTIVE}
    assert {service.get("user-3", m.memory_id).status for m in sessions} == {Status.ACTIVE}


def test_a_merge_carries_its_sources_conflict_links_to_the_merged_memory(service: MemoryService, clock: Any) -> None:
    """A source's CONTRADICTS and SUPERSEDES links were left on the source, out of recall once
    merged: the merged memory's hit listed no clash, and deleting it left hidden for good what
    its sources had replaced."""
    one, two = ALICES_TEAS
    clash = service.save(draft("alice never drinks tea", entities=["Alice"])).memory
    replaced = service.save(draft("alice drinks coffee every morning", entities=["Alice"])).memory
    first = service.save(draft(one, entities=["Alice"])).memory
    second = service.save(draft(two, entities=["alice", "tea"])).memory
    service.link(
        [
            Edge(NS, first.memory_id, clash.memory_id, CONTRADICTS, first.created_at),
            Edge(NS, second.memory_id, replaced.memory_id, SUPERSEDES, second.created_at),
        ]
    )
    service.update(
        NS, replaced.memory_id, MemoryPatch(status=Status.SUPERSEDED), reason=f"superseded by {second.memory_id}"
    )
    clock.advance(days=1)

    report = service.consolidator.run(NS)
    assert (report.merged, report.merged_sources) == (1, 2)
    (outcome,) = report.outcomes
    assert isinstance(outcome.action, Merge)
    merged = outcome.action.merged.memory_id
    links = {(e.src, e.dst, e.kind) for e in service.store.edges(Scope.whole([NS]), merged)}
    assert {(merged, clash.memory_id, CONTRADICTS), (merged, replaced.memory_id, SUPERSEDES)} <= links
    result = service.recall(one, namespaces=[NS], top_k=10, reinforce=False)
    assert result.contradicts[merged] == [clash.memory_id]
    assert [m.memory_id for m in service.chain(NS, replaced.memory_id)] == [merged, replaced.memory_id]
    # Deleting the merged memory brings back what its sources replaced, not the sources.
    assert service.delete(NS, merged).reinstated == (replaced.memory_id,)
    assert service.get(NS, replaced.memory_id).status is Status.ACTIVE
    assert {service.get(NS, m.memory_id).status for m in (first, second)} == {Status.SUPERSEDED}


def test_a_merge_lands_whole_or_not_at_all(service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = ALICES_TEAS
    sources = [service.save(draft(text, entities=["Alice"])).memory for text in (one, two)]
    seq = service.store.last_seq()
    real, calls = SqliteStore._update_row, []

    def failing(self: SqliteStore, *args: Any, **kwargs: Any) -> int:
        calls.append(1)
        if len(calls) == 2:  # the second source: the disk fills up halfway through the merge
            raise StoreError("database or disk is full")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SqliteStore, "_update_row", failing)
    with pytest.raises(StoreError):
        service.consolidator.run(NS)
    monkeypatch.undo()
    assert service.store.last_seq() == seq
    assert [service.get(NS, m.memory_id).status for m in sources] == [Status.ACTIVE, Status.ACTIVE]
    assert all(service.store.edges(Scope.whole([NS]), m.memory_id) == [] for m in sources)
    assert len(service.list_page([NS], MemoryFilter(statuses=())).items) == 2  # no merged memory either
    assert service.consolidator.run(NS).merged == 1  # and the next run merges them


def test_dry_run_reports_the_plan_and_changes_nothing(service: MemoryService, clock: Any) -> None:
    service.save(draft("water the basil", category="task"))
    service.save(draft("alice likes green tea every single morning", entities=["Alice"]))
    service.save(draft("alice likes green tea every single morning too", entities=["Alice"]))
    gone = service.save(draft("an old address")).memory
    service.delete(NS, gone.memory_id)
    clock.advance(days=40)
    seq = service.store.last_seq()
    report = service.consolidator.run(NS, dry_run=True)
    assert (report.archived, report.purged, report.merged) == (1, 1, 1)
    assert {o.status for o in report.outcomes} == {"planned"}
    assert service.store.last_seq() == seq
    assert service.consolidator.run(NS).archived == 1


def test_consolidate_walks_pages_and_finds_merge_partners_on_other_pages(
    open_svc: OpenService, config: Config, clock: Any
) -> None:
    service = open_svc(config=small_pages(config))
    saved = [
        service.save(draft(f"note {word} about the old garden shed", entities=["shed"])).memory for word in "abcdefg"
    ]
    twin = service.save(draft("note a about the old garden shed there", entities=["shed"])).memory
    clock.advance(days=1)
    report = service.consolidator.run(NS)
    assert report.scanned >= 8
    assert report.merged >= 1
    merged_ids = {o.action.source_ids for o in report.outcomes if isinstance(o.action, Merge)}
    assert any({saved[0].memory_id, twin.memory_id} <= set(ids) for ids in merged_ids)
    statuses = [service.get(NS, m.memory_id).status for m in [*saved, twin]]
    assert statuses.count(Status.SUPERSEDED) == report.merged_sources


def test_a_run_merges_what_its_dry_run_plans_and_no_more(open_svc: OpenService, config: Config, clock: Any) -> None:
    # B is a near-duplicate of A and of C, C is none of A: a plan merges A and B (A is the
    # earliest) and leaves C. A run applied A + B on its first page, then found the memory it
    # had just made a partner of C on the next and merged the two: one merge more than the
    # dry run that was read before it said.
    a = "alice likes to drink hot green tea in the garden every single sunny morning"
    b = f"{a} often spice"
    c = "alice likes drink hot green tea in the garden every single sunny morning often honey spice"
    service = open_svc(config=small_pages(config))
    first, second, third = (service.save(draft(text, entities=["Alice"])).memory for text in (a, b, c))
    clock.advance(hours=1)
    planned = service.consolidator.run(NS, dry_run=True)
    done = service.consolidator.run(NS)
    merges = [(o.action.source_ids, o.status) for o in planned.outcomes if isinstance(o.action, Merge)]
    assert merges == [((first.memory_id, second.memory_id), "planned")]
    assert [(o.action.source_ids, o.status) for o in done.outcomes if isinstance(o.action, Merge)] == [
        (ids, "applied") for ids, _ in merges
    ]
    assert service.get(NS, third.memory_id).status is Status.ACTIVE
    # The next run plans C with the merged memory, and says so before it does it.
    (again,) = service.consolidator.run(NS, dry_run=True).outcomes
    assert isinstance(again.action, Merge) and third.memory_id in again.action.source_ids


@pytest.mark.parametrize(
    ("scan_max", "large", "deleted"),
    [(lifecycle.PARTNER_SCAN_MAX, False, 0), (1, False, 0), (1, True, 0), (10, True, 6)],
    ids=["shared", "wide", "large", "deleted"],
)
def test_merge_partners_on_other_pages_are_found_however_many_namespaces_hold_the_same_text(
    open_svc: OpenService,
    config: Config,
    clock: Any,
    monkeypatch: pytest.MonkeyPatch,
    scan_max: int,
    large: bool,
    deleted: int,
) -> None:
    # Forty other users said both sentences: the nearest memories of the whole index are
    # theirs, and the partner one page later in this namespace must still be found, by the
    # entity it shares, or, past ``PARTNER_SCAN_MAX``, among the namespace's own nearest;
    # ``large``: planned as a namespace of thousands is (a search of the whole index);
    # ``deleted``: memories naming the entities that are gone, which count for nothing
    # (the pair names two, each held by 8 rows, 16 in all, 4 of them active).
    monkeypatch.setattr(lifecycle, "PARTNER_SCAN_MAX", scan_max)
    if large:
        monkeypatch.setattr(recall, "EXACT_DIRECT", 4)
        monkeypatch.setattr(recall, "SCAN_US_PER_ROW", 1e6)
        monkeypatch.setattr(recall, "ROUGH_SCAN_US_PER_ROW", 1e6)
    service = open_svc(config=small_pages(config))
    one, two = ALICES_TEAS
    for i in range(40):
        service.save_batch([draft(text, namespace=f"other-{i}", entities=["Alice"]) for text in (one, two)])
    names = ["Alice", "Bob"] if deleted else ["Alice"]
    for number in range(deleted):
        gone = service.save(draft(f"alice said thing number {number} about the weather", entities=names))
        service.delete(NS, gone.memory.memory_id)
    first = service.save(draft(one, entities=names)).memory
    for word in "abcdef":
        service.save(draft(f"note {word} about the old garden shed", entities=["shed"]))
    second = service.save(draft(two, entities=names)).memory
    clock.advance(days=1)
    if deleted:  # under the limit once those are left out: no search
        monkeypatch.setattr(recall.Recaller, "nearest_many", lambda *args, **kwargs: pytest.fail("searched"))
    report = service.consolidator.run(NS, dry_run=True)
    merges = [o.action.source_ids for o in report.outcomes if isinstance(o.action, Merge)]
    assert {first.memory_id, second.memory_id} in [set(ids) for ids in merges]
    assert all(service.store.get(Scope.whole([NS]), i) for ids in merges for i in ids)  # none of another namespace


def test_consolidate_is_safe_beside_writes_and_recalls(open_svc: OpenService, config: Config, clock: Any) -> None:
    service = open_svc(config=small_pages(config))
    old = [service.save(draft(f"errand number {n}", category="task")).memory for n in range(20)]
    clock.advance(days=30)
    stop = threading.Event()
    written: list[str] = []

    def traffic() -> None:
        n = 0
        while not stop.is_set():
            written.append(service.save(draft(f"fresh thought {n}")).memory.memory_id)
            # Without reinforcement: a recalled errand would rightly stay above the threshold.
            service.recall("errand", namespaces=[NS], top_k=5, reinforce=False)
            n += 1

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(traffic) for _ in range(2)]
        try:
            report = service.consolidator.run(NS)
        finally:
            stop.set()
        for future in futures:
            future.result()
    service.flush()
    assert report.archived + report.skipped == len({m.memory_id for m in old})
    assert all(service.get(NS, m.memory_id).status is Status.ARCHIVED for m in old) or report.skipped
    assert all(service.get(NS, memory_id).status is Status.ACTIVE for memory_id in written)
    assert service.reinforcer.failures == 0


def test_the_schedule_runs_consolidation_of_every_namespace_when_due(
    open_svc: OpenService, config: Config, clock: Any
) -> None:
    hourly = load_config(env={}, data_dir=config.data_dir, lifecycle={"consolidate_every_minutes": 60})
    service = open_svc(config=hourly)
    task = service.save(draft("call the plumber", category="task")).memory
    elsewhere = service.save(draft("call the plumber", category="task", namespace="user-2")).memory
    assert service.schedule is not None
    clock.advance(days=30)
    # The first run is one interval after start; the frozen clock says it is due now.
    assert service.schedule.run_due()
    assert service.schedule.runs == 1 and service.schedule.failures == 0
    assert service.get(NS, task.memory_id).status is Status.ARCHIVED
    assert service.get("user-2", elsewhere.memory_id).status is Status.ARCHIVED
    assert not service.schedule.run_due()


def test_no_schedule_by_default(service: MemoryService) -> None:
    assert service.schedule is None


@pytest.mark.parametrize("namespace", ["", "bad namespace!"])
def test_consolidate_refuses_a_bad_namespace(service: MemoryService, namespace: str) -> None:
    with pytest.raises(InvalidInput):
        service.consolidator.run(namespace)


def test_restore_of_unknown_or_quarantined_memories_is_refused(service: MemoryService) -> None:
    with pytest.raises(MemoryNotFound):
        service.rollbacks.restore(NS, "no-such-id")
    m = service.save(draft("suspicious text")).memory
    service.update(NS, m.memory_id, MemoryPatch(status=Status.QUARANTINED))
    with pytest.raises(Conflict):
        service.rollbacks.restore(NS, m.memory_id)
    assert service.get(NS, m.memory_id).status is Status.QUARANTINED


# --- versions and rollback ------------------------------------------------------------------


def test_roll_a_memory_back_to_a_version_as_a_new_version(service: MemoryService, clock: Any) -> None:
    m = service.save(draft("the user lives in Porto", entities=["Porto"])).memory
    clock.advance(hours=1)
    service.update(NS, m.memory_id, MemoryPatch(content="the user lives in Berlin", entities=("Berlin",)))
    clock.advance(hours=1)
    back = service.rollbacks.to_version(NS, m.memory_id, 1, actor="agent-7")
    assert (back.content, back.entities, back.version) == ("the user lives in Porto", ("Porto",), 3)
    history = service.history(NS, m.memory_id)
    assert [(v.version, v.reason, v.changed_by) for v in history][-1] == (3, "rolled back to version 1", "agent-7")
    assert history[-1].changed_at == clock.now
    assert recalled(service, "lives in Porto")[0] == m.memory_id
    # The rollback itself can be rolled back.
    assert service.rollbacks.to_version(NS, m.memory_id, 2).content == "the user lives in Berlin"
    with pytest.raises(InvalidInput):
        service.rollbacks.to_version(NS, m.memory_id, 9)
    with pytest.raises(MemoryNotFound):
        service.rollbacks.to_version(NS, "no-such-id", 1)


def test_a_deleted_memory_rolled_back_to_an_active_version_is_superseded_as_a_restore_leaves_it(
    service: MemoryService, clock: Any
) -> None:
    """ "I live in Berlin" deleted while "I moved to Paris" superseded it, then rolled back
    to its first version: it came back active beside Paris, where a restore brings it back
    superseded by Paris. A rollback out of deleted reads the supersession as a restore does;
    one to a version that said something else than when Paris replaced it hides nothing."""
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(minutes=5)
    paris = service.save(draft("I moved to Paris")).memory.memory_id
    assert service.get(NS, berlin).status is Status.SUPERSEDED
    clock.advance(minutes=5)
    service.delete(NS, berlin)
    clock.advance(minutes=5)
    back = service.rollbacks.to_version(NS, berlin, 1)
    assert (back.status, back.version) == (Status.SUPERSEDED, 4)
    assert (service.history(NS, berlin)[-1].reason or "").startswith(f"superseded by {paris}")
    assert recalled(service, "where do I live") == [paris]
    # The link holds as before: deleting Paris brings Berlin back.
    assert service.delete(NS, paris).reinstated == (berlin,)
    assert service.get(NS, berlin).status is Status.ACTIVE

    # Edited while active, then replaced and deleted: rolled back to the text before the
    # edit, which Paris never replaced as such, it comes back active.
    porto = service.save(draft("I live in Porto", namespace="n2")).memory.memory_id
    service.update("n2", porto, MemoryPatch(content="I live in Porto, by the river"))
    clock.advance(minutes=5)
    lisbon = service.save(draft("I moved to Lisbon", namespace="n2"))
    assert lisbon.superseded == (porto,)
    service.delete("n2", porto)
    assert service.rollbacks.to_version("n2", porto, 1).status is Status.ACTIVE


@pytest.mark.parametrize("how", ["restore", "rollback"])
def test_a_memory_deleted_and_brought_back_twice_under_a_newer_one_is_superseded_both_times(
    service: MemoryService, clock: Any, how: str
) -> None:
    """ "I live in Berlin", superseded by "I moved to Paris", deleted and brought back (a
    restore, or a rollback to its first version) came back superseded by Paris; deleted and
    brought back once more, it came back active beside Paris: the version that brought it
    back superseded names Paris otherwise than the supersession did, and was read
    as a change of it. Nothing but deletions and restores between: superseded again."""
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(minutes=5)
    paris = service.save(draft("I moved to Paris")).memory.memory_id
    for _ in range(2):
        clock.advance(minutes=5)
        service.delete(NS, berlin)
        clock.advance(minutes=5)
        if how == "restore":
            back = service.rollbacks.restore(NS, berlin)
        else:
            back = service.rollbacks.to_version(NS, berlin, 1)
        assert back.status is Status.SUPERSEDED
    assert recalled(service, "where do I live") == [paris]
    # The link holds as before: deleting Paris brings Berlin back.
    assert service.delete(NS, paris).reinstated == (berlin,)


@pytest.mark.parametrize("then", ["edited", "deleted"])
def test_a_memory_superseded_by_two_is_back_once_neither_replaces_it(
    service: MemoryService, clock: Any, then: str
) -> None:
    """ "I live in Lisbon" superseded by both "I live in Paris" and "I live in Rome" (flagged
    from both, marked superseded on review). Paris edited into "The weather is nice today":
    Rome still replaced Lisbon. Then Rome edited into "I like green tea" (or deleted): Paris
    was read as still replacing Lisbon, its link made before its edit, and Lisbon stayed
    superseded by memories that replace it no more: nothing about the home recalled. A
    memory edited since its link is judged on its text now, by the rules."""
    paris = service.save(draft("I live in Paris")).memory.memory_id
    rome = service.save(draft("I live in Rome", conflicts="off")).memory.memory_id
    lisbon = service.save(
        draft("I live in Lisbon", conflicts="flag", created_at=clock.now - timedelta(hours=5))
    ).memory.memory_id
    assert {e.src for e in service.store.edges(Scope.whole([NS]), lisbon) if e.kind == SUPERSEDES} == {paris, rome}
    service.update(NS, lisbon, MemoryPatch(status=Status.SUPERSEDED), reason="flag reviewed")
    clock.advance(minutes=5)
    service.update(NS, paris, MemoryPatch(content="The weather is nice today"))
    assert service.get(NS, lisbon).status is Status.SUPERSEDED  # Rome replaces it still
    clock.advance(minutes=5)
    if then == "edited":
        service.update(NS, rome, MemoryPatch(content="I like green tea"))
    else:
        assert service.delete(NS, rome).reinstated == (lisbon,)
    assert service.get(NS, lisbon).status is Status.ACTIVE
    assert lisbon in recalled(service, "where do I live")


def test_a_memory_superseded_by_two_stays_so_while_an_edited_one_still_replaces_it(
    service: MemoryService, clock: Any
) -> None:
    """Paris edited into "I live in Paris, France" still replaces Lisbon: deleting Rome leaves it so."""
    paris = service.save(draft("I live in Paris")).memory.memory_id
    rome = service.save(draft("I live in Rome", conflicts="off")).memory.memory_id
    lisbon = service.save(
        draft("I live in Lisbon", conflicts="flag", created_at=clock.now - timedelta(hours=5))
    ).memory.memory_id
    service.update(NS, lisbon, MemoryPatch(status=Status.SUPERSEDED), reason="flag reviewed")
    clock.advance(minutes=5)
    service.update(NS, paris, MemoryPatch(content="I live in Paris, France"))
    clock.advance(minutes=5)
    assert service.delete(NS, rome).reinstated == ()
    assert service.get(NS, lisbon).status is Status.SUPERSEDED


def test_roll_a_namespace_back_to_a_moment_and_undo_it(service: MemoryService, clock: Any) -> None:
    edited = service.save(draft("the user lives in Porto")).memory
    deleted = service.save(draft("the user owns a red bicycle")).memory
    archived = service.save(draft("the user plays chess")).memory
    other_ns = service.save(draft("the user lives in Porto", namespace="user-2")).memory
    as_of = clock.advance(hours=1)
    clock.advance(hours=1)
    service.update(NS, edited.memory_id, MemoryPatch(content="the user lives in Berlin"))
    service.delete(NS, deleted.memory_id)
    service.update(NS, archived.memory_id, MemoryPatch(status=Status.ARCHIVED))
    later = service.save(draft("the user started learning Go")).memory
    purged = service.save(draft("a memory purged for good")).memory
    service.delete(NS, purged.memory_id, hard=True)
    before_rollback = {
        m: service.store.get(Scope.whole([NS]), m) for m in (edited.memory_id, deleted.memory_id, later.memory_id)
    }
    rollback_at = clock.advance(hours=1)

    report = service.rollbacks.to_time(NS, as_of)
    assert (report.restored_count, report.deleted_count, report.unchanged) == (3, 1, 0)
    assert service.get(NS, edited.memory_id).content == "the user lives in Porto"
    assert service.get(NS, deleted.memory_id).status is Status.ACTIVE
    assert service.get(NS, archived.memory_id).status is Status.ACTIVE
    assert service.store.get(Scope.whole([NS]), later.memory_id).status is Status.DELETED  # type: ignore[union-attr]
    assert service.store.get(Scope.whole([NS]), purged.memory_id) is None  # purged memories cannot come back
    assert service.store.get(Scope.whole(["user-2"]), other_ns.memory_id) == other_ns
    reason = f"namespace rolled back to {as_of.isoformat(timespec='microseconds')}"
    assert service.history(NS, edited.memory_id)[-1].reason == reason
    assert recalled(service, "red bicycle")[0] == deleted.memory_id

    # Undo: roll back to just before the rollback.
    clock.advance(hours=1)
    undo = service.rollbacks.to_time(NS, rollback_at - timedelta(microseconds=1))
    assert (undo.restored_count, undo.deleted_count) == (4, 0)
    for memory_id, was in before_rollback.items():
        now = service.store.get(Scope.whole([NS]), memory_id)
        assert now is not None and was is not None
        assert (now.content, now.status) == (was.content, was.status)
    assert service.get(NS, archived.memory_id).status is Status.ARCHIVED
    assert recalled(service, "lives in Berlin")[0] == edited.memory_id


@pytest.mark.parametrize("shift", [timedelta(seconds=1)])
def test_a_namespace_rollback_into_the_future_is_refused(service: MemoryService, clock: Any, shift: timedelta) -> None:
    with pytest.raises(InvalidInput):
        service.rollbacks.to_time(NS, clock.now + shift)


# --- re-embedding after a model change ---------------------------------------------------------


def _save_many(service: MemoryService, n: int) -> dict[str, str]:
    topics = ["violin", "kayak", "sourdough", "telescope", "origami", "juggling", "bonsai", "falconry", "pottery"]
    saved = {}
    for word in topics[:n]:
        m = service.save(draft(f"{word} lessons")).memory
        saved[m.memory_id] = word
    assert len(saved) == n  # distinct memories, none deduplicated
    return saved


def _saved_by_the_old_model(open_svc: OpenService, n: int) -> tuple[HashingEmbedder, dict[str, str]]:
    """``n`` memories saved by a service on the model "fake-old", closed: the model and the memories."""
    old = HashingEmbedder("fake-old", dim=256)
    first = open_svc(embedder=old)
    saved = _save_many(first, n)
    first.close()
    return old, saved


def test_after_a_model_change_recall_finds_every_memory_while_re_embedding_runs_and_resumes(
    open_svc: OpenService, config: Config
) -> None:
    old, saved = _saved_by_the_old_model(open_svc, 9)

    cfg = load_config(env={}, data_dir=config.data_dir, lifecycle={"reembed_batch": 4})
    new = HashingEmbedder("fake-new", dim=192)
    second = open_svc(config=cfg, embedder=new, previous_embedder=old, background_reembed=False)
    assert new.documents_embedded == 0  # nothing embedded at start-up
    assert second.keeper.legacy_size == 9
    progress = second.reembedder.progress()
    assert (progress.state, progress.remaining, progress.legacy_indexed) == ("paused", 9, 9)
    for memory_id, word in saved.items():
        assert recalled(second, word, top_k=1) == [memory_id]

    assert second.reembedder.step() == 4
    assert second.keeper.legacy_size == 5
    for memory_id, word in saved.items():  # half in the new index, half in the legacy one
        assert recalled(second, word, top_k=1) == [memory_id]
    second.close()

    newer = HashingEmbedder("fake-new", dim=192)
    third = open_svc(config=cfg, embedder=newer, previous_embedder=old, background_reembed=False)
    assert third.reembedder.progress().remaining == 5
    done = third.reembedder.run()
    assert (done.state, done.done, done.remaining, done.legacy_indexed) == ("done", 5, 0, 0)
    assert newer.documents_embedded == 5  # resumed: the first four were not embedded again
    for memory_id, word in saved.items():
        assert recalled(third, word, top_k=1) == [memory_id]
        assert third.get(NS, memory_id).embedding_model == "fake-new"
    assert set(third.store.vectors(list(saved), "fake-new")) == set(saved)


def test_the_background_job_re_embeds_and_reports_done(open_svc: OpenService) -> None:
    old, saved = _saved_by_the_old_model(open_svc, 6)
    new = HashingEmbedder("fake-new", dim=192)
    second = open_svc(embedder=new, previous_embedder=old)
    second.reembedder.join()
    progress = second.reembedder.progress()
    assert (progress.state, progress.remaining, progress.done) == ("done", 0, 6)
    assert second.stats()["reembed"]["state"] == "done"  # type: ignore[index]
    for memory_id, word in saved.items():
        assert recalled(second, word, top_k=1) == [memory_id]


def test_the_rate_of_a_finished_re_embedding_stays_what_it_was(open_svc: OpenService) -> None:
    """``rate_per_s`` (GET /v1/admin/reembed) is the job's own rate: once it is done, time
    going by does not lower it (it fell toward 0 with every read after the job ended)."""
    old, _ = _saved_by_the_old_model(open_svc, 3)
    second = open_svc(embedder=HashingEmbedder("fake-new", dim=192), previous_embedder=old)
    second.reembedder.join()
    first = second.reembedder.progress()
    assert first.state == "done" and first.rate_per_s is not None and first.rate_per_s > 0
    time.sleep(0.2)
    assert second.reembedder.progress().rate_per_s == first.rate_per_s


def test_an_edit_during_re_embedding_keeps_its_own_vector(open_svc: OpenService) -> None:
    old, saved = _saved_by_the_old_model(open_svc, 3)
    new = HashingEmbedder("fake-new", dim=192)
    second = open_svc(embedder=new, previous_embedder=old, background_reembed=False)
    edited = next(iter(saved))
    second.update(NS, edited, MemoryPatch(content="the user now practises archery"))
    deleted = list(saved)[1]
    second.delete(NS, deleted)
    assert second.keeper.legacy_size == 1
    assert second.reembedder.run().remaining == 0
    assert recalled(second, "archery", top_k=1) == [edited]
    assert deleted not in recalled(second, saved[deleted], top_k=3)


def test_during_a_model_change_recall_finds_its_own_namespaces_memory_among_many_others(
    open_svc: OpenService,
) -> None:
    """The legacy index holds every namespace's memories that wait for re-embedding; its
    nearest to a query were taken from all of them and filtered afterwards, so where other
    users held closer texts, a memory of the caller's own namespace found by meaning alone
    (no word shared with the query) was missing from its recall until it was re-embedded."""
    from engine.adapters.embedders import load_use

    old = load_use()  # a real model: the memory is found by meaning, not by a shared word
    first = open_svc(embedder=old)
    colours = ("red", "green", "yellow", "orange", "purple", "pink", "brown", "teal", "navy", "gold")
    first.save_batch(
        [
            draft(
                f"User's favourite colour is {colours[n % len(colours)]} and they painted room {n} with it",
                namespace=f"user:{n}",
            )
            for n in range(300)
        ]
    )
    mine = first.save(draft("User's favourite colour is blue", namespace="alice")).memory.memory_id
    assert recalled(first, "which shade would suit my bedroom walls?", namespaces=["alice"]) == [mine]
    first.close()

    second = open_svc(embedder=HashingEmbedder("fake-new", dim=192), previous_embedder=old, background_reembed=False)
    assert second.keeper.legacy_size == 301
    assert recalled(second, "which shade would suit my bedroom walls?", namespaces=["alice"]) == [mine]


def test_a_save_during_a_model_change_supersedes_a_memory_not_yet_re_embedded(open_svc: OpenService) -> None:
    """The write path finds what a new memory repeats or replaces by the current model's
    vectors; a memory still waiting for re-embedding had none, so "I moved to Paris",
    saved during the change, left "I live in Berlin" active beside it for good."""
    old = HashingEmbedder("fake-old", dim=256)
    first = open_svc(embedder=old)
    berlin = first.save(draft("I live in Berlin")).memory.memory_id
    first.save_batch([draft(f"{word} lessons") for word in ("kayak", "piano", "chess")])
    first.close()

    second = open_svc(embedder=HashingEmbedder("fake-new", dim=192), previous_embedder=old, background_reembed=False)
    assert second.keeper.legacy_size == 4
    paris = second.save(draft("I moved to Paris")).memory.memory_id
    assert second.get(NS, berlin).status is Status.SUPERSEDED
    assert recalled(second, "moved to Paris", top_k=1) == [paris]
    assert second.keeper.legacy_size == 0  # the namespace's four, re-embedded for the check
    assert second.reembedder.run().remaining == 0


def test_a_save_during_a_model_change_whose_previous_model_fails_is_saved_all_the_same(
    open_svc: OpenService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-embedding a save's neighbours ahead of it reads them with the previous model:
    where that model failed, the save failed with it (a RuntimeError), though it needs
    only the current one. It is saved now, checked against what has its new vector."""
    old = HashingEmbedder("fake-old", dim=256)
    first = open_svc(embedder=old)
    first.save(draft("I live in Berlin"))
    first.close()

    second = open_svc(embedder=HashingEmbedder("fake-new", dim=192), previous_embedder=old, background_reembed=False)

    def broken(texts: Any) -> Any:
        raise RuntimeError("the previous model's weights are gone")

    monkeypatch.setattr(old, "embed_documents", broken)
    monkeypatch.setattr(old, "embed_query", broken)
    saved = second.save(draft("I like green tea"))
    assert saved.created and second.get(NS, saved.memory.memory_id).status is Status.ACTIVE
    assert second.keeper.legacy_size == 1  # Berlin waits for the job


def test_a_batch_saved_during_a_model_change_re_embeds_a_bounded_number_first(
    open_svc: OpenService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each text of a batch asked for its 20 nearest memories not yet re-embedded, all
    of them re-embedded in the request: a batch of 500 saved during a change re-embedded
    2,618 of a namespace's 3,994 at once (up to 10,000). The batch re-embeds at most
    ``LEGACY_NEIGHBOURS_PER_WRITE`` of them, the nearest of every text first."""
    from engine import service as service_module

    old = HashingEmbedder("fake-old", dim=256)
    first = open_svc(embedder=old)
    first.save_batch([draft(f"note {n} about topic{n % 15} and item{n}") for n in range(60)])
    first.close()

    second = open_svc(embedder=HashingEmbedder("fake-new", dim=192), previous_embedder=old, background_reembed=False)
    monkeypatch.setattr(service_module, "LEGACY_NEIGHBOURS_PER_WRITE", 8, raising=False)
    texts = [f"a new note about topic{n} and item{n}" for n in range(4)]
    nearest = second.keeper.legacy_neighbours([(NS, text) for text in texts], 1)
    assert second.keeper.legacy_size == 60
    second.save_batch([draft(text) for text in texts])
    assert second.keeper.legacy_size == 60 - 8
    assert all(memory_id in second.keeper.index for memory_id in nearest)  # each text's nearest among them
    assert second.reembedder.run().remaining == 0


def test_a_re_embedding_another_process_edit_overtook_leaves_the_edits_vector_in_the_index(
    open_svc: OpenService, config: Config
) -> None:
    """A re-embedding checks the text under the write lock, but another process over the
    file (or another replica) takes no such lock: its edit between that check and the
    write kept its own vector in the store (``put_vectors`` keeps an edit's), and the
    re-embedding then put the old text's vector into the index all the same. When this
    process had caught up with the edit in between (a recall meanwhile), nothing
    corrected it: "kayak lessons", edited into "surfing lessons on Sundays", stayed
    indexed as "kayak lessons"."""
    old = HashingEmbedder("fake-old", dim=256)
    first = open_svc(embedder=old)
    kayak = first.save(draft("kayak lessons")).memory.memory_id
    first.close()
    new = HashingEmbedder("fake-new", dim=192)
    second = open_svc(embedder=new, previous_embedder=old, background_reembed=False)
    other = SqliteStore(config.data_dir / "twinmem.sqlite3")  # another process over the same file
    other.open()
    put_vectors = second.store.put_vectors

    def overtaken(vectors: Any, model: str, **options: Any) -> None:
        if kayak in vectors:
            stored = other.get(Scope.of({NS: Reach.FULL}, None), kayak)
            assert stored is not None
            edited = stored.evolve(
                content="surfing lessons on Sundays", version=stored.version + 1, embedding_model=model
            )
            other.update(edited, new.embed_documents([edited.content])[0], changed_by=None, reason="edit")
        put_vectors(vectors, model, **options)
        second.keeper.catch_up()  # a recall in another thread, meanwhile

    second.store.put_vectors = overtaken  # type: ignore[method-assign]
    try:
        assert second.reembedder.embed_now([kayak]) == 0  # the edit's vector stands
    finally:
        other.close()
    stored = second.store.vectors([kayak], "fake-new")[kayak]
    assert second.keeper.index.similarities(stored, [kayak])[0][1] == pytest.approx(1.0, abs=1e-5)


def test_a_change_of_model_undone_re_embeds_with_the_first_model_again(open_svc: OpenService) -> None:
    """The first model's vectors stay stored beside the second's; switched back to it,
    the service found every memory "done" by them, and every record went on naming the
    second model (and its version) while recall used the first one's vectors."""
    old = HashingEmbedder("fake-old", version="7", dim=256)
    _, saved = _saved_by_the_old_model(open_svc, 4)
    second = open_svc(embedder=HashingEmbedder("fake-new", dim=192), previous_embedder=old)
    second.reembedder.join()
    assert {second.get(NS, memory_id).embedding_model for memory_id in saved} == {"fake-new"}
    second.close()

    back = HashingEmbedder("fake-old", version="7", dim=256)
    third = open_svc(embedder=back, background_reembed=False)
    assert third.reembedder.progress().remaining == 4
    for memory_id, word in saved.items():  # meanwhile found by the vectors kept
        assert recalled(third, word, top_k=1) == [memory_id]
    assert third.reembedder.run().remaining == 0
    for memory_id, word in saved.items():
        memory = third.get(NS, memory_id)
        assert (memory.embedding_model, memory.embedding_version) == ("fake-old", "7")
        assert recalled(third, word, top_k=1) == [memory_id]


def test_concurrent_recalls_and_re_embedding_lose_no_reinforcement(open_svc: OpenService) -> None:
    old, saved = _saved_by_the_old_model(open_svc, 9)
    second = open_svc(embedder=HashingEmbedder("fake-new", dim=192), previous_embedder=old, background_reembed=False)
    target = next(memory_id for memory_id, word in saved.items() if word == "kayak")
    with ThreadPoolExecutor(max_workers=8) as pool:
        job = pool.submit(second.reembedder.run)
        tops = list(pool.map(lambda _: recalled(second, "kayak", top_k=1, reinforce=True), range(40)))
        job.result()
    second.flush()
    assert tops == [[target]] * 40
    assert second.get(NS, target).access_count == 40


def test_memories_embedded_at_start_up_without_the_previous_model_record_the_new_one(open_svc: OpenService) -> None:
    _, saved = _saved_by_the_old_model(open_svc, 4)
    new = HashingEmbedder("fake-new", dim=192)
    # No previous model to search the old vectors with: start-up embeds every memory itself.
    second = open_svc(embedder=new, background_reembed=False)
    assert second.keeper.legacy_size == 0 and new.documents_embedded == 4
    for memory_id, word in saved.items():
        assert recalled(second, word, top_k=1) == [memory_id]
        assert second.get(NS, memory_id).embedding_model == "fake-new"  # as its vector is
    assert second.reembedder.progress().remaining == 0
    second.close()


@pytest.mark.parametrize("how", ["purged", "expired", "chain"])
def test_a_namespace_rollback_hides_nothing_under_a_memory_out_of_recall(
    service: MemoryService, clock: Any, how: str
) -> None:
    """A namespace rolled back to a time when "I moved to Paris" superseded "I live in Berlin":
    Paris purged since (or deleted, and back active by the rollback with its expiry passed),
    Berlin came back superseded with nothing in recall in its place. It comes back active; and
    where what superseded it comes back active itself (Rome purged, Paris it superseded back),
    Berlin stays superseded by that."""
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(seconds=1)
    expire_at = clock.now + timedelta(minutes=1) if how == "expired" else None
    paris = service.save(draft("I moved to Paris", expire_at=expire_at))
    assert paris.superseded == (berlin,)
    clock.advance(seconds=1)
    gone = paris.memory.memory_id
    if how == "chain":
        rome = service.save(draft("I moved to Rome"))
        assert rome.superseded == (paris.memory.memory_id,)
        gone = rome.memory.memory_id
    as_of = clock.advance(seconds=1)
    clock.advance(hours=1)
    service.delete(NS, gone, hard=how != "expired")
    service.rollbacks.to_time(NS, as_of)
    hits = recalled(service, "where do I live")
    if how == "chain":
        assert service.get(NS, berlin).status is Status.SUPERSEDED
        assert hits == [paris.memory.memory_id]
    else:
        assert service.get(NS, berlin).status is Status.ACTIVE
        assert hits == [berlin]


def test_a_namespace_rollback_leaves_a_merged_source_merged(service: MemoryService, clock: Any) -> None:
    """Two near-duplicates merged, one restored since: rolled back to a time after the
    merge, the restored source is superseded again by its merge (a ``MERGED_INTO`` link, no
    ``SUPERSEDES``), not taken for a memory superseded under nothing."""
    one, two = ALICES_TEAS
    first = service.save(draft(one, entities=["Alice"])).memory
    clock.advance(days=1)
    service.save(draft(two, entities=["alice", "tea"]))
    clock.advance(days=1)
    assert service.consolidator.run(NS).merged == 1
    as_of = clock.advance(hours=1)
    clock.advance(hours=1)
    service.rollbacks.restore(NS, first.memory_id)
    service.rollbacks.to_time(NS, as_of)
    assert service.get(NS, first.memory_id).status is Status.SUPERSEDED


def test_a_namespace_rollback_that_deletes_what_superseded_a_memory_brings_it_back(
    service: MemoryService, clock: Any
) -> None:
    """ "I live in Berlin", superseded by "I moved to Paris" purged since, then by "I moved to
    Lisbon", and rolled back to that superseded state by hand: the namespace rolled back to a
    time before Lisbon deletes Lisbon, and Berlin, superseded then as now, stayed superseded
    under nothing in recall."""
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(seconds=1)
    paris = service.save(draft("I moved to Paris")).memory.memory_id
    as_of = clock.advance(seconds=1)
    clock.advance(seconds=1)
    service.delete(NS, paris, hard=True)
    assert service.get(NS, berlin).status is Status.ACTIVE
    clock.advance(seconds=1)
    assert service.save(draft("I moved to Lisbon")).superseded == (berlin,)
    clock.advance(seconds=1)
    service.rollbacks.to_time(NS, as_of)
    assert service.get(NS, berlin).status is Status.ACTIVE
    assert recalled(service, "where do I live") == [berlin]


def test_a_namespace_rollback_reads_each_memory_it_writes_once_not_once_per_check(
    service: MemoryService, clock: Any
) -> None:
    """Twenty people's homes, each superseded by a move; the namespace rolled back to before
    the moves deletes the moves and brings the homes back. The run reads the page's records
    again under the lock in one call, catches the index up once a page, and its second pass
    reads its memories in one call a round and the links only of those still superseded:
    only the walk below each deleted move reads one memory (and its links) at a time. Before,
    it read 5 records and 3 links lists a pair, and caught up after each restored home."""
    pairs = 20
    homes = [service.save(draft(f"Person{n} lives in Berlin", key=f"home{n}")).memory.memory_id for n in range(pairs)]
    clock.advance(seconds=1)
    as_of = clock.advance(seconds=1)
    clock.advance(seconds=1)
    moves = [service.save(draft(f"Person{n} moved to Lisbon", key=f"home{n}")) for n in range(pairs)]
    assert [saved.superseded for saved in moves] == [(home,) for home in homes]
    clock.advance(seconds=1)
    counting = count_calls(service.store, ("get", "get_many", "edges", "changes_since", "versions"))
    report = service.rollbacks.to_time(NS, as_of)
    calls = dict(counting)
    assert (report.restored_count, report.deleted_count, report.skipped) == (pairs, pairs, [])
    assert all(service.get(NS, home).status is Status.ACTIVE for home in homes)
    # The walk below each deleted move: its links and the home it superseded.
    assert calls["edges"] == pairs
    assert calls["get"] == pairs
    # The page again under the lock, the second pass's one round, the catch-up after the page.
    assert calls["get_many"] == 3
    assert calls["changes_since"] <= 2
    assert calls["versions"] == 2 * pairs  # each memory's history, once


def test_a_restore_reads_its_links_and_what_it_superseded_once(service: MemoryService, clock: Any) -> None:
    """ "I moved to Lisbon", which superseded "I live in Berlin", deleted (Berlin back) and
    restored: Lisbon back active and Berlin superseded again. Its three checks under the lock
    (what supersedes it again, what it supersedes again, what it no longer hides) each read
    its links and walked to Berlin, and one read its history again: 3 reads of its links, 2
    of Berlin and 2 of its history, now 1 each."""
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(seconds=1)
    lisbon = service.save(draft("I moved to Lisbon"))
    assert lisbon.superseded == (berlin,)
    clock.advance(seconds=1)
    service.delete(NS, lisbon.memory.memory_id)
    assert service.get(NS, berlin).status is Status.ACTIVE
    clock.advance(seconds=1)
    counting = count_calls(service.store, ("get", "edges", "versions"))
    restored = service.rollbacks.restore(NS, lisbon.memory.memory_id)
    calls = dict(counting)
    assert restored.status is Status.ACTIVE
    assert service.get(NS, berlin).status is Status.SUPERSEDED
    assert recalled(service, "where do I live") == [lisbon.memory.memory_id]
    assert calls["edges"] == 1  # its links
    assert calls["get"] == 2  # itself, then Berlin
    assert calls["versions"] == 2  # its history and Berlin's: whether either changed since


def test_a_namespace_rollback_brings_back_a_memory_hidden_through_a_deleted_one_under_what_it_deletes(
    service: MemoryService, clock: Any
) -> None:
    """ "I live in Berlin" ← "I moved to Paris" (purged since) ← "I moved to Lisbon" (its link
    carried to Berlin) ← "I live in Rome", Lisbon deleted while superseded: Rome hides Berlin
    through Lisbon. Rolled back to a time before Lisbon, Rome is deleted, and the check after
    the run looked only one link below it, at Lisbon (deleted): Berlin stayed superseded with
    nothing in recall in its place."""
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(seconds=1)
    paris = service.save(draft("I moved to Paris"))
    assert paris.superseded == (berlin,)
    as_of = clock.advance(seconds=1)
    clock.advance(seconds=1)
    lisbon = service.save(draft("I moved to Lisbon"))
    assert lisbon.superseded == (paris.memory.memory_id,)
    clock.advance(seconds=1)
    service.delete(NS, paris.memory.memory_id, hard=True)
    clock.advance(seconds=1)
    rome = service.save(draft("I live in Rome"))
    assert rome.superseded == (lisbon.memory.memory_id,)
    clock.advance(seconds=1)
    service.delete(NS, lisbon.memory.memory_id)
    assert service.get(NS, berlin).status is Status.SUPERSEDED
    assert recalled(service, "where do I live") == [rome.memory.memory_id]
    clock.advance(seconds=1)
    service.rollbacks.to_time(NS, as_of)
    assert service.get(NS, rome.memory.memory_id, include_deleted=True).status is Status.DELETED
    assert service.get(NS, berlin).status is Status.ACTIVE
    assert recalled(service, "where do I live") == [berlin]


@pytest.mark.parametrize("paris_private_then", [False, True])
def test_a_namespace_rollback_that_makes_a_superseded_memory_active_leaves_what_it_superseded_as_it_hides_it(
    service: MemoryService, clock: Any, paris_private_then: bool
) -> None:
    """ "I live in Berlin" ← "I moved to Paris" ← "I live in Rome", rolled back to a time
    before Rome: Paris comes back active and Berlin stays superseded under it, as then. Where
    Paris was private then (Berlin reinstated by that), shared and replaced by Rome since,
    Paris comes back private and Berlin active: a private memory hides nothing others read."""
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(seconds=1)
    paris = service.save(draft("I moved to Paris"))
    assert paris.superseded == (berlin,)
    paris_id = paris.memory.memory_id
    clock.advance(seconds=1)
    if paris_private_then:
        service.update(NS, paris_id, MemoryPatch(visibility=Visibility.PRIVATE))
        assert service.get(NS, berlin).status is Status.ACTIVE
    as_of = clock.advance(seconds=1)
    clock.advance(seconds=1)
    if paris_private_then:
        service.update(NS, paris_id, MemoryPatch(visibility=Visibility.SHARED))
        clock.advance(seconds=1)
    rome = service.save(draft("I live in Rome")).memory.memory_id
    assert service.get(NS, paris_id).status is Status.SUPERSEDED
    clock.advance(seconds=1)
    service.rollbacks.to_time(NS, as_of)
    assert service.get(NS, rome, include_deleted=True).status is Status.DELETED
    back = service.get(NS, paris_id)
    assert (back.status, back.visibility is Visibility.PRIVATE) == (Status.ACTIVE, paris_private_then)
    assert service.get(NS, berlin).status is (Status.ACTIVE if paris_private_then else Status.SUPERSEDED)


def test_a_namespace_rollback_that_brings_back_a_memory_leaves_what_it_replaces_superseded(
    service: MemoryService, clock: Any
) -> None:
    """ "I live in Berlin" ← "I moved to Paris" ← "I live in Rome"; then "I moved to Lisbon"
    replaced Rome, Rome was purged (its link carried from Lisbon to Paris) and Berlin made
    active by hand. Rolled back to a time before Lisbon, Lisbon is deleted, and Paris, hidden
    by nothing now, comes back active; Berlin, superseded again, waited for Paris, and Paris
    for Lisbon, which the check dropped only after it had looked at both: with none ready, it
    made every one left active at once, and Berlin came back beside Paris, which replaces it."""
    ids = []
    for text in ("I live in Berlin", "I moved to Paris", "I live in Rome"):
        saved = service.save(draft(text))
        assert saved.superseded == tuple(ids[-1:])
        ids.append(saved.memory.memory_id)
        clock.advance(seconds=1)
    berlin, paris, rome = ids
    as_of = clock.advance(seconds=1)
    clock.advance(seconds=1)
    lisbon = service.save(draft("I moved to Lisbon"))
    assert lisbon.superseded == (rome,)
    clock.advance(seconds=1)
    service.delete(NS, rome, hard=True)
    assert service.get(NS, paris).status is Status.SUPERSEDED
    service.update(NS, berlin, MemoryPatch(status=Status.ACTIVE))
    clock.advance(seconds=1)
    service.rollbacks.to_time(NS, as_of)
    assert service.get(NS, lisbon.memory.memory_id, include_deleted=True).status is Status.DELETED
    assert service.get(NS, paris).status is Status.ACTIVE
    assert service.get(NS, berlin).status is Status.SUPERSEDED
    assert recalled(service, "where do I live") == [paris]


def test_a_namespace_rollback_hides_a_memory_again_under_one_that_no_longer_replaced_it_since(
    service: MemoryService, clock: Any
) -> None:
    """ "I live in Rome" ← "I live in Berlin"; then Berlin, edited into "The weather is nice
    today", brought Rome back, and "I moved to Paris" superseded it. Rolled back to a time
    before the edit, Berlin says "I live in Berlin" again and Paris is deleted; the check read
    Rome's release from Berlin, written after that time, and brought Rome back active beside
    Berlin, which replaces it, as it did then."""
    rome = service.save(draft("I live in Rome")).memory.memory_id
    clock.advance(seconds=1)
    berlin = service.save(draft("I live in Berlin"))
    assert berlin.superseded == (rome,)
    as_of = clock.advance(seconds=1)
    clock.advance(seconds=1)
    service.update(NS, berlin.memory.memory_id, MemoryPatch(content="The weather is nice today"))
    assert service.get(NS, rome).status is Status.ACTIVE
    clock.advance(seconds=1)
    assert service.save(draft("I moved to Paris")).superseded == (rome,)
    clock.advance(seconds=1)
    service.rollbacks.to_time(NS, as_of)
    assert service.get(NS, berlin.memory.memory_id).content == "I live in Berlin"
    assert service.get(NS, rome).status is Status.SUPERSEDED
    assert recalled(service, "where do I live") == [berlin.memory.memory_id]


def test_a_namespace_rollback_that_deletes_a_memory_by_its_deleted_version_checks_what_it_superseded(
    service: MemoryService, clock: Any
) -> None:
    """ "I live in Rome" under "I live in Berlin" under "I moved to Paris"; Paris deleted
    (Berlin back), then restored, then Berlin purged (Paris hides Rome by the link carried
    past it). A rollback to the moment Paris was deleted deletes Paris again (its deleted
    version) and cannot bring Berlin back: Rome, superseded then as now, stayed superseded
    under nothing in recall. The rollback checked only what hid the memories it made
    superseded or deleted as stored after that moment (walk seed 2750)."""
    rome = service.save(draft("I live in Rome")).memory.memory_id
    clock.advance(seconds=1)
    berlin = service.save(draft("I live in Berlin"))
    assert berlin.superseded == (rome,)
    clock.advance(seconds=1)
    paris = service.save(draft("I moved to Paris"))
    assert paris.superseded == (berlin.memory.memory_id,)
    clock.advance(seconds=1)
    service.delete(NS, paris.memory.memory_id)
    assert service.get(NS, berlin.memory.memory_id).status is Status.ACTIVE
    as_of = clock.advance(seconds=1)
    clock.advance(seconds=1)
    service.rollbacks.restore(NS, paris.memory.memory_id)
    assert service.get(NS, berlin.memory.memory_id).status is Status.SUPERSEDED
    clock.advance(seconds=1)
    service.delete(NS, berlin.memory.memory_id, hard=True)
    assert service.get(NS, rome).status is Status.SUPERSEDED
    clock.advance(seconds=1)
    service.rollbacks.to_time(NS, as_of)
    assert service.store.get(Scope.whole([NS]), paris.memory.memory_id).status is Status.DELETED
    assert service.get(NS, rome).status is Status.ACTIVE
    assert recalled(service, "where do I live") == [rome]


def test_a_namespace_rollback_reads_each_link_of_a_deleted_chain_once(
    service: MemoryService, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback that deletes a chain of moves walked the chain below each memory it deleted
    afresh, through the others it deleted: reads grew with the square of the chain (150 moves,
    11,476 link reads). Each memory's links are read once now, and the home before the chain
    comes back."""
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    as_of = clock.advance(seconds=1)
    moves = 40
    for number in range(moves):
        clock.advance(seconds=1)
        service.save(draft(f"I moved to City{number}"))
    assert service.get(NS, berlin).status is Status.SUPERSEDED
    reads, edges = [], service.store.edges

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return edges(*args, **kwargs)

    monkeypatch.setattr(service.store, "edges", counted)
    clock.advance(seconds=1)
    service.rollbacks.to_time(NS, as_of)
    assert service.get(NS, berlin).status is Status.ACTIVE
    assert len(reads) <= 5 * moves, len(reads)


def test_a_deletion_reads_what_it_superseded_once_and_the_other_memory_that_hides_it_once(
    service: MemoryService, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleting a memory that superseded many others, each superseded by a second memory as
    well, reinstates none of them, and reads each of them once (its record, history and links)
    and the second memory once, not once for each of them (1,000 of them read its record and
    history 1,000 times each)."""
    whole = Scope.whole([NS])
    newer, other = (service.save(draft(text)).memory for text in ("the alpha note", "the beta note"))
    olds = [service.save(draft(f"note number {n} zq{n}x")).memory for n in range(300)]
    now = clock.advance(seconds=1)
    for old in olds:
        superseded = old.evolve(status=Status.SUPERSEDED, version=old.version + 1, updated_at=now)
        service.store.update(superseded, None, changed_by=None, reason=f"superseded by {newer.memory_id}")
    service.store.add_edges(
        [Edge(NS, src.memory_id, old.memory_id, SUPERSEDES, now) for old in olds for src in (newer, other)]
    )
    reads: dict[str, int] = dict.fromkeys(("get", "versions", "edges"), 0)
    for name in reads:
        real = getattr(service.store, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            reads[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(service.store, name, counted)
    clock.advance(seconds=1)
    assert service.delete(NS, newer.memory_id).reinstated == ()
    read = dict(reads)
    assert all(service.store.get(whole, old.memory_id).status is Status.SUPERSEDED for old in olds)
    assert read["edges"] <= len(olds) + 1, read
    assert read["versions"] <= len(olds) + 1, read
    assert read["get"] <= 2 * len(olds) + 3, read


@pytest.mark.parametrize(
    ("text", "status"), [("I like green tea", Status.ACTIVE), ("I live in Berlin, Germany", Status.SUPERSEDED)]
)
def test_a_superseded_memory_edited_stays_superseded_only_while_the_newer_replaces_its_new_text(
    service: MemoryService, clock: Any, text: str, status: Status
) -> None:
    """ "I live in Berlin", superseded by "I moved to Paris", edited into "I like green tea":
    it stayed superseded under a memory that does not replace it, and the tea was never
    recalled. Edited into another claim, it is superseded only while the newer memory's text
    replaces the new one by the rules ("I live in Berlin, Germany" still is)."""
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(seconds=1)
    assert service.save(draft("I moved to Paris")).superseded == (berlin,)
    clock.advance(seconds=1)
    assert service.update(NS, berlin, MemoryPatch(content=text)).status is status
    assert (berlin in recalled(service, text)) is (status is Status.ACTIVE)


@pytest.mark.parametrize(("coffee_deleted", "status"), [(True, Status.ACTIVE), (False, Status.SUPERSEDED)])
def test_a_superseded_memory_rolled_back_to_another_text_stays_superseded_only_while_a_newer_replaces_it(
    service: MemoryService, clock: Any, coffee_deleted: bool, status: Status
) -> None:
    """ "My favourite drink is green tea", superseded by "My favourite drink is now coffee",
    edited into "I live in Berlin" (active again) and superseded by "I moved to Paris": rolled
    back to its superseded green-tea version once coffee is deleted, it came back superseded,
    hidden under Paris, which does not replace that text, and the tea was never recalled. As
    an edit into that text judges it, only a memory that superseded it and replaces the text
    hides it: coffee, while it stands."""
    tea = service.save(draft("My favourite drink is green tea")).memory.memory_id
    clock.advance(seconds=1)
    coffee = service.save(draft("My favourite drink is now coffee"))
    assert coffee.superseded == (tea,)
    clock.advance(seconds=1)
    assert service.update(NS, tea, MemoryPatch(content="I live in Berlin")).status is Status.ACTIVE
    clock.advance(seconds=1)
    assert service.save(draft("I moved to Paris")).superseded == (tea,)
    clock.advance(seconds=1)
    if coffee_deleted:
        service.delete(NS, coffee.memory.memory_id)
    tea_version = service.history(NS, tea)[1]
    assert (tea_version.record.content, tea_version.record.status) == (
        "My favourite drink is green tea",
        Status.SUPERSEDED,
    )
    back = service.rollbacks.to_version(NS, tea, tea_version.version)
    assert (back.content, back.status) == ("My favourite drink is green tea", status)
    assert (tea in recalled(service, "favourite drink green tea")) is (status is Status.ACTIVE)


@pytest.mark.parametrize("how", ["deleted", "restored"])
def test_a_memory_out_of_superseded_rolled_back_to_another_text_is_hidden_only_by_what_replaces_it(
    service: MemoryService, clock: Any, how: str
) -> None:
    """As above, but the memory saying "I live in Berlin" was deleted, or restored by hand
    beside Paris, before it was rolled back to its superseded green-tea version: it came back
    superseded under Paris, which does not replace that text (the text was judged only for a
    memory superseded at the rollback)."""
    tea = service.save(draft("My favourite drink is green tea")).memory.memory_id
    clock.advance(seconds=1)
    coffee = service.save(draft("My favourite drink is now coffee"))
    clock.advance(seconds=1)
    assert service.update(NS, tea, MemoryPatch(content="I live in Berlin")).status is Status.ACTIVE
    clock.advance(seconds=1)
    assert service.save(draft("I moved to Paris")).superseded == (tea,)
    clock.advance(seconds=1)
    service.delete(NS, coffee.memory.memory_id)
    if how == "deleted":
        service.delete(NS, tea)
    else:
        assert service.rollbacks.restore(NS, tea).status is Status.ACTIVE
    clock.advance(seconds=1)
    tea_version = service.history(NS, tea)[1]
    assert tea_version.record.status is Status.SUPERSEDED
    back = service.rollbacks.to_version(NS, tea, tea_version.version)
    assert (back.content, back.status) == ("My favourite drink is green tea", Status.ACTIVE)
    assert tea in recalled(service, "favourite drink green tea")


def test_a_memory_rolled_back_to_the_text_its_link_judged_stays_hidden_through_the_chain(
    service: MemoryService, clock: Any
) -> None:
    """ "I live in Berlin" under "I moved to Paris" under "I live in Rome", edited into "I like
    green tea" and rolled back to its superseded version: it says what Paris superseded, and
    Rome replaces Paris, so it stays superseded. Judged by the rules alone against the memories
    that superseded it directly, it came back active beside Rome."""
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(seconds=1)
    paris = service.save(draft("I moved to Paris"))
    assert paris.superseded == (berlin,)
    clock.advance(seconds=1)
    assert service.save(draft("I live in Rome")).superseded == (paris.memory.memory_id,)
    clock.advance(seconds=1)
    assert service.update(NS, berlin, MemoryPatch(content="I like green tea")).status is Status.ACTIVE
    clock.advance(seconds=1)
    superseded = [v for v in service.history(NS, berlin) if v.record.status is Status.SUPERSEDED][-1]
    back = service.rollbacks.to_version(NS, berlin, superseded.version)
    assert (back.content, back.status) == ("I live in Berlin", Status.SUPERSEDED)
    assert berlin not in recalled(service, "where do I live")


def test_a_memory_rolled_back_to_a_private_version_hides_nothing_of_others(service: MemoryService, clock: Any) -> None:
    """Alice's shared "I live in Berlin" superseded Carol's shared "I live in Rome", was
    superseded by Bob's "I moved to Lisbon", made private and shared again meanwhile, and came
    back when Lisbon was deleted. Rolled back to its private version, it left Rome hidden from
    Bob under a memory he cannot read: a rollback to another audience is judged as an edit
    into it."""
    shared = {"visibility": Visibility.SHARED}
    rome = service.save(draft("I live in Rome", actor="carol", **shared)).memory.memory_id
    clock.advance(seconds=1)
    berlin = service.save(draft("I live in Berlin", actor="alice", **shared))
    assert berlin.superseded == (rome,)
    clock.advance(seconds=1)
    lisbon = service.save(draft("I moved to Lisbon", actor="bob", **shared))
    assert lisbon.superseded == (berlin.memory.memory_id,)
    alice = Scope(member=(NS,), agent="alice")
    for visibility in (Visibility.PRIVATE, Visibility.SHARED):
        clock.advance(seconds=1)
        patch = MemoryPatch(visibility=visibility)
        service.update(NS, berlin.memory.memory_id, patch, actor="alice", scope=alice)
    private = service.history(NS, berlin.memory.memory_id)[-2]
    assert private.record.visibility is Visibility.PRIVATE
    clock.advance(seconds=1)
    service.delete(NS, lisbon.memory.memory_id)
    clock.advance(seconds=1)
    back = service.rollbacks.to_version(NS, berlin.memory.memory_id, private.version, actor="alice", scope=alice)
    assert (back.status, back.visibility) == (Status.ACTIVE, Visibility.PRIVATE)
    assert service.store.get(Scope.whole([NS]), rome).status is Status.ACTIVE
    assert rome in recalled(service, "I live in Rome", scope=Scope(member=(NS,), agent="bob"))


def test_a_namespace_rollback_supersedes_again_by_what_a_memory_was_released_from_since(
    service: MemoryService, clock: Any
) -> None:
    """Bob's "I live in Rome", superseded by Carol's "I live in Berlin", released from it when
    she made Berlin private and superseded since by her "I moved to Lisbon", stays superseded
    under Berlin once the namespace is rolled back to before (Berlin shared, Lisbon deleted).
    Its history still named the release, so when Carol made Berlin private again the edit
    passed Rome by: hidden from Bob under a memory he cannot read."""
    shared = {"visibility": Visibility.SHARED}
    carol = Scope(member=(NS,), agent="carol")
    rome = service.save(draft("I live in Rome", actor="bob", **shared)).memory.memory_id
    clock.advance(seconds=1)
    berlin = service.save(draft("I live in Berlin", actor="carol", **shared))
    assert berlin.superseded == (rome,)
    as_of = clock.advance(seconds=1)
    clock.advance(seconds=1)
    private = MemoryPatch(visibility=Visibility.PRIVATE)
    service.update(NS, berlin.memory.memory_id, private, actor="carol", scope=carol)
    assert service.store.get(Scope.whole([NS]), rome).status is Status.ACTIVE
    clock.advance(seconds=1)
    assert service.save(draft("I moved to Lisbon", actor="carol", **shared)).superseded == (rome,)
    clock.advance(seconds=1)
    service.rollbacks.to_time(NS, as_of)
    assert service.store.get(Scope.whole([NS]), rome).status is Status.SUPERSEDED
    clock.advance(seconds=1)
    service.update(NS, berlin.memory.memory_id, private, actor="carol", scope=carol)
    assert service.store.get(Scope.whole([NS]), rome).status is Status.ACTIVE
    assert rome in recalled(service, "I live in Rome", scope=Scope(member=(NS,), agent="bob"))


def test_a_superseded_memory_made_private_hides_nothing_of_others_below_it(service: MemoryService, clock: Any) -> None:
    """Bob's shared "I moved to Paris" under Carol's "I live in Rome" under her "I live in
    Berlin": Carol made Rome private (superseded still), then Berlin. Paris stayed hidden from
    Bob under two memories he cannot read: the edit of Rome, superseded, released nothing."""
    shared = {"visibility": Visibility.SHARED}
    carol = Scope(member=(NS,), agent="carol")
    bob = Scope(member=(NS,), agent="bob")
    paris = service.save(draft("I moved to Paris", actor="bob", **shared)).memory.memory_id
    clock.advance(seconds=1)
    rome = service.save(draft("I live in Rome", actor="carol", **shared))
    assert rome.superseded == (paris,)
    clock.advance(seconds=1)
    berlin = service.save(draft("I live in Berlin", actor="carol", **shared))
    assert berlin.superseded == (rome.memory.memory_id,)
    private = MemoryPatch(visibility=Visibility.PRIVATE)
    for memory in (rome, berlin):
        clock.advance(seconds=1)
        service.update(NS, memory.memory.memory_id, private, actor="carol", scope=carol)
    assert service.store.get(Scope.whole([NS]), rome.memory.memory_id).status is Status.SUPERSEDED
    assert service.store.get(Scope.whole([NS]), paris).status is Status.ACTIVE
    assert paris in recalled(service, "I moved to Paris", scope=bob)


def test_a_namespace_rollback_names_no_memory_that_had_not_superseded_it_then(
    service: MemoryService, clock: Any
) -> None:
    """As above, but Rome was superseded after the rolled-back-to moment by Dave's "I moved to
    Paris" too, and released from it when he made Paris private: the rollback deletes Paris
    (stored after it), yet wrote Rome a version "superseded by Paris, which still replaces it",
    a memory that did not supersede it then, private and deleted now. Only Berlin is named."""
    shared = {"visibility": Visibility.SHARED}
    whole = Scope.whole([NS])
    rome = service.save(draft("I live in Rome", actor="bob", **shared)).memory.memory_id
    clock.advance(seconds=1)
    berlin = service.save(draft("I live in Berlin", actor="carol", **shared)).memory.memory_id
    as_of = clock.advance(seconds=1)
    clock.advance(seconds=1)
    private = MemoryPatch(visibility=Visibility.PRIVATE)
    service.update(NS, berlin, private, actor="carol", scope=Scope(member=(NS,), agent="carol"))
    clock.advance(seconds=1)
    paris = service.save(draft("I moved to Paris", actor="dave", **shared))
    assert paris.superseded == (rome,)
    clock.advance(seconds=1)
    service.update(NS, paris.memory.memory_id, private, actor="dave", scope=Scope(member=(NS,), agent="dave"))
    clock.advance(seconds=1)
    assert service.save(draft("I moved to Lisbon", actor="erin", **shared)).superseded == (rome,)
    clock.advance(seconds=1)
    written = len(service.history(NS, rome))
    service.rollbacks.to_time(NS, as_of)
    assert service.store.get(whole, paris.memory.memory_id).status is Status.DELETED
    assert service.store.get(whole, rome).status is Status.SUPERSEDED
    reasons = [v.reason for v in service.history(NS, rome)[written:]]
    assert reasons == [f"superseded by {berlin}, which still replaces it: namespace rolled back to {to_iso(as_of)}"]


@pytest.mark.parametrize("how", ["restore", "rollback"])
def test_a_private_memory_back_from_deleted_hides_nothing_of_others(
    service: MemoryService, clock: Any, how: str
) -> None:
    """Carol's "I moved to Paris" superseded her shared "I live in Berlin" and was superseded
    by Bob's "I moved to Lisbon"; made private and deleted, it was restored (or rolled back to
    its private version) active, as Lisbon does not hide a memory of another audience. Berlin
    stayed hidden from Bob under a memory he cannot read."""
    shared = {"visibility": Visibility.SHARED}
    carol = Scope(member=(NS,), agent="carol")
    berlin = service.save(draft("I live in Berlin", actor="carol", **shared)).memory.memory_id
    clock.advance(seconds=1)
    paris = service.save(draft("I moved to Paris", actor="carol", **shared))
    assert paris.superseded == (berlin,)
    clock.advance(seconds=1)
    assert service.save(draft("I moved to Lisbon", actor="bob", **shared)).superseded == (paris.memory.memory_id,)
    clock.advance(seconds=1)
    service.update(NS, paris.memory.memory_id, MemoryPatch(visibility=Visibility.PRIVATE), actor="carol", scope=carol)
    private = service.history(NS, paris.memory.memory_id)[-1]
    clock.advance(seconds=1)
    service.delete(NS, paris.memory.memory_id, actor="carol", scope=carol)
    clock.advance(seconds=1)
    if how == "restore":
        back = service.rollbacks.restore(NS, paris.memory.memory_id, actor="carol", scope=carol)
    else:
        back = service.rollbacks.to_version(NS, paris.memory.memory_id, private.version, actor="carol", scope=carol)
    assert (back.status, back.visibility) == (Status.ACTIVE, Visibility.PRIVATE)
    assert service.store.get(Scope.whole([NS]), berlin).status is Status.ACTIVE
    assert berlin in recalled(service, "I live in Berlin", scope=Scope(member=(NS,), agent="bob"))


def test_a_purge_keeps_the_chain_through_a_memory_deleted_while_superseded(service: MemoryService, clock: Any) -> None:
    """ "I live in Berlin" ← "I moved to Paris" ← "I live in Rome" ← "I moved to Lisbon", Paris
    then Rome deleted while superseded, Rome purged: no link led from Lisbon past it, to
    Paris (deleted, not superseded) and so to Berlin, and deleting Lisbon left Berlin
    superseded for good, nothing about the home recalled."""
    ids: list[str] = []
    for text in ("I live in Berlin", "I moved to Paris", "I live in Rome", "I moved to Lisbon"):
        saved = service.save(draft(text))
        assert saved.superseded == tuple(ids[-1:])
        ids.append(saved.memory.memory_id)
        clock.advance(seconds=1)
    berlin, paris, rome, lisbon = ids
    service.delete(NS, paris)
    service.delete(NS, rome)
    service.delete(NS, rome, hard=True)
    assert service.delete(NS, lisbon).reinstated == (berlin,)
    assert recalled(service, "where do I live") == [berlin]
