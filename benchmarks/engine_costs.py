"""The engine's own cost, with the model taken out: write path and recall at N memories,
this tree and another git revision side by side in one run.

A near-free embedder (`hashing.py`: words hashed into 384 signed buckets, the dimension of
all-MiniLM-L6-v2) stands in for the model, so what is timed is the engine: guards,
entity extraction, dedup, conflict rules, the store transaction, index and fast-network
upkeep on a save; channels, fusion, the read guard and the final read on a recall.

1. The revision given by ``--baseline-ref`` (``git archive``) fills a data directory with
   N synthetic memories (``Store.insert``, one transaction per 1,000, then the index and
   fast network catch up) and saves its index; a copy goes to this tree, which opens it
   as an upgrade would (schema steps, fast network rebuilt where its format changed), or,
   with ``--rebuild-after``, builds its fast network from the store.
2. Both engines run as child processes on their own copy, each first recalls once and waits
   for the BM25 build that makes (the fill never built one: a build left to run in the
   background would take a core from the timed requests), and take the same work in turn,
   batch by batch and query by query, so load from elsewhere falls on both alike:
   ``--batches`` × ``--batch`` new memories through ``save_batch`` (the full write path),
   then ``--queries`` recalls (top 10, reinforcement on, as in production). Each save
   reports its wall time and the CPU time of the engine's process (on a machine shared
   with other work the CPU time moves less than the wall time).

``--embedder default`` puts the configured model (USE by default) in place of the
hashing one for the saves and recalls: each batch is then also embedded alone by the
model, in the same child, just before the saves, and the table sets the model's own
batched throughput beside the service's. The N memories filled beforehand keep the
hashing embedder's vectors, made in the model's dimension and stored under its name
(embedding 100k texts with MiniLM would take an hour here): the neighbours a save finds are then not the model's,
but a save's work (one HNSW search and insert per memory, its rules and transaction) is
the same.

Run ``python benchmarks/engine_costs.py --help`` for the options; results go to JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synthetic  # noqa: E402

NAMESPACE = "bench"

# One engine, in a child process: the tree to import is argv[1]. It reads one JSON request
# a line and answers one JSON line, so the parent can interleave two engines.
_CHILD = r"""
import json, sys, time, uuid
from datetime import UTC, datetime
sys.path.insert(0, sys.argv[1])
sys.path.append(sys.argv[3])  # this tree's benchmarks/, for the embedder both engines share
from hashing import HashingEmbedder
from engine.adapters import load_embedder, open_service
from engine.config import load_config
from engine.records import Memory, MemoryDraft, Source

config = load_config(env={}, data_dir=sys.argv[2])
filler = HashingEmbedder()
embedder = filler if sys.argv[4] == "hashing" else load_embedder(config)
filler.dim = embedder.dim  # the filled vectors stand in for the model's: its dimension (USE: 512)
service = open_service(config, embedder=embedder, background_reembed=False)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    kind = request["kind"]
    start, cpu = time.perf_counter(), time.process_time()
    if kind == "insert":
        now = datetime.now(UTC)
        items = request["items"]
        vectors = filler.embed_documents([item["content"] for item in items])
        memories = [
            Memory(
                memory_id=str(uuid.uuid4()), namespace=request["namespace"], content=item["content"],
                category=item["category"], entities=tuple(item["entities"]), base_score=0.6, importance=0.6,
                source=Source.USER_INPUT, created_at=datetime.fromisoformat(item["created_at"]), updated_at=now,
                last_accessed_at=datetime.fromisoformat(item["created_at"]),
                embedding_model=embedder.name, embedding_version=embedder.version,
            )
            for item in items
        ]
        service.store.insert(memories, list(vectors), changed_by=None)
        service.keeper.catch_up()
    elif kind == "save":
        drafts = [MemoryDraft(item["content"], namespace=request["namespace"], category=item["category"])
                  for item in request["items"]]
        service.save_batch(drafts)
    elif kind == "recall":
        service.recall(request["query"], namespaces=[request["namespace"]], top_k=10)
    elif kind == "embed":
        embedder.embed_documents([item["content"] for item in request["items"]])
    elif kind == "settle":
        # The namespace's first recall builds its BM25 index (never built by the fill);
        # then no background build is left running into the timed requests.
        service.recall("settle", namespaces=[request["namespace"]], top_k=1, reinforce=False)
        service.keeper.network.settle()
    elif kind == "save_index":
        service.flush()
        service.keeper.save()
    print(json.dumps({"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu}), flush=True)
service.close()
"""


class Engine:
    """One engine (a git revision's tree, or this one) serving requests in a child process."""

    def __init__(self, label: str, tree: Path, data_dir: Path, embedder: str) -> None:
        self.label = label
        self.child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tree), str(data_dir), str(HERE), embedder],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tree,
            env=dict(os.environ, HF_HUB_OFFLINE="1"),
        )
        started = time.perf_counter()
        self.ask_line()
        self.open_seconds = time.perf_counter() - started

    def ask_line(self) -> dict[str, Any]:
        assert self.child.stdout is not None
        line = self.child.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.label} engine stopped")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, request: dict[str, Any]) -> float:
        return self.ask_timed(request)[0]

    def ask_timed(self, request: dict[str, Any]) -> tuple[float, float]:
        """The request's wall time and the child's CPU time for it, in seconds."""
        assert self.child.stdin is not None
        self.child.stdin.write(json.dumps(request) + "\n")
        self.child.stdin.flush()
        answer = self.ask_line()
        return float(answer["seconds"]), float(answer["cpu"])

    def close(self) -> None:
        if self.child.stdin is not None:
            self.child.stdin.close()
        self.child.wait(timeout=600)


def _items(stream: Any, count: int) -> list[dict[str, Any]]:
    return [
        {
            "content": m.content,
            "category": m.category,
            "entities": list(m.entities),
            "created_at": m.created_at.isoformat(),
        }
        for m in itertools.islice(stream, count)
    ]


def _archive(ref: str, into: Path) -> str:
    revision = subprocess.run(
        ["git", "-C", str(HERE.parent), "rev-parse", "--short", ref], check=True, capture_output=True, text=True
    ).stdout.strip()
    tar = subprocess.run(
        ["git", "-C", str(HERE.parent), "archive", "--format=tar", ref], check=True, capture_output=True
    )
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar.stdout, check=True)
    return revision


def _ms(seconds: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(seconds) * 1000.0, q)), 2)


def run_size(size: int, args: argparse.Namespace, baseline_tree: Path, workdir: Path) -> dict[str, Any]:
    base = workdir / f"base-{size}"
    shutil.rmtree(base, ignore_errors=True)
    builder = Engine("baseline", baseline_tree, base, args.embedder)
    stream = synthetic.memories(args.seed)
    filled = 0
    build_started = time.perf_counter()
    while filled < size:
        items = _items(stream, min(1000, size - filled))
        builder.ask({"kind": "insert", "namespace": NAMESPACE, "items": items})
        filled += len(items)
    builder.ask({"kind": "save_index"})
    builder.close()
    print(f"  {size:,} memories filled in {time.perf_counter() - build_started:.0f} s", flush=True)

    after_data = workdir / f"after-{size}"
    before_data = workdir / f"before-{size}"
    for copy in (after_data, before_data):
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(base, copy, ignore=shutil.ignore_patterns(".lock"))
    if args.rebuild_after:
        for saved in (after_data / "index").glob("fastnet*"):
            saved.unlink()
    engines = {
        "before": Engine("before", baseline_tree, before_data, args.embedder),
        "after": Engine("after", HERE.parent, after_data, args.embedder),
    }
    try:
        for engine in engines.values():
            engine.ask({"kind": "settle", "namespace": NAMESPACE})
        saves: dict[str, list[float]] = {label: [] for label in engines}
        cpu: dict[str, list[float]] = {label: [] for label in engines}
        model_alone: list[float] = []
        model_cpu: list[float] = []
        # Untimed: the first save loads what a process loads once (jieba's dictionary, the
        # model's first batch), and it lands in neither engine's figures.
        warm = synthetic.memories(args.seed + 2)
        for _ in range(args.warmup_batches):
            items = _items(warm, args.batch)
            for engine in engines.values():
                if args.embedder != "hashing":
                    engine.ask({"kind": "embed", "items": items})
                engine.ask({"kind": "save", "namespace": NAMESPACE, "items": items})
        fresh = synthetic.memories(args.seed + 1)
        for _ in range(args.batches):
            items = _items(fresh, args.batch)
            if args.embedder != "hashing":
                wall, used = engines["after"].ask_timed({"kind": "embed", "items": items})
                model_alone.append(wall)
                model_cpu.append(used)
            for label, engine in engines.items():
                wall, used = engine.ask_timed({"kind": "save", "namespace": NAMESPACE, "items": items})
                saves[label].append(wall)
                cpu[label].append(used)
        recalls: dict[str, list[float]] = {label: [] for label in engines}
        queries = synthetic.queries(args.warmup + args.queries, seed=args.seed)
        for n, query in enumerate(queries):
            for label, engine in engines.items():
                seconds = engine.ask({"kind": "recall", "namespace": NAMESPACE, "query": query})
                if n >= args.warmup:
                    recalls[label].append(seconds)
        saved = args.batches * args.batch
        row: dict[str, Any] = {"size": size, "load_average": os.getloadavg()}
        if model_alone:
            row["model_alone_per_s"] = round(saved / sum(model_alone), 1)
            row["model_alone_cpu_ms_per_memory"] = round(1000 * sum(model_cpu) / saved, 3)
        for label, engine in engines.items():
            row[label] = {
                "open_seconds": round(engine.open_seconds, 2),
                "saves_per_s": round(saved / sum(saves[label]), 1),
                "save_ms_per_memory": round(1000 * sum(saves[label]) / saved, 3),
                "save_cpu_ms_per_memory": round(1000 * sum(cpu[label]) / saved, 3),
                "recall_p50_ms": _ms(recalls[label], 50) if recalls[label] else None,
                "recall_p95_ms": _ms(recalls[label], 95) if recalls[label] else None,
            }
            if model_alone:
                row[label]["of_model_alone"] = round(row[label]["saves_per_s"] / row["model_alone_per_s"], 3)
        return row
    finally:
        for engine in engines.values():
            engine.close()
        if not args.keep:
            for path in (base, after_data, before_data):
                shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000], help="memories in the namespace")
    parser.add_argument("--baseline-ref", default="main", help="git revision to compare with (default main)")
    parser.add_argument("--batches", type=int, default=10, help="save_batch calls timed per size")
    parser.add_argument("--batch", type=int, default=256, help="memories per save_batch")
    parser.add_argument("--queries", type=int, default=300, help="timed recalls per size")
    parser.add_argument("--warmup", type=int, default=30, help="untimed recalls before the timed ones")
    parser.add_argument("--warmup-batches", type=int, default=1, help="untimed save_batch calls before the timed ones")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--embedder",
        choices=("hashing", "default"),
        default="hashing",
        help="hashing: the near-free embedder (the engine alone); default: the configured model for saves and recalls",
    )
    parser.add_argument(
        "--rebuild-after",
        action="store_true",
        help="this tree builds its fast network from the store instead of opening the baseline's "
        "(what it keeps of each memory is then all its own, as where this release wrote every memory)",
    )
    parser.add_argument("--workdir", default=str(HERE / ".work" / "engine-costs"))
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "engine-costs.json")
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()  # the engines' children run in their own trees
    workdir.mkdir(parents=True, exist_ok=True)
    baseline_tree = Path(tempfile.mkdtemp(prefix="baseline-", dir=workdir)) / "tree"
    revision = _archive(args.baseline_ref, baseline_tree)
    head = subprocess.run(
        ["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    rows = []
    try:
        for size in args.sizes:
            print(f"{size:,} memories: {args.baseline_ref} ({revision}) and this tree ({head})", flush=True)
            rows.append(run_size(size, args, baseline_tree, workdir))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(baseline_tree.parent, ignore_errors=True)
    result = {
        "baseline": {"ref": args.baseline_ref, "revision": revision},
        "after": {"revision": head, "dirty": bool(_dirty())},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average": os.getloadavg()},
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "workdir")},
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    print()
    print(
        "| N | saves/s before | after | ms per saved memory before | after | CPU ms per saved memory before | after "
        "| recall p50 / p95 ms before | after |" + (" model alone /s |" if args.embedder != "hashing" else "")
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|---|" + ("---:|" if args.embedder != "hashing" else ""))
    for row in rows:
        b, a = row["before"], row["after"]
        print(
            f"| {row['size']:,} | {b['saves_per_s']} | {a['saves_per_s']} | {b['save_ms_per_memory']} | "
            f"{a['save_ms_per_memory']} | {b['save_cpu_ms_per_memory']} | {a['save_cpu_ms_per_memory']} | "
            f"{b['recall_p50_ms']} / {b['recall_p95_ms']} | {a['recall_p50_ms']} / {a['recall_p95_ms']} |"
            + (f" {row['model_alone_per_s']} |" if "model_alone_per_s" in row else "")
        )


def _dirty() -> str:
    return subprocess.run(
        ["git", "-C", str(HERE.parent), "status", "--porcelain"], check=True, capture_output=True, text=True
    ).stdout.strip()


if __name__ == "__main__":
    main()
