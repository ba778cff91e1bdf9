"""Where a recall's engine time goes, stage by stage, by kind of question.

Each stage of ``engine.recall.Recaller`` (its channels, the cosines' reading, the
ranking, the read of the time a question names, the final read) is timed around every
call, query by query, on a store that ``latency.py --keep`` left or ``scale.py`` built
(``--scale``). The query vectors are given (the engine alone) and reinforcement is off,
as in ``recall_ways.py``. Printed: the mean milliseconds of each stage for every
question, for those that name a time (the recall read a window), for the "how"
questions (ranked twice: once over everything, once over procedures), for the others,
and for the slowest 5%, which set the p95.

The time a question names is read in a worker process while the channels run (README,
"Time in the query"): ``begin_windows`` is the cost of asking for it, and
``windows_answer`` the time the recall spent waiting for and taking the answer.

Stages nest: ``_narrowed`` (a "how" question's second ranking) holds the second
ranking's own channel calls, which are counted in their stages too; ``_first_of`` (its
hits put before the others) holds the two rankings' ``_final``; and the one read of the
hits is ``get_many_and_seq`` (``get_many`` only reads a further slice, where hits were
turned away)::

    .venv/bin/python benchmarks/recall_stages.py benchmarks/.work/latency/latency-100000-*
    .venv/bin/python benchmarks/recall_stages.py --scale benchmarks/.work/scale/one-1000000-seed42 --seed 42
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import scale  # noqa: E402
import synthetic  # noqa: E402
from latency import summarize  # noqa: E402
from recall_ways import open_kept  # noqa: E402

from engine import procedures  # noqa: E402

STAGES = (
    "_semantic",
    "_focused",
    "_lexical",
    "_graph",
    "_context",
    "_read_cosines",
    "_ranked",
    "_narrowed",
    "_first_of",
    "_final",
    "_contradictions",
)


def timed(owner: Any, name: str, spent: dict[str, float]) -> None:
    """Wrap ``owner.name`` (an instance attribute over the method) to add its seconds to ``spent[name]``."""
    method: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - start

    setattr(owner, name, wrapper)


def timed_reading(recaller: Any, spent: dict[str, float]) -> None:
    """Time ``begin_windows`` as a stage, and what the recall spends in its reading's
    ``ready`` and answer as ``windows_answer``."""
    begin: Callable[..., Any] = recaller.begin_windows

    class Reading:
        def __init__(self, reading: Any) -> None:
            self._reading = reading

        def ready(self, wait: float) -> bool:
            start = time.perf_counter()
            try:
                return bool(self._reading.ready(wait))
            finally:
                spent["windows_answer"] += time.perf_counter() - start

        def __call__(self) -> Any:
            start = time.perf_counter()
            try:
                return self._reading()
            finally:
                spent["windows_answer"] += time.perf_counter() - start

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return Reading(begin(*args, **kwargs))
        finally:
            spent["begin_windows"] += time.perf_counter() - start

    recaller.begin_windows = wrapper


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, help="a data directory latency.py --keep left (or scale.py built)")
    parser.add_argument("--scale", action="store_true", help="data_dir is one scale.py built (hashing vectors)")
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--seed", type=int, default=43, help="seed of the synthetic queries")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    service, embedder, namespace = open_kept(args.data_dir, from_scale=args.scale)
    spent: dict[str, float] = defaultdict(float)
    for name in STAGES:
        timed(service.recaller, name, spent)
    timed_reading(service.recaller, spent)
    for read in ("get_many_and_seq", "get_many"):
        timed(service.recaller._store, read, spent)

    queries = synthetic.queries(args.warmup + args.queries, seed=args.seed)
    vectors = [embedder.embed_query(query) for query in queries]
    for query, vector in zip(queries[: args.warmup], vectors[: args.warmup], strict=True):
        service.recall(query, namespaces=[namespace], top_k=10, vector=vector, reinforce=False)
    service.flush()
    scale.settle_service(service)  # the store's start-up check, what the warm-up left building
    measured: list[tuple[str, float, dict[str, float]]] = []
    for query, vector in zip(queries[args.warmup :], vectors[args.warmup :], strict=True):
        spent.clear()
        start = time.perf_counter()
        result = service.recall(query, namespaces=[namespace], top_k=10, vector=vector, reinforce=False)
        seconds = time.perf_counter() - start
        kind = "how" if procedures.asks_how(query) else "names a time" if result.windows else "other"
        measured.append((kind, seconds, dict(spent)))
    service.close()

    cut = float(np.percentile([seconds for _, seconds, _ in measured], 95))
    groups = {
        "every question": measured,
        "names a time": [m for m in measured if m[0] == "names a time"],
        '"how"': [m for m in measured if m[0] == "how"],
        "other": [m for m in measured if m[0] == "other"],
        "slowest 5%": [m for m in measured if m[1] >= cut],
    }
    stages = [*STAGES, "begin_windows", "windows_answer", "get_many_and_seq", "get_many"]
    table: dict[str, Any] = {}
    for group, found in groups.items():
        table[group] = {
            "questions": len(found),
            "total": summarize([seconds for _, seconds, _ in found]),
            "stages_mean_ms": {
                stage: round(float(np.mean([spent.get(stage, 0.0) for _, _, spent in found])) * 1000, 3)
                for stage in stages
            }
            if found
            else {},
        }
    print("| stage, mean ms | " + " | ".join(f"{group} ({table[group]['questions']})" for group in groups) + " |")
    print("|---|" + "---:|" * len(groups))
    row = " | ".join(f"{table[g]['total'].get('mean_ms', 0):.2f}" for g in groups)
    print(f"| whole recall | {row} |")
    for stage in stages:
        print(f"| {stage} | " + " | ".join(f"{table[g]['stages_mean_ms'].get(stage, 0):.2f}" for g in groups) + " |")
    every = table["every question"]["total"]
    print(f"every question: p50 {every['p50_ms']:.2f}, p95 {every['p95_ms']:.2f}, mean {every['mean_ms']:.2f} ms")
    share = {kind: sum(1 for m in groups["slowest 5%"] if m[0] == kind) for kind in ("names a time", "how", "other")}
    print(f"the slowest 5% by kind: {share}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        result_json = {"benchmark": "recall_stages", "data_dir": str(args.data_dir), "slowest_by_kind": share, **table}
        args.out.write_text(json.dumps(result_json, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
