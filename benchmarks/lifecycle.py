"""Consolidation at 100k memories (time, peak RSS) and re-embedding throughput.

Consolidate: N memories in one namespace are written straight through the
Store (random unit vectors of dimension 384, as MiniLM's, so no model is
needed: consolidation itself embeds only merged contents). The mix: categories
of every half-life, created over the last two years, 1% soft-deleted 60 days
ago (to purge), and ``--pairs`` planted near-duplicate pairs sharing an entity
(to merge); each other memory names one of ``--entities`` entities (5,000: about 20
memories share each at 100k; 1: every one shares one, the case where consolidation looks
for merge partners by a search rather than by shared entity). The service is then
opened (index built from the stored vectors), and ``consolidate`` runs as a dry run and
for real; each is timed, and the process's resident memory is sampled every 20 ms to
report the peak.

Re-embed: ``--reembed`` memories saved under a stand-in "previous" model, the
service reopened with the real all-MiniLM-L6-v2, and the re-embedding job run
to the end: memories per second.

    .venv/bin/python benchmarks/lifecycle.py --memories 100000 --reembed 2000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.adapters import open_service
from engine.adapters.sqlite_store import SqliteStore
from engine.config import load_config
from engine.records import Memory, MemoryDraft, Source, Status, new_memory_id

DIM = 384
NS = "bench"
CATEGORIES = ("fact", "preference", "event", "task", "state", "procedure")


class RandomEmbedder:
    """Deterministic stand-in model: a unit vector seeded by the text's hash."""

    def __init__(self, name: str = "bench-random", dim: int = DIM) -> None:
        self.name, self.version, self.dim, self.similarity_floor = name, "1", dim, 0.0

    def _one(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.vstack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


@contextmanager
def peak_rss() -> Iterator[Callable[[], float]]:
    """Sample this process's RSS every 20 ms; yields a function giving the peak in MiB."""
    proc, peak, stop = psutil.Process(), [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            stop.wait(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield lambda: peak[0] / 2**20
    finally:
        stop.set()
        thread.join()


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fill(data_dir: Path, n: int, pairs: int, now: datetime, model: str, topics: int = 5000) -> None:
    rng = np.random.default_rng(7)
    store = SqliteStore(data_dir / "twinmem.sqlite3", durable=False)
    store.open()
    batch = 5000
    written = 0
    while written < n:
        size = min(batch, n - written)
        memories, vectors = [], unit(rng, size)
        for i in range(size):
            k = written + i
            created = now - timedelta(days=float(rng.uniform(0, 730)))
            deleted = k % 100 == 0
            twin = k < 2 * pairs
            memories.append(
                Memory(
                    memory_id=new_memory_id(),
                    namespace=NS,
                    content=f"benchmark memory {k} about topic {k % 977}",
                    category=CATEGORIES[k % len(CATEGORIES)] if not twin else "fact",
                    base_score=0.6,
                    importance=0.6,
                    source=Source.USER_INPUT,
                    created_at=created,
                    updated_at=now - timedelta(days=60) if deleted else created,
                    last_accessed_at=created if not twin else now,
                    entities=(f"entity-{k // 2}",) if twin else (f"entity-{k % topics}",),
                    status=Status.DELETED if deleted and not twin else Status.ACTIVE,
                    embedding_model=model,
                    embedding_version="1",
                )
            )
            if twin and k % 2 == 1:  # the second of a pair: the first's vector, slightly moved
                near = vectors[i - 1] + 0.02 * unit(rng, 1)[0]
                vectors[i] = near / np.linalg.norm(near)
        store.insert(memories, list(vectors), changed_by="benchmark")
        written += size
    store.close()


def bench_consolidate(n: int, pairs: int, topics: int = 5000) -> dict[str, object]:
    now = datetime.now(UTC)
    embedder = RandomEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        started = time.perf_counter()
        fill(data_dir, n, pairs, now, embedder.name, topics)
        fill_s = time.perf_counter() - started
        config = load_config(env={}, data_dir=data_dir, durable_commits=False)
        started = time.perf_counter()
        service = open_service(config, embedder=embedder, background_reembed=False)
        open_s = time.perf_counter() - started
        rss_open = psutil.Process().memory_info().rss / 2**20
        try:
            with peak_rss() as peak:
                started = time.perf_counter()
                dry = service.consolidator.run(NS, dry_run=True)
                dry_s = time.perf_counter() - started
                dry_peak = peak()
            with peak_rss() as peak:
                started = time.perf_counter()
                real = service.consolidator.run(NS)
                real_s = time.perf_counter() - started
                real_peak = peak()
        finally:
            service.close()
    return {
        "memories": n,
        "planted_pairs": pairs,
        "entities": topics,
        "fill_s": round(fill_s, 1),
        "open_and_index_s": round(open_s, 1),
        "rss_after_open_mib": round(rss_open),
        "dry_run_s": round(dry_s, 1),
        "dry_run_peak_rss_mib": round(dry_peak),
        "consolidate_s": round(real_s, 1),
        "consolidate_peak_rss_mib": round(real_peak),
        "scanned": real.scanned,
        "archived": real.archived,
        "purged": real.purged,
        "merges": real.merged,
        "merged_sources": real.merged_sources,
        "skipped": real.skipped,
        "planned": {"archive": dry.archived, "purge": dry.purged, "merge": dry.merged},
    }


def bench_reembed(n: int) -> dict[str, object]:
    from engine.adapters.embedders import load_sentence_transformer

    old = RandomEmbedder("bench-previous")
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(env={}, data_dir=tmp, durable_commits=False)
        service = open_service(config, embedder=old, background_reembed=False)
        drafts = [
            MemoryDraft(content=f"The user mentioned fact number {k} about topic {k % 97}.", namespace=NS)
            for k in range(n)
        ]
        for start in range(0, n, 500):
            service.save_batch(drafts[start : start + 500])
        service.close()
        minilm = load_sentence_transformer("all-MiniLM-L6-v2")
        service = open_service(config, embedder=minilm, previous_embedder=old, background_reembed=False)
        try:
            legacy = service.keeper.legacy_size
            started = time.perf_counter()
            progress = service.reembedder.run()
            elapsed = time.perf_counter() - started
        finally:
            service.close()
    return {
        "memories": n,
        "legacy_indexed_at_start": legacy,
        "done": progress.done,
        "seconds": round(elapsed, 1),
        "memories_per_s": round(progress.done / elapsed, 1),
        "batch": config.lifecycle.reembed_batch,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=500, help="planted near-duplicate pairs")
    parser.add_argument(
        "--entities",
        type=int,
        default=5000,
        help="distinct entities the other memories name, one each (fewer: more memories share each)",
    )
    parser.add_argument("--reembed", type=int, default=2000, help="memories to re-embed with MiniLM (0: skip)")
    parser.add_argument("--out", help="write the results as JSON here too")
    args = parser.parse_args()
    results: dict[str, object] = {"cpus": os.cpu_count()}
    if args.memories:
        results["consolidate"] = bench_consolidate(args.memories, args.pairs, args.entities)
        print(json.dumps(results["consolidate"], indent=2), flush=True)
    if args.reembed:
        results["reembed"] = bench_reembed(args.reembed)
        print(json.dumps(results["reembed"], indent=2), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
