"""The graph channel of recall: entities named in the query, and one hop from the strongest candidates."""

from __future__ import annotations

from pathlib import Path

from engine.config import load_config
from engine.records import MemoryDraft
from engine.scoring import GRAPH_NEIGHBOUR, GRAPH_QUERY_ENTITY
from tests.integration.conftest import OpenService

NS = "user-1"


def _graph_only(data_dir: Path) -> object:
    return load_config(env={}, data_dir=data_dir, fusion={"semantic": 0.0, "lexical": 0.0, "graph": 1.0, "decay": 0.0})


def test_memories_naming_a_query_entity_join_and_score_one(open_svc: OpenService, data_dir: Path) -> None:
    service = open_svc(config=_graph_only(data_dir))
    alice = service.save(MemoryDraft("Alice collects vintage postcards", namespace=NS, entities=("Alice",))).memory
    other = service.save(MemoryDraft("The boiler was serviced in May", namespace=NS, entities=("boiler",))).memory
    result = service.recall("What does Alice enjoy?", namespaces=[NS], top_k=2, reinforce=False)
    by_id = {hit.memory.memory_id: hit for hit in result.hits}
    assert result.hits[0].memory.memory_id == alice.memory_id
    assert by_id[alice.memory_id].breakdown.graph.value == GRAPH_QUERY_ENTITY
    assert other.memory_id not in by_id or by_id[other.memory_id].breakdown.graph.value == 0.0


def test_neighbours_of_strong_candidates_join_through_a_shared_entity(open_svc: OpenService, data_dir: Path) -> None:
    service = open_svc(config=_graph_only(data_dir))
    seed = service.save(
        MemoryDraft("the wifi password is taped under the router", namespace=NS, entities=("router",))
    ).memory
    neighbour = service.save(
        MemoryDraft("firmware updates arrive every quarter", namespace=NS, entities=("router",))
    ).memory
    service.save(MemoryDraft("the cat sleeps on the sofa", namespace=NS, entities=("cat",)))
    for place in ("fridge", "hallway", "office", "garage"):
        service.save(MemoryDraft(f"a wifi password note hangs in the {place}", namespace=NS, entities=(place,)))
    hits = service.recall("wifi password", namespaces=[NS], top_k=3, reinforce=False).hits
    graph = {hit.memory.memory_id: hit.breakdown.graph.value for hit in hits}
    # The seeds are the five closest by meaning; the router seed's entity brings the
    # neighbour in with half weight, while no seed gets credit for its own entities.
    assert hits[0].memory.memory_id == neighbour.memory_id
    assert graph[neighbour.memory_id] == GRAPH_NEIGHBOUR
    assert graph.get(seed.memory_id, 0.0) == 0.0


def test_the_graph_channel_respects_namespace_and_filter(open_svc: OpenService, data_dir: Path) -> None:
    service = open_svc(config=_graph_only(data_dir))
    service.save(MemoryDraft("Alice moved to Porto", namespace="user-2", entities=("Alice",)))
    mine = service.save(MemoryDraft("Alice likes tea", namespace=NS, entities=("Alice",), category="preference"))
    hits = service.recall("Tell me about Alice", namespaces=[NS], top_k=5, reinforce=False).hits
    assert [hit.memory.memory_id for hit in hits] == [mine.memory.memory_id]
