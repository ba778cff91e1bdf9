"""A query read in the other grammatical person too, with the default model (USE): what
the user said in the first person is found by a question about "the user", and an
agent's notes about "the user" by a question in the first person."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from engine.adapters import open_service
from engine.adapters.embedders import load_use
from engine.config import load_config
from engine.ports import Embedder
from engine.records import MemoryDraft
from engine.service import MemoryService

pytestmark = pytest.mark.slow

SAID = [
    "I moved to Berlin last week",
    "I usually drink green tea in the morning",
    "My sister Anna is a nurse",
    "I started learning the cello in March",
    "The train to Hamburg was late again",
    "It rained all weekend",
    "The new phone has a great camera",
    "Dinner with Tom was fun",
]
OpenWith = Callable[..., MemoryService]
NOTES = ["The user asked about the weather in Paris", "Remind the user to water the plants"]


@pytest.fixture(scope="module")
def use() -> Embedder:
    return load_use()


@pytest.fixture
def open_with(tmp_path_factory: pytest.TempPathFactory, use: Embedder) -> Iterator[OpenWith]:
    opened: list[MemoryService] = []

    def _open(memories: list[str], *, other_person: bool = True) -> MemoryService:
        data = tmp_path_factory.mktemp("data")
        service = open_service(load_config(env={}, data_dir=data, recall={"other_person": other_person}), embedder=use)
        opened.append(service)
        service.save_batch([MemoryDraft(content=text) for text in memories])
        return service

    yield _open
    for service in opened:
        service.close()


def _ranked(service: MemoryService, query: str) -> list[str]:
    result = service.recall(query, namespaces=["default"], top_k=8, reinforce=False)
    return [hit.memory.content for hit in result.hits]


def test_a_question_about_the_user_finds_what_they_said_in_the_first_person(open_with: OpenWith) -> None:
    service = open_with(SAID)
    result = service.recall("Where does the user live now?", namespaces=["default"], top_k=8, reinforce=False)
    assert result.phrasing == "Where do I live now?"
    assert result.hits[0].memory.content == "I moved to Berlin last week"
    # As written only, the model reads "the user" as other words than "I": it ranks lower.
    written = open_with(SAID, other_person=False)
    assert _ranked(written, "Where does the user live now?").index("I moved to Berlin last week") > 0


def test_a_question_in_the_first_person_finds_notes_about_the_user(open_with: OpenWith) -> None:
    notes = ["The user moved to Berlin last week", "The user's sister Anna is a nurse", *SAID[3:]]
    service = open_with(notes)
    result = service.recall("Where do I live now?", namespaces=["default"], top_k=8, reinforce=False)
    assert result.phrasing == "Where does the user live now?"
    assert result.hits[0].memory.content == "The user moved to Berlin last week"


def test_a_first_person_question_is_read_as_is_where_no_memory_says_user(open_with: OpenWith) -> None:
    service = open_with(SAID)
    assert service.recall("Where do I live now?", namespaces=["default"], reinforce=False).phrasing is None
    service.save(MemoryDraft(content=NOTES[0]))
    assert service.recall("Where do I live now?", namespaces=["default"], reinforce=False).phrasing == (
        "Where does the user live now?"
    )


def test_a_note_matching_only_the_word_user_gets_no_lexical_credit(open_with: OpenWith) -> None:
    def lexical(service: MemoryService) -> float:
        hits = service.recall("Where does the user live?", namespaces=["default"], top_k=10, reinforce=False).hits
        (note,) = [hit for hit in hits if hit.memory.content == NOTES[0]]
        return note.breakdown.lexical.value

    assert lexical(open_with([*SAID, *NOTES])) == 0.0
    assert lexical(open_with([*SAID, *NOTES], other_person=False)) > 0.0


def test_off_reads_the_query_as_written(open_with: OpenWith) -> None:
    service = open_with([*SAID, *NOTES], other_person=False)
    assert service.recall("Where does the user live?", namespaces=["default"], reinforce=False).phrasing is None
