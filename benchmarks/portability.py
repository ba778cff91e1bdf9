"""Export and import of N memories: time and peak resident memory of each step.

Steps, each in a fresh child process (so its peak RSS is its own):

1. build: N distinct memories inserted through the Store with precomputed unit
   vectors under the default model's name (not timed), then the service opened
   once so that the saved index exists;
2. export without vectors, and with ``--vectors --versions``;
3. import of the file with vectors into an empty data directory (vectors carried:
   no embedding, the HNSW index catches up from the change sequence);
4. import of the file without vectors into another empty directory (every memory
   re-embedded with the real default model, all-MiniLM-L6-v2).

Times cover the export or import call only (opening the service, which loads the
model, is reported apart). Run ``python benchmarks/portability.py --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.adapters import DB_FILE, open_service  # noqa: E402
from engine.adapters.sqlite_store import SqliteStore  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.importers import run_import  # noqa: E402
from engine.portability import open_export  # noqa: E402
from engine.records import Memory, Source, new_memory_id  # noqa: E402

NAMESPACE = "bench"
PEOPLE = ("Alice", "Bob", "Priya", "Wei", "Carlos", "Fatima", "Hiro", "Olga", "Kwame", "Lena", "Mateo", "Aisha")
THINGS = ("green tea", "the blue notebook", "chess", "sourdough", "the piano", "Lisbon", "the red bike", "yoga")
VERBS = ("likes", "mentioned", "asked about", "gave up", "bought", "plans to try", "talked about", "forgot")
CATEGORIES = ("fact", "preference", "event", "task", "state", "procedure")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def rss_mb() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


def content(i: int) -> str:
    a, b, c = PEOPLE[i % len(PEOPLE)], VERBS[(i // 12) % len(VERBS)], THINGS[(i // 96) % len(THINGS)]
    return f"{a} {b} {c} (note {i})"


def build(data_dir: Path, n: int) -> dict[str, Any]:
    config = load_config(env={}, data_dir=data_dir)
    service = open_service(config)  # the model's name and dimension, and an empty index
    name, version, dim = service.embedder.name, service.embedder.version, service.embedder.dim
    service.close()
    store = SqliteStore(data_dir / DB_FILE, durable=False)
    store.open()
    rng = np.random.default_rng(7)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    for first in range(0, n, 1000):
        memories, vectors = [], []
        for i in range(first, min(n, first + 1000)):
            at = start + timedelta(minutes=i)
            memories.append(
                Memory(
                    memory_id=new_memory_id(),
                    namespace=NAMESPACE,
                    content=content(i),
                    category=CATEGORIES[i % len(CATEGORIES)],
                    base_score=0.6,
                    importance=0.6,
                    source=Source.USER_INPUT,
                    created_at=at,
                    updated_at=at,
                    last_accessed_at=at,
                    entities=(PEOPLE[i % len(PEOPLE)],),
                    embedding_model=name,
                    embedding_version=version,
                    metadata={"n": i},
                )
            )
            vector = rng.standard_normal(dim).astype(np.float32)
            vectors.append(vector / np.linalg.norm(vector))
        store.insert(memories, vectors, changed_by="bench")
    store.close()
    service = open_service(config)  # builds and saves the index, so later opens load it
    service.close()
    return {"memories": n}


def export(data_dir: Path, out: Path, full: bool) -> dict[str, Any]:
    opened = time.perf_counter()
    service = open_service(load_config(env={}, data_dir=data_dir))
    baseline, began = rss_mb(), time.perf_counter()
    with out.open("wb") as sink:
        for chunk in open_export(service, NAMESPACE, versions=full, vectors=full).chunks():
            sink.write(chunk)
    seconds = time.perf_counter() - began
    service.close()
    return {
        "open_s": began - opened,
        "seconds": seconds,
        "bytes": out.stat().st_size,
        "rss_after_open_mb": baseline,
        "peak_rss_mb": peak_rss_mb(),
    }


def import_(data_dir: Path, source: Path) -> dict[str, Any]:
    opened = time.perf_counter()
    service = open_service(load_config(env={}, data_dir=data_dir))
    baseline, began = rss_mb(), time.perf_counter()
    with source.open("rb") as stream:
        report = run_import(service, stream)
    seconds = time.perf_counter() - began
    assert report.written, report.errors[:5]
    recallable = len(service.keeper.index)
    service.close()
    return {
        "open_s": began - opened,
        "seconds": seconds,
        "inserted": report.inserted,
        "reembedded": report.reembedded,
        "vectors_kept": report.vectors_kept,
        "indexed": recallable,
        "rss_after_open_mb": baseline,
        "peak_rss_mb": peak_rss_mb(),
    }


def child(step: str, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--step", step, *args], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=50_000, help="memories (default 50,000)")
    parser.add_argument("--skip-reembed", action="store_true", help="leave out the re-embedding import")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("args", nargs="*", help=argparse.SUPPRESS)
    options = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if options.step:
        steps = {
            "build": lambda: build(Path(options.args[0]), int(options.args[1])),
            "export": lambda: export(Path(options.args[0]), Path(options.args[1]), options.args[2] == "full"),
            "import": lambda: import_(Path(options.args[0]), Path(options.args[1])),
        }
        print(json.dumps(steps[options.step]()))
        return
    with tempfile.TemporaryDirectory(prefix="twinmem-bench-") as tmp:
        root = Path(tmp)
        source, plain, full = root / "source", root / "plain.jsonl", root / "full.jsonl"
        results: dict[str, Any] = {"n": options.n, "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
        results["build"] = child("build", str(source), str(options.n))
        results["export"] = child("export", str(source), str(plain), "plain")
        results["export_full"] = child("export", str(source), str(full), "full")
        results["import_vectors"] = child("import", str(root / "carried"), str(full))
        if not options.skip_reembed:
            results["import_reembed"] = child("import", str(root / "reembedded"), str(plain))
    rows = [
        ("export, no vectors", results["export"]),
        ("export, --versions --vectors", results["export_full"]),
        ("import, vectors carried", results["import_vectors"]),
    ]
    if "import_reembed" in results:
        rows.append(("import, re-embedded (MiniLM)", results["import_reembed"]))
    print(f"{options.n:,} memories, {results['machine']}\n")
    print("| step | seconds | memories/s | peak RSS (MB) | RSS after opening the service (MB) | file (MB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, row in rows:
        size = row.get("bytes")
        file_mb = f"{size / 1e6:.0f}" if size else ""
        print(
            f"| {label} | {row['seconds']:.1f} | {options.n / row['seconds']:,.0f} | "
            f"{row['peak_rss_mb']:.0f} | {row['rss_after_open_mb']:.0f} | {file_mb} |"
        )
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
