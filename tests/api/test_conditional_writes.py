"""Optimistic concurrency over real HTTP: reads carry the memory's version (and an ETag), and
PATCH, DELETE and rollback take ``If-Match`` or ``expected_version`` and answer 412 when the
memory moved on, changing nothing. A real server on a real SQLite file and on the Bolt tier."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.client import ClientError, TwinmemClient
from engine.records import MemoryDraft, Scope, Visibility, utcnow
from tests.api.conftest import LiveServer, start_server, store_overrides
from tests.conftest import HashingEmbedder

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "arcadedb"])
def live(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    """A server on each store: SQLite, and the Bolt tier (ArcadeDB)."""
    server = start_server(tmp_path / "data", HashingEmbedder(), **store_overrides(request, request.param))
    yield server
    server.stop()


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as client:
        yield client


def _saved(http: httpx.Client, content: str = "The user likes tea") -> str:
    response = http.post("/v1/memory/save", json={"content": content, "metadata": {}})
    assert response.status_code == 201, response.text
    memory_id: str = response.json()["memory_id"]
    return memory_id


def _stale(response: httpx.Response, current: int) -> dict[str, Any]:
    assert response.status_code == 412, response.text
    body: dict[str, Any] = response.json()
    assert body["current_version"] == current and f"version {current}" in body["detail"]
    assert response.headers["etag"] == f'"{current}"'
    return body


def test_a_read_carries_the_version_as_an_etag(http: httpx.Client) -> None:
    memory_id = _saved(http)
    got = http.get(f"/v1/memory/{memory_id}")
    assert got.json()["version"] == 1 and got.headers["etag"] == '"1"'
    patched = http.patch(f"/v1/memory/{memory_id}", json={"content": "The user likes green tea"})
    assert patched.json()["version"] == 2 and patched.headers["etag"] == '"2"'
    listed = http.get("/v1/memories").json()["memories"]
    assert [m["version"] for m in listed] == [2]
    recalled = http.post("/v1/memory/recall", json={"query": "green tea"}).json()["memories"]
    assert [m["version"] for m in recalled] == [2]


@pytest.mark.parametrize("if_match", ['"1"', "1", 'W/"1"'])
def test_patch_with_a_current_if_match_applies(http: httpx.Client, if_match: str) -> None:
    memory_id = _saved(http)
    patched = http.patch(f"/v1/memory/{memory_id}", json={"metadata": {"a": 1}}, headers={"If-Match": if_match})
    assert patched.status_code == 200, patched.text
    assert patched.json()["version"] == 2


def test_a_stale_patch_is_412_and_changes_nothing(http: httpx.Client) -> None:
    memory_id = _saved(http)
    first = http.patch(f"/v1/memory/{memory_id}", json={"metadata": {"a": 1}}, headers={"If-Match": '"1"'})
    assert first.status_code == 200
    _stale(http.patch(f"/v1/memory/{memory_id}", json={"metadata": {"b": 2}}, headers={"If-Match": '"1"'}), 2)
    _stale(http.patch(f"/v1/memory/{memory_id}", json={"metadata": {"b": 2}, "expected_version": 1}), 2)
    stored = http.get(f"/v1/memory/{memory_id}").json()
    assert (stored["version"], stored["metadata"]) == (2, {"a": 1})
    assert len(http.get(f"/v1/memory/{memory_id}/history").json()["versions"]) == 2


def test_if_match_any_and_no_condition_apply_unconditionally(http: httpx.Client) -> None:
    memory_id = _saved(http)
    assert http.patch(f"/v1/memory/{memory_id}", json={"key": "drink"}, headers={"If-Match": "*"}).status_code == 200
    assert http.patch(f"/v1/memory/{memory_id}", json={"key": "tea"}).json()["version"] == 3


def test_a_stale_delete_is_412_and_deletes_nothing(http: httpx.Client, live: LiveServer) -> None:
    memory_id = _saved(http)
    http.patch(f"/v1/memory/{memory_id}", json={"key": "drink"})
    _stale(http.delete(f"/v1/memory/{memory_id}", headers={"If-Match": '"1"'}), 2)
    _stale(http.delete(f"/v1/memory/{memory_id}", params={"expected_version": 1}), 2)
    assert http.get(f"/v1/memory/{memory_id}").status_code == 200
    with TwinmemClient(live.url) as client:
        with pytest.raises(ClientError) as refused:
            client.delete(memory_id, expected_version=1)
        assert refused.value.status_code == 412
        assert client.delete(memory_id, expected_version=2).version == 3
    assert http.get(f"/v1/memory/{memory_id}").status_code == 404


def test_a_stale_rollback_is_412_and_rolls_nothing_back(http: httpx.Client) -> None:
    memory_id = _saved(http)
    http.patch(f"/v1/memory/{memory_id}", json={"content": "The user likes coffee"})
    stale = http.post(f"/v1/memory/{memory_id}/rollback", json={"version": 1}, headers={"If-Match": '"1"'})
    _stale(stale, 2)
    _stale(http.post(f"/v1/memory/{memory_id}/rollback", json={"version": 1, "expected_version": 1}), 2)
    assert http.get(f"/v1/memory/{memory_id}").json()["content"] == "The user likes coffee"
    done = http.post(f"/v1/memory/{memory_id}/rollback", json={"version": 1}, headers={"If-Match": '"2"'})
    assert done.status_code == 200 and done.headers["etag"] == '"3"'
    assert done.json()["content"] == "The user likes tea"


@pytest.mark.parametrize(
    ("headers", "body", "field"),
    [
        ({"If-Match": "version one"}, {}, "If-Match"),
        ({"If-Match": '"1", "2"'}, {}, "If-Match"),
        ({"If-Match": '"0"'}, {}, "If-Match"),
        ({"If-Match": '"1"'}, {"expected_version": 2}, "expected_version"),
    ],
)
def test_a_malformed_or_contradictory_condition_is_422(
    http: httpx.Client, headers: dict[str, str], body: dict[str, Any], field: str
) -> None:
    memory_id = _saved(http)
    response = http.patch(f"/v1/memory/{memory_id}", json={"key": "k", **body}, headers=headers)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    assert http.get(f"/v1/memory/{memory_id}").json()["version"] == 1


def test_concurrent_read_then_patch_clients_lose_no_key(live: LiveServer, http: httpx.Client) -> None:
    # 8 clients each add 5 keys to one memory's metadata by read, modify, PATCH with If-Match,
    # retrying on 412. Without the condition most keys were lost (last write wins).
    memory_id = _saved(http)
    clients, keys_each = 8, 5
    problems: list[str] = []
    retries = [0] * clients

    def writer(worker: int) -> None:
        with httpx.Client(base_url=live.url, timeout=60) as mine:
            for n in range(keys_each):
                while True:
                    read = mine.get(f"/v1/memory/{memory_id}")
                    metadata = {**read.json()["metadata"], f"w{worker}-k{n}": n}
                    patched = mine.patch(
                        f"/v1/memory/{memory_id}",
                        json={"metadata": metadata},
                        headers={"If-Match": read.headers["etag"]},
                    )
                    if patched.status_code == 200:
                        break
                    if patched.status_code != 412:
                        problems.append(f"{patched.status_code} {patched.text}")
                        return
                    retries[worker] += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    stored = http.get(f"/v1/memory/{memory_id}").json()
    assert set(stored["metadata"]) == {f"w{w}-k{n}" for w in range(clients) for n in range(keys_each)}
    assert stored["version"] == 1 + clients * keys_each
    versions = [v["version"] for v in http.get(f"/v1/memory/{memory_id}/history").json()["versions"]]
    assert versions == list(range(1, 2 + clients * keys_each))


def _race(writers: list[threading.Thread], readers: list[threading.Thread], done: threading.Event) -> None:
    """Start all; when every writer has finished, set ``done`` and wait for the readers."""
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    for thread in readers:
        thread.join()


def test_conditional_patches_race_recalls_and_superseding_saves_without_a_lost_update(
    live: LiveServer, http: httpx.Client
) -> None:
    # PATCH clients (If-Match, retrying on 412), recall loops that reinforce the memory, and
    # saves of the same key that supersede it, all at once: no 5xx, no key lost, and the
    # history numbers every change exactly once.
    memory_id = http.post("/v1/memory/save", json={"content": "The user drinks tea", "key": "drink"}).json()[
        "memory_id"
    ]
    clients, keys_each = 6, 4
    problems: list[str] = []
    done = threading.Event()

    def patcher(worker: int) -> None:
        with httpx.Client(base_url=live.url, timeout=60) as mine:
            for n in range(keys_each):
                while True:
                    read = mine.get(f"/v1/memory/{memory_id}")
                    metadata = {**read.json()["metadata"], f"w{worker}-k{n}": n}
                    etag = read.headers["etag"]
                    patched = mine.patch(
                        f"/v1/memory/{memory_id}", json={"metadata": metadata}, headers={"If-Match": etag}
                    )
                    if patched.status_code == 200:
                        break
                    if patched.status_code != 412:
                        problems.append(f"PATCH {patched.status_code} {patched.text}")
                        return

    def recaller() -> None:
        with httpx.Client(base_url=live.url, timeout=60) as mine:
            while not done.is_set():
                r = mine.post(
                    "/v1/memory/recall", json={"query": "what does the user drink", "include_superseded": True}
                )
                if r.status_code != 200:
                    problems.append(f"recall {r.status_code} {r.text}")

    def superseder() -> None:
        with httpx.Client(base_url=live.url, timeout=60) as mine:
            for drink in ("coffee", "cocoa", "juice"):
                r = mine.post("/v1/memory/save", json={"content": f"The user drinks {drink}", "key": "drink"})
                if r.status_code >= 300:
                    problems.append(f"save {r.status_code} {r.text}")

    workers = [threading.Thread(target=patcher, args=(w,)) for w in range(clients)]
    workers.append(threading.Thread(target=superseder))
    _race(workers, [threading.Thread(target=recaller) for _ in range(2)], done)
    assert problems == []
    stored = http.get(f"/v1/memory/{memory_id}").json()
    assert set(stored["metadata"]) == {f"w{w}-k{n}" for w in range(clients) for n in range(keys_each)}
    versions = [v["version"] for v in http.get(f"/v1/memory/{memory_id}/history").json()["versions"]]
    assert versions == list(range(1, stored["version"] + 1))
    assert stored["version"] >= 1 + clients * keys_each
    assert stored["status"] == "superseded"  # a newer memory of the same key replaced it meanwhile


def _reinforcement_settled(http: httpx.Client) -> dict[str, Any]:
    for _ in range(600):
        health: dict[str, Any] = http.get("/health").json()
        if health["reinforcement_pending"] == 0:
            return health
        time.sleep(0.05)
    raise AssertionError("background reinforcement did not settle")


def test_patches_recalls_and_a_conditional_delete_racing_lose_nothing_and_number_versions_once(
    live: LiveServer, http: httpx.Client
) -> None:
    # On memory A: conditional metadata PATCHes, unconditional content PATCHes (re-embedded)
    # and recall loops that reinforce it. On memory D: conditional PATCHes racing a
    # conditional DELETE. No 5xx; every acknowledged PATCH is the version it was told, each
    # version is numbered once and in time order; no reinforcement is lost to a PATCH; and
    # once the DELETE is acknowledged, no PATCH of D is.
    a = http.post("/v1/memory/save", json={"content": "The user drinks green tea", "entities": ["tea"]}).json()
    d = http.post("/v1/memory/save", json={"content": "The user walks the dog at noon", "entities": ["dog"]}).json()
    a_id, d_id = a["memory_id"], d["memory_id"]
    problems: list[str] = []
    acked: dict[str, dict[int, str]] = {a_id: {}, d_id: {}}  # memory -> version -> what that PATCH wrote
    lock = threading.Lock()
    recalled = [0]
    deleted_at: list[int] = []
    done = threading.Event()

    def acknowledge(memory_id: str, version: int, what: str) -> None:
        with lock:
            if version in acked[memory_id]:
                problems.append(f"version {version} of {memory_id} acknowledged twice")
            acked[memory_id][version] = what

    def conditional_patcher(memory_id: str, worker: int, count: int) -> None:
        with httpx.Client(base_url=live.url, timeout=60) as mine:
            for n in range(count):
                key = f"w{worker}-k{n}"
                while True:
                    read = mine.get(f"/v1/memory/{memory_id}")
                    if read.status_code == 404 and memory_id == d_id:
                        return  # deleted (checked below: the DELETE was acknowledged)
                    metadata = {**read.json()["metadata"], key: n}
                    r = mine.patch(
                        f"/v1/memory/{memory_id}",
                        json={"metadata": metadata},
                        headers={"If-Match": read.headers["etag"]},
                    )
                    if r.status_code == 200:
                        acknowledge(memory_id, r.json()["version"], key)
                        break
                    if r.status_code == 404 and memory_id == d_id:
                        return
                    if r.status_code != 412:
                        problems.append(f"PATCH {r.status_code} {r.text}")
                        return

    def content_patcher() -> None:
        with httpx.Client(base_url=live.url, timeout=60) as mine:
            for n in range(6):
                content = f"The user drinks green tea, cup {n}"
                r = mine.patch(f"/v1/memory/{a_id}", json={"content": content})
                if r.status_code != 200:
                    problems.append(f"content PATCH {r.status_code} {r.text}")
                    return
                acknowledge(a_id, r.json()["version"], content)

    def recaller() -> None:
        with httpx.Client(base_url=live.url, timeout=60) as mine:
            while not done.is_set():
                r = mine.post("/v1/memory/recall", json={"query": "what tea does the user drink", "top_k": 1})
                if r.status_code != 200:
                    problems.append(f"recall {r.status_code} {r.text}")
                    return
                if [hit["memory_id"] for hit in r.json()["memories"]] == [a_id]:
                    with lock:
                        recalled[0] += 1

    def deleter() -> None:
        with httpx.Client(base_url=live.url, timeout=60) as mine:
            time.sleep(0.3)
            while True:
                read = mine.get(f"/v1/memory/{d_id}")
                r = mine.delete(f"/v1/memory/{d_id}", headers={"If-Match": read.headers["etag"]})
                if r.status_code == 200:
                    deleted_at.append(r.json()["version"])
                    return
                if r.status_code != 412:
                    problems.append(f"DELETE {r.status_code} {r.text}")
                    return

    writers = [threading.Thread(target=conditional_patcher, args=(a_id, w, 4)) for w in range(4)]
    writers += [threading.Thread(target=conditional_patcher, args=(d_id, w, 20)) for w in range(4)]
    writers += [threading.Thread(target=content_patcher), threading.Thread(target=deleter)]
    _race(writers, [threading.Thread(target=recaller) for _ in range(2)], done)
    assert problems == []

    health = _reinforcement_settled(http)
    assert health["reinforcement_failures"] == 0
    stored = http.get(f"/v1/memory/{a_id}").json()
    assert stored["access_count"] == recalled[0] > 0  # every reinforcement kept, none lost to a PATCH
    assert set(stored["metadata"]) == {f"w{w}-k{n}" for w in range(4) for n in range(4)}
    assert stored["content"] == "The user drinks green tea, cup 5"

    assert len(deleted_at) == 1 and http.get(f"/v1/memory/{d_id}").status_code == 404
    assert max(acked[d_id], default=0) < deleted_at[0]  # nothing acknowledged after the delete
    for memory_id in (a_id, d_id):
        versions = live.service.history("default", memory_id)
        assert [v.version for v in versions] == list(range(1, len(versions) + 1))
        times = [v.changed_at for v in versions]
        assert times == sorted(times)
        for version, what in acked[memory_id].items():
            record = versions[version - 1].record
            assert what in record.metadata or record.content == what, (memory_id, version, what)
    assert versions[-1].record.status.value == "deleted" and versions[-1].version == deleted_at[0]


def test_a_save_overtaken_on_every_try_is_409_naming_no_memory_it_cannot_see(
    tmp_path: Path, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer (a replica) stores alice's private memory of the text bob saves
    between bob's judgment and his write, once: bob's save is judged again and kept as
    his own (never answered as hers). On every try: after the last, 409, and the answer
    names none of her memories (nor a version of none), nothing of bob's is stored, and
    hers all are. Before, the answer named the last of hers: an id bob may not see."""
    tokens = [
        {"agent": "alice", "token": "alice-token-0123456789", "grants": ["team:rw"]},
        {"agent": "bob", "token": "bob-token-0123456789", "grants": ["team:rw"]},
    ]
    live = start_server(tmp_path / "data", minilm, auth={"mode": "tokens", "tokens": tokens})
    try:
        service = live.service
        store = service.store
        text = "The code of the gym locker is 4417"
        insert_linked = store.insert_linked
        hers: list[str] = []
        times = {"left": 1}

        def alice_first(memories: Any, *args: Any, **kwargs: Any) -> int:
            if times["left"] > 0:
                times["left"] -= 1
                said = memories[0].content
                draft = MemoryDraft(content=said, namespace="team", visibility=Visibility.PRIVATE)
                memory = service._new_memory(draft, utcnow(), "alice")
                vector = service.embedder.embed_documents([said])[0]
                insert_linked([memory], [vector], updates=[], edges=[], changed_by="alice")
                hers.append(memory.memory_id)
            return insert_linked(memories, *args, **kwargs)

        monkeypatch.setattr(store, "insert_linked", alice_first)
        body = {"content": text, "namespace": "team", "visibility": "private"}
        bob = {"Authorization": "Bearer bob-token-0123456789"}
        with httpx.Client(base_url=live.url, headers=bob, timeout=60) as http:
            once = http.post("/v1/memory/save", json=body)
            assert once.status_code == 201, once.text
            assert once.json()["memory_id"] not in hers
            times["left"] = 1000
            always = http.post("/v1/memory/save", json={**body, "content": "The code of the bike lock is 2290"})
            assert always.status_code == 409, always.text
            assert len(hers) > 2
            assert not [memory_id for memory_id in hers if memory_id in always.text]
            assert "current_version" not in always.json()
            listed = http.get("/v1/memories", params={"namespace": "team"}).json()["memories"]
            assert [m["memory_id"] for m in listed] == [once.json()["memory_id"]]
        scope = Scope.whole(["team"])
        assert all(store.get(scope, memory_id) is not None for memory_id in hers)
    finally:
        live.stop()
