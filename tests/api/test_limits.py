"""Configurable limits over real HTTP: a recall query's length, and a per-token request rate
(429 with Retry-After). A real server on a real SQLite file, the deterministic embedder."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.api.conftest import start_server
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
