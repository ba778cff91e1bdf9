"""What a save does to the memories already there: repeats, supersessions, contradictions.

For each new memory of a ``MemoryService.save_batch`` (under its write lock), in the
batch's order, ``SaveJudge`` answers from candidates the fast network finds, and reads from
the store only the few records a rule then needs, in one call. The batch's memories are
judged one after another, each after the earlier ones' dedup and conflicts (``BatchPlan``),
so a batch ends as the same saves one at a time would:

* ``same_text``: an active, unexpired memory of the same audience with the same content
  digest (the network's digest postings), else one earlier in the batch (one the batch
  superseded is no longer active: a repeat of it is saved anew, as after the batch);
* ``near_duplicate``: one with calibrated similarity ≥ ``dedup_cosine``, overlapping entities, mostly
  the same words and no more than ``text.DEDUP_MAX_NEW_TERMS`` of the new text's own, the same
  numbers and the same ``text.markers`` (the network's semantic channel; only neighbours at the
  threshold are read), where the model reads both texts (``ports.ReadsText``, as for a query);
* ``resolve_conflicts``: what each new memory supersedes or contradicts
  (``engine.conflicts``), judged only for a memory the rules read a claim in or that
  carries a key, against candidates close enough to count.

What a save asks of the store does not grow with the namespace, nor with the batch: within
``SaveJudge.reads_for`` every candidate the batch's judgments will read is found first and
read in one call (per namespace).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from engine import conflicts, scoring, supersession, text
from engine import guard as guards
from engine.config import Config
from engine.conflicts import CONTRADICTS, SUPERSEDES, Statement, Verdict
from engine.entities import misspelt_openers
from engine.fast_network import Floats, Rows
from engine.index_keeper import IndexKeeper
from engine.ports import Edge, Embedder, Matrix, ReadsText, Store, Vector, model_reads
from engine.recall import Recaller
from engine.records import Memory, MemoryFilter, Scope, Status, entity_keys, same_audience
from engine.supersession import superseded_reason

DEDUP_NEIGHBOURS = 10
# Reads of a save's stored candidates, each after catching up with what the one before
# showed another process had written meanwhile (``WriteJudge.reads_for``).
CANDIDATE_READS = 3
# How soon after its writer's last memory a save that only says "it's a stay" is read with
# it (``WriteJudge.stay_said``): "Just for a week." said months after "I moved to Paris." is
# about something else, and brings back nothing the move superseded.
STAY_SAID_WITHIN = timedelta(days=1)

# A memory's semantic neighbours as ``Recaller.nearest`` finds them: rows and cosines.
Neighbours = tuple[Rows, Floats]


@dataclass(frozen=True, slots=True)
class SaveResult:
    memory: Memory
    created: bool
    # "digest" or "similar" when the save reinforced an existing memory instead.
    deduplicated_by: str | None = None
    similarity: float | None = None
    # Conflicts on write (engine/conflicts.py): older memories this one superseded or
    # contradicts, and those it would have superseded in ``flag`` mode (linked, still active).
    superseded: tuple[str, ...] = ()
    contradicted: tuple[str, ...] = ()
    flagged: tuple[str, ...] = ()
    # Memories made active again because this one says the writer's last memory, which
    # superseded them, is a stay ("I moved to Paris." then "It's only for six months.").
    reinstated: tuple[str, ...] = ()
    # What the write guard did with the content (engine/guard.py).
    guard: guards.WriteVerdict = guards.ALLOWED
    # The memory of the same session this one was linked ``NEXT`` from (engine/episodes.py).
    follows: str | None = None
    # The stored memory of the same session linked ``NEXT`` from this one: a later part of
    # the session, promoted first, that this one now goes before (engine/episodes.py).
    precedes: str | None = None


@dataclass(slots=True)
class BatchPlan:
    """What one ``save_batch`` will write, built as its memories are judged in order, so
    that each is judged against the state the earlier ones leave (as a save of each in
    turn would be): the batch's new memories later ones may repeat or be judged against,
    the new versions of the records it changed, and the edges."""

    # Records the batch changed (superseded), latest version, by id.
    current: dict[str, Memory] = field(default_factory=dict)
    updates: list[tuple[Memory, str]] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    # The batch's new memories so far that later ones are judged against (position in
    # the batch, memory, vector): all but the quarantined ones.
    judged: list[tuple[int, Memory, Vector]] = field(default_factory=list)

    def latest(self, memory: Memory) -> Memory:
        """``memory`` as the batch leaves it so far."""
        return self.current.get(memory.memory_id, memory)

    def active(self, memory: Memory) -> bool:
        """Whether ``memory`` (active when read, or new in the batch) is active still: one
        an earlier memory of the batch superseded is, as for a later save, no memory a
        save may repeat, supersede or contradict."""
        return self.latest(memory).status is Status.ACTIVE


def _peers(older: Memory, new: Memory, writer: Scope | None) -> bool:
    """Whether a save of ``new`` may deduplicate into, supersede or contradict ``older``:
    one audience (``same_audience``), and seen by the writer (``None``: the engine itself)."""
    return same_audience(older, new) and (writer is None or writer.sees(older))


def _same_thing(older: Memory, new: Memory) -> bool:
    """Whether ``new`` may be a repeat of ``older`` by its key: a memory that carries an
    explicit key is about that key only, so it repeats only a memory with the same key
    (two keyed records with equal text are two records, as in any key-value store)."""
    return new.key is None or older.key == new.key


def _same_record(older: Memory, new: Memory) -> bool:
    """Whether ``new`` says all ``older`` says, by the same writer: folding one into the
    other loses nothing but the time."""
    return (
        older.content == new.content
        and (older.category, older.source, older.actor, older.session_id, older.visibility, older.key)
        == (new.category, new.source, new.actor, new.session_id, new.visibility, new.key)
        and (older.base_score, older.importance) == (new.base_score, new.importance)
        and older.entities == new.entities
        and dict(older.metadata) == dict(new.metadata)
        and older.expire_at == new.expire_at
    )


def clashes(memory: Memory, older: Memory) -> bool:
    """A near-identical text that negates or changes the older one is news, not a repeat
    ("User is allergic to peanuts" / "User is not allergic to peanuts": cosine 0.98)."""
    verdict = conflicts.judge(Statement(memory.content, memory.key), Statement(older.content, older.key)).verdict
    return verdict in (Verdict.REPLACE, Verdict.CONTRADICT)


def _supersede(plan: BatchPlan, newer_id: str, older: Memory, mode: str, now: datetime) -> bool:
    """``newer_id`` replaces ``older`` (active as the batch leaves it): a ``SUPERSEDES``
    edge between them and, in ``supersede`` mode, ``older``'s next version with status
    ``superseded``. Returns whether it was superseded (in ``flag`` mode it stays active)."""
    plan.edges.append(Edge(older.namespace, newer_id, older.memory_id, SUPERSEDES, now))
    if mode == "flag":
        return False
    record = older.evolve(status=Status.SUPERSEDED, version=older.version + 1, updated_at=now)
    plan.current[older.memory_id] = record
    plan.updates.append((record, superseded_reason(newer_id)))
    return True


class SaveJudge:
    """See the module docstring. Holds no state of its own between saves (what
    ``reads_for`` gathers lives for its block only)."""

    def __init__(
        self, config: Config, store: Store, keeper: IndexKeeper, embedder: Embedder, recaller: Recaller
    ) -> None:
        self.config = config
        self.store = store
        self.keeper = keeper
        self.embedder = embedder
        self.recaller = recaller
        # ``dedup_cosine`` is set on the calibrated scale; this is it in the model's own
        # cosines (e5 scores unrelated text about 0.73, so 0.95 there is far from a repeat).
        self._dedup_at = scoring.raw_cosine(config.dedup_cosine, embedder.similarity_floor)
        # Inside reads_for: the candidate ids of each (judgment, memory id), and the
        # records read for all of them (absent ones are inactive or gone).
        self._planned: dict[tuple[str, str], list[str]] = {}
        self._covered: set[str] = set()
        self._read: dict[str, Memory] = {}

    @contextmanager
    def reads_for(
        self, memories: Sequence[tuple[Memory, Vector, bool]], now: datetime, scope: Scope | None
    ) -> Iterator[None]:
        """Within the block, ``same_text``, ``near_duplicate`` and ``resolve_conflicts`` for
        these (memory, vector, judged for conflicts) take their stored candidates from one
        read of the store made here. The store must not change meanwhile (the write lock).

        Another process's write can land between the fast network's catch-up and this
        read (a replica's deletion of "I moved to Paris", which reinstates "I live in
        Berlin"): the candidates found on the network's older state are then read in
        their newer one, and those that state brought into play missed ("I moved to Rome"
        superseded nothing, and Berlin stayed recalled beside it). The read brings the
        store's newest change seq with it; where the network lacks a change up to it, it
        catches up and the candidates are found again (``CANDIDATE_READS`` in all)."""
        namespaces = {memory.memory_id: memory.namespace for memory, _, _ in memories}
        try:
            for _ in range(CANDIDATE_READS):
                current_to = min(self.keeper.index.applied_seq, self.keeper.network.applied_seq)
                if self._read_candidates(memories, namespaces, now, scope) <= current_to:
                    break
                self._planned.clear()
                self._covered.clear()
                self._read.clear()
                self.keeper.catch_up()
            yield
        finally:
            self._planned.clear()
            self._covered.clear()
            self._read.clear()

    def _read_candidates(
        self,
        memories: Sequence[tuple[Memory, Vector, bool]],
        namespaces: Mapping[str, str],
        now: datetime,
        scope: Scope | None,
    ) -> int:
        """``reads_for``'s candidates found on the fast network and read; the newest change
        seq the read saw (0 where nothing was read)."""
        wanted: dict[str, list[str]] = {}
        seq = 0
        plan = self._planned
        for memory, _, _ in memories:
            plan["text", memory.memory_id] = self._same_text_ids(memory, scope)
        # Most likely a repeat, which needs nothing more (else it reads later).
        asked = [n for n, (memory, _, _) in enumerate(memories) if not plan["text", memory.memory_id]]
        # The semantic neighbours of all of them in one search (and, of those with a
        # claim the rules read, the conflict rules' wider one).
        near = self._neighbours_of([memories[n] for n in asked], now, DEDUP_NEIGHBOURS)
        claiming = [n for n in asked if memories[n][2] and conflicts.claims(memories[n][0].content)]
        similar = dict(
            zip(
                claiming,
                self._neighbours_of([memories[n] for n in claiming], now, conflicts.CANDIDATES_PER_CHANNEL),
                strict=True,
            )
        )
        for n, neighbours in zip(asked, near, strict=True):
            memory, vector, judged = memories[n]
            plan["near", memory.memory_id] = self._near_ids(memory, neighbours, scope)
            if judged and (memory.key is not None or n in similar):
                plan["conflicts", memory.memory_id] = self._conflict_ids(memory, vector, now, scope, similar.get(n))
        for (_, memory_id), ids in self._planned.items():
            wanted.setdefault(namespaces[memory_id], []).extend(ids)
        for namespace, ids in wanted.items():
            unique = list(dict.fromkeys(ids))
            if unique:
                found, seen = self.store.get_many_and_seq(Scope.whole([namespace]), unique, MemoryFilter(), now)
                seq = max(seq, seen)
                self._read.update((m.memory_id, m) for m in found)
                self._covered.update(unique)
        return seq

    def _plan(self, judgment: str, memory: Memory, find: Callable[[], list[str]]) -> list[str]:
        """The candidate ids of ``judgment`` for ``memory``: found once per ``reads_for`` block."""
        key = (judgment, memory.memory_id)
        if key not in self._planned:
            self._planned[key] = find()
        return self._planned[key]

    def resolve_conflicts(
        self,
        plan: BatchPlan,
        new: tuple[int, Memory, Vector],
        mode: str,
        now: datetime,
        scope: Scope | None,
    ) -> SaveResult | None:
        """Conflicts on write for one new memory of a batch (``new``: its position in the
        batch, the memory, its vector), added to ``plan`` before the one store transaction
        that applies them; the batch's new memories are judged in order, each right after
        its own dedup, so that each is judged as a save of it after the earlier ones would.

        With ``mode`` not ``off``, the new memory is judged (``engine.conflicts``) against
        its candidates: active memories of its namespace that are semantically close (the
        recall candidate search), that share an entity, or that carry the same ``key``,
        plus the memories earlier in the same batch (``plan.judged``); one the batch has
        already superseded is no candidate, as it would not be for a save after the batch.
        A verdict counts only between memories the embedder finds close
        (``min_similarity``), unless both carry the same ``key``: one over-broad rule must
        not take out a namespace. A replaced one gets a ``SUPERSEDES`` edge from the new
        one and, in ``supersede`` mode, a new version with status ``superseded`` (in
        ``flag`` mode it stays active); a clash without a winner gets a ``CONTRADICTS``
        edge. Time order decides a replacement: a new memory created before the one the
        rules say it replaces is itself the replaced one (the edge from the newer, and
        superseded on arrival in ``supersede`` mode); at equal times the new one replaces.
        Returns the memory's result, or ``None`` when it was not judged. Runs under the
        write lock, so the records it reads cannot change before the transaction lands.
        """
        _, memory, vector = new
        earlier = list(plan.judged)
        plan.judged.append(new)
        if mode == "off" or (memory.key is None and not conflicts.claims(memory.content)):
            return None  # a verdict needs a claim the rules read on both sides, or a key on both
        floor = self.embedder.similarity_floor
        olds = self._conflict_candidates(memory, vector, now, scope)
        self._learn_slots(olds)
        # Only those of the batch still active count for its caps, as only active ones
        # are a later save's candidates (the batch's own superseded ones would crowd them out).
        olds += _related_earlier(memory, vector, [item for item in earlier if plan.active(item[1])])
        by_id = {old.memory_id: old for old in olds if old.memory_id != memory.memory_id and plan.active(old)}
        statements = [Statement(old.content, old.key, old.memory_id) for old in by_id.values()]
        verdicts = conflicts.detect(Statement(memory.content, memory.key, memory.memory_id), statements)
        close = self._similarities(vector, [old.memory_id for old, _ in verdicts], earlier)
        linked: dict[str, list[str]] = {SUPERSEDES: [], CONTRADICTS: [], "flagged": []}
        for old, judgement in verdicts:
            keyed = memory.key is not None and old.key is not None
            if judgement.verdict is Verdict.DUPLICATE or (
                not keyed
                and scoring.calibrated_similarity(close.get(old.memory_id, 0.0), floor)
                < self.config.conflicts.min_similarity
            ):
                continue
            record = plan.latest(by_id[old.memory_id])
            back_dated = memory.created_at < record.created_at
            if back_dated and judgement.verdict in (Verdict.REPLACE, Verdict.CONTRADICT):
                # Time order reads the pair the other way round: a replacement would hide the
                # new memory, so it is whether every claim of the new one is replaced that counts.
                judgement = conflicts.judge(Statement(memory.content, memory.key), old, hidden="new")
            if judgement.verdict is Verdict.REPLACE and record.status is Status.ACTIVE:
                if back_dated:
                    # Time order decides: a back-dated memory (an old chat imported) is the
                    # one replaced, stored superseded by the newer one (in the save's
                    # transaction: ``Store.insert_linked`` updates a memory it inserts);
                    # nothing where another newer memory already superseded it.
                    if plan.active(memory):
                        _supersede(plan, record.memory_id, plan.latest(memory), mode, now)
                    continue
                superseded = _supersede(plan, memory.memory_id, record, mode, now)
                linked[SUPERSEDES if superseded else "flagged"].append(record.memory_id)
            elif judgement.verdict is Verdict.CONTRADICT:
                plan.edges.append(Edge(memory.namespace, memory.memory_id, record.memory_id, CONTRADICTS, now))
                linked[CONTRADICTS].append(record.memory_id)
        return SaveResult(
            plan.latest(memory),
            created=True,
            superseded=tuple(linked[SUPERSEDES]),
            contradicted=tuple(linked[CONTRADICTS]),
            flagged=tuple(linked["flagged"]),
        )

    def stay_said(
        self,
        plan: BatchPlan,
        memory: Memory,
        fresh: Sequence[tuple[int, Memory, Vector]],
        now: datetime,
        guard: Callable[[Memory], Memory],
    ) -> tuple[str, ...]:
        """A new memory that only says its writer's last memory is a stay ("I moved to
        Paris." then, saved apart, "It's only for six months."; ``conflicts.continued``):
        the memories that last one superseded and that the two read as one text no longer
        replace are made active again, in the save's transaction (added to ``plan``).
        Returns their ids. The last memory is the newest of the same namespace, audience,
        actor and session, earlier in the batch (``fresh``) or stored, whatever it says; one
        no longer active, of another audience, or said more than ``STAY_SAID_WITHIN``
        before, brings nothing back. A memory another
        active memory supersedes too stays superseded."""
        if not conflicts.says_a_stay(memory.content):
            return ()
        last = self._last_written(plan, memory, fresh, now)
        if last is None or not plan.active(last) or not same_audience(last, memory):
            return ()
        if memory.created_at - last.created_at > STAY_SAID_WITHIN:
            return ()
        joined = conflicts.continued(last.content, memory.content)
        if joined is None:
            return ()
        reason = supersession.stay_reason(last.memory_id, memory.memory_id)
        as_one = last.evolve(content=joined)
        back: list[tuple[Memory, str]] = []
        batch_new = {other.memory_id for _, other, _ in fresh}
        if last.memory_id in batch_new:
            for edge in plan.edges:
                if edge.kind != SUPERSEDES or edge.src != last.memory_id or edge.dst not in plan.current:
                    continue
                older = plan.current[edge.dst]
                if older.status is not Status.SUPERSEDED or self._hidden_besides(plan, older, last.memory_id, now):
                    continue
                if supersession.replaces_by_rules(as_one, older):
                    continue
                back.append((older.evolve(status=Status.ACTIVE, version=older.version + 1, updated_at=now), reason))
        else:
            found = supersession.reinstated_by_stay(
                self.store,
                as_one,
                memory.memory_id,
                now,
                guard,
                lambda older: supersession.replaces_by_rules(as_one, older),
            )
            back = [(record, why) for record, why in found if record.memory_id not in plan.current]
        for record, why in back:
            plan.current[record.memory_id] = record
            plan.updates.append((record, why))
        return tuple(record.memory_id for record, _ in back)

    def _last_written(
        self, plan: BatchPlan, memory: Memory, fresh: Sequence[tuple[int, Memory, Vector]], now: datetime
    ) -> Memory | None:
        """The writer's newest memory before ``memory`` (``stay_said``): earlier in the
        batch, else stored (the fast network's ``last_written``, then one read)."""
        for _, other, _ in reversed(fresh):
            if (other.namespace, other.actor, other.session_id) == (memory.namespace, memory.actor, memory.session_id):
                return plan.latest(other) if other.created_at <= memory.created_at else None
        net = self.keeper.network
        with net.reading():
            last_id = net.last_written(memory)
        if last_id is None:
            return None
        found = self.store.get_many(Scope.whole([memory.namespace]), [last_id], MemoryFilter(), now)
        return plan.latest(found[0]) if found else None

    def _hidden_besides(self, plan: BatchPlan, older: Memory, but: str, now: datetime) -> bool:
        """Whether a memory other than ``but`` supersedes ``older`` too: an edge of the
        batch, or a stored one from a memory still active."""
        if any(e.kind == SUPERSEDES and e.dst == older.memory_id and e.src != but for e in plan.edges):
            return True
        stored = supersession.links_into(
            self.store.edges(Scope.whole([older.namespace]), older.memory_id), older.memory_id, {but}
        )
        if not stored:
            return False
        whole = Scope.whole([older.namespace])
        others = self.store.get_many(whole, [edge.src for edge in stored], MemoryFilter(), now)
        return any(other.status is Status.ACTIVE for other in others)

    def _learn_slots(self, stored: Sequence[Memory]) -> None:
        """File the claim slots of those of ``stored`` whose slots the fast network does not
        know yet (kept under other rules, or saved before it kept them): read once here,
        as the rules judge them, they spare the next save that meets them a read."""
        net = self.keeper.network
        with net.reading():
            rows = [net.row_of(memory.memory_id) for memory in stored]
            held = [(memory, row) for memory, row in zip(stored, rows, strict=True) if row is not None]
            unknown = net.slots_unknown(np.asarray([row for _, row in held], dtype=np.int64))
            for (memory, row), new in zip(held, unknown.tolist(), strict=True):
                if new:
                    net.keep_slots(row, memory, conflicts.slots_of(memory.content))

    def _similarities(
        self, vector: Vector, ids: Sequence[str], earlier: Sequence[tuple[int, Memory, Vector]]
    ) -> dict[str, float]:
        """The cosine of ``vector`` with each of ``ids``: from the batch where the memory
        is new in it, else from the index."""
        batch = {memory.memory_id: vec for _, memory, vec in earlier}
        close = {mid: float(np.dot(batch[mid], vector)) for mid in ids if mid in batch}
        stored = [mid for mid in ids if mid not in batch]
        if stored:
            close.update(self.keeper.index.similarities(vector, stored))
        return close

    def _conflict_candidates(self, memory: Memory, vector: Vector, now: datetime, scope: Scope | None) -> list[Memory]:
        """Active memories of the new one's audience (``_peers``) that it may supersede or
        contradict: those carrying its ``key`` and, when the rules read a claim in it, the
        most similar ones and those mentioning one of its entities, kept only when close
        enough to count (``[conflicts] min_similarity``, with a margin for the float16
        copies) and holding a claim about what its claims are about
        (``FastNetwork.may_conflict``), or keyed. Found in the fast network; the store
        reads the survivors once. (A second-opinion judge for pairs the rules call
        unrelated, ``conflicts.detect``'s ``fallback``, would need the others too; the
        service asks none.)
        Asked only for a memory with a claim or a key (``resolve_conflicts``)."""
        ids = self._plan("conflicts", memory, lambda: self._conflict_ids(memory, vector, now, scope, None))
        return self._read_in_order(memory.namespace, ids, now)

    def _conflict_ids(
        self, memory: Memory, vector: Vector, now: datetime, scope: Scope | None, similar: Neighbours | None
    ) -> list[str]:
        """``similar``: the memory's neighbours for the conflict rules when it holds a claim
        (searched here when not given)."""
        if similar is None and conflicts.claims(memory.content):
            similar = self.neighbours([memory.namespace], np.asarray([vector]), now, conflicts.CANDIDATES_PER_CHANNEL)[
                0
            ]
        net = self.keeper.network
        whole, active = Scope.whole([memory.namespace]), MemoryFilter()
        with net.reading():
            found: list[Rows] = []
            if similar is not None:
                found.append(similar[0])
                for key in sorted(entity_keys(memory.entities)):
                    rows = net.by_entity([memory.namespace], key)
                    rows = rows[net.passes(whole, active, now, rows)]
                    found.append(net.newest(rows, conflicts.CANDIDATES_PER_CHANNEL))
            if memory.key is not None:
                found.append(net.by_key(memory.namespace, memory.key))
            rows = np.asarray(list(dict.fromkeys(np.concatenate(found).tolist())), dtype=np.int64)
            rows = rows[net.peers(memory, scope, rows)]
            keyed = net.keyed(rows, memory.key)
            floor = self.embedder.similarity_floor
            close = (net.cosines(vector, rows) - floor) / (1.0 - floor) >= self.config.conflicts.min_similarity - 0.01
            close &= net.may_conflict(rows, conflicts.slots_of(memory.content))
            return [net.id_of(row) for row in rows[keyed | close].tolist()]

    def neighbours(self, namespaces: Sequence[str], vectors: Matrix, now: datetime, pool: int) -> list[Neighbours]:
        """For each new memory (its namespace, its vector: a row of ``vectors``), the
        active memories of its namespace most similar to it (``Recaller.nearest`` with
        ``pool``), searched for the whole batch at once, namespace by namespace."""
        found: dict[int, Neighbours] = {}
        by_namespace: dict[str, list[int]] = {}
        for position, namespace in enumerate(namespaces):
            by_namespace.setdefault(namespace, []).append(position)
        net = self.keeper.network
        with net.reading():
            for namespace, positions in by_namespace.items():
                answers = self.recaller.nearest_many(
                    net, vectors[positions], Scope.whole([namespace]), MemoryFilter(), now, pool=pool
                )
                found.update(zip(positions, answers, strict=True))
        return [found[position] for position in range(len(namespaces))]

    def _neighbours_of(
        self, memories: Sequence[tuple[Memory, Vector, bool]], now: datetime, pool: int
    ) -> list[Neighbours]:
        if not memories:
            return []
        vectors = np.stack([np.asarray(vector, dtype=np.float32) for _, vector, _ in memories])
        return self.neighbours([memory.namespace for memory, _, _ in memories], vectors, now, pool)

    def _read_in_order(self, namespace: str, ids: Sequence[str], now: datetime) -> list[Memory]:
        """The active, unexpired ones of ``ids`` in ``namespace``, read in one call, in the
        order of ``ids`` (none read when there are none)."""
        if not ids:
            return []
        unread = [memory_id for memory_id in ids if memory_id not in self._covered]
        by_id = self._read
        if unread:
            found = self.store.get_many(Scope.whole([namespace]), unread, MemoryFilter(), now)
            by_id = {**self._read, **{m.memory_id: m for m in found}}
        return [by_id[memory_id] for memory_id in ids if memory_id in by_id]

    def same_text(
        self,
        memory: Memory,
        earlier: Mapping[str, list[Memory]],
        plan: BatchPlan,
        now: datetime,
        scope: Scope | None,
    ) -> Memory | None:
        """The oldest active, unexpired memory of ``memory``'s audience with the same content
        digest: stored (the fast network's digest postings, then one read), else earlier in
        the batch (``earlier``, by digest); one the batch superseded (``plan``) is none."""
        ids = self._plan("text", memory, lambda: self._same_text_ids(memory, scope))
        stored = self._read_in_order(memory.namespace, ids, now)
        # The oldest first, as one at a time would have stored them: a back-dated memory
        # of the batch is older than stored ones and than the batch's earlier ones.
        for other in sorted([*stored, *earlier.get(memory.digest, [])], key=lambda other: other.created_at):
            if plan.active(other) and _peers(other, memory, scope) and _same_thing(other, memory):
                return other
        return None

    def quarantined_repeat(
        self, memory: Memory, earlier: Mapping[str, list[Memory]], now: datetime, scope: Scope | None
    ) -> Memory | None:
        """The oldest quarantined memory that a quarantined ``memory`` repeats word for word:
        of its audience, by the same writer (actor, session, source) and with the same
        category, key, score, importance, entities, metadata and expiry, stored or earlier
        in the batch. A
        writer repeating an attack leaves one memory for review, not one a save (500 saves,
        500 rows and vectors, the review list's pages all the same text); nothing of the
        repeat is lost but its time, which the audit log keeps."""
        net = self.keeper.network
        with net.reading():  # of any status: ``peers`` keeps only the active ones
            ids = [net.id_of(row) for row in net.same_text(memory.namespace, memory.digest).tolist()]
        held = (
            self.store.get_many(
                Scope.whole([memory.namespace]),
                ids,
                MemoryFilter(statuses=(Status.QUARANTINED,), include_expired=True),
                now,
            )
            if ids
            else []
        )
        for other in sorted([*held, *earlier.get(memory.digest, [])], key=lambda other: other.created_at):
            if other.status is Status.QUARANTINED and _peers(other, memory, scope) and _same_record(other, memory):
                return other
        return None

    def _same_text_ids(self, memory: Memory, scope: Scope | None) -> list[str]:
        net = self.keeper.network
        with net.reading():
            rows = net.same_text(memory.namespace, memory.digest)
            return [net.id_of(row) for row in rows[net.peers(memory, scope, rows)].tolist()]

    def near_duplicate(
        self,
        memory: Memory,
        vector: Vector,
        fresh: Sequence[tuple[int, Memory, Vector]],
        plan: BatchPlan,
        now: datetime,
        scope: Scope | None,
        *,
        fresh_vectors: Matrix,
    ) -> tuple[Memory, float] | None:
        """An active memory of ``memory``'s audience with cosine ≥ threshold, overlapping entities,
        and that the new text repeats by its words (``text.repeats``: mostly the same words, at
        most ``text.DEDUP_MAX_NEW_TERMS`` of its own, the same numbers and the same words that
        turn a text around): stored, or new earlier in the batch
        (``fresh``), and not superseded by the batch (``plan``). The fast network finds the
        stored ones close enough (its ``DEDUP_NEIGHBOURS`` nearest); only those are read.
        ``fresh_vectors`` holds the vectors of ``fresh``, row by row."""
        threshold = self._dedup_at
        keys = entity_keys(memory.entities)
        pairs: list[tuple[Memory, float]] = []
        if fresh:
            sims = fresh_vectors @ vector
            pairs = [
                (other, float(sim))
                for (_, other, _), sim in zip(fresh, sims.tolist(), strict=True)
                if sim >= threshold and same_audience(other, memory)
            ]
        ids = self._plan(
            "near",
            memory,
            lambda: self._near_ids(
                memory, self._neighbours_of([(memory, vector, False)], now, DEDUP_NEIGHBOURS)[0], scope
            ),
        )
        if ids:
            exact = dict(self.keeper.index.similarities(vector, ids))
            read = self._read_in_order(memory.namespace, ids, now)
            pairs += [(other, exact[other.memory_id]) for other in read if other.memory_id in exact]
        said: text.Wording | None = None
        unread: frozenset[str] | None = None  # the new text's pieces the model has no word for
        for candidate, similarity in sorted(pairs, key=lambda pair: -pair[1]):
            if similarity < threshold:
                break
            if unread is None:
                # A vector of a text the model has no word for says nothing (MiniLM reads
                # "Lisa" alone in two Chinese prizes, 0.99 apart): it vouches for no repeat.
                if not self._reads(memory.content):
                    return None
                unread = self._unread_parts(memory.content)
            if not self._reads(candidate.content):
                continue
            # Read for the most part, it may say what is new in words the model has none for
            # ("Lisa's favourite dish is 宫保鸡丁 and 麻婆豆腐" after "… is 宫保鸡丁", 0.98 apart
            # with MiniLM): the vector does not see that, and vouches for no repeat.
            if not all(part in candidate.content for part in unread):
                continue
            if not plan.active(candidate) or not _same_thing(candidate, memory):
                continue
            said = said or text.Wording.of(memory.content)
            if not text.repeats(said, text.Wording.of(candidate.content)):
                continue  # news, not a repeat: a fold would keep only the older text
            other = entity_keys(candidate.entities)
            if not ((not keys and not other) or keys & other):
                # A sentence's first word misspelt is read as a name ("Teh meeting …"):
                # no name the other text lacks.
                typos = entity_keys(
                    misspelt_openers(memory.content, candidate.content)
                    + misspelt_openers(candidate.content, memory.content)
                )
                mine, theirs = keys - typos, other - typos
                if not ((not mine and not theirs) or mine & theirs):
                    continue
            return candidate, similarity
        return None

    def _reads(self, content: str) -> bool:
        """Whether the embedder reads ``content`` (``ports.model_reads``)."""
        return model_reads(self.embedder, content, self.config.recall.unread_query_share)

    def _unread_parts(self, content: str) -> frozenset[str]:
        """The pieces of ``content`` the model has no word for (``ReadsText.unread_parts``;
        none where the check is off or the embedder cannot tell)."""
        if self.config.recall.unread_query_share >= 1 or not isinstance(self.embedder, ReadsText):
            return frozenset()
        return self.embedder.unread_parts(content)

    def _near_ids(self, memory: Memory, similar: Neighbours, scope: Scope | None) -> list[str]:
        """Of ``memory``'s neighbours, the ids of those of its audience close enough to count."""
        net = self.keeper.network
        with net.reading():
            rows, cosines = similar
            close = rows[(cosines >= self._dedup_at - 0.01) & net.peers(memory, scope, rows)]
            return [net.id_of(row) for row in close.tolist()]


def _related_earlier(memory: Memory, vector: Vector, earlier: Sequence[tuple[int, Memory, Vector]]) -> list[Memory]:
    """Memories earlier in the same batch that may be about the same thing: sharing
    an entity or the key (the newest ones, as the fast network's entity channel picks
    stored ones), or among the most similar. Bounded, so a large batch does not judge
    every pair."""
    same_ns = [(other, other_vector) for _, other, other_vector in earlier if same_audience(other, memory)]
    keys = entity_keys(memory.entities)
    linked = [
        other
        for other, _ in same_ns
        if (keys & entity_keys(other.entities)) or (memory.key is not None and other.key == memory.key)
    ]
    closest = heapq.nlargest(conflicts.CANDIDATES_PER_CHANNEL, same_ns, key=lambda pair: float(np.dot(pair[1], vector)))
    newest = sorted(linked, key=lambda other: other.created_at)[-conflicts.CANDIDATES_PER_CHANNEL :]
    return newest + [other for other, _ in closest]
