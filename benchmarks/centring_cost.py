"""What centring costs a recall, and what widening float16 vectors through torch saves.

The semantic signal reads each cosine less ``[fusion] centring`` times the memory's
typicality (``FastNetwork.typicality``), which widens the candidates' float16 vectors to
float32 once more; the network widens them through torch where it is loaded
(``RoughCosines.widen``) instead of numpy's ``astype``. This times the four ways in one
process, on one store, query by query in turn (the order reversed every other round),
with the query vectors given (the engine alone):

* ``centring 0, numpy``: the recall as it was before both;
* ``centring 0.75, torch``: as it is now;
* ``centring 0, torch`` and ``centring 0.75, numpy``: each change alone.

The widening gives the same values either way (``tests/unit/test_half_cosines.py``), so
the two ways of a centring rank alike; that is checked on every query. The store is one
``latency.py --keep`` left (its synthetic memories and queries)::

    .venv/bin/python benchmarks/latency.py --sizes 100000 --bulk --no-http --baseline-budget-s 0 \\
        --seed-verbatim-queries 0 --hnsw-queries 10 --ef-sweep 128 --keep --workdir /tmp/lat
    .venv/bin/python benchmarks/centring_cost.py /tmp/lat/latency-100000-* --out benchmarks/results/centring-cost.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from latency import NAMESPACE, summarize  # noqa: E402

from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.fast_network import Rows  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, help="a data directory latency.py --keep left")
    parser.add_argument("--queries", type=int, default=300, help="queries per round (default 300)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--centring", type=float, default=0.75, help="the centring timed beside 0")
    parser.add_argument("--seed", type=int, default=43, help="seed of the synthetic queries")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    config = load_config(data_dir=str(args.data_dir))
    embedder = load_embedder(config)
    service = open_service(config, embedder=embedder)
    net, recaller = service.keeper.network, service.recaller
    rough = net._rough
    if rough is None or not rough.load():
        parser.error("torch is not installed: nothing to widen through")
    configs = {c: replace(config, fusion=replace(config.fusion, centring=c)) for c in (0.0, args.centring)}
    by_torch = net._widened

    def by_numpy(rows: Rows) -> np.ndarray:
        widened: np.ndarray = net._vectors[rows].astype(np.float32)
        return widened

    ways: dict[str, tuple[float, Callable[[Rows], np.ndarray]]] = {
        "centring 0, numpy": (0.0, by_numpy),
        f"centring {args.centring:g}, torch": (args.centring, by_torch),
        "centring 0, torch": (0.0, by_torch),
        f"centring {args.centring:g}, numpy": (args.centring, by_numpy),
    }

    def recall(way: str, query: str, vector: np.ndarray) -> list[str]:
        centring, widen = ways[way]
        recaller._config = configs[centring]
        net._widened = widen  # type: ignore[method-assign]
        result = service.recall(query, namespaces=[NAMESPACE], top_k=10, vector=vector, reinforce=False)
        return [hit.memory.memory_id for hit in result.hits]

    queries = synthetic.queries(args.warmup + args.queries, seed=args.seed)
    vectors = [embedder.embed_query(query) for query in queries]
    for query, vector in zip(queries[: args.warmup], vectors[: args.warmup], strict=True):
        for way in ways:
            recall(way, query, vector)
    times: dict[str, list[float]] = {way: [] for way in ways}
    differ = 0  # queries whose hits the widening changed (it must not)
    for turn in range(args.rounds):
        for query, vector in zip(queries[args.warmup :], vectors[args.warmup :], strict=True):
            order = list(ways) if turn % 2 == 0 else list(reversed(ways))
            hits: dict[str, list[str]] = {}
            for way in order:
                start = time.perf_counter()
                hits[way] = recall(way, query, vector)
                times[way].append(time.perf_counter() - start)
            names = list(ways)
            differ += hits[names[0]] != hits[names[2]] or hits[names[1]] != hits[names[3]]
    service.close()
    result: dict[str, Any] = {
        "benchmark": "centring_cost",
        "data_dir": str(args.data_dir),
        "queries": args.queries * args.rounds,
        "hits_changed_by_the_widening": differ,
        "engine_ms": {way: summarize(seconds) for way, seconds in times.items()},
    }
    print("| way | engine recall p50 / p95 / mean ms |\n|---|---|")
    for way, summary in result["engine_ms"].items():
        print(f"| {way} | {summary['p50_ms']:.2f} / {summary['p95_ms']:.2f} / {summary['mean_ms']:.2f} |")
    print(f"queries whose hits the widening changed: {differ}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
