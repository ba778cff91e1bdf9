"""One namespace of many memories, filled through the store, on which a filtered recall
takes the exact scan over half of it; and what that recall allocates at its peak
(``tracemalloc``; numpy reports its buffers to it). Shared by
``tests/integration/test_recall_memory.py`` and ``benchmarks/recall_memory.py``.

Half the memories (category ``near``) lie next to the query's vector, so HNSW's
neighbours are all of them; the other half (``far``, the filter's category) lie
elsewhere, so nothing HNSW returns passes the filter, and the recall then scans the
``far`` half exactly; with no plain search first (``widest`` below the pool) it searches
HNSW among the ``far`` half, or scans it, whichever is priced lower (``engine/recall.py``).
Every memory shares the word "meeting" with the query, so the lexical channel scores
the whole namespace too.
"""

from __future__ import annotations

import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from engine.adapters import open_service
from engine.config import load_config
from engine.records import Memory, MemoryFilter, Source
from engine.service import MemoryService
from tests.conftest import HashingEmbedder

NAMESPACE = "huge"
QUERY = "where did the quarterly planning meeting happen"
DIM = 384
BATCH = 5000
# HNSW built cheaply: the benchmark is about what a recall allocates, not about HNSW quality.
INDEX = {"m": 8, "ef_construction": 32}


def fill(service: MemoryService, size: int, seed: int = 0, *, far: str = "far") -> None:
    """``size`` memories in one namespace: half ``near`` the query, half of category
    ``far`` far from it."""
    rng = np.random.default_rng(seed)
    query = service.embedder.embed_query(QUERY)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for start in range(0, size, BATCH):
        count = min(BATCH, size - start)
        near = np.arange(start, start + count) % 2 == 0
        noise = rng.standard_normal((count, DIM)).astype(np.float32)
        vectors = np.where(near[:, None], query + 0.05 * noise, noise)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        memories = [
            Memory(
                memory_id=str(uuid.UUID(int=start + n + 1)),
                namespace=NAMESPACE,
                content=f"note {start + n} on the meeting about item k{start + n}",
                category="near" if near[n] else far,
                base_score=0.5,
                importance=0.5,
                source=Source.USER_INPUT,
                created_at=at + timedelta(seconds=start + n),
                updated_at=at,
                last_accessed_at=at,
                embedding_model=service.embedder.name,
                embedding_version=service.embedder.version,
            )
            for n in range(count)
        ]
        service.store.insert(memories, list(vectors), changed_by=None)
        service.keeper.catch_up()


def open_filled(
    data_dir: Path, size: int, *, widest: int = 256, far: str = "far", category_indexes: int = 0
) -> MemoryService:
    """``widest``: ``[recall] max_widened_candidates``. Below the pool (100), no plain search
    is made for the filter: the recall goes to the filtered search or the scan at once.
    ``far``: the category of the half far from the query. ``category_indexes``: ``[index]
    category_indexes``; none by default, so that every recall plans as the first did (a
    category's own index, built in the background, would answer the later ones)."""
    config = load_config(
        env={},
        data_dir=data_dir,
        durable_commits=False,
        index={**INDEX, "category_indexes": category_indexes},
        recall={"max_widened_candidates": widest},
        categories=["near", far],
    )
    service = open_service(config, embedder=HashingEmbedder(dim=DIM), background_reembed=False)
    fill(service, size, far=far)
    return service


FAR = MemoryFilter(categories=("far",))


def recall_peak(service: MemoryService, top_k: int = 10) -> tuple[int, bool]:
    """Bytes a filtered recall allocates at its peak, and whether it scanned exactly."""
    flt = FAR
    service.recall(QUERY, namespaces=[NAMESPACE], top_k=top_k, flt=flt, reinforce=False)  # warm caches
    # tracemalloc counts every thread: no lexicon may be built in the background meanwhile
    # (one due after the fill's writes, or one the recall above started).
    network = service.keeper.network
    network.stop_warming()
    network.settle()
    tracemalloc.start()
    try:
        result = service.recall(QUERY, namespaces=[NAMESPACE], top_k=top_k, flt=flt, reinforce=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.hits) == top_k and all(hit.memory.category == "far" for hit in result.hits)
    return peak, result.exact_scan
