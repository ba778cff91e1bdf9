"""Short-term sessions: append and window-read latency on both backends, and the prompt
context's latency over a large long-term memory.

    .venv/bin/python benchmarks/sessions.py --sessions 1000 --ops 4000 --threads 8 --memories 100000

1. For each backend (the embedded SQLite file, and Redis: a redis-server this script
   starts on a free loopback port, or ``--redis-url``), ``--sessions`` sessions are
   opened with two messages each; then ``--threads`` threads pick sessions at random
   and append one message (token counting and the extraction rules included) and read
   the window back, ``--ops`` times in all. Timed per call, through ``Sessions`` (the
   engine, no HTTP).
2. ``--memories`` synthetic memories are bulk-loaded into one namespace (embedded with
   the USE model, the fastest to embed here), a session is opened, and ``--queries``
   prompt contexts are asked for (budget 2,000 tokens, the default split), each after a
   new user message. A context embeds the message and runs two recalls (procedures,
   then memories). Results go to ``benchmarks/results/sessions.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from latency import NAMESPACE, bulk_ingest, summarize  # noqa: E402

from engine.adapters import open_service  # noqa: E402
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


def context_latency(service: MemoryService, store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    ingest = bulk_ingest(service, args.memories, 512, seed=42)
    sessions = Sessions(service.config.sessions, store, service, load_token_counter())
    ref = SessionRef(NAMESPACE, "local", "ctx")
    queries = synthetic.queries(args.queries + 5, seed=11)
    timings: list[float] = []
    tokens: list[int] = []
    for number, query in enumerate(queries):
        sessions.append(ref, [MessageDraft(Role.USER, query)], reach=Reach.FULL)
        start = time.perf_counter()
        context = sessions.context(ref, scope=Scope.whole([NAMESPACE]), budget=2000)
        if number >= 5:  # the first few warm the caches
            timings.append(time.perf_counter() - start)
            tokens.append(context.tokens)
    service.flush()
    return {
        "memories": args.memories,
        "ingest": ingest,
        "context": summarize(timings),
        "context_tokens_mean": round(sum(tokens) / len(tokens), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--memories", type=int, default=100_000, help="0 skips the prompt-context part")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--redis-url", default=None, help="default: start a redis-server here")
    parser.add_argument("--out", default=str(HERE / "results" / "sessions.json"))
    args = parser.parse_args()
    results: dict[str, Any] = {"args": vars(args)}
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(env={}, data_dir=Path(tmp) / "data", embedding={"provider": "use"})
        service = open_service(config)
        try:
            embedded = SqliteSessionStore(Path(tmp) / "data" / SESSIONS_FILE)
            embedded.open()
            results["embedded"] = window_ops(service, embedded, args)
            print("embedded", json.dumps(results["embedded"]), flush=True)
            server = None
            url = args.redis_url
            if url is None:
                from tests.redis_server import RedisServer

                server = RedisServer(Path(tmp))
                url = server.url
            try:
                redis_store = RedisSessionStore(url, prefix="bench")
                redis_store.open()
                results["redis"] = window_ops(service, redis_store, args)
                print("redis", json.dumps(results["redis"]), flush=True)
                redis_store.close()
            finally:
                if server is not None:
                    server.stop()
            if args.memories:
                results["context"] = context_latency(service, embedded, args)
                print("context", json.dumps(results["context"]), flush=True)
            embedded.close()
        finally:
            service.close()
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
