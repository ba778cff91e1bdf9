"""Tokens mode over real HTTP: 401 without a valid token, 403 outside the grants (the
same answer whether or not the target exists), admin token management, and the
audit entries requests leave. Visibility and attacks on isolation: test_isolation.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from engine import portability
from engine.ports import Embedder
from engine.security import content_sha256, verify_chain
from tests.api.conftest import ROOT_TOKEN, LiveServer, bearer, new_token


def test_requests_without_a_valid_token_get_401(secured: LiveServer) -> None:
    for token in (None, "not-a-token"):
        with bearer(secured, token) as api:
            for response in (
                api.post("/v1/memory/save", json={"content": "x", "namespace": "a"}),
                api.get("/v1/memories", params={"namespace": "a"}),
                api.get("/v1/admin/tokens"),
                api.get("/health"),
            ):
                assert response.status_code == 401
                assert response.headers["www-authenticate"].startswith("Bearer")
    with bearer(secured, None) as api:
        assert api.get("/schema/openapi.json").status_code == 200


def test_403_outside_the_grants_says_nothing_about_the_target(secured: LiveServer) -> None:
    alice = new_token(secured, "alice", "user:alice:rw")
    bob = new_token(secured, "bob", "user:bob:rw", "shared:*:r")
    with bearer(secured, alice) as api:
        saved = api.post("/v1/memory/save", json={"content": "Alice's PIN hint is her cat", "namespace": "user:alice"})
        assert saved.status_code == 201
    memory_id = saved.json()["memory_id"]
    ns = {"namespace": "user:alice"}
    with bearer(secured, bob) as api:
        answers = {}
        for target in (memory_id, "m-does-not-exist"):
            answers[target] = [
                api.get(f"/v1/memory/{target}", params=ns),
                api.get(f"/v1/memory/{target}/history", params=ns),
                api.get(f"/v1/memory/{target}/graph", params=ns),
                api.get(f"/v1/memory/{target}/chain", params=ns),
                api.patch(f"/v1/memory/{target}", json={**ns, "content": "changed"}),
                api.delete(f"/v1/memory/{target}", params=ns),
                api.post(f"/v1/memory/{target}/restore", json=ns),
            ]
        for existing, missing in zip(answers[memory_id], answers["m-does-not-exist"], strict=True):
            assert existing.status_code == missing.status_code == 403
            assert existing.json() == missing.json()
        # Reads outside the grants see what every agent sees there: public memories only.
        recalled = api.post("/v1/memory/recall", json={"query": "PIN", "namespaces": ["user:bob", "user:alice"]})
        assert recalled.status_code == 200 and recalled.json()["memories"] == []
        assert api.get("/v1/memories", params=ns).json()["memories"] == []
        assert api.get("/v1/entities/cat/memories", params=ns).json()["memories"] == []
        assert api.get("/v1/entities/memories", params={**ns, "name": "cat"}).json()["memories"] == []
        assert "PIN" not in api.get("/v1/export", params=ns).text
        for response in (
            api.post("/v1/memory/save", json={"content": "planted", "namespace": "user:alice"}),
            api.post("/v1/memory/save", json={"content": "read-only here", "namespace": "shared:team"}),
            api.post("/v1/memory/consolidate", json={"namespace": "user:bob"}),
            api.post("/v1/import", content=b"{}"),
            api.get("/v1/admin/tokens"),
            api.get("/v1/admin/audit"),
            api.get("/v1/admin/reembed"),
        ):
            assert response.status_code == 403, (response.request.url, response.text)
        assert api.post("/v1/memory/save", json={"content": "mine", "namespace": "user:bob"}).status_code == 201
        assert api.get("/v1/memories", params={"namespace": "shared:team"}).status_code == 200
    with bearer(secured, alice) as api:
        assert api.get(f"/v1/memory/{memory_id}", params=ns).json()["content"] == "Alice's PIN hint is her cat"


def test_the_memory_actor_is_the_token_agent_not_what_the_body_claims(secured: LiveServer) -> None:
    alice = new_token(secured, "alice", "user:alice:rw")
    with bearer(secured, alice) as api:
        saved = api.post(
            "/v1/memory/save", json={"content": "I like tea", "namespace": "user:alice", "actor": "root"}
        ).json()
        memory = api.get(f"/v1/memory/{saved['memory_id']}", params={"namespace": "user:alice"}).json()
    assert memory["actor"] == "alice"


def test_admins_list_and_revoke_tokens_and_a_revoked_token_gets_401(secured: LiveServer) -> None:
    carol = new_token(secured, "carol", "notes:rw")
    with bearer(secured, carol) as api:
        assert api.get("/v1/memories", params={"namespace": "notes"}).status_code == 200
    with bearer(secured, ROOT_TOKEN) as root:
        tokens = root.get("/v1/admin/tokens").json()["tokens"]
        assert carol not in str(tokens)
        (entry,) = [t for t in tokens if t["agent"] == "carol"]
        assert entry["grants"] == ["notes:rw"] and entry["revoked_at"] is None
        assert root.delete(f"/v1/admin/tokens/{entry['token_id']}").status_code == 200
        assert root.delete(f"/v1/admin/tokens/{entry['token_id']}").status_code == 404
        bad = root.post("/v1/admin/tokens", json={"agent": "dave", "grants": ["notes:rx"]})
        assert bad.status_code == 422
        for never in ("a b:r", "\u0000:r", "n" * 5000 + ":r"):  # no namespace could ever be named so
            bad = root.post("/v1/admin/tokens", json={"agent": "dave", "grants": ["notes:r", never]})
            assert bad.status_code == 422 and "it could never match" in bad.json()["detail"], bad.text
            assert len(bad.text) < 1000
        assert "dave" not in str(root.get("/v1/admin/tokens").json())
        # The actors of the service's, the commands', refused requests' and local mode's entries.
        for reserved in ("twinmem", "cli", "anonymous", "local", "Twinmem"):
            bad = root.post("/v1/admin/tokens", json={"agent": reserved, "grants": ["notes:r"]})
            assert bad.status_code == 422 and bad.json()["field"] == "agent", bad.text
            assert f"the agent name {reserved!r} is reserved" in bad.json()["detail"]
        assert [t["agent"] for t in root.get("/v1/admin/tokens").json()["tokens"]] == ["root", "carol"]
    with bearer(secured, carol) as api:
        assert api.get("/v1/memories", params={"namespace": "notes"}).status_code == 401


def test_requests_leave_a_chained_audit_trail_admins_can_filter(secured: LiveServer) -> None:
    erin = new_token(secured, "erin", "erin:rw")
    with bearer(secured, erin) as api:
        saved = api.post("/v1/memory/save", json={"content": "Erin prefers mornings", "namespace": "erin"})
        request_id = saved.headers["x-request-id"]
        recalled = api.post("/v1/memory/recall", json={"query": "when does Erin work best", "namespace": "erin"})
        assert recalled.status_code == 200
        assert api.post("/v1/memory/save", json={"content": "x", "namespace": "root-only"}).status_code == 403
        assert api.delete(f"/v1/memory/{saved.json()['memory_id']}", params={"namespace": "erin"}).status_code == 200
        said = {"messages": [{"role": "user", "content": "What should Erin do first today?"}], "namespace": "erin"}
        assert api.post("/v1/sessions/day-1/messages", json=said).status_code == 200
        context = api.post("/v1/sessions/day-1/context", json={"namespace": "erin", "budget_tokens": 500}).json()
    with bearer(secured, ROOT_TOKEN) as root:
        entries: list[dict[str, Any]] = root.get("/v1/admin/audit", params={"actor": "erin"}).json()["entries"]
        # The prompt context's recall, its query made of the session's messages, is hashed too.
        assert entries[0]["content_sha256"] == content_sha256(
            context["query"] if context.get("focus") is None else f"{context['query']}\n{context['focus']}"
        )
        entries = entries[2:]
        assert [(e["action"], e["outcome"]) for e in entries] == [
            ("delete", "ok"),
            ("save", "denied"),
            ("recall", "ok"),
            ("save", "ok"),
        ]
        save = entries[-1]
        assert save["request_id"] == request_id and save["namespaces"] == ["erin"]
        assert save["memory_ids"] == [saved.json()["memory_id"]]
        assert save["content_sha256"] == content_sha256("Erin prefers mornings")
        assert entries[1]["namespaces"] == ["root-only"]
        only_saves = root.get("/v1/admin/audit", params={"action": "save", "namespace": "erin"}).json()["entries"]
        assert [e["request_id"] for e in only_saves] == [request_id]
        admin = root.get("/v1/admin/audit", params={"actor": "root", "action": "admin"}).json()["entries"]
        assert any(e["status_code"] == 201 for e in admin)  # the token creation
    with bearer(secured, None) as anonymous:
        assert anonymous.get("/v1/memories").status_code == 401
    rows = list(secured.app.state.security.audit_rows())
    assert verify_chain(rows).ok
    assert rows[-1].entry["actor"] == "anonymous" and rows[-1].entry["outcome"] == "unauthenticated"


def test_every_endpoint_is_classified_for_authentication_and_audit(tmp_path: Any) -> None:
    from api.app import create_app
    from api.auth import ACTIONS
    from engine.config import load_config

    app = create_app(load_config(env={}, data_dir=str(tmp_path)))
    names = {
        handler.handler_name
        for route in app.routes
        for handler in getattr(route, "route_handlers", ())
        if not route.path.startswith("/schema")
    }
    # An unlisted handler is admin-only; listing it is the decision to open it.
    assert names <= set(ACTIONS), sorted(names - set(ACTIONS))


def test_a_read_grant_reads_an_entitys_memories_by_either_form(secured: LiveServer) -> None:
    carol = new_token(secured, "carol", "user:carol:rw")
    ns = {"namespace": "user:carol"}
    with bearer(secured, carol) as api:
        saved = api.post("/v1/memory/save", json={**ns, "content": "The router speaks TCP/IP", "entities": ["TCP/IP"]})
        assert saved.status_code == 201
        by_query = api.get("/v1/entities/memories", params={**ns, "name": "TCP/IP"})
        assert by_query.status_code == 200
        assert [m["memory_id"] for m in by_query.json()["memories"]] == [saved.json()["memory_id"]]


def save_shelves(api: httpx.Client, namespace: str, *colours: str) -> None:
    """Saves "Shelf n holds the <colour> boxes" in ``namespace``, one memory a colour."""
    saved = api.post(
        "/v1/memory/save_batch",
        json={
            "namespace": namespace,
            "memories": [{"content": f"Shelf {n} holds the {w} boxes"} for n, w in enumerate(colours)],
        },
    )
    assert saved.status_code == 200, saved.text


def export_paused_at_its_second_page(
    secured: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Event, threading.Event]:
    """Exports go one memory a page and wait before their second page: the first event is
    set when an export gets there, and it goes on once the second is set."""
    monkeypatch.setattr(portability, "EXPORT_PAGE", 1)
    store = secured.service.store
    first_page, go_on = threading.Event(), threading.Event()
    list_page = store.list_page

    def paused(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("cursor") is not None and kwargs.get("limit") == 1:  # the export's second page
            first_page.set()
            assert go_on.wait(30)
        return list_page(*args, **kwargs)

    monkeypatch.setattr(store, "list_page", paused)
    return first_page, go_on


def test_a_token_revoked_mid_request_stops_its_export_and_its_import(
    secured: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A revocation holds for requests already under way: a streamed export stops at the next
    page (the file then lacks its end line), and an import whose body was still arriving
    writes nothing (401)."""
    frank = new_token(secured, "frank", "bulk:rw")
    with bearer(secured, frank) as api:
        save_shelves(api, "bulk", "red", "blue", "green", "grey")
    with bearer(secured, ROOT_TOKEN) as root:
        (token_id,) = [t["token_id"] for t in root.get("/v1/admin/tokens").json()["tokens"] if t["agent"] == "frank"]
    first_page, go_on = export_paused_at_its_second_page(secured, monkeypatch)
    with httpx.stream(
        "GET", secured.url + "/v1/export", params={"namespace": "bulk"}, headers={"Authorization": f"Bearer {frank}"}
    ) as response:
        assert response.status_code == 200
        assert first_page.wait(30)  # the header and the first memory are out; the export waits for its second page
        with bearer(secured, ROOT_TOKEN) as root:
            assert root.delete(f"/v1/admin/tokens/{token_id}").status_code == 200
        go_on.set()
        lines = [json.loads(line) for line in response.read().splitlines()]
        export_id = response.headers["x-request-id"]
    assert lines[0]["kind"] == "header"
    assert [line["kind"] for line in lines[1:]] == ["memory"], lines  # not the other three, nor the end line
    # The log said "ok" with the first byte; a second entry of the request says it was cut.
    with bearer(secured, ROOT_TOKEN) as root:
        audited = root.get("/v1/admin/audit", params={"actor": "frank", "action": "export"}).json()["entries"]
    assert [(e["request_id"], e["outcome"], e["status_code"]) for e in audited] == [
        (export_id, "unauthenticated", 401),
        (export_id, "ok", 200),
    ]
    assert audited[0]["detail"] == "cut off before its end: the token was revoked during the export"

    george = new_token(secured, "george", "bulk:rw")
    with bearer(secured, ROOT_TOKEN) as root:
        (george_id,) = [t["token_id"] for t in root.get("/v1/admin/tokens").json()["tokens"] if t["agent"] == "george"]

    def upload() -> Iterator[bytes]:
        yield json.dumps({"content": "Shelf 8 is full"}).encode() + b"\n"
        with bearer(secured, ROOT_TOKEN) as root:  # revoked while the body is still arriving
            assert root.delete(f"/v1/admin/tokens/{george_id}").status_code == 200
        yield json.dumps({"content": "Shelf 9 is empty"}).encode() + b"\n"

    with bearer(secured, george) as api:
        imported = api.post("/v1/import", params={"namespace": "bulk", "format": "jsonl"}, content=upload())
    assert imported.status_code == 401, imported.text
    with bearer(secured, ROOT_TOKEN) as root:
        listed = root.get("/v1/memories", params={"namespace": "bulk"}).json()["memories"]
    assert len(listed) == 4 and not {"Shelf 8 is full", "Shelf 9 is empty"} & {m["content"] for m in listed}


def test_the_audit_digest_of_a_write_cannot_recover_what_the_guard_redacted(secured: LiveServer) -> None:
    """A memory is stored with its phone number redacted; were the audit entry the SHA-256 of the
    text as sent, whoever reads the log and the memory could try every number in the
    placeholder's place (some billions, minutes of hashing) until the digest matched. The
    digest is of the text with its personal data replaced as the guard replaces it."""
    ivy = new_token(secured, "ivy", "ivy:rw")
    said = "Ivy's phone number is 138 1234 5678"
    with bearer(secured, ivy) as api:
        saved = api.post("/v1/memory/save", json={"content": said, "namespace": "ivy"})
        assert saved.status_code == 201, saved.text
        stored = saved.json()["memory"]["content"]
        assert "5678" not in stored
        batch = {"namespace": "ivy", "memories": [{"content": "Ivy's card is 4111 1111 1111 1111"}]}
        assert api.post("/v1/memory/save_batch", json=batch).status_code == 200
        patch = {"namespace": "ivy", "content": "Ivy's new phone number is 139 8765 4321"}
        assert api.patch(f"/v1/memory/{saved.json()['memory_id']}", json=patch).status_code == 200
    with bearer(secured, ROOT_TOKEN) as root:
        entries = root.get("/v1/admin/audit", params={"actor": "ivy"}).json()["entries"]
    update, batch_save, save = entries[:3]
    assert save["content_sha256"] == content_sha256(stored) != content_sha256(said)
    assert batch_save["content_sha256"] == content_sha256("Ivy's card is [bank_card]")
    assert update["content_sha256"] == content_sha256("Ivy's new phone number is [phone]")


def test_a_token_taken_out_of_the_config_file_no_longer_works_after_a_restart(
    server_factory: Callable[..., LiveServer], minilm: Embedder
) -> None:
    """Tokens the config file declares follow the file: one the operator takes out of it (a
    leaked admin token, say) stops working at the next start, as one revoked does."""
    ops = "ops-token-declared-in-the-config"
    root = {"agent": "root", "token": ROOT_TOKEN, "grants": ["*:a"]}
    first = server_factory(
        minilm, auth={"mode": "tokens", "tokens": [root, {"agent": "ops", "token": ops, "grants": ["*:a"]}]}
    )
    with bearer(first, ops) as api:
        assert api.get("/v1/admin/tokens").status_code == 200
    first.stop()
    second = server_factory(minilm, auth={"mode": "tokens", "tokens": [root]})
    with bearer(second, ops) as api:
        assert api.get("/v1/admin/tokens").status_code == 401
        assert api.get("/v1/memories", params={"namespace": "a"}).status_code == 401
    with bearer(second, ROOT_TOKEN) as api:
        assert api.get("/v1/admin/tokens").status_code == 200


def test_a_token_past_its_expiry_is_refused_with_a_clear_401_listed_and_audited(secured: LiveServer) -> None:
    """Tokens never expired. One may now carry ``expires_at``: until then it works as any
    other; from then on it gets 401 saying it expired, the listing shows when and that it has,
    and the audit log records the refusal under the token's agent. One without it never expires."""
    import time
    from datetime import UTC, datetime, timedelta

    with bearer(secured, ROOT_TOKEN) as root:
        past = root.post(
            "/v1/admin/tokens",
            json={
                "agent": "kim",
                "grants": ["kim:rw"],
                "expires_at": (datetime.now(UTC) - timedelta(minutes=1)).isoformat(),
            },
        )
        assert past.status_code == 422 and "is not in the future" in past.json()["detail"], past.text
        deadline = datetime.now(UTC) + timedelta(seconds=3)
        created = root.post(
            "/v1/admin/tokens", json={"agent": "kim", "grants": ["kim:rw"], "expires_at": deadline.isoformat()}
        )
        assert created.status_code == 201, created.text
        token, token_id = created.json()["token"], created.json()["token_id"]
        assert created.json()["expires_at"] is not None and created.json()["expired"] is False
        forever = new_token(secured, "lee", "lee:rw")
        with bearer(secured, token) as kim:
            assert kim.post("/v1/memory/save", json={"content": "Kim likes tea", "namespace": "kim"}).status_code == 201
            time.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds()) + 0.2)
            refused = kim.get("/v1/memories", params={"namespace": "kim"})
        assert refused.status_code == 401, refused.text
        assert "the bearer token expired at" in refused.json()["detail"]
        with bearer(secured, forever) as lee:
            assert lee.get("/v1/memories", params={"namespace": "lee"}).status_code == 200
        listed = {t["token_id"]: t for t in root.get("/v1/admin/tokens").json()["tokens"]}
        assert listed[token_id]["expired"] is True and listed[token_id]["expires_at"] is not None
        assert [t["expires_at"] for t in listed.values() if t["agent"] in ("root", "lee")] == [None, None]
        entries = root.get("/v1/admin/audit", params={"actor": "kim"}).json()["entries"]
    refusal = entries[0]
    assert (refusal["outcome"], refusal["status_code"]) == ("unauthenticated", 401), refusal
    assert f"token {token_id} expired at" in refusal["detail"]


def test_a_token_expiring_mid_export_cuts_it_and_the_audit_says_it_expired(
    secured: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export whose token expires between two pages stops there, as on a revocation; its
    audit entry said "the token was revoked during the export", which it was not (the token
    list shows it never revoked): it now says when the token expired."""
    import time
    from datetime import UTC, datetime, timedelta

    deadline = datetime.now(UTC) + timedelta(seconds=3)
    with bearer(secured, ROOT_TOKEN) as root:
        created = root.post(
            "/v1/admin/tokens", json={"agent": "ida", "grants": ["shelf:rw"], "expires_at": deadline.isoformat()}
        )
    assert created.status_code == 201, created.text
    token = created.json()["token"]
    with bearer(secured, token) as api:
        save_shelves(api, "shelf", "red", "blue", "green")
    first_page, go_on = export_paused_at_its_second_page(secured, monkeypatch)
    with httpx.stream(
        "GET", secured.url + "/v1/export", params={"namespace": "shelf"}, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status_code == 200
        assert first_page.wait(30)
        time.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds()) + 0.2)
        go_on.set()
        lines = [json.loads(line) for line in response.read().splitlines()]
    assert [line["kind"] for line in lines] == ["header", "memory"], lines
    with bearer(secured, ROOT_TOKEN) as root:
        audited = root.get("/v1/admin/audit", params={"actor": "ida", "action": "export"}).json()["entries"]
        listed = {t["token_id"]: t for t in root.get("/v1/admin/tokens").json()["tokens"]}
    assert (audited[0]["outcome"], audited[0]["status_code"]) == ("unauthenticated", 401), audited
    assert (
        audited[0]["detail"]
        == f"cut off before its end: the token expired at {created.json()['expires_at']} during the export"
    )
    assert listed[created.json()["token_id"]]["revoked_at"] is None
