"""The lifecycle endpoints over real HTTP with the real MiniLM model: consolidate, restore,
rollback, re-embedding progress, and exact reinforcement under concurrent recalls."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.api.conftest import LiveServer

pytestmark = pytest.mark.slow


def post(server: LiveServer, path: str, body: Any) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=60)


def save(server: LiveServer, content: str, **fields: Any) -> dict[str, Any]:
    response = post(server, "/v1/memory/save", {"content": content, "namespace": "u1", **fields})
    assert response.status_code == 201, response.text
    memory: dict[str, Any] = response.json()["memory"]
    return memory


def get(server: LiveServer, memory_id: str) -> dict[str, Any]:
    response = httpx.get(f"{server.url}/v1/memory/{memory_id}", params={"namespace": "u1"})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def recall_ids(server: LiveServer, query: str) -> list[str]:
    response = post(server, "/v1/memory/recall", {"query": query, "namespace": "u1", "top_k": 10})
    assert response.status_code == 200, response.text
    return [hit["memory_id"] for hit in response.json()["memories"]]


def test_consolidate_archives_a_faded_task_and_restore_brings_it_back(server: LiveServer) -> None:
    long_ago = (datetime.now(UTC) - timedelta(days=90)).isoformat()
    faded = save(server, "Renew the car insurance", category="task", created_at=long_ago, base_score=0.3)
    kept = save(server, "The user's car is a blue Volvo", category="fact")

    dry = post(server, "/v1/memory/consolidate", {"namespace": "u1", "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert (dry.json()["archived"], dry.json()["dry_run"]) == (1, True)
    assert dry.json()["actions"][0]["status"] == "planned"
    assert get(server, faded["memory_id"])["status"] == "active"

    done = post(server, "/v1/memory/consolidate", {"namespace": "u1"}).json()
    assert (done["archived"], done["purged"], done["merged"], done["scanned"]) == (1, 0, 0, 2)
    assert done["actions"][0]["memory_ids"] == [faded["memory_id"]]
    assert get(server, faded["memory_id"])["status"] == "archived"  # readable by id
    assert faded["memory_id"] not in recall_ids(server, "car insurance renewal")
    assert kept["memory_id"] in recall_ids(server, "car insurance renewal")

    restored = post(server, f"/v1/memory/{faded['memory_id']}/restore", {"namespace": "u1"})
    assert restored.status_code == 200, restored.text
    assert restored.json()["status"] == "active"
    # Its decay restarted, from a new memory's base score, in the store as in the answer.
    stored = get(server, faded["memory_id"])
    assert (stored["base_score"], stored["last_accessed_at"]) == (0.6, restored.json()["last_accessed_at"])
    assert recall_ids(server, "car insurance renewal")[0] == faded["memory_id"]
    assert post(server, "/v1/memory/consolidate", {"namespace": "u1"}).json()["archived"] == 0


def test_a_faded_task_rolled_back_out_of_its_archiving_restarts_its_decay(server: LiveServer) -> None:
    """A rollback to an active version restarts a faded memory's decay as a restore does, in
    the store as in the answer, on each store tier: the next consolidation leaves it active."""
    long_ago = (datetime.now(UTC) - timedelta(days=90)).isoformat()
    faded = save(server, "Renew the car insurance", category="task", created_at=long_ago, base_score=0.3)
    assert post(server, "/v1/memory/consolidate", {"namespace": "u1"}).json()["archived"] == 1

    back = post(server, f"/v1/memory/{faded['memory_id']}/rollback", {"namespace": "u1", "version": 1})
    assert back.status_code == 200, back.text
    stored = get(server, faded["memory_id"])
    assert (stored["status"], stored["base_score"]) == ("active", 0.6)
    assert stored["last_accessed_at"] == back.json()["last_accessed_at"] > faded["last_accessed_at"]
    assert post(server, "/v1/memory/consolidate", {"namespace": "u1"}).json()["archived"] == 0
    assert recall_ids(server, "car insurance renewal")[0] == faded["memory_id"]


def test_a_memory_archived_by_expiry_is_listed_and_restored_without_its_expiry(server: LiveServer) -> None:
    passed = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    code = save(server, "The door code is 4711 this week", expire_at=passed)
    while datetime.now(UTC) <= datetime.fromisoformat(passed):
        time.sleep(0.1)
    assert post(server, "/v1/memory/consolidate", {"namespace": "u1"}).json()["archived"] == 1

    def listed(**params: Any) -> list[str]:
        response = httpx.get(f"{server.url}/v1/memories", params={"namespace": "u1", "status": "archived", **params})
        assert response.status_code == 200, response.text
        return [memory["memory_id"] for memory in response.json()["memories"]]

    assert listed() == []  # past its expiry, as recall leaves it out
    assert listed(include_expired="true") == [code["memory_id"]]

    restored = post(server, f"/v1/memory/{code['memory_id']}/restore", {"namespace": "u1"})
    assert restored.status_code == 200, restored.text
    assert (restored.json()["status"], restored.json()["expire_at"]) == ("active", None)
    history = httpx.get(f"{server.url}/v1/memory/{code['memory_id']}/history", params={"namespace": "u1"}).json()
    assert history["versions"][-1]["reason"].startswith("restored from archived, its expiry ")
    assert recall_ids(server, "door code")[0] == code["memory_id"]
    assert post(server, "/v1/memory/consolidate", {"namespace": "u1"}).json()["archived"] == 0


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/v1/memories", {"namespce": "u1"}),
        ("/v1/memories", {"namespace": "u1", "categroy": "fact"}),
        ("/v1/export", {"namespace": "u1", "version": "true"}),
        ("/v1/admin/reembed", {"verbose": "1"}),  # takes none, as /health
    ],
)
def test_a_query_parameter_the_endpoint_does_not_take_is_refused(
    server: LiveServer, path: str, params: dict[str, str]
) -> None:
    response = httpx.get(server.url + path, params=params)
    assert response.status_code == 422, response.text
    wrong = next(name for name in params if name not in ("namespace",))
    assert f"unknown query parameter(s) {wrong}" in response.json()["detail"]
    assert response.json()["field"] == wrong


@pytest.mark.parametrize("params", [{"x": "1"}, {"_": "1733600000000"}, {"verbose": "1", "cb": "abc"}])
def test_health_answers_a_probe_whatever_query_it_carries(server: LiveServer, params: dict[str, str]) -> None:
    """``GET /health?x=1`` answered 422 (unknown query parameter): a probe or monitor that adds
    a cache-busting parameter saw the service as down. Health takes no parameter and ignores
    any it is given; the other routes keep refusing theirs."""
    plain = httpx.get(f"{server.url}/health")
    response = httpx.get(f"{server.url}/health", params=params)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == plain.json()["status"] == "ok"
    assert response.json().keys() == plain.json().keys()


def test_roll_a_memory_back_and_a_namespace_back_and_undo(server: LiveServer) -> None:
    memory = save(server, "The user lives in Porto")
    before_edit = datetime.now(UTC)
    edited = httpx.patch(
        f"{server.url}/v1/memory/{memory['memory_id']}",
        json={"namespace": "u1", "content": "The user lives in Berlin"},
    )
    assert edited.status_code == 200, edited.text

    back = post(server, f"/v1/memory/{memory['memory_id']}/rollback", {"namespace": "u1", "version": 1})
    assert back.status_code == 200, back.text
    assert (back.json()["content"], back.json()["version"]) == ("The user lives in Porto", 3)
    history = httpx.get(f"{server.url}/v1/memory/{memory['memory_id']}/history", params={"namespace": "u1"}).json()
    assert [v["reason"] for v in history["versions"]] == ["created", "updated", "rolled back to version 1"]

    post(server, f"/v1/memory/{memory['memory_id']}/rollback", {"namespace": "u1", "version": 2})
    newer = save(server, "The user adopted a dog")
    before_rollback = datetime.now(UTC)
    rolled = post(server, "/v1/memory/rollback", {"namespace": "u1", "as_of": before_edit.isoformat()})
    assert rolled.status_code == 200, rolled.text
    assert (rolled.json()["restored"], rolled.json()["deleted"]) == (1, 1)
    assert rolled.json()["deleted_ids"] == [newer["memory_id"]]
    assert get(server, memory["memory_id"])["content"] == "The user lives in Porto"
    assert httpx.get(f"{server.url}/v1/memory/{newer['memory_id']}", params={"namespace": "u1"}).status_code == 404

    undo = post(server, "/v1/memory/rollback", {"namespace": "u1", "as_of": before_rollback.isoformat()})
    assert (undo.json()["restored"], undo.json()["deleted"]) == (2, 0)
    assert get(server, memory["memory_id"])["content"] == "The user lives in Berlin"
    assert get(server, newer["memory_id"])["status"] == "active"


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/memory/rollback", {"namespace": "u1", "as_of": "2025-01-01T00:00:00"}, 422),  # no timezone
        ("/v1/memory/rollback", {"namespace": "u1", "as_of": "2999-01-01T00:00:00Z"}, 422),  # future
        ("/v1/memory/rollback", {"namespace": "u1"}, 422),
        ("/v1/memory/consolidate", {"namespace": "bad namespace!"}, 422),
        ("/v1/memory/consolidate", {"namespace": "u1", "dryrun": True}, 422),  # unknown field
        ("/v1/memory/{id}/rollback", {"namespace": "u1", "version": 0}, 422),
        ("/v1/memory/{id}/rollback", {"namespace": "u1", "version": 7}, 422),
        ("/v1/memory/{missing}/rollback", {"namespace": "u1", "version": 1}, 404),
        ("/v1/memory/{id}/rollback", {"namespace": "u2", "version": 1}, 404),
        ("/v1/memory/{missing}/restore", {"namespace": "u1"}, 404),
    ],
)
def test_bad_lifecycle_requests_are_refused_and_change_nothing(
    server: LiveServer, path: str, body: dict[str, Any], status: int
) -> None:
    memory = save(server, "The user likes jazz")
    url = path.format(id=memory["memory_id"], missing="00000000-0000-0000-0000-000000000000")
    response = post(server, url, body)
    assert response.status_code == status, response.text
    assert response.json()["detail"]
    assert get(server, memory["memory_id"]) == memory


def test_reembed_progress_is_reported(server: LiveServer) -> None:
    save(server, "The user likes jazz")
    progress = httpx.get(server.url + "/v1/admin/reembed").json()
    assert (progress["state"], progress["remaining"], progress["legacy_indexed"]) == ("idle", 0, 0)
    assert progress["model"] == server.service.embedder.name
    assert httpx.get(server.url + "/health").json()["reembed"]["remaining"] == 0


def test_concurrent_http_recalls_reinforce_exactly(server: LiveServer) -> None:
    target = save(server, "The wifi password is written on the fridge")
    save(server, "The spare light bulbs are in the garage")

    def recall(_: int) -> str:
        hits = post(server, "/v1/memory/recall", {"query": "wifi password", "namespace": "u1", "top_k": 1})
        assert hits.status_code == 200
        memory_id: str = hits.json()["memories"][0]["memory_id"]
        return memory_id

    with ThreadPoolExecutor(max_workers=12) as pool:
        tops = list(pool.map(recall, range(60)))
    assert tops == [target["memory_id"]] * 60
    server.service.flush()
    assert get(server, target["memory_id"])["access_count"] == 60


def test_restored_sources_rejoin_their_merged_memory_on_every_store(server: LiveServer) -> None:
    """Restored sources that still merge into their merged memory, untouched since, rejoin it
    on every store: its entities (in the merge's order, not sorted) and its expiry (to the
    microsecond) read back from the store as a merge of them makes them."""
    expiry = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=123456).isoformat()
    sources = [
        save(server, text, entities=entities, expire_at=expiry)
        for text, entities in (
            (
                "Zoe and Alice like to drink hot green tea with honey in the garden every sunny morning",
                ["Zoe", "Alice"],
            ),
            (
                "Zoe and Alice like to drink hot green tea with honey and read books in the garden every sunny morning",
                ["alice", "Tea"],
            ),
        )
    ]
    first = post(server, "/v1/memory/consolidate", {"namespace": "u1"}).json()
    assert (first["merged"], first["skipped"]) == (1, 0), first
    for source in sources:
        restored = post(server, f"/v1/memory/{source['memory_id']}/restore", {"namespace": "u1"})
        assert restored.status_code == 200, restored.text
    dry = post(server, "/v1/memory/consolidate", {"namespace": "u1", "dry_run": True}).json()
    again = post(server, "/v1/memory/consolidate", {"namespace": "u1"}).json()
    assert (again["merged"], again["skipped"]) == (1, 0), again
    assert [a["status"] for a in dry["actions"]] == ["planned"]
    assert {get(server, s["memory_id"])["status"] for s in sources} == {"superseded"}
    merged = get(server, first["actions"][0]["merged"]["memory_id"])
    assert (merged["status"], merged["entities"]) == ("active", ["Zoe", "Alice", "Tea"])
    assert datetime.fromisoformat(merged["expire_at"]) == datetime.fromisoformat(expiry)
