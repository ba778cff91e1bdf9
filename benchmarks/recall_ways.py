"""A recall's engine time, done several ways in one process, query by query in turn.

Each way switches some of a recall's parts back to how they were, on the same service
and store, so before and after are timed under the same load and in the same caches
(two processes side by side slow each other: benchmarks/RESULTS.md). The parts:

* ``centring``: the semantic signal reads each cosine less ``[fusion] centring`` times
  the memory's typicality (``c0``: the cosine as it is, ``c<value>``: that centring);
* ``widen``: the float16 vectors widened to float32 through torch where it is loaded
  (``torch``, ``RoughCosines.widen``) or by numpy's ``astype`` (``numpy``);
* ``search``: the plain HNSW search answered as handles turned into rows by the fast
  network's table (``handles``, ``VectorIndex.search_handles``) or as ids looked up one
  by one (``ids``, as ``VectorIndex.search`` answers).

A way is named ``centring/widen/search``, e.g. ``c0/numpy/ids`` (every part as it was)
or ``c0.75/torch/handles`` (as it is now). The query vectors are given (the engine
alone), the order of the ways is reversed every other round, and the hits of ways that
differ only in ``widen`` or ``search`` are compared (they must be the same). The store
is one ``latency.py --keep`` left (its synthetic memories and queries)::

    .venv/bin/python benchmarks/latency.py --sizes 100000 --bulk --no-http --baseline-budget-s 0 \\
        --seed-verbatim-queries 0 --hnsw-queries 10 --ef-sweep 128 --keep --workdir /tmp/lat
    .venv/bin/python benchmarks/recall_ways.py /tmp/lat/latency-100000-* --out benchmarks/results/recall-ways.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
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
from engine.adapters.half_cosines import half_cosines  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.fast_network import FastNetwork, Rows  # noqa: E402
from engine.ports import Vector, VectorIndex  # noqa: E402

DEFAULT_WAYS = ("c0/numpy/ids", "c0.75/torch/handles", "c0/torch/ids", "c0.75/numpy/ids", "c0.75/torch/ids")


class Switches:
    """Puts a service's recall parts one way or the other (instance attributes over the
    methods, removed again to go back)."""

    def __init__(self, service: Any) -> None:
        self._service = service
        self._config = service.recaller._config
        self._net: FastNetwork = service.keeper.network
        self._index: VectorIndex = service.keeper.index
        self._search_handles = self._index.search_handles  # the index's own, before any switch

    def set(self, way: str) -> None:
        centring, widen, search = way.split("/")
        fusion = replace(self._config.fusion, centring=float(centring.removeprefix("c")))
        self._service.recaller._config = replace(self._config, fusion=fusion)
        net, index = self._net, self._index
        for name in ("_widened", "rows_of_handles"):
            net.__dict__.pop(name, None)
        index.__dict__.pop("search_handles", None)
        if widen == "numpy":
            net._widened = lambda rows: net._vectors[rows].astype(np.float32)  # type: ignore[method-assign]
        elif widen != "torch":
            raise ValueError(f"widen is numpy or torch, not {widen!r}")
        if search == "ids":
            index.search_handles = self._ids_search  # type: ignore[method-assign]
            net.rows_of_handles = self._ids_rows  # type: ignore[method-assign,assignment]
        elif search != "handles":
            raise ValueError(f"search is ids or handles, not {search!r}")

    def _ids_search(self, vector: Vector, k: int) -> tuple[Any, np.ndarray]:
        """The answer as ids and similarities, as ``search`` gives it (``_ids_rows`` reads the
        ids). Not through ``search`` itself, which answers through the switched method."""
        handles, sims = self._search_handles(vector, k)
        return self._index.ids_of(handles), sims

    def _ids_rows(self, index: VectorIndex, ids: Sequence[str]) -> Rows:
        """Each id's live row looked up one by one, as recall did (NONE where none)."""
        return self._net.live_rows(ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, help="a data directory latency.py --keep left")
    parser.add_argument("--ways", nargs="+", default=list(DEFAULT_WAYS), help="centring/widen/search each")
    parser.add_argument("--queries", type=int, default=300, help="queries per round (default 300)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--seed", type=int, default=43, help="seed of the synthetic queries")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    config = load_config(data_dir=str(args.data_dir))
    embedder = load_embedder(config)
    service = open_service(config, embedder=embedder)
    if not half_cosines.load():
        parser.error("torch is not installed: nothing to widen through")
    switches = Switches(service)
    for way in args.ways:
        switches.set(way)  # refuses a misspelt way before any timing

    def recall(way: str, query: str, vector: np.ndarray) -> tuple[str, ...]:
        switches.set(way)
        result = service.recall(query, namespaces=[NAMESPACE], top_k=10, vector=vector, reinforce=False)
        return tuple(hit.memory.memory_id for hit in result.hits)

    queries = synthetic.queries(args.warmup + args.queries, seed=args.seed)
    vectors = [embedder.embed_query(query) for query in queries]
    for query, vector in zip(queries[: args.warmup], vectors[: args.warmup], strict=True):
        for way in args.ways:
            recall(way, query, vector)
    service.flush()
    service.keeper.network.settle()  # what the warm-up had built in the background (a category's index)
    times: dict[str, list[float]] = {way: [] for way in args.ways}
    differ = 0  # queries whose hits differed between ways of one centring (they must not)
    for turn in range(args.rounds):
        for query, vector in zip(queries[args.warmup :], vectors[args.warmup :], strict=True):
            hits: dict[str, tuple[str, ...]] = {}
            for way in args.ways if turn % 2 == 0 else list(reversed(args.ways)):
                start = time.perf_counter()
                hits[way] = recall(way, query, vector)
                times[way].append(time.perf_counter() - start)
            by_centring: dict[str, set[tuple[str, ...]]] = {}
            for way, found in hits.items():
                by_centring.setdefault(way.split("/")[0], set()).add(found)
            differ += any(len(answers) > 1 for answers in by_centring.values())
    service.close()
    result: dict[str, Any] = {
        "benchmark": "recall_ways",
        "data_dir": str(args.data_dir),
        "queries": args.queries * args.rounds,
        "queries_whose_hits_differed_within_a_centring": differ,
        "engine_ms": {way: summarize(seconds) for way, seconds in times.items()},
    }
    print("| way (centring/widen/search) | engine recall p50 / p95 / mean ms |\n|---|---|")
    for way, summary in result["engine_ms"].items():
        print(f"| {way} | {summary['p50_ms']:.2f} / {summary['p95_ms']:.2f} / {summary['mean_ms']:.2f} |")
    print(f"queries whose hits differed between ways of one centring: {differ}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
