"""A damaged saved index never crashes the service: over real HTTP, with a real SQLite file,
the service starts, notices, rebuilds from the store, and recall answers as before."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from engine.files import CHECKSUM, checksum_of
from tests.api.conftest import LiveServer, start_server
from tests.conftest import HashingEmbedder

pytestmark = pytest.mark.slow

COLOURS = ["red", "green", "blue", "amber", "violet", "grey"]
ANIMALS = ["cat", "dog", "owl", "fox", "eel", "bee", "yak", "ram", "elk", "ant"]
TEXTS = [f"the {COLOURS[n % 6]} {ANIMALS[n % 10]} number {n} sleeps in room {n * 7}" for n in range(60)]


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The engine's log records. The handler sits on the ``engine`` logger itself: the server's
    start-up configures logging anew, which drops handlers from the root logger."""
    engine = logging.getLogger("engine")
    engine.addHandler(caplog.handler)
    level = engine.level
    engine.setLevel(logging.INFO)
    yield caplog
    engine.setLevel(level)
    engine.removeHandler(caplog.handler)


def _filled(data_dir: Path) -> dict[str, str]:
    """Save ``TEXTS``, stop the server (which saves the index); return content → id."""
    live = start_server(data_dir, HashingEmbedder())
    try:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            saved = http.post("/v1/memory/save_batch", json={"memories": [{"content": t} for t in TEXTS]})
            assert saved.status_code == 200, saved.text
            ids = {t: r["memory_id"] for t, r in zip(TEXTS, saved.json()["results"], strict=True)}
    finally:
        live.stop()
    assert (data_dir / "index" / "hnsw.bin").exists()
    return ids


def _recalls_each_memory_first(live: LiveServer, ids: dict[str, str]) -> None:
    with httpx.Client(base_url=live.url, timeout=60) as http:
        health = http.get("/health")
        assert health.status_code == 200 and health.json()["memories_indexed"] == len(set(ids.values())), health.text
        for text in TEXTS[::7]:
            hits = http.post("/v1/memory/recall", json={"query": text, "top_k": 3})
            assert hits.status_code == 200, hits.text
            assert hits.json()["memories"][0]["memory_id"] == ids[text]


def _restarted(data_dir: Path) -> LiveServer:
    return start_server(data_dir, HashingEmbedder())


def test_a_graph_file_damaged_in_place_is_rebuilt_not_served(tmp_path: Path, logged: pytest.LogCaptureFixture) -> None:
    data_dir = tmp_path / "data"
    ids = _filled(data_dir)
    logged.clear()
    graph = data_dir / "index" / "hnsw.bin"
    size = graph.stat().st_size
    damaged = bytearray(graph.read_bytes())
    damaged[size // 4 : size // 4 + 8192] = b"\xff" * 8192  # links pointing far outside the graph
    graph.write_bytes(bytes(damaged))
    assert graph.stat().st_size == size
    live = _restarted(data_dir)
    try:
        assert "does not match its checksum" in logged.text
        assert "vector index rebuilt" in logged.text
        _recalls_each_memory_first(live, ids)
    finally:
        live.stop()


def test_a_shuffled_labels_file_is_caught_by_the_self_check(tmp_path: Path, logged: pytest.LogCaptureFixture) -> None:
    # Shuffled and saved with a checksum that matches (as a faulty save would): only the
    # comparison of sampled ids with the vectors the store holds can tell.
    data_dir = tmp_path / "data"
    ids = _filled(data_dir)
    logged.clear()
    index_dir = data_dir / "index"
    labels_path = index_dir / "hnsw.labels.npy"
    labels = np.load(labels_path, allow_pickle=False)
    np.save(labels_path, np.random.default_rng(7).permutation(labels), allow_pickle=False)
    meta = json.loads((index_dir / "hnsw.meta.json").read_text(encoding="utf-8"))
    meta[CHECKSUM]["hnsw.labels.npy"] = checksum_of(labels_path)
    (index_dir / "hnsw.meta.json").write_text(json.dumps(meta), encoding="utf-8")
    live = _restarted(data_dir)
    try:
        assert "sampled ids to vectors the store does not hold" in logged.text
        assert "vector index rebuilt" in logged.text
        _recalls_each_memory_first(live, ids)
    finally:
        live.stop()


@pytest.mark.parametrize("missing", ["hnsw.bin", "hnsw.labels.npy", "hnsw.meta.json"])
def test_a_missing_index_file_is_rebuilt(tmp_path: Path, logged: pytest.LogCaptureFixture, missing: str) -> None:
    data_dir = tmp_path / "data"
    ids = _filled(data_dir)
    logged.clear()
    (data_dir / "index" / missing).unlink()
    live = _restarted(data_dir)
    try:
        assert "vector index rebuilt" in logged.text
        _recalls_each_memory_first(live, ids)
    finally:
        live.stop()


def test_an_intact_index_is_loaded_without_a_rebuild(tmp_path: Path, logged: pytest.LogCaptureFixture) -> None:
    data_dir = tmp_path / "data"
    ids = _filled(data_dir)
    logged.clear()
    live = _restarted(data_dir)
    try:
        assert "rebuil" not in logged.text
        _recalls_each_memory_first(live, ids)
    finally:
        live.stop()


def test_content_patches_beside_recalls_never_fail(tmp_path: Path) -> None:
    # Each content PATCH replaces the memory's vector and leaves a deleted element in the
    # graph; recall once answered 503 when those hid the live ones from hnswlib.
    live = start_server(tmp_path / "data", HashingEmbedder())
    failures: list[str] = []
    try:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            memory_id = http.post("/v1/memory/save", json={"content": "version zero"}).json()["memory_id"]
        done = threading.Event()

        def patcher(worker: int) -> None:
            with httpx.Client(base_url=live.url, timeout=60) as http:
                for n in range(25):
                    r = http.patch(f"/v1/memory/{memory_id}", json={"content": f"worker {worker} wrote {n}"})
                    if r.status_code != 200:
                        failures.append(f"PATCH {r.status_code} {r.text}")

        def recaller() -> None:
            with httpx.Client(base_url=live.url, timeout=60) as http:
                while not done.is_set():
                    r = http.post("/v1/memory/recall", json={"query": "worker wrote", "top_k": 5})
                    if r.status_code != 200 or [m["memory_id"] for m in r.json()["memories"]] != [memory_id]:
                        failures.append(f"recall {r.status_code} {r.text}")

        patchers = [threading.Thread(target=patcher, args=(w,)) for w in range(8)]
        recallers = [threading.Thread(target=recaller) for _ in range(2)]
        for thread in recallers + patchers:
            thread.start()
        for thread in patchers:
            thread.join()
        done.set()
        for thread in recallers:
            thread.join()
    finally:
        live.stop()
    assert failures == []
