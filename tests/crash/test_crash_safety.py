"""Crash safety: the service as a subprocess, several writers (single saves, batches,
conditional PATCHes, deletes, imports, consolidation), SIGKILL at random moments (and,
every third time, once more while it starts: catching up, rebuilding or saving the index),
restart; every acknowledged write is there and recallable, no batch or import is
half-written, and the index and the fast network equal the store.

One kill point in three is aimed at an index save: the server saves its index and fast
network over and over beside the writers (``tests/crash/serve.py``), and the kill is sent
the moment a file of a save in progress appears; a kill that left such a file behind
landed mid-save and is counted.

Each runs on SQLite and on the Bolt tier (ArcadeDB). The short form (4 kill points, 2 on
Bolt) runs with the suite; the long form (``-m long``, 25 kill points, CRASH_POINTS to
change it) is the one the README reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.adapters import INDEX_DIR, open_service
from engine.config import load_config
from engine.records import MemoryFilter, Scope, Status
from engine.service import MemoryService
from tests.api.conftest import free_port, store_overrides
from tests.conftest import HashingEmbedder
from tests.crash.serve import SAVE_LOOP
from tests.serving import spawn, wait_until_serving

pytestmark = pytest.mark.slow

SHORT_POINTS = 4
SHORT_POINTS_BOLT = 2
LONG_POINTS = int(os.environ.get("CRASH_POINTS", "25"))
WRITERS = 4
BATCH = 3


@dataclass
class Acked:
    """What the service acknowledged (a 2xx answer) before it was killed."""

    saved: dict[str, str] = field(default_factory=dict)  # memory id → content
    batches: dict[str, list[str]] = field(default_factory=dict)  # session id → memory ids
    sent_batches: list[str] = field(default_factory=list)  # every batch's session id, acknowledged or not
    patched: dict[str, int] = field(default_factory=dict)  # memory id → version acknowledged
    deleted: set[str] = field(default_factory=set)
    imported: list[str] = field(default_factory=list)  # session ids of acknowledged imports
    consolidations: int = 0
    startup_kills: int = 0
    save_kills: int = 0  # kills aimed at an index save
    mid_save_kills: int = 0  # of those, the ones that left a save's files half-written
    lock: threading.Lock = field(default_factory=threading.Lock)


def _start(
    data_dir: Path, port: int, log: Path, overrides: dict[str, Any], *, save_loop: bool = False
) -> subprocess.Popen[bytes]:
    env = {**os.environ, SAVE_LOOP: "1"} if save_loop else None
    return wait_until_serving(spawn(data_dir, port, log, overrides, env), port, log, "the server")


def _saving(index_dir: Path, since_ns: int) -> bool:
    """Whether a save is writing its files: a temporary file written since ``since_ns``
    (each file of a save is written under a ``.tmp`` name, then renamed)."""
    for path in index_dir.glob("*.tmp"):
        with contextlib.suppress(FileNotFoundError):  # renamed meanwhile
            if path.stat().st_mtime_ns >= since_ns:
                return True
    return False


def _kill_mid_save(process: subprocess.Popen[bytes], index_dir: Path, since_ns: int, acked: Acked) -> None:
    deadline = time.monotonic() + 30
    while not _saving(index_dir, since_ns) and time.monotonic() < deadline:
        pass  # poll without sleeping: a save's files live for milliseconds
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    acked.save_kills += 1
    acked.mid_save_kills += _saving(index_dir, since_ns)


def _writer(url: str, acked: Acked, point: int, worker: int, stop: threading.Event, rng: random.Random) -> None:
    n = 0
    with httpx.Client(base_url=url, timeout=30) as http:
        while not stop.is_set():
            n += 1
            tag = f"p{point} w{worker} n{n}"
            try:
                kind = rng.random()
                if kind < 0.45:
                    content = f"single save {tag} about {rng.choice(['bees', 'tea', 'maps', 'jazz'])}"
                    # An entity of its own: never a near-duplicate of another save (which would
                    # reinforce that one and answer with its id).
                    r = http.post("/v1/memory/save", json={"content": content, "entities": [tag]})
                    if r.status_code == 201:
                        with acked.lock:
                            acked.saved[r.json()["memory_id"]] = content
                elif kind < 0.65:
                    session = f"batch-{point}-{worker}-{n}"
                    with acked.lock:
                        acked.sent_batches.append(session)
                    items = [
                        {"content": f"batch item {i} of {tag}", "session_id": session, "entities": [f"{tag} {i}"]}
                        for i in range(BATCH)
                    ]
                    r = http.post("/v1/memory/save_batch", json={"memories": items})
                    if r.status_code == 200:
                        ids = [result["memory_id"] for result in r.json()["results"]]
                        with acked.lock:
                            acked.batches[session] = ids
                            acked.saved.update({i: item["content"] for i, item in zip(ids, items, strict=True)})
                elif kind < 0.72:
                    session = f"import-{point}-{worker}-{n}"
                    with acked.lock:
                        acked.sent_batches.append(session)
                    lines = [
                        json.dumps(
                            {"content": f"imported line {i} of {tag}", "session_id": session, "entities": f"{tag} i{i}"}
                        )
                        for i in range(BATCH)
                    ]
                    r = http.post("/v1/import", params={"format": "jsonl"}, content="\n".join(lines).encode())
                    if r.status_code == 200:
                        with acked.lock:
                            acked.batches[session] = []
                            acked.imported.append(session)
                elif kind < 0.75:
                    r = http.post("/v1/memory/consolidate", json={"namespace": "default"})
                    if r.status_code == 200:
                        with acked.lock:
                            acked.consolidations += 1
                elif kind < 0.9:
                    with acked.lock:
                        choices = sorted(set(acked.saved) - acked.deleted)
                    if not choices:
                        continue
                    memory_id = rng.choice(choices)
                    got = http.get(f"/v1/memory/{memory_id}")
                    if got.status_code != 200:
                        continue
                    metadata = {**got.json()["metadata"], tag: n}
                    r = http.patch(
                        f"/v1/memory/{memory_id}",
                        json={"metadata": metadata},
                        headers={"If-Match": got.headers["etag"]},
                    )
                    if r.status_code == 200:
                        with acked.lock:
                            acked.patched[memory_id] = max(acked.patched.get(memory_id, 0), r.json()["version"])
                else:
                    with acked.lock:
                        choices = sorted(set(acked.saved) - acked.deleted - set(acked.patched))
                    if not choices:
                        continue
                    memory_id = rng.choice(choices)
                    r = http.delete(f"/v1/memory/{memory_id}")
                    if r.status_code == 200:
                        with acked.lock:
                            acked.deleted.add(memory_id)
            except httpx.TransportError:
                if stop.is_set():
                    return
                time.sleep(0.01)


def _killed_while_starting(data_dir: Path, port: int, log: Path, overrides: dict[str, Any], after: float) -> None:
    process = spawn(data_dir, port, log, overrides)
    time.sleep(after)  # a random moment of the start-up, not a measurement
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def _run(tmp_path: Path, points: int, seed: int, overrides: dict[str, Any]) -> Acked:
    data_dir, log, acked = tmp_path / "data", tmp_path / "server.log", Acked()
    rng = random.Random(seed)
    for point in range(points):
        port = free_port()
        if point % 3 == 2:
            # Killed while starting: catching the index up, rebuilding it or saving it.
            acked.startup_kills += 1
            _killed_while_starting(data_dir, port, log, overrides, rng.uniform(0.05, 1.0))
        aimed = point % 3 == 1  # at an index save
        began = time.time_ns()
        process = _start(data_dir, port, log, overrides, save_loop=aimed)
        stop = threading.Event()
        writers = [
            threading.Thread(
                target=_writer,
                args=(f"http://127.0.0.1:{port}", acked, point, w, stop, random.Random(rng.random())),
            )
            for w in range(WRITERS)
        ]
        for thread in writers:
            thread.start()
        time.sleep(rng.uniform(0.3, 1.5))  # a random moment mid-write, not a measurement
        if aimed:
            _kill_mid_save(process, data_dir / INDEX_DIR, began, acked)
        else:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        stop.set()
        for thread in writers:
            thread.join(timeout=60)
    return acked


def _verify(tmp_path: Path, acked: Acked, overrides: dict[str, Any]) -> None:
    """Open the data directory in process, as a restart would, and check every acknowledgement."""
    assert acked.saved, "no write was acknowledged before the first kill"
    config = load_config(env={}, data_dir=tmp_path / "data", **overrides)
    service = open_service(config, embedder=HashingEmbedder(), background_reembed=False)
    try:
        store, ns = service.store, Scope.whole(["default"])
        every = MemoryFilter(statuses=tuple(Status), include_expired=True)
        stored = {m.memory_id: m for m in store.get_many(ns, sorted(acked.saved), every, service._clock())}
        missing = sorted(set(acked.saved) - set(stored))
        assert missing == [], f"{len(missing)} acknowledged saves lost"
        for memory_id, content in acked.saved.items():
            memory = stored[memory_id]
            assert memory.content == content
            if memory_id in acked.deleted:
                assert memory.status is Status.DELETED
            if memory_id in acked.patched:
                assert memory.version >= acked.patched[memory_id]
        for session in acked.sent_batches:
            found = store.list_page(
                ns,
                MemoryFilter(statuses=tuple(Status), include_expired=True, session_id=session),
                service._clock(),
                limit=10,
            ).items
            assert len(found) in (0, BATCH), f"{session} is half-written: {len(found)} of {BATCH}"
            if session in acked.batches:
                assert len(found) == BATCH
        assert service.keeper.is_current()
        _index_equals_store(service)
        live = [m for m in stored.values() if m.status is Status.ACTIVE]
        for memory in random.Random(0).sample(live, min(25, len(live))):
            hits = service.recall(memory.content, namespaces=["default"], top_k=5).hits
            assert memory.memory_id in [hit.memory.memory_id for hit in hits], memory.content
    finally:
        service.close()


def _index_equals_store(service: MemoryService) -> None:
    """The vector index and the fast network hold exactly the memories the store indexes,
    and the index's vectors are the stored ones (a sample)."""
    stored = [
        (memory_id, vector)
        for ids, vectors, _ in service.store.iter_indexable(service.embedder.name, 1024)
        for memory_id, vector in zip(ids, vectors, strict=True)
    ]
    index, net = service.keeper.index, service.keeper.network
    assert len(index) == len(stored) == service.store.count_indexable()
    assert all(memory_id in index and memory_id in net for memory_id, _ in stored)
    assert len(net) - net.count_deleted() == len(stored)
    for memory_id, vector in random.Random(1).sample(stored, min(200, len(stored))):
        assert index.similarities(vector, [memory_id])[0][1] > 0.999, memory_id


@pytest.fixture(params=["sqlite", "arcadedb"])
def overrides(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The store under test: the SQLite file, or a fresh database on the Bolt tier's server
    (which runs in this process and so outlives every kill of the service)."""
    return store_overrides(request, request.param)


def _points(overrides: dict[str, Any], sqlite: int, bolt: int) -> int:
    return bolt if overrides.get("store") == "neo4j" else sqlite


def test_acknowledged_writes_survive_sigkill(tmp_path: Path, overrides: dict[str, Any]) -> None:
    acked = _run(tmp_path, _points(overrides, SHORT_POINTS, SHORT_POINTS_BOLT), 11, overrides)
    _verify(tmp_path, acked, overrides)


@pytest.mark.long
def test_acknowledged_writes_survive_sigkill_long(tmp_path: Path, overrides: dict[str, Any]) -> None:
    acked = _run(tmp_path, LONG_POINTS, 12, overrides)
    _verify(tmp_path, acked, overrides)
    print(
        f"{overrides.get('store', 'sqlite')}: {LONG_POINTS} kill points: {len(acked.saved)} saved memories"
        f" ({len(acked.batches) - len(acked.imported)} batches), {len(acked.imported)} imports of {BATCH},"
        f" {len(acked.patched)} memories patched, {len(acked.deleted)} deleted, {acked.consolidations}"
        f" consolidations acknowledged, {acked.startup_kills} more kills during start-up; {acked.save_kills} kills"
        f" aimed at an index save, {acked.mid_save_kills} of them mid-save; all present after restart"
    )
