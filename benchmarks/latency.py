"""Latency, throughput and index quality of twinmem at N memories in one namespace.

For each size N, on a fresh data directory and with the real default embedder
(all-MiniLM-L6-v2):

* ingest: N distinct synthetic memories through ``MemoryService.save_batch``
  (the full write path: embed, dedup, one store transaction, index catch-up);
* restart: ``open_service`` on the existing directory (index loaded from disk),
  and rebuild: the index directory deleted, then ``open_service`` again;
* recall in process: ``service.recall(top_k=10)`` over varied queries after a
  warm-up, reinforcement on as in production;
* HNSW recall@10: the index's top 10 against exact top 10 by dot product over
  the stored vectors, at the configured ``ef_search`` and over a sweep;
* baselines on the same memories and queries: the seed document's minimal
  service (every memory scored in Python, then a sort), with numpy cosine and
  verbatim, and a vectorised numpy exact search;
* recall over HTTP: ``twinmem serve`` on the same directory, ``POST
  /v1/memory/recall`` from one persistent httpx client, sequentially;
* resident memory of this process and of the server, and of the fast network
  (columns, lexicon, postings, links, float16 vectors) per memory;
* with ``--baseline-ref REF`` (e.g. ``main``): the same recall queries on a copy of
  the data directory, in a child process running the engine of git revision REF
  (``git archive``), query by query in turn with this process's, so that before and
  after are printed side by side from one run under the same load.

Each size runs in a child process (a clean RSS); results go to JSON and a
Markdown table. Run ``python benchmarks/latency.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata
import itertools
import json
import math
import os
import platform
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from scale import await_rough_cosines, settle_service  # noqa: E402

from engine.adapters import INDEX_DIR, load_embedder, open_service  # noqa: E402
from engine.adapters.hnsw_index import HnswIndex  # noqa: E402
from engine.config import Config, load_config  # noqa: E402
from engine.fast_network import FastNetwork  # noqa: E402
from engine.ports import Embedder, Matrix, Vector  # noqa: E402
from engine.procedures import asks_how  # noqa: E402
from engine.records import Memory, MemoryDraft, MemoryFilter, Scope, Source, Status  # noqa: E402
from engine.service import MemoryService  # noqa: E402

NAMESPACE = "bench"
# Not TWINMEM_*: the engine reads every TWINMEM_* variable as a configuration override.
TOKEN_ENV = "BENCH_TWINMEM_TOKEN"
MB = 1024 * 1024
# Every memory that is still stored (all but deleted), expired or not.
ALL_STORED = MemoryFilter(
    statuses=(Status.ACTIVE, Status.SUPERSEDED, Status.ARCHIVED, Status.QUARANTINED), include_expired=True
)


# --- helpers -------------------------------------------------------------------------


def summarize(seconds: Sequence[float]) -> dict[str, Any]:
    """Percentiles in milliseconds."""
    if not seconds:
        return {"n": 0}
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {
        "n": len(ms),
        "mean_ms": round(float(ms.mean()), 3),
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p95_ms": round(float(np.percentile(ms, 95)), 3),
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "max_ms": round(float(ms.max()), 3),
    }


def rss_mb(process: psutil.Process | None = None, *, children: bool = False) -> float:
    process = process or psutil.Process()
    total = process.memory_info().rss
    if children:
        for child in process.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
    return round(float(total) / MB, 1)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class TimedEmbedder:
    """Wraps the real embedder to time each call (the ``Embedder`` port, unchanged)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name: str = inner.name
        self.version: str = inner.version
        self.dim: int = inner.dim
        self.similarity_floor: float = inner.similarity_floor
        self.seconds = 0.0
        self.last = 0.0

    def _timed(self, call: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return call()
        finally:
            self.last = time.perf_counter() - start
            self.seconds += self.last

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        result: Matrix = self._timed(lambda: self._inner.embed_documents(texts))
        return result

    def embed_query(self, text: str) -> Vector:
        result: Vector = self._timed(lambda: self._inner.embed_query(text))
        return result


@contextlib.contextmanager
def one_blas_thread() -> Iterator[bool]:
    """Limit numpy's BLAS to one thread while the baselines run.

    On two cores, OpenBLAS threads and torch's OpenMP threads (still spinning
    after the query embedding) fight: a 10,000 × 384 product took ~8 ms and
    had 500 ms outliers with two BLAS threads, 0.2 ms with one. One thread is
    the baselines' best configuration, so they get it.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield False
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def installed_command(name: str, install: str) -> str:
    """The executable ``name`` beside this Python (its virtual environment), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} is not installed ({install})")
    return found


def twinmem_command() -> str:
    return installed_command("twinmem", "pip install -e .")


# --- phases ----------------------------------------------------------------------------


def ingest(service: MemoryService, size: int, batch: int, seed: int) -> dict[str, Any]:
    """Save memories until ``size`` are stored (near-duplicates the engine folds are topped up)."""
    stream = synthetic.memories(seed)
    embedder = service.embedder
    assert isinstance(embedder, TimedEmbedder)
    embed_before = embedder.seconds
    created = submitted = superseded = 0
    batch_seconds: list[float] = []
    start = time.perf_counter()
    last_report = start
    while created < size:
        if submitted > 3 * size:
            raise RuntimeError(f"the engine deduplicated too much: {created} stored of {submitted} submitted")
        drafts = [
            MemoryDraft(
                content=item.content,
                namespace=NAMESPACE,
                category=item.category,
                entities=item.entities,
                created_at=item.created_at,
            )
            for item in itertools.islice(stream, min(batch, size - created))
        ]
        began = time.perf_counter()
        results = service.save_batch(drafts)
        batch_seconds.append(time.perf_counter() - began)
        submitted += len(drafts)
        created += sum(result.created for result in results)
        # Newer engines detect conflicts on write ("X moved to Lisbon" after "X lives in Oslo").
        superseded += sum(len(getattr(result, "superseded", ()) or ()) for result in results)
        if time.perf_counter() - last_report > 30:
            last_report = time.perf_counter()
            rate = created / (last_report - start)
            log(f"  ingest {created}/{size} ({rate:.0f}/s)")
    elapsed = time.perf_counter() - start
    embed_seconds = embedder.seconds - embed_before
    return {
        "stored": created,
        "submitted": submitted,
        "deduplicated": submitted - created,
        "superseded_on_write": superseded,
        "batch_size": batch,
        "seconds": round(elapsed, 2),
        "stored_per_s": round(created / elapsed, 1),
        "submitted_per_s": round(submitted / elapsed, 1),
        "embedding_seconds": round(embed_seconds, 2),
        "embedding_share": round(embed_seconds / elapsed, 3),
        "batch_latency": summarize(batch_seconds),
    }


def stored_memory(item: synthetic.SyntheticMemory, namespace: str, embedder: Embedder, now: datetime) -> Memory:
    """A synthetic memory as ``Store.insert`` takes it (the bulk fills skip the write path)."""
    return Memory(
        memory_id=str(uuid.uuid4()),
        namespace=namespace,
        content=item.content,
        category=item.category,
        entities=item.entities,
        base_score=0.6,
        importance=0.6,
        source=Source.USER_INPUT,
        created_at=item.created_at,
        updated_at=now,
        last_accessed_at=item.created_at,
        embedding_model=embedder.name,
        embedding_version=embedder.version,
    )


def bulk_ingest(
    service: MemoryService, size: int, batch: int, seed: int, vectors: np.ndarray | None = None
) -> dict[str, Any]:
    """Fill the store without the write path (``--bulk``): embed each batch, insert it with
    ``Store.insert`` in one transaction, catch the fast network up. For measuring recall
    at sizes the write path would take too long to fill on a small machine. ``vectors``:
    the first ``size`` memories of ``synthetic.memories(seed)`` already embedded by
    ``service.embedder`` (row i is memory i), so nothing is embedded here."""
    stream = synthetic.memories(seed)
    embedder = service.embedder
    start = time.perf_counter()
    stored = 0
    while stored < size:
        items = list(itertools.islice(stream, min(batch, size - stored)))
        if vectors is None:
            rows = embedder.embed_documents([item.content for item in items])
        else:
            rows = vectors[stored : stored + len(items)]
        now = datetime.now(UTC)
        memories = [stored_memory(item, NAMESPACE, embedder, now) for item in items]
        service.store.insert(memories, list(rows), changed_by=None)
        service.keeper.catch_up()
        stored += len(memories)
    elapsed = time.perf_counter() - start
    return {
        "stored": stored,
        "bulk": True,
        "precomputed_vectors": vectors is not None,
        "seconds": round(elapsed, 2),
        "stored_per_s": round(stored / elapsed, 1),
    }


def recall_in_process(
    service: MemoryService,
    warmup: Sequence[str],
    queries: Sequence[str],
    top_k: int,
    baseline: Baseline | None = None,
) -> dict[str, Any]:
    """Time recalls here; with a ``baseline``, each query goes to it right after (same
    queries, same order, interleaved), and its timings come back under ``baseline``."""
    embedder = service.embedder
    assert isinstance(embedder, TimedEmbedder)
    for query in warmup:
        service.recall(query, namespaces=[NAMESPACE], top_k=top_k)
        if baseline is not None:
            baseline.recall(query)
    service.flush()
    # What the warm-up had built in the background (a lexicon, a category's own index for
    # its "how" questions) is built, and the store's start-up check done, before the
    # timing starts.
    settle_service(service)
    if baseline is not None:
        baseline.flush()
    totals: list[float] = []
    embeds: list[float] = []
    theirs: list[tuple[float, float]] = []
    exact_scans = empty = 0
    timed: list[bool] = []  # whether the query named a time (its recall read a window)
    for query in queries:
        start = time.perf_counter()
        result = service.recall(query, namespaces=[NAMESPACE], top_k=top_k)
        totals.append(time.perf_counter() - start)
        embeds.append(embedder.last)
        timed.append(bool(result.windows))
        exact_scans += result.exact_scan
        empty += not result.hits
        if baseline is not None:
            theirs.append(baseline.recall(query))
    service.flush()
    engine_only = [total - embed for total, embed in zip(totals, embeds, strict=True)]
    # "How …" queries rank twice, the second time narrowed to procedures.
    how = [asks_how(query) for query in queries]
    compared = {}
    if baseline is not None:
        compared = {
            "baseline": {
                "ref": baseline.ref,
                "revision": baseline.revision,
                "total": summarize([total for total, _ in theirs]),
                "without_embedding": summarize([engine for _, engine in theirs]),
                "how_without_embedding": summarize([e for (_, e), h in zip(theirs, how, strict=True) if h]),
            }
        }
    return compared | {
        "top_k": top_k,
        "total": summarize(totals),
        "query_embedding": summarize(embeds),
        "without_embedding": summarize(engine_only),
        "how_without_embedding": summarize([e for e, h in zip(engine_only, how, strict=True) if h]),
        # Other questions that name a time (dateparser or JioNLP read them), and the rest.
        "time_without_embedding": summarize(
            [e for e, h, t in zip(engine_only, how, timed, strict=True) if t and not h]
        ),
        "plain_without_embedding": summarize(
            [e for e, h, t in zip(engine_only, how, timed, strict=True) if not t and not h]
        ),
        "exact_scan_fallbacks": exact_scans,
        "empty_results": empty,
        "category_indexes": service.keeper.network.category_indexes_held(),  # memories each holds
    }


def stored_vectors(service: MemoryService) -> tuple[list[str], np.ndarray]:
    ids: list[str] = []
    blocks: list[np.ndarray] = []
    for batch_ids, vectors, missing in service.store.iter_indexable(service.embedder.name, 4096):
        if missing:
            raise RuntimeError(f"{len(missing)} memories have no stored vector")
        ids.extend(batch_ids)
        blocks.append(np.asarray(vectors, dtype=np.float32))
    return ids, np.vstack(blocks)


def stored_records(service: MemoryService, ids: Sequence[str]) -> dict[str, Memory]:
    now = datetime.now(UTC)
    found: dict[str, Memory] = {}
    for start in range(0, len(ids), 500):
        for memory in service.store.get_many(Scope.whole([NAMESPACE]), ids[start : start + 500], ALL_STORED, now):
            found[memory.memory_id] = memory
    return found


def exact_top(matrix: np.ndarray, queries: np.ndarray, k: int) -> list[np.ndarray]:
    """Row indices of the exact top ``k`` by dot product, per query (chunked to bound memory)."""
    out: list[np.ndarray] = []
    for start in range(0, len(queries), 32):
        sims = queries[start : start + 32] @ matrix.T
        part = np.argpartition(-sims, min(k, sims.shape[1] - 1), axis=1)[:, :k]
        out.extend(part)
    return out


def hnsw_quality(
    service: MemoryService,
    data_dir: Path,
    queries: Sequence[str],
    ef_sweep: Sequence[int],
    config: Config,
) -> dict[str, Any]:
    ids, matrix = stored_vectors(service)
    qvecs = np.asarray(service.embedder.embed_documents(list(queries)), dtype=np.float32)
    k = 10
    truth = [{ids[i] for i in row} for row in exact_top(matrix, qvecs, k)]
    pool = max(config.recall.min_candidates, config.recall.candidate_factor * k)

    def recall_at(index: Any, depth: int) -> float:
        found = 0
        for qvec, expected in zip(qvecs, truth, strict=True):
            got = {memory_id for memory_id, _ in index.search(qvec, depth)}
            found += len(expected & got)
        return round(found / (k * len(qvecs)), 4)

    index = service.keeper.index
    timings: list[float] = []
    for qvec in qvecs:
        start = time.perf_counter()
        index.search(qvec, k)
        timings.append(time.perf_counter() - start)
    result: dict[str, Any] = {
        "queries": len(qvecs),
        "vectors": len(ids),
        "ef_search_config": config.index.ef_search,
        "m": config.index.m,
        "ef_construction": config.index.ef_construction,
        "recall_at_10": recall_at(index, k),
        # Recall asks HNSW for a candidate pool, then ranks: is the exact top 10 in that pool?
        "candidate_pool": pool,
        "recall_at_10_in_pool": recall_at(index, pool),
        "search_k10": summarize(timings),
        "sweep": {},
    }
    service.keeper.save()
    for ef in ef_sweep:
        loaded = HnswIndex.load(
            data_dir / INDEX_DIR, dim=service.embedder.dim, model=service.embedder.name, ef_search=ef
        )
        if loaded is None:
            raise RuntimeError("the saved index could not be loaded for the ef sweep")
        timings = []
        for qvec in qvecs:
            start = time.perf_counter()
            loaded.search(qvec, k)
            timings.append(time.perf_counter() - start)
        result["sweep"][str(ef)] = {"recall_at_10": recall_at(loaded, k), "search_k10": summarize(timings)}
        del loaded
        gc.collect()
    return result


# --- the seed's minimal service, as a baseline ---------------------------------------------
#
# seeds/000 describes a minimal service: vectors kept in a dict, records in SQLite,
# and on recall every memory gets cosine × decayed score, then a full sort, the
# top_k are read back and their access counts bumped. The query is embedded with
# the same real model as ours, so the difference is what happens after embedding.

SEED_HALF_LIFE_S = 30 * 86400


class SeedBaseline:
    def __init__(self, service: MemoryService, workdir: Path) -> None:
        ids, matrix = stored_vectors(service)
        self.embedder = service.embedder
        self.ids = ids
        self.matrix = matrix
        # Every stored memory, whatever its status: the seed knows no superseding.
        by_id = stored_records(service, ids)
        self.texts = {mid: by_id[mid].content for mid in ids}
        # memory_id -> [base_score, created_at, last_accessed_at, access_count] (epoch seconds)
        self.rows = {
            mid: [
                by_id[mid].base_score,
                by_id[mid].created_at.timestamp(),
                by_id[mid].last_accessed_at.timestamp(),
                by_id[mid].access_count,
            ]
            for mid in ids
        }
        self.categories = {mid: by_id[mid].category for mid in ids}
        self.vectors = {mid: matrix[i] for i, mid in enumerate(ids)}
        self.db_path = workdir / f"seed-{uuid.uuid4().hex}.sqlite3"
        self.conn = sqlite3.connect(self.db_path, check_same_thread=False)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS memories (memory_id TEXT PRIMARY KEY, content TEXT, category TEXT, "
            "base_score REAL, created_at REAL, last_accessed_at REAL, access_count INTEGER)"
        )
        self.conn.executemany(
            "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(mid, self.texts[mid], self.categories[mid], r[0], r[1], r[2], r[3]) for mid, r in self.rows.items()],
        )
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()
        self.db_path.unlink(missing_ok=True)

    @staticmethod
    def _score(base: float, last_accessed: float, access_count: float, now: float) -> float:
        decayed: float = base * (0.5 ** ((now - last_accessed) / SEED_HALF_LIFE_S))
        return min(1.0, decayed + min(0.2, access_count * 0.01))

    def recall_numpy_python(self, query: str, top_k: int) -> list[str]:
        """Exact cosine in numpy over every vector, then every memory re-ranked in Python and sorted."""
        qvec = self.embedder.embed_query(query)
        sims = self.matrix @ qvec
        now = time.time()
        rows = self.rows
        scores = []
        for mid, sim in zip(self.ids, sims.tolist(), strict=True):
            base, _, last, count = rows[mid]
            scores.append((mid, sim * self._score(base, last, count, now)))
        scores.sort(key=lambda pair: -pair[1])
        top = [mid for mid, _ in scores[:top_k]]
        for mid in top:
            rows[mid][2] = now
            rows[mid][3] += 1
        return top

    def recall_vectorised(self, query: str, top_k: int, pool: int) -> list[str]:
        """Exact cosine in numpy, the top ``pool`` by cosine re-ranked with the decayed score."""
        qvec = self.embedder.embed_query(query)
        sims = self.matrix @ qvec
        pool = min(pool, len(sims) - 1)
        best = np.argpartition(-sims, pool)[:pool]
        now = time.time()
        ranked = sorted(
            ((self.ids[i], float(sims[i]) * self._score(*self._fields(self.ids[i]), now)) for i in best),
            key=lambda pair: -pair[1],
        )
        top = [mid for mid, _ in ranked[:top_k]]
        for mid in top:
            self.rows[mid][2] = now
            self.rows[mid][3] += 1
        return top

    def _fields(self, mid: str) -> tuple[float, float, float]:
        base, _, last, count = self.rows[mid]
        return base, last, count

    def recall_verbatim(self, query: str, top_k: int) -> list[dict[str, Any]]:
        """The seed's ``recall_memory`` as written: per-memory cosine and two SQLite reads, sort, commit."""
        conn = self.conn
        query_vec = self.embedder.embed_query(query)
        scores = []
        for mid, vec in self.vectors.items():
            sim = float(np.dot(query_vec, vec) / (np.linalg.norm(query_vec) * np.linalg.norm(vec) + 1e-8))
            row = conn.execute(
                "SELECT base_score, created_at, last_accessed_at FROM memories WHERE memory_id=?", (mid,)
            ).fetchone()
            base_score, _, last_accessed_at = row
            now = time.time()
            decayed = base_score * (0.5 ** ((now - last_accessed_at) / SEED_HALF_LIFE_S))
            row2 = conn.execute("SELECT access_count FROM memories WHERE memory_id=?", (mid,)).fetchone()
            bonus = min(0.2, row2[0] * 0.01)
            scores.append((mid, sim * min(1.0, decayed + bonus)))
        scores.sort(key=lambda x: -x[1])
        results = []
        for mid, final_score in scores[:top_k]:
            row = conn.execute("SELECT content, category FROM memories WHERE memory_id=?", (mid,)).fetchone()
            results.append({"memory_id": mid, "content": row[0], "category": row[1], "score": final_score})
            conn.execute(
                "UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? WHERE memory_id = ?",
                (time.time(), mid),
            )
        conn.commit()
        return results


def timed_queries(
    call: Callable[[str], Any], warmup: Sequence[str], queries: Sequence[str], budget_s: float, minimum: int = 5
) -> dict[str, Any]:
    for query in warmup:
        call(query)
    seconds: list[float] = []
    began = time.perf_counter()
    for query in queries:
        start = time.perf_counter()
        call(query)
        seconds.append(time.perf_counter() - start)
        if len(seconds) >= minimum and time.perf_counter() - began > budget_s:
            break
    out = summarize(seconds)
    out["stopped_by_budget"] = len(seconds) < len(queries)
    return out


def baselines(
    service: MemoryService, workdir: Path, warmup: Sequence[str], queries: Sequence[str], args: argparse.Namespace
) -> dict[str, Any]:
    seed = SeedBaseline(service, workdir)
    pool = max(service.config.recall.min_candidates, service.config.recall.candidate_factor * args.top_k)
    with one_blas_thread() as limited:
        try:
            return _run_baselines(seed, pool, warmup, queries, args) | {"blas_single_thread": limited}
        finally:
            seed.close()


def _run_baselines(
    seed: SeedBaseline, pool: int, warmup: Sequence[str], queries: Sequence[str], args: argparse.Namespace
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seed_numpy_python_rerank": timed_queries(
            lambda q: seed.recall_numpy_python(q, args.top_k), warmup[:3], queries, args.baseline_budget_s
        ),
        "numpy_exact_vectorised": timed_queries(
            lambda q: seed.recall_vectorised(q, args.top_k, pool), warmup[:3], queries, args.baseline_budget_s
        ),
    }
    if args.seed_verbatim_queries > 0:
        out["seed_verbatim_sqlite"] = timed_queries(
            lambda q: seed.recall_verbatim(q, args.top_k),
            warmup[:1],
            queries[: args.seed_verbatim_queries],
            args.baseline_budget_s,
            minimum=3,
        )
    out["rss_mb_with_baseline_data"] = rss_mb()
    return out


# --- HTTP ----------------------------------------------------------------------------------


@contextlib.contextmanager
def running_server(
    data_dir: Path, logfile: Path, timeout_s: float, info: dict[str, Any]
) -> Iterator[tuple[psutil.Process, str, float]]:
    """``twinmem serve`` on a free loopback port; stopped with SIGINT (graceful) on the way out."""
    port = free_port()
    command = [twinmem_command(), "serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data_dir)]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    base = f"http://127.0.0.1:{port}"
    with open(logfile, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            ready = None
            with httpx.Client(base_url=base, timeout=5) as probe:
                while time.perf_counter() - start < timeout_s:
                    if proc.poll() is not None:
                        break
                    try:
                        if probe.get("/health").status_code == 200:
                            ready = time.perf_counter() - start
                            break
                    except httpx.TransportError:
                        pass
                    time.sleep(0.2)
            if ready is None:
                tail = logfile.read_text(encoding="utf-8", errors="replace")[-3000:]
                raise RuntimeError(f"twinmem serve did not become healthy (exit {proc.poll()}):\n{tail}")
            yield psutil.Process(proc.pid), base, ready
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.terminate()
                    try:
                        proc.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
            info["exit_code"] = proc.returncode
            info["log_has_traceback"] = "Traceback" in logfile.read_text(encoding="utf-8", errors="replace")


def settle(server: psutil.Process, *, idle_share: float = 0.1, limit_s: float = 30.0) -> float:
    """Wait until the server (with its children) uses under ``idle_share`` of a core over
    half a second, at most ``limit_s``: what it started in the background (the torch
    import of its exact scan, from when it opened) is over before the timed requests.
    The seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        before = _cpu_seconds(server)
        time.sleep(0.5)
        after = _cpu_seconds(server)
        if after - before < idle_share * 0.5:
            return round(time.perf_counter() - started, 2)
    log(f"the server was still busy after {limit_s:.0f} s; timing it anyway")
    return round(time.perf_counter() - started, 2)


def _cpu_seconds(server: psutil.Process) -> float:
    """CPU seconds of ``server`` and its children (one that has exited counts nothing)."""
    total = 0.0
    for process in [server, *server.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def recall_http(
    data_dir: Path, warmup: Sequence[str], queries: Sequence[str], args: argparse.Namespace
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    shutdown: dict[str, Any] = {}
    logfile = data_dir / "serve.log"
    with running_server(data_dir, logfile, args.serve_timeout_s, shutdown) as (proc, base, ready):
        with httpx.Client(base_url=base, timeout=120, headers=headers) as client:
            health = client.get("/health").json()

            def call(query: str) -> int:
                body = {"query": query, "top_k": args.top_k, "namespace": NAMESPACE}
                response = client.post("/v1/memory/recall", json=body)
                if response.status_code != 200:
                    raise RuntimeError(f"recall answered {response.status_code}: {response.text[:500]}")
                return len(response.json()["memories"])

            for query in warmup:
                call(query)
            result_settle = settle(proc)
            # The floor: a round trip through uvicorn and Litestar that does no engine work.
            floor: list[float] = []
            for _ in range(100):
                start = time.perf_counter()
                client.get("/health").raise_for_status()
                floor.append(time.perf_counter() - start)
            seconds: list[float] = []
            empty = 0
            for query in queries:
                start = time.perf_counter()
                hits = call(query)
                seconds.append(time.perf_counter() - start)
                empty += hits == 0
        server_rss = rss_mb(proc, children=True)
    return {
        "server_ready_s": round(ready, 2),
        "server_settled_after_s": result_settle,
        "health": health,
        "total": summarize(seconds),
        "health_round_trip": summarize(floor),
        "empty_results": empty,
        "server_rss_mb": server_rss,
        "shutdown": shutdown,
    }


# --- the fast network's memory, and a baseline revision on the same data ------------------------


def network_memory(service: MemoryService) -> dict[str, Any]:
    """Build a second fast network from the store (as a rebuild does) and measure what it
    adds to this process's RSS, per memory held; plus the network's own estimate."""
    from engine.adapters.bm25_lexical import build_scorer

    embedder, store = service.embedder, service.store
    gc.collect()
    before = rss_mb()
    network = FastNetwork(build_scorer, model=embedder.name, dim=embedder.dim)
    for namespace in store.namespaces():
        after = ""
        while page := store.scan(Scope.whole([namespace]), after, 2048):
            ids = [memory.memory_id for memory in page]
            network.apply(page, (), store.links(ids))
            vectors = store.vectors(ids, embedder.name)
            if vectors:
                network.put_vectors(list(vectors), np.vstack(list(vectors.values())))
            after = ids[-1]
    network.lexical([NAMESPACE], ["build"])  # the BM25 build, as the first recall makes it
    gc.collect()
    added = (rss_mb() - before) * MB
    held = max(1, len(network))
    estimate = network.nbytes()
    vectors = held * embedder.dim * 2
    return {
        "memories": len(network),
        "rss_bytes_per_memory": round(added / held),
        "rss_bytes_per_memory_beyond_vectors": round((added - vectors) / held),
        "estimate_bytes_per_memory": round(estimate / held),
    }


_BASELINE = r"""
import json, sys, time
tree, data_dir, top_k = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, tree)
from engine.adapters import load_embedder, open_service
from engine.config import load_config

class Timed:
    def __init__(self, inner):
        self.inner, self.last = inner, 0.0
        self.name, self.version, self.dim = inner.name, inner.version, inner.dim
        self.similarity_floor = inner.similarity_floor
    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)
    def embed_query(self, text):
        start = time.perf_counter()
        try:
            return self.inner.embed_query(text)
        finally:
            self.last = time.perf_counter() - start

config = load_config(data_dir=data_dir)
embedder = Timed(load_embedder(config))
service = open_service(config, embedder=embedder)
try:  # as this process does (await_rough_cosines); a revision without it has nothing to wait for
    from engine.adapters.half_cosines import half_cosines
    half_cosines.load()
except (ImportError, AttributeError):
    pass
print("ready", flush=True)
try:
    for line in sys.stdin:
        query = json.loads(line)
        if query is None:
            service.flush()
            service.keeper.network.settle()
            getattr(service.store, "wait_checked", lambda: None)()  # a revision without it has no check
            print("null", flush=True)
            continue
        start = time.perf_counter()
        service.recall(query, namespaces=["bench"], top_k=top_k)
        total = time.perf_counter() - start
        print(json.dumps([total, total - embedder.last]), flush=True)
finally:
    service.close()
"""


class Baseline:
    """The engine of git revision ``ref`` (``git archive``) in a child process, recalling on
    a copy of the data directory, one query per request, so that its queries interleave
    with this process's and load from elsewhere falls on both alike."""

    def __init__(self, ref: str, data_dir: Path, args: argparse.Namespace) -> None:
        workdir = Path(args.workdir)
        self.ref = ref
        self.revision = subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "--short", ref], check=True, capture_output=True, text=True
        ).stdout.strip()
        self.tree = Path(tempfile.mkdtemp(prefix="baseline-", dir=workdir))
        archive = subprocess.run(
            ["git", "-C", str(HERE.parent), "archive", "--format=tar", ref], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(self.tree)], input=archive, check=True)
        self.data = self.tree / "data"
        shutil.copytree(data_dir, self.data, ignore=shutil.ignore_patterns(".lock"))
        self.child = subprocess.Popen(
            [sys.executable, "-c", _BASELINE, str(self.tree), str(self.data), str(args.top_k)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=self.tree,
            env=dict(os.environ, HF_HUB_OFFLINE="1"),
        )
        assert self.child.stdout is not None
        if self.child.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the engine of {ref} did not start")

    def _ask(self, query: str | None) -> Any:
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.write(json.dumps(query) + "\n")
        self.child.stdin.flush()
        return json.loads(self.child.stdout.readline())

    def recall(self, query: str) -> tuple[float, float]:
        """(total seconds, seconds without the query embedding) of one recall there."""
        total, engine = self._ask(query)
        return float(total), float(engine)

    def flush(self) -> None:
        self._ask(None)

    def close(self) -> None:
        if self.child.stdin is not None:
            self.child.stdin.close()
        self.child.wait(timeout=600)
        shutil.rmtree(self.tree, ignore_errors=True)


# --- one size --------------------------------------------------------------------------------


def open_timed(config: Config, embedder: TimedEmbedder) -> tuple[MemoryService, float]:
    start = time.perf_counter()
    service = open_service(config, embedder=embedder)
    return service, time.perf_counter() - start


def run_size(size: int, args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix=f"latency-{size}-", dir=workdir))
    # Other work on the machine skews every number here; the load average shows when it did.
    result: dict[str, Any] = {"size": size, "data_dir": str(data_dir), "load_avg_start": os.getloadavg()}
    try:
        config = load_config(data_dir=str(data_dir))
        rss_start = rss_mb()
        start = time.perf_counter()
        embedder = TimedEmbedder(load_embedder(config))
        result["model_load_s"] = round(time.perf_counter() - start, 2)
        result["rss_mb_model_loaded"] = rss_mb()
        result["rss_mb_start"] = rss_start
        queries = synthetic.queries(args.queries + args.warmup, seed=args.seed + 1)
        warmup, timed = queries[: args.warmup], queries[args.warmup :]

        log(f"N={size}: ingest")
        service, _ = open_timed(config, embedder)
        try:
            fill = bulk_ingest if args.bulk else ingest
            result["ingest"] = fill(service, size, args.batch, args.seed)
            service.flush()
            result["rss_mb_after_ingest"] = rss_mb()
            ids, _ = stored_vectors(service)
            statuses = [str(memory.status) for memory in stored_records(service, ids).values()]
            result["ingest"]["statuses"] = {status: statuses.count(status) for status in sorted(set(statuses))}
        finally:
            service.close()
        gc.collect()
        result["disk_mb"] = {
            "store": round(sum(p.stat().st_size for p in data_dir.glob("twinmem.sqlite3*")) / MB, 1),
            "index": round(sum(p.stat().st_size for p in (data_dir / INDEX_DIR).glob("*")) / MB, 1),
        }

        log(f"N={size}: restart (index from disk)")
        service, seconds = open_timed(config, embedder)
        try:
            result["restart_s"] = round(seconds, 3)
            result["restart_rebuilt_index"] = service.keeper.rebuilt_at_start
            result["rss_mb_after_restart"] = rss_mb()
            # The service imports torch for its exact scan in the background (about 1.5 s
            # here, holding the interpreter's lock much of it): the timed recalls are a warm
            # service's. What a start costs its first requests is first_requests.py's.
            started = time.perf_counter()
            await_rough_cosines()
            result["rough_cosines_wait_s"] = round(time.perf_counter() - started, 3)
            baseline = Baseline(args.baseline_ref, data_dir, args) if args.baseline_ref else None
            try:
                log(
                    f"N={size}: recall in process ({len(timed)} queries"
                    + (f", {args.baseline_ref} alongside)" if baseline else ")")
                )
                result["in_process"] = recall_in_process(service, warmup, timed, args.top_k, baseline)
            finally:
                if baseline is not None:
                    baseline.close()
            if "baseline" in result["in_process"]:
                result["baseline"] = result["in_process"].pop("baseline")
            result["rss_mb"] = rss_mb()
            log(f"N={size}: fast network memory")
            result["fast_network"] = network_memory(service)
            log(f"N={size}: HNSW recall@10")
            result["hnsw"] = hnsw_quality(service, data_dir, timed[: args.hnsw_queries], args.ef_sweep, config)
            if args.baseline_budget_s > 0:
                log(f"N={size}: baselines")
                result["baselines"] = baselines(service, workdir, warmup, timed, args)
        finally:
            service.close()
        gc.collect()

        log(f"N={size}: rebuild (index deleted)")
        shutil.rmtree(data_dir / INDEX_DIR)
        service, seconds = open_timed(config, embedder)
        try:
            result["rebuild_s"] = round(seconds, 3)
            result["rebuild_rebuilt_index"] = service.keeper.rebuilt_at_start
            result["rebuild_indexed"] = len(service.keeper.index)
        finally:
            service.close()

        if args.http:
            log(f"N={size}: recall over HTTP")
            result["http"] = recall_http(data_dir, warmup, timed, args)
        result["load_avg_end"] = os.getloadavg()
        return result
    finally:
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)


# --- report ------------------------------------------------------------------------------------


def _get(data: dict[str, Any], *path: str) -> Any:
    node: Any = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and math.isnan(value):
        return "–"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}"
    return str(value)


def _trio(data: dict[str, Any], *path: str) -> str:
    stats = _get(data, *path)
    if not stats or not stats.get("n"):
        return "–"
    return " / ".join(_fmt(stats[key]) for key in ("p50_ms", "p95_ms", "p99_ms"))


def _pair(data: dict[str, Any], *path: str) -> str:
    stats = _get(data, *path)
    if not stats or not stats.get("n"):
        return "–"
    return " / ".join(_fmt(stats[key]) for key in ("p50_ms", "p95_ms"))


def markdown(results: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| N | ingest/s | in-process p50 / p95 / p99 ms | HTTP p50 / p95 / p99 ms | "
        "seed baseline p50 / p95 ms | HNSW recall@10 | RSS MB (proc / server) | restart s | rebuild s |",
        "|---:|---:|---|---|---|---:|---|---:|---:|",
    ]
    for row in results:
        lines.append(
            "| "
            + " | ".join(
                [
                    f"{row['size']:,}",
                    ("bulk " if _get(row, "ingest", "bulk") else "") + _fmt(_get(row, "ingest", "stored_per_s"), 0),
                    _trio(row, "in_process", "total"),
                    _trio(row, "http", "total"),
                    _pair(row, "baselines", "seed_numpy_python_rerank"),
                    _fmt(_get(row, "hnsw", "recall_at_10"), 3),
                    f"{_fmt(row.get('rss_mb'), 0)} / {_fmt(_get(row, 'http', 'server_rss_mb'), 0)}",
                    _fmt(row.get("restart_s"), 2),
                    _fmt(row.get("rebuild_s"), 2),
                ]
            )
            + " |"
        )
    lines += [
        "",
        "| N | ours in-process p50 / p95 ms | ours without query embedding p50 / p95 ms | "
        "seed: numpy cosine + Python re-rank | seed verbatim (SQLite per memory) | numpy exact, vectorised | "
        "HNSW recall@10 in candidate pool | ef sweep (recall@10) | HTTP GET /health p50 ms | server cold start s |",
        "|---:|---|---|---|---|---|---:|---|---:|---:|",
    ]
    for row in results:
        sweep = _get(row, "hnsw", "sweep") or {}
        sweep_text = ", ".join(f"ef={ef}: {_fmt(v['recall_at_10'], 3)}" for ef, v in sweep.items()) or "–"
        verbatim = _pair(row, "baselines", "seed_verbatim_sqlite")
        n_verbatim = _get(row, "baselines", "seed_verbatim_sqlite", "n")
        if n_verbatim:
            verbatim += f" (n={n_verbatim})"
        lines.append(
            "| "
            + " | ".join(
                [
                    f"{row['size']:,}",
                    _pair(row, "in_process", "total"),
                    _pair(row, "in_process", "without_embedding"),
                    _pair(row, "baselines", "seed_numpy_python_rerank"),
                    verbatim,
                    _pair(row, "baselines", "numpy_exact_vectorised"),
                    _fmt(_get(row, "hnsw", "recall_at_10_in_pool"), 3),
                    sweep_text,
                    _fmt(_get(row, "http", "health_round_trip", "p50_ms")),
                    _fmt(_get(row, "http", "server_ready_s")),
                ]
            )
            + " |"
        )
    if any("baseline" in row for row in results):
        lines += [
            "",
            "| N | engine recall p50 / p95 ms (query embedding excluded): before | after | "
            "with embedding, before | after | fast network bytes per memory (RSS, beyond vectors / estimate) |",
            "|---:|---|---|---|---|---|",
        ]
        for row in results:
            before = f"{_pair(row, 'baseline', 'without_embedding')} ({_get(row, 'baseline', 'revision')})"
            network = row.get("fast_network") or {}
            lines.append(
                "| "
                + " | ".join(
                    [
                        f"{row['size']:,}",
                        before,
                        _pair(row, "in_process", "without_embedding"),
                        _pair(row, "baseline", "total"),
                        _pair(row, "in_process", "total"),
                        f"{_fmt(network.get('rss_bytes_per_memory_beyond_vectors'), 0)} / "
                        f"{_fmt(network.get('estimate_bytes_per_memory'), 0)}",
                    ]
                )
                + " |"
            )
    cpus = os.cpu_count() or 1
    for row in results:
        loads = [row.get("load_avg_start"), row.get("load_avg_end")]
        worst = max((load[0] for load in loads if load), default=0.0)
        if worst > 0.75 * cpus:
            lines.append(
                f"\nWarning: N={row['size']:,} ran on a busy machine (1-minute load average up to {worst:.1f} "
                f"on {cpus} CPUs); its latencies are inflated. Rerun on a quiet machine."
            )
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    cpu_model = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model,
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 1024**3, 1),
        "packages": {
            name: version(name)
            for name in ("twinmem", "hnswlib", "numpy", "torch", "sentence-transformers", "litestar", "uvicorn")
        },
    }


# --- entry point ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="numbers of memories")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "latency.json", help="JSON results file")
    parser.add_argument("--queries", type=int, default=300, help="timed recall queries per size (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="warm-up queries before timing (default 30)")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--batch", type=int, default=256, help="memories per save_batch call (256-500)")
    parser.add_argument("--hnsw-queries", type=int, default=200, help="query vectors for HNSW recall@10")
    parser.add_argument("--ef-sweep", type=int, nargs="*", default=[16, 32, 64, 128, 256])
    parser.add_argument(
        "--baseline-budget-s",
        type=float,
        default=120.0,
        help="time budget per baseline per size; queries stop once it is spent (0 skips baselines)",
    )
    parser.add_argument(
        "--seed-verbatim-queries",
        type=int,
        default=30,
        help="queries for the verbatim seed baseline (two SQLite reads per memory per query; 0 skips)",
    )
    parser.add_argument("--no-http", dest="http", action="store_false", help="skip the HTTP measurement")
    parser.add_argument(
        "--bulk", action="store_true", help="fill the store with Store.insert, not the write path (no ingest rate)"
    )
    parser.add_argument(
        "--baseline-ref", help="git revision (e.g. main) whose engine recalls the same data, printed side by side"
    )
    parser.add_argument("--token", default=os.environ.get(TOKEN_ENV), help="bearer token for the HTTP API")
    parser.add_argument("--serve-timeout-s", type=float, default=600.0, help="how long to wait for /health")
    parser.add_argument("--seed", type=int, default=42, help="RNG seed of the synthetic memories")
    parser.add_argument("--workdir", default=str(HERE / ".work" / "latency"), help="where data directories go")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument("--no-isolate", dest="isolate", action="store_false", help="run sizes in this process")
    parser.add_argument("--child-result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.batch <= 500:
        parser.error("--batch must be within 1..500 (the engine's max_batch)")
    if args.queries < 1 or any(size < 20 for size in args.sizes):
        parser.error("need at least 1 query and sizes of at least 20")
    return args


def child_command(size: int, args: argparse.Namespace, result_file: Path) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--sizes", str(size), "--child-result", str(result_file)]
    command += ["--queries", str(args.queries), "--warmup", str(args.warmup), "--top-k", str(args.top_k)]
    command += ["--batch", str(args.batch), "--hnsw-queries", str(args.hnsw_queries)]
    command += ["--ef-sweep", *map(str, args.ef_sweep)]
    command += ["--baseline-budget-s", str(args.baseline_budget_s)]
    command += ["--seed-verbatim-queries", str(args.seed_verbatim_queries)]
    command += ["--serve-timeout-s", str(args.serve_timeout_s), "--seed", str(args.seed), "--workdir", args.workdir]
    if not args.http:
        command.append("--no-http")
    if args.baseline_ref:
        command += ["--baseline-ref", args.baseline_ref]
    if args.bulk:
        command.append("--bulk")
    if args.keep:
        command.append("--keep")
    return command


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child_result is not None:
        result = run_size(args.sizes[0], args)
        args.child_result.write_text(json.dumps(result), encoding="utf-8")
        return 0
    results = []
    for size in args.sizes:
        if args.isolate:
            Path(args.workdir).mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=args.workdir, suffix=".json", delete=False) as handle:
                result_file = Path(handle.name)
            try:
                env = dict(os.environ, **{TOKEN_ENV: args.token or ""})
                done = subprocess.run(child_command(size, args, result_file), env=env, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"the run for N={size} failed (exit {done.returncode})")
                results.append(json.loads(result_file.read_text(encoding="utf-8")))
            finally:
                result_file.unlink(missing_ok=True)
        else:
            results.append(run_size(size, args))
        gc.collect()
    report = {
        "benchmark": "latency",
        "environment": environment(),
        "settings": {
            key: (str(value) if isinstance(value, Path) else value)
            for key, value in vars(args).items()
            if key not in ("token", "child_result")
        },
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(markdown(results))
    print(f"\nresults: {args.out}")
    if not args.keep:
        with contextlib.suppress(OSError):
            Path(args.workdir).rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
