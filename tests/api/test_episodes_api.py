"""Over real HTTP, on every store (SQLite, ArcadeDB's Bolt endpoint, a real Neo4j when
one answers): memories saved with a session id are linked NEXT in order (single saves,
batches, repeats), recall's explain shows the context channel's boost, and a query that
names a time shows its window and each hit's time signal."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from engine.ports import Embedder
from tests.api.conftest import LiveServer, save

pytestmark = pytest.mark.slow

NS = "user:5"


def next_out(http: httpx.Client, memory_id: str) -> list[str]:
    response = http.get(f"/v1/memory/{memory_id}/graph", params={"namespace": NS})
    assert response.status_code == 200, response.text
    return [edge["dst"] for edge in response.json()["edges_out"] if edge["kind"] == "NEXT"]


def recall(http: httpx.Client, query: str, **fields: Any) -> dict[str, Any]:
    response = http.post("/v1/memory/recall", json={"query": query, "namespace": NS, "explain": True, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_saves_and_batches_of_a_session_are_linked_in_order(http: httpx.Client) -> None:
    first = save(http, "We booked a cabin by the lake", namespace=NS, session_id="trip")
    batch = http.post(
        "/v1/memory/save_batch",
        json={
            "namespace": NS,
            "memories": [
                {"content": "The cabin has a wood stove", "session_id": "trip"},
                {"content": "Buy milk", "session_id": "errands"},
                {"content": "We will rent a canoe on Saturday", "session_id": "trip"},
                {"content": "The cabin has a wood stove", "session_id": "trip"},  # a repeat in the batch
            ],
        },
    )
    assert batch.status_code == 200, batch.text
    results = batch.json()["results"]
    stove, milk, canoe, repeat = (r["memory_id"] for r in results)
    assert repeat == stove and not results[3]["created"]
    assert [r["follows"] for r in results[:3]] == [first["memory_id"], None, stove]
    again = http.post("/v1/memory/save", json={"content": "we booked a cabin by the lake", "namespace": NS})
    assert again.status_code == 200 and again.json()["follows"] is None  # reinforced, no new link
    last = save(http, "The lake was too cold to swim", namespace=NS, session_id="trip")
    assert last["follows"] == canoe
    assert next_out(http, first["memory_id"]) == [stove]
    assert next_out(http, stove) == [canoe]
    assert next_out(http, canoe) == [last["memory_id"]]
    assert next_out(http, milk) == [] and next_out(http, last["memory_id"]) == []


@pytest.fixture
def with_context(
    server_factory: Callable[..., LiveServer], minilm: Embedder, store_config: dict[str, Any]
) -> LiveServer:
    return server_factory(minilm, fusion={"context": 0.1}, **store_config)  # the context channel is off by default


def test_explain_shows_the_context_boost_and_the_time_window(with_context: LiveServer) -> None:
    with httpx.Client(base_url=with_context.url, timeout=60) as http:
        _context_boost_and_time_window(with_context, http)


def _context_boost_and_time_window(server: LiveServer, http: httpx.Client) -> None:
    now = server.service.now()
    yesterday = (now - timedelta(days=1)).astimezone(UTC)
    older = (now - timedelta(days=40)).astimezone(UTC)
    fields = {"namespace": NS, "session_id": "dinner"}
    before = save(http, "We sat down at eight", created_at=yesterday.isoformat(), **fields)
    hit = save(http, "The risotto with saffron was excellent", created_at=yesterday.isoformat(), **fields)
    save(http, "A saffron risotto recipe from a magazine", created_at=older.isoformat(), namespace=NS)
    weights = server.service.config.fusion
    assert weights.context == 0.1 and weights.time > 0  # time is on by default

    body = recall(http, "saffron risotto")
    assert body["time_windows"] == []
    by_id = {m["memory_id"]: m for m in body["memories"]}
    assert before["memory_id"] in by_id
    explained = by_id[before["memory_id"]]["explanation"]
    assert explained["next_to"] == hit["memory_id"]
    assert explained["signals"]["context"]["weight"] == weights.context
    assert 0 < explained["signals"]["context"]["value"] <= 1
    assert all("time" not in m["explanation"]["signals"] for m in body["memories"])

    dated = recall(http, "the saffron risotto we had yesterday")
    (window,) = dated["time_windows"]
    day = datetime(yesterday.year, yesterday.month, yesterday.day, tzinfo=UTC)
    assert window["text"].startswith("yesterday") and window["parser"] == "dateparser"
    assert (window["start"], window["end"]) == (
        day.isoformat().replace("+00:00", "Z"),
        (day + timedelta(days=1)).isoformat().replace("+00:00", "Z"),
    )
    top = dated["memories"][0]
    assert top["memory_id"] == hit["memory_id"]
    assert top["explanation"]["signals"]["time"] == {"value": 1.0, "weight": weights.time, "contribution": weights.time}
    chinese = recall(http, "昨天的 saffron risotto")
    assert [w["parser"] for w in chinese["time_windows"]] == ["jionlp"]
    plain = http.post("/v1/memory/recall", json={"query": "saffron risotto yesterday", "namespace": NS})
    assert "time_windows" not in plain.json()  # explain only
