"""Two replicas on one graph database, one SIGKILLed mid-consolidation: every memory the
service acknowledged is still recalled on both (itself, or the active memory it was merged
into), and no merge is half-written (a source merged into a memory that is not there, or
a merged memory beside a source still active)."""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.adapters import open_service
from engine.config import load_config
from engine.conflicts import MERGED_INTO
from engine.records import MemoryFilter, Scope, Status
from tests.api.conftest import free_port, store_overrides
from tests.conftest import HashingEmbedder
from tests.serving import spawn, wait_until_serving

pytestmark = pytest.mark.slow

NAMES = "Zoe Alice Bruno Chen Dara Emil Farah Gus Hana Ivo Jana Kemal Lena Milo Nora Omar Pia Rui Sven Tara".split()
KILL_POINTS = 4


def _pair(name: str) -> tuple[str, str]:
    base = f"{name} likes to drink hot green tea with {{}} in the garden every sunny morning"
    return base.format("honey"), base.format("lemon")


def _recalled(http: httpx.Client, content: str, memory_id: str) -> bool:
    hits = http.post("/v1/memory/recall", json={"query": content, "top_k": 5}).json()["memories"]
    return memory_id in {hit["memory_id"] for hit in hits}


def test_a_replica_killed_mid_consolidation_leaves_every_acknowledged_memory_recalled(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    overrides: dict[str, Any] = store_overrides(request, "arcadedb")
    rng = random.Random(8)
    log = tmp_path / "servers.log"
    b_port = free_port()
    b = wait_until_serving(spawn(tmp_path / "b", b_port, log, overrides), b_port, log, "replica b")
    acked: dict[str, str] = {}
    consolidated = 0
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{b_port}", timeout=60) as on_b:
            for point in range(KILL_POINTS):
                for name in NAMES:
                    for content in _pair(f"{name}{point}"):
                        r = on_b.post("/v1/memory/save", json={"content": content, "entities": [f"{name}{point}"]})
                        assert r.status_code in (200, 201), r.text
                        acked[r.json()["memory_id"]] = content
                a_port = free_port()
                a = wait_until_serving(spawn(tmp_path / "a", a_port, log, overrides), a_port, log, "replica a")
                answered: list[int] = []

                def consolidate(port: int = a_port, out: list[int] = answered) -> None:
                    try:
                        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as on_a:
                            out.append(on_a.post("/v1/memory/consolidate", json={"namespace": "default"}).status_code)
                    except httpx.HTTPError:
                        out.append(0)

                thread = threading.Thread(target=consolidate)
                thread.start()
                time.sleep(rng.uniform(0.5, 4.0))  # a random moment mid-consolidation
                a.send_signal(signal.SIGKILL)
                a.wait(timeout=30)
                thread.join(timeout=60)
                consolidated += answered == [200]
                # B goes on writing meanwhile.
                r = on_b.post("/v1/memory/save", json={"content": f"after kill {point}", "entities": [f"k{point}"]})
                assert r.status_code == 201, r.text
                acked[r.json()["memory_id"]] = f"after kill {point}"

            # The store: no merge half-written.
            config = load_config(env={}, data_dir=tmp_path / "check", **overrides)
            service = open_service(config, embedder=HashingEmbedder(), background_reembed=False)
            try:
                store, ns = service.store, Scope.whole(["default"])
                every = MemoryFilter(statuses=tuple(Status), include_expired=True)
                stored = {m.memory_id: m for m in service.store.get_many(ns, sorted(acked), every, service._clock())}
                assert sorted(set(acked) - set(stored)) == []
                into: dict[str, str] = {}
                for memory_id in acked:
                    for edge in store.edges(ns, memory_id):
                        if edge.kind == MERGED_INTO and edge.src == memory_id:
                            into[memory_id] = edge.dst
                merged_ids = set(into.values())
                merged = {m.memory_id: m for m in store.get_many(ns, sorted(merged_ids), every, service._clock())}
                for source, target in into.items():
                    assert target in merged, f"{source} merged into {target}, which is not stored"
                    assert merged[target].status is Status.ACTIVE
                    assert stored[source].status is Status.SUPERSEDED, stored[source]
                for target in merged_ids:
                    sources = [e.src for e in store.edges(ns, target) if e.kind == MERGED_INTO and e.dst == target]
                    assert all(stored[s].status is not Status.ACTIVE for s in sources if s in stored)
                for memory_id, memory in stored.items():
                    if memory_id not in into:
                        assert memory.status is Status.ACTIVE, memory
            finally:
                service.close()

            # Both replicas recall each (or what it was merged into); a restarted A too.
            a_port = free_port()
            a = wait_until_serving(spawn(tmp_path / "a", a_port, log, overrides), a_port, log, "replica a")
            try:
                with httpx.Client(base_url=f"http://127.0.0.1:{a_port}", timeout=60) as on_a:
                    for http in (on_a, on_b):
                        for memory_id, content in acked.items():
                            wanted = into.get(memory_id, memory_id)
                            assert _recalled(http, content, wanted), (memory_id, content, wanted)
            finally:
                a.send_signal(signal.SIGTERM)
                a.wait(timeout=60)
        print(f"{len(acked)} acknowledged, {len(into)} merged into {len(merged_ids)}; {consolidated} runs answered")
    finally:
        b.send_signal(signal.SIGTERM)
        b.wait(timeout=60)
