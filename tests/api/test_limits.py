"""Configurable limits over real HTTP: a recall query's length, a per-token request rate
(429 with Retry-After), and failed authentications per client address (429, counted in the
audit log rather than logged one by one). A real server on a real SQLite file, the
deterministic embedder."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.adapters.security_store import SECURITY_FILE, SqliteSecurityStore
from engine.security import verify_chain
from tests.api.conftest import LiveServer, start_server
from tests.conftest import HashingEmbedder

pytestmark = pytest.mark.slow

TOKEN_A = "token-of-agent-a-for-the-limit-tests"
TOKEN_B = "token-of-agent-b-for-the-limit-tests"


def test_a_recall_query_longer_than_the_limit_is_a_422(tmp_path: Path) -> None:
    live = start_server(tmp_path / "data", HashingEmbedder(), limits={"max_query_chars": 50})
    try:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            http.post("/v1/memory/save", json={"content": "The user keeps bees"})
            refused = http.post("/v1/memory/recall", json={"query": "bees " * 11})
            assert refused.status_code == 422, refused.text
            assert refused.json()["field"] == "query"
            assert "55 characters, at most 50" in refused.json()["detail"]
            fine = http.post("/v1/memory/recall", json={"query": "b" * 50})
            assert fine.status_code == 200, fine.text
    finally:
        live.stop()


def test_the_default_query_limit_refuses_a_megabyte_query(tmp_path: Path) -> None:
    live = start_server(tmp_path / "data", HashingEmbedder())
    try:
        refused = httpx.post(live.url + "/v1/memory/recall", json={"query": "word " * 200_000}, timeout=60)
        assert refused.status_code == 422, refused.text
        assert "at most 4000" in refused.json()["detail"]
    finally:
        live.stop()


def test_each_token_has_its_own_request_rate(tmp_path: Path) -> None:
    tokens = [
        {"agent": "a", "token": TOKEN_A, "grants": ["*:a"]},
        {"agent": "b", "token": TOKEN_B, "grants": ["*:a"]},
    ]
    live = start_server(
        tmp_path / "data",
        HashingEmbedder(),
        auth={"mode": "tokens", "tokens": tokens},
        limits={"requests_per_minute": 1, "request_burst": 2},
    )
    try:
        a = httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {TOKEN_A}"}, timeout=60)
        b = httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {TOKEN_B}"}, timeout=60)
        with a, b:
            assert [a.get("/v1/memories").status_code for _ in range(2)] == [200, 200]
            limited = a.get("/v1/memories")
            assert limited.status_code == 429, limited.text
            assert 1 <= int(limited.headers["retry-after"]) <= 60
            assert "too many requests from 'a'" in limited.json()["detail"]
            assert b.get("/v1/memories").status_code == 200  # another token, another bucket
            saved = a.post("/v1/memory/save", json={"content": "refused before it is read"})
            assert saved.status_code == 429
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {TOKEN_B}"}, timeout=60) as b:
            assert b.get("/v1/memories").json()["memories"] == []
    finally:
        live.stop()


def _from(live_url: str, address: str, token: str | None) -> httpx.Client:
    """A client whose connections come from ``address`` (any 127.x.y.z reaches the loopback)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=live_url, headers=headers, transport=transport, timeout=60)


def _failed_auth_server(tmp_path: Path, **limits: Any) -> LiveServer:
    tokens = [{"agent": "a", "token": TOKEN_A, "grants": ["*:a"]}]
    return start_server(
        tmp_path / "data",
        HashingEmbedder(),
        auth={"mode": "tokens", "tokens": tokens},
        # One failure back every 1,000 s: none comes back during the test.
        limits={"failed_auth_burst": 3, "failed_auths_per_second": 0.001, **limits},
    )


def _reported(live: LiveServer, expected: int) -> list[dict[str, Any]]:
    """The entries that count failed authentications not logged one by one, once they add up to
    ``expected`` (the server reports them every ``failed_auth_report_seconds``)."""
    deadline = time.monotonic() + 30
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {TOKEN_A}"}, timeout=60) as admin:
        while True:
            entries: list[dict[str, Any]] = admin.get(
                "/v1/admin/audit", params={"action": "authenticate", "limit": 1000}
            ).json()["entries"]
            if sum(entry["report"]["failures"] for entry in entries) >= expected or time.monotonic() > deadline:
                return entries
            time.sleep(0.1)


def test_failed_authentications_are_limited_per_address_and_counted_not_logged(tmp_path: Path) -> None:
    """50 clients with random tokens made 11,173 requests in 20 s, each a 401 and an audit
    entry, and another token's requests slowed from 2.4 ms to 157 ms (median)."""
    live = _failed_auth_server(tmp_path, failed_auth_report_seconds=0.2)
    try:
        with _from(live.url, "127.0.0.2", "not-a-token") as bad:
            assert [bad.get("/v1/memories").status_code for _ in range(3)] == [401, 401, 401]
            limited = bad.get("/v1/memories")
            assert limited.status_code == 429, limited.text
            assert 900 <= int(limited.headers["retry-after"]) <= 1000
            assert "too many failed authentications from 127.0.0.2" in limited.json()["detail"]
            assert all(bad.post("/v1/memory/save", json={"content": "x"}).status_code == 429 for _ in range(50))
        with _from(live.url, "127.0.0.2", None) as anonymous:  # no token at all is a failure too
            assert anonymous.get("/v1/memories").status_code == 429
        with _from(live.url, "127.0.0.2", TOKEN_A) as good:  # a valid token from that address still works
            assert good.get("/v1/memories").status_code == 200
            assert good.post("/v1/memory/save", json={"content": "The user keeps bees"}).status_code == 201
        with _from(live.url, "127.0.0.3", "another-bad-token") as other:  # another address, its own budget
            assert other.get("/v1/memories").status_code == 401
        reports = _reported(live, 52)
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {TOKEN_A}"}, timeout=60) as admin:
            entries = admin.get("/v1/admin/audit", params={"actor": "anonymous", "limit": 1000}).json()["entries"]
    finally:
        live.stop()
    one_by_one = [entry for entry in entries if entry["action"] != "authenticate"]
    assert sorted(entry["status_code"] for entry in one_by_one) == [401, 401, 401, 401]  # 3 from .2, 1 from .3
    assert sum(entry["report"]["failures"] for entry in reports) == 52  # 1 + 50 + 1 answered 429, counted
    assert all(entry["outcome"] == "unauthenticated" and entry["actor"] == "anonymous" for entry in reports)
    assert sum(entry["report"]["by_address"].get("127.0.0.2", 0) for entry in reports) == 52
    assert "127.0.0.3" not in str(reports)


def test_the_log_holds_a_bounded_number_of_failures_from_many_addresses(tmp_path: Path) -> None:
    """Each address has its own small budget, so many addresses could still fill the log one
    401 at a time: past a budget for all addresses together, failures are counted, not logged."""
    live = _failed_auth_server(tmp_path, failed_auth_report_seconds=0.2)
    addresses = [f"127.0.1.{n}" for n in range(1, 41)]
    try:
        statuses: list[int] = []
        for address in addresses:
            with _from(live.url, address, "not-a-token") as bad:
                statuses += [bad.get("/v1/memories").status_code for _ in range(4)]
        assert statuses.count(401) == 3 * len(addresses) and statuses.count(429) == len(addresses)
        reports = _reported(live, 4 * len(addresses) - 15)
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {TOKEN_A}"}, timeout=60) as admin:
            entries = admin.get("/v1/admin/audit", params={"actor": "anonymous", "limit": 1000}).json()["entries"]
    finally:
        live.stop()
    one_by_one = [entry for entry in entries if entry["action"] != "authenticate"]
    assert len(one_by_one) == 15  # five addresses' budgets for all of them together
    assert sum(entry["report"]["failures"] for entry in reports) == 4 * len(addresses) - 15


def test_failures_counted_when_the_server_stops_are_logged_as_it_stops(tmp_path: Path) -> None:
    live = _failed_auth_server(tmp_path, failed_auth_report_seconds=3600)
    try:
        with _from(live.url, "127.0.0.4", "not-a-token") as bad:
            assert [bad.get("/v1/memories").status_code for _ in range(6)] == [401] * 3 + [429] * 3
    finally:
        live.stop()
    security = SqliteSecurityStore(tmp_path / "data" / SECURITY_FILE)
    security.open()
    try:
        (report,) = [row.entry for row in security.audit_rows() if row.entry["action"] == "authenticate"]
        assert verify_chain(security.audit_rows()).ok
    finally:
        security.close()
    assert report["report"]["by_address"] == {"127.0.0.4": 3}
    assert report["status_code"] == 429 and "3 failed authentications not logged one by one" in report["detail"]


def test_health_neither_spends_nor_is_refused_by_the_request_rate(tmp_path: Path) -> None:
    """A liveness probe carrying an agent's token took one request of its budget each time,
    and once the agent had spent it the probe got 429: the orchestrator restarted a healthy
    service, or the probe starved the agent. It is still authenticated: without a valid token
    it is a failed authentication like any other."""
    live = start_server(
        tmp_path / "data",
        HashingEmbedder(),
        auth={"mode": "tokens", "tokens": [{"agent": "a", "token": TOKEN_A, "grants": ["user:rw"]}]},
        limits={"requests_per_minute": 1, "request_burst": 2, "failed_auth_burst": 2, "failed_auths_per_second": 0.001},
    )
    try:
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {TOKEN_A}"}, timeout=60) as a:
            assert [a.get("/health").json() for _ in range(5)] == [{"status": "ok"}] * 5
            assert [a.get("/v1/memories").status_code for _ in range(3)] == [200, 200, 429]  # the whole budget left
            assert a.get("/health").status_code == 200  # and answered once it is spent
        with _from(live.url, "127.0.0.2", None) as anonymous:
            assert [anonymous.get("/health").status_code for _ in range(3)] == [401, 401, 429]
        with _from(live.url, "127.0.0.3", "not-a-token-of-anyone") as wrong:
            assert wrong.get("/health").status_code == 401
    finally:
        live.stop()
