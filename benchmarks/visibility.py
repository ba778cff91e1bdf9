"""What enforcing visibility costs: recall and list under each reach, side by side.

One namespace of N synthetic memories written by 20 agents: 40% private (spread
over the agents), 50% shared, 10% public. In the same process and on the same
data, queries take turns across four scopes, so load from anything else on the
machine falls on each alike:

* ``engine`` — no scope, the engine's own sight (the path before scopes existed);
* ``admin`` — ``Scope(full=...)``: every memory, through the scoped query;
* ``member`` — an agent with a read grant: shared, public and its own private memories;
* ``outsider`` — no grant: public memories only (1 in 10, so the filter is selective).

For each: ``service.recall(top_k=10)`` p50 / p95 (the query embedded by the real
model each time, as in production), the engine's time without the embedding, and
``list_page(limit=50)``; plus how many memories each scope sees. Run::

    .venv/bin/python benchmarks/visibility.py --size 10000 --queries 200

Results print as a Markdown table and go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from latency import TimedEmbedder  # noqa: E402
from store_latency import percentiles  # noqa: E402

from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.records import MemoryDraft, MemoryFilter, Scope, Visibility  # noqa: E402
from engine.service import MemoryService  # noqa: E402

NAMESPACE = "team"
AGENTS = [f"agent-{n:02d}" for n in range(20)]
SCOPES: dict[str, Scope | None] = {
    "engine": None,
    "admin": Scope(full=(NAMESPACE,), agent="root"),
    "member": Scope(member=(NAMESPACE,), agent=AGENTS[0]),
    "outsider": Scope(public=(NAMESPACE,), agent="visitor"),
}


def populate(service: MemoryService, size: int, seed: int) -> float:
    rng = random.Random(seed)
    stream = synthetic.memories(seed)
    drafts = []
    for _ in range(size):
        memory = next(stream)
        roll = rng.random()
        visibility = Visibility.PRIVATE if roll < 0.4 else Visibility.SHARED if roll < 0.9 else Visibility.PUBLIC
        drafts.append(
            MemoryDraft(
                memory.content,
                namespace=NAMESPACE,
                category=memory.category,
                entities=memory.entities,
                actor=rng.choice(AGENTS),
                visibility=visibility,
                created_at=memory.created_at,
            )
        )
    start = time.perf_counter()
    for offset in range(0, size, 500):
        service.save_batch(drafts[offset : offset + 500])
    return size / (time.perf_counter() - start)


def measure(service: MemoryService, queries: list[str]) -> dict[str, dict[str, Any]]:
    embedder = service.embedder
    assert isinstance(embedder, TimedEmbedder)
    results: dict[str, dict[str, list[float]]] = {name: {"recall": [], "engine": [], "list": []} for name in SCOPES}
    for number, query in enumerate(queries):
        order = list(SCOPES) if number % 2 == 0 else list(reversed(SCOPES))
        for name in order:
            scope, timings = SCOPES[name], results[name]
            start = time.perf_counter()
            service.recall(query, namespaces=[NAMESPACE], scope=scope)
            took = time.perf_counter() - start
            timings["recall"].append(took)
            timings["engine"].append(took - embedder.last)  # without embedding the query
            start = time.perf_counter()
            service.list_page([NAMESPACE], MemoryFilter(), scope=scope)
            timings["list"].append(time.perf_counter() - start)
    service.flush()
    return {name: {key: percentiles(values) for key, values in timings.items()} for name, timings in results.items()}


def visible(service: MemoryService) -> dict[str, int]:
    everything = MemoryFilter()
    return {
        name: len(service.store.filtered_ids(scope or Scope.whole([NAMESPACE]), everything, service._clock(), 10**6))
        for name, scope in SCOPES.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "visibility.json")
    args = parser.parse_args()

    embedder = TimedEmbedder(load_embedder(load_config(env={}, embedding={"model": args.model})))
    with tempfile.TemporaryDirectory() as tmp:
        service = open_service(load_config(env={}, data_dir=tmp, durable_commits=False), embedder=embedder)
        try:
            ingest = populate(service, args.size, args.seed)
            queries = synthetic.queries(args.warmup + args.queries, seed=args.seed + 1)
            for query in queries[: args.warmup]:
                for scope in SCOPES.values():
                    service.recall(query, namespaces=[NAMESPACE], scope=scope)
            timings = measure(service, queries[args.warmup :])
            counts = visible(service)
        finally:
            service.close()
    result = {
        "size": args.size,
        "queries": args.queries,
        "model": embedder.name,
        "ingest_per_s": round(ingest, 1),
        "visible": counts,
        "timings": timings,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"{args.size} memories, {args.queries} queries, {embedder.name}, load {os.getloadavg()[0]:.2f}\n")
    print("| scope | sees | recall p50 / p95 ms | engine p50 / p95 ms | list p50 / p95 ms |")
    print("|---|---:|---:|---:|---:|")
    for name, timing in timings.items():
        cells = [f"{timing[key]['p50_ms']:.1f} / {timing[key]['p95_ms']:.1f}" for key in ("recall", "engine", "list")]
        print(f"| {name} | {counts[name]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
