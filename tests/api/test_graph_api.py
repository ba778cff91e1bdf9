"""Conflicts on write, entities and the graph endpoints, over real HTTP with real models."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from engine.ports import Embedder
from tests.api.conftest import LiveServer, recall, save
from twinmem_client import TwinmemClient

pytestmark = pytest.mark.slow


def test_a_replacing_save_supersedes_the_older_memory_and_keeps_its_history(http: httpx.Client) -> None:
    old = save(http, "I like coffee", category="preference")
    new = save(http, "I quit coffee", category="preference")
    assert new["superseded"] == [old["memory_id"]]
    assert new["contradicted"] == []
    assert old["superseded"] == old["contradicted"] == []

    assert [m["memory_id"] for m in recall(http, "coffee")] == [new["memory_id"]]
    both = {m["memory_id"]: m["status"] for m in recall(http, "coffee", include_superseded=True)}
    assert both == {new["memory_id"]: "active", old["memory_id"]: "superseded"}
    via_filter = recall(http, "coffee", filter={"include_superseded": True})
    assert {m["memory_id"] for m in via_filter} == set(both)

    history = http.get(f"/v1/memory/{old['memory_id']}/history").json()["versions"]
    assert [(v["version"], v["reason"], v["memory"]["status"]) for v in history] == [
        (1, "created", "active"),
        (2, f"superseded by {new['memory_id']}", "superseded"),
    ]


def test_an_unrelated_save_supersedes_nothing(http: httpx.Client) -> None:
    save(http, "I like coffee")
    tea = save(http, "I like tea")
    assert tea["superseded"] == tea["contradicted"] == []
    assert len(recall(http, "what do I like to drink")) == 2


def test_the_same_explicit_key_supersedes_whatever_the_wording(http: httpx.Client) -> None:
    old = save(http, "Standup is at 9:30", key="meeting.standup")
    other = save(http, "Retro is on Fridays", key="meeting.retro")
    new = save(http, "Standup moved to ten", key="meeting.standup")
    assert new["superseded"] == [old["memory_id"]]
    assert http.get(f"/v1/memory/{other['memory_id']}").json()["status"] == "active"


def test_a_clash_without_a_winner_is_flagged_on_both_hits(http: httpx.Client) -> None:
    first = save(http, "User is allergic to peanuts")
    second = save(http, "User is not allergic to peanuts")
    assert second["contradicted"] == [first["memory_id"]]
    assert second["superseded"] == []
    flags = {m["memory_id"]: m["contradicts"] for m in recall(http, "peanut allergy")}
    assert flags == {first["memory_id"]: [second["memory_id"]], second["memory_id"]: [first["memory_id"]]}


def test_neighbourhood_and_chain_follow_supersedes(http: httpx.Client) -> None:
    berlin = save(http, "I live in Berlin")
    lisbon = save(http, "I moved to Lisbon")
    porto = save(http, "I moved to Porto")
    assert lisbon["superseded"] == [berlin["memory_id"]]
    assert porto["superseded"] == [lisbon["memory_id"]]

    graph = http.get(f"/v1/memory/{lisbon['memory_id']}/graph").json()
    assert graph["memory"]["memory_id"] == lisbon["memory_id"]
    assert graph["entities"] == ["Lisbon"]
    assert [(e["kind"], e["memory"]["memory_id"], e["memory"]["status"]) for e in graph["edges_out"]] == [
        ("SUPERSEDES", berlin["memory_id"], "superseded")
    ]
    assert [(e["kind"], e["memory"]["content"]) for e in graph["edges_in"]] == [("SUPERSEDES", "I moved to Porto")]

    for start in (berlin, lisbon, porto):
        chain = http.get(f"/v1/memory/{start['memory_id']}/chain").json()["chain"]
        assert [m["memory_id"] for m in chain] == [porto["memory_id"], lisbon["memory_id"], berlin["memory_id"]]


def test_entity_memories_link_names_by_key(http: httpx.Client) -> None:
    a = save(http, "Alice works at Acme Corp")
    b = save(http, "Acme Corp ships on Fridays", entities=["ACME corp"])
    save(http, "Bob works at Globex")
    found = http.get("/v1/entities/acme corp/memories").json()
    assert [m["memory_id"] for m in found["memories"]] == [b["memory_id"], a["memory_id"]]
    assert http.get("/v1/entities/Initech/memories").json()["memories"] == []
    elsewhere = http.get("/v1/entities/acme corp/memories", params={"namespace": "someone-else"}).json()
    assert elsewhere["memories"] == []


def test_entity_memories_by_a_query_parameter_reach_a_name_holding_a_slash(http: httpx.Client) -> None:
    tcp = save(http, "The router speaks TCP/IP", entities=["TCP/IP"])
    save(http, "The printer speaks IPP", entities=["IPP"])
    found = http.get("/v1/entities/memories", params={"name": "TCP/IP"}).json()
    assert found["entity"] == "TCP/IP"
    assert [m["memory_id"] for m in found["memories"]] == [tcp["memory_id"]]
    # The path form cannot carry the slash, encoded or not: the router decodes it first.
    assert http.get("/v1/entities/TCP%2FIP/memories").status_code == 404
    same = http.get("/v1/entities/memories", params={"name": "IPP"}).json()["memories"]
    assert [m["memory_id"] for m in same] == [
        m["memory_id"] for m in http.get("/v1/entities/IPP/memories").json()["memories"]
    ]
    assert http.get("/v1/entities/memories").status_code == 400  # no name
    assert http.get("/v1/entities/memories", params={"name": "x" * 201}).status_code == 422
    assert http.get("/v1/entities/memories", params={"name": "IPP", "namespce": "x"}).status_code == 422
    with TwinmemClient(str(http.base_url).rstrip("/")) as client:  # the client asks the query form
        assert [m.memory_id for m in client.entity_memories("TCP/IP")] == [tcp["memory_id"]]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/memory/00000000-0000-0000-0000-000000000000/graph", 404),
        ("/v1/memory/00000000-0000-0000-0000-000000000000/chain", 404),
        ("/v1/entities/" + "x" * 201 + "/memories", 422),
        ("/v1/entities/coffee/memories?namespace=not%20valid", 422),
        ("/v1/entities/coffee/memories?limit=0", 422),
    ],
)
def test_bad_graph_requests_are_refused_with_a_reason(http: httpx.Client, path: str, status: int) -> None:
    response = http.get(path)
    assert response.status_code == status, response.text
    assert response.json()["detail"]


def test_chinese_conflicts_and_bilingual_entities_with_e5(
    server_factory: Callable[..., LiveServer], e5: Embedder
) -> None:
    live = server_factory(e5)
    with httpx.Client(base_url=live.url, timeout=60) as client:
        blue = save(client, "我喜欢蓝色", category="preference")
        save(client, "用户养了一只猫")
        black = save(client, "把主题改成黑色", category="preference")
        assert black["superseded"] == [blue["memory_id"]]
        coffee = save(client, "我喜欢喝咖啡")
        quit_ = save(client, "我最近戒咖啡了")
        assert quit_["superseded"] == [coffee["memory_id"]]

        hits = recall(client, "用户喜欢什么颜色")
        assert blue["memory_id"] not in {m["memory_id"] for m in hits}
        # "Blue" and "蓝色" share a key, so the English name finds the Chinese memory.
        by_entity = client.get("/v1/entities/Blue/memories", params={"include_superseded": "true"}).json()
        assert [m["memory_id"] for m in by_entity["memories"]] == [blue["memory_id"]]
        assert client.get("/v1/entities/Blue/memories").json()["memories"] == []
