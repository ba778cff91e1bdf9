"""What deleting or restoring a memory does to the memories it superseded.

A memory the conflict rules superseded (``engine.writing``: "I live in Berlin", then
"I moved to Paris") left recall for one reason only: the newer memory replaced it. When
the newer one is deleted, that reason is gone, and the older one must not stay hidden
with nothing in recall in its place: a purge even takes the ``SUPERSEDES`` link that says
why it is hidden. So deleting an active memory reinstates each memory it superseded
(a new version, status ``active``, its reason naming the deleted memory), and restoring
the deleted memory supersedes them again, unless they changed meanwhile (an edit then
leaves them recalled). Deletions and restores of both leave the end state as if neither
was deleted: whichever is restored last, the newer memory is active and the older one
superseded.

Which memories it superseded the ``SUPERSEDES`` links say, not the reasons of their
versions: an import without versions, or into another namespace (new ids), keeps the
links but not reasons naming the ids. Left alone: a memory another active memory
supersedes too (still replaced), a keyed value replaced under the same explicit ``key``
(a key-value client's older value of a key it deletes is not its value again), the
sources of a merge (``MERGED_INTO``: the merged memory holds their text, so deleting it
deletes that text), and what the deletion of a memory that was itself no longer active
(superseded, archived) would touch. Through such a memory deleted or quarantined since,
the chain runs on: once "I moved to Paris" between them is gone, deleting "I moved to
Lisbon" brings "I live in Berlin" back (after a purge, by the link carried past it:
``engine.lifecycle.carried_past``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from engine import conflicts
from engine.conflicts import MERGED_INTO, SUPERSEDES, Statement, Verdict
from engine.errors import GuardRejected
from engine.ports import Edge, Store
from engine.records import Memory, Scope, Status, Version, same_audience

# How the reasons of the versions written here begin (``released_from`` reads them).
_SUPERSEDED = "superseded by "
_REINSTATED = "reinstated: "


def superseded_reason(newer_id: str) -> str:
    """The reason of the version a supersession writes (``engine.writing``)."""
    return f"{_SUPERSEDED}{newer_id}"


def restored_superseded_reason(newer_id: str, how: str = "restored from deleted") -> str:
    """The reason of a restore (or, ``how``, a rollback) that brings a deleted memory back
    superseded (``superseding_on_restore``)."""
    return f"{_SUPERSEDED}{newer_id}, which still replaces it: {how}"


def reinstated_reason(deleted_id: str, how: str = "deleted") -> str:
    return f"{_REINSTATED}{deleted_id}, which superseded it, was {how}"


def edited_reason(edited_id: str) -> str:
    return f"{_REINSTATED}{edited_id}, which superseded it, no longer replaces it"


def stay_reason(newer_id: str, said_id: str) -> str:
    return f"{_REINSTATED}{newer_id}, which superseded it, was said to be a stay by {said_id}"


def reinstated_by_deleting(
    store: Store,
    memory: Memory,
    now: datetime,
    guard: Callable[[Memory], Memory],
    *,
    how: str = "deleted",
    leaving: Collection[str] = (),
    still_hides: Callable[[str, Memory], bool] | None = None,
) -> list[tuple[Memory, str]]:
    """The versions (record, reason) that make active again the memories ``memory``
    superseded, for the transaction that deletes it (see the module docstring), or
    quarantines it (``how``: a block on its writer; a memory of a writer an admin blocked
    must not go on hiding what it replaced). ``guard``: the write guard over a record made
    current again; one whose text it would change today stays superseded, one it would
    quarantine comes back quarantined. ``leaving``: the ids of other memories the same
    transaction takes out of recall (an import that brings several forward deleted),
    whose links hide nothing once it lands, active as they are read now. ``still_hides``:
    for another memory that supersedes one of them too, whether it still replaces it as the
    same transaction leaves it (an import that brings it forward reworded); by default, yes."""
    if memory.status is not Status.ACTIVE:
        return []
    reason = reinstated_reason(memory.memory_id, how)
    return _reinstated(store, memory, now, guard, lambda older: False, leaving, still_hides, reason)


def reinstated_by_editing(
    store: Store,
    edited: Memory,
    now: datetime,
    guard: Callable[[Memory], Memory],
    replaces: Callable[[Memory], bool],
    *,
    leaving: Collection[str] = (),
    still_hides: Callable[[str, Memory], bool] | None = None,
) -> list[tuple[Memory, str]]:
    """The versions (record, reason) that make active again the memories ``edited`` (as
    the edit leaves it, still active) superseded and that, by ``replaces`` (the conflict
    rules and the semantic check of a save, over the new text), it no longer replaces:
    "I moved to Paris" edited to "The weather is nice" hides "I live in Berlin" no more.
    So for one superseded itself, which hid them through the chain while it replaced them:
    Carol's "I live in Rome" under her "I live in Berlin", made private, hid Bob's shared "I
    moved to Paris" below it under nothing he reads once Berlin was made private too.
    ``leaving``, ``still_hides``: as for ``reinstated_by_deleting``."""
    if edited.status not in (Status.ACTIVE, Status.SUPERSEDED):
        return []
    reason = edited_reason(edited.memory_id)
    return _reinstated(store, edited, now, guard, replaces, leaving, still_hides, reason)


def reinstated_by_stay(
    store: Store,
    as_one: Memory,
    said_id: str,
    now: datetime,
    guard: Callable[[Memory], Memory],
    replaces: Callable[[Memory], bool],
) -> list[tuple[Memory, str]]:
    """The versions (record, reason) that make active again the memories ``as_one``
    superseded (the writer's last memory, its text read with a later save ``said_id`` that
    says it is a stay: "I moved to Paris. It's only for six months.") and that, by
    ``replaces`` over that text, it no longer replaces (``engine.writing``)."""
    if as_one.status is not Status.ACTIVE:
        return []
    reason = stay_reason(as_one.memory_id, said_id)
    return _reinstated(store, as_one, now, guard, replaces, (), None, reason)


def _reinstated(
    store: Store,
    memory: Memory,
    now: datetime,
    guard: Callable[[Memory], Memory],
    replaces: Callable[[Memory], bool],
    leaving: Collection[str],
    still_hides: Callable[[str, Memory], bool] | None,
    reason: str,
    taken: set[str] | None = None,
) -> list[tuple[Memory, str]]:
    """The versions (record, ``reason``) that make active again the memories ``memory``
    superseded and no longer hides; and, below each brought back that superseded others in
    turn, those it no longer hides as it is now (``_replacing_now``): Bob's "I moved to Paris",
    made private or reworded while "I live in Rome" superseded it, back when Rome is deleted,
    hides Alice's "I live in Berlin" no more. ``taken``: the ids already brought back."""
    whole = Scope.whole([memory.namespace])
    reads = _Reads(store, whole)  # one read of each memory that superseded several of them
    taken = set() if taken is None else taken
    back: list[tuple[Memory, str]] = []
    below: list[Memory] = []
    for older in superseded_by(store, memory.namespace, memory.memory_id):
        if older.status is not Status.SUPERSEDED or older.memory_id in taken:
            continue
        if older.key is not None and older.key == memory.key and same_audience(older, memory):
            # A key-value client's older value of a key is not its value again; but a keyed
            # memory of another audience now (made private since) is not that client's value
            # of the key at all, and hides nothing others see.
            continue
        released = released_from(store, older)
        if memory.memory_id in released:
            continue  # its link says nothing now: what hides the older memory is another
        links = store.edges(whole, older.memory_id)
        if any(edge.kind == MERGED_INTO and edge.src == older.memory_id for edge in links):
            continue
        others = links_into(links, older.memory_id, {memory.memory_id, *released, *leaving})
        if any(
            _hides(reads, edge, older, now) and (still_hides is None or still_hides(edge.src, older)) for edge in others
        ) or replaces(older):
            continue
        try:
            guarded = guard(older.evolve(status=Status.ACTIVE))
        except GuardRejected:
            continue
        if guarded.content != older.content:
            continue
        record = older.evolve(status=guarded.status, version=older.version + 1, updated_at=now)
        taken.add(older.memory_id)
        back.append((record, reason))
        if any(edge.kind == SUPERSEDES and edge.src == older.memory_id != edge.dst for edge in links):
            below.append(record)
    for record in below:
        judged = _replacing_now(store, record)
        back.extend(
            _reinstated(store, record, now, guard, judged, leaving, still_hides, edited_reason(record.memory_id), taken)
        )
    return back


def reinstated_below(
    store: Store, memory: Memory, now: datetime, guard: Callable[[Memory], Memory]
) -> list[tuple[Memory, str]]:
    """The versions (record, reason) that make active again, for the transaction that brings
    ``memory`` back out of superseded (a restore), the memories it superseded that it no
    longer hides as it is now (``_replacing_now``): made private while superseded, Bob's "I
    moved to Paris" restored hid Alice's "I live in Berlin" under a memory she cannot read."""
    if memory.status is not Status.ACTIVE:
        return []
    judged = _replacing_now(store, memory)
    return _reinstated(store, memory, now, guard, judged, (), None, edited_reason(memory.memory_id))


def _replacing_now(store: Store, newer: Memory) -> Callable[[Memory], bool]:
    """Whether ``newer``, brought back, still replaces each older memory it superseded: not
    at all where it comes back quarantined; else as of its own link to it
    (``_still_replaces``), and through a memory gone since, by its audience alone."""
    scope = Scope.whole([newer.namespace])

    def replaces(older: Memory) -> bool:
        if newer.status is not Status.ACTIVE:
            return False
        edges = store.edges(scope, older.memory_id)
        links = [edge for edge in links_into(edges, older.memory_id) if edge.src == newer.memory_id]
        if not links:
            return same_audience(newer, older)
        return _still_replaces(_Reads(store, scope), newer, older, max(edge.created_at for edge in links))

    return replaces


def superseded_again_by_restoring(store: Store, memory: Memory, now: datetime) -> list[tuple[Memory, str]]:
    """The versions (record, reason) that supersede again, for the transaction that makes
    ``memory`` active again after its deletion, the memories it superseded that are active
    now only because of deletions: reinstated by its deletion, or deleted and restored
    since it superseded them (deleting "I moved to Paris", deleting "I live in Berlin" it
    brought back, then restoring both left both active), unchanged since (``_stands``), and
    of its audience still (``same_audience``: a memory made private since supersedes nothing
    others see, as a save of it would not)."""
    again: list[tuple[Memory, str]] = []
    for older in superseded_by(store, memory.namespace, memory.memory_id):
        if older.status is Status.ACTIVE and same_audience(older, memory) and _stands(store, older, memory):
            version = older.evolve(status=Status.SUPERSEDED, version=older.version + 1, updated_at=now)
            again.append((version, superseded_reason(memory.memory_id)))
    return again


def superseding_on_restore(store: Store, memory: Memory, now: datetime) -> str | None:
    """The id of the active memory that supersedes ``memory`` again as a restore makes it
    current after its deletion: one that superseded it (a ``SUPERSEDES`` link of its own),
    or whose deletion reinstated it, and is active again, with neither changed since
    (``_hides``, by ``_stands``). "I moved to Paris" deleted, "I live in Berlin" it brought back deleted
    too, then Paris restored before Berlin: Berlin came back active beside Paris. Not one
    whose expiry passed: out of recall, it would hide the restored memory with nothing in
    its place. Nor one of another audience now (``same_audience``: Bob's "I moved to Paris"
    made private since): a private memory supersedes nothing others see, and would hide the
    restored memory from its writer under one they cannot read. None where no such memory
    is (the restore makes it active)."""
    whole = Scope.whole([memory.namespace])
    reads = _Reads(store, whole)
    # One link of each memory, in the order they come: the test reads the memories, not the links.
    links = {edge.src: edge for edge in links_into(store.edges(whole, memory.memory_id), memory.memory_id)}
    for newer_id, edge in links.items():
        if _hides(reads, edge, memory, now, stands=lambda newer, _: _stands(store, memory, newer)):
            return newer_id
    return None


def hidden_by_any(
    store: Store,
    memory: Memory,
    now: datetime,
    seen: set[str] | None = None,
    replaces: Callable[[Memory, Memory], bool] | None = None,
    as_of: datetime | None = None,
) -> bool:
    """Whether a memory that superseded ``memory`` (a ``SUPERSEDES`` link of its own, not
    released since: ``released_from``) still hides it (``_hides``: active, its expiry not
    passed, of its audience, still replacing it), or, superseded or gone itself since, is
    hidden in turn by one that does: "I live in Berlin" under "I moved to Paris" under "I
    moved to Rome" is replaced in recall by Rome. A rollback to a superseded version reads
    it: "I live in Berlin" rolled back so while "I moved to Paris" is deleted, or made
    private since, would be hidden with nothing of its audience in its place. ``replaces``:
    for ``memory`` as an edit of its text leaves it, whether a memory that superseded it
    replaces that text (the links judged the text it had): only such a one, active, hides it.
    A link made while ``memory`` said what it says now judged that text, and counts as it is,
    through the chain above too: "I live in Berlin" under "I moved to Paris" under "I live in
    Rome", edited into "I like green tea" and rolled back to its superseded version, is hidden
    by Rome still. ``as_of``: the releases as they stood then (``released_from``), for a
    namespace rolled back to that moment."""
    whole = Scope.whole([memory.namespace])
    seen = {memory.memory_id} if seen is None else seen
    versions = list(store.versions(whole, memory.memory_id))
    released = _released(v for v in versions if as_of is None or v.changed_at <= as_of)
    for edge in links_into(store.edges(whole, memory.memory_id), memory.memory_id, released):
        if edge.src in seen:
            continue
        judged = replaces is None or bool(_said_then(versions, memory, edge.created_at))
        if _hides(_Reads(store, whole), edge, memory, now):
            if judged:
                return True
            newer = store.get(whole, edge.src)
            if newer is not None and replaces is not None and replaces(newer, memory):
                return True
        if not judged:
            continue
        seen.add(edge.src)
        newer = store.get(whole, edge.src)
        if (
            newer is not None
            and (newer.status is Status.SUPERSEDED or newer.status in _GONE)
            and _still_replaces(_Reads(store, whole), newer, memory, edge.created_at)
            and hidden_by_any(store, newer, now, seen, as_of=as_of)
        ):
            return True
    return False


def _said_then(versions: Sequence[Version], memory: Memory, at: datetime) -> bool | None:
    """Whether ``memory`` said what it says now (text and key) at ``at``, by its history
    (a link made then judged this text); None where no version was written by then."""
    then = [v.record for v in versions if v.changed_at <= at]
    if not then:
        return None
    return (then[-1].content, then[-1].key) == (memory.content, memory.key)


def still_hidden(store: Store, before: Memory, after: Memory, now: datetime) -> bool:
    """Whether ``after``, a change of ``before``'s fields that leaves it superseded unless
    nothing hides it now (an edit, a rollback to a superseded version), is still hidden by a
    memory that superseded it (``hidden_by_any``). Reworded while superseded (its text or
    key), only by one whose text replaces the new one by the conflict rules
    (``replaces_by_rules``): the links judged the text it had. "I live in Berlin", superseded
    by "I moved to Paris", edited into "I like green tea" (or rolled back to a version that
    said so) is hidden by Paris no more; so is a deleted or active ``before`` rolled back to
    such a version (deleted, or restored by hand beside Paris, it said "I live in Berlin")."""
    reworded = (after.content, after.key) != (before.content, before.key)
    return hidden_by_any(store, after, now, replaces=replaces_by_rules if reworded else None)


# What an edit of a memory changes: every field a rollback restores but its status.
_CLAIM = ("content", "category", "entities", "importance", "visibility", "expire_at", "key", "metadata")


def same_claim(a: Memory, b: Memory) -> bool:
    """Whether two records of a memory say the same, whatever their status: a rollback to a
    version that said something else than the deleted record is a change, not an undeletion."""
    return all(getattr(a, name) == getattr(b, name) for name in _CLAIM)


def _stands(store: Store, older: Memory, newer: Memory) -> bool:
    """Whether ``newer``'s supersession of ``older`` holds again, with nothing but deletions
    and restores between: ``older``'s last version that names ``newer`` is the one that
    ``newer`` superseded it by or the one ``newer``'s deletion reinstated it by; every
    version of ``older`` since only deleted it or undeleted it (active right after deleted),
    its fields as they were; and ``newer`` says what it said then (content and key). Any
    edit, of either, a release by a quarantine or by hand, or a history that names
    ``newer`` otherwise, and it does not: unsure, the older memory stays recalled."""
    whole = Scope.whole([older.namespace])
    versions = store.versions(whole, older.memory_id)
    naming = (superseded_reason(newer.memory_id), reinstated_reason(newer.memory_id))
    # A restore or rollback that brought it back superseded by ``newer`` names it too
    # (``restored_superseded_reason``): superseded by it again, as by the save.
    again = superseded_reason(newer.memory_id) + ","
    marks = [at for at, version in enumerate(versions) if version.reason in naming or version.reason.startswith(again)]
    if not marks:
        return False
    mark = versions[marks[-1]]
    before = mark.record.status
    for version in versions[marks[-1] + 1 :]:
        status = version.record.status
        if not (status is Status.DELETED or (status is Status.ACTIVE and before is Status.DELETED)):
            return False
        if any(getattr(version.record, name) != getattr(mark.record, name) for name in _CLAIM):
            return False
        before = status
    then = [v.record for v in store.versions(whole, newer.memory_id) if v.changed_at <= mark.changed_at]
    return bool(then) and (then[-1].content, then[-1].key) == (newer.content, newer.key)


# A memory out of recall for good: what it superseded, the memory that superseded it replaced.
_GONE = (Status.DELETED, Status.QUARANTINED)


def superseded_by(store: Store, namespace: str, memory_id: str, walked: set[str] | None = None) -> list[Memory]:
    """The memories ``memory_id`` supersedes: by its own ``SUPERSEDES`` links, and through a
    memory it superseded that left recall for good since (deleted or quarantined while
    superseded: "I moved to Paris" deleted after "I moved to Lisbon" replaced it), whose
    own older memories it replaced too; else deleting Lisbon would leave "I live in
    Berlin" superseded by a deleted memory, nothing in recall in its place. ``walked``: the
    memories whose links earlier walks of one check read (a namespace rollback walks below
    each memory it deleted); their links are not read again, and what lies below them, found
    then, is not named again, so a chain is read once in a run, not once for each memory of
    it above."""
    whole = Scope.whole([namespace])
    walked = set() if walked is None else walked
    found: list[Memory] = []
    seen, below = {memory_id}, [memory_id]
    while below:
        current = below.pop()
        if current in walked:
            continue
        walked.add(current)
        ids = [
            edge.dst
            for edge in store.edges(whole, current)
            if edge.kind == SUPERSEDES and edge.dst not in seen and edge.src != edge.dst
        ]
        for older_id in dict.fromkeys(ids):
            seen.add(older_id)
            if older_id in walked:
                continue
            older = store.get(whole, older_id)
            if older is None:
                continue
            if older.status in _GONE:
                below.append(older_id)
            else:
                found.append(older)
    return found


def links_into(edges: Iterable[Edge], memory_id: str, excluding: Collection[str] = ()) -> list[Edge]:
    """The ``SUPERSEDES`` links among ``edges`` by which another memory superseded
    ``memory_id`` (a link of a memory to itself says nothing), none from ``excluding``: the
    memories it was released from (``released_from``), or that leave recall with the change."""
    return [
        edge
        for edge in edges
        if edge.kind == SUPERSEDES and edge.dst == memory_id and edge.src != memory_id and edge.src not in excluding
    ]


def released_from(store: Store, memory: Memory, as_of: datetime | None = None) -> set[str]:
    """The memories whose ``SUPERSEDES`` link to ``memory`` says nothing now: a later version
    of ``memory`` reinstated it from them (an edit that no longer replaces it, a deletion
    restored after ``memory`` changed), and none superseded it again. The links stay, and
    read as they are they hid what they no longer hide: "I moved to Paris" edited into "The
    weather is nice today" brought "I live in Berlin" back, and deleting a later "I moved to
    Rome" that superseded it then left it superseded, the edited memory still active. Without
    versions (an import without them) every link counts, and so does each once ``memory``
    is made superseded again by hand (an edit of its status, a rollback): by what, the
    links say. ``as_of``: by its versions written then or before, for a namespace rolled back
    to that moment: "I live in Rome", superseded by "I live in Berlin", released from it when
    Berlin was edited into "The weather is nice today", is hidden by Berlin again once both are
    rolled back to a time before the edit."""
    versions = store.versions(Scope.whole([memory.namespace]), memory.memory_id)
    return _released(v for v in versions if as_of is None or v.changed_at <= as_of)


def released_since(
    store: Store, memory: Memory, as_of: datetime, versions: Sequence[Version] | None = None
) -> set[str]:
    """The memories ``memory`` was released from by versions written after ``as_of``
    (``released_from``): links that counted then and say nothing now. A namespace rolled back
    to that moment brings back what hid ``memory`` then; unless the rollback supersedes it by
    them again, every later walk reads the release and passes it by: "I live in Rome",
    released from "I live in Berlin" by an edit of Berlin undone since, stayed hidden under
    Berlin made private later, though nothing Bob reads replaced it. Only those whose link
    was made by then: one that superseded it later hid nothing then (stored after that
    moment, the rollback deletes it)."""
    whole = Scope.whole([memory.namespace])
    versions = list(store.versions(whole, memory.memory_id)) if versions is None else versions
    since = _released(versions) - _released(v for v in versions if v.changed_at <= as_of)
    if not since:
        return since
    return {
        edge.src
        for edge in links_into(store.edges(whole, memory.memory_id), memory.memory_id)
        if edge.created_at <= as_of
    } & since


def _released(versions: Iterable[Version]) -> set[str]:
    released: set[str] = set()
    before: Status | None = None
    for version in versions:
        reason = version.reason or ""
        if reason.startswith(_SUPERSEDED):
            released.discard(reason.removeprefix(_SUPERSEDED).split(",", 1)[0])
        elif reason.startswith(_REINSTATED):
            released.add(reason.removeprefix(_REINSTATED).split(",", 1)[0])
        elif version.record.status is Status.SUPERSEDED and before is not Status.SUPERSEDED:
            released.clear()
        before = version.record.status
    return released


class ReadOnce:
    """A view of ``store`` for one decision under the write lock, between its reads and its
    write: each memory's record (``get``) and links (``edges``) read once however many of the
    decision's checks ask, the rest of the store as it is. A restore's three checks (what
    supersedes it again, what it supersedes again, what it no longer hides) each read its
    links and walked to the memories below: a round trip each on a graph store. The decision
    writes through the store itself, after its last read; a view serves one try of it."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._records: dict[tuple[Scope, str], Memory | None] = {}
        self._links: dict[tuple[Scope, str], list[Edge]] = {}
        self._histories: dict[tuple[Scope, str], list[Version]] = {}

    def get(self, scope: Scope, memory_id: str) -> Memory | None:
        if (scope, memory_id) not in self._records:
            self._records[scope, memory_id] = self._store.get(scope, memory_id)
        return self._records[scope, memory_id]

    def edges(self, scope: Scope, memory_id: str) -> list[Edge]:
        if (scope, memory_id) not in self._links:
            self._links[scope, memory_id] = self._store.edges(scope, memory_id)
        return list(self._links[scope, memory_id])

    def versions(self, scope: Scope, memory_id: str) -> list[Version]:
        if (scope, memory_id) not in self._histories:
            self._histories[scope, memory_id] = list(self._store.versions(scope, memory_id))
        return list(self._histories[scope, memory_id])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def as_store(self) -> Store:
        """This view where a ``Store`` is asked for: it answers every method, through the store."""
        return cast(Store, self)


class _Reads:
    """The records and histories of the memories that superseded others, each read once for
    one decision under the write lock (a memory that superseded a thousand is read once,
    not once for each: a round trip each on a graph store)."""

    def __init__(self, store: Store, scope: Scope) -> None:
        self._store, self._scope = store, scope
        self._records: dict[str, Memory | None] = {}
        self._histories: dict[str, list[Version]] = {}

    def get(self, memory_id: str) -> Memory | None:
        if memory_id not in self._records:
            self._records[memory_id] = self._store.get(self._scope, memory_id)
        return self._records[memory_id]

    def versions(self, memory_id: str) -> list[Version]:
        if memory_id not in self._histories:
            self._histories[memory_id] = list(self._store.versions(self._scope, memory_id))
        return self._histories[memory_id]


def _hides(
    reads: _Reads,
    link: Edge,
    older: Memory,
    now: datetime,
    stands: Callable[[Memory, Edge], bool] | None = None,
) -> bool:
    """Whether the memory that superseded ``older`` too by ``link`` still hides it: active, its
    expiry not passed (out of recall, it would hide ``older`` with nothing in its place), of
    its audience (``same_audience``), and its supersession not stale: by ``stands`` (the
    memory, the link), by default still replacing ``older`` as it is now (``_still_replaces``;
    a restore asks more, ``_stands``: neither changed since)."""
    found = reads.get(link.src)
    if found is None or found.status is not Status.ACTIVE or (found.expire_at is not None and found.expire_at <= now):
        return False
    if not same_audience(found, older):
        return False
    if stands is None:
        return _still_replaces(reads, found, older, link.created_at)
    return stands(found, link)


def _still_replaces(reads: _Reads, newer: Memory, older: Memory, since: datetime) -> bool:
    """Whether ``newer`` as it is now still replaces ``older``, which it superseded at
    ``since``: of its audience (``same_audience``: Bob's "I moved to Paris", made private
    since, supersedes nothing of Alice's, as a save of it would not), and, where its text or
    key changed since, still replacing it by the conflict rules ("I live in Paris" edited into
    "The weather is nice today" hides "I live in Lisbon" no more, though its own edit did not
    bring Lisbon back while another memory replaced it too)."""
    if not same_audience(newer, older):
        return False
    if _said_then(reads.versions(newer.memory_id), newer, since) is not False:
        return True  # as it was when it superseded ``older`` (or no history says otherwise)
    return replaces_by_rules(newer, older)


def replaces_by_rules(newer: Memory, older: Memory) -> bool:
    """Whether ``newer``'s text (and key) replaces ``older``'s by the conflict rules, either
    way round as time order reads a save (``engine.writing``): "I switched to light mode"
    saved back-dated under "I prefer dark mode" was judged as the newer text and superseded
    on arrival; the rules read the pair the other way as unrelated."""
    new, old = Statement(newer.content, newer.key), Statement(older.content, older.key)
    return conflicts.judge(new, old).verdict is Verdict.REPLACE or (
        older.created_at < newer.created_at and conflicts.judge(old, new, hidden="new").verdict is Verdict.REPLACE
    )
