"""Recall over HTTP on uvicorn's two stacks: asyncio with h11 (pure Python) against uvloop
with httptools (C), the same app on the same data directory, in alternating rounds; or
(``--compare time-worker``) on uvloop with httptools, the times a query names read in a
worker process (``[recall] time_worker``, the default) against in the request's thread.

uvicorn picks uvloop and httptools when they are installed, which twinmem's dependencies
make sure of; this measures what that buys. Each round starts the app on one stack
(``uvicorn.run(create_app(config), loop=…, http=…)`` in a child process on a free loopback
port), waits for ``/health``, sends ``--warmup`` recalls, then times ``--queries``
sequential ``POST /v1/memory/recall`` (top 10) from one persistent httpx client, and stops
the server. The stacks take turns ``--rounds`` times, so load from elsewhere falls on both.
The worker starts at the first query that may name a time: a warm-up holds some, and
the timed recalls start two seconds after it. The queries that name a time (read by the
same library here) are summarised apart as well.

The data directory is one that ``latency.py --keep`` left (namespace ``bench``, the
default embedder), e.g.::

    .venv/bin/python benchmarks/latency.py --sizes 10000 --bulk --no-http --baseline-budget-s 0 \\
        --seed-verbatim-queries 0 --keep
    .venv/bin/python benchmarks/http_stack.py --data-dir benchmarks/.work/latency/latency-10000-*

Prints a Markdown table and writes JSON; never asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synthetic  # noqa: E402
from latency import NAMESPACE, environment, free_port, summarize  # noqa: E402

from engine.adapters.time_expressions import LibraryTimeExpressions  # noqa: E402

STACKS = (("asyncio", "h11"), ("uvloop", "httptools"))
_SERVE = """
import sys, uvicorn
from api.app import create_app
from engine.config import load_config
from dataclasses import replace
data_dir, port, loop, http, worker = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] == "1"
config = load_config(None, None, data_dir=data_dir)
app = create_app(replace(config, recall=replace(config.recall, time_worker=worker)))
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", loop=loop, http=http)
"""


def one_round(
    data_dir: Path, loop: str, http: str, queries: list[str], warmup: int, *, time_worker: bool = True
) -> list[float]:
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(HERE.parent))
    argv = [sys.executable, "-c", _SERVE, str(data_dir), str(port), loop, http, "1" if time_worker else "0"]
    server = subprocess.Popen(argv, env=env)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            deadline = time.monotonic() + 300
            while True:
                if server.poll() is not None:
                    raise RuntimeError(f"the server on {loop}+{http} exited with {server.returncode}")
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)

            def recall(query: str) -> None:
                body = {"query": query, "top_k": 10, "namespace": NAMESPACE}
                client.post("/v1/memory/recall", json=body).raise_for_status()

            for query in queries[:warmup]:
                recall(query)
            time.sleep(2.0)  # the time-parsing worker, started by the warm-up, is ready
            seconds = []
            for query in queries[warmup:]:
                start = time.perf_counter()
                recall(query)
                seconds.append(time.perf_counter() - start)
            return seconds
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="a data directory latency.py --keep left")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=500, help="timed recalls per round and stack")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--compare", choices=("stacks", "time-worker"), default="stacks")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "http-stack.json")
    args = parser.parse_args()
    queries = synthetic.queries(args.warmup + args.queries, seed=args.seed)
    ways = (
        {f"{loop}+{http}": (loop, http, True) for loop, http in STACKS}
        if args.compare == "stacks"
        else {"times read in a worker": (*STACKS[1], True), "times read in the request": (*STACKS[1], False)}
    )
    reader, now = LibraryTimeExpressions(), datetime.now(UTC)
    timed = [bool(reader.windows(query, now)) for query in queries[args.warmup :]]
    rounds: dict[str, list[dict[str, Any]]] = {}
    pooled: dict[str, list[float]] = {}
    load_start = os.getloadavg()
    for number in range(args.rounds):
        for name, (loop, http, worker) in ways.items():
            seconds = one_round(args.data_dir, loop, http, queries, args.warmup, time_worker=worker)
            rounds.setdefault(name, []).append(summarize(seconds))
            pooled.setdefault(name, []).extend(seconds)
            stats = rounds[name][-1]
            print(f"round {number + 1}, {name}: p50 {stats['p50_ms']} / p95 {stats['p95_ms']} ms", flush=True)
    totals = {name: summarize(seconds) for name, seconds in pooled.items()}
    naming = {
        name: summarize([t for t, named in zip(seconds, timed * args.rounds, strict=True) if named])
        for name, seconds in pooled.items()
    }
    print(f"\n| {args.compare} | recall over HTTP p50 / p95 / p99 ms | recalls | those naming a time: p50 / p95 ms |")
    print("|---|---|---:|---|")
    for name, stats in totals.items():
        named = naming[name]
        print(
            f"| {name} | {stats['p50_ms']} / {stats['p95_ms']} / {stats['p99_ms']} | {stats['n']} "
            f"| {named['p50_ms']} / {named['p95_ms']} ({named['n']}) |"
        )
    result = {
        "benchmark": "http_stack",
        "environment": environment(),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
        "rounds": rounds,
        "total": totals,
        "naming_a_time": naming,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"\nresults: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
