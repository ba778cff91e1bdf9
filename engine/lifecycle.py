"""Consolidation: archive what faded or expired, purge old soft deletes, merge near-duplicates.

Plan, then apply. ``plan(items, now, policy)`` is pure: it looks only at the
records (and vectors) it is given and the ``now`` it is told, and returns
actions. ``apply(actions, store, ...)`` carries them out, re-reading each record
first and re-checking the rule, so an action planned a moment ago is skipped when
the memory changed meanwhile (edited, recalled back above the threshold, restored).

The rules (DESIGN.md, thresholds in the config):

* **archive** an active memory whose decayed score fell below its category's
  ``archive_threshold``, or whose ``expire_at`` passed. Archived memories leave
  recall (its status filter defaults to active), stay readable by id with their
  history, and ``restore`` makes them active again.
* **purge** a soft-deleted memory ``purge_after_days`` after its deletion: the
  record, its versions, vectors and edges go for good.
* **merge** active near-duplicates — cosine ≥ ``merge_cosine``, mostly the same words
  (``text.word_overlap``), the same numbers and markers (``text.Wording.says_as``, as
  write-time dedup asks), said within ``MERGE_MAX_SPAN`` (a day) of each other, same
  category, same ``key``, and audience (``same_audience``: visibility, and the writer of
  private ones), same source, writer and session (``same_provenance``), at least one
  shared entity — into one new memory whose content keeps
  every source's text (each distinct text once, one per line), with the earliest
  ``created_at``, the summed ``access_count``, the union of entities, and the
  strongest source's current score. Each source gets a ``MERGED_INTO`` edge to it
  and turns ``superseded``: it leaves recall the way a replaced memory does, stays
  readable by id with its history, and is not "faded" (``archived`` means that).

``Consolidator`` drives a run over one namespace in bounded memory: it walks the
namespace a page at a time (``Store.scan``), finds merge partners of a page's
memories in the fast network (``_partners``: the namespace's active memories that share
an entity with one, their cosines taken exactly; where a memory's entities name more
than ``PARTNER_SCAN_MAX`` of them, its ``MERGE_NEIGHBOURS`` nearest in the namespace
instead), plans the page, and applies the actions in
small batches, each under the service's write lock, so that saves and recalls go
on between batches. A merged memory's content is embedded before the lock is taken.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

import numpy as np

from engine.codec import to_iso
from engine.config import Config, ScoringConfig
from engine.conflicts import CONTRADICTS, MERGED_INTO, SUPERSEDES
from engine.errors import Conflict, InvalidInput, MemoryNotFound
from engine.index_keeper import IndexKeeper
from engine.ports import Edge, Embedder, Store, Vector, model_reads
from engine.recall import Recaller
from engine.records import (
    Memory,
    MemoryFilter,
    Scope,
    Status,
    content_digest,
    entity_keys,
    normalize_entities,
    same_audience,
)
from engine.scoring import current_score, decayed_base, raw_cosine
from engine.supersession import links_into, released_from
from engine.text import MERGE_MIN_OVERLAP, Wording

log = logging.getLogger(__name__)
_T = TypeVar("_T")

CHANGED_BY = "consolidate"
# A memory's merge partners on other pages: the namespace's memories that share one of its
# entities, every one's cosine taken, up to this many; past it (an entity most memories
# name), its this many nearest in the namespace, of which those sharing an entity.
PARTNER_SCAN_MAX = 4096
MERGE_NEIGHBOURS = 16
# Near-duplicates merge only when said within this span: the merged memory is dated when
# the first was said, so a later one's text moves back by as much (out of a recall filtered
# by ``created_after`` between the two, away from a query that names the later day).
MERGE_MAX_SPAN = timedelta(days=1)
# Restored sources rejoin their merged memory only while these are as a merge of them makes
# them (beside its content): who sees it, how long it stays, what finds it.
REJOIN_FIELDS = ("visibility", "expire_at", "category", "key", "entities")
# Memories compared (or searched for) at one hold of the fast network.
PARTNER_BATCH = 64
# The fast network's cosines may be of float16 vectors; ``plan`` decides on the store's.
PARTNER_MARGIN = 0.01
# A report lists at most this many actions; its counts always cover the whole run.
MAX_REPORTED_ACTIONS = 1000
# Merged memories get an id derived from their sources: planning is deterministic,
# and applying the same merge twice conflicts instead of making two copies.
_MERGE_ID_SPACE = uuid.UUID("6d1f3c0e-3b8a-4a59-9a53-2f0c51d5e7a1")


@dataclass(frozen=True, slots=True)
class Policy:
    scoring: ScoringConfig
    purge_after: timedelta
    merge_cosine: float
    max_content_chars: int

    @classmethod
    def from_config(cls, config: Config, *, floor: float = 0.0) -> Policy:
        """``floor``: the embedder's similarity floor; ``merge_cosine`` is set on the
        calibrated scale (as ``dedup_cosine`` is) and read here in the model's cosines."""
        return cls(
            scoring=config.scoring,
            purge_after=timedelta(days=config.lifecycle.purge_after_days),
            merge_cosine=raw_cosine(config.lifecycle.merge_cosine, floor),
            max_content_chars=config.limits.max_content_chars,
        )


@dataclass(frozen=True, slots=True)
class Item:
    """A record to plan for; ``vector`` (of the model in use) is needed only for merging."""

    memory: Memory
    vector: Vector | None = None


@dataclass(frozen=True, slots=True)
class Archive:
    memory_id: str
    namespace: str
    version: int
    reason: str


@dataclass(frozen=True, slots=True)
class Purge:
    memory_id: str
    namespace: str
    version: int
    reason: str


@dataclass(frozen=True, slots=True)
class Merge:
    namespace: str
    source_ids: tuple[str, ...]
    source_versions: tuple[int, ...]
    cosine: float
    # What the merged memory will look like (recomputed from fresh records on apply).
    merged: Memory

    @property
    def reason(self) -> str:
        return f"near-duplicates (cosine ≥ {self.cosine:.3f}) sharing an entity"


Action = Archive | Purge | Merge


@dataclass(frozen=True, slots=True)
class Outcome:
    action: Action
    # "planned" (dry run), "applied", or "skipped" with ``detail`` saying why.
    status: str
    detail: str | None = None


# --- the rules (pure) -------------------------------------------------------------------


def archive_reason(memory: Memory, now: datetime, policy: Policy) -> str | None:
    """Why an active memory should be archived at ``now``, or None when it should not."""
    if memory.status is not Status.ACTIVE:
        return None
    if memory.expire_at is not None and memory.expire_at <= now:
        return f"expired at {to_iso(memory.expire_at)}"
    threshold = policy.scoring.archive_below(memory.category)
    score = current_score(memory, now, policy.scoring)
    if score < threshold:
        return f"score {score:.4f} fell below the archive threshold {threshold} of {memory.category!r}"
    return None


def purge_reason(memory: Memory, now: datetime, policy: Policy) -> str | None:
    """Why a soft-deleted memory should be purged at ``now`` (deleted long enough ago)."""
    if memory.status is not Status.DELETED:
        return None
    # The deletion wrote the last version, so updated_at is when it was deleted.
    if memory.updated_at + policy.purge_after > now:
        return None
    return f"soft-deleted at {to_iso(memory.updated_at)}, past the retention of {policy.purge_after.days} days"


def merged_content(contents: Sequence[str]) -> str:
    """Every distinct text once, in the given order; a text another one contains adds nothing."""
    kept: list[str] = []
    for text in contents:
        normal = _comparable(text)
        if any(normal in _comparable(other) for other in kept):
            continue
        kept = [other for other in kept if _comparable(other) not in normal]
        kept.append(text.strip())
    return "\n".join(kept)


def _comparable(text: str) -> str:
    return " ".join(text.casefold().split())


def same_provenance(a: Memory, b: Memory) -> bool:
    """Whether two memories came from the same place: the same ``source``, writer (``actor``)
    and session. Only such memories merge. The read guard weighs a text by its source (a
    tool's instruction to the agent is left out of recall, the user's is not), and blocking a
    writer or a session quarantines what it wrote: a merged memory that mixed them would pass
    a tool's text off as the user's, or keep a blocked writer's text in recall under no one's
    name."""
    return a.source is b.source and a.actor == b.actor and a.session_id == b.session_id


def merge_id(source_ids: Iterable[str]) -> str:
    return str(uuid.uuid5(_MERGE_ID_SPACE, "|".join(sorted(source_ids))))


def _same(values: Iterable[_T]) -> _T | None:
    """The value when all are equal, else None."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _union_entities(names: Sequence[str]) -> tuple[str, ...]:
    """Each entity once as compared (case-folded), first spelling kept."""
    seen: dict[frozenset[str], str] = {}
    for name in normalize_entities(names):
        seen.setdefault(entity_keys([name]), name)
    return tuple(seen.values())


def merge_record(sources: Sequence[Memory], now: datetime, policy: Policy) -> Memory:
    """The one memory that replaces ``sources`` (same namespace, category and visibility)."""
    ordered = sorted(sources, key=lambda m: (m.created_at, m.memory_id))
    first = ordered[0]

    expiries = [m.expire_at for m in ordered]
    metadata: dict[str, object] = {}
    for memory in ordered:
        metadata.update(memory.metadata)
    return first.evolve(
        memory_id=merge_id(m.memory_id for m in ordered),
        content=merged_content([m.content for m in ordered]),
        entities=_union_entities([name for m in ordered for name in m.entities]),
        importance=max(m.importance for m in ordered),
        # The strongest source's decay so far, counted from now.
        base_score=max(decayed_base(m, now, policy.scoring) for m in ordered),
        source=_same(m.source for m in ordered) or first.source,
        actor=_same(m.actor for m in ordered),
        session_id=_same(m.session_id for m in ordered),
        key=_same(m.key for m in ordered),
        created_at=first.created_at,
        updated_at=now,
        last_accessed_at=now,
        access_count=sum(m.access_count for m in ordered),
        expire_at=None if None in expiries else max(e for e in expiries if e is not None),
        status=Status.ACTIVE,
        version=1,
        metadata=metadata,
    )


def plan(items: Iterable[Item], now: datetime, policy: Policy) -> list[Action]:
    """What consolidation should do with these records at ``now``. No I/O.

    Archives and purges come first, in the order of ``items``; then merges. A
    memory takes part in at most one merge, and one that is due for archiving
    is archived rather than merged.
    """
    pool = list({item.memory.memory_id: item for item in items}.values())
    actions: list[Action] = []
    mergeable: list[Item] = []
    for item in pool:
        memory = item.memory
        reason = archive_reason(memory, now, policy)
        if reason is not None:
            actions.append(Archive(memory.memory_id, memory.namespace, memory.version, reason))
            continue
        reason = purge_reason(memory, now, policy)
        if reason is not None:
            actions.append(Purge(memory.memory_id, memory.namespace, memory.version, reason))
            continue
        if memory.status is Status.ACTIVE and memory.entities and item.vector is not None:
            mergeable.append(item)
    actions += _plan_merges(mergeable, now, policy)
    return actions


def _plan_merges(items: Sequence[Item], now: datetime, policy: Policy) -> list[Merge]:
    ordered = sorted(items, key=lambda item: (item.memory.created_at, item.memory.memory_id))
    keys = [entity_keys(item.memory.entities) for item in ordered]
    by_entity: dict[tuple[str, str], list[int]] = {}
    for position, (item, names) in enumerate(zip(ordered, keys, strict=True)):
        for name in names:
            by_entity.setdefault((item.memory.namespace, name), []).append(position)
    # Nor do texts merge that give other numbers or differ in a word that turns what they say
    # around ("1200" / "1500", "Monday" / "Tuesday", "likes" / "hates", "he" / "she", "can" /
    # "can't"), as write-time dedup keeps them apart (``Wording.says_as``, which ``text.repeats``
    # asks too): one merged memory, dated when the first was said, held both values and no
    # longer told which one holds now. Each text is read once, however many it meets.
    read: dict[int, Wording] = {}

    def wording(position: int) -> Wording:
        if position not in read:
            read[position] = Wording.of(ordered[position].memory.content)
        return read[position]

    taken: set[int] = set()
    merges: list[Merge] = []
    for position, seed in enumerate(ordered):
        if position in taken:
            continue
        assert seed.vector is not None
        partners: list[tuple[int, float]] = []
        near = sorted({p for name in keys[position] for p in by_entity[(seed.memory.namespace, name)]})
        for other in near:
            if other == position or other in taken:
                continue
            candidate = ordered[other]
            assert candidate.vector is not None
            if candidate.memory.category != seed.memory.category or not same_audience(candidate.memory, seed.memory):
                continue
            if candidate.memory.key != seed.memory.key:  # a keyed memory is one record of its key
                continue
            if not same_provenance(candidate.memory, seed.memory):
                continue
            # The seed is the earliest of its group: its partners were said within a day after it.
            if not seed.memory.created_at <= candidate.memory.created_at <= seed.memory.created_at + MERGE_MAX_SPAN:
                continue
            cosine = float(np.dot(seed.vector, candidate.vector))
            if (
                cosine >= policy.merge_cosine
                and wording(position).overlap(wording(other)) >= MERGE_MIN_OVERLAP
                and wording(position).says_as(wording(other))
                # and with each partner already taken: "the fast train" and "the slow train"
                # each only add a word to "the train", and one memory held both
                and all(wording(other).says_as(wording(partner)) for partner, _ in partners)
            ):
                partners.append((other, cosine))
        if not partners:
            continue
        group = [seed.memory] + [ordered[other].memory for other, _ in partners]
        merged = merge_record(group, now, policy)
        if len(merged.content) > policy.max_content_chars:
            continue
        taken.add(position)
        taken.update(other for other, _ in partners)
        merges.append(
            Merge(
                namespace=seed.memory.namespace,
                source_ids=tuple(m.memory_id for m in group),
                source_versions=tuple(m.version for m in group),
                cosine=min(cosine for _, cosine in partners),
                merged=merged,
            )
        )
    return merges


# --- apply --------------------------------------------------------------------------------


def apply(
    actions: Sequence[Action],
    store: Store,
    *,
    now: datetime,
    policy: Policy,
    embedder: Embedder,
    vectors: Mapping[str, Vector],
    changed_by: str = CHANGED_BY,
) -> list[Outcome]:
    """Carry out ``actions``, each re-checked against the stored record first.

    ``vectors`` holds the embedding of each merge's content, by merged memory id.
    An action whose memory changed since it was planned (another version, or the
    rule no longer holds) is skipped, not forced, also where another process changed,
    merged or purged it between the re-check and the write: the store refuses that
    write (``Conflict``, ``MemoryNotFound``: each action's writes are one transaction,
    so none of them landed). The caller holds the write lock, which keeps this
    process's own writers out, not another's.
    """
    outcomes = []
    for action in actions:
        try:
            if isinstance(action, Archive):
                outcomes.append(_archive(action, store, now, policy, changed_by))
            elif isinstance(action, Purge):
                outcomes.append(_purge(action, store, now, policy))
            else:
                outcomes.append(_merge(action, store, now, policy, embedder, vectors, changed_by))
        except (Conflict, MemoryNotFound):  # changed, merged or purged by another process
            outcomes.append(Outcome(action, "skipped", "changed by another process since planned"))
    return outcomes


def _archive(action: Archive, store: Store, now: datetime, policy: Policy, changed_by: str) -> Outcome:
    current = store.get(Scope.whole([action.namespace]), action.memory_id)
    if current is None or current.version != action.version:
        return Outcome(action, "skipped", "changed since planned")
    reason = archive_reason(current, now, policy)
    if reason is None:
        return Outcome(action, "skipped", "no longer due for archiving")
    archived = current.evolve(status=Status.ARCHIVED, version=current.version + 1, updated_at=now)
    store.update(archived, None, changed_by=changed_by, reason=f"archived: {reason}")
    return Outcome(action, "applied")


def _purge(action: Purge, store: Store, now: datetime, policy: Policy) -> Outcome:
    current = store.get(Scope.whole([action.namespace]), action.memory_id)
    if current is None or current.version != action.version or purge_reason(current, now, policy) is None:
        return Outcome(action, "skipped", "changed since planned")
    carried = carried_past(store, current, now)
    if carried:  # a crash before the purge leaves one link more, saying what held already
        store.add_edges(carried)
    store.purge(action.namespace, action.memory_id, version=current.version)
    log.info("purged memory %s of namespace %r: %s", action.memory_id, action.namespace, action.reason)
    return Outcome(action, "applied")


def _merge(
    action: Merge,
    store: Store,
    now: datetime,
    policy: Policy,
    embedder: Embedder,
    vectors: Mapping[str, Vector],
    changed_by: str,
) -> Outcome:
    sources = [store.get(Scope.whole([action.namespace]), memory_id) for memory_id in action.source_ids]
    fresh = [m for m in sources if m is not None]
    if len(fresh) != len(sources) or tuple(m.version for m in fresh) != action.source_versions:
        return Outcome(action, "skipped", "a source changed since planned")
    if any(m.status is not Status.ACTIVE for m in fresh):
        return Outcome(action, "skipped", "a source is no longer active")
    vector = vectors.get(action.merged.memory_id)
    merged = merge_record(fresh, now, policy)
    if vector is None or content_digest(merged.content) != content_digest(action.merged.content):
        return Outcome(action, "skipped", "no embedding for the merged content")
    merged = merged.evolve(embedding_model=embedder.name, embedding_version=embedder.version)
    existing = store.get(Scope.whole([action.namespace]), merged.memory_id)
    refused = rejoin_refused(existing, merged, now, policy)
    if refused is not None:
        return Outcome(action, "skipped", refused)
    # One transaction: the merged memory, its sources superseded and the MERGED_INTO links
    # land together or not at all.
    reason = f"merged into {merged.memory_id}"
    store.insert_linked(
        [merged] if existing is None else [],
        [vector] if existing is None else [],
        updates=[(m.evolve(status=Status.SUPERSEDED, version=m.version + 1, updated_at=now), reason) for m in fresh],
        edges=[Edge(action.namespace, m.memory_id, merged.memory_id, MERGED_INTO, now) for m in fresh]
        + _carried_links(store, action.namespace, fresh, merged.memory_id, now),
        changed_by=changed_by,
        reason=f"merged from {', '.join(action.source_ids)}",
    )
    return Outcome(action, "applied")


def rejoin_refused(existing: Memory | None, merged: Memory, now: datetime, policy: Policy) -> str | None:
    """Why a merge's sources may not join ``existing``, the stored memory of its merged id,
    or None where they may (or it is not stored). The id comes from the sources: it exists
    when these sources were merged before and then restored. They join it again only while
    it is active, not due for archiving (its score faded while the restore restarted theirs:
    joined, they would leave recall with it), and still is what a merge of them makes: one
    edited since may hold their text no more, or hold it where not all who saw them see it
    (made private), or for less long (an expiry, another category)."""
    if existing is None:
        return None
    if existing.status is not Status.ACTIVE:
        return f"their merged memory exists and is {existing.status.value}"
    due = archive_reason(existing, now, policy)
    if due is not None:
        return f"their merged memory exists and is due for archiving: {due}"
    if content_digest(existing.content) != content_digest(merged.content):
        return "their merged memory exists and says something else now"
    edited = [name for name in REJOIN_FIELDS if getattr(existing, name) != getattr(merged, name)]
    if edited:
        return f"their merged memory exists and its {', '.join(edited)} changed since"
    return None


def _carried_links(
    store: Store, namespace: str, sources: Sequence[Memory], merged_id: str, now: datetime
) -> list[Edge]:
    """The sources' conflict links, from the merged memory that now says what they said:
    each ``CONTRADICTS`` (either way), so recall still lists the clash on the memory in
    recall, and each ``SUPERSEDES`` out of a source, so the older memory's chain runs
    through the merged one and deleting it brings the older one back (``engine.supersession``)."""
    ids = {m.memory_id for m in sources}
    carried: dict[tuple[str, str, str], Edge] = {}
    for source in sources:
        for edge in store.edges(Scope.whole([namespace]), source.memory_id):
            if edge.kind == SUPERSEDES and edge.src == source.memory_id and edge.dst not in ids:
                link = (merged_id, edge.dst, SUPERSEDES)
            elif edge.kind == CONTRADICTS and edge.src == source.memory_id and edge.dst not in ids:
                link = (merged_id, edge.dst, CONTRADICTS)
            elif edge.kind == CONTRADICTS and edge.dst == source.memory_id and edge.src not in ids:
                link = (edge.src, merged_id, CONTRADICTS)
            else:
                continue
            carried.setdefault(link, Edge(namespace, *link, now))
    return list(carried.values())


def carried_past(store: Store, memory: Memory, now: datetime) -> list[Edge]:
    """The ``SUPERSEDES`` links that keep, once ``memory`` is purged with its links, what
    ran through it: from each memory that superseded it to each memory it superseded that
    is still superseded ("I moved to Lisbon" → "I live in Berlin" once "I moved to Paris"
    between them is purged), so that deleting the newest one still brings the oldest back
    (``engine.supersession``). None for an active memory: its deletion reinstates them."""
    if memory.status is Status.ACTIVE:
        return []
    whole = Scope.whole([memory.namespace])
    links = [edge for edge in store.edges(whole, memory.memory_id) if edge.kind == SUPERSEDES]
    newer = dict.fromkeys(edge.src for edge in links_into(links, memory.memory_id))
    if not newer:
        return []
    older = dict.fromkeys(edge.dst for edge in links if edge.src == memory.memory_id != edge.dst)
    # Not one it no longer hid (an edit reinstated it, something else superseded it since):
    # the carried link would hide it behind a memory that never replaced it. One deleted or
    # quarantined since counts, as superseded ones do: the chain runs on through it ("I moved
    # to Paris" deleted under "I live in Rome", Rome purged: else nothing led from "I moved
    # to Lisbon" to Paris, and past it to the "I live in Berlin" it hides).
    hidden = [
        found.memory_id
        for found in (store.get(whole, o) for o in older)
        if found is not None
        and found.status in (Status.SUPERSEDED, Status.DELETED, Status.QUARANTINED)
        and memory.memory_id not in released_from(store, found)
    ]
    return [Edge(memory.namespace, src, dst, SUPERSEDES, now) for src in newer for dst in hidden if src != dst]


# --- a run over one namespace ---------------------------------------------------------------


@dataclass(slots=True)
class Report:
    namespace: str
    dry_run: bool
    now: datetime
    scanned: int = 0
    archived: int = 0
    purged: int = 0
    merged: int = 0
    merged_sources: int = 0
    skipped: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    truncated: bool = False

    def add(self, outcomes: Iterable[Outcome]) -> None:
        for outcome in outcomes:
            if outcome.status == "skipped":
                self.skipped += 1
            elif isinstance(outcome.action, Archive):
                self.archived += 1
            elif isinstance(outcome.action, Purge):
                self.purged += 1
            else:
                self.merged += 1
                self.merged_sources += len(outcome.action.source_ids)
            if len(self.outcomes) < MAX_REPORTED_ACTIONS:
                self.outcomes.append(outcome)
            else:
                self.truncated = True


class Consolidator:
    """Runs consolidation over a namespace: page by page, applied in locked batches."""

    def __init__(
        self,
        config: Config,
        store: Store,
        keeper: IndexKeeper,
        embedder: Embedder,
        recaller: Recaller,
        *,
        lock: AbstractContextManager[object],
        clock: Callable[[], datetime],
        check_namespace: Callable[[Sequence[str]], None],
    ) -> None:
        self._config = config
        self._policy = Policy.from_config(config, floor=embedder.similarity_floor)
        self._store = store
        self._keeper = keeper
        self._embedder = embedder
        self._recaller = recaller
        self._lock = lock
        self._clock = clock
        self._check_namespace = check_namespace

    def run(self, namespace: str, *, dry_run: bool = False) -> Report:
        self._check_namespace([namespace])
        now = self._clock()
        report = Report(namespace, dry_run, now)
        size = self._config.lifecycle.page_size
        claimed: set[str] = set()  # ids already in a merge of this run (as many as merges)
        # The merged memories of this run's merges: one made on an earlier page merges with
        # nothing on a later one, where its dry run, which never made it, merged nothing (the
        # next run plans it, and its dry run says so). Archived or purged as planned all the same.
        merged: set[str] = set()
        purged: set[str] = set()  # a dry run's: ids the run would have purged by now
        after = ""
        while True:
            page = self._store.scan(Scope.whole([namespace]), after, size)
            report.scanned += len(page)
            page_ids = {m.memory_id for m in page}
            actions = [
                action
                for action in plan(self._items(namespace, page, claimed, merged, now), now, self._policy)
                if isinstance(action, Merge) or action.memory_id in page_ids
            ]
            for action in actions:
                if isinstance(action, Merge):
                    claimed.update(action.source_ids)
                    merged.add(action.merged.memory_id)
            if dry_run:
                report.add(self._planned(namespace, action, now, purged) for action in actions)
            else:
                self._apply(actions, now, report)
            if len(page) < size:
                break
            after = page[-1].memory_id
        log.info(
            "consolidated namespace %r%s: %d scanned, %d archived, %d purged, %d merges of %d, %d skipped",
            namespace,
            " (dry run)" if dry_run else "",
            report.scanned,
            report.archived,
            report.purged,
            report.merged,
            report.merged_sources,
            report.skipped,
        )
        return report

    def run_all(self) -> list[Report]:
        return [self.run(namespace) for namespace in self._store.namespaces()]

    def _planned(self, namespace: str, action: Action, now: datetime, purged: set[str]) -> Outcome:
        """What a dry run reports of ``action``: planned, or skipped where the run would
        skip it before any write (its sources' merged memory exists and may not take them
        back, ``rejoin_refused``). ``purged``: the ids the run would have purged before this
        action (a page's purges come before its merges), added to here; a merged memory
        among them is gone by the merge, which makes it anew."""
        if isinstance(action, Purge):
            purged.add(action.memory_id)
        if isinstance(action, Merge):
            existing = self._store.get(Scope.whole([namespace]), action.merged.memory_id)
            if existing is not None and existing.memory_id in purged:
                existing = None
            refused = rejoin_refused(existing, action.merged, now, self._policy)
            if refused is not None:
                return Outcome(action, "skipped", refused)
        return Outcome(action, "planned")

    def _items(
        self, namespace: str, page: Sequence[Memory], claimed: set[str], merged: set[str], now: datetime
    ) -> list[Item]:
        """The page's records, plus their merge partners on other pages (``_partners``);
        ``merged`` (this run's merged memories) without a vector: they merge with nothing."""
        model = self._embedder.name
        # A text the model cannot read (MiniLM on Chinese) has a vector that says nothing: it
        # vouches for no merge, as for no fold on save (engine/writing.py); it merges with nothing.
        wanted = [
            m
            for m in page
            if m.status is Status.ACTIVE
            and m.entities
            and m.memory_id not in claimed
            and m.memory_id not in merged
            and self._reads(m.content)
        ]
        vectors = self._store.vectors([m.memory_id for m in wanted], model)
        items = [Item(m, vectors.get(m.memory_id)) for m in page if m.memory_id not in claimed]
        if not vectors:
            return items
        self._keeper.ensure_current()
        near = self._partners(namespace, [(m, vectors[m.memory_id]) for m in wanted if m.memory_id in vectors], now)
        near -= {m.memory_id for m in page} | claimed | merged
        if near:
            partners = self._store.get_many(Scope.whole([namespace]), sorted(near), MemoryFilter(), now)
            partner_vectors = self._store.vectors([m.memory_id for m in partners], model)
            items += [
                Item(m, partner_vectors.get(m.memory_id) if self._reads(m.content) else None)
                for m in partners
                if m.entities
            ]
        return items

    def _reads(self, content: str) -> bool:
        """Whether the embedder reads ``content`` (``ports.model_reads``)."""
        return model_reads(self._embedder, content, self._config.recall.unread_query_share)

    def _partners(self, namespace: str, memories: Sequence[tuple[Memory, Vector]], now: datetime) -> set[str]:
        """The ids of the namespace's active memories that may merge with one of
        ``memories``: that share an entity with it and whose cosine to it, as the fast
        network reads it, comes within ``PARTNER_MARGIN`` of ``merge_cosine`` (``plan``
        decides on the store's vectors). Every memory sharing an entity is looked at, so
        what a run merges depends neither on the approximate search nor on the other
        namespaces: entity by entity, the rows that mention it against the page's
        memories that do, in one matrix product a batch. A memory whose entities' active
        memories, counted entity by entity, are more than ``PARTNER_SCAN_MAX`` has its
        ``MERGE_NEIGHBOURS`` nearest in the namespace that share one looked at instead (the
        postings are counted first, without listing them, and listed to count their active
        rows only where they hold more than that, of every status). The fast network is
        held still for one entity's count, or one batch of ``PARTNER_BATCH`` memories, at a
        time: saves and recalls go on between."""
        if not memories:
            return set()
        scope, floor = Scope.whole([namespace]), self._policy.merge_cosine - PARTNER_MARGIN
        net = self._keeper.network
        vectors = np.stack([np.asarray(vector, np.float32) for _, vector in memories])
        keys = [entity_keys(memory.entities) for memory, _ in memories]
        # A posting holds every status until a purge (deleted, superseded, …): where a
        # memory's postings hold more than the limit, its keys' active rows are counted.
        counts: dict[str, int] = {}
        for key in sorted(set().union(*keys)):
            with net.reading():
                counts[key] = net.count_by_entity(namespace, key)
        active: dict[str, int] = {}

        def active_count(key: str) -> int:
            if key not in active:
                with net.reading():
                    rows = net.by_entity([namespace], key)
                    active[key] = int(net.passes(scope, MemoryFilter(), now, rows).sum())
            return active[key]

        by_key: dict[str, list[int]] = {}
        wide: list[int] = []
        for position, names in enumerate(keys):
            if sum(counts[key] for key in names) > PARTNER_SCAN_MAX:
                if sum(active_count(key) for key in names) > PARTNER_SCAN_MAX:
                    wide.append(position)
            for key in names:
                by_key.setdefault(key, []).append(position)
        found: set[str] = set()
        searched = set(wide)
        for key in sorted(by_key):
            positions = [p for p in by_key[key] if p not in searched]
            for start in range(0, len(positions), PARTNER_BATCH):
                batch = positions[start : start + PARTNER_BATCH]
                with net.reading():
                    rows = net.by_entity([namespace], key)
                    rows = rows[net.passes(scope, MemoryFilter(), now, rows)]
                    if not len(rows):
                        break
                    close = net.cosine_matrix(rows, vectors[batch]) >= floor
                    found.update(net.ids_of(rows[close.any(axis=1)]))
        for start in range(0, len(wide), PARTNER_BATCH):
            batch = wide[start : start + PARTNER_BATCH]
            with net.reading():
                answers = self._recaller.nearest_many(
                    net, vectors[batch], scope, MemoryFilter(), now, pool=MERGE_NEIGHBOURS, want=MERGE_NEIGHBOURS
                )
                for position, (rows, cosines) in zip(batch, answers, strict=True):
                    close = rows[cosines >= floor].tolist()
                    found.update(net.id_of(row) for row in close if net.entity_keys_of(row) & keys[position])
        return found

    def _apply(self, actions: Sequence[Action], now: datetime, report: Report) -> None:
        merges = [action for action in actions if isinstance(action, Merge)]
        embedded = self._embedder.embed_documents([m.merged.content for m in merges]) if merges else None
        vectors = {m.merged.memory_id: embedded[i] for i, m in enumerate(merges)} if embedded is not None else {}
        batch = self._config.lifecycle.apply_batch
        for start in range(0, len(actions), batch):
            with self._lock:
                outcomes = apply(
                    actions[start : start + batch],
                    self._store,
                    now=now,
                    policy=self._policy,
                    embedder=self._embedder,
                    vectors=vectors,
                )
                self._keeper.catch_up()
            report.add(outcomes)


class Schedule:
    """Runs ``job`` every ``every`` (by ``clock``) on a background thread; checks every ``poll_s``.

    The first run is one interval after start. A failed run is logged and counted
    (``failures``, in the health report) and the schedule goes on.
    """

    def __init__(
        self,
        job: Callable[[], object],
        every: timedelta,
        *,
        clock: Callable[[], datetime],
        poll_s: float = 30.0,
        name: str = "consolidation",
    ) -> None:
        if every <= timedelta(0):
            raise InvalidInput("a schedule needs a positive interval")
        self._job = job
        self._every = every
        self._clock = clock
        self._poll_s = min(poll_s, every.total_seconds())
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.next_run: datetime | None = None
        self.runs = 0
        self.failures = 0

    def start(self) -> None:
        if self._thread is None:
            self.next_run = self._clock() + self._every
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=f"twinmem-{self._name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def run_due(self) -> bool:
        """Run the job if its time has come; True when it ran."""
        now = self._clock()
        if self.next_run is None or now < self.next_run:
            return False
        self.next_run = now + self._every
        try:
            self._job()
            self.runs += 1
        except Exception:
            # A background job has no caller to raise to: count it, say it, keep the schedule.
            self.failures += 1
            log.exception("scheduled %s failed", self._name)
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self._poll_s):
            self.run_due()
