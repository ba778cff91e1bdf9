"""What each way of finding a recall's semantic candidates costs, against the constants the
planner prices them with (``engine/recall.py``: ``SEARCH_US``, ``FILTERED_US``,
``MASK_US_PER_ROW``, ``SCAN_US_PER_ROW``, ``ROUGH_SCAN_US_PER_ROW``).

On a data directory that ``latency.py --keep`` left (one namespace, the default model's
vectors), for varied query vectors:

* a plain HNSW search of k neighbours, for several k;
* for filters that let a share of the namespace through (a window of the newest
  memories, which lie all over the vector space, so a filtered search walks past the
  rest): the mask of sight and filter over the namespace's rows, the exact scan of
  what passes with numpy alone, with every cosine exact but the vectors widened
  through torch (``RoughCosines.widen``, as below ``fast_network.ROUGH_MIN_ROWS``
  where torch is loaded) and with rough cosines first, and the HNSW search that
  keeps only what passes;
* the constant each of those implies, beside the planner's (the scan with rough cosines
  is timed at every share, below ``fast_network.ROUGH_MIN_ROWS`` too).

Each timing is the median over the queries of the second of two calls (the first warms
the caches), with 2 ms of busy work before each pair, as a recall does before its
search; the scan with rough cosines is also timed once after 50 ms idle (a thread pool
that sleeps between scans shows there). Run::

    .venv/bin/python benchmarks/latency.py --sizes 100000 --bulk --keep --no-http --queries 20 \\
        --baseline-budget-s 0 --seed-verbatim-queries 0 --hnsw-queries 10 --ef-sweep 128
    .venv/bin/python benchmarks/plan_costs.py --data-dir benchmarks/.work/latency/latency-100000-*
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import synthetic  # noqa: E402

from engine import fast_network, recall  # noqa: E402
from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.adapters.half_cosines import half_cosines  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.records import MemoryFilter, sight_of  # noqa: E402

NAMESPACE = "bench"  # latency.py's
SHARES = (0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.3)
SEARCH_KS = (10, 100, 300, 1000, 2500)
PAUSE_S = 0.05


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def median_us(call: Callable[[np.ndarray], Any], vectors: list[np.ndarray]) -> float:
    times = []
    for vector in vectors:
        busy(0.002)
        call(vector)
        start = time.perf_counter()
        call(vector)
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e6)


def after_pause_us(call: Callable[[np.ndarray], Any], vectors: list[np.ndarray]) -> tuple[float, float]:
    """The median and the 95th percentile of one call made after ``PAUSE_S`` idle, as a
    recall's scan comes after its search and masks (a thread pool may be asleep by then)."""
    times = []
    for vector in vectors:
        time.sleep(PAUSE_S)
        start = time.perf_counter()
        call(vector)
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e6), float(np.percentile(times, 95) * 1e6)


def torch_version() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_threads() -> int | None:
    try:
        import torch
    except ImportError:
        return None
    return int(torch.get_num_threads())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="a directory latency.py --keep left")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "plan-costs.json")
    args = parser.parse_args()

    config = load_config(data_dir=args.data_dir)
    embedder = load_embedder(config)
    service = open_service(config, embedder=embedder, background_reembed=False)
    half_cosines.load()
    try:
        recaller = service.recaller
        keeper = service.recaller._keeper
        net, index = keeper.network, keeper.index
        vectors = [embedder.embed_query(q) for q in synthetic.queries(args.queries, seed=5)]
        now = datetime.now(UTC)
        sight = sight_of([NAMESPACE], None)
        inside = net.rows_in(sight.namespaces)
        size = len(inside)
        if size != len(index):  # the implied FILTERED_US divides by the index's size
            raise SystemExit(f"{args.data_dir} holds other namespaces than {NAMESPACE!r}")
        created = np.sort(net.created_of(inside))
        searches = {k: median_us(lambda v, k=k: index.search(v, k), vectors) for k in SEARCH_KS}
        per_neighbour = (searches[1000] - searches[100]) / 900
        search_us = searches[100] - per_neighbour * 100
        rows: list[dict[str, Any]] = []
        for share in SHARES:
            cut = float(created[int(size * (1 - share))])
            after = datetime.fromtimestamp(cut / 1e6, UTC)
            flt = MemoryFilter(created_after=after)
            with net.reading():
                passing = int(net.passes(sight, flt, now, inside).sum())

                def filtered(vector: np.ndarray, flt: MemoryFilter = flt) -> object:
                    query = recall.RecallQuery(
                        text="",
                        vector=vector,
                        sight=sight,
                        flt=flt,
                        top_k=10,
                        pool=100,
                        now=now,
                        terms=(),
                        entity_keys=frozenset(),
                    )
                    return recaller._filtered(net, query, inside)

                mask = median_us(lambda v, flt=flt: net.passes(sight, flt, now, inside), vectors)
                found = median_us(filtered, vectors)
                least, fast_network.ROUGH_MIN_ROWS = fast_network.ROUGH_MIN_ROWS, 1  # rough at every size
                try:
                    rough = median_us(lambda v, flt=flt: net.nearest(v, sight, flt, now, 100), vectors)
                    paused = after_pause_us(lambda v, flt=flt: net.nearest(v, sight, flt, now, 100), vectors)
                finally:
                    fast_network.ROUGH_MIN_ROWS = least
                least, fast_network.ROUGH_MIN_ROWS = fast_network.ROUGH_MIN_ROWS, 1 << 62  # exact at every size
                try:  # every cosine exact, the vectors widened through torch (``RoughCosines.widen``)
                    widened = median_us(lambda v, flt=flt: net.nearest(v, sight, flt, now, 100), vectors)
                finally:
                    fast_network.ROUGH_MIN_ROWS = least
                kept, net._rough = net._rough, None  # the scan with numpy alone
                try:
                    plain = median_us(lambda v, flt=flt: net.nearest(v, sight, flt, now, 100), vectors)
                finally:
                    net._rough = kept
            rough_used = net.scans_rough
            rows.append(
                {
                    "share": share,
                    "passing": passing,
                    "mask_us": mask,
                    "filtered_us": found,
                    "scan_us": plain,
                    "scan_widened_us": widened if rough_used else None,
                    "scan_rough_us": rough if rough_used else None,
                    "scan_rough_after_pause_us": {"p50": paused[0], "p95": paused[1]} if rough_used else None,
                    "implied": {
                        "MASK_US_PER_ROW": mask / size,
                        "FILTERED_US": (
                            found - search_us - per_neighbour * 100 - mask - recall.LOOKUP_US_PER_ROW * passing
                        )
                        / (size / passing),
                        "SCAN_US_PER_ROW": (plain - mask) / passing,
                        "WIDENED_SCAN_US_PER_ROW": (widened - mask) / passing if rough_used else None,
                        "ROUGH_SCAN_US_PER_ROW": (rough - mask) / passing if rough_used else None,
                    },
                }
            )
    finally:
        service.close()
    names = ("SEARCH_US", "SEARCH_US_PER_NEIGHBOUR", "FILTERED_US", "MASK_US_PER_ROW", "SCAN_US_PER_ROW")
    names += ("ROUGH_SCAN_US_PER_ROW", "LOOKUP_US_PER_ROW")
    constants = {name: getattr(recall, name) for name in names} | {"ROUGH_MIN_ROWS": fast_network.ROUGH_MIN_ROWS}
    result = {
        "memories": size,
        "dim": int(vectors[0].shape[0]),
        "machine": {
            "python": platform.python_version(),
            "architecture": platform.machine(),
            "cpus": os.cpu_count(),
            "torch": torch_version(),
            "torch_threads": torch_threads(),
            "rough_one_thread": getattr(half_cosines, "one_thread", None),  # None: an engine before it
        },
        "search_us": searches,
        "implied_search": {"SEARCH_US": search_us, "SEARCH_US_PER_NEIGHBOUR": per_neighbour},
        "filters": rows,
        "planner_constants": constants,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{size:,} memories, {result['dim']} dimensions; the planner's constants: {constants}")
    print("plain search µs by k: " + ", ".join(f"{k}: {us:.0f}" for k, us in searches.items()))
    print(f"implied SEARCH_US {search_us:.0f}, SEARCH_US_PER_NEIGHBOUR {per_neighbour:.2f}")
    print()
    print(
        "| share passing | rows | mask µs | filtered search µs | scan, numpy µs | scan, widened by torch µs "
        f"| scan, rough first µs | the same after {PAUSE_S * 1000:.0f} ms idle, p50 / p95 µs "
        "| implied FILTERED_US | SCAN_US_PER_ROW | WIDENED_SCAN_US_PER_ROW | ROUGH_SCAN_US_PER_ROW |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")

    def shown(value: float | None, digits: int) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    for row in rows:
        implied = row["implied"]
        pause = row["scan_rough_after_pause_us"]
        paused_us = f"{pause['p50']:.0f} / {pause['p95']:.0f}" if pause is not None else "–"
        print(
            f"| {row['share']:.3f} | {row['passing']:,} | {row['mask_us']:.0f} | {row['filtered_us']:.0f} "
            f"| {row['scan_us']:.0f} | {shown(row['scan_widened_us'], 0)} | {shown(row['scan_rough_us'], 0)} "
            f"| {paused_us} | {implied['FILTERED_US']:.0f} | {implied['SCAN_US_PER_ROW']:.2f} "
            f"| {shown(implied['WIDENED_SCAN_US_PER_ROW'], 2)} | {shown(implied['ROUGH_SCAN_US_PER_ROW'], 2)} |"
        )
    print(f"\nresults: {args.out}")


if __name__ == "__main__":
    main()
