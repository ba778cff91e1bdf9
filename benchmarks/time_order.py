"""Where in a recall the query's times are read: before the candidate channels, or after.

A time parse (dateparser above all) leaves the CPU's caches cold for what runs after it,
so the recaller reads a query's times once its channels have found the candidates
(``Recaller._windows``). This times both orders in one process, on one store, query by
query in turn (which goes first alternates), with the query vectors given (the engine
alone):

* ``after``: the service as it is;
* ``before``: the recall's query handed to the recaller with its windows already read,
  as the service did before (the parse right before the channels).

Both rank the same: every query's hits are compared, and a difference is reported.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from latency import NAMESPACE, summarize  # noqa: E402

from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.recall import RecallQuery, RecallResult  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, help="a data directory latency.py --keep left")
    parser.add_argument("--queries", type=int, default=600, help="timed queries (default 600)")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--seed", type=int, default=43, help="seed of the synthetic queries")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    config = load_config(data_dir=str(args.data_dir))
    embedder = load_embedder(config)
    service = open_service(config, embedder=embedder)
    times, recaller = service.times, service.recaller
    if times is None:
        parser.error("the service reads no times ([fusion] time is 0)")
    as_is = recaller.recall

    def read_first(query: RecallQuery, **kwargs: Any) -> RecallResult:
        if query.windows is None:
            query = replace(query, windows=times.windows(query.text, query.now))
        return as_is(query, **kwargs)

    def recall(text: str, vector: Any, order: str) -> tuple[float, list[str], bool]:
        recaller.recall = read_first if order == "before" else as_is  # type: ignore[method-assign]
        start = time.perf_counter()
        result = service.recall(text, namespaces=[NAMESPACE], top_k=10, vector=vector, reinforce=False)
        seconds = time.perf_counter() - start
        return seconds, [hit.memory.memory_id for hit in result.hits], bool(result.windows)

    try:
        texts = synthetic.queries(args.queries + args.warmup, seed=args.seed)
        vectors = [embedder.embed_query(text) for text in texts]
        for text, vector in zip(texts[: args.warmup], vectors[: args.warmup], strict=True):
            recall(text, vector, "after")
            recall(text, vector, "before")
        service.keeper.network.settle()
        seconds: dict[str, dict[str, list[float]]] = {
            order: {"time named": [], "no time": []} for order in ("after", "before")
        }
        differ = 0
        for n, (text, vector) in enumerate(zip(texts[args.warmup :], vectors[args.warmup :], strict=True)):
            orders = ("after", "before") if n % 2 == 0 else ("before", "after")
            hits: dict[str, list[str]] = {}
            for order in orders:
                took, hits[order], timed = recall(text, vector, order)
                seconds[order]["time named" if timed else "no time"].append(took)
            differ += hits["after"] != hits["before"]
    finally:
        recaller.recall = as_is  # type: ignore[method-assign]
        service.close()

    results = {
        order: {kind: summarize(values) for kind, values in by_kind.items()} for order, by_kind in seconds.items()
    }
    print("| times read | queries that name a time: p50 / p95 / mean ms | the others: p50 / p95 / mean ms |")
    print("|---|---|---|")
    for order, by_kind in results.items():
        cells = [f"{s['p50_ms']:.2f} / {s['p95_ms']:.2f} / {s['mean_ms']:.2f} ({s['n']})" for s in by_kind.values()]
        print(f"| {order} the channels | " + " | ".join(cells) + " |")
    print(f"\nqueries whose hits differ between the two: {differ}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {"data_dir": str(args.data_dir), "differ": differ, "results": results}
        args.out.write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
