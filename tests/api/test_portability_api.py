"""Export and import over real HTTP, with the real MiniLM model and real SQLite files."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import jsonschema
import pytest

from api import auth
from api.client import TwinmemClient
from engine.portability import SCHEMA_PATH
from engine.ports import Embedder
from tests.api.conftest import LiveServer

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[1] / "data" / "importers"


def export(server: LiveServer, namespace: str, **params: str) -> bytes:
    with httpx.stream("GET", server.url + "/v1/export", params={"namespace": namespace, **params}, timeout=60) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("application/x-ndjson")
        return b"".join(r.iter_bytes())


def upload(server: LiveServer, data: bytes, **params: str) -> httpx.Response:
    def body() -> Iterator[bytes]:  # sent chunked: a streamed upload
        for start in range(0, len(data), 4096):
            yield data[start : start + 4096]

    return httpx.post(server.url + "/v1/import", params=params, content=body(), timeout=120)


def test_export_then_import_into_another_deployment(
    server_factory: Callable[..., LiveServer], minilm: Embedder
) -> None:
    source, target = server_factory(minilm, "source"), server_factory(minilm, "target")
    with TwinmemClient(source.url, namespace="user:42") as client:
        blue = client.save("User's favourite colour is blue", category="preference").memory_id
        client.save("The user is allergic to peanuts", category="fact")
        client.update(blue, content="User's favourite colour is dark blue", reason="more precise")
    data = export(source, "user:42", versions="true", vectors="true")
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    items = [json.loads(line) for line in data.splitlines()]
    for item in items:
        validator.validate(item)
    assert items[0]["embedding"]["model"] == minilm.name and items[-1]["counts"]["memories"] == 2

    response = upload(target, data)
    assert response.status_code == 200, response.text
    report = response.json()
    assert (report["inserted"], report["vectors_kept"], report["reembedded"]) == (2, 2, 0)
    assert export(target, "user:42", versions="true", vectors="true").splitlines()[1:] == data.splitlines()[1:]
    again = upload(target, data).json()
    assert (again["inserted"], again["unchanged"]) == (0, 2)
    with TwinmemClient(target.url, namespace="user:42") as client:
        assert client.recall("what colour should the theme be?", top_k=1)[0].memory_id == blue
        assert [v.reason for v in client.history(blue)] == ["created", "more precise"]


def test_a_truncated_upload_is_refused_with_a_report_and_stores_nothing(
    server: LiveServer, client: TwinmemClient
) -> None:
    client.save("A memory to export", category="fact")
    data = export(server, "default", vectors="true")
    response = upload(server, data[: len(data) // 2], namespace="copy")
    assert response.status_code == 422
    body = response.json()
    assert body["detail"].endswith("nothing was imported")
    assert any("truncated" in error["error"] for error in body["report"]["errors"])
    listed = httpx.get(server.url + "/v1/memories", params={"namespace": "copy"}).json()
    assert listed["memories"] == []


def test_mem0_data_through_the_api(server: LiveServer) -> None:
    response = upload(server, (DATA / "mem0_get_all.json").read_bytes(), namespace="alex", format="mem0")
    assert response.status_code == 200, response.text
    assert response.json()["inserted"] == 3
    with TwinmemClient(server.url, namespace="alex") as client:
        assert client.recall("what food can they not eat?", top_k=1)[0].content.startswith("Is a vegetarian")


@pytest.mark.parametrize(
    ("method", "path", "params", "message"),
    [
        ("GET", "/v1/export", {"namespace": "no spaces"}, "namespace"),
        ("POST", "/v1/import", {"format": "word"}, "unknown format 'word'"),
        ("POST", "/v1/import", {"format": "csv", "map": "colour=text"}, "cannot map to 'colour'"),
        ("POST", "/v1/import", {"namespace": "bad namespace!"}, "namespace"),
    ],
)
def test_bad_requests_are_4xx_with_a_message(
    server: LiveServer, method: str, path: str, params: dict[str, str], message: str
) -> None:
    response = httpx.request(method, server.url + path, params=params, content=b"text\nhello\n")
    assert response.status_code == 422, response.text
    assert message in response.json()["detail"]


def test_a_newer_export_brings_forward_what_an_older_one_imported(
    server: LiveServer, server_factory: Callable[..., LiveServer], minilm: Embedder
) -> None:
    """Home exports E1, then "I moved to Paris" supersedes "I live in Berlin" and the door
    code is deleted, and home exports E2: a target importing E1 then E2 holds what home
    does, and recall there hides Berlin and the door code as home's does."""
    home = server_factory(minilm, "home")
    with TwinmemClient(home.url, namespace="user:42") as client:
        berlin = client.save("I live in Berlin", key="home city").memory_id
        door = client.save("The door code is 4711").memory_id
        e1 = export(home, "user:42", versions="true")
        paris = client.save("I moved to Paris", key="home city").memory_id
        client.delete(door)
        assert client.get(berlin).status == "superseded"
        home_history = [(v.version, v.reason, v.changed_at) for v in client.history(berlin)]
    e2 = export(home, "user:42", versions="true")

    assert upload(server, e1).json()["inserted"] == 2
    report = upload(server, e2).json()
    assert (report["inserted"], report["updated"], report["unchanged"], report["differing"]) == (1, 2, 0, [])
    assert export(server, "user:42", versions="true").splitlines()[1:] == e2.splitlines()[1:]
    with TwinmemClient(server.url, namespace="user:42") as client:
        assert client.get(berlin).status == "superseded"
        assert [(v.version, v.reason, v.changed_at) for v in client.history(berlin)] == home_history
        hits = client.recall("Where do I live? What is the door code?", top_k=5)
        assert {hit.memory_id for hit in hits} == {paris}

    # Older after newer: E1's versions are all there already, so nothing changes.
    other = server_factory(minilm, "other")
    assert upload(other, e2).json()["inserted"] == 3
    report = upload(other, e1).json()
    assert (report["inserted"], report["updated"], report["unchanged"]) == (0, 0, 2)
    assert sorted(report["differing"]) == sorted([berlin, door])
    assert export(other, "user:42", versions="true").splitlines()[1:] == e2.splitlines()[1:]


def test_an_import_is_audited_under_the_namespaces_and_memories_it_wrote(
    server_factory: Callable[..., LiveServer], minilm: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target = server_factory(minilm, "source"), server_factory(minilm, "target")
    with TwinmemClient(source.url, namespace="user:42") as client:
        written = {client.save("I live in Berlin").memory_id, client.save("I like a blue theme").memory_id}
    data = export(source, "user:42", versions="true")
    assert upload(target, data).status_code == 200
    assert upload(target, data).json()["unchanged"] == 2

    # An admin asking what reached user:42 finds the import that wrote it (it was logged under
    # '*' alone, with no memory ids), and the import again that wrote nothing names none.
    audit = httpx.get(target.url + "/v1/admin/audit", params={"namespace": "user:42", "action": "import"}).json()
    assert [(set(entry["memory_ids"]), entry["outcome"]) for entry in audit["entries"]] == [
        (set(), "ok"),
        (written, "ok"),
    ]

    # An entry lists at most AUDIT_MAX_IDS ids and counts the rest: an import of 50,000
    # memories made one entry of about 2 MB.
    monkeypatch.setattr(auth, "AUDIT_MAX_IDS", 1)
    assert upload(target, data, namespace="copy").status_code == 200
    (entry,) = httpx.get(target.url + "/v1/admin/audit", params={"namespace": "copy"}).json()["entries"]
    assert len(entry["memory_ids"]) == 1 and entry["detail"] == "1 more memory ids not listed"


def test_mem0_data_without_a_namespace_lands_where_the_mem0_routes_read_it(
    server_factory: Callable[..., LiveServer], minilm: Embedder
) -> None:
    server = server_factory(minilm)
    document = json.loads((DATA / "mem0_get_all.json").read_bytes())
    document["results"].append(
        {"id": "7c0e3b56-2f4d-4d1a-9a55-3f6c1e2d4b7a", "memory": "Is afraid of flying", "user_id": "sam"}
    )
    document["results"].append({"id": "bot-note-1", "memory": "Answers in French", "agent_id": "concierge"})
    response = upload(server, json.dumps(document).encode(), format="mem0")
    assert response.status_code == 200, response.text
    assert response.json()["namespaces"] == ["agent:concierge", "user:alex", "user:sam"]

    # Each user's memories are listed and searched through /mem0 under their own user_id (all
    # went into `default` together, where no mem0 request could read them), narrowed by agent too.
    mem0 = server.url + "/mem0"
    alex = httpx.get(mem0 + "/memories", params={"user_id": "alex"}).json()["results"]
    assert {item["memory"] for item in alex} == {
        "Is a vegetarian and allergic to nuts",
        "Likes to play cricket on weekends",
        "Prefers window seats on long flights",
    }
    by_agent = httpx.get(mem0 + "/memories", params={"user_id": "alex", "agent_id": "travel-assistant"}).json()
    assert {item["memory"] for item in by_agent["results"]} == {
        "Likes to play cricket on weekends",
        "Prefers window seats on long flights",
    }
    found = httpx.post(mem0 + "/search", json={"query": "what can they not eat?", "user_id": "alex"}).json()
    assert found["results"][0]["id"] == "892db2ae-06d9-49e5-8b3e-585ef9b85b8e"
    sam = httpx.post(mem0 + "/search", json={"query": "flying", "user_id": "sam"}).json()["results"]
    assert [item["memory"] for item in sam] == ["Is afraid of flying"]
    concierge = httpx.get(mem0 + "/memories", params={"agent_id": "concierge"}).json()["results"]
    assert [item["memory"] for item in concierge] == ["Answers in French"]


def test_mem0_identifiers_with_spaces_are_narrowed_as_a_mem0_add_keeps_them(
    server_factory: Callable[..., LiveServer], minilm: Embedder
) -> None:
    # The /mem0 routes strip every identifier; the import stripped only the one that picks
    # the namespace and kept " coach " as the agent, so ?agent_id=coach missed the memory.
    server = server_factory(minilm)
    item = {"id": "w1", "memory": "Likes rowing", "user_id": " wsu ", "agent_id": " coach ", "run_id": " r1 "}
    assert upload(server, json.dumps({"results": [item]}).encode(), format="mem0").status_code == 200
    mem0 = server.url + "/mem0"
    added = {"messages": "Likes cycling", "user_id": "wsu", "agent_id": " coach ", "run_id": " r1 "}
    assert httpx.post(mem0 + "/memories", json=added).status_code == 200
    for params in ({"agent_id": "coach"}, {"run_id": "r1"}):
        listed = httpx.get(mem0 + "/memories", params={"user_id": "wsu", **params}).json()["results"]
        assert sorted(i["memory"] for i in listed) == ["Likes cycling", "Likes rowing"], params
