"""The first requests after a start: how long each of a few recalls takes in a freshly
started process, where a library it needs (dateparser, JioNLP, jieba) may still be loading.

Each run is a new Python process that opens a copy of ``--data-dir`` (the default
embedder), waits ``--quiet-s`` seconds as a server waits for its first request, then
recalls each of ``--queries`` once, in order, vector embedded per query, reinforcement
off. With ``--baseline-ref`` the engine of that git revision runs the same, run by run in
turn with this tree's, on its own copy. E.g.::

    .venv/bin/python benchmarks/first_requests.py --data-dir benchmarks/.work/quality-madial-zh5-use \\
        --namespace madial --baseline-ref HEAD

Prints a Markdown table and writes JSON; never asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from latency import environment  # noqa: E402
from scale import _archive  # noqa: E402

QUERIES = ("我喜欢什么水果", "上周我说了什么", "what happened on July 11, 2024")
_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import psutil
from engine.adapters import open_service
from engine.config import load_config
data_dir, namespace, quiet, queries = sys.argv[2], sys.argv[3], float(sys.argv[4]), json.loads(sys.argv[5])
started = time.perf_counter()
service = open_service(load_config(None, None, data_dir=data_dir))
opened = time.perf_counter() - started
time.sleep(quiet)
ms = []
for query in queries:
    began = time.perf_counter()
    service.recall(query, namespaces=[namespace], top_k=10, reinforce=False)
    ms.append(round((time.perf_counter() - began) * 1000, 1))
rss = psutil.Process().memory_info().rss / 2**20
service.close()
print(json.dumps({"open_s": round(opened, 2), "recall_ms": ms, "rss_mb": round(rss, 1)}))
"""


def one_run(tree: Path, data_dir: Path, namespace: str, quiet: float, queries: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "data"
        shutil.copytree(data_dir, copy, ignore=shutil.ignore_patterns(".lock"))
        command = [sys.executable, "-c", _CHILD, str(tree), str(copy), namespace, str(quiet), json.dumps(queries)]
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--namespace", default="bench")
    parser.add_argument("--queries", nargs="+", default=list(QUERIES))
    parser.add_argument("--quiet-s", type=float, default=4.0, help="seconds between the open and the first recall")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--baseline-ref", help="git revision whose engine runs in turn with this tree's")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "first-requests.json")
    args = parser.parse_args()
    trees: dict[str, Path] = {"this tree": HERE.parent}
    with tempfile.TemporaryDirectory() as scratch:
        if args.baseline_ref:
            baseline = Path(scratch) / "baseline"
            trees = {_archive(args.baseline_ref, baseline): baseline, **trees}
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, tree in trees.items():
                runs[name].append(one_run(tree, args.data_dir, args.namespace, args.quiet_s, args.queries))
                print(name, runs[name][-1], file=sys.stderr, flush=True)
    print("\n| query, in order | " + " | ".join(f"{name} ms" for name in runs) + " |")
    print("|---|" + "---:|" * len(runs))
    for n, query in enumerate(args.queries):
        cells = [" / ".join(str(run["recall_ms"][n]) for run in done) for done in runs.values()]
        print(f"| {query} | " + " | ".join(cells) + " |")
    print("| open s | " + " | ".join(" / ".join(str(r["open_s"]) for r in done) for done in runs.values()) + " |")
    print("| RSS MB after | " + " | ".join(" / ".join(str(r["rss_mb"]) for r in done) for done in runs.values()) + " |")
    result = {
        "benchmark": "first_requests",
        "environment": environment(),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"\nresults: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
