"""A damaged SQLite page is found at start-up (``PRAGMA quick_check``) and reported by
/health, instead of surfacing only when an export reaches it. A real server, a real file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest

from engine.adapters import DB_FILE
from tests.api.conftest import start_server
from tests.conftest import HashingEmbedder

pytestmark = pytest.mark.slow


def _filled(data_dir: Path) -> None:
    live = start_server(data_dir, HashingEmbedder())
    try:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            memories = [{"content": f"note {n}: the meeting moved to room {n * 3}"} for n in range(200)]
            assert http.post("/v1/memory/save_batch", json={"memories": memories}).status_code == 200
            health = http.get("/health").json()
            assert (health["status"], health["store_integrity"]) == ("ok", "ok")
    finally:
        live.stop()


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
            health = http.get("/health").json()
            assert health["status"] == "degraded"
            assert health["store_integrity"] != "ok" and health["store_integrity"]
            hits = http.post("/v1/memory/recall", json={"query": "meeting moved to room 42"})
            assert hits.status_code == 200, hits.text
    finally:
        live.stop()
