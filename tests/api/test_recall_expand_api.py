"""Recall with expand=graph: each hit with its entities and typed links, over real HTTP."""

from __future__ import annotations

import httpx
import pytest

from api.client import TwinmemClient
from tests.api.conftest import LiveServer

pytestmark = pytest.mark.slow


def test_expand_graph_returns_entities_and_links(server: LiveServer, client: TwinmemClient) -> None:
    old = client.save("The user lives in Berlin", category="fact")
    new = client.save("The user moved to Lisbon", category="fact")
    assert new.superseded == (old.memory_id,)
    body = {"query": "Where does the user live?", "top_k": 3, "expand": ["graph"], "explain": True}
    hits = httpx.post(server.url + "/v1/memory/recall", json=body, timeout=60).json()["memories"]
    top = hits[0]
    assert top["memory_id"] == new.memory_id
    assert "Lisbon" in top["graph"]["entities"]
    assert {"kind": "SUPERSEDES", "direction": "out", "memory_id": old.memory_id, "status": "superseded"} in top[
        "graph"
    ]["edges"]
    assert set(top["explanation"]["signals"]) == {"semantic", "lexical", "graph", "decay", "context"}
    plain = httpx.post(server.url + "/v1/memory/recall", json={"query": "Where does the user live?"}, timeout=60)
    assert "graph" not in plain.json()["memories"][0]


def test_expand_takes_only_known_parts(server: LiveServer) -> None:
    response = httpx.post(server.url + "/v1/memory/recall", json={"query": "x", "expand": ["everything"]}, timeout=60)
    assert response.status_code == 422 and "expand" in response.text
