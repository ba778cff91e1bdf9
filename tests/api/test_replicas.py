"""Two API processes sharing one graph database see each other's writes.

Each server has a data directory (and so an HNSW index) of its own and one
graph database in common; before every recall the index catches up from the
store's change sequence, so a memory saved through one server is recallable
through the other. Two in-thread servers stand for two processes: they share
nothing but the database.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.client import TwinmemClient
from engine.episodes import NEXT
from engine.ports import Embedder
from engine.records import Scope
from tests.api.conftest import LiveServer, save, start_server, store_overrides

pytestmark = pytest.mark.slow

# A bound on the behaviour the design promises ("shortly after"), not a benchmark.
CATCH_UP_BOUND_S = 2.0


def recalled_within(client: TwinmemClient, query: str, memory_id: str, bound: float) -> bool:
    deadline = time.monotonic() + bound
    while True:
        if memory_id in {hit.memory_id for hit in client.recall(query, top_k=5)}:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


@contextmanager
def replica_servers(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder, store: str = "arcadedb"
) -> Iterator[list[LiveServer]]:
    """Two in-thread servers, each with a data directory of its own, on one fresh database
    of ``store``; both stopped on the way out."""
    shared = store_overrides(request, store)
    servers: list[LiveServer] = []
    try:
        servers = [start_server(tmp_path / name, embedder, **shared) for name in ("replica-a", "replica-b")]
        yield servers
    finally:
        for live in servers:
            live.stop()


@contextmanager
def two_replicas(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> Iterator[tuple[LiveServer, httpx.Client, httpx.Client]]:
    """The first replica's server (whose store or service a test patches) and an HTTP
    client on each replica, on one ArcadeDB database."""
    with replica_servers(request, tmp_path, embedder) as servers:
        with httpx.Client(base_url=servers[0].url, timeout=60) as a, httpx.Client(base_url=servers[1].url) as b:
            yield servers[0], a, b


@pytest.mark.parametrize("store", ["arcadedb", "neo4j"])
def test_each_replica_recalls_what_the_other_wrote(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: Embedder, store: str
) -> None:
    with replica_servers(request, tmp_path, minilm, store) as servers:
        with TwinmemClient(servers[0].url) as a, TwinmemClient(servers[1].url) as b:
            bees = a.save("The user keeps bees on the roof of the garage", category="fact")
            assert recalled_within(b, "does the user keep any bees?", bees.memory_id, CATCH_UP_BOUND_S)
            # Found through b's own index, caught up from the change sequence (not only
            # through recall's exact-scan fallback over the store).
            health = b.health()
            assert (health["memories_indexed"], health["index_seq"]) == (1, health["store_seq"])

            porto = b.save("The user's sister moved to Porto last spring", category="event")
            assert recalled_within(a, "where does the sister live now?", porto.memory_id, CATCH_UP_BOUND_S)

            # A deletion travels too: the other replica stops recalling it.
            b.delete(bees.memory_id)
            deadline = time.monotonic() + CATCH_UP_BOUND_S
            while bees.memory_id in {hit.memory_id for hit in a.recall("bees on the roof", top_k=5)}:
                assert time.monotonic() < deadline, "a deleted memory was still recalled on the other replica"
                time.sleep(0.05)
            health = a.health()
            assert health["index_current"]
            assert health["memories_indexed"] == 1


@pytest.mark.parametrize("if_match", [None, '"1"'])
def test_a_delete_whose_reinstatement_meets_the_other_replicas_edit_lands(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    minilm: Embedder,
    monkeypatch: pytest.MonkeyPatch,
    if_match: str | None,
) -> None:
    """DELETE "I moved to Paris" on one replica while the other edits "I live in Berlin",
    which the deletion reinstates, between the first's read and its write: answered 409
    and nothing deleted, though the request (and its If-Match, on Paris) held. It is read
    again and lands, Berlin back with the other replica's edit."""
    with two_replicas(request, tmp_path, minilm) as (first, a, b):
        berlin = save(a, "I live in Berlin")["memory_id"]
        paris = save(a, "I moved to Paris")
        assert paris["superseded"] == [berlin]
        store = first.service.store
        update = store.update
        edited: list[httpx.Response] = []

        def edited_on_b_first(memory: Any, *args: Any, **kwargs: Any) -> int:
            if not edited:
                edited.append(b.patch(f"/v1/memory/{berlin}", json={"metadata": {"checked": True}}))
            return update(memory, *args, **kwargs)

        monkeypatch.setattr(store, "update", edited_on_b_first)
        headers = {"If-Match": if_match} if if_match else {}
        deleted = a.delete(f"/v1/memory/{paris['memory_id']}", headers=headers)
        assert edited[0].status_code == 200, edited[0].text
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["reinstated"] == [berlin]
        back = a.get(f"/v1/memory/{berlin}").json()
        assert (back["status"], back["metadata"]) == ("active", {"checked": True})


def test_a_save_that_supersedes_a_memory_the_other_replica_edits_meanwhile_lands(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "I moved to Paris" saved on one replica while the other edits "I live in Berlin",
    which the save supersedes, between the first's judgment and its write: the store
    refuses the write decided on Berlin's older version, and the save answered 409
    ("another writer changed it first"), nothing saved. It is judged again and lands:
    Paris supersedes Berlin, Berlin keeps the other replica's edit."""
    with two_replicas(request, tmp_path, minilm) as (first, a, b):
        berlin = save(a, "I live in Berlin")["memory_id"]
        store = first.service.store
        insert_linked = store.insert_linked
        edited: list[httpx.Response] = []

        def edited_on_b_first(*args: Any, **kwargs: Any) -> int:
            if not edited:
                edited.append(b.patch(f"/v1/memory/{berlin}", json={"metadata": {"checked": True}}))
            return insert_linked(*args, **kwargs)

        monkeypatch.setattr(store, "insert_linked", edited_on_b_first)
        paris = a.post("/v1/memory/save", json={"content": "I moved to Paris"})
        assert edited[0].status_code == 200, edited[0].text
        assert paris.status_code == 201, paris.text
        assert paris.json()["superseded"] == [berlin]
        back = b.get(f"/v1/memory/{berlin}").json()
        assert (back["status"], back["metadata"], back["version"]) == ("superseded", {"checked": True}, 3)


@pytest.mark.parametrize("if_match", [None, '"2"'])
def test_a_rollback_that_meets_the_other_replicas_edit(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    minilm: Embedder,
    monkeypatch: pytest.MonkeyPatch,
    if_match: str | None,
) -> None:
    """A rollback on one replica while the other edits the memory between the first's
    read and its write answered 409 ("another writer changed it first"), with or
    without If-Match. Without, it is read again and lands over the edit; with one, the
    condition no longer holds: 412 with the current version, as a PATCH gets."""
    with two_replicas(request, tmp_path, minilm) as (first, a, b):
        tea = save(a, "My favourite tea is green tea")["memory_id"]
        patched = a.patch(f"/v1/memory/{tea}", json={"content": "My favourite tea is oolong"})
        assert patched.status_code == 200, patched.text
        store = first.service.store
        update = store.update
        edited: list[httpx.Response] = []

        def edited_on_b_first(*args: Any, **kwargs: Any) -> int:
            if not edited:
                edited.append(b.patch(f"/v1/memory/{tea}", json={"metadata": {"checked": True}}))
            return update(*args, **kwargs)

        monkeypatch.setattr(store, "update", edited_on_b_first)
        headers = {"If-Match": if_match} if if_match else {}
        rolled = a.post(f"/v1/memory/{tea}/rollback", json={"version": 1}, headers=headers)
        assert edited[0].status_code == 200, edited[0].text
        now = b.get(f"/v1/memory/{tea}").json()
        if if_match:
            assert rolled.status_code == 412, rolled.text
            assert rolled.json()["current_version"] == 3
            assert (now["version"], now["content"]) == (3, "My favourite tea is oolong")
        else:
            assert rolled.status_code == 200, rolled.text
            assert (now["version"], now["content"]) == (4, "My favourite tea is green tea")


@pytest.mark.parametrize("other", ["edits", "purges"])
def test_a_namespace_rollback_skips_a_memory_the_other_replica_writes_meanwhile(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: Embedder, monkeypatch: pytest.MonkeyPatch, other: str
) -> None:
    """A namespace rollback on one replica while the other edits one of its memories, or
    purges another of the page, between the first's read and its write: an edit stopped the
    rollback there with a 409, a purge (after the page was read again under the lock) with a
    404, the memories before it rolled back and those after it not. The one written
    meanwhile is skipped, as one changed or purged while the rollback looked is, and the
    rest are rolled back."""
    with two_replicas(request, tmp_path, minilm) as (first, a, b):
        ids = [save(a, text)["memory_id"] for text in ("The boat is red", "The shed is green", "The gate is blue")]
        as_of = a.get(f"/v1/memory/{ids[-1]}").json()["updated_at"]
        time.sleep(0.01)
        for memory_id in ids:
            edit = a.patch(f"/v1/memory/{memory_id}", json={"metadata": {"painted": True}})
            assert edit.status_code == 200, edit.text
        store = first.service.store
        update = store.update
        written: list[str] = []

        def written_on_b_first(memory: Any, *args: Any, **kwargs: Any) -> int:
            if not written:
                if other == "edits":
                    written.append(memory.memory_id)
                    response = b.patch(f"/v1/memory/{memory.memory_id}", json={"metadata": {"checked": True}})
                else:
                    written.append(next(memory_id for memory_id in reversed(ids) if memory_id != memory.memory_id))
                    response = b.delete(f"/v1/memory/{written[0]}", params={"hard": "true"})
                assert response.status_code == 200, response.text
            return update(memory, *args, **kwargs)

        monkeypatch.setattr(store, "update", written_on_b_first)
        rolled = a.post("/v1/memory/rollback", json={"namespace": "default", "as_of": as_of})
        assert rolled.status_code == 200, rolled.text
        assert rolled.json()["skipped_ids"] == written
        assert sorted(rolled.json()["restored_ids"]) == sorted(set(ids) - set(written))
        for memory_id in ids:
            now = b.get(f"/v1/memory/{memory_id}")
            if memory_id not in written:
                assert now.json()["metadata"] == {}
            elif other == "edits":
                assert now.json()["metadata"] == {"checked": True}
            else:
                assert now.status_code == 404


def test_a_save_judged_while_the_other_replica_reinstates_what_it_replaces(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "I moved to Rome" saved on one replica while the other deletes "I moved to Paris",
    which reinstates "I live in Berlin", after the first caught up but before it read its
    candidates: it found Paris on its fast network, read it deleted, and superseded
    nothing; Berlin stayed recalled beside Rome (1 race in 6 through two API processes).
    Its read shows a change its network lacks: it catches up and judges again."""
    with two_replicas(request, tmp_path, minilm) as (first, a, b):
        berlin = save(a, "I live in Berlin")["memory_id"]
        paris = save(a, "I moved to Paris")
        assert paris["superseded"] == [berlin]
        keeper = first.service.keeper
        ensure_current = keeper.ensure_current
        deleted: list[httpx.Response] = []

        def deleted_on_b_after(*args: Any, **kwargs: Any) -> None:
            ensure_current(*args, **kwargs)
            if not deleted:
                deleted.append(b.delete(f"/v1/memory/{paris['memory_id']}"))

        monkeypatch.setattr(keeper, "ensure_current", deleted_on_b_after)
        rome = a.post("/v1/memory/save", json={"content": "I moved to Rome"})
        assert deleted[0].status_code == 200, deleted[0].text
        assert deleted[0].json()["reinstated"] == [berlin]
        assert rome.status_code == 201, rome.text
        assert rome.json()["superseded"] == [berlin]
        for client in (a, b):
            hits = client.post("/v1/memory/recall", json={"query": "Where do I live?"}).json()["memories"]
            assert [hit["content"] for hit in hits] == ["I moved to Rome"]


@pytest.mark.parametrize("other", ["edits it", "purges it"])
def test_a_namespace_rollbacks_second_pass_meets_the_other_replicas_write(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: Embedder, monkeypatch: pytest.MonkeyPatch, other: str
) -> None:
    """A namespace rollback's second pass (a memory it made superseded that nothing hides
    comes back active) while the other replica edits or purges that memory between the
    pass's read and its write: an edit stopped the rollback there with a 409, a purge with
    a 404, the first pass done. The pass reads it again and decides anew: "I live in
    Berlin", superseded at ``as_of`` by "I moved to Paris", purged since, comes back active
    with the other replica's edit kept; purged, it is gone and nothing comes back."""
    with two_replicas(request, tmp_path, minilm) as (first, a, b):
        berlin = save(a, "I live in Berlin")["memory_id"]
        paris = save(a, "I moved to Paris")
        assert paris["superseded"] == [berlin]
        as_of = a.get(f"/v1/memory/{paris['memory_id']}").json()["updated_at"]
        time.sleep(0.01)
        purged = a.delete(f"/v1/memory/{paris['memory_id']}", params={"hard": "true"})
        assert purged.status_code == 200, purged.text
        rollbacks = first.service.rollbacks
        second_pass = rollbacks._not_hidden_under_nothing
        in_second_pass: list[bool] = []

        def flagged(*args: Any, **kwargs: Any) -> None:
            in_second_pass.append(True)
            second_pass(*args, **kwargs)

        monkeypatch.setattr(rollbacks, "_not_hidden_under_nothing", flagged)
        store = first.service.store
        update = store.update
        written: list[httpx.Response] = []

        def written_on_b_first(memory: Any, *args: Any, **kwargs: Any) -> int:
            if in_second_pass and not written:
                path = f"/v1/memory/{memory.memory_id}"
                if other == "edits it":
                    written.append(b.patch(path, json={"metadata": {"checked": True}}))
                else:
                    written.append(b.delete(path, params={"hard": "true"}))
            return update(memory, *args, **kwargs)

        monkeypatch.setattr(store, "update", written_on_b_first)
        rolled = a.post("/v1/memory/rollback", json={"namespace": "default", "as_of": as_of})
        assert written, "the second pass wrote nothing"
        assert written[0].status_code == 200, written[0].text
        assert rolled.status_code == 200, rolled.text
        if other == "purges it":
            assert b.get(f"/v1/memory/{berlin}").status_code == 404
            return
        now = b.get(f"/v1/memory/{berlin}").json()
        assert (now["status"], now["metadata"]) == ("active", {"checked": True})
        for client in (a, b):
            hits = client.post("/v1/memory/recall", json={"query": "Where do I live?"}).json()["memories"]
            assert [hit["content"] for hit in hits] == ["I live in Berlin"]


@pytest.mark.parametrize("other", ["edits what it supersedes again", "restores it first"])
def test_a_restore_that_meets_the_other_replicas_write(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: Embedder, monkeypatch: pytest.MonkeyPatch, other: str
) -> None:
    """Restoring "I moved to Paris" (deleted, which reinstated "I live in Berlin") on one
    replica while the other, between the first's read and its write, edits Berlin (which
    the restore supersedes again) or restores Paris itself: the store refuses the write
    decided on the older version (a 409, before). The restore reads again and decides anew,
    as if the other write had come first: Paris back at one new version; Berlin, changed
    since Paris's deletion reinstated it, stays active with the edit (a restore supersedes
    again only what stands unchanged), or, restored first by the other, superseded."""
    with two_replicas(request, tmp_path, minilm) as (first, a, b):
        berlin = save(a, "I live in Berlin")["memory_id"]
        paris = save(a, "I moved to Paris")["memory_id"]
        deleted = a.delete(f"/v1/memory/{paris}")
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["reinstated"] == [berlin]
        store = first.service.store
        update = store.update
        written: list[httpx.Response] = []

        def written_on_b_first(*args: Any, **kwargs: Any) -> int:
            if not written:
                if other == "restores it first":
                    written.append(b.post(f"/v1/memory/{paris}/restore", json={}))
                else:
                    written.append(b.patch(f"/v1/memory/{berlin}", json={"metadata": {"checked": True}}))
            return update(*args, **kwargs)

        monkeypatch.setattr(store, "update", written_on_b_first)
        restored = a.post(f"/v1/memory/{paris}/restore", json={})
        assert written[0].status_code == 200, written[0].text
        assert restored.status_code == 200, restored.text
        now = b.get(f"/v1/memory/{paris}").json()
        assert (now["status"], now["version"]) == ("active", 3)
        older = b.get(f"/v1/memory/{berlin}").json()
        if other == "restores it first":
            assert (older["status"], older["metadata"]) == ("superseded", {})
        else:
            assert (older["status"], older["metadata"]) == ("active", {"checked": True})
        recalled = ["I moved to Paris"] if other == "restores it first" else ["I live in Berlin", "I moved to Paris"]
        for client in (a, b):
            hits = client.post("/v1/memory/recall", json={"query": "Where do I live?"}).json()["memories"]
            assert sorted(hit["content"] for hit in hits) == recalled


def _next_out(first: LiveServer, memory_id: str) -> list[str]:
    """The memories ``memory_id`` links ``NEXT`` to, as the store holds them."""
    edges = first.service.store.edges(Scope.whole(["default"]), memory_id)
    return sorted(edge.dst for edge in edges if edge.kind == NEXT and edge.src == memory_id)


@pytest.mark.parametrize("on_a", ["a save", "a session's close"])
def test_two_replicas_writing_one_session_at_once_keep_one_chain(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: Embedder, monkeypatch: pytest.MonkeyPatch, on_a: str
) -> None:
    """One replica saves (or promotes a closed session) in a session while the other saves
    in it between the first's judgment and its write. Both linked their memory NEXT after
    the session's end as each had read it: the chain forked (a probe with two API processes
    saving in one session forked it in 5 rounds of 5, and two runs of one session promoted
    at once on two processes forked it, or left two chains, in 2 rounds of 6). The later write finds the other's memory
    and is judged again: it follows it, one chain in the order the writes landed."""
    with two_replicas(request, tmp_path, minilm) as (first, a, b):
        start = save(a, "I have a friend called Anna who keeps bees", session_id="s1")["memory_id"]
        store = first.service.store
        insert_linked = store.insert_linked
        saved_on_b: list[httpx.Response] = []

        def saved_on_b_first(*args: Any, **kwargs: Any) -> int:
            if not saved_on_b:
                body = {"content": "I have a friend called Bruno who sails small boats", "session_id": "s1"}
                saved_on_b.append(b.post("/v1/memory/save", json=body))
            return insert_linked(*args, **kwargs)

        monkeypatch.setattr(store, "insert_linked", saved_on_b_first)
        said = "I have a friend called Clara who paints watercolours."
        if on_a == "a save":
            answer = a.post("/v1/memory/save", json={"content": said, "session_id": "s1"})
            assert answer.status_code == 201, answer.text
            last = answer.json()["memory_id"]
        else:
            appended = a.post("/v1/sessions/s1/messages", json={"messages": [{"role": "user", "content": said}]})
            assert appended.status_code == 200, appended.text
            closed = a.post("/v1/sessions/s1/close", json={})
            assert closed.status_code == 200, closed.text
            [last] = closed.json()["created"]
        assert saved_on_b[0].status_code == 201, saved_on_b[0].text
        middle = saved_on_b[0].json()["memory_id"]
        assert (_next_out(first, start), _next_out(first, middle), _next_out(first, last)) == ([middle], [last], [])


def test_the_same_text_saved_on_two_replicas_at_once_is_kept_once(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same text saved on both replicas, the other's save landing between this one's
    judgment and its write: both were created (8 of 10 races through two API processes
    at once kept it twice). The later write finds the other's memory, is judged again and
    folds into it, as a save after the other's has committed does."""
    with two_replicas(request, tmp_path, minilm) as (first, a, b):
        text = "My neighbour Quentin restores old sailing boats in his garage"
        store = first.service.store
        insert_linked = store.insert_linked
        saved_on_b: list[httpx.Response] = []

        def saved_on_b_first(*args: Any, **kwargs: Any) -> int:
            if not saved_on_b:
                saved_on_b.append(b.post("/v1/memory/save", json={"content": text}))
            return insert_linked(*args, **kwargs)

        monkeypatch.setattr(store, "insert_linked", saved_on_b_first)
        answer = a.post("/v1/memory/save", json={"content": text})
        assert saved_on_b[0].status_code == 201, saved_on_b[0].text
        assert answer.status_code == 200, answer.text
        assert answer.json()["memory_id"] == saved_on_b[0].json()["memory_id"]
        listed = b.get("/v1/memories").json()["memories"]
        assert [m["content"] for m in listed] == [text]
