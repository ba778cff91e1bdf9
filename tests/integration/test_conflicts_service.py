"""Entities and conflicts on write through open_service, on a real SQLite file."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine import conflicts
from engine.records import MemoryDraft, MemoryFilter, MemoryPatch, Status
from engine.service import MemoryService
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
    assert service.save(draft("I joined Globex")).superseded == (lines.memory_id,)


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
