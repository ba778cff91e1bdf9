"""Short-term sessions: append and window-read latency on both backends, and the prompt
context's latency over a large long-term memory.

    .venv/bin/python benchmarks/sessions.py --sessions 1000 --ops 4000 --threads 8 --memories 20000
    .venv/bin/python benchmarks/sessions.py --sessions 0 --memories 100000 --torch-threads 1 \
        --out benchmarks/results/sessions-context-100k.json

1. For each backend (the embedded SQLite file, and Redis: a redis-server this script
   starts on a free loopback port, or ``--redis-url``), ``--sessions`` sessions are
   opened with two messages each; then ``--threads`` threads pick sessions at random
   and append one message (token counting and the extraction rules included) and read
   the window back, ``--ops`` times in all. Timed per call, through ``Sessions`` (the
   engine, no HTTP).
   ``--sessions 0`` skips this part.
2. ``--memories`` synthetic memories are bulk-loaded into one namespace (``Store.insert``
   in batches, then the index and the fast network catch up; not the write path), a
   session is opened, and ``--queries`` prompt contexts are asked for (budget 2,000
   tokens, the default split), each after a new user message. A context embeds the
   message and runs two recalls (procedures, then memories); the message's embedding
   alone is timed too, so the engine's share shows. ``--embedder`` is the service's
   embedder (default: the deployed default, MiniLM). The memories' vectors are computed
   once by ``--workers`` processes with that embedder (one torch thread each) and kept in
   ``--vectors`` (files of 2,000 checked against the texts and the model), so a rerun
   only loads them. Results go to ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import multiprocessing
import random
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from latency import NAMESPACE, bulk_ingest, summarize  # noqa: E402

from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.adapters.session_redis import RedisSessionStore  # noqa: E402
from engine.adapters.session_sqlite import SESSIONS_FILE, SqliteSessionStore  # noqa: E402
from engine.adapters.tokenizer import load_token_counter  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.ports import SessionStore  # noqa: E402
from engine.records import Reach, Scope  # noqa: E402
from engine.service import MemoryService  # noqa: E402
from engine.session_records import Role, SessionRef  # noqa: E402
from engine.sessions import MessageDraft, Sessions  # noqa: E402

LINES = (
    "I'm vegetarian this week, so no meat please.",
    "Can you suggest something for dinner?",
    "My sister lives in Oslo and visits next month.",
    "我喜欢蓝色，也喜欢简约的设计。",
    "Thanks, that sounds great!",
    "Remind me to call the dentist on Friday.",
    "明天下午三点我要去开会。",
    "What's the weather like tomorrow?",
)


def window_ops(service: MemoryService, store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    sessions = Sessions(service.config.sessions, store, service, load_token_counter())
    refs = [SessionRef("bench", f"agent-{n % 20}", f"s{n}") for n in range(args.sessions)]
    for ref in refs:
        sessions.append(
            ref,
            [MessageDraft(Role.USER, LINES[0]), MessageDraft(Role.ASSISTANT, "Sure, here are some ideas.")],
            reach=Reach.FULL,
        )
    appends: list[float] = []
    reads: list[float] = []
    lock = threading.Lock()
    per_thread = args.ops // args.threads

    def work(seed: int) -> None:
        rng = random.Random(seed)
        mine_a: list[float] = []
        mine_r: list[float] = []
        for _ in range(per_thread):
            ref = rng.choice(refs)
            start = time.perf_counter()
            sessions.append(ref, [MessageDraft(Role.USER, rng.choice(LINES))], reach=Reach.FULL)
            mine_a.append(time.perf_counter() - start)
            start = time.perf_counter()
            sessions.window(ref)
            mine_r.append(time.perf_counter() - start)
        with lock:
            appends.extend(mine_a)
            reads.extend(mine_r)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(args.threads)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    open_now = len(store.sessions("bench", None, service.now()))
    return {
        "sessions": args.sessions,
        "open_sessions_after": open_now,
        "threads": args.threads,
        "append": summarize(appends),
        "window_read": summarize(reads),
        "ops_per_s": round((len(appends) + len(reads)) / elapsed, 1),
    }


_WORKER: dict[str, Any] = {}


def _load_worker(provider: str) -> None:
    import torch

    torch.set_num_threads(1)
    config = load_config(env={}, data_dir=Path(tempfile.gettempdir()), embedding={"provider": provider})
    _WORKER["embedder"] = load_embedder(config)


def _embed_part(texts: list[str]) -> np.ndarray:
    return np.asarray(_WORKER["embedder"].embed_documents(texts), dtype=np.float32)


CHUNK = 2000


def _chunk_digest(model: str, texts: list[str]) -> str:
    return hashlib.sha256("\n".join([model, *texts]).encode("utf-8")).hexdigest()


def memory_vectors(provider: str, model: str, size: int, folder: Path, workers: int) -> tuple[np.ndarray, float]:
    """The vectors of the first ``size`` synthetic memories (seed 42, as ``bulk_ingest``
    reads them). They are kept in ``folder``, one file per ``CHUNK`` memories checked
    against the chunk's texts and the model, so a rerun (or a smaller size) only loads
    them and an interrupted run resumes; missing chunks are embedded by ``workers``
    processes. Also the seconds spent embedding (0: everything read from files)."""
    texts = [item.content for item in itertools.islice(synthetic.memories(42), size)]
    chunks = [(at, texts[at : at + CHUNK]) for at in range(0, size, CHUNK)]
    folder.mkdir(parents=True, exist_ok=True)
    found: dict[int, np.ndarray] = {}
    for at, part in chunks:
        path = folder / f"{at:08d}.npz"
        if path.exists():
            with np.load(path) as saved:
                if str(saved["digest"]) == _chunk_digest(model, part):
                    found[at] = saved["vectors"]
    missing = [(at, part) for at, part in chunks if at not in found]
    start = time.perf_counter()
    if missing:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_load_worker, initargs=(provider,)) as pool:
            done = pool.map(_embed_part, [part for _, part in missing])
            for (at, part), vectors in zip(missing, done, strict=True):
                np.savez(folder / f"{at:08d}.npz", vectors=vectors, digest=np.array(_chunk_digest(model, part)))
                found[at] = vectors
                print(f"embedded {at + len(part)} of {size}", flush=True)
    seconds = time.perf_counter() - start if missing else 0.0
    return np.concatenate([found[at] for at, _ in chunks]), seconds


def context_latency(service: MemoryService, store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    path = Path(args.vectors or HERE / ".work" / f"sessions-vectors-{args.embedder}")
    vectors, embed_seconds = memory_vectors(args.embedder, service.embedder.name, args.memories, path, args.workers)
    ingest = bulk_ingest(service, args.memories, 2048, seed=42, vectors=vectors)
    ingest["vectors_folder"] = str(path)
    ingest["embedding_seconds"] = round(embed_seconds, 1)  # 0: read from the files
    sessions = Sessions(service.config.sessions, store, service, load_token_counter())
    ref = SessionRef(NAMESPACE, "local", "ctx")
    queries = synthetic.queries(args.queries + 5, seed=11)
    timings: list[float] = []
    embeddings: list[float] = []
    tokens: list[int] = []
    for number, query in enumerate(queries):
        sessions.append(ref, [MessageDraft(Role.USER, query)], reach=Reach.FULL)
        start = time.perf_counter()
        context = sessions.context(ref, scope=Scope.whole([NAMESPACE]), budget=2000)
        middle = time.perf_counter()
        service.embedder.embed_query(query)
        if number >= 5:  # the first few warm the caches
            timings.append(middle - start)
            embeddings.append(time.perf_counter() - middle)
            tokens.append(context.tokens)
    service.flush()
    return {
        "memories": args.memories,
        "ingest": ingest,
        "embedder": service.embedder.name,
        "context": summarize(timings),
        "query_embedding_alone": summarize(embeddings),
        "context_tokens_mean": round(sum(tokens) / len(tokens), 1),
    }


def redis_ops(service: MemoryService, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    server = None
    url = args.redis_url
    if url is None:
        from tests.redis_server import RedisServer

        server = RedisServer(tmp)
        url = server.url
    try:
        redis_store = RedisSessionStore(url, prefix="bench")
        redis_store.open()
        try:
            return window_ops(service, redis_store, args)
        finally:
            redis_store.close()
    finally:
        if server is not None:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000, help="0 skips the append / window part")
    parser.add_argument("--ops", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--memories", type=int, default=100_000, help="0 skips the prompt-context part")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--embedder", default="sentence-transformers", help="embedding.provider of the service")
    parser.add_argument("--vectors", default=None, help="folder caching the memories' vectors")
    parser.add_argument("--workers", type=int, default=2, help="processes embedding the memories")
    parser.add_argument("--torch-threads", type=int, default=None, help="torch intra-op threads in this process")
    parser.add_argument("--redis-url", default=None, help="default: start a redis-server here")
    parser.add_argument("--out", default=str(HERE / "results" / "sessions.json"))
    args = parser.parse_args()
    results: dict[str, Any] = {"args": vars(args)}
    with tempfile.TemporaryDirectory() as tmp:
        if args.torch_threads:
            import torch

            torch.set_num_threads(args.torch_threads)
        config = load_config(env={}, data_dir=Path(tmp) / "data", embedding={"provider": args.embedder})
        service = open_service(config)
        try:
            embedded = SqliteSessionStore(Path(tmp) / "data" / SESSIONS_FILE)
            embedded.open()
            if args.sessions:
                results["embedded"] = window_ops(service, embedded, args)
                print("embedded", json.dumps(results["embedded"]), flush=True)
            if args.sessions:
                results["redis"] = redis_ops(service, args, Path(tmp))
                print("redis", json.dumps(results["redis"]), flush=True)
            if args.memories:
                results["context"] = context_latency(service, embedded, args)
                print("context", json.dumps(results["context"]), flush=True)
            embedded.close()
        finally:
            service.close()
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
