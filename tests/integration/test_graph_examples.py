"""The example queries of graph_schema/README.md run, as written, on a graph written by Neo4jStore.

The queries are parsed out of the README, so what a user pastes into Neo4j
Browser is exactly what runs here (on ArcadeDB's Bolt endpoint, and on a real
Neo4j when one is reachable).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import neo4j
import numpy as np
import pytest

from engine.adapters.neo4j_store import Neo4jStore
from engine.ports import Edge
from engine.records import Memory, Source, Status, new_memory_id, utcnow
from tests.bolt import BoltTarget

README = Path(__file__).resolve().parents[2] / "graph_schema" / "README.md"
_EXAMPLE = re.compile(r"^### (\d+)\. (.+?)\n+```cypher\n(.*?)```", re.MULTILINE | re.DOTALL)
NS = "user:42"


def examples() -> list[tuple[int, str, str]]:
    return [(int(n), title, query.strip()) for n, title, query in _EXAMPLE.findall(README.read_text(encoding="utf-8"))]


def test_the_readme_has_at_least_ten_numbered_examples() -> None:
    found = examples()
    assert len(found) >= 10
    assert [n for n, _, _ in found] == list(range(1, len(found) + 1))


@pytest.fixture(params=["arcadedb", "neo4j"])
def target(request: pytest.FixtureRequest) -> BoltTarget:
    bolt: BoltTarget = request.getfixturevalue("arcadedb" if request.param == "arcadedb" else "neo4j_server")
    return bolt


def _memory(content: str, *, days_ago: float, **fields: Any) -> Memory:
    at = utcnow() - timedelta(days=days_ago)
    values: dict[str, Any] = {
        "memory_id": new_memory_id(),
        "namespace": NS,
        "content": content,
        "category": "fact",
        "base_score": 0.6,
        "importance": 0.5,
        "source": Source.USER_INPUT,
        "created_at": at,
        "updated_at": at,
        "last_accessed_at": at,
        "embedding_model": "example-model",
        "embedding_version": "1",
    }
    values.update(fields)
    return Memory(**values)


def _write_sample_graph(store: Neo4jStore) -> dict[str, Memory]:
    m = {
        "berlin": _memory("I live in Berlin", days_ago=400, key="home_city", entities=("Berlin",)),
        "porto": _memory("I moved to Porto", days_ago=200, key="home_city", entities=("Porto",)),
        "lisbon": _memory(
            "I live in Lisbon now", days_ago=30, key="home_city", entities=("Lisbon", "Portugal"), category="state"
        ),
        "likes": _memory("I like coffee", days_ago=50, entities=("coffee",), category="preference"),
        "quit": _memory("I quit coffee", days_ago=5, entities=("coffee",), category="preference"),
        "diet": _memory("I am vegetarian", days_ago=90, key="diet", entities=("food",), category="preference"),
        "flight": _memory(
            "Booked a flight to Lisbon for May 3",
            days_ago=2,
            actor="planner-agent",
            session_id="trip-2025-05",
            entities=("Lisbon", "flight"),
            category="event",
        ),
        "hotel": _memory(
            "Hotel in Alfama, near the castle",
            days_ago=1.9,
            actor="planner-agent",
            session_id="trip-2025-05",
            entities=("Lisbon", "Alfama"),
            category="event",
        ),
    }
    store.insert(list(m.values()), [np.ones(4, dtype=np.float32) / 2 for _ in m], changed_by="sample")
    for name in ("berlin", "porto"):
        old = m[name]
        store.update(
            old.evolve(status=Status.SUPERSEDED, version=2, updated_at=utcnow()),
            None,
            changed_by="conflicts",
            reason="superseded",
        )
    diet = m["diet"]
    store.update(
        diet.evolve(content="I am vegan", version=2, updated_at=utcnow()),
        None,
        changed_by="agent:nutrition",
        reason="the user said so",
    )
    now = utcnow()
    store.add_edges(
        [
            Edge(NS, m["lisbon"].memory_id, m["porto"].memory_id, "SUPERSEDES", now),
            Edge(NS, m["porto"].memory_id, m["berlin"].memory_id, "SUPERSEDES", now),
            Edge(NS, m["quit"].memory_id, m["likes"].memory_id, "CONTRADICTS", now),
            Edge(NS, m["flight"].memory_id, m["hotel"].memory_id, "NEXT", now),
        ]
    )
    store.reinforce([(m["lisbon"].memory_id, 0.1, now)], lambda memory, bonus, at: min(1.0, memory.base_score + bonus))
    return m


@pytest.fixture
def graph(target: BoltTarget) -> Iterator[tuple[neo4j.Session, dict[str, Memory]]]:
    database = target.new_database()
    store = target.store(database)
    store.open()
    try:
        written = _write_sample_graph(store)
        with (
            neo4j.GraphDatabase.driver(target.uri, auth=(target.user, target.password)) as driver,
            driver.session(database=database) as session,
        ):
            yield session, written
    finally:
        store.close()


@pytest.mark.parametrize(("number", "title", "query"), examples(), ids=[f"{n}" for n, _, _ in examples()])
def test_example_query_runs_and_finds_the_sample(
    graph: tuple[neo4j.Session, dict[str, Memory]], number: int, title: str, query: str
) -> None:
    session, _ = graph
    rows = session.run(query).data()  # the README's text, as pasted
    assert rows, f"example {number} ({title}) found nothing"


def test_examples_give_the_expected_answers(graph: tuple[neo4j.Session, dict[str, Memory]]) -> None:
    session, written = graph
    by_number = {n: query for n, _, query in examples()}
    (chain,) = session.run(by_number[4]).data()
    assert chain["chain"] == ["I live in Lisbon now", "I moved to Porto", "I live in Berlin"]
    entities = {row["entity"]: row["memories"] for row in session.run(by_number[1]).data()}
    assert entities["Lisbon"] == 3
    week = {row["content"] for row in session.run(by_number[6]).data()}
    assert week == {written["flight"].content, written["hotel"].content}
    versions = session.run(by_number[7]).data()
    assert [(v["version"], v["changed_by"]) for v in versions] == [(1, "sample"), (2, "agent:nutrition")]
    related = {row["related"] for row in session.run(by_number[10]).data()}
    assert related == {written["flight"].content, written["hotel"].content}
