"""Where and when a recall's query times are read: in a worker process beside the
recall, or in the request's thread before or after the candidate channels.

dateparser reads a sentence that names a date in 1–3 ms of pure Python. The service has
a worker process read it (engine/adapters/time_worker.py): the reading is begun before
the query is embedded and the channels run, and taken after them. Read in the request's
thread, a parse leaves the CPU's caches cold for what runs after it, so there the
recaller reads a query's times once its channels have found the candidates. This times
the three ways in one process, on one store, query by query in turn (which goes first
rotates), with the query vectors given (the engine alone, so the worker overlaps the
channels only, not the embedding):

* ``worker``: the service as it is (``[recall] time_worker`` true, the worker started
  and ready before the warm-up);
* ``after``: read in the request's thread, after the channels (``time_worker`` false);
* ``before``: read in the request's thread right before the channels (the recall's
  query handed to the recaller with its windows already read), as the service once did.

All three rank the same: every query's hits are compared, and a difference is reported.
The store is one ``latency.py --keep`` left (its synthetic memories and queries)::

    .venv/bin/python benchmarks/latency.py --sizes 100000 --bulk --no-http --baseline-budget-s 0 \\
        --seed-verbatim-queries 0 --hnsw-queries 10 --ef-sweep 128 --keep --workdir /tmp/lat
    .venv/bin/python benchmarks/time_order.py /tmp/lat/latency-100000-* --out benchmarks/results/time-order.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import scale  # noqa: E402
import synthetic  # noqa: E402
from latency import NAMESPACE, rss_mb, summarize  # noqa: E402

from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.adapters.time_expressions import LibraryTimeExpressions  # noqa: E402
from engine.adapters.time_worker import WorkerTimeExpressions  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.recall import RecallQuery, RecallResult  # noqa: E402

WAYS = ("worker", "after", "before")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, help="a data directory latency.py --keep left")
    parser.add_argument("--queries", type=int, default=600, help="timed queries (default 600)")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--seed", type=int, default=43, help="seed of the synthetic queries")
    parser.add_argument(
        "--embed", action="store_true", help="each recall embeds its query (as over HTTP), not given its vector"
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    config = load_config(data_dir=str(args.data_dir))
    embedder = load_embedder(config)
    service = open_service(config, embedder=embedder)
    worker, recaller = service.times, service.recaller
    if not isinstance(worker, WorkerTimeExpressions) or config.fusion.time <= 0:
        parser.error("the service reads no times in a worker ([fusion] time 0, or [recall] time_worker false)")
    if not worker.start():
        parser.error("the time-parsing worker did not start")
    inline = LibraryTimeExpressions()
    inline.load(chinese=False)
    as_is = recaller.recall

    def read_first(query: RecallQuery, **kwargs: Any) -> RecallResult:
        if query.windows is None:
            query = replace(query, windows=inline.windows(query.text, query.now), reading=None)
        return as_is(query, **kwargs)

    def recall(text: str, vector: Any, way: str) -> tuple[float, list[str], bool]:
        recaller._times = worker if way == "worker" else inline
        recaller.recall = read_first if way == "before" else as_is  # type: ignore[method-assign]
        start = time.perf_counter()
        result = service.recall(text, namespaces=[NAMESPACE], top_k=10, vector=vector, reinforce=False)
        seconds = time.perf_counter() - start
        return seconds, [hit.memory.memory_id for hit in result.hits], bool(result.windows)

    try:
        texts = synthetic.queries(args.queries + args.warmup, seed=args.seed)
        vectors = [None if args.embed else embedder.embed_query(text) for text in texts]
        for text, vector in zip(texts[: args.warmup], vectors[: args.warmup], strict=True):
            for way in WAYS:
                recall(text, vector, way)
        scale.settle_service(service)  # the store's start-up check, what the warm-up left building
        seconds: dict[str, dict[str, list[float]]] = {
            way: {"time named": [], "no time": [], "every question": []} for way in WAYS
        }
        differ = 0
        for n, (text, vector) in enumerate(zip(texts[args.warmup :], vectors[args.warmup :], strict=True)):
            hits: dict[str, list[str]] = {}
            for way in WAYS[n % len(WAYS) :] + WAYS[: n % len(WAYS)]:
                took, hits[way], timed = recall(text, vector, way)
                seconds[way]["time named" if timed else "no time"].append(took)
                seconds[way]["every question"].append(took)
            differ += len({tuple(found) for found in hits.values()}) > 1
        pid = worker.worker_pid  # None where it is gone: then no RSS is read
        worker_rss_mb = rss_mb(psutil.Process(pid)) if pid is not None else 0.0
    finally:
        recaller.recall = as_is  # type: ignore[method-assign]
        recaller._times = worker
        service.close()

    results = {
        order: {kind: summarize(values) for kind, values in by_kind.items()} for order, by_kind in seconds.items()
    }
    print("| times read | queries that name a time: p50 / p95 / mean ms | the others | every question |")
    print("|---|---|---|---|")
    for way, by_kind in results.items():
        cells = [f"{s['p50_ms']:.2f} / {s['p95_ms']:.2f} / {s['mean_ms']:.2f} ({s['n']})" for s in by_kind.values()]
        print(f"| {way} | " + " | ".join(cells) + " |")
    print(f"\nqueries whose hits differ between the ways: {differ}; the worker's RSS: {worker_rss_mb:.0f} MB")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {"data_dir": str(args.data_dir), "differ": differ, "worker_rss_mb": worker_rss_mb, "results": results}
        args.out.write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
