"""Two API servers over one graph database, in tokens mode, enforce one set of tokens and
blocks and append to one audit chain (server mode keeps them in the graph).

Each server has a data directory of its own and nothing in common with the other but
the database, as two replicas behind a load balancer. A change made through one is
enforced by the other within ``[neo4j] security_cache_seconds`` (here 0.5 s; polled with
a generous bound, as the design promises a bound, not a speed).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from engine.adapters import open_security
from engine.config import load_config
from engine.ports import Embedder
from engine.security import AuditQuery, verify_chain
from tests.api.conftest import ROOT_TOKEN, LiveServer, bearer, new_token, start_server, store_overrides

pytestmark = pytest.mark.slow

CACHE_S = 0.5
# The cache bound plus room for a loaded machine: not a benchmark.
ENFORCED_WITHIN_S = CACHE_S + 3.0
NS = "team:a"


def _status_within(check: httpx.Client, expected: int, bound: float, *, content: str) -> httpx.Response:
    """Save through ``check`` until the answer is ``expected`` (or the bound passes)."""
    deadline = time.monotonic() + bound
    n = 0
    while True:
        n += 1
        response = check.post("/v1/memory/save", json={"content": f"{content} ({n})", "namespace": NS})
        if response.status_code == expected or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


@pytest.mark.parametrize("store", ["arcadedb", "neo4j"])
def test_tokens_blocks_and_the_audit_chain_are_shared_by_replicas(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: Embedder, store: str
) -> None:
    shared = store_overrides(request, store)
    shared["neo4j"] = {**shared["neo4j"], "security_cache_seconds": CACHE_S}
    auth = {"mode": "tokens", "tokens": [{"agent": "root", "token": ROOT_TOKEN, "grants": ["*:a"]}]}
    servers: list[LiveServer] = []
    try:
        servers = [start_server(tmp_path / name, minilm, auth=auth, **shared) for name in ("replica-a", "replica-b")]
        a, b = servers
        # No security.sqlite3 in either data directory: the graph holds it all.
        assert not list((tmp_path / "replica-a").glob("security*")) and not list(
            (tmp_path / "replica-b").glob("security*")
        )

        # A token created through one replica works on the other at once.
        alice = new_token(a, "alice", "team:*:rw")
        with bearer(b, alice) as on_b:
            saved = on_b.post("/v1/memory/save", json={"content": "The user likes green tea", "namespace": NS})
            assert saved.status_code == 201, saved.text

            # Revoked through A: refused on B within the bound.
            with bearer(a, ROOT_TOKEN) as root_a:
                (token,) = [t for t in root_a.get("/v1/admin/tokens").json()["tokens"] if t["agent"] == "alice"]
                assert root_a.delete(f"/v1/admin/tokens/{token['token_id']}").status_code == 200
            refused = _status_within(on_b, 401, ENFORCED_WITHIN_S, content="A note after the revoke")
            assert refused.status_code == 401, refused.text

        # A source blocked through B: its writes are refused on A within the bound.
        mallory = new_token(b, "mallory", "team:*:rw")
        with bearer(a, mallory) as on_a:
            assert _status_within(on_a, 201, 0, content="Forward the invoices").status_code == 201
            with bearer(b, ROOT_TOKEN) as root_b:
                blocked = root_b.post("/v1/admin/blocks", json={"kind": "agent", "value": "mallory"})
                assert blocked.status_code == 201, blocked.text
            refused = _status_within(on_a, 403, ENFORCED_WITHIN_S, content="Forward the invoices again")
            assert refused.status_code == 403 and "blocked" in refused.json()["detail"], refused.text
        with bearer(a, ROOT_TOKEN) as root_a:
            assert [blk["value"] for blk in root_a.get("/v1/admin/blocks").json()["blocks"]] == ["mallory"]

        # Both replicas appended to one chain, and it verifies.
        config = load_config(data_dir=str(tmp_path / "verifier"), **shared)
        security = open_security(config)
        try:
            report = verify_chain(security.audit_rows())
            assert report.ok, report.problems
            actors = {row.entry["actor"] for row in security.audit(AuditQuery(limit=1000))}
            assert {"root", "alice", "mallory"} <= actors
            assert report.entries == len(security.audit(AuditQuery(limit=1000)))
        finally:
            security.close()
        with bearer(a, ROOT_TOKEN) as root_a, bearer(b, ROOT_TOKEN) as root_b:
            seen_a = root_a.get("/v1/admin/audit", params={"limit": 500}).json()["entries"]
            seen_b = root_b.get("/v1/admin/audit", params={"limit": 500}).json()["entries"]
        # Each replica reads the one log: B's read sees everything A's did, and A's read itself.
        assert {e["seq"] for e in seen_a} < {e["seq"] for e in seen_b}
    finally:
        for live in servers:
            live.stop()
