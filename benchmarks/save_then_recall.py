"""A recall right after a save, in one namespace: an agent's turn.

A namespace of up to 5,000 memories rebuilds its BM25 index before a query answers
once it has changed (bm25s indexes a fixed corpus; ``engine/fast_network.py``), so the
first recall after a save paid that build (about 45 µs a memory with bm25s's own
``BM25.index``, about 1 µs with the whole-corpus build since). With ``[index]
lexicon_build_ahead_ms`` the service builds it ahead once the writes pause, and a recall
that comes later finds it built. This benchmark times, for each namespace size, with
the build ahead off and on, in the same run: a save, a pause of ``gap`` seconds, then a
recall, again and again; and, for scale, recalls with no save before them.

Hashing vectors (the engine's time, not a model's); real SQLite file, real HNSW index.
It prints a table and writes JSON; it asserts nothing.

    .venv/bin/python benchmarks/save_then_recall.py --sizes 1000 4000 --gaps 0 0.3 1
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import synthetic  # noqa: E402
from hashing import HashingEmbedder  # noqa: E402

NAMESPACE = "agent"


def _percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000.0
    return {f"p{q}": round(float(np.percentile(ms, q)), 2) for q in (50, 95)}


def measure(size: int, ahead_ms: int, gaps: list[float], turns: int, seed: int) -> dict[str, Any]:
    from engine.adapters import open_service
    from engine.adapters.half_cosines import half_cosines
    from engine.config import load_config
    from engine.records import MemoryDraft

    half_cosines.load()  # what a warm service has
    stream = synthetic.memories(seed)

    def draft(item: synthetic.SyntheticMemory) -> MemoryDraft:
        return MemoryDraft(content=item.content, namespace=NAMESPACE, category=item.category, entities=item.entities)

    with tempfile.TemporaryDirectory(prefix="save-then-recall-") as scratch:
        config = load_config(env={}, data_dir=scratch, index={"lexicon_build_ahead_ms": ahead_ms})
        service = open_service(config, embedder=HashingEmbedder(), background_reembed=False)
        try:
            filled = 0
            while filled < size:
                batch = [draft(item) for item in itertools.islice(stream, min(256, size - filled))]
                service.save_batch(batch)
                filled += len(batch)
            queries = itertools.cycle(synthetic.queries(200, seed=seed))
            for _ in range(10):
                service.recall(next(queries), namespaces=[NAMESPACE])
            alone = []
            for _ in range(turns):
                began = time.perf_counter()
                service.recall(next(queries), namespaces=[NAMESPACE])
                alone.append(time.perf_counter() - began)
            row: dict[str, Any] = {"size": size, "build_ahead_ms": ahead_ms, "recall_alone_ms": _percentiles(alone)}
            for gap in gaps:
                saves, recalls = [], []
                for _ in range(turns):
                    began = time.perf_counter()
                    service.save(draft(next(stream)))
                    saves.append(time.perf_counter() - began)
                    time.sleep(gap)
                    began = time.perf_counter()
                    service.recall(next(queries), namespaces=[NAMESPACE])
                    recalls.append(time.perf_counter() - began)
                row[f"gap_{gap}"] = {"save_ms": _percentiles(saves), "recall_ms": _percentiles(recalls)}
        finally:
            service.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000])
    parser.add_argument("--gaps", type=float, nargs="+", default=[0.0, 0.3, 1.0], help="seconds from save to recall")
    parser.add_argument("--turns", type=int, default=20, help="save-then-recall turns per gap")
    parser.add_argument("--ahead-ms", type=int, default=50, help="lexicon_build_ahead_ms of the 'on' runs")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "save-then-recall.json")
    args = parser.parse_args()
    rows = [
        measure(size, ahead, args.gaps, args.turns, args.seed) for size in args.sizes for ahead in (0, args.ahead_ms)
    ]
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average": os.getloadavg()},
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    gaps = "".join(f" recall {gap:g} s after a save p50 / p95 ms |" for gap in args.gaps)
    print(f"| memories | build ahead | recall, no save before, p50 / p95 ms |{gaps} save p50 ms |")
    print("|---:|---|---|" + "---|" * len(args.gaps) + "---:|")
    for row in rows:
        cells = "".join(
            f" {row[f'gap_{gap}']['recall_ms']['p50']} / {row[f'gap_{gap}']['recall_ms']['p95']} |" for gap in args.gaps
        )
        ahead = f"{row['build_ahead_ms']} ms" if row["build_ahead_ms"] else "off"
        alone = row["recall_alone_ms"]
        save = row[f"gap_{args.gaps[0]}"]["save_ms"]["p50"]
        print(f"| {row['size']:,} | {ahead} | {alone['p50']} / {alone['p95']} |{cells} {save} |")


if __name__ == "__main__":
    main()
