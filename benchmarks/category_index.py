"""Recalls narrowed to one category, with and without that category's own HNSW index
(``engine/category_indexes.py``), on one data directory, in alternating rounds.

On a directory that ``latency.py --keep`` left (one namespace, synthetic memories, about
8% of them procedures):

* "how do I …" questions, which rank twice, the second time over procedures;
* other questions with a filter on the procedures' category;

each recalled with the query's vector given (the embedding is left out, as in the
engine's column of latency.py), ``rounds`` times with the index and as many without
(the network's indexes set aside), alternating, so that both see the same machine. It
reports each one's p50 / p95 / mean, how many of the top 10 the two share, how long the
index took to build in the background once a recall asked for it, and the process's RSS
before and after the build (after a warm-up round without it). Run::

    .venv/bin/python benchmarks/latency.py --sizes 100000 --bulk --keep --no-http --queries 20 \\
        --baseline-budget-s 0 --seed-verbatim-queries 0 --hnsw-queries 10 --ef-sweep 128
    .venv/bin/python benchmarks/category_index.py --data-dir benchmarks/.work/latency/latency-100000-*
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import synthetic  # noqa: E402
from scale import await_rough_cosines  # noqa: E402

from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.fast_network import FastNetwork  # noqa: E402
from engine.procedures import PROCEDURE, asks_how  # noqa: E402
from engine.records import MemoryFilter  # noqa: E402
from engine.service import MemoryService  # noqa: E402

NAMESPACE = "bench"  # latency.py's
PROCEDURES = MemoryFilter(categories=(PROCEDURE,))


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


@contextmanager
def without_category_indexes(network: FastNetwork) -> Iterator[None]:
    """The network as it plans without its categories' indexes (as ``[index]
    category_indexes = 0`` would have it), for the duration."""
    kept, network._category_indexes = network._category_indexes, None
    try:
        yield
    finally:
        network._category_indexes = kept


def timed(service: MemoryService, asked: list[tuple[str, np.ndarray]], flt: MemoryFilter | None) -> dict[str, Any]:
    times, hits = [], []
    for text, vector in asked:
        start = time.perf_counter()
        result = service.recall(text, namespaces=[NAMESPACE], vector=vector, flt=flt, reinforce=False)
        times.append(time.perf_counter() - start)
        hits.append([hit.memory.memory_id for hit in result.hits])
    return {"seconds": times, "hits": hits}


def asked_and_built(service: MemoryService, how: list[tuple[str, np.ndarray]]) -> float:
    """Seconds from the first "how" recall that asks for the procedures' index (it had
    to scan them) to the index being built."""
    network = service.keeper.network
    indexes = network._category_indexes
    assert indexes is not None, "[index] category_indexes is 0"
    for text, vector in how:
        service.recall(text, namespaces=[NAMESPACE], vector=vector, reinforce=False)
        if indexes._building:
            start = time.perf_counter()
            network.settle()
            return time.perf_counter() - start
    raise SystemExit("no how question scanned the procedures: no index was asked for")


def summary(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000
    p50, p95 = np.percentile(ms, [50, 95])
    return {"n": len(ms), "p50_ms": float(p50), "p95_ms": float(p95), "mean_ms": float(ms.mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="a directory latency.py --keep left")
    parser.add_argument("--queries", type=int, default=1500, help="synthetic queries drawn (the how ones are kept)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "category-index.json")
    args = parser.parse_args()

    config = load_config(data_dir=args.data_dir)
    embedder = load_embedder(config)
    service = open_service(config, embedder=embedder, background_reembed=False)
    await_rough_cosines()
    network = service.keeper.network
    texts = synthetic.queries(args.queries, seed=17)
    how = [(text, embedder.embed_query(text)) for text in texts if asks_how(text)]
    other = [(text, embedder.embed_query(text)) for text in texts if not asks_how(text)][: len(how)]
    try:
        with without_category_indexes(network):  # a warm-up round
            timed(service, how, None)
            timed(service, other, PROCEDURES)
        rss_before = rss_mb()
        built_s = asked_and_built(service, how)
        held = network.category_indexes_held()
        rss_after = rss_mb()
        if PROCEDURE not in held:
            raise SystemExit(f"no index was built for {PROCEDURE!r} (held: {held}): is the namespace large enough?")
        runs: dict[str, dict[str, list[Any]]] = {}
        for _ in range(args.rounds):
            for mode in ("without", "with"):
                for name, asked, flt in (("how", how, None), ("filtered", other, PROCEDURES)):
                    if mode == "without":
                        with without_category_indexes(network):
                            found = timed(service, asked, flt)
                    else:
                        found = timed(service, asked, flt)
                    run = runs.setdefault(f"{name}/{mode}", {"seconds": [], "hits": []})
                    run["seconds"] += found["seconds"]
                    run["hits"] = found["hits"]  # the last round's (the same each round)
        memories = len(network)
    finally:
        service.close()
    result: dict[str, Any] = {
        "memories": memories,
        "category_indexes": held,
        "build_s": built_s,
        "rss_mb": {"before": rss_before, "after_build": rss_after},
        "machine": {"python": platform.python_version(), "architecture": platform.machine(), "cpus": os.cpu_count()},
        "load_average": os.getloadavg(),
    }
    print(f"{memories:,} memories; {held}; built in {built_s:.2f} s; RSS {rss_before:.0f} -> {rss_after:.0f} MB")
    print()
    print("| recall (query vector given) | without its category index p50 / p95 / mean ms | with it | top 10 shared |")
    print("|---|---|---|---:|")
    for name in ("how", "filtered"):
        without, with_ = runs[f"{name}/without"], runs[f"{name}/with"]
        shared = np.mean(
            [len(set(a) & set(b)) / max(1, len(a)) for a, b in zip(without["hits"], with_["hits"], strict=True)]
        )
        a, b = summary(without["seconds"]), summary(with_["seconds"])
        result[name] = {"without": a, "with": b, "top10_shared": float(shared), "queries": len(without["hits"])}
        print(
            f"| {name} ({len(without['hits'])} queries × {args.rounds}) "
            f"| {a['p50_ms']:.2f} / {a['p95_ms']:.2f} / {a['mean_ms']:.2f} "
            f"| {b['p50_ms']:.2f} / {b['p95_ms']:.2f} / {b['mean_ms']:.2f} | {shared:.3f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
