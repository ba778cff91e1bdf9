"""What one recall allocates, against the size of the namespace it looks into.

For each N, one namespace of N memories is filled through the store (no write path, so
that large N fill in minutes) with vectors chosen so that a filtered recall finds none of
its HNSW neighbours passing and takes the exact scan over N/2 memories, or (where the plan
prices it lower, ``engine/recall.py``) the filtered HNSW search among them: the recall
path whose memory used to grow with the namespace (``tests/huge_namespace.py`` describes
the set-up). ``MemoryService.recall``
(query embedding, all three channels, the store read of the hits) then runs under
``tracemalloc``; reported: the peak of what the recall allocated, in total and per
memory of the namespace, with the path it took (exact scan or not). The embedder is the tests'
hashing embedder at 384 dimensions (MiniLM's), so the numbers are the engine's.

    .venv/bin/python benchmarks/recall_memory.py --sizes 10000 100000 200000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.huge_namespace import open_filled, recall_peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="recall-memory-") as tmp:
            began = time.perf_counter()
            service = open_filled(Path(tmp), size)
            filled = time.perf_counter() - began
            try:
                peak, exact = recall_peak(service)
            finally:
                service.close()
        rows.append(
            {
                "memories": size,
                "filtered": size // 2,
                "exact_scan": exact,
                "recall_peak_bytes": peak,
                "peak_bytes_per_memory": round(peak / size, 1),
                "fill_seconds": round(filled, 1),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    print("\n| memories | filtered set scanned | exact scan | recall peak | per memory |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['memories']:,} | {row['filtered']:,} | {row['exact_scan']} |"
            f" {row['recall_peak_bytes'] / 2**20:.1f} MiB | {row['peak_bytes_per_memory']} B |"
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
