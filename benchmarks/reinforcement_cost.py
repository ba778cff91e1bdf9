"""What reinforcement costs a recall: the same questions with it off and on, in turn.

A recall hands its hits' bonuses to the background reinforcer (``engine.reinforcement``),
which writes them in one store transaction per gathering and mirrors them into the fast
network. The recall does not wait for it, but the thread and its writes run beside the
recalls that follow. Here blocks of ``--block`` questions alternate between reinforcement
off and on, each pair of blocks the same questions, asked off first in one pair and on
first in the next (a flush after each block, so no block pays for the one before), on a store
``latency.py --keep`` left or ``scale.py`` built (``--scale``), query vectors given.
Printed per arm: wall-clock p50 / p95 / mean, and the main thread's own CPU time (what
the recall spent itself, not waiting for the interpreter's lock or the other core)::

    .venv/bin/python benchmarks/reinforcement_cost.py --scale benchmarks/.work/scale/one-100000-seed42
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import scale  # noqa: E402
import synthetic  # noqa: E402
from recall_ways import open_kept  # noqa: E402

ARMS = ("off", "on")


def summary(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)), "mean_ms": float(ms.mean())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, help="a data directory latency.py --keep left (or scale.py built)")
    parser.add_argument("--scale", action="store_true", help="data_dir is one scale.py built (hashing vectors)")
    parser.add_argument("--blocks", type=int, default=12, help="blocks in all, the arms in turn (default 12)")
    parser.add_argument("--block", type=int, default=100, help="questions a block (default 100)")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--seed", type=int, default=43, help="seed of the synthetic queries")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    service, embedder, namespace = open_kept(args.data_dir, from_scale=args.scale)
    pairs = (args.blocks + 1) // 2
    queries = synthetic.queries(args.warmup + pairs * args.block, seed=args.seed)
    vectors = [embedder.embed_query(query) for query in queries]
    for query, vector in zip(queries[: args.warmup], vectors[: args.warmup], strict=True):
        service.recall(query, namespaces=[namespace], top_k=10, vector=vector, reinforce=False)
    service.flush()
    scale.settle_service(service)  # the store's start-up check, what the warm-up left building
    wall: dict[str, list[float]] = {arm: [] for arm in ARMS}
    cpu: dict[str, list[float]] = {arm: [] for arm in ARMS}
    asked = list(zip(queries[args.warmup :], vectors[args.warmup :], strict=True))
    for block in range(args.blocks):
        # Both arms ask a pair's questions, in turn first: what the second asking finds
        # warm (the pages, a question's postings) falls to each arm alike.
        pair, second = divmod(block, 2)
        arm = ARMS[(pair + second) % len(ARMS)]
        for query, vector in asked[pair * args.block : (pair + 1) * args.block]:
            start, own = time.perf_counter(), time.thread_time()
            service.recall(query, namespaces=[namespace], top_k=10, vector=vector, reinforce=arm == "on")
            cpu[arm].append(time.thread_time() - own)
            wall[arm].append(time.perf_counter() - start)
        service.flush()
    service.close()

    results = {arm: {"wall": summary(wall[arm]), "main_thread_cpu": summary(cpu[arm])} for arm in ARMS}
    print("| reinforcement | wall p50 / p95 / mean ms | main thread's CPU p50 / mean ms |")
    print("|---|---|---|")
    for arm, found in results.items():
        w, c = found["wall"], found["main_thread_cpu"]
        walls = f"{w['p50_ms']:.2f} / {w['p95_ms']:.2f} / {w['mean_ms']:.2f}"
        print(f"| {arm} | {walls} | {c['p50_ms']:.2f} / {c['mean_ms']:.2f} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        document = {"benchmark": "reinforcement_cost", "data_dir": str(args.data_dir), "arms": results}
        args.out.write_text(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
