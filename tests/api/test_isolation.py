"""Attacks on isolation, over real HTTP in tokens mode, on every store.

Four agents share one service. Each attack tries to read or change what its agent
may not: another namespace's memories by id, by recall, by list, by export; a
private memory through a shared entity (graph expansion, the entity index, typed
links); ids guessed or lifted from elsewhere; filters and namespaces crafted to
break out of the query. Every answer an attacker gets is also searched for the
secret texts, so a leak through any field (content, entities, links, history,
explanations) fails the suite.

Visibility, as DESIGN.md defines it: ``private`` is seen by its writer (and the
namespace's admins), ``shared`` by agents granted the namespace, ``public`` by every
authenticated agent, read-only.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import neo4j
import pytest

from engine.ports import Edge
from engine.records import utcnow
from engine.security import hash_token
from tests.api.conftest import LiveServer

ROOT = "root-token-for-the-isolation-tests"
TOKENS = {
    "alice": ("alice-token-0123456789", ["user:alice:rw", "team:rw"]),
    "bob": ("bob-token-0123456789", ["user:bob:rw", "team:rw"]),
    "carol": ("carol-token-0123456789", ["team:r"]),
    "eve": ("eve-token-0123456789", ["eve:rw"]),
    "dave": ("dave-token-0123456789", ["team:w"]),  # may write, not read
}
# Texts nobody but their writer may ever see.
ALICE_HOME = "Alice keeps her bank PIN hint under the cat Miso"
ALICE_PRIVATE = "Alice is secretly interviewing at Globex next week"
BOB_PRIVATE = "Bob plans to resign right after the Lisbon offsite"
SHARED = "The team offsite is in Lisbon in June"
PUBLIC = "The team's public roadmap ships the Miso feature in May"


@dataclass
class World:
    live: LiveServer
    ids: dict[str, str]
    seen: list[httpx.Response] = field(default_factory=list)

    @contextmanager
    def as_agent(self, agent: str) -> Iterator[httpx.Client]:
        token = ROOT if agent == "root" else TOKENS[agent][0]
        client = httpx.Client(
            base_url=self.live.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
            event_hooks={"response": [lambda r: r.read(), self.seen.append]},  # type: ignore[list-item]
        )
        with client:
            yield client

    def leaked(self, *secrets: str) -> list[str]:
        """The requests whose answers carried any of ``secrets`` (in any field)."""
        return [
            f"{r.request.method} {r.request.url}"
            for r in self.seen
            if any(secret in r.text or json.dumps(secret)[1:-1] in r.text for secret in secrets)
        ]


@pytest.fixture
def world(server_factory: Callable[..., LiveServer], minilm: Any, store_config: dict[str, Any]) -> World:
    tokens = [{"agent": "root", "token": ROOT, "grants": ["*:a"]}]
    tokens += [{"agent": agent, "token": token, "grants": grants} for agent, (token, grants) in TOKENS.items()]
    live = server_factory(minilm, auth={"mode": "tokens", "tokens": tokens}, **store_config)
    w = World(live, {})
    saves = {
        "alice_home": ("alice", {"content": ALICE_HOME, "namespace": "user:alice", "entities": ["Miso"]}),
        "alice_private": (
            "alice",
            {"content": ALICE_PRIVATE, "namespace": "team", "visibility": "private", "entities": ["Globex"]},
        ),
        "bob_private": (
            "bob",
            {"content": BOB_PRIVATE, "namespace": "team", "visibility": "private", "entities": ["Lisbon"]},
        ),
        "shared": ("bob", {"content": SHARED, "namespace": "team", "entities": ["Lisbon"]}),
        "public": ("bob", {"content": PUBLIC, "namespace": "team", "visibility": "public", "entities": ["Miso"]}),
    }
    for name, (agent, body) in saves.items():
        with w.as_agent(agent) as api:
            response = api.post("/v1/memory/save", json=body)
            assert response.status_code == 201, response.text
            w.ids[name] = response.json()["memory_id"]
    # A typed link from the shared memory to bob's private one (as a SUPERSEDES or
    # MERGED_INTO edge would be): following it must not reveal the private memory.
    live.service.store.add_edges([Edge("team", w.ids["shared"], w.ids["bob_private"], "RELATED_TO", utcnow())])
    w.seen.clear()
    return w


def _same_answer(a: httpx.Response, b: httpx.Response, a_id: str, b_id: str) -> bool:
    """Whether two answers are identical once each request's own id is blanked out."""
    return a.status_code == b.status_code and a.text.replace(a_id, "ID") == b.text.replace(b_id, "ID")


def _by_id_requests(api: httpx.Client, memory_id: str, namespace: str) -> list[httpx.Response]:
    ns = {"namespace": namespace}
    return [
        api.get(f"/v1/memory/{memory_id}", params=ns),
        api.get(f"/v1/memory/{memory_id}/history", params=ns),
        api.get(f"/v1/memory/{memory_id}/graph", params=ns),
        api.get(f"/v1/memory/{memory_id}/chain", params=ns),
        api.patch(f"/v1/memory/{memory_id}", json={**ns, "content": "overwritten"}),
        api.patch(f"/v1/memory/{memory_id}", json={**ns, "visibility": "public"}),
        api.delete(f"/v1/memory/{memory_id}", params=ns),
        api.post(f"/v1/memory/{memory_id}/restore", json=ns),
        api.post(f"/v1/memory/{memory_id}/rollback", json={**ns, "version": 1}),
    ]


def _guesses() -> list[str]:
    return [str(uuid.uuid4()), "00000000-0000-0000-0000-000000000000", "m-1", "'; DROP TABLE memories; --"]


@pytest.mark.parametrize(
    ("agent", "target", "namespace"),
    [
        ("bob", "alice_home", "user:alice"),  # a namespace bob has no grant on
        ("bob", "alice_home", "user:bob"),  # the id, asked for in bob's own namespace
        ("bob", "alice_home", "team"),  # ... or in a namespace both share
        ("bob", "alice_private", "team"),  # alice's private memory in the shared namespace
        ("carol", "alice_private", "team"),
        ("eve", "shared", "team"),  # shared, but eve holds no grant on team
        ("eve", "alice_home", "eve"),
    ],
)
def test_reads_and_writes_by_id_cannot_tell_a_hidden_memory_from_a_missing_one(
    world: World, agent: str, target: str, namespace: str
) -> None:
    hidden = world.ids[target]
    with world.as_agent(agent) as api:
        for guess in _guesses():
            for real, made_up in zip(
                _by_id_requests(api, hidden, namespace), _by_id_requests(api, guess, namespace), strict=True
            ):
                assert real.status_code in (403, 404), (real.request.url, real.text)
                assert _same_answer(real, made_up, hidden, guess), (real.text, made_up.text)
    assert world.leaked(ALICE_HOME, ALICE_PRIVATE, SHARED if agent == "eve" else ALICE_PRIVATE) == []
    with world.as_agent("root") as root:  # and nothing was changed by the attempts
        memory = root.get(f"/v1/memory/{hidden}", params={"namespace": _home(target)}).json()
        assert (memory["version"], memory["status"]) == (1, "active")


def _home(name: str) -> str:
    return "user:alice" if name == "alice_home" else "team"


def test_recall_list_entities_and_export_show_each_agent_only_what_it_may_see(world: World) -> None:
    ids = world.ids
    expected = {
        # agent -> what it sees of "team"
        "alice": {ids["alice_private"], ids["shared"], ids["public"]},
        "bob": {ids["bob_private"], ids["shared"], ids["public"]},
        "carol": {ids["shared"], ids["public"]},
        "eve": {ids["public"]},  # no grant: public memories only
    }
    for agent, visible in expected.items():
        with world.as_agent(agent) as api:
            recalled = api.post(
                "/v1/memory/recall",
                json={"query": "Lisbon offsite Globex Miso interview resign", "namespaces": ["team"], "top_k": 20},
            )
            assert {m["memory_id"] for m in recalled.json()["memories"]} == visible, agent
            listed = api.get("/v1/memories", params={"namespace": "team", "status": ["active"]})
            assert {m["memory_id"] for m in listed.json()["memories"]} == visible, agent
            for entity, holders in (
                ("Lisbon", {ids["shared"], ids["bob_private"]}),
                ("Globex", {ids["alice_private"]}),
            ):
                found = api.get(f"/v1/entities/{entity}/memories", params={"namespace": "team"}).json()["memories"]
                assert {m["memory_id"] for m in found} == holders & visible, (agent, entity)
            exported = api.get("/v1/export", params={"namespace": "team", "versions": True, "vectors": True})
            assert exported.status_code == 200
            lines = [json.loads(line) for line in exported.text.splitlines()]
            assert {line["memory"]["memory_id"] for line in lines if line["kind"] == "memory"} == visible, agent
            assert lines[0]["counts"]["memories"] == len(visible) == lines[-1]["counts"]["memories"]
            # Across namespaces in one recall: each keeps its own reach.
            both = api.post(
                "/v1/memory/recall",
                json={"query": "bank PIN hint cat Miso", "namespaces": ["team", "user:alice"], "top_k": 20},
            )
            home = {ids["alice_home"]} if agent == "alice" else set()
            assert {m["memory_id"] for m in both.json()["memories"]} == visible | home, agent
    for agent, secrets in (
        ("bob", (ALICE_PRIVATE, ALICE_HOME)),
        ("carol", (ALICE_PRIVATE, BOB_PRIVATE, ALICE_HOME)),
        ("eve", (ALICE_PRIVATE, BOB_PRIVATE, ALICE_HOME, SHARED)),
    ):
        mine = [r for r in world.seen if r.request.headers["authorization"] == f"Bearer {TOKENS[agent][0]}"]
        assert [r.request.url for r in mine if any(s in r.text for s in secrets)] == [], agent


def test_graph_expansion_never_crosses_into_a_private_memory(world: World) -> None:
    ids = world.ids
    query = {"query": "where is the team offsite", "namespaces": ["team"], "expand": ["graph"], "explain": True}
    with world.as_agent("alice") as api:
        recalled = api.post("/v1/memory/recall", json=query).json()["memories"]
        assert ids["bob_private"] not in {m["memory_id"] for m in recalled}
        shared = next(m for m in recalled if m["memory_id"] == ids["shared"])
        assert shared["graph"]["edges"] == []
        graph = api.get(f"/v1/memory/{ids['shared']}/graph", params={"namespace": "team"}).json()
        assert graph["edges_out"] == [] and graph["entities"] == ["Lisbon"]
        chain = api.get(f"/v1/memory/{ids['shared']}/chain", params={"namespace": "team"}).json()["chain"]
        assert [m["memory_id"] for m in chain] == [ids["shared"]]
    assert world.leaked(BOB_PRIVATE) == []
    with world.as_agent("bob") as api:  # the writer follows the link to his own memory
        graph = api.get(f"/v1/memory/{ids['shared']}/graph", params={"namespace": "team"}).json()
        assert [edge["memory"]["memory_id"] for edge in graph["edges_out"]] == [ids["bob_private"]]


@pytest.mark.parametrize(
    "body",
    [
        {"query": "Globex", "namespace": "team' OR '1'='1"},
        {"query": "Globex", "namespace": "*"},
        {"query": "Globex", "namespace": "team%"},
        {"query": "Globex", "namespaces": ["team", "user:*"]},
        {"query": "Globex", "namespace": "team", "filter": {"metadata": {"x') OR 1=1 --": 1}}},
        {"query": "Globex", "namespace": "team", "filter": {"metadata": {"a": {"$ne": None}}}},
        {"query": "Globex", "namespace": "team", "filter": {"visibility": ["private"]}},
        {"query": "Globex", "namespace": "team", "filter": {"category": ["fact' OR '1'='1"]}},
        {"query": "Globex", "namespace": "team", "actor": "alice"},
        {"query": "Globex", "namespace": "team", "scope": {"full": ["team"]}},
    ],
)
def test_crafted_namespaces_and_filters_are_refused(world: World, body: dict[str, Any]) -> None:
    with world.as_agent("bob") as api:
        response = api.post("/v1/memory/recall", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"]
    assert world.leaked(ALICE_PRIVATE) == []


@pytest.mark.parametrize(
    "flt",
    [
        {"session_id": "' OR 1=1 --"},
        {"metadata": {"note": "' OR visibility = 'private' --"}},
        {"metadata": {"a.b": 'x") OR 1=1 --'}},
        {"status": ["active", "quarantined", "superseded", "archived"]},
    ],
)
def test_filter_values_are_data_never_query(world: World, flt: dict[str, Any]) -> None:
    with world.as_agent("bob") as api:
        response = api.post(
            "/v1/memory/recall", json={"query": "Globex interview", "namespace": "team", "filter": flt, "top_k": 20}
        )
        listed = api.get(
            "/v1/memories", params={"namespace": "team", **{k: v for k, v in flt.items() if k != "metadata"}}
        )
    assert response.status_code == 200, response.text
    assert world.ids["alice_private"] not in {m["memory_id"] for m in response.json()["memories"]}
    assert listed.status_code == 200 and world.ids["alice_private"] not in listed.text
    assert world.leaked(ALICE_PRIVATE) == []


def test_a_forged_cursor_does_not_widen_a_listing(world: World) -> None:
    forged = base64.urlsafe_b64encode(json.dumps(["9999-01-01T00:00:00Z", "~"]).encode()).decode()
    with world.as_agent("carol") as api:
        listed = api.get("/v1/memories", params={"namespace": "team", "cursor": forged, "status": ["active"]})
    assert listed.status_code == 200
    assert {m["memory_id"] for m in listed.json()["memories"]} == {world.ids["shared"], world.ids["public"]}


def test_writes_stay_inside_grants_and_visibility(world: World) -> None:
    ids = world.ids
    with world.as_agent("eve") as api:
        assert api.post("/v1/memory/save", json={"content": "planted", "namespace": "team"}).status_code == 403
        # Public is read-only for those without a write grant.
        public = api.patch(f"/v1/memory/{ids['public']}", json={"namespace": "team", "content": "defaced"})
        assert public.status_code == 403
    with world.as_agent("carol") as api:  # read-only on team
        assert api.patch(f"/v1/memory/{ids['shared']}", json={"namespace": "team", "content": "x"}).status_code == 403
    with world.as_agent("alice") as api:
        # A writer of the namespace may edit bob's shared memory, not change who sees it.
        edited = api.patch(f"/v1/memory/{ids['shared']}", json={"namespace": "team", "content": SHARED + "!"})
        assert edited.status_code == 200
        hidden = api.patch(f"/v1/memory/{ids['shared']}", json={"namespace": "team", "visibility": "private"})
        assert hidden.status_code == 403 and "visibility" in hidden.json()["detail"]
        # Purging erases history: namespace admins only.
        purge = api.delete(f"/v1/memory/{ids['shared']}", params={"namespace": "team", "hard": True})
        assert purge.status_code == 403
        # Saving alice's private text again as shared does not answer with (or reveal) her
        # private memory; and bob's private text saved by alice is a new memory, not his.
        again = api.post("/v1/memory/save", json={"content": BOB_PRIVATE, "namespace": "team", "visibility": "shared"})
        assert again.status_code == 201 and again.json()["memory_id"] != ids["bob_private"]
        assert again.json().get("superseded", []) == [] and again.json().get("contradicted", []) == []
    with world.as_agent("bob") as api:
        mine = api.get(f"/v1/memory/{ids['bob_private']}", params={"namespace": "team"}).json()
        assert (mine["version"], mine["status"], mine["visibility"]) == (1, "active", "private")
        shared = api.get(f"/v1/memory/{ids['shared']}", params={"namespace": "team"}).json()
        assert shared["visibility"] == "shared"
        moved = api.patch(f"/v1/memory/{ids['shared']}", json={"namespace": "team", "visibility": "public"})
        assert moved.status_code == 200  # the writer may


def _stored(world: World) -> bytes:
    """Every byte the service stores: its data directory and, in server mode, every node
    of the graph (where tokens, blocks and the audit log then live)."""
    config = world.live.service.config
    raw = b"".join(p.read_bytes() for p in Path(config.data_dir).rglob("*") if p.is_file())
    if config.store == "neo4j":
        graph = config.neo4j
        with (
            neo4j.GraphDatabase.driver(graph.uri, auth=(graph.user, graph.password)) as driver,
            driver.session(database=graph.database or None) as session,
        ):
            nodes = [record["p"] for record in session.run("MATCH (n) RETURN properties(n) AS p")]
        raw += json.dumps(nodes, default=str).encode()
    return raw


def test_tokens_are_stored_only_as_hashes(world: World) -> None:
    raw = _stored(world)
    for token, _ in TOKENS.values():
        assert token.encode() not in raw
        assert hash_token(token).encode() in raw


def test_an_import_cannot_plant_memories_in_another_agents_name(world: World) -> None:
    with world.as_agent("bob") as api:
        exported = api.get("/v1/export", params={"namespace": "user:bob"}).text.splitlines()
        header, end = json.loads(exported[0]), json.loads(exported[-1])
        record = api.get(f"/v1/memory/{world.ids['bob_private']}", params={"namespace": "team"}).json()
        record.update(
            memory_id=str(uuid.uuid4()),
            content="Alice says her favourite lunch spot is the noodle bar",
            actor="alice",
            visibility="private",
        )
        end["counts"] = {"memories": 1, "versions": 0, "vectors": 0, "edges": 0}
        body = "\n".join(json.dumps(line) for line in (header, {"kind": "memory", "memory": record}, end))
        imported = api.post("/v1/import", params={"namespace": "team"}, content=body.encode())
        assert imported.status_code == 200, imported.text
        # A non-admin's import gets ids of its own: it cannot probe which ids exist.
        stored_as = imported.json()["remapped"][record["memory_id"]]
        assert stored_as != record["memory_id"]
        mine = api.get(f"/v1/memory/{stored_as}", params={"namespace": "team"}).json()
        assert mine["actor"] == "bob"  # the importer, not the agent the file names
        history = api.get(f"/v1/memory/{stored_as}/history", params={"namespace": "team"}).json()["versions"]
        assert {v["changed_by"] for v in history} == {"bob"}
        again = api.post("/v1/import", params={"namespace": "team"}, content=body.encode()).json()
        assert (again["inserted"], again["unchanged"]) == (0, 1)
        # Probing: an id that exists (alice's private memory) and one that does not answer alike.
        for probe in (world.ids["alice_private"], str(uuid.uuid4())):
            record.update(memory_id=probe)
            line = json.dumps({"kind": "memory", "memory": record})
            probed = api.post(
                "/v1/import",
                params={"namespace": "team"},
                content=f"{json.dumps(header)}\n{line}\n{json.dumps(end)}".encode(),
            )
            assert probed.status_code == 200 and probed.json()["inserted"] == 1
            linked = {
                "kind": "memory",
                "memory": {**record, "memory_id": str(uuid.uuid4())},
                "edges": [{"kind": "CONTRADICTS", "to": probe, "created_at": record["created_at"]}],
            }
            refused = api.post(
                "/v1/import",
                params={"namespace": "team"},
                content=f"{json.dumps(header)}\n{json.dumps(linked)}\n{json.dumps(end)}".encode(),
            )
            assert refused.status_code == 422 and "outside the file" in refused.text
    with world.as_agent("alice") as api:
        seen = api.get(f"/v1/memory/{stored_as}", params={"namespace": "team"})
        assert seen.status_code == 404
        mine = api.get(f"/v1/memory/{world.ids['alice_private']}", params={"namespace": "team"}).json()
        assert (mine["version"], mine["content"]) == (1, ALICE_PRIVATE)


def test_health_tells_non_admins_only_that_the_service_is_up(world: World) -> None:
    with world.as_agent("eve") as api:
        assert api.get("/health").json() == {"status": "ok"}
    with world.as_agent("root") as api:
        assert api.get("/health").json()["memories_indexed"] == len(world.ids)


def test_a_write_grant_alone_reads_nothing(world: World) -> None:
    ids = world.ids
    with world.as_agent("dave") as api:
        listed = api.get("/v1/memories", params={"namespace": "team"}).json()["memories"]
        assert {m["memory_id"] for m in listed} == {ids["public"]}  # what every agent sees
        for target in ("shared", "alice_private"):
            guess = str(uuid.uuid4())
            for real, made_up in zip(
                _by_id_requests(api, ids[target], "team"), _by_id_requests(api, guess, "team"), strict=True
            ):
                assert _same_answer(real, made_up, ids[target], guess), (real.request.url, real.text)
        # Saving words someone else saved does not answer with their memory.
        saved = api.post("/v1/memory/save", json={"content": SHARED, "namespace": "team"}).json()
        assert saved["created"] and saved["memory_id"] != ids["shared"] and saved["superseded"] == []
        mine = api.patch(f"/v1/memory/{saved['memory_id']}", json={"namespace": "team", "importance": 0.9})
        assert mine.status_code == 200
    assert world.leaked(ALICE_PRIVATE, BOB_PRIVATE) == []


def test_a_non_admin_re_importing_its_own_export_changes_nothing(world: World) -> None:
    with world.as_agent("bob") as api:
        exported = api.get("/v1/export", params={"namespace": "team", "versions": True}).content
        again = api.post("/v1/import", params={"namespace": "team"}, content=exported)
        assert again.status_code == 200, again.text
        report = again.json()
        assert (report["inserted"], report["unchanged"], report["remapped"]) == (0, 3, {})
