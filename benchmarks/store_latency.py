"""Recall latency with each system of record: SQLite (embedded) and a Bolt graph store.

Both stores are opened side by side, each on a fresh data directory (and a
fresh graph database), with the same embedder:

* ingest the same N synthetic memories into each through
  ``MemoryService.save_batch`` (batches of 500);
* time ``service.recall(top_k=10)`` in process over varied queries, after a
  warm-up, reinforcement on as in production: p50 / p95 / mean. The stores take
  turns query by query (the order alternating), so load from anything else on
  the machine falls on both alike;
* time the store's reads on their own: ``last_seq()`` (the freshness check a
  recall made before it ranked, until the check came with its read of the hits:
  ``get_many_and_seq``) and ``get_many`` of 100 candidate ids with the default
  filter;
* count the statements and transactions each store runs (its ``round_trips``
  counter) per recall (the reinforcement it leads to included), per save of one
  new memory and per batch save of 100 new memories. Over Bolt every statement
  is a network round trip and every transaction one more (its commit).

The graph store is ArcadeDB's Bolt endpoint from the ``arcadedb-embedded``
package, run as a child process (as the test suite does), or any Bolt server
given with ``--bolt-uri`` (a real Neo4j). Run::

    .venv/bin/python benchmarks/store_latency.py --size 2000 --queries 300

Results print as a Markdown table and go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.ports import Embedder  # noqa: E402
from engine.records import MemoryDraft, MemoryFilter, Scope, utcnow  # noqa: E402
from engine.service import MemoryService  # noqa: E402

NAMESPACE = "bench"

_PEOPLE = ["Alice", "Bob", "Chen Wei", "Dana", "Emre", "Fatima", "Goro", "Hana", "Ivan", "Julia"]
_PLACES = ["Lisbon", "Berlin", "Kyoto", "Nairobi", "Lima", "Oslo", "Hanoi", "Austin", "Porto", "Seoul"]
_THINGS = [
    "coffee",
    "green tea",
    "jazz",
    "road bikes",
    "sourdough",
    "chess",
    "sci-fi novels",
    "hiking",
    "Rust",
    "tango",
]
_TEMPLATES = [
    ("{p} likes {t} and talks about it every week", "preference"),
    ("{p} moved to {c} in spring", "event"),
    ("{p} is planning a trip to {c} to try the local {t}", "task"),
    ("The meeting with {p} about {t} is on Friday in {c}", "event"),
    ("{p} prefers {t} over anything else when working late", "preference"),
    ("{p} keeps a notebook of {t} recommendations from {c}", "fact"),
    ("To brew {t} the way {p} likes it, use water just off the boil", "procedure"),
    ("{p} said the office in {c} closes early on holidays", "fact"),
]
_QUESTIONS = [
    "what does {p} like?",
    "where did {p} move?",
    "who is travelling to {c}?",
    "when is the meeting about {t}?",
    "how does {p} take {t}?",
    "anything about {c}?",
]


def drafts(size: int, seed: int) -> list[MemoryDraft]:
    rng = random.Random(seed)
    now = utcnow()
    out = []
    for n in range(size):
        template, category = rng.choice(_TEMPLATES)
        person, city, thing = rng.choice(_PEOPLE), rng.choice(_PLACES), rng.choice(_THINGS)
        out.append(
            MemoryDraft(
                content=template.format(p=person, c=city, t=thing) + f" (note {n})",
                namespace=NAMESPACE,
                category=category,
                entities=(person, city, thing),
                created_at=now - timedelta(days=rng.uniform(0, 300)),
            )
        )
    return out


def questions(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        rng.choice(_QUESTIONS).format(p=rng.choice(_PEOPLE), c=rng.choice(_PLACES), t=rng.choice(_THINGS))
        for _ in range(count)
    ]


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    ms = sorted(s * 1000.0 for s in seconds)
    return {
        "p50_ms": statistics.median(ms),
        "p95_ms": ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))],
        "mean_ms": statistics.fmean(ms),
        "n": len(ms),
    }


def timed(calls: Sequence[Callable[[], Any]]) -> list[float]:
    seconds = []
    for call in calls:
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return seconds


def ingest(service: MemoryService, size: int, seed: int) -> float:
    batch = drafts(size, seed)
    start = time.perf_counter()
    for offset in range(0, len(batch), 500):
        service.save_batch(batch[offset : offset + 500])
    return size / (time.perf_counter() - start)


def store_share(service: MemoryService, count: int) -> dict[str, Any]:
    store = service.store
    ids = store.filtered_ids(Scope.whole([NAMESPACE]), MemoryFilter(), utcnow(), 100)
    last_seq = timed([store.last_seq for _ in range(count)])
    get_many = timed(
        [lambda: store.get_many(Scope.whole([NAMESPACE]), ids, MemoryFilter(), utcnow()) for _ in range(count)]
    )
    return {"last_seq": percentiles(last_seq), "get_many_100": percentiles(get_many)}


def counted(service: MemoryService, calls: Sequence[Callable[[], Any]]) -> dict[str, float]:
    """Statements and transactions the store ran per call, on average (background
    reinforcement a call led to included)."""
    counts = service.store.round_trips  # type: ignore[attr-defined]
    service.flush()
    if hasattr(service.store, "count_round_trips"):
        service.store.count_round_trips()  # SQLite counts only when asked
    statements, transactions = counts.totals()
    for call in calls:
        call()
        service.flush()
    after_statements, after_transactions = counts.totals()
    return {
        "statements": (after_statements - statements) / len(calls),
        "transactions": (after_transactions - transactions) / len(calls),
    }


def round_trips(service: MemoryService, runs: int, seed: int) -> dict[str, dict[str, float]]:
    queries = questions(runs, seed + 2)
    singles = drafts(runs, seed + 3)
    batches = [drafts(100, seed + 4 + n) for n in range(max(1, runs // 10))]
    recall = [partial(service.recall, query, namespaces=[NAMESPACE], top_k=10) for query in queries]
    return {
        "recall": counted(service, recall),
        "save": counted(service, [partial(service.save, draft) for draft in singles]),
        "save_batch_100": counted(service, [partial(service.save_batch, batch) for batch in batches]),
    }


def open_store(
    store: str, args: argparse.Namespace, embedder: Embedder, workdir: Path
) -> tuple[str, MemoryService, Any]:
    """A service on ``store`` (and the in-process ArcadeDB server it needs, if any)."""
    overrides: dict[str, Any] = {"data_dir": str(workdir / store)}
    arcadedb = None
    if store == "graph":
        if args.bolt_uri:
            graph = {"uri": args.bolt_uri, "user": args.bolt_user, "password": args.bolt_password}
            label = "neo4j (" + args.bolt_uri + ")"
        else:
            from tests.bolt import start_arcadedb

            arcadedb = start_arcadedb()
            target = arcadedb.target()
            graph = {"uri": target.uri, "user": target.user, "password": target.password}
            graph["database"] = target.new_database()
            label = "arcadedb (Bolt, child process)"
        overrides.update(store="neo4j", neo4j=graph)
    else:
        label = "sqlite"
    return label, open_service(load_config(env={}, **overrides), embedder=embedder), arcadedb


def run(args: argparse.Namespace, embedder: Embedder, workdir: Path) -> list[dict[str, Any]]:
    opened = [open_store(store.strip(), args, embedder, workdir) for store in args.stores.split(",")]
    try:
        rates = [ingest(service, args.size, args.seed) for _, service, _ in opened]
        queries = questions(args.queries, args.seed + 1)
        for query in queries[:20]:
            for _, service, _ in opened:
                service.recall(query, namespaces=[NAMESPACE], top_k=10)
        recall: list[list[float]] = [[] for _ in opened]
        for n, query in enumerate(queries):
            order = list(range(len(opened)))
            if n % 2:
                order.reverse()
            for i in order:
                service = opened[i][1]
                start = time.perf_counter()
                service.recall(query, namespaces=[NAMESPACE], top_k=10)
                recall[i].append(time.perf_counter() - start)
        results = []
        for (label, service, _), rate, seconds in zip(opened, rates, recall, strict=True):
            service.flush()
            share = store_share(service, args.queries)
            trips = round_trips(service, args.round_trip_runs, args.seed)
            results.append(
                {
                    "store": label,
                    "memories": args.size,
                    "ingest_per_s": rate,
                    "recall": percentiles(seconds),
                    **share,
                    "round_trips": trips,
                }
            )
        return results
    finally:
        for _, service, arcadedb in opened:
            service.close()
            if arcadedb is not None:
                arcadedb.stop()


def markdown(results: Sequence[dict[str, Any]], embedder: str) -> str:
    lines = [
        f"| store ({embedder}) | memories | recall p50 / p95 ms | last_seq p50 ms | get_many(100) p50 / p95 ms |"
        " ingest memories/s |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['store']} | {r['memories']} | {r['recall']['p50_ms']:.1f} / {r['recall']['p95_ms']:.1f} "
            f"| {r['last_seq']['p50_ms']:.2f} | {r['get_many_100']['p50_ms']:.1f} / {r['get_many_100']['p95_ms']:.1f} "
            f"| {r['ingest_per_s']:.0f} |"
        )
    lines += [
        "",
        "| store | statements / transactions per recall | per save | per batch save of 100 |",
        "|---|---|---|---|",
    ]
    for r in results:
        trips = r["round_trips"]
        cells = [
            f"{trips[k]['statements']:.1f} / {trips[k]['transactions']:.1f}"
            for k in ("recall", "save", "save_batch_100")
        ]
        lines.append(f"| {r['store']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=2000, help="memories per store")
    parser.add_argument("--queries", type=int, default=300, help="timed recalls per store")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--round-trip-runs", type=int, default=50, help="recalls and saves whose statements are counted"
    )
    parser.add_argument("--stores", default="sqlite,graph", help="comma-separated: sqlite, graph")
    parser.add_argument("--bolt-uri", default="", help="a Bolt server to use instead of an ArcadeDB child process")
    parser.add_argument("--bolt-user", default="neo4j")
    parser.add_argument("--bolt-password", default="")
    parser.add_argument("--out", type=Path, default=HERE / ".work" / "store_latency.json")
    args = parser.parse_args()

    embedder = load_embedder(load_config())  # TWINMEM_EMBEDDING__PROVIDER=use picks a faster one
    with tempfile.TemporaryDirectory(prefix="twinmem-store-bench-") as tmp:
        results = run(args, embedder, Path(tmp))
    report = {
        "machine": {
            "python": platform.python_version(),
            "cpus": _cpus(),
            "platform": platform.platform(),
            "load_average_at_end": os.getloadavg(),
        },
        "embedder": embedder.name,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(markdown(results, embedder.name))


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


if __name__ == "__main__":
    main()
