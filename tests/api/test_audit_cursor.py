"""Tailing the audit log over real HTTP with its sequence cursor (``after_seq``): a poller
that follows the cursor sees every entry once, in chain order, while others write. A real
server on a real SQLite file, the deterministic embedder."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.client import TwinmemClient
from engine.security import GENESIS_HASH
from tests.api.conftest import start_server
from tests.conftest import HashingEmbedder

pytestmark = pytest.mark.slow

WRITERS = 10
SAVES_EACH = 30


def _page(http: httpx.Client, **params: Any) -> dict[str, Any]:
    response = http.get("/v1/admin/audit", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_poller_following_the_cursor_sees_every_entry_once_in_chain_order(tmp_path: Path) -> None:
    """Times are stamped before the log's lock, so under concurrent writers an entry can
    carry an earlier time than the one before it: polling with ``since`` missed entries.
    The cursor is the entry's position in the chain, which only grows."""
    live = start_server(tmp_path / "data", HashingEmbedder())
    seen: list[dict[str, Any]] = []
    threads: list[threading.Thread] = []
    polls: set[str] = set()  # the request ids of the poller's own requests
    try:

        def write(writer: int) -> None:
            with httpx.Client(base_url=live.url, timeout=60) as http:
                for n in range(SAVES_EACH):
                    content = f"writer {writer} note {n} about topic{writer}x{n}"
                    assert http.post("/v1/memory/save", json={"content": content}).status_code == 201

        threads.extend(threading.Thread(target=write, args=(w,)) for w in range(WRITERS))
        for thread in threads:
            thread.start()
        with httpx.Client(base_url=live.url, timeout=60) as http:
            cursor, pages_during_writes = 0, 0
            while True:
                finished = all(not thread.is_alive() for thread in threads)
                response = http.get("/v1/admin/audit", params={"after_seq": cursor, "limit": 7})
                assert response.status_code == 200, response.text
                polls.add(response.headers["x-request-id"])
                page = response.json()
                seen.extend(page["entries"])
                pages_during_writes += bool(page["entries"]) and not finished
                assert page["next_after_seq"] >= cursor
                cursor = page["next_after_seq"]
                # Once the writers are done, the poller's own requests are all that is left.
                if finished and all(entry["request_id"] in polls for entry in page["entries"]):
                    break
        assert pages_during_writes > 3  # the poller read while the writers wrote
        seqs = [entry["seq"] for entry in seen]
        assert seqs == list(range(1, len(seen) + 1))  # each once, in order, none skipped
        assert cursor == seqs[-1]
        prev = GENESIS_HASH
        for entry in seen:  # chain order: each entry follows the one before it
            assert entry["prev_hash"] == prev
            prev = entry["hash"]
        saves = [entry for entry in seen if entry["action"] == "save"]
        assert len(saves) == WRITERS * SAVES_EACH
        # The poller saw everything the log holds but its own last request (written as it answered).
        rows = list(live.app.state.security.audit_rows())
        assert [(row.seq, row.hash) for row in rows[:-1]] == [(entry["seq"], entry["hash"]) for entry in seen]
        assert rows[-1].entry["request_id"] in polls
    finally:
        for thread in threads:
            thread.join()
        live.stop()


def test_the_cursor_pages_oldest_first_with_filters_and_says_where_to_go_on(tmp_path: Path) -> None:
    live = start_server(tmp_path / "data", HashingEmbedder())
    try:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            for n in range(5):
                assert http.post("/v1/memory/save", json={"content": f"note {n} on item{n}"}).status_code == 201
                assert http.get("/v1/memories").status_code == 200
            # Entries 1..10: save, list, save, list, ...; each request below adds one more,
            # written as it answers (after it read the log).
            first = _page(http, after_seq=0, limit=3)  # entry 11
            assert [e["seq"] for e in first["entries"]] == [1, 2, 3]
            assert first["next_after_seq"] == 3  # a full page: go on from its last entry
            saves = _page(http, after_seq=0, action="save", limit=100)  # entry 12
            assert [e["seq"] for e in saves["entries"]] == [1, 3, 5, 7, 9]
            # Not a full page: every entry up to the head (11) was looked at, so the cursor
            # moves past those that did not match too.
            assert saves["next_after_seq"] == 11
            nothing = _page(http, after_seq=11, action="save")  # entry 13
            assert nothing["entries"] == [] and nothing["next_after_seq"] == 12
            # Without after_seq the listing is as before: newest first, no cursor.
            newest = _page(http, limit=2)
            assert [e["seq"] for e in newest["entries"]] == [13, 12]
            assert "next_after_seq" not in newest
        with TwinmemClient(live.url) as client:  # the Python client's call
            tail = client.audit_after(13, limit=5)
            assert [e["seq"] for e in tail["entries"]] == [14] and tail["next_after_seq"] == 14
        with httpx.Client(base_url=live.url, timeout=60) as http:
            for bad in ("-1", "x", "1.5"):
                refused = http.get("/v1/admin/audit", params={"after_seq": bad})
                assert refused.status_code in (400, 422), refused.text
            # Past what SQLite's integers hold: a 500 (OverflowError binding it) before.
            for huge in (str(2**63), "99999999999999999999999"):
                refused = http.get("/v1/admin/audit", params={"after_seq": huge})
                assert refused.status_code == 422 and "after_seq" in refused.json()["detail"], refused.text
            beyond = _page(http, after_seq=2**63 - 1)
            assert beyond["entries"] == [] and beyond["next_after_seq"] == 2**63 - 1
    finally:
        live.stop()


def test_a_cursor_behind_the_archived_entries_is_told_so(tmp_path: Path) -> None:
    """With ``[audit] max_entries`` the oldest entries move to archive files the API does not
    serve: a cursor that falls behind learns which positions it cannot read here."""
    live = start_server(tmp_path / "data", HashingEmbedder(), audit={"max_entries": 10})
    try:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            for _ in range(30):
                assert http.get("/v1/memories").status_code == 200
            page = _page(http, after_seq=0, limit=1000)
            first = page["entries"][0]["seq"]
            assert first > 1
            assert page["archived_through"] == first - 1
            caught_up = _page(http, after_seq=page["next_after_seq"])
            assert "archived_through" not in caught_up
    finally:
        live.stop()
