"""Taking memory back in time: one memory to a version, a namespace to a moment, restore.

Every change of a memory is a kept version (who, when, why). A rollback never
rewrites history: it writes a *new* version whose fields equal the old ones, so
a rollback is itself undone by rolling back to a moment just before it.

Restored fields: content, category, entities, importance, visibility,
expire_at, status, key and metadata. Use counters (base_score, access_count,
last_accessed_at) are left as they are: reinforcement is use, not an edit, and
keeps no versions. The one exception is a memory whose score faded (archived for it,
or deleted or superseded meanwhile) that a ``restore`` or a rollback makes active again:
its decay restarts (``last_accessed_at`` now, ``base_score`` no lower than a new memory
of its source starts with, ``restarted``), else the next consolidation would archive it
again; rolling back further does not undo that. A restored content is embedded again
with the current model.

A namespace rollback to ``as_of`` gives each memory the fields of its last
version at or before ``as_of``; a memory first stored after ``as_of`` is
soft-deleted. Purged memories left no versions behind and cannot come back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, TypeVar

from engine import supersession
from engine.codec import to_iso
from engine.config import Config, ScoringConfig
from engine.conflicts import MERGED_INTO
from engine.errors import (
    Conflict,
    Forbidden,
    GuardRejected,
    InvalidInput,
    MemoryNotFound,
    NotOwner,
    StaleWrite,
    expect_version,
)
from engine.index_keeper import IndexKeeper
from engine.ports import Embedder, Store, Vector
from engine.records import (
    Memory,
    MemoryFilter,
    Scope,
    Status,
    Version,
    more_widely_read,
    same_audience,
    sight_of,
)
from engine.scoring import current_score

RESTORED_FIELDS = (
    "content",
    "category",
    "entities",
    "importance",
    "visibility",
    "expire_at",
    "status",
    "key",
    "metadata",
)
MAX_REPORTED_IDS = 1000
# Every record, whatever its status or expiry: what ``Store.get`` answers, for many ids at once.
ANY_RECORD = MemoryFilter(statuses=tuple(Status), include_expired=True)


def state_at(versions: Sequence[Version], as_of: datetime) -> Memory | None:
    """The record as it was at ``as_of``: its last version written then or before."""
    at = [v for v in versions if v.changed_at <= as_of]
    return at[-1].record if at else None


def differs(current: Memory, target: Memory) -> bool:
    return any(getattr(current, name) != getattr(target, name) for name in RESTORED_FIELDS)


def restored(current: Memory, target: Memory, now: datetime) -> Memory:
    """``current`` with ``target``'s restored fields, as the next version."""
    fields = {name: getattr(target, name) for name in RESTORED_FIELDS}
    return current.evolve(**fields, version=current.version + 1, updated_at=now)


def restarted(memory: Memory, now: datetime, scoring: ScoringConfig) -> Memory | None:
    """``memory`` with its decay restarted at ``now``, where its score faded below its
    category's archive threshold: ``last_accessed_at`` now and ``base_score`` no lower than
    a new memory of its source starts with. None where it did not fade."""
    if current_score(memory, now, scoring) >= scoring.archive_below(memory.category):
        return None
    return memory.evolve(base_score=max(memory.base_score, scoring.initial_score(memory.source)), last_accessed_at=now)


def held(versions: Sequence[Version]) -> bool:
    """Whether a memory is in quarantine, or was when it was deleted (its history, oldest
    first): only a namespace admin may take it out, whatever the way (update, restore,
    rollback)."""
    for version in reversed(versions):
        if version.record.status is not Status.DELETED:
            return version.record.status is Status.QUARANTINED
    return False


def _admin(scope: Scope | None, namespace: str) -> bool:
    return scope is None or scope.administers(namespace)


@dataclass(slots=True)
class NamespaceRollback:
    namespace: str
    as_of: datetime
    scanned: int = 0
    restored: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[str] = field(default_factory=list)
    restored_count: int = 0
    deleted_count: int = 0

    def note(self, kind: str, memory_id: str) -> None:
        if kind == "restored":
            self.restored_count += 1
            bucket = self.restored
        elif kind == "deleted":
            self.deleted_count += 1
            bucket = self.deleted
        else:
            bucket = self.skipped
        if len(bucket) < MAX_REPORTED_IDS:
            bucket.append(memory_id)


_T = TypeVar("_T")

# Reads and writes of one memory in a namespace rollback's second pass
# (``Rollbacks._not_hidden_under_nothing``) that another process's write may beat.
SECOND_PASS_TRIES = 3


class Retrying(Protocol):
    """``write`` under the write lock, run again where another process wrote between its
    read and the store's write; a conditional one (``expected_version``) whose own memory
    moved on answers that as ``VersionMismatch`` (``MemoryService._retrying``)."""

    def __call__(self, write: Callable[[], _T], memory_id: str, expected_version: int | None) -> _T: ...


def records_of(store: Store, scope: Scope, ids: Sequence[str], now: datetime, batch: int) -> dict[str, Memory]:
    """The records of ``ids`` in ``scope``, any status, read ``batch`` at a time (one store
    call each, not one per memory: over Bolt a round trip each); an id out of sight or
    purged is absent."""
    found: dict[str, Memory] = {}
    for start in range(0, len(ids), batch):
        found.update((m.memory_id, m) for m in store.get_many(scope, ids[start : start + batch], ANY_RECORD, now))
    return found


class Rollbacks:
    def __init__(
        self,
        config: Config,
        store: Store,
        keeper: IndexKeeper,
        embedder: Embedder,
        *,
        lock: AbstractContextManager[object],
        clock: Callable[[], datetime],
        check_namespace: Callable[[Sequence[str]], None],
        guard: Callable[[Memory], Memory],
        retrying: Retrying,
    ) -> None:
        self._config = config
        self._retrying = retrying
        # The write guard over a record about to be made current again (``MemoryService.guard_record``):
        # what it would quarantine today comes back quarantined, not active.
        self._guard = guard
        self._store = store
        self._keeper = keeper
        self._embedder = embedder
        self._lock = lock
        self._clock = clock
        self._check_namespace = check_namespace

    def to_version(
        self,
        namespace: str,
        memory_id: str,
        version: int,
        *,
        actor: str | None = None,
        scope: Scope | None = None,
        expected_version: int | None = None,
    ) -> Memory:
        """Write a new version of the memory equal to ``version`` (in its restored fields).
        ``scope``: the caller's (``MemoryService.get``); a memory out of it is not found.
        With ``expected_version``, only while the memory's current version is that one.
        The version passes the write guard again, and only a namespace admin may roll a
        quarantined memory (or one deleted while quarantined) back out of quarantine."""
        self._check_namespace([namespace])
        sight = sight_of([namespace], scope)
        versions = self._store.versions(sight, memory_id)
        if not versions:
            raise MemoryNotFound(memory_id, namespace)
        chosen = [v for v in versions if v.version == version]
        if not chosen:
            raise InvalidInput(
                f"memory {memory_id} has versions 1..{versions[-1].version}, not {version}", field="version"
            )
        target = self._vetted(chosen[0].record)
        vector = self._embedder.embed_documents([target.content])[0]

        def locked(target: Memory) -> Memory:
            current = self._store.get(sight, memory_id)
            if current is None:
                raise MemoryNotFound(memory_id, namespace)
            expect_version(memory_id, current.version, expected_version)
            if target.visibility is not current.visibility and scope is not None and not scope.owns(current):
                raise NotOwner()
            releasing = target.status not in (Status.QUARANTINED, Status.DELETED)
            # The history as it is now, under the lock: a quarantine that landed meanwhile counts.
            if releasing and held(self._store.versions(sight, memory_id)) and not _admin(scope, namespace):
                raise Forbidden("only a namespace admin may release a quarantined memory")
            now = self._clock()
            also: list[tuple[Memory, str]] = []
            reason = f"rolled back to version {version}"
            reworded = (target.content, target.key) != (current.content, current.key)
            if (
                target.status is Status.SUPERSEDED
                and (current.status is not Status.SUPERSEDED or reworded or more_widely_read(target, current))
                and not supersession.still_hidden(self._store, current, restored(current, target, now), now)
            ):
                # To a superseded version while nothing of its audience that superseded it is
                # recalled (deleted, made private since): superseded, it would be hidden with
                # nothing in its place, whether it comes out of deleted or was active again
                # (reinstated by that deletion). It comes back as a restore brings it. Out of
                # superseded, only to a version more widely read or of another text, as an
                # edit of its audience or its text judges it: Alice's private "I live in
                # Berlin", superseded by her private "I moved to Lisbon", rolled back to its
                # shared version superseded by Bob's "I moved to Paris" (private since) was
                # hidden from Bob under memories he cannot read; superseded by "I moved to
                # Paris", rolled back to its superseded "My favourite drink is green tea", it
                # was hidden under Paris, which does not replace that text.
                target = target.evolve(status=Status.ACTIVE)
                reason += ", active: nothing of its audience that superseded it is recalled"
            if current.status is Status.ACTIVE and target.status in (Status.DELETED, Status.QUARANTINED):
                # Deleted or quarantined by a rollback as by a DELETE or an edit: what it
                # superseded is recalled again, not left hidden under a memory out of recall.
                how = "deleted" if target.status is Status.DELETED else "quarantined"
                also = supersession.reinstated_by_deleting(self._store, current, now, self._guard, how=how)
            elif current.status is Status.DELETED and target.status is Status.ACTIVE:
                # Undeleted by a rollback as by a restore: back superseded where the memory
                # that superseded it still replaces it, and what its deletion reinstated is
                # superseded again. Only where the version says what the deleted record
                # said: another text is a change no supersession has judged.
                if supersession.same_claim(current, target):
                    newer = supersession.superseding_on_restore(self._store, current, now)
                    if newer is not None:
                        target = target.evolve(status=Status.SUPERSEDED)
                        reason = supersession.restored_superseded_reason(newer, reason)
                back = restored(current, target, now)
                # Back active of another audience than what it superseded (made private while
                # superseded, then deleted), it hides only what it still replaces, as a restore.
                also = supersession.superseded_again_by_restoring(self._store, back, now)
                also += supersession.reinstated_below(self._store, back, now, self._guard)
            elif (
                current.status in (Status.ACTIVE, Status.SUPERSEDED)
                and target.status is Status.ACTIVE
                and (reworded or not same_audience(target, current))
            ):
                # Made active with another text or audience, as an edit into it: what it
                # superseded and no longer replaces is recalled again. Alice's "I live in
                # Berlin", which superseded Carol's shared "I live in Rome", rolled back to a
                # private version hid Rome from Bob under a memory he cannot read.
                back = restored(current, target, now)
                also = supersession.reinstated_by_editing(
                    self._store,
                    back,
                    now,
                    self._guard,
                    lambda older: same_audience(back, older) and supersession.replaces_by_rules(back, older),
                )
            return self._write(current, target, vector, actor, reason, also=also)

        # Under the write lock, and decided anew where another process wrote between the
        # read and the store's write (with ``expected_version``, a stale condition: 412).
        return self._retrying(lambda: locked(target), memory_id, expected_version)

    def to_time(self, namespace: str, as_of: datetime, *, actor: str | None = None) -> NamespaceRollback:
        """Restore every memory of ``namespace`` to its state at ``as_of`` (page by page)."""
        self._check_namespace([namespace])
        if as_of.tzinfo is None:
            raise InvalidInput("as_of must carry a timezone", field="as_of")
        if as_of > self._clock():
            raise InvalidInput("as_of must not be in the future", field="as_of")
        report = NamespaceRollback(namespace, as_of)
        reason = f"namespace rolled back to {to_iso(as_of)}"
        size = self._config.lifecycle.page_size
        after = ""
        # Those the run makes superseded or deletes (what they superseded is checked in turn):
        # once it is done, none may leave a memory superseded under nothing in recall.
        superseded: list[str] = []
        while True:
            page = self._store.scan(Scope.whole([namespace]), after, size)
            report.scanned += len(page)
            targets: dict[str, Memory | None] = {}
            for memory in page:
                versions = self._store.versions(Scope.whole([namespace]), memory.memory_id)
                target = state_at(versions, as_of)
                if target is not None:
                    try:
                        target = self._vetted(target)
                    except GuardRejected:
                        report.note("skipped", memory.memory_id)  # its text then is refused now
                        continue
                if target is None:
                    if memory.status is not Status.DELETED:
                        targets[memory.memory_id] = None
                elif differs(memory, target):
                    targets[memory.memory_id] = target
                else:
                    report.unchanged += 1
                    if target.status is Status.SUPERSEDED and supersession.released_since(
                        self._store, memory, as_of, versions
                    ):
                        # Superseded then as now, but released since from a memory that hid it
                        # then and is back: checked as those the run supersedes are.
                        superseded.append(memory.memory_id)
            written = self._restore_page(namespace, page, targets, actor, reason, report)
            # Those it takes out of recall: stored after that moment, or back to a superseded,
            # deleted or archived version (a memory deleted then and restored since, deleted again).
            superseded += [m for m in written if (t := targets[m]) is None or t.status is not Status.ACTIVE]
            if len(page) < size:
                break
            after = page[-1].memory_id
        self._not_hidden_under_nothing(namespace, as_of, superseded, actor, reason, report)
        return report

    def _not_hidden_under_nothing(
        self,
        namespace: str,
        as_of: datetime,
        memory_ids: Sequence[str],
        actor: str | None,
        reason: str,
        report: NamespaceRollback,
    ) -> None:
        """Make active again each memory that a namespace rollback made superseded, or
        whose superseding memory it deleted (``memory_ids``: those it made superseded or
        deleted), that nothing of its audience hides once the rollback is done
        (``supersession.hidden_by_any``): the memory that superseded it then purged since, or
        its expiry passed. Those that another of them superseded wait for it: "I moved to
        Paris", superseded then by "I moved to Rome", purged since, comes back active, and
        "I live in Berlin" stays superseded by Paris. Below a memory out of recall for good
        (deleted or quarantined) the chain runs on, as a deletion's does
        (``supersession.superseded_by``): "I live in Rome" deleted by the rollback hid "I live in
        Berlin" through "I moved to Lisbon", deleted while superseded. A merge's sources stay
        merged. Which memories a memory was released from is read as of ``as_of``: the
        rollback brought back what hid it then.

        Another process may write or purge one of them between this pass's read and its write
        (the store refuses the write, ``StaleWrite`` or ``MemoryNotFound``): it is read and decided again
        (``SECOND_PASS_TRIES`` in all), then noted as skipped, not the whole run a 409."""
        whole = Scope.whole([namespace])
        stale: dict[str, int] = {}  # the writes another process beat, by memory

        def beaten(memory_id: str) -> None:
            stale[memory_id] = stale.get(memory_id, 0) + 1
            if stale[memory_id] < SECOND_PASS_TRIES:
                pending[memory_id] = None  # read and decided again on the next round
            elif memory_id not in report.skipped:
                report.note("skipped", memory_id)

        with self._lock:
            pending: dict[str, None] = {}
            walked: set[str] = set()
            walks: dict[str, Memory] = {}  # the records the walks read, under this lock
            for memory_id in memory_ids:  # those it deleted: what they superseded, a level down
                below = supersession.superseded_by(self._store, namespace, memory_id, walked)
                walks.update((older.memory_id, older) for older in below)
                pending.update(dict.fromkeys(older.memory_id for older in below))
                pending[memory_id] = None
            batch = self._config.lifecycle.page_size
            now = self._clock()
            # Each round reads its memories in one store call a page, not one each; the first
            # round's read comes first, so that only the superseded among them have their
            # links read: the others leave the pass in its first round, whatever they link to.
            unread = [memory_id for memory_id in pending if memory_id not in walks]
            first_round = walks | records_of(self._store, whole, unread, now, batch)
            for memory_id in list(pending):
                first = first_round.get(memory_id)
                if first is None or first.status is not Status.SUPERSEDED:
                    del pending[memory_id]
                # A merged memory's source is hidden by the merge, which holds its text.
                elif any(e.kind == MERGED_INTO and e.src == memory_id for e in self._store.edges(whole, memory_id)):
                    del pending[memory_id]
            records: dict[str, Memory] | None = first_round
            while pending:
                if records is None:
                    now = self._clock()
                    records = records_of(self._store, whole, list(pending), now, batch)
                ready, waiting, left, tried = [], [], len(pending), sum(stale.values())
                for memory_id in list(pending):
                    current = records.get(memory_id)
                    if current is None or current.status is not Status.SUPERSEDED:
                        del pending[memory_id]
                    elif supersession.hidden_by_any(self._store, current, now, as_of=as_of):
                        del pending[memory_id]
                        # Hidden as it was then: released since from a memory that hides it
                        # again, it is superseded by it again, else later walks pass it by.
                        try:
                            for newer_id in sorted(supersession.released_since(self._store, current, as_of)):
                                current = current.evolve(version=current.version + 1, updated_at=now)
                                self._store.update(
                                    current,
                                    None,
                                    changed_by=actor,
                                    reason=supersession.restored_superseded_reason(newer_id, reason),
                                )
                        except (StaleWrite, MemoryNotFound):
                            beaten(memory_id)
                    elif any(
                        edge.src in pending
                        for edge in supersession.links_into(self._store.edges(whole, memory_id), memory_id)
                    ):
                        waiting.append(current)
                    else:
                        ready.append(current)
                if not ready and len(pending) == left and sum(stale.values()) == tried:
                    # Memories that superseded each other, none hidden: one comes back, and the
                    # others are checked again under it. Where the pass dropped some, those that
                    # waited for them are looked at again first: made active together, "I live in
                    # Berlin" came back beside "I moved to Paris", which replaces it. (One read
                    # again after another process's write is no such cycle: it is looked at again.)
                    ready = waiting[:1]
                for current in ready:
                    del pending[current.memory_id]
                    active = current.evolve(status=Status.ACTIVE, version=current.version + 1, updated_at=now)
                    try:
                        self._store.update(
                            active,
                            None,
                            changed_by=actor,
                            reason=f"{reason}, active: nothing of its audience that superseded it is recalled",
                        )
                    except (StaleWrite, MemoryNotFound):
                        # Written or purged by another process since this round read it: read
                        # again on the next round (purged, it leaves the pass there).
                        beaten(current.memory_id)
                records = None  # read again on the next round
            self._keeper.catch_up()

    def restore(
        self, namespace: str, memory_id: str, *, actor: str | None = None, scope: Scope | None = None
    ) -> Memory:
        """Make an archived, superseded or soft-deleted memory active again (a new version).

        A soft-deleted memory that an active memory superseded, or whose deletion reinstated
        it, comes back superseded by it where neither changed since (``engine.supersession``):
        restoring both of a supersession chain leaves it as if neither was deleted.
        Restore does not release a quarantine: a memory deleted while quarantined comes
        back quarantined, and so does one the write guard would quarantine today (its
        text, or a block on its writer)."""
        self._check_namespace([namespace])
        sight = sight_of([namespace], scope)

        def locked() -> Memory:
            # Its checks below read its links and the memories they lead to once between them.
            store = supersession.ReadOnce(self._store).as_store()
            current = store.get(sight, memory_id)
            if current is None:
                raise MemoryNotFound(memory_id, namespace)
            if current.status is Status.ACTIVE:
                return current
            if current.status is Status.QUARANTINED:
                raise Conflict(
                    f"memory {memory_id} is quarantined by the write guard; restore does not release it",
                    memory_id=memory_id,
                )
            wanted = Status.QUARANTINED if held(store.versions(sight, memory_id)) else Status.ACTIVE
            now = self._clock()
            # A memory archived because its expiry passed would come back still expired:
            # out of recall and lists, and archived again by the next consolidation.
            expired = current.expire_at if current.expire_at is not None and current.expire_at <= now else None
            back = current.evolve(status=wanted, expire_at=None if expired else current.expire_at)
            # So would one whose score faded, archived for it or not (a deletion undone weeks
            # later, the sources of a merge undone): its decay restarts from the restore, at no
            # less than a new memory of its source starts with.
            fresh = restarted(back, now, self._config.scoring)
            faded = fresh is not None
            if fresh is not None:
                back = fresh
            active = self._guard(back).evolve(version=current.version + 1, updated_at=now)
            if active.content != current.content:  # redacted under today's policy
                raise Conflict(
                    f"memory {memory_id} holds text the write guard refuses or redacts now; roll it back to a version "
                    "or update its content instead",
                    memory_id=memory_id,
                )
            reason = f"restored from {current.status.value}"
            if expired is not None:
                reason += f", its expiry {to_iso(expired)} cleared"
            if faded:
                reason += ", its decay restarted"
            if active.status is Status.QUARANTINED:
                reason += ", quarantined"
            # Back from its deletion while the memory that superseded it is back too: superseded
            # again, as if neither had been deleted.
            newer = (
                supersession.superseding_on_restore(store, current, now)
                if current.status is Status.DELETED and active.status is Status.ACTIVE
                else None
            )
            if newer is not None:
                active = active.evolve(status=Status.SUPERSEDED)
                reason = supersession.restored_superseded_reason(newer)
            # Back from its deletion, it supersedes again what that deletion reinstated (so
            # does one back superseded: the older memory is one link further down the chain).
            again = (
                # Back active, it hides only what it still replaces as it is now (made private
                # while superseded, then deleted: its shared "I live in Berlin" stayed hidden
                # from others under it).
                supersession.superseded_again_by_restoring(store, active, now)
                + supersession.reinstated_below(store, active, now, self._guard)
                if current.status is Status.DELETED and active.status in (Status.ACTIVE, Status.SUPERSEDED)
                # Back out of superseded, it hides what it superseded only as it is now.
                else supersession.reinstated_below(store, active, now, self._guard)
                if current.status is Status.SUPERSEDED
                else []
            )
            # The store keeps its own base score unless told the update sets one: a restart's
            # raised base would be answered here and lost there.
            self._store.update(active, None, changed_by=actor, reason=reason, sets_base_score=faded, also=again)
            self._keeper.catch_up()
            return active

        # Under the write lock, and decided anew where another process wrote between the
        # read and the store's write.
        return self._retrying(locked, memory_id, None)

    def _vetted(self, record: Memory) -> Memory:
        """``record`` as the write guard lets it become current again today: redacted, or
        quarantined (its text, or a block on its writer); a deleted state stays deleted."""
        vetted = self._guard(record)
        return vetted.evolve(status=Status.DELETED) if record.status is Status.DELETED else vetted

    def _restore_page(
        self,
        namespace: str,
        page: Sequence[Memory],
        targets: dict[str, Memory | None],
        actor: str | None,
        reason: str,
        report: NamespaceRollback,
    ) -> list[str]:
        """Write ``targets`` over the page's memories; the ids written."""
        written: list[str] = []
        if not targets:
            return written
        before = {m.memory_id: m for m in page}
        to_embed = [
            (memory_id, target.content)
            for memory_id, target in targets.items()
            if target is not None and target.content != before[memory_id].content
        ]
        embedded = self._embedder.embed_documents([content for _, content in to_embed])
        vectors = {memory_id: embedded[row] for row, (memory_id, _) in enumerate(to_embed)}
        with self._lock:
            # The page's records as they are now, under the lock, in one read: each memory
            # changed since the scan (or purged) is left as it is.
            now = self._clock()
            fresh = records_of(self._store, Scope.whole([namespace]), list(targets), now, len(targets))
            for memory_id, target in targets.items():
                current = fresh.get(memory_id)
                if current is None or current.version != before[memory_id].version:
                    report.note("skipped", memory_id)  # changed or purged while we looked
                    continue
                try:
                    if target is None:
                        deleted = current.evolve(
                            status=Status.DELETED, version=current.version + 1, updated_at=self._clock()
                        )
                        self._store.update(deleted, None, changed_by=actor, reason=f"{reason}: stored after it")
                    else:
                        self._write(current, target, vectors.get(memory_id), actor, reason, catch_up=False)
                except (StaleWrite, MemoryNotFound):
                    # Another process wrote it (or a memory the write reinstates), or purged it,
                    # between the page's read and this write: changed while we looked, as above,
                    # not the whole run (the read is the page's, so the window spans its writes).
                    report.note("skipped", memory_id)
                    continue
                report.note("deleted" if target is None else "restored", memory_id)
                written.append(memory_id)
            self._keeper.catch_up()
        return written

    def _write(
        self,
        current: Memory,
        target: Memory,
        vector: Vector | None,
        actor: str | None,
        reason: str,
        *,
        also: Sequence[tuple[Memory, str]] = (),
        catch_up: bool = True,
    ) -> Memory:
        """Store the restoration of ``target`` over ``current``, with the other memories'
        versions ``also`` in its transaction; the caller holds the lock. Made active out of
        another status, a memory whose score faded has its decay restarted (``restarted``).
        ``catch_up``: bring the index up to the write now; a namespace rollback's page
        catches up once, after its last write (``_restore_page``)."""
        now = self._clock()
        updated = restored(current, target, now)
        fresh = (
            restarted(updated, now, self._config.scoring)
            if current.status is not Status.ACTIVE and updated.status is Status.ACTIVE
            else None
        )
        if fresh is not None:
            updated = fresh
            reason += ", its decay restarted"
        if updated.content != current.content:
            if vector is None:
                vector = self._embedder.embed_documents([updated.content])[0]
            updated = updated.evolve(embedding_model=self._embedder.name, embedding_version=self._embedder.version)
        else:
            vector = None
        self._store.update(
            updated, vector, changed_by=actor, reason=reason, sets_base_score=fresh is not None, also=also
        )
        if catch_up:
            self._keeper.catch_up()
        return updated
