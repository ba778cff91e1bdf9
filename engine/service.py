"""The engine's public surface: save, get, list, update, delete and recall memories.

Write path: validate, guard and embed (outside any lock) → under the write lock:
``engine.writing`` finds what each new memory repeats, supersedes or contradicts
(candidates from the fast network) → one store transaction, with HNSW's insertion of
the new vectors running beside it on the keeper's worker thread
(``IndexKeeper.index_ahead``) → catch the index and the fast network up from the change
sequence (the fast network's part while that insertion is still running).

Recall path: validate, embed the query, then ``engine.recall`` answers it from the
fast network and reads the store once for the hits. Rank bonuses go to the
background reinforcer.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from engine import change_log, episodes, limits, persons, procedures, scoring, supersession, text
from engine import guard as guards
from engine.config import Config
from engine.conflicts import CANDIDATES_PER_CHANNEL, SUPERSEDES
from engine.entities import canonical_key, entities_for, extract_entities
from engine.errors import (
    Conflict,
    Forbidden,
    GuardRejected,
    InvalidInput,
    MemoryNotFound,
    NotOwner,
    SaveOvertaken,
    SourceBlocked,
    StaleWrite,
    VersionMismatch,
    expect_version,
)
from engine.index_keeper import IndexKeeper
from engine.lifecycle import Consolidator, Schedule, carried_past
from engine.ports import (
    BlockList,
    Edge,
    Embedder,
    EmbedsQueries,
    ImportedRecord,
    Leases,
    Matrix,
    Reinforcement,
    SecurityStore,
    Store,
    TimeExpressions,
    Vector,
    model_reads,
)
from engine.recall import Recaller, RecallQuery, RecallResult
from engine.records import (
    Memory,
    MemoryDraft,
    MemoryFilter,
    MemoryPatch,
    Page,
    Scope,
    Source,
    Status,
    TimeWindow,
    Version,
    entity_keys,
    metadata_key_problem,
    more_widely_read,
    new_memory_id,
    normalize_entities,
    same_audience,
    sight_of,
    utcnow,
)
from engine.reembed import Reembedder
from engine.reinforcement import Reinforcer
from engine.rollback import Rollbacks
from engine.security import AuditEvent, Block, BlockKind
from engine.writing import BatchPlan, SaveJudge, clashes
from engine.writing import SaveResult as SaveResult  # where callers have always found it

log = logging.getLogger(__name__)
_T = TypeVar("_T")

NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9_.:@\-]{1,128}$")
# Metadata filter keys name a (dotted) path; checked here so that a bad filter
# is refused whatever the store holds, not only once a candidate reaches the store.
# Memories quarantined per hold of the write lock when a source is blocked.
QUARANTINE_BATCH = 100
# An unconditional edit or deletion that another process's write beat between its read and
# its own write is read and applied again, at most this many times in all.
EDIT_TRIES = 3
# Tries of a save that another replica's save of the same session or text overtook (``SaveOvertaken``).
OVERTAKEN_TRIES = 10
# Namespaces per store read when a memory is looked for by id alone (a bound on query parameters).
FIND_BATCH = 500
# During a change of model, how many memories not yet re-embedded one save (of one memory
# or a batch) re-embeds first, for its checks: a batch of 500 asking each text's 20
# nearest re-embedded thousands in the request, under the write lock for their writes.
LEGACY_NEIGHBOURS_PER_WRITE = 1000


class _NobodyBlocked:
    def is_blocked(self, agent: str | None, session_id: str | None) -> bool:
        return False


NOBODY_BLOCKED: BlockList = _NobodyBlocked()


(_THE_USER_TERM,) = text.terms(persons.THE_USER)  # the search term a memory about "the user" holds


@dataclass(frozen=True, slots=True)
class QueryVectors:
    """What a recall reads of its query, embedded (``MemoryService.query_vectors``)."""

    query: Vector
    focus: Vector | None = None  # the focus's, where it is weighed
    phrasing: Vector | None = None  # the query in the other person's (``MemoryService.phrasing``)
    focus_phrasing: Vector | None = None  # the focus in the other person's


@dataclass(frozen=True, slots=True)
class Deletion:
    """What ``MemoryService.delete`` did: the memory as deleted (as it was, for a purge), and
    the memories it had superseded that are active again (``engine.supersession``), of
    those the caller sees."""

    memory: Memory
    reinstated: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Neighbourhood:
    memory: Memory
    edges: list[Edge]
    linked: dict[str, Memory]


# Every status a reader may still open (deleted ones are gone for readers).
_ANY_LIVE = MemoryFilter(
    statuses=(Status.ACTIVE, Status.SUPERSEDED, Status.ARCHIVED, Status.QUARANTINED), include_expired=True
)


class MemoryService:
    def __init__(
        self,
        config: Config,
        store: Store,
        keeper: IndexKeeper,
        embedder: Embedder,
        *,
        clock: Callable[[], datetime] = utcnow,
        on_close: Callable[[], None] | None = None,
        times: TimeExpressions | None = None,
        security: SecurityStore | None = None,
    ) -> None:
        self.config = config
        # Tokens, blocks and the audit log (the API authenticates and audits through it).
        self.security = security
        # Reads the times a query names for the time signal ([fusion] time); None: no time signal.
        self.times = times
        self._on_close = on_close
        self.store = store
        self.keeper = keeper
        self.embedder = embedder
        self._clock = clock
        self._write_lock = threading.Lock()
        # Blocked sources (admins keep them beside the tokens): their writes are refused
        # and the read guard drops their sensitive-action memories. Without a security
        # store the engine blocks nobody.
        self.blocks: BlockList = security if security is not None else NOBODY_BLOCKED
        self.reinforcer = Reinforcer(self._reinforce_in_background)
        self.recaller = Recaller(config, store, keeper, embedder, self._writer_blocked, times)
        self.judge = SaveJudge(config, store, keeper, embedder, self.recaller)
        # Lifecycle (engine/lifecycle.py, rollback.py, reembed.py): each holds the write lock per batch.
        lock, check = self._write_lock, self._check_namespaces
        self.consolidator = Consolidator(
            config, store, keeper, embedder, self.recaller, lock=lock, clock=clock, check_namespace=check
        )
        self.rollbacks = Rollbacks(
            config,
            store,
            keeper,
            embedder,
            lock=lock,
            clock=clock,
            check_namespace=check,
            guard=self._guarded,
            retrying=self._retrying,
        )
        self.reembedder = Reembedder(
            store,
            keeper,
            embedder,
            lock=self._write_lock,
            batch=config.lifecycle.reembed_batch,
            lease=store if isinstance(store, Leases) else None,
        )
        every = config.lifecycle.consolidate_every_minutes
        self.schedule = Schedule(self.consolidator.run_all, timedelta(minutes=every), clock=clock) if every else None
        self.change_log_pruning = self._change_log_schedule(config, clock)
        self._block_passes: threading.Thread | None = None  # ``_finish_block_passes``

    def now(self) -> datetime:
        """The service's clock (frozen in tests)."""
        return self._clock()

    # --- lifecycle -----------------------------------------------------------------

    def start(self, *, background_reembed: bool = True) -> None:
        # Read first (the one step here that reads a store, so the one likely to fail: a
        # start that fails leaves no thread running), started last.
        unfinished = self._unfinished_blocks()
        self.reinforcer.start()
        if background_reembed:
            self.reembedder.start()
        if self.schedule is not None:
            self.schedule.start()
        if self.change_log_pruning is not None:
            self.change_log_pruning.start()
        if unfinished:
            self._block_passes = threading.Thread(
                target=self._finish_block_passes, args=(unfinished,), name="block-passes", daemon=True
            )
            self._block_passes.start()

    def close(self) -> None:
        """Apply pending reinforcement, save the index, close the store."""
        try:
            if self._block_passes is not None:
                self._block_passes.join()
            if self.schedule is not None:
                self.schedule.stop()
            if self.change_log_pruning is not None:
                self.change_log_pruning.stop()
            self.reembedder.stop()
            self.reinforcer.stop()
            self.keeper.stop()
            self.keeper.save()
            self.store.close()
        finally:
            if self._on_close is not None:
                self._on_close()

    def _change_log_schedule(self, config: Config, clock: Callable[[], datetime]) -> Schedule | None:
        every, keep = config.lifecycle.change_log_prune_seconds, config.lifecycle.change_log_keep
        if not every:
            return None

        def keep_up_and_prune() -> None:
            # Caught up first: a replica that serves no request for a while stays above the mark.
            self.keeper.ensure_current()
            change_log.prune(self.store, keep)

        return Schedule(
            keep_up_and_prune,
            timedelta(seconds=every),
            clock=clock,
            name="change-log-pruning",
        )

    def flush(self) -> None:
        """Wait until background reinforcement has caught up (tests, shutdown)."""
        self.reinforcer.flush()

    # --- writes --------------------------------------------------------------------

    def save(self, draft: MemoryDraft, *, actor: str | None = None, scope: Scope | None = None) -> SaveResult:
        return self.save_batch([draft], actor=actor, scope=scope)[0]

    def save_batch(
        self,
        drafts: Sequence[MemoryDraft],
        *,
        actor: str | None = None,
        scope: Scope | None = None,
        quarantine_blocked: bool = False,
    ) -> list[SaveResult]:
        """Save memories in one transaction. ``scope`` is the writer's: a save deduplicates
        against, supersedes and contradicts only memories of its own audience that the
        writer can see (a writer without read rights sees only what it wrote).

        A draft of a blocked source is refused (``SourceBlocked``); with
        ``quarantine_blocked``, stored quarantined instead, as blocking the source left what
        it wrote before (a session's promotion: what it holds was accepted before the block)."""
        if not drafts:
            return []
        if len(drafts) > self.config.limits.max_batch:
            raise InvalidInput(
                f"a batch holds at most {self.config.limits.max_batch} memories, got {len(drafts)}",
                field="memories",
            )
        for position, draft in enumerate(drafts):
            self._check_draft(draft, position if len(drafts) > 1 else None)
            if not quarantine_blocked:
                self.refuse_blocked(draft.actor or actor, draft.session_id)
        drafts, verdicts = self._guard_writes(drafts)
        drafts = [replace(d, entities=entities_for(d.entities, d.content)) for d in drafts]
        vectors = self.embedder.embed_documents([d.content for d in drafts])
        self._reembed_neighbours(drafts)
        # Under the write lock; decided anew where another process wrote a memory the batch
        # supersedes or contradicts between its read and the store's write (``StaleWrite``).
        results, judged = self._retrying(
            lambda: self._saved_batch(drafts, verdicts, vectors, actor, scope, quarantine_blocked), "", None
        )
        return [replace(result, guard=judged[n]) for n, result in enumerate(results) if result is not None]

    def _saved_batch(
        self,
        drafts: Sequence[MemoryDraft],
        verdicts: Sequence[guards.WriteVerdict],
        vectors: Matrix,
        actor: str | None,
        scope: Scope | None,
        quarantine_blocked: bool,
    ) -> tuple[list[SaveResult | None], list[guards.WriteVerdict]]:
        """``save_batch``'s judgments and write, under the write lock: the results by
        position, and the write guard's verdicts as they stand under the lock."""
        verdicts = list(verdicts)
        # Again under the lock: a block recorded while this batch was guarded and
        # embedded is refused here, or its quarantine pass waits for this write
        # (``quarantine_source``), so no write of a blocked source escapes both.
        for position, draft in enumerate(drafts):
            if not quarantine_blocked:
                self.refuse_blocked(draft.actor or actor, draft.session_id)
            elif self.blocks.is_blocked(draft.actor or actor, draft.session_id):
                verdict = verdicts[position]
                verdicts[position] = guards.WriteVerdict(
                    guards.Action.QUARANTINED,
                    verdict.content,
                    verdict.findings,
                    (*verdict.reasons, "its writer is blocked by an admin"),
                )
        self.keeper.ensure_current()
        # The change this batch is judged at: another replica's save of the same session or
        # text committed after it is found in the store's write (``SaveOvertaken``).
        seen_seq = self.keeper.network.applied_seq
        now = self._clock()
        results: list[SaveResult | None] = [None] * len(drafts)
        fresh: list[tuple[int, Memory, Vector]] = []
        earlier: dict[str, list[Memory]] = {}  # the batch's new memories by digest
        # What the batch writes, as it stands after each memory: each is deduplicated
        # and judged for conflicts in turn, against what the earlier ones left, so the
        # batch ends as the same saves one at a time would ("Berlin", "Paris", "Berlin"
        # leaves the second Berlin active, not folded into the first one Paris replaced).
        plan = BatchPlan()
        repeats: list[Reinforcement] = []
        news = [self._new_memory(draft, now, actor) for draft in drafts]
        to_judge = [
            verdict.action is not guards.Action.QUARANTINED and self._conflict_mode(draft) != "off"
            for draft, verdict in zip(drafts, verdicts, strict=True)
        ]
        # Every stored record the judgments below read, read at once.
        with self.judge.reads_for(list(zip(news, vectors, to_judge, strict=True)), now, scope):
            for position, (memory, vector) in enumerate(zip(news, vectors, strict=True)):
                # A quarantined draft (the write guard's, or a blocked writer's) repeats
                # no active memory: folded into one, it was answered as that memory,
                # reinforced it, and was not kept for an admin's review. It is stored
                # quarantined, as one that repeats nothing is, and supersedes and contradicts
                # nothing; only a quarantined one it repeats word for word takes it.
                if verdicts[position].action is guards.Action.QUARANTINED:
                    memory = memory.evolve(status=Status.QUARANTINED)
                    # Its writer's word-for-word repeat of one held for review is that one.
                    held = self.judge.quarantined_repeat(memory, earlier, now, scope)
                    if held is not None:
                        results[position] = SaveResult(held, created=False, deduplicated_by="digest", similarity=1.0)
                        continue
                    results[position] = SaveResult(memory, created=True)
                    fresh.append((position, memory, vector))
                    earlier.setdefault(memory.digest, []).append(memory)
                    continue
                # A repeat is one of the same audience only: deduplicating across it would
                # answer with (and reveal) a memory the writer cannot see, or fold a
                # private memory into a shared one.
                same = self.judge.same_text(memory, earlier, plan, now, scope)
                if same is not None:
                    results[position] = SaveResult(same, created=False, deduplicated_by="digest", similarity=1.0)
                    repeats.append((same.memory_id, self.config.scoring.reinforce_top1, now))
                    continue
                near = self.judge.near_duplicate(
                    memory, vector, fresh, plan, now, scope, fresh_vectors=vectors[[item[0] for item in fresh]]
                )
                if near is not None and not clashes(memory, near[0]):
                    results[position] = SaveResult(
                        near[0], created=False, deduplicated_by="similar", similarity=near[1]
                    )
                    repeats.append((near[0].memory_id, self.config.scoring.reinforce_top1, now))
                    continue
                mode = self._conflict_mode(drafts[position])
                judged = self.judge.resolve_conflicts(plan, (position, memory, vector), mode, now, scope)
                saved = judged or SaveResult(memory, created=True)
                if mode == "supersede":
                    # "I moved to Paris." then "It's only for six months.": the move was a stay.
                    back = self.judge.stay_said(plan, memory, fresh, now, self._guarded)
                    saved = replace(saved, reinstated=back) if back else saved
                results[position] = saved
                fresh.append((position, memory, vector))
                earlier.setdefault(memory.digest, []).append(memory)
            if fresh:
                chained = episodes.chain_edges(
                    [memory for _, memory, _ in fresh], self.keeper.network.session_place, now
                )
                follows = {edge.dst: edge.src for edge in chained}
                new_ids = {memory.memory_id for _, memory, _ in fresh}
                precedes = {edge.src: edge.dst for edge in chained if edge.dst not in new_ids}
                for position, memory, _ in fresh:
                    result = results[position]
                    if result is not None and (memory.memory_id in follows or memory.memory_id in precedes):
                        results[position] = replace(
                            result,
                            follows=follows.get(memory.memory_id),
                            precedes=precedes.get(memory.memory_id),
                        )
                # A memory a later one of the batch superseded (new in the batch, or
                # stored and the target of a repeat earlier in it) is answered as the
                # transaction stores it, not as it was when its own turn was judged.
                for position, result in enumerate(results):
                    if result is not None and result.memory.memory_id in plan.current:
                        results[position] = replace(result, memory=plan.current[result.memory.memory_id])
                # One a later memory of the batch brought back ("I moved to Paris.", "It's only
                # for six months.") is no longer answered as superseded by the earlier one: the
                # transaction stores it active, and the answer says so once, as ``reinstated``.
                # Where a later one yet supersedes it again, every answer stands as it was.
                brought_back: dict[str, int] = {}
                for position, result in enumerate(results):
                    for memory_id in result.reinstated if result is not None else ():
                        record = plan.current.get(memory_id)
                        if record is not None and record.status is Status.ACTIVE:
                            brought_back[memory_id] = position
                for position, result in enumerate(results):
                    if result is not None and any(brought_back.get(m, -1) > position for m in result.superseded):
                        kept = tuple(m for m in result.superseded if brought_back.get(m, -1) <= position)
                        results[position] = replace(result, superseded=kept)
                stored = [memory for _, memory, _ in fresh]
                # HNSW's insertion of the new vectors runs while the store commits.
                ahead = self.keeper.index_ahead([m.memory_id for m in stored], vectors[[p for p, _, _ in fresh]])
                try:
                    self.store.insert_linked(
                        stored,
                        [vector for _, _, vector in fresh],
                        updates=plan.updates,
                        edges=plan.edges + chained,
                        changed_by=actor,
                        seen_seq=seen_seq,
                    )
                except BaseException:
                    ahead.undo()
                    raise
                self.keeper.catch_up(ahead)  # reads the changes while the insertion runs
        if repeats:
            self._reinforce(repeats)
        return results, verdicts

    def update(
        self,
        namespace: str,
        memory_id: str,
        patch: MemoryPatch,
        *,
        actor: str | None = None,
        reason: str = "updated",
        scope: Scope | None = None,
        expected_version: int | None = None,
    ) -> Memory:
        """A new version of a memory the caller (``scope``) sees; with ``expected_version``,
        only while the memory is still at that version (``VersionMismatch`` otherwise,
        checked under the write lock).

        What the patch writes passes the write guard like a save (redacted, refused,
        or the memory quarantined). Only its writer or a namespace admin may change
        its visibility (anyone else could hide a shared memory by making it private,
        or publish one), and only a namespace admin may release a quarantined memory.
        """
        if patch.is_empty():
            raise InvalidInput("an update must change at least one field")
        self._check_patch(patch)
        self.refuse_blocked(actor, None)
        patch, quarantine = self._guard_patch(namespace, self._live(namespace, memory_id, scope), patch)
        vector = self.embedder.embed_documents([patch.content.strip()])[0] if patch.content is not None else None
        return self._retrying(
            lambda: self._patched(
                namespace, memory_id, patch, quarantine, vector, actor, reason, scope, expected_version
            ),
            memory_id,
            expected_version,
        )

    def _retrying(self, write: Callable[[], _T], memory_id: str, expected_version: int | None) -> _T:
        """``write`` under the write lock, read again and decided anew (``EDIT_TRIES`` in
        all) where another process wrote between the read under the lock and the store's
        write. A conditional write answers that as a stale condition (412) where the memory
        written first was ``memory_id`` itself; where it was another (one the write
        reinstates), the caller's condition held, and it reads again too."""
        tries = 1
        while True:
            try:
                with self._write_lock:
                    return write()
            except StaleWrite as stale:
                if expected_version is not None and stale.memory_id == memory_id:
                    raise VersionMismatch(
                        memory_id, expected=expected_version, current=stale.current_version
                    ) from stale
                # Replicas saving in one session at once move its chain on at every save:
                # a save overtaken more often than an edit may be is still decided on the
                # store as it stands, never written on a chain that moved (``SaveOvertaken``).
                if isinstance(stale, SaveOvertaken) and tries >= OVERTAKEN_TRIES:
                    # Not the store's refusal: it names the other writer's memory, which
                    # may be one the caller cannot see (another agent's private one of
                    # the same text), and a version of none.
                    raise Conflict(
                        f"other writers saved in this session or the same text while this save was"
                        f" decided, {tries} times in a row; nothing was stored: try again"
                    ) from stale
                if tries >= EDIT_TRIES and not isinstance(stale, SaveOvertaken):
                    raise
                tries += 1

    def _patched(
        self,
        namespace: str,
        memory_id: str,
        patch: MemoryPatch,
        quarantine: bool,
        vector: Vector | None,
        actor: str | None,
        reason: str,
        scope: Scope | None,
        expected_version: int | None,
    ) -> Memory:
        """``update``'s write, under the write lock."""
        self.refuse_blocked(actor, None)  # again under the lock, as a save does
        current = self._live(namespace, memory_id, scope)
        expect_version(memory_id, current.version, expected_version)
        if patch.visibility not in (None, current.visibility) and scope is not None and not scope.owns(current):
            raise NotOwner()
        if (
            current.status is Status.QUARANTINED
            and patch.status not in (None, Status.QUARANTINED)
            and scope is not None
            and not scope.administers(namespace)
        ):
            raise Forbidden("only a namespace admin may release a quarantined memory")
        if quarantine:
            patch = replace(patch, status=Status.QUARANTINED)
        now = self._clock()
        changes: dict[str, object] = {"version": current.version + 1, "updated_at": now}
        for name in ("content", "category", "importance", "base_score", "visibility", "key", "status"):
            value = getattr(patch, name)
            if value is not None:
                changes[name] = value.strip() if name == "content" else value
        if patch.entities is not None:
            changes["entities"] = normalize_entities(patch.entities)
        elif patch.content is not None and current.entities == extract_entities(current.content):
            # The entities were extracted, not given: they follow the new text. A
            # client's own entities stay until the client changes them.
            changes["entities"] = normalize_entities(extract_entities(patch.content))
        metadata = current.metadata
        if patch.metadata is not None:
            metadata = {**current.metadata, **patch.metadata} if patch.merge_metadata else dict(patch.metadata)
            changes["metadata"] = metadata
        if patch.metadata is not None or patch.category is not None:
            # Steps belong to procedures only, whichever of the two the patch changes.
            problem = procedures.steps_problem(patch.category or current.category, metadata)
            if problem:
                raise InvalidInput(problem, field="steps")
        if patch.expire_at is not None or patch.clear_expire_at:
            changes["expire_at"] = patch.expire_at
        if vector is not None:
            changes["embedding_model"] = self.embedder.name
            changes["embedding_version"] = self.embedder.version
        updated = current.evolve(**changes)
        reworded = (updated.content, updated.key) != (current.content, current.key)
        if (
            current.status is Status.SUPERSEDED
            and patch.status is None
            and (reworded or more_widely_read(updated, current))
            and not supersession.still_hidden(self.store, current, updated, now)
        ):
            # Read by more callers now (Bob's private "I live in Berlin" made shared), it is
            # superseded only while a memory of that audience hides it: under Bob's private
            # "I moved to Paris" it would be hidden from Alice under a memory she cannot read.
            # Made private, it stays superseded: its writer reads what superseded it.
            # Reworded ("I live in Berlin" into "I like green tea"), only while a memory that
            # superseded it replaces its new text.
            updated = updated.evolve(status=Status.ACTIVE)
        back = self._reinstated_by_edit(current, updated, vector, now)
        # One transaction: an edit cut short after it landed must not leave the older memory
        # superseded by a text that no longer replaces it.
        self.store.update(
            updated, vector, changed_by=actor, reason=reason, sets_base_score=patch.base_score is not None, also=back
        )
        self.keeper.catch_up()
        return updated

    def _reinstated_by_edit(
        self,
        current: Memory,
        updated: Memory,
        vector: Vector | None,
        now: datetime,
        leaving: Collection[str] = (),
        still_hides: Callable[[str, Memory], bool] | None = None,
    ) -> list[tuple[Memory, str]]:
        """What an edit of ``current`` into ``updated`` makes active again of the memories it
        superseded (``engine.supersession``): all of them where it is quarantined now (by
        the write guard or by hand), those it no longer replaces where its text or key changed.
        ``leaving``: other memories the same transaction takes out of recall; ``still_hides``:
        whether another memory the same transaction rewords still replaces an older one."""
        if updated.status is Status.QUARANTINED and current.status is Status.ACTIVE:
            return supersession.reinstated_by_deleting(
                self.store, current, now, self._guarded, how="quarantined", leaving=leaving, still_hides=still_hides
            )
        if updated.content == current.content and updated.key == current.key and same_audience(updated, current):
            return []  # the same claim (a client that sends the text with every edit): nothing to judge
        # Made private since, it supersedes nothing others see, as a save of it would not:
        # Bob's "I moved to Paris" made private hid Alice's "I live in Berlin" from her
        # under a memory she cannot read.
        return supersession.reinstated_by_editing(
            self.store,
            updated,
            now,
            self._guarded,
            lambda older: same_audience(updated, older) and self._replaces(updated, vector, older),
            leaving=leaving,
            still_hides=still_hides,
        )

    def _replaces(self, edited: Memory, vector: Vector | None, older: Memory) -> bool:
        """Whether ``edited``'s text still replaces ``older`` as a save of it would: the
        conflict rules' verdict, either way round as time order reads a save
        (``supersession.replaces_by_rules``), and (without one key on both) the semantic check."""
        if not supersession.replaces_by_rules(edited, older):
            return False
        if edited.key is not None and older.key is not None:
            return True
        if vector is None:
            return True  # the text did not change, only the key: the rules read it as before
        cosines = dict(self.keeper.index.similarities(vector, [older.memory_id]))
        similarity = scoring.calibrated_similarity(cosines.get(older.memory_id, 0.0), self.embedder.similarity_floor)
        return similarity >= self.config.conflicts.min_similarity

    def delete(
        self,
        namespace: str,
        memory_id: str,
        *,
        hard: bool = False,
        actor: str | None = None,
        scope: Scope | None = None,
        expected_version: int | None = None,
    ) -> Deletion:
        """Soft-delete (status ``deleted``, kept with its history) or, with ``hard``, purge;
        with ``expected_version``, only while the memory is at that version.

        An active memory's deletion reinstates the memories it superseded
        (``engine.supersession``): the newer claim gone, the older one is recalled again
        rather than hidden with nothing in its place. ``Deletion.reinstated`` names them.

        Another process's write that lands between the read and the store's write (a replica
        that edits the deleted memory or one the deletion reinstates) is read again and the
        deletion decided anew, as an unconditional edit is (``EDIT_TRIES`` in all); with
        ``expected_version``, a write to the deleted memory itself is a stale condition."""
        self.refuse_blocked(actor, None)
        return self._retrying(
            lambda: self._deleted(namespace, memory_id, hard, actor, scope, expected_version),
            memory_id,
            expected_version,
        )

    def _deleted(
        self,
        namespace: str,
        memory_id: str,
        hard: bool,
        actor: str | None,
        scope: Scope | None,
        expected_version: int | None,
    ) -> Deletion:
        """``delete``'s write, under the write lock."""
        current = self.store.get(sight_of([namespace], scope), memory_id)
        if current is None or (current.status is Status.DELETED and not hard):
            raise MemoryNotFound(memory_id, namespace)
        expect_version(memory_id, current.version, expected_version)
        now = self._clock()
        back = supersession.reinstated_by_deleting(self.store, current, now, self._guarded)
        # Named only where the caller sees them: a memory made private since it was
        # superseded is reinstated all the same (its writer's claim is back), unseen.
        reinstated = tuple(memory.memory_id for memory, _ in back if scope is None or scope.sees(memory))
        if hard:
            # Reinstated first: a purge cut short leaves the older memory recalled beside
            # the newer, never hidden with the link that said why purged.
            if back:
                self.store.insert_linked([], [], updates=back, edges=[], changed_by=actor)
            # What ran through it stays linked: "I moved to Lisbon" still supersedes "I live
            # in Berlin" once "I moved to Paris" between them is purged.
            carried = carried_past(self.store, current, now)
            if carried:
                self.store.add_edges(carried)
            # A condition holds to the end: checked again in the purge's transaction,
            # where another process may have written the memory since it was read.
            self.store.purge(namespace, memory_id, version=expected_version)
            self.keeper.catch_up()
            return Deletion(current, reinstated)
        deleted = current.evolve(status=Status.DELETED, version=current.version + 1, updated_at=now)
        self.store.update(deleted, None, changed_by=actor, reason="deleted", also=back)
        self.keeper.catch_up()
        return Deletion(deleted, reinstated)

    def write_imported(
        self,
        records: Sequence[ImportedRecord],
        *,
        actor: str | None = None,
        still_valid: Callable[[], bool],
        reinstated: list[tuple[Memory, str]] | None = None,
    ) -> list[str] | None:
        """Store records an import planned and embedded (``engine.portability``), under the
        write lock like every other write, and return the ids stored (inserted, or brought
        forward: ``Store.import_records``). ``still_valid`` runs
        first, under the lock, and re-reads what the plan assumed of the store; when it says
        no, nothing is written and None is returned.

        A memory brought forward deleted, quarantined or with a text that no longer
        replaces what it superseded here makes those memories active again in the same
        transaction, as that delete or edit here would, and one brought forward from deleted
        to active supersedes again what its deletion brought back, as a restore would
        (``_reinstated_by_import``); each memory so changed is appended to ``reinstated``
        (its new record and the version's reason)."""
        with self._write_lock:
            self.refuse_blocked(actor, None)  # again under the lock, as a save does
            self.keeper.ensure_current()
            if not still_valid():
                return None
            records = self._chained(records)
            back = self._reinstated_by_import(records, actor)
            written = self.store.import_records([*records, *back], changed_by=actor) if records else []
            self.keeper.catch_up()
        ours = {record.memory.memory_id for record in records}
        if reinstated is not None:
            done = set(written)
            reinstated.extend((r.memory, r.versions[0].reason or "") for r in back if r.memory.memory_id in done)
        return [memory_id for memory_id in written if memory_id in ours]

    def _reinstated_by_import(self, records: Sequence[ImportedRecord], actor: str | None) -> list[ImportedRecord]:
        """For the memories ``records`` bring forward (``forward_from``), the memories each
        superseded here that it hides no more (``engine.supersession``): deleted, or
        quarantined, or edited into a text that no longer replaces them; and those a memory
        brought forward from deleted to active supersedes again, as a restore here would
        (its deletion, brought forward before, brought them back). Each comes back
        as a record brought forward from its stored version by one version, so that it is
        written in the import's transaction, or not at all if it changed meanwhile. A
        memory the file itself writes is left to the file: its history says what it is.
        A memory the file brings forward out of recall hides nothing once the import lands:
        two of them that both superseded a memory here each read the other as active
        before, and left it superseded by two deleted memories."""
        ours = {record.memory.memory_id for record in records}
        now = self._clock()
        # The records brought forward, each with its stored record (the import leaves the
        # others as stored: Store.import_records).
        forward: list[tuple[ImportedRecord, Memory]] = []
        for record in records:
            if record.forward_from is None:
                continue
            current = self.store.get(Scope.whole([record.memory.namespace]), record.memory.memory_id)
            if current is not None and current.version == record.forward_from:
                forward.append((record, current))
        leaving = {record.memory.memory_id for record, _ in forward if record.memory.status is not Status.ACTIVE}
        # Those brought forward active with another claim: whether each still hides a memory
        # it superseded is judged on its new text, as for itself; two reworded together that
        # superseded one memory here each read the other as still replacing it, and left it
        # superseded by two memories that replace it no more.
        reworded = {
            record.memory.memory_id: record
            for record, current in forward
            if record.memory.status is Status.ACTIVE
            and current.status is Status.ACTIVE
            and (
                record.memory.content != current.content
                or record.memory.key != current.key
                or not same_audience(record.memory, current)
            )
        }

        def still_hides(other: str, older: Memory) -> bool:
            record = reworded.get(other)
            if record is None:
                return True
            return same_audience(record.memory, older) and self._replaces(record.memory, record.vector, older)

        back: dict[str, ImportedRecord] = {}
        for record, current in forward:
            memory = record.memory
            if memory.status is Status.DELETED:
                found = supersession.reinstated_by_deleting(
                    self.store, current, now, self._guarded, leaving=leaving, still_hides=still_hides
                )
            elif current.status is Status.DELETED and memory.status is Status.ACTIVE:
                # Undeleted at home: it supersedes again, as a restore here would, what its
                # deletion brought back here, where neither changed since.
                found = supersession.superseded_again_by_restoring(self.store, memory, now)
            else:
                found = self._reinstated_by_edit(current, memory, record.vector, now, leaving, still_hides)
            for older, reason in found:
                if older.memory_id in ours or older.memory_id in back:
                    continue
                back[older.memory_id] = ImportedRecord(
                    memory=older,
                    versions=(Version(older.memory_id, older.version, older, now, actor, reason),),
                    vector=None,
                    edges=(),
                    forward_from=older.version - 1,
                )
        return list(back.values())

    def _chained(self, records: Sequence[ImportedRecord]) -> list[ImportedRecord]:
        """Imported records of a session linked ``NEXT`` in the order they were written
        (created_at, then their order in the import), the first from the session's
        chain end (``engine.episodes``); a session whose records bring ``NEXT`` links
        of their own (an export of twinmem, a LangChain history) keeps those alone, and a
        memory brought forward (stored already, in its chain) is not linked again."""
        linked = {
            (record.memory.namespace, record.memory.session_id)
            for record in records
            if any(edge.kind == episodes.NEXT for edge in record.edges)
        }
        order = sorted(
            (
                record.memory
                for record in records
                if record.memory.session_id is not None
                and record.forward_from is None
                and (record.memory.namespace, record.memory.session_id) not in linked
            ),
            key=lambda memory: memory.created_at,
        )
        incoming: dict[str, list[Edge]] = {}
        new = {memory.memory_id for memory in order}
        for edge in episodes.chain_edges(order, self.keeper.network.session_place, self._clock()):
            # Filed with the new memory it links: the one after the imported ones (a later
            # part of the session, stored already) is linked from the last of them.
            incoming.setdefault(edge.dst if edge.dst in new else edge.src, []).append(edge)
        return [
            replace(record, edges=(*record.edges, *incoming[record.memory.memory_id]))
            if record.memory.memory_id in incoming
            else record
            for record in records
        ]

    def link(self, edges: Sequence[Edge]) -> None:
        """Store typed links between existing memories (``NEXT`` between a session's
        promoted memories) under the write lock, and bring the fast network's links of
        the memories they touch up to date (links write no change to catch up from)."""
        if not edges:
            return
        with self._write_lock:
            self.store.add_edges(edges)
            ids = list(dict.fromkeys(end for edge in edges for end in (edge.src, edge.dst)))
            namespaces = list(dict.fromkeys(edge.namespace for edge in edges))
            records = self.store.get_many(Scope.whole(namespaces), ids, _ANY_LIVE, self._clock())
            self.keeper.network.apply(records, (), self.store.links(ids))

    def _unfinished_blocks(self) -> list[Block]:
        """A block is recorded before its quarantine pass runs, so a process that died
        during the pass left the block in force and some of what the source wrote still
        recalled. At start, each block whose source the fast network shows with memories
        neither deleted nor quarantined has its pass run again, in the background (it
        quarantines only what is not quarantined yet; ``_finish_block_passes``); ``close``
        waits for it."""
        if self.security is None:
            return []
        net = self.keeper.network
        unfinished = []
        for block in self.security.blocks():
            by = {"actor": block.value} if block.kind is BlockKind.AGENT else {"session_id": block.value}
            left = net.count_unquarantined(**by)
            if left:
                log.warning(
                    "the block on %s %r has %d memories left to quarantine (its pass was cut short): quarantining them",
                    block.kind.value,
                    block.value,
                    left,
                )
                unfinished.append(block)
        return unfinished

    def _finish_block_passes(self, unfinished: Sequence[Block]) -> None:
        for block in unfinished:
            try:
                done = self.quarantine_source(block.kind, block.value, actor=block.blocked_by)
                if done:  # audited as the block was: the source, and what its pass quarantined
                    source = f"{block.kind.value}:{block.value}"
                    detail = f"the quarantine of a block cut short, run again at start ({len(done)} memories)"
                    at, request = self._clock(), uuid.uuid4().hex
                    event = AuditEvent("twinmem", "admin", "ok", at, request, ("*",), (source, *done), detail=detail)
                    assert self.security is not None
                    self.security.append_audit(event)
            except Exception:  # a store fault: the next start tries again
                log.exception("finishing the quarantine of %s %r failed", block.kind.value, block.value)
                continue
            log.info("the block on %s %r: %d memories quarantined", block.kind.value, block.value, len(done))

    def quarantine_source(self, kind: BlockKind, value: str, *, actor: str | None = None) -> list[str]:
        """Quarantine every memory the agent (``actor``) or session wrote, in every
        namespace, each as a new version; return their ids. Deleted and already
        quarantined memories stay as they are. Runs a batch per hold of the write
        lock, so it is safe while serving; call it after the block is recorded, so
        nothing the source writes meanwhile escapes: a write checks the blocks again
        under the write lock, and the pass takes that lock once before it scans, so a
        write that checked before the block was recorded has committed by then. It stops
        where the block is lifted meanwhile (checked under the lock, batch by batch)."""
        with self._write_lock:
            pass
        quarantined: list[str] = []
        for namespace in self.store.namespaces():
            after, whole = "", Scope.whole([namespace])
            while True:
                page = self.store.scan(whole, after, QUARANTINE_BATCH)
                if not page:
                    break
                after = page[-1].memory_id
                written = [
                    m
                    for m in page
                    if (m.actor if kind is BlockKind.AGENT else m.session_id) == value
                    and m.status not in (Status.DELETED, Status.QUARANTINED)
                ]
                with self._write_lock:
                    if not self._source_blocked(kind, value):
                        return quarantined  # lifted meanwhile: what the source writes now is its own
                    for stale in written:
                        memory = self.store.get(whole, stale.memory_id)  # re-read under the lock
                        if memory is None or memory.status in (Status.DELETED, Status.QUARANTINED):
                            continue
                        now = self._clock()
                        changed = memory.evolve(status=Status.QUARANTINED, version=memory.version + 1, updated_at=now)
                        # What it superseded is recalled again: a blocked writer's "I moved to
                        # Paris" must not go on hiding "I live in Berlin".
                        back = supersession.reinstated_by_deleting(
                            self.store,
                            memory,
                            now,
                            self._guarded,
                            how=f"quarantined ({kind.value} blocked)",
                        )
                        self.store.update(changed, None, changed_by=actor, reason=f"{kind.value} blocked", also=back)
                        quarantined.append(memory.memory_id)
                    self.keeper.catch_up()
                if len(page) < QUARANTINE_BATCH:
                    break
        return quarantined

    def _source_blocked(self, kind: BlockKind, value: str) -> bool:
        """Whether the block on this source is in force, as the writes read it (on a
        replica a block lifted elsewhere within ``[neo4j] security_cache_seconds``);
        always, without a security store."""
        if self.security is None:
            return True
        return self.blocks.is_blocked(value, None) if kind is BlockKind.AGENT else self.blocks.is_blocked(None, value)

    # --- reads ---------------------------------------------------------------------

    # Each read takes the caller's ``scope`` (what it may see, ``engine.records.Scope``),
    # narrowed to the namespaces the call names; without one it is the engine's own
    # read and sees every memory of those namespaces.

    def get(
        self, namespace: str, memory_id: str, *, include_deleted: bool = False, scope: Scope | None = None
    ) -> Memory:
        memory = self.store.get(sight_of([namespace], scope), memory_id)
        if memory is None or (memory.status is Status.DELETED and not include_deleted):
            raise MemoryNotFound(memory_id, namespace)
        return memory

    def home_of(self, memory_id: str) -> str | None:
        """The namespace that holds ``memory_id`` as the fast network knows it, or None (no
        such memory, or one written by another replica that it has not caught up with yet):
        where a read by id alone looks first. It reads nothing: whether the caller may see the
        memory is the read's answer (``find``)."""
        return self.keeper.network.namespace_of(memory_id)

    def find(
        self, memory_id: str, namespaces: Sequence[str], *, include_deleted: bool = False, scope: Scope | None = None
    ) -> Memory:
        """A memory asked for by id alone, in whichever of ``namespaces`` holds it (any status
        but deleted, unless ``include_deleted``): for callers that address memories without
        their namespace (the mem0 routes). Ids are UUIDs: at most one namespace holds it."""
        for start in range(0, len(namespaces), FIND_BATCH):
            memory = self.store.get(sight_of(namespaces[start : start + FIND_BATCH], scope), memory_id)
            if memory is not None and (include_deleted or memory.status is not Status.DELETED):
                return memory
        raise MemoryNotFound(memory_id, None)

    def history(self, namespace: str, memory_id: str, *, scope: Scope | None = None) -> list[Version]:
        versions = self.store.versions(sight_of([namespace], scope), memory_id)
        if not versions:
            raise MemoryNotFound(memory_id, namespace)
        return versions

    def list_page(
        self,
        namespaces: Sequence[str],
        flt: MemoryFilter,
        *,
        limit: int = 50,
        cursor: str | None = None,
        scope: Scope | None = None,
    ) -> Page:
        self._check_namespaces(namespaces)
        self._check_filter(flt)
        return self.store.list_page(sight_of(namespaces, scope), flt, self._clock(), limit=limit, cursor=cursor)

    def recall(
        self,
        query: str,
        *,
        namespaces: Sequence[str],
        top_k: int = 10,
        flt: MemoryFilter | None = None,
        reinforce: bool = True,
        scope: Scope | None = None,
        vector: Vector | None = None,
        focus: str | None = None,
        focus_vector: Vector | None = None,
        windows: tuple[TimeWindow, ...] | None = None,
        vectors: QueryVectors | None = None,
    ) -> RecallResult:
        """``vector``: the query's embedding when the caller has it already (several recalls of one query).
        ``windows``: likewise the times it names, as an earlier recall of it read them
        (``RecallResult.windows``); None reads them from the text.

        ``focus``: a part of the query to weigh more (the prompt context's latest user
        message, its query being the latest few joined): each candidate's similarity
        blends its cosines to both, by ``[fusion] focus``, and the focus's own
        nearest memories are candidates too. ``focus_vector``: its embedding, when the
        caller has it already.

        The query is also read in the other grammatical person (``phrasing``: "where does
        the user live?" and "where do I live?"), where ``[recall] other_person`` is on and
        the model reads the query: each candidate's cosine to it is the larger of its two
        (``RecallQuery.phrasing``); so is the focus. ``vectors``: every vector the recall
        reads, when the caller has them already (``query_vectors``: several recalls of one
        query); in place of ``vector`` and ``focus_vector``."""
        flt = flt or MemoryFilter()
        if text.is_blank(query):
            raise InvalidInput("query must not be empty", field="query")
        if focus is not None and text.is_blank(focus):
            raise InvalidInput("focus must not be empty", field="focus")
        if not 1 <= top_k <= self.config.recall.max_top_k:
            raise InvalidInput(f"top_k must be within 1..{self.config.recall.max_top_k}", field="top_k")
        self._check_namespaces(namespaces)
        self._check_filter(flt)
        now = self._clock()
        # The times it names, begun first: a worker process reads them while this thread
        # embeds the query and runs the channels.
        reading = self.recaller.begin_windows(query, now) if windows is None else None
        try:
            read_by_model = self._reads(query)
            phrasing = self.phrasing(query, namespaces)
            if focus is None or not self.weighs_focus(query, focus):
                focus = None
            if vectors is None:
                vectors = self._query_vectors(query, namespaces, focus, vector, focus_vector, phrasing, read_by_model)
            asked = RecallQuery(
                text=query,
                vector=vectors.query,
                sight=sight_of(namespaces, scope),
                flt=flt,
                top_k=top_k,
                pool=max(self.config.recall.min_candidates, self.config.recall.candidate_factor * top_k),
                now=now,
                # A query that names "the user" is searched for by its other words: in its
                # words, "user" stands for the speaker of what was said in the first person
                # ("I moved to Berlin"), and matched alone it would rank any note about
                # "the user" first.
                terms=tuple(text.terms(phrasing.text if phrasing is not None and phrasing.first_person else query)),
                entity_keys=entity_keys(extract_entities(query)),
                windows=windows,
                reading=reading,  # where windows is None: taken once the candidates are found (``Recaller._ranking``)
                read_by_model=read_by_model,
                focus=vectors.focus if focus is not None else None,
                focus_weight=self.config.fusion.focus,
                phrasing=vectors.phrasing if read_by_model else None,
                focus_phrasing=vectors.focus_phrasing if focus is not None else None,
            )
            # "How do I …": the matching procedures first, then the other hits.
            how = not flt.categories and procedures.PROCEDURE in self.config.categories and procedures.asks_how(query)
            result = self.recaller.recall(asked, first_category=procedures.PROCEDURE if how else None)
        except BaseException:
            if reading is not None:
                reading()  # taken (where the recall failed before it did), so the reader is free for the next
            raise
        if reinforce:
            self.reinforcer.submit(
                [
                    (hit.memory.memory_id, scoring.rank_bonus(rank, self.config.scoring), now)
                    for rank, hit in enumerate(result.hits[: scoring.TOP_RANKS_REINFORCED], start=1)
                ]
            )
        return replace(result, phrasing=phrasing.text) if phrasing is not None else result

    def phrasing(self, query: str, namespaces: Sequence[str]) -> persons.Phrasing | None:
        """``query`` in the other grammatical person, where a recall reads it too
        (``[recall] other_person``); None where it is off or there is nothing to rewrite.
        A query in the first person is read as about "the user" only where a memory of
        ``namespaces`` may say "user": elsewhere no memory is written that way, and the
        rewritten query would only move the others (MADial-Bench, whose memories name
        their people, lost 0.0075 of recall@5 to it)."""
        if not self.config.recall.other_person:
            return None
        if (first := persons.first_person(query)) is not None:
            return persons.Phrasing(first, first_person=True)
        if not self.keeper.network.may_mention(namespaces, _THE_USER_TERM):
            return None
        third = persons.third_person(query)
        return persons.Phrasing(third, first_person=False) if third is not None else None

    def query_vectors(self, query: str, namespaces: Sequence[str], focus: str | None = None) -> QueryVectors:
        """The vectors a recall of ``query`` (with ``focus``) over ``namespaces`` reads
        (``recall``'s ``vectors``), embedded in one call where the embedder can: for
        several recalls of one query."""
        if focus is not None and not self.weighs_focus(query, focus):
            focus = None
        phrasing = self.phrasing(query, namespaces)
        return self._query_vectors(query, namespaces, focus, None, None, phrasing, self._reads(query))

    def _query_vectors(
        self,
        query: str,
        namespaces: Sequence[str],
        focus: str | None,
        vector: Vector | None,
        focus_vector: Vector | None,
        phrasing: persons.Phrasing | None,
        reads: bool,
    ) -> QueryVectors:
        """The query's and the focus's vectors (those given, else embedded) and their
        other phrasings' (``phrasing``, the query's), where the model reads the query
        (``reads``); those to embed in one call where the embedder can (``EmbedsQueries``:
        a few short texts for about the cost of one)."""
        focus_phrasing = self.phrasing(focus, namespaces) if focus is not None and reads else None
        asked = [
            (query, vector),
            (focus, focus_vector),
            (phrasing.text if phrasing is not None and reads else None, None),
            (focus_phrasing.text if focus_phrasing is not None else None, None),
        ]
        texts = {n: said for n, (said, given) in enumerate(asked) if said is not None and given is None}
        if len(texts) > 1 and isinstance(self.embedder, EmbedsQueries):
            made: dict[int, Vector] = dict(zip(texts, self.embedder.embed_queries(list(texts.values())), strict=True))
        else:
            made = {n: self.embedder.embed_query(said) for n, said in texts.items()}
        found = [None if said is None else made.get(n, given) for n, (said, given) in enumerate(asked)]
        query_vector = found[0]
        assert query_vector is not None
        return QueryVectors(query_vector, found[1], found[2], found[3])

    def names_speaker(self, name: str, namespaces: Sequence[str]) -> bool:
        """Whether a memory of ``namespaces`` may name ``name`` (every search term of it is
        in their lexicon) as a name (an entity of it), and another entity is named about
        as often (``FastNetwork.names_beside``): where memories name several people ("Bart
        went to the zoo", "Lisa …"), the prompt context's query says who is speaking
        (``Sessions.context``). Not in one user's namespace whose memories name them ("Anna
        likes tea") beside the user's own first-person lines, where "Anna: " pulled the
        memories that name her over the right one; nor for a name that is a word of the
        memories ("Bill" and "the phone bill")."""
        terms = text.terms(name)
        network = self.keeper.network
        return (
            bool(terms)
            and all(network.may_mention(namespaces, term) for term in terms)
            and network.names_beside(namespaces, {key := canonical_key(name), f"{key}'s", f"{key}\u2019s"})
        )

    def weighs_focus(self, query: str, focus: str) -> bool:
        """Whether a recall of ``query`` weighs ``focus`` (``[fusion] focus`` above 0, and
        a focus other than the query itself, which would weigh nothing more)."""
        return self.config.fusion.focus > 0 and focus.strip() != query.strip()

    def _reads(self, query: str) -> bool:
        """Whether the embedder reads ``query`` (``ports.model_reads``)."""
        return model_reads(self.embedder, query, self.config.recall.unread_query_share)

    # --- the association network: neighbourhoods, entities, supersession chains -----

    def neighbourhood(self, namespace: str, memory_id: str, *, scope: Scope | None = None) -> Neighbourhood:
        """A memory, its links in and out, and the linked memories (any status but deleted)."""
        sight = sight_of([namespace], scope)
        memory = self.get(namespace, memory_id, scope=sight)
        edges = self.store.edges(sight, memory_id)
        others = list(dict.fromkeys(e.dst if e.src == memory_id else e.src for e in edges))
        linked = {m.memory_id: m for m in self.store.get_many(sight, others, _ANY_LIVE, self._clock())}
        return Neighbourhood(memory, [e for e in edges if (e.dst if e.src == memory_id else e.src) in linked], linked)

    def entity_memories(
        self,
        namespace: str,
        name: str,
        *,
        include_superseded: bool = False,
        limit: int = 50,
        scope: Scope | None = None,
    ) -> list[Memory]:
        """Memories of ``namespace`` that mention the entity (by its key: "Blue" finds "蓝色"), newest
        first. Found in the fast network's entity postings, whose keys are those of the
        rules of now (``entities.key_rules``), then read from the store in one call that
        applies sight and filter again."""
        self._check_namespaces([namespace])
        if not name.strip() or len(name) > limits.MAX_NAME_CHARS:
            raise InvalidInput(f"an entity name holds 1-{limits.MAX_NAME_CHARS} characters", field="name")
        if limit < 1:
            raise InvalidInput(f"limit must be at least 1, got {limit}", field="limit")
        statuses = (Status.ACTIVE, Status.SUPERSEDED) if include_superseded else (Status.ACTIVE,)
        (key,) = entity_keys([name])
        flt, sight, now = MemoryFilter(statuses=statuses), sight_of([namespace], scope), self._clock()
        self.keeper.ensure_current()
        net = self.keeper.network
        asked = limit
        while True:
            with net.reading():
                rows = net.by_entity([namespace], key)
                ids = net.ids_of(net.newest(rows[net.passes(sight, flt, now, rows)], asked))
            read = {memory.memory_id: memory for memory in self.store.get_many(sight, ids, flt, now)}
            found = [read[memory_id] for memory_id in ids if memory_id in read][:limit]
            # A memory changed since the network was read is left out by the store: read wider.
            if len(found) == limit or len(ids) < asked:
                return found
            asked *= 2

    def by_key(self, namespace: str, key: str, *, scope: Scope | None = None) -> list[Memory]:
        """The active, unexpired memories of ``namespace`` that carry the explicit ``key``, newest
        first (a key names one thing: more than one means writers raced, or conflicts were off)."""
        self._check_namespaces([namespace])
        if not key or len(key) > limits.MAX_NAME_CHARS:
            raise InvalidInput(f"a key holds 1-{limits.MAX_NAME_CHARS} characters", field="key")
        now = self._clock()
        found = self.store.find_by_key(sight_of([namespace], scope), key)
        return [m for m in found if m.expire_at is None or m.expire_at > now]

    def namespaces(self, prefix: str = "") -> list[str]:
        """Every namespace that holds a memory (of any status), in order, narrowed to ``prefix``."""
        return [ns for ns in self.store.namespaces() if ns.startswith(prefix)]

    def chain(self, namespace: str, memory_id: str, *, scope: Scope | None = None) -> list[Memory]:
        """The supersession chain through a memory, newest first: up the ``SUPERSEDES``
        edges to the memory nothing supersedes, then down from the memory to the oldest.
        Where a memory superseded several, the chain follows the most recent edge below the
        memory and the way up above it (one that superseded several back-dated memories is
        in each one's chain)."""
        sight = sight_of([namespace], scope)
        start = self.get(namespace, memory_id, scope=sight)
        chain, seen = [start], {start.memory_id}
        while (newer := self._along_supersedes(sight, chain[0].memory_id, towards="newer", seen=seen)) is not None:
            chain.insert(0, newer)
        while (older := self._along_supersedes(sight, chain[-1].memory_id, towards="older", seen=seen)) is not None:
            chain.append(older)
        return chain

    def _along_supersedes(self, sight: Scope, memory_id: str, *, towards: str, seen: set[str]) -> Memory | None:
        edges = [e for e in self.store.edges(sight, memory_id) if e.kind == SUPERSEDES]
        if towards == "newer":
            ends = {e.src: e.created_at for e in edges if e.dst == memory_id}
        else:
            ends = {e.dst: e.created_at for e in edges if e.src == memory_id}
        # A seen end is a cycle (only a hand-made edge can make one): it ends the walk there.
        found = self.store.get_many(sight, [end for end in ends if end not in seen], _ANY_LIVE, self._clock())
        if not found:
            return None
        # The most recent link; links one save made are as old as each other (a save that
        # superseded two at once) and a store returns them in no set order, so then the
        # newer memory, and last its id, so that every store walks the same chain.
        other = max(found, key=lambda m: (ends[m.memory_id], m.created_at, m.memory_id))
        seen.add(other.memory_id)
        return other

    def stats(self) -> dict[str, object]:
        index = self.keeper.index
        return {
            "store_integrity": self.store.integrity(),
            "memories_indexed": len(index),
            "index_seq": index.applied_seq,
            "fast_network_memories": len(self.keeper.network),
            "fast_network_seq": self.keeper.network.applied_seq,
            "store_seq": self.store.last_seq(),
            # Changes up to here were pruned from the store's log: a replica behind it rebuilds.
            "store_low_water_seq": self.store.low_water_seq(),
            "embedding_model": self.embedder.name,
            "reinforcement_pending": self.reinforcer.pending,
            "reinforcement_failures": self.reinforcer.failures,
            "reembed": self.reembedder.progress().as_dict(),
        }

    # --- internals -----------------------------------------------------------------

    def _reembed_neighbours(self, drafts: Sequence[MemoryDraft]) -> None:
        """During a change of model, the memories a batch may repeat or replace get their
        new vector first: the write path's checks read the current model's vectors only.
        A help, not a condition: where the previous model or the store fails at it, the
        batch is saved all the same, its checks reading what has its new vector already."""
        try:
            neighbours = self.keeper.legacy_neighbours(
                [(d.namespace, d.content) for d in drafts], CANDIDATES_PER_CHANNEL, limit=LEGACY_NEIGHBOURS_PER_WRITE
            )
            self.reembedder.embed_now(neighbours)
        except Exception:
            log.warning("re-embedding a batch's neighbours ahead of it failed; it is saved without", exc_info=True)

    def _conflict_mode(self, draft: MemoryDraft) -> str:
        return draft.conflicts or self.config.conflicts.mode_for(draft.namespace)

    def _new_memory(self, draft: MemoryDraft, now: datetime, actor: str | None) -> Memory:
        # ``importance`` is the seed's initial importance: without a base score of its own,
        # a memory starts from it, and only without either from its source's score.
        base = draft.base_score if draft.base_score is not None else draft.importance
        if base is None:
            base = self.config.scoring.initial_score(draft.source)
        created = draft.created_at or now
        return Memory(
            memory_id=new_memory_id(),
            namespace=draft.namespace,
            content=draft.content.strip(),
            category=draft.category,
            entities=normalize_entities(draft.entities),
            importance=draft.importance if draft.importance is not None else base,
            base_score=base,
            source=draft.source,
            actor=draft.actor or actor,
            session_id=draft.session_id,
            visibility=draft.visibility,
            created_at=created,
            updated_at=now,
            last_accessed_at=created,
            access_count=0,
            expire_at=draft.expire_at,
            status=Status.ACTIVE,
            embedding_model=self.embedder.name,
            embedding_version=self.embedder.version,
            version=1,
            key=draft.key,
            metadata=dict(draft.metadata),
        )

    # --- guards (engine/guard.py) ------------------------------------------------------

    def _guard_writes(self, drafts: Sequence[MemoryDraft]) -> tuple[list[MemoryDraft], list[guards.WriteVerdict]]:
        """The write guard, before anything is embedded: each draft under its namespace's
        policy. Redaction changes the content that is embedded and stored; one refused
        draft refuses the whole batch (it is one transaction)."""
        guarded: list[MemoryDraft] = []
        verdicts: list[guards.WriteVerdict] = []
        for position, draft in enumerate(drafts):
            where = f"memories[{position}]." if len(drafts) > 1 else ""
            checked = self._check_memory(
                draft.namespace, draft.content, draft.source, draft.entities, draft.metadata, where
            )
            verdict = checked.verdict
            guarded.append(
                replace(draft, content=verdict.content, entities=checked.entities, metadata=checked.metadata)
            )
            verdicts.append(verdict)
        return guarded, verdicts

    def _check_memory(
        self,
        namespace: str,
        content: str | None,
        source: Source,
        entities: Sequence[str],
        metadata: Mapping[str, Any],
        where: str,
    ) -> guards.MemoryVerdict:
        """``guards.check_memory`` under the namespace's policy; raises ``GuardRejected``
        naming the field (after ``where``) when the policy refuses the write."""
        checked = guards.check_memory(content, source, entities, metadata, self.config.guard.policy_for(namespace))
        if checked.refused is not None:
            reasons = checked.verdict.reasons
            raise GuardRejected(
                f"the write guard refused {where}{checked.refused}: {'; '.join(reasons)}",
                reasons=reasons,
                field=where + checked.refused,
            )
        return checked

    def _guarded(self, memory: Memory) -> Memory:
        """``guard_record``'s record alone: what a memory made current again may be stored as."""
        return self.guard_record(memory)[0]

    def guard_record(self, memory: Memory) -> tuple[Memory, guards.WriteVerdict]:
        """The write guard over a record written other than by a save (an import), under
        its namespace's policy: raises ``GuardRejected`` for what the policy refuses;
        returns the record as it may be stored. A record the guard quarantines, or one
        whose writer or session is blocked, comes back quarantined (unless deleted)."""
        checked = self._check_memory(
            memory.namespace, memory.content, memory.source, memory.entities, memory.metadata, "memory."
        )
        verdict = checked.verdict
        guarded = memory.evolve(content=verdict.content, entities=checked.entities, metadata=dict(checked.metadata))
        held = verdict.action is guards.Action.QUARANTINED or self._writer_blocked(memory)
        if held and memory.status is not Status.DELETED:
            guarded = guarded.evolve(status=Status.QUARANTINED)
        return guarded, verdict

    def _guard_patch(self, namespace: str, current: Memory, patch: MemoryPatch) -> tuple[MemoryPatch, bool]:
        """The write guard over what a patch writes (its content, entities and metadata),
        under the namespace's policy and the memory's source; returns the patch as it
        may be stored and whether the memory must be quarantined."""
        checked = self._check_memory(
            namespace, patch.content, current.source, patch.entities or (), patch.metadata or {}, ""
        )
        guarded = replace(
            patch,
            content=checked.verdict.content if patch.content is not None else None,
            entities=checked.entities if patch.entities is not None else None,
            metadata=checked.metadata if patch.metadata is not None else None,
        )
        return guarded, checked.verdict.action is guards.Action.QUARANTINED

    def _writer_blocked(self, memory: Memory) -> bool:
        return self.blocks.is_blocked(memory.actor, memory.session_id)

    def refuse_blocked(self, agent: str | None, session_id: str | None) -> None:
        """Raise :class:`SourceBlocked` (403) where an admin blocked ``agent`` or ``session_id``."""
        if self.blocks.is_blocked(agent, session_id):
            named = " or ".join(
                f"{kind} {value!r}" for kind, value in (("agent", agent), ("session", session_id)) if value
            )
            raise SourceBlocked(f"writes from {named} are blocked by an admin")

    def _live(self, namespace: str, memory_id: str, scope: Scope | None) -> Memory:
        memory = self.store.get(sight_of([namespace], scope), memory_id)
        if memory is None or memory.status is Status.DELETED:
            raise MemoryNotFound(memory_id, namespace)
        return memory

    def _reinforce_in_background(self, events: Sequence[Reinforcement]) -> None:
        # Under the write lock: an edit reads a record and writes it back whole, so a
        # reinforcement landing in between would be overwritten and its access lost.
        with self._write_lock:
            self._reinforce(events)

    def _reinforce(self, events: Sequence[Reinforcement]) -> None:
        policy = self.config.scoring
        self.store.reinforce(events, lambda memory, bonus, at: scoring.reinforced_base(memory, bonus, at, policy))
        # Reinforcement writes no change to catch up from: the fast network follows here.
        self.keeper.network.reinforce(events, policy)

    # --- validation ------------------------------------------------------------------

    def _check_draft(self, draft: MemoryDraft, position: int | None) -> None:
        where = "" if position is None else f"memories[{position}]."
        self._check_namespaces([draft.namespace])
        self._check_content(draft.content, where + "content")
        self._check_category(draft.category, where + "category")
        for name in ("base_score", "importance"):
            value = getattr(draft, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise InvalidInput(f"{name} must be within 0..1, got {value}", field=where + name)
        self._check_entities(draft.entities, where + "entities")
        self._check_key(draft.key, where + "key")
        self._check_metadata(draft.metadata, where + "metadata")
        problem = procedures.steps_problem(draft.category, draft.metadata)
        if problem:
            raise InvalidInput(problem, field=where + "steps")
        if draft.created_at is not None and draft.created_at > self._clock():
            raise InvalidInput("created_at must not be in the future", field=where + "created_at")

    def _check_patch(self, patch: MemoryPatch) -> None:
        if patch.expire_at is not None and patch.clear_expire_at:
            raise InvalidInput("expire_at and clear_expire_at contradict each other: give one", field="clear_expire_at")
        if patch.content is not None:
            self._check_content(patch.content, "content")
        if patch.category is not None:
            self._check_category(patch.category, "category")
        for name in ("base_score", "importance"):
            value = getattr(patch, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise InvalidInput(f"{name} must be within 0..1, got {value}", field=name)
        if patch.entities is not None:
            self._check_entities(patch.entities, "entities")
        self._check_key(patch.key, "key")
        if patch.metadata is not None:
            self._check_metadata(patch.metadata, "metadata")
            problem = procedures.steps_problem(patch.category, patch.metadata)
            if problem:
                raise InvalidInput(problem, field="steps")
        if patch.status is Status.DELETED:
            raise InvalidInput("use DELETE to delete a memory", field="status")

    def _check_content(self, content: str, field: str) -> None:
        if text.is_blank(content):
            raise InvalidInput("content must not be empty", field=field)
        limit = self.config.limits.max_content_chars
        if len(content) > limit:
            raise InvalidInput(f"content holds {len(content)} characters, at most {limit} are allowed", field=field)

    def _check_category(self, category: str, field: str) -> None:
        if category not in self.config.categories:
            raise InvalidInput(
                f"unknown category {category!r}; configured: {', '.join(self.config.categories)}", field=field
            )

    def _check_entities(self, entities: Sequence[str], field: str) -> None:
        if len(entities) > self.config.limits.max_entities:
            raise InvalidInput(f"at most {self.config.limits.max_entities} entities are allowed", field=field)
        if any(len(name) > limits.MAX_NAME_CHARS for name in entities):
            raise InvalidInput(f"an entity name holds at most {limits.MAX_NAME_CHARS} characters", field=field)

    def _check_key(self, key: str | None, field: str) -> None:
        """A key names one subject (a newer memory with it supersedes the older): an empty
        one would tie every memory that gave it together, and import takes none longer."""
        if key is not None and not 0 < len(key) <= limits.MAX_NAME_CHARS:
            raise InvalidInput(f"a key holds 1-{limits.MAX_NAME_CHARS} characters, got {len(key)}", field=field)

    def _check_metadata(self, metadata: object, field: str) -> None:
        problem = limits.metadata_problem(metadata, self.config.limits)
        if problem:
            raise InvalidInput(problem, field=field)

    def check_namespace(self, namespace: str) -> None:
        """``InvalidInput`` unless ``namespace`` is a well-formed namespace name."""
        self._check_namespaces([namespace])

    def _check_namespaces(self, namespaces: Sequence[str]) -> None:
        if not namespaces:
            raise InvalidInput("at least one namespace is required", field="namespace")
        for namespace in namespaces:
            if not NAMESPACE_PATTERN.fullmatch(namespace):
                raise InvalidInput(
                    f"namespace {namespace!r} must be 1-128 letters, digits or _ . : @ -", field="namespace"
                )

    def _check_filter(self, flt: MemoryFilter) -> None:
        for category in flt.categories:
            self._check_category(category, "filter.category")
        for key, value in flt.metadata.items():
            problem = metadata_key_problem(key)
            if problem:
                raise InvalidInput(problem, field="filter.metadata")
            if value is not None and not isinstance(value, str | int | float | bool):
                raise InvalidInput(
                    f"metadata filter value of {key!r} must be a string, number, boolean or null",
                    field="filter.metadata",
                )
            if not limits.fits_int64(value):
                raise InvalidInput(
                    f"metadata filter value of {key!r} is an integer outside 64 bits "
                    f"({limits.INT64_MIN}..{limits.INT64_MAX})",
                    field="filter.metadata",
                )
        if flt.created_after and flt.created_before and flt.created_after >= flt.created_before:
            raise InvalidInput("filter.created_after must be before filter.created_before", field="filter")
