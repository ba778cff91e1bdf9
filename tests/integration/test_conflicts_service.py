"""Entities and conflicts on write through open_service, on a real SQLite file (and, where
said, on the Bolt store too)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from engine import conflicts
from engine.config import Config, load_config
from engine.conflicts import SUPERSEDES
from engine.ports import Edge
from engine.records import MemoryDraft, MemoryFilter, MemoryPatch, Scope, Status
from engine.service import MemoryService, SaveResult
from tests.bolt import BoltTarget
from tests.integration.conftest import OpenService

NS = "user:7"


def draft(content: str, **fields: Any) -> MemoryDraft:
    return MemoryDraft(content=content, namespace=NS, **fields)


def test_extracted_entities_are_stored_and_link_across_languages(service: MemoryService) -> None:
    english = service.save(draft("User's favourite colour is Blue")).memory
    chinese = service.save(draft("用户的手机壳是蓝色的")).memory
    given = service.save(draft("Favourite shirt", entities=("navy",))).memory
    assert english.entities == ("Blue",)
    assert "蓝色" in chinese.entities
    assert given.entities == ("navy",)
    found = service.entity_memories(NS, "BLUE")
    assert {m.memory_id for m in found} == {english.memory_id, chinese.memory_id}


def test_one_batch_supersedes_in_order_and_the_store_agrees_after_reopening(
    open_svc: OpenService, service: MemoryService
) -> None:
    results = service.save_batch(
        [draft("I live in Berlin"), draft("I like tea"), draft("I moved to Lisbon"), draft("I moved to Porto")]
    )
    berlin, tea, lisbon, porto = (r.memory.memory_id for r in results)
    assert [r.superseded for r in results] == [(), (), (berlin,), (lisbon,)]
    service.close()

    reopened = open_svc()
    assert [m.memory_id for m in reopened.chain(NS, berlin)] == [porto, lisbon, berlin]
    statuses = {m.memory_id: m.status for m in reopened.list_page([NS], MemoryFilter(statuses=())).items}
    assert statuses == {
        berlin: Status.SUPERSEDED,
        lisbon: Status.SUPERSEDED,
        porto: Status.ACTIVE,
        tea: Status.ACTIVE,
    }
    assert [v.reason for v in reopened.history(NS, lisbon)] == ["created", f"superseded by {porto}"]
    hits = reopened.recall("where do I live", namespaces=[NS], reinforce=False).hits
    assert berlin not in {hit.memory.memory_id for hit in hits}


def test_a_batch_answers_a_memory_a_later_one_of_it_superseded_as_stored(
    open_svc: OpenService, service: MemoryService
) -> None:
    kept = service.save(draft("I live in Lyon")).memory
    results = service.save_batch(
        [
            draft("I live in Lyon"),  # a repeat of the stored one, which the next supersedes
            draft("I live in Berlin"),
            draft("I live in Berlin"),  # a repeat of the batch's own one, which the next supersedes
            draft("I moved to Paris"),
        ]
    )
    lyon, berlin, berlin_again, paris = results
    assert lyon.memory.memory_id == kept.memory_id and berlin_again.memory.memory_id == berlin.memory.memory_id
    assert (berlin.superseded, paris.superseded) == ((kept.memory_id,), (berlin.memory.memory_id,))
    service.close()
    reopened = open_svc()
    for result in results:
        stored = reopened.get(NS, result.memory.memory_id)
        assert (result.memory.status, result.memory.version) == (stored.status, stored.version)
        assert result.memory.updated_at == stored.updated_at
    assert [r.memory.status for r in results] == [Status.SUPERSEDED] * 3 + [Status.ACTIVE]


BERLIN, PARIS = "I live in Berlin.", "I moved to Paris."
# Each case: what is stored before, then the memories saved (namespace suffix, content),
# and the contents each namespace recalls at the end (the user's latest statement).
IN_TURN_CASES = {
    "back-to-the-first": ([], [("", BERLIN), ("", PARIS), ("", BERLIN)], {"": {BERLIN}}),
    "back-to-the-stored": ([BERLIN], [("", PARIS), ("", BERLIN)], {"": {BERLIN}}),
    "back-to-the-stored-it-repeated": ([BERLIN], [("", BERLIN), ("", PARIS), ("", BERLIN)], {"": {BERLIN}}),
    "changed-then-said-twice": ([], [("", PARIS), ("", BERLIN), ("", BERLIN)], {"": {BERLIN}}),
    "said-twice-then-changed": ([], [("", BERLIN), ("", BERLIN), ("", PARIS)], {"": {PARIS}}),
    "changed-then-repeated": ([], [("", BERLIN), ("", PARIS), ("", PARIS)], {"": {PARIS}}),
    "there-and-back-twice": ([], [("", BERLIN), ("", PARIS), ("", BERLIN), ("", PARIS)], {"": {PARIS}}),
    "two-namespaces": (
        [],
        [(":a", BERLIN), (":b", BERLIN), (":a", PARIS), (":b", PARIS), (":a", BERLIN)],
        {":a": {BERLIN}, ":b": {PARIS}},
    ),
}


def _saved(
    service: MemoryService, namespace: str, stored: list[str], saves: list[tuple[str, str]], *, batch: bool
) -> tuple[list[SaveResult], dict[str, str]]:
    """Save ``stored`` one by one, then ``saves`` as one batch or one at a time. Returns the
    results and a name for each memory id: ``s<n>`` for the stored ones, ``<n>`` for the
    memory the n-th save created, so two runs compare whatever their ids."""
    names = {
        service.save(MemoryDraft(text, namespace=namespace)).memory.memory_id: f"s{n}" for n, text in enumerate(stored)
    }
    drafts = [MemoryDraft(text, namespace=namespace + suffix) for suffix, text in saves]
    results = service.save_batch(drafts) if batch else [service.save(d) for d in drafts]
    for n, result in enumerate(results):
        if result.created:
            names[result.memory.memory_id] = str(n)
    return results, names


def _outcome(
    service: MemoryService, namespaces: list[str], results: list[SaveResult], names: dict[str, str]
) -> tuple[list[tuple[bool, str | None, str, list[str]]], list[tuple[str, Status, int]]]:
    """What the saves left, by name: each save's answer (created, how it was folded, which
    memory, what it superseded) and every memory's status and version in the store."""
    answers = [
        (r.created, r.deduplicated_by, names[r.memory.memory_id], sorted(names[i] for i in r.superseded))
        for r in results
    ]
    every = MemoryFilter(statuses=tuple(Status))
    stored = sorted((names[m.memory_id], m.status, m.version) for m in service.list_page(namespaces, every).items)
    return answers, stored


@pytest.mark.parametrize("case", sorted(IN_TURN_CASES))
def test_a_batch_ends_as_its_saves_one_at_a_time_would(service: MemoryService, case: str) -> None:
    stored, saves, recalled_at_end = IN_TURN_CASES[case]
    outcomes = []
    for batch in (False, True):
        namespace = f"{case}:{'batch' if batch else 'in-turn'}"
        namespaces = [namespace + suffix for suffix in recalled_at_end]
        results, names = _saved(service, namespace, stored, saves, batch=batch)
        outcomes.append(_outcome(service, namespaces, results, names))
        for suffix, contents in recalled_at_end.items():
            hits = service.recall("where do I live", namespaces=[namespace + suffix], reinforce=False).hits
            assert {hit.memory.content for hit in hits} == contents, (case, batch, suffix)
        if batch:
            # Each answer carries the memory as the batch's transaction stored it.
            for result in results:
                now = service.get(result.memory.namespace, result.memory.memory_id)
                assert (result.memory.status, result.memory.version) == (now.status, now.version)
    in_turn, as_batch = outcomes
    assert as_batch == in_turn


def test_claim_slots_kept_under_other_rules_are_read_again(
    open_svc: OpenService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A release whose rules read no claim in this text kept that with its fast network.
    monkeypatch.setattr(conflicts, "rules", lambda: "older rules")
    monkeypatch.setattr(conflicts, "slots_of", lambda text: frozenset())
    older = open_svc()
    lyon = older.save(draft("I live in Lyon")).memory.memory_id
    older.close()
    # This release reads one, and so must judge the memory against a move.
    monkeypatch.undo()
    now = open_svc()
    net = now.keeper.network
    row = net.row_of(lyon)
    assert row is not None and net.slots_unknown(np.asarray([row])).tolist() == [True]
    assert now.save(draft("I moved to Paris")).superseded == (lyon,)
    assert net.slots_unknown(np.asarray([row])).tolist() == [False]  # read once, as it was judged
    now.close()
    # Kept under the same rules, they survive a restart.
    again = open_svc()
    assert again.keeper.network.slots_unknown(np.asarray([row])).tolist() == [False]
    again.close()


def test_an_edit_the_content_digest_folds_is_read_again_by_the_claim_rules(service: MemoryService) -> None:
    """The digest folds case and line breaks; the rules read both ("marco:" is no speaker,
    "Marco:" is), so what the fast network keeps of a text's claims follows the exact text."""
    marco = service.save(draft("marco: I live in Rome")).memory
    edited = service.update(NS, marco.memory_id, MemoryPatch(content="Marco: I live in Rome"))
    assert edited.digest == marco.digest
    assert service.save(draft("Marco: I moved to Berlin")).superseded == (marco.memory_id,)
    lines = service.save(draft("I live in Lisbon I work at Acme")).memory
    service.update(NS, lines.memory_id, MemoryPatch(content="I live in Lisbon\nI work at Acme"))
    # Read as two lines, it holds the user's employer, which the move replaces; its home is
    # more than the move replaces, so the two are linked as a contradiction, and both recalled.
    assert service.save(draft("I joined Globex")).contradicted == (lines.memory_id,)


def test_a_contradiction_links_both_and_changes_no_status(service: MemoryService) -> None:
    first = service.save(draft("I like coffee")).memory
    second = service.save(draft("I don't like coffee"))
    assert second.contradicted == (first.memory_id,)
    assert service.get(NS, first.memory_id).status is Status.ACTIVE
    result = service.recall("coffee", namespaces=[NS], reinforce=False)
    assert result.contradicts == {
        first.memory_id: [second.memory.memory_id],
        second.memory.memory_id: [first.memory_id],
    }


def test_a_hits_contradictions_name_only_memories_the_recall_would_show(
    on_each_store: MemoryService, clock: Any
) -> None:
    """An older memory that says more than a move is contradicted by every move after it:
    its links pile up, and recall named each, the superseded, deleted and quarantined
    ones too. It names those the caller's recall would show: of the statuses asked for,
    and never one the read guard leaves out. On SQLite and on the Bolt store."""
    service = on_each_store
    older = service.save(draft("I live in Berlin and I love my dog")).memory.memory_id
    moves = []
    for city in ("Paris", "Rome", "Madrid"):
        clock.advance(minutes=1)  # the links in the order they were made, on any store
        moves.append(service.save(draft(f"I moved to {city}")))
    assert all(move.contradicted == (older,) for move in moves)
    paris, rome, madrid = (move.memory.memory_id for move in moves)

    def named(**fields: Any) -> list[str]:
        flt = MemoryFilter(**fields)
        return service.recall("Berlin dog", namespaces=[NS], flt=flt, reinforce=False).contradicts.get(older, [])

    assert named() == [madrid]
    assert named(statuses=()) == [paris, rome, madrid]  # asked for every status, it sees every one
    service.delete(NS, madrid)  # Rome is current again
    assert named() == [rome]
    service.update(NS, rome, MemoryPatch(status=Status.QUARANTINED))  # Paris is current again
    assert named() == [paris]
    assert rome not in named(statuses=())


# --- time order: a back-dated memory never hides a newer one -------------------------

LONG_AGO = datetime(1990, 1, 1, tzinfo=UTC)


def superseded_by(service: MemoryService, memory_id: str) -> list[str]:
    """The memories with a ``SUPERSEDES`` edge to ``memory_id``."""
    edges = service.store.edges(Scope.whole([NS]), memory_id)
    return [e.src for e in edges if e.kind == conflicts.SUPERSEDES and e.dst == memory_id]


def assert_newer_stays(service: MemoryService, newer: str, older: str) -> None:
    """``newer`` active and recalled; ``older`` stored superseded by it."""
    assert service.get(NS, newer).status is Status.ACTIVE
    assert service.get(NS, older).status is Status.SUPERSEDED
    assert superseded_by(service, older) == [newer] and superseded_by(service, newer) == []
    assert [v.reason for v in service.history(NS, older)] == ["created", f"superseded by {newer}"]
    assert [m.memory_id for m in service.chain(NS, older)] == [newer, older]
    hits = {hit.memory.memory_id for hit in service.recall("where do I live", namespaces=[NS], reinforce=False).hits}
    assert newer in hits and older not in hits


def test_a_back_dated_save_is_stored_superseded_by_the_newer_memory(service: MemoryService) -> None:
    oslo = service.save(draft("I live in Oslo.")).memory.memory_id
    lima = service.save(draft("I live in Lima.", created_at=LONG_AGO))
    assert lima.created and lima.superseded == () and lima.flagged == ()
    assert lima.memory.status is Status.SUPERSEDED
    assert_newer_stays(service, oslo, lima.memory.memory_id)


def test_a_save_dated_after_the_stored_memory_still_supersedes_it(service: MemoryService) -> None:
    lima = service.save(draft("I live in Lima.", created_at=LONG_AGO)).memory.memory_id
    oslo = service.save(draft("I live in Oslo.", created_at=datetime(2000, 1, 1, tzinfo=UTC)))
    assert oslo.superseded == (lima,)
    assert_newer_stays(service, oslo.memory.memory_id, lima)


def test_a_save_dated_as_the_stored_memory_supersedes_it_as_before(service: MemoryService) -> None:
    lima = service.save(draft("I live in Lima.", created_at=LONG_AGO)).memory.memory_id
    oslo = service.save(draft("I live in Oslo.", created_at=LONG_AGO))
    assert oslo.superseded == (lima,)
    assert_newer_stays(service, oslo.memory.memory_id, lima)


@pytest.mark.parametrize("newer_first", [True, False], ids=["newer-first", "older-first"])
def test_one_batch_follows_time_order_whatever_its_order(service: MemoryService, newer_first: bool) -> None:
    drafts = [draft("I live in Oslo."), draft("I live in Lima.", created_at=LONG_AGO)]
    results = service.save_batch(drafts if newer_first else drafts[::-1])
    by_text = {r.memory.content: r for r in results}
    oslo, lima = by_text["I live in Oslo."], by_text["I live in Lima."]
    assert oslo.superseded == (() if newer_first else (lima.memory.memory_id,))
    assert lima.superseded == ()
    assert_newer_stays(service, oslo.memory.memory_id, lima.memory.memory_id)


def test_flag_mode_links_a_back_dated_save_from_the_newer_memory_and_flags_nothing(service: MemoryService) -> None:
    oslo = service.save(draft("I live in Oslo.")).memory.memory_id
    lima = service.save(draft("I live in Lima.", created_at=LONG_AGO, conflicts="flag"))
    assert (lima.superseded, lima.flagged) == ((), ())
    assert service.get(NS, oslo).status is Status.ACTIVE
    assert service.get(NS, lima.memory.memory_id).status is Status.ACTIVE
    assert superseded_by(service, lima.memory.memory_id) == [oslo] and superseded_by(service, oslo) == []


def test_each_back_dated_save_is_in_its_own_chain(service: MemoryService, clock: Any) -> None:
    """Two old chats imported after the fact stated since: the newer memory supersedes
    both, and the chain through each passes through it (not through the other one)."""
    oslo = service.save(draft("I live in Oslo.")).memory.memory_id
    clock.advance(minutes=1)
    lima = service.save(draft("I live in Lima.", created_at=datetime(2000, 1, 1, tzinfo=UTC))).memory.memory_id
    clock.advance(minutes=1)
    rome = service.save(draft("I live in Rome.", created_at=LONG_AGO)).memory.memory_id
    assert sorted(superseded_by(service, lima) + superseded_by(service, rome)) == [oslo, oslo]
    assert [m.memory_id for m in service.chain(NS, lima)] == [oslo, lima]
    assert [m.memory_id for m in service.chain(NS, rome)] == [oslo, rome]


# --- someone else's home, or a stay, never hides the user's home -------------------


def recalled(service: MemoryService, query: str) -> set[str]:
    return {hit.memory.memory_id for hit in service.recall(query, namespaces=[NS], reinforce=False).hits}


@pytest.mark.parametrize(
    ("home", "other"),
    [
        ("The user lives in Berlin", "The user met a friend. He lives in Paris"),
        ("The user lives in Berlin", "The user talked to her doctor. She lives in Paris"),
        ("I live in Berlin", "My doctor is Dr. Lee and lives in Paris"),
        ("我住在杭州", "我今天在上海，住在酒店"),
        ("I live in Berlin", "I stay in a hotel in Shanghai this week"),
        ("用户住在北京", "用户喜欢欧阳娜娜，她住在上海"),
        ("用户住在北京", "用户喜欢Anna，她住在上海"),
        ("The user lives in Berlin", "The user looks up to Anna. She lives in Paris"),
        ("我住在北京", "我在出差。我住在外滩附近"),
        ("I live in Berlin", "I'm travelling. I stay in Shanghai"),
        ("I live in Berlin", "I stay at my friend's place in Shanghai"),
        ("我住在北京", "我有两个孩子，现在都住在上海"),
        ("The user lives in Berlin", "The user is a fan of Italian singer Laura. She lives in Rome"),
        ("我住在北京", "她有两个孩子，住在上海"),
        ("我在北京工作", "我有两个孩子，在上海工作"),
        ("用户住在北京", "用户佩服轩辕。她住在厦门"),
        ("用户住在北京", "用户想起了张伟，他住在上海"),
        ("我住在北京", "我们一家在度假。我们住在昆明"),
        ("The user lives in Berlin", "The user proposed to Anna. She lives in Rome"),
        ("I live in Berlin", "I stay at the Hilton in Paris"),
        ("我住在北京", "我住在朋友家"),
        ("我住在上海", "他搬到北京了"),
        ("我住在上海", "他搬回北京了"),
        ("I live in Paris", "He moved to Berlin"),
        ("I live in Paris", "I moved to coffee"),
        ("I live in Paris", "I moved to the old team"),
        ("I live in Paris", "I moved back to Google Docs"),
    ],
)
def test_someone_elses_home_or_a_stay_leaves_the_users_home_in_recall(
    service: MemoryService, home: str, other: str
) -> None:
    kept = service.save(draft(home)).memory.memory_id
    assert service.save(draft(other)).superseded == ()
    assert service.get(NS, kept).status is Status.ACTIVE
    assert kept in recalled(service, home)


@pytest.mark.parametrize(
    ("home", "move"),
    [
        ("I live in Berlin", "I moved to Paris"),
        ("I live in Berlin", "I live in Paris now"),
        ("我住在杭州", "我搬到上海了"),
        ("我住在杭州", "现在我住在上海"),
        ("The user lives in Berlin", "The user moved to Paris"),
        ("I live in Berlin", "I married Tom and moved to Paris"),
        ("The user lives in Berlin", "The user loves Italian food. She moved to Lisbon"),
        ("我住在北京", "我有两个孩子，住在上海"),
        ("I live in Berlin", "I moved to Paris 2 weeks ago"),
    ],
)
def test_the_users_own_move_still_supersedes_their_home(service: MemoryService, home: str, move: str) -> None:
    old = service.save(draft(home)).memory.memory_id
    assert service.save(draft(move)).superseded == (old,)
    assert old not in recalled(service, home)


def test_an_edit_that_keeps_the_text_and_key_judges_nothing_again(service: MemoryService) -> None:
    """An edit that sent the text unchanged (LangGraph's put sends it with every update) judged
    the pair again, and today's rules brought back what another judge, older rules or another
    model had superseded (here: a link as an import keeps it)."""
    muse = service.save(draft("The user's favourite band is Muse")).memory
    jazz = service.save(draft("The user now listens mostly to jazz")).memory
    service.link([Edge(NS, jazz.memory_id, muse.memory_id, SUPERSEDES, jazz.created_at)])
    service.update(NS, muse.memory_id, MemoryPatch(status=Status.SUPERSEDED), reason=f"superseded by {jazz.memory_id}")

    kept = service.update(NS, jazz.memory_id, MemoryPatch(content=jazz.content, metadata={"checked": True}))
    assert kept.version == jazz.version + 1
    assert service.get(NS, muse.memory_id).status is Status.SUPERSEDED
    # An edit of the text is judged: the rules see nothing in common, so Muse is back.
    service.update(NS, jazz.memory_id, MemoryPatch(content="The user now listens mostly to jazz and blues"))
    assert service.get(NS, muse.memory_id).status is Status.ACTIVE


def test_a_long_batch_judges_a_memory_against_its_newest_active_earlier_ones(service: MemoryService) -> None:
    """Of a batch's earlier memories, those about the same entity are a bounded channel:
    the newest active ones, as the fast network picks stored ones for a later save, not
    the first ones nor ones the batch itself superseded."""
    texts = [
        *(f"Alice moved jobs to Acme {n}." for n in range(24)),  # no claim, yet the closest
        "Alice lives in Berlin.",
        *(f"Alice joined Paris {n}." for n in range(25)),  # each replaces the one before
        "Alice moved to Paris.",
    ]
    outcomes = []
    for batch in (False, True):
        namespace = f"long:{batch}"
        drafts = [MemoryDraft(text, namespace=namespace) for text in texts]
        results = service.save_batch(drafts) if batch else [service.save(d) for d in drafts]
        berlin, paris = results[24].memory.memory_id, results[-1]
        assert paris.superseded == (berlin,), batch
        outcomes.append(service.get(namespace, berlin).status)
    assert outcomes == [Status.SUPERSEDED, Status.SUPERSEDED]


def test_a_batch_repeat_folds_into_the_oldest_of_its_text_as_one_at_a_time(service: MemoryService) -> None:
    """Two active memories with one text (one keyed, back-dated): a repeat is the oldest
    one's, whether the three come in one batch or one by one."""
    green = "My favourite colour is green."
    folded = []
    for batch in (False, True):
        namespace = f"oldest:{batch}"
        drafts = [
            MemoryDraft(green, namespace=namespace),
            MemoryDraft(green, namespace=namespace, key="colour", created_at=datetime(2020, 1, 1, tzinfo=UTC)),
            MemoryDraft(green, namespace=namespace),
        ]
        results = service.save_batch(drafts) if batch else [service.save(d) for d in drafts]
        assert [r.created for r in results] == [True, True, False], batch
        folded.append(results[2].memory.memory_id == results[1].memory.memory_id)
    assert folded == [True, True]


# --- the chain where one save superseded two at once ------------------------------------


@pytest.fixture(params=["sqlite", "arcadedb"])
def on_each_store(request: pytest.FixtureRequest, open_svc: OpenService, config: Config) -> MemoryService:
    """A service on SQLite, and one on the Bolt store (ArcadeDB)."""
    if request.param == "sqlite":
        return open_svc()
    target: BoltTarget = request.getfixturevalue("arcadedb")
    bolt = target.config(target.new_database())
    return open_svc(config=load_config(env={}, data_dir=config.data_dir, conflicts={"min_similarity": 0.0}, **bolt))


def test_the_chain_below_a_save_that_superseded_two_at_once_goes_through_the_newer(
    on_each_store: MemoryService, clock: Any
) -> None:
    """Berlin, then Paris over it; Berlin restored; then Rome supersedes both in one save,
    so its two links are as old as each other. The chain goes down through Paris (the
    newer claim, itself over Berlin), whatever order the store returns the links in."""
    service = on_each_store
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(minutes=1)
    paris = service.save(draft("I moved to Paris")).memory.memory_id
    clock.advance(minutes=1)
    service.rollbacks.restore(NS, berlin)
    clock.advance(minutes=1)
    rome = service.save(draft("I live in Rome"))
    assert set(rome.superseded) == {berlin, paris}
    assert [m.memory_id for m in service.chain(NS, rome.memory.memory_id)] == [rome.memory.memory_id, paris, berlin]


# --- a stay said in a save of its own: the move before it hides nothing ------------------


def test_a_stay_said_in_the_next_save_brings_back_what_the_move_before_it_superseded(
    open_svc: OpenService, service: MemoryService
) -> None:
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    paris = service.save(draft("I moved to Paris."))
    assert paris.superseded == (berlin,)
    stay = service.save(draft("It's only for six months."))
    assert stay.reinstated == (berlin,)
    reason = (
        f"reinstated: {paris.memory.memory_id}, which superseded it, was said to be a stay by {stay.memory.memory_id}"
    )
    assert [v.reason for v in service.history(NS, berlin)] == [
        "created",
        f"superseded by {paris.memory.memory_id}",
        reason,
    ]
    assert berlin in recalled(service, "I live in Berlin")
    service.close()
    reopened = open_svc()
    assert reopened.get(NS, berlin).status is Status.ACTIVE
    # The link stays, and says nothing now: a later walk (a delete of Paris) finds nothing to do.
    assert superseded_by(reopened, berlin) == [paris.memory.memory_id]
    assert reopened.delete(NS, paris.memory.memory_id).reinstated == ()


def test_a_stay_said_in_the_same_batch_brings_back_what_the_move_superseded(service: MemoryService) -> None:
    berlin = service.save(draft("我住在北京")).memory.memory_id
    move, stay = service.save_batch([draft("我搬到上海了"), draft("只住半年。")])
    assert stay.reinstated == (berlin,)
    # Answered once, as the batch stores it: not superseded by the move too.
    assert move.superseded == ()
    assert service.get(NS, berlin).status is Status.ACTIVE
    assert len(service.history(NS, berlin)) == 3


@pytest.mark.parametrize(
    ("between", "stay_fields"),
    [
        ("The weather is nice today.", {}),  # the writer said something else last
        (None, {"actor": "agent-b"}),  # another writer's words
        (None, {"session_id": "s-2"}),  # another session's
        (None, {"conflicts": "off"}),
    ],
)
def test_a_stay_said_after_anything_else_or_by_another_brings_nothing_back(
    service: MemoryService, between: str | None, stay_fields: dict[str, Any]
) -> None:
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    service.save(draft("I moved to Paris."))
    if between is not None:
        service.save(draft(between))
    assert service.save(draft("It's only for six months.", **stay_fields)).reinstated == ()
    assert service.get(NS, berlin).status is Status.SUPERSEDED


def test_a_stay_said_after_a_change_it_does_not_read_as_a_stay_brings_nothing_back(service: MemoryService) -> None:
    blue = service.save(draft("My favourite colour is blue")).memory.memory_id
    service.save(draft("My favourite colour is now green"))
    assert service.save(draft("It's only for six months.")).reinstated == ()
    assert service.get(NS, blue).status is Status.SUPERSEDED


def test_a_stay_said_after_a_second_move_brings_back_only_the_home_that_move_replaced(
    service: MemoryService,
) -> None:
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    paris = service.save(draft("I moved to Paris")).memory.memory_id
    lisbon = service.save(draft("I moved to Lisbon."))
    assert lisbon.superseded == (paris,)
    assert service.save(draft("It's only for six months.")).reinstated == (paris,)
    # Paris is the home again; Berlin stays under it.
    assert service.get(NS, paris).status is Status.ACTIVE
    assert service.get(NS, berlin).status is Status.SUPERSEDED


@pytest.mark.parametrize(
    ("said", "back"),
    [
        ("I'll be back in Berlin by Christmas.", True),  # a return planned: the move was a stay
        ("明年就回去。", True),
        ("I'll be back in five minutes.", False),  # back from a break, not from the move
        ("My sister is visiting for two weeks.", False),  # a stay of someone else's
        ("She's only staying for two weeks.", False),
    ],
)
def test_a_return_planned_in_the_next_save_brings_back_the_home_and_a_break_does_not(
    open_svc: OpenService, service: MemoryService, said: str, back: bool
) -> None:
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    service.save(draft("I moved to Paris."))
    assert service.save(draft(said)).reinstated == ((berlin,) if back else ())
    service.close()
    assert open_svc().get(NS, berlin).status is (Status.ACTIVE if back else Status.SUPERSEDED)


def test_a_home_a_batch_brings_back_and_supersedes_again_is_answered_as_each_save_did(service: MemoryService) -> None:
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    paris, stay, lisbon = service.save_batch(
        [draft("I moved to Paris."), draft("It's only for six months."), draft("I moved to Lisbon.")]
    )
    assert (paris.superseded, stay.reinstated) == ((berlin,), (berlin,))
    assert berlin in lisbon.superseded
    assert service.get(NS, berlin).status is Status.SUPERSEDED


@pytest.mark.parametrize(("later", "back"), [({"minutes": 5}, True), ({"days": 90}, False)])
def test_a_stay_said_long_after_the_move_brings_nothing_back(
    on_each_store: MemoryService, clock: Any, later: dict[str, int], back: bool
) -> None:
    """A stay ("Just for a week.") minutes after "I moved to Paris." is about the move; saved
    months later it is about something else, and Berlin stays superseded. On SQLite and
    on the Bolt store."""
    service = on_each_store
    berlin = service.save(draft("I live in Berlin")).memory.memory_id
    clock.advance(minutes=1)
    service.save(draft("I moved to Paris."))
    clock.advance(**later)
    assert service.save(draft("Just for a week.")).reinstated == ((berlin,) if back else ())
    assert service.get(NS, berlin).status is (Status.ACTIVE if back else Status.SUPERSEDED)


@pytest.mark.parametrize(
    ("home", "moved", "back"),
    [
        ("I live in Berlin.", "I moved to Paris.", "I moved back to Berlin."),
        ("我住在北京。", "我搬到上海了。", "我搬回北京了。"),
    ],
)
def test_a_move_back_supersedes_the_home_moved_to_before(
    open_svc: OpenService, service: MemoryService, home: str, moved: str, back: str
) -> None:
    first, second, third = (service.save(draft(text)) for text in (home, moved, back))
    assert second.superseded == (first.memory.memory_id,)
    assert third.superseded == (second.memory.memory_id,)
    service.close()
    statuses = {m.memory_id: m.status for m in open_svc().list_page([NS], MemoryFilter(statuses=())).items}
    assert statuses[second.memory.memory_id] is Status.SUPERSEDED
    assert statuses[third.memory.memory_id] is Status.ACTIVE


@pytest.mark.parametrize(
    ("job", "joined"),
    [("I work at Acme", "I joined Spotify Premium"), ("我在阿里工作", "我加入了腾讯视频会员")],
)
def test_a_subscription_plan_joined_leaves_the_job_in_recall(service: MemoryService, job: str, joined: str) -> None:
    kept = service.save(draft(job)).memory.memory_id
    assert service.save(draft(joined)).superseded == ()
    assert service.get(NS, kept).status is Status.ACTIVE
    assert kept in recalled(service, job)
