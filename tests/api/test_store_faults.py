"""A damaged SQLite page is found at start-up (``PRAGMA quick_check``) and reported by
/health, instead of surfacing only when an export reaches it. A real server, a real file."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.adapters import DB_FILE
from tests.api.conftest import LiveServer, saves_until_refused, start_server
from tests.conftest import HashingEmbedder

pytestmark = pytest.mark.slow


def _filled(data_dir: Path) -> None:
    live = start_server(data_dir, HashingEmbedder())
    try:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            memories = [{"content": f"note {n}: the meeting moved to room {n * 3}"} for n in range(200)]
            assert http.post("/v1/memory/save_batch", json={"memories": memories}).status_code == 200
            health = _checked_health(http)
            assert (health["status"], health["store_integrity"]) == ("ok", "ok")
    finally:
        live.stop()


def _checked_health(http: httpx.Client) -> dict[str, Any]:
    """/health once the start-up integrity check (run beside the service) has finished."""
    deadline = time.monotonic() + 60
    while True:
        health: dict[str, Any] = http.get("/health").json()
        if health["store_integrity"] != "checking" or time.monotonic() > deadline:
            return health
        time.sleep(0.05)


def _damage_history(db: Path) -> None:
    """Scramble the cells of leaf pages of the version history: pages start-up never reads."""
    with sqlite3.connect(db) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        leaves = [
            row[0]
            for row in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'memory_versions' AND pagetype = 'leaf' ORDER BY pageno"
            )
        ]
    conn.close()
    assert leaves
    with db.open("r+b") as fh:
        for page in leaves[len(leaves) // 2 :]:
            fh.seek((page - 1) * page_size + 100)
            fh.write(b"\x07" * 600)


def test_a_damaged_page_is_reported_by_health_and_the_rest_still_serves(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    _filled(data_dir)
    _damage_history(data_dir / DB_FILE)
    live = start_server(data_dir, HashingEmbedder())
    try:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            health = _checked_health(http)
            assert health["status"] == "degraded"
            assert health["store_integrity"] != "ok" and health["store_integrity"]
            hits = http.post("/v1/memory/recall", json={"query": "meeting moved to room 42"})
            assert hits.status_code == 200, hits.text
    finally:
        live.stop()


def _pragma(live: LiveServer, statement: str) -> None:
    """Inject a fault into the running server's own SQLite connection (under the store's lock)."""
    store = live.service.store
    with store._lock:  # type: ignore[attr-defined]
        store._db.execute(statement)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("fault", "cleared", "message"),
    [
        ("PRAGMA query_only = ON", "PRAGMA query_only = OFF", "readonly"),
        # The file may not grow past the pages it has: writes fail once its free space is used.
        ("PRAGMA max_page_count = 1", "PRAGMA max_page_count = 1073741823", "full"),
    ],
    ids=["read-only", "disk-full"],
)
def test_a_store_that_refuses_writes_is_a_503_and_recovers_when_the_fault_clears(
    tmp_path: Path, fault: str, cleared: str, message: str
) -> None:
    live = start_server(tmp_path / "data", HashingEmbedder())
    try:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            kept = http.post("/v1/memory/save", json={"content": "Saved before the fault"}).json()["memory_id"]
            _pragma(live, fault)
            acked = {"Saved before the fault"} | saves_until_refused(http, message)[0]
            patch = http.patch(f"/v1/memory/{kept}", json={"key": "changed"})
            assert patch.status_code in (200, 503), patch.text
            reads = http.post("/v1/memory/recall", json={"query": "saved before the fault"})
            assert reads.status_code == 200 and reads.json()["memories"][0]["memory_id"] == kept
            _pragma(live, cleared)
            saved = http.post("/v1/memory/save", json={"content": "Saved after the fault cleared"})
            assert saved.status_code == 201, saved.text
            acked.add("Saved after the fault cleared")
            listed = {m["content"] for m in http.get("/v1/memories", params={"limit": 500}).json()["memories"]}
            assert listed == acked  # every acknowledged write, and nothing that was refused
            memory = http.get(f"/v1/memory/{kept}").json()
            assert (memory["version"], memory["key"]) == ((2, "changed") if patch.status_code == 200 else (1, None))
    finally:
        live.stop()
