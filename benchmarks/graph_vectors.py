"""Vectors on the Bolt graph store: float32 bytes against lists of 64-bit floats.

Two graph databases on one ArcadeDB server, a child process (as the test suite starts
it), each filled through ``Neo4jStore.insert`` with the same N memories and the
same random float32 vectors (``--dim``, 384 as MiniLM's): in one as the store
writes them now (float32 bytes), in the other as lists of 64-bit floats, the
layout versions before migration 0006 wrote (and which the store still reads).
For each layout:

* the size on disk of the files holding the ``(:Embedding)`` records (ArcadeDB
  keeps each vertex type in bucket files of its own), per memory;
* the Bolt payload of one vector as the store sends and receives it;
* a rebuild's pull of every vector (``Store.iter_indexable``, pages of 2,048, as
  ``IndexKeeper.rebuild`` reads them): the median of ``--repeats`` runs, the two
  databases taking turns; for the lists, also as the store read them before 0006
  (``Record.data()`` rows, which rebuild every list item by item).

Run::

    .venv/bin/python benchmarks/graph_vectors.py --size 10000 --out benchmarks/results/graph-vectors-10k.json

Results print as a Markdown table and go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.adapters import neo4j_store  # noqa: E402
from engine.adapters.neo4j_store import Neo4jStore  # noqa: E402
from engine.records import Memory, new_memory_id  # noqa: E402
from tests.bolt import ArcadeDBServer, start_arcadedb  # noqa: E402
from tests.integration.test_neo4j_store import memory  # noqa: E402

MODEL = "bench-model"
BATCH = 500
REBUILD_PAGE = 2048


def memories(size: int) -> list[Memory]:
    return [
        memory(new_memory_id()).evolve(
            content=f"memory number {n} with a sentence of ordinary length about something", embedding_model=MODEL
        )
        for n in range(size)
    ]


def as_lists(memory_id: str, model: str, vector: np.ndarray) -> dict[str, Any]:
    """An (:Embedding) row as versions before migration 0006 wrote it: a list of 64-bit floats."""
    data = np.ascontiguousarray(vector, dtype=np.float32)
    values = data.astype(np.float64).tolist()
    return {"memory_id": memory_id, "model": model, "dim": int(data.shape[0]), "vector": values}


def fill(store: Neo4jStore, records: list[Memory], vectors: np.ndarray, layout: str) -> float:
    start = time.perf_counter()
    current = neo4j_store._embedding_row
    if layout == "lists":
        neo4j_store._embedding_row = as_lists  # type: ignore[assignment]
    try:
        for offset in range(0, len(records), BATCH):
            store.insert(records[offset : offset + BATCH], list(vectors[offset : offset + BATCH]), changed_by=None)
    finally:
        neo4j_store._embedding_row = current  # type: ignore[assignment]
    return time.perf_counter() - start


def rebuild_pull(store: Neo4jStore) -> float:
    start = time.perf_counter()
    rows = 0
    for ids, matrix, _ in store.iter_indexable(MODEL, REBUILD_PAGE):
        rows += len(ids)
        assert matrix.dtype == np.float32
    return time.perf_counter() - start


def rebuild_pull_as_before(store: Neo4jStore) -> float:
    """The pull as the store read lists before 0006: ``Record.data()`` rows, one
    ``np.asarray`` of the page's lists (what ``iter_indexable`` did then)."""
    start = time.perf_counter()
    after = ""
    while True:
        rows = store._rows("iter_indexable", neo4j_store._INDEXABLE_PAGE, after=after, batch=REBUILD_PAGE, model=MODEL)
        if not rows:
            break
        after = rows[-1]["memory_id"]
        np.asarray([row["vector"] for row in rows if row["vector"] is not None], dtype=np.float32)
    return time.perf_counter() - start


def vector_bytes_on_disk(server: ArcadeDBServer, database: str) -> int:
    """Bytes of the files that hold the (:Embedding) records: ArcadeDB keeps each
    vertex type in bucket files of its own, named after the type."""
    return sum(
        f.stat().st_size for d in server.root.rglob(database) if d.is_dir() for f in d.glob("Embedding_0.*.bucket")
    )


def bolt_payload(dim: int, layout: str) -> int:
    """PackStream bytes of one vector: a list of FLOAT_64 (a marker and 8 bytes each) or one BYTES."""
    if layout == "lists":
        header = 1 if dim < 16 else 2 if dim < 256 else 3 if dim < 65536 else 5
        return header + 9 * dim
    size = 4 * dim
    return size + (2 if size < 256 else 3 if size < 65536 else 5)


LAYOUTS = ("lists", "bytes")


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    vectors = rng.standard_normal((args.size, args.dim)).astype(np.float32)
    records = memories(args.size)
    server = start_arcadedb()
    stores: dict[str, Neo4jStore] = {}
    try:
        results: dict[str, Any] = {}
        for layout in LAYOUTS:
            target = server.target()
            database = target.new_database()
            stores[layout] = target.store(database)
            stores[layout].open()
            fill_s = fill(stores[layout], records, vectors, layout)
            on_disk = vector_bytes_on_disk(server, database)
            results[layout] = {
                "fill_s": fill_s,
                "embedding_bucket_bytes": on_disk,
                "embedding_bytes_per_memory": on_disk / args.size,
                "bolt_bytes_per_vector": bolt_payload(args.dim, layout),
                "rebuild_pull_s": [],
            }
        # Taking turns, so that load from elsewhere on the machine falls on both alike.
        results["lists"]["rebuild_pull_as_before_s"] = []
        for _ in range(args.repeats):
            results["lists"]["rebuild_pull_as_before_s"].append(rebuild_pull_as_before(stores["lists"]))
            for layout in LAYOUTS:
                results[layout]["rebuild_pull_s"].append(rebuild_pull(stores[layout]))
        for layout in LAYOUTS:
            results[layout]["rebuild_pull_median_s"] = statistics.median(results[layout]["rebuild_pull_s"])
        before = results["lists"]["rebuild_pull_as_before_s"]
        results["lists"]["rebuild_pull_as_before_median_s"] = statistics.median(before)
        return results
    finally:
        for store in stores.values():
            store.close()
        server.stop()


def markdown(results: dict[str, Any], size: int, dim: int) -> str:
    lines = [
        f"| vectors ({size:,} memories, {dim} dimensions) | on disk per memory | Bolt bytes per vector "
        "| rebuild pull, median s |",
        "|---|---|---|---|",
        f"| lists of 64-bit floats, read as before 0006 (``Record.data()``) | — | — "
        f"| {results['lists']['rebuild_pull_as_before_median_s']:.2f} |",
    ]
    for layout, label in (("lists", "lists of 64-bit floats (before 0006)"), ("bytes", "float32 bytes")):
        r = results[layout]
        lines.append(
            f"| {label} | {r['embedding_bytes_per_memory']:,.0f} B | {r['bolt_bytes_per_vector']:,} B "
            f"| {r['rebuild_pull_median_s']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10000, help="memories per database")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=5, help="timed rebuild pulls per layout")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, default=HERE / ".work" / "graph_vectors.json")
    args = parser.parse_args()
    results = run(args)
    report = {
        "machine": {
            "python": platform.python_version(),
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "platform": platform.platform(),
            "load_average_at_end": os.getloadavg(),
        },
        "size": args.size,
        "dim": args.dim,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(markdown(results, args.size, args.dim))


if __name__ == "__main__":
    main()
