"""Store calls, records read and statements per operation, on SQLite and on a Bolt store.

Each store is wrapped where the engine holds it: every public method of the ``Store``
port (``engine/ports.py``) on the service's store is replaced by one that counts its
calls and the records it answered (memories, versions and links, a page's items, a
dict's values or the items of its lists), and the store's own ``round_trips`` counter
gives the statements and transactions it sent (over Bolt, each a network round trip).

The namespace holds ``--pairs`` people twice: "P lives in Berlin", then "P moved to
Lisbon", which supersedes it, so half of it is superseded; each operation below runs on
its own fresh copy of that namespace (reinforcement and background catch-up flushed
first and counted with it):

recall, list (a page of 50), get by id, history, update, delete, rollback of one memory
(the newest to its version 1), namespace rollback (to before the moves: the movers
deleted and the old homes back), restore (of a deleted memory), consolidation dry run and
real, export (with versions), session append and close (its promotion).

    .venv/bin/python benchmarks/store_reads.py --pairs 100

Results print as a Markdown table and go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.adapters import load_embedder, open_service, open_sessions  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.portability import open_export  # noqa: E402
from engine.ports import Embedder, Store  # noqa: E402
from engine.records import Memory, MemoryDraft, MemoryFilter, MemoryPatch, Page, Reach, Version  # noqa: E402
from engine.service import MemoryService  # noqa: E402
from engine.session_records import Role, SessionRef  # noqa: E402
from engine.sessions import MessageDraft  # noqa: E402

NAMESPACE = "reads"


def _records(answer: Any) -> int:
    """How many records (memories, versions, links, ids) a store call answered."""
    if answer is None or isinstance(answer, (bool, int, float, str)):
        return 0
    if isinstance(answer, Memory | Version):
        return 1
    if isinstance(answer, Page):
        return len(answer.items)
    if isinstance(answer, dict):
        # A list per id (``edges_of``, ``versions_of``): the records in them.
        return sum(len(value) if isinstance(value, list) else 1 for value in answer.values())
    if isinstance(answer, tuple) and answer and isinstance(answer[0], list):
        return len(answer[0])  # get_many_and_seq: (records, seq)
    if isinstance(answer, list | tuple | set | frozenset):
        return len(answer)
    return 0


class Counting:
    """Counts the engine's calls and the records they answered, per method of one store
    instance (patched on the instance, so every part of the engine holding it is counted)."""

    def __init__(self, store: Store) -> None:
        self.calls: Counter[str] = Counter()
        self.records: Counter[str] = Counter()
        self._store = store
        self._depth = threading.local()
        for name in dir(type(store)):
            if name.startswith("_") or name in ("round_trips", "count_round_trips", "open", "close"):
                continue
            method = getattr(store, name, None)
            if callable(method) and not isinstance(method, type):
                setattr(store, name, self._wrap(name, method))

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            # A call the store makes to itself (``versions`` asks ``get``) is its own business.
            depth = getattr(self._depth, "n", 0)
            self._depth.n = depth + 1
            try:
                answer = method(*args, **kwargs)
            finally:
                self._depth.n = depth
            if depth:
                return answer
            if isinstance(answer, Iterator):
                return self._iterated(name, answer)
            self.calls[name] += 1
            self.records[name] += _records(answer)
            return answer

        return counted

    def _iterated(self, name: str, answer: Iterator[Any]) -> Iterator[Any]:
        self.calls[name] += 1
        for item in answer:
            self.records[name] += _records(item)
            yield item

    def reset(self) -> None:
        self.calls.clear()
        self.records.clear()


def fill(service: MemoryService, pairs: int) -> tuple[list[str], list[str]]:
    """``pairs`` people living in Berlin, then moved to Lisbon: (old ids, new ids)."""
    old = [
        service.save(MemoryDraft(content=f"Person{n} lives in Berlin", namespace=NAMESPACE, key=f"home{n}"))
        for n in range(pairs)
    ]
    new = [
        service.save(MemoryDraft(content=f"Person{n} moved to Lisbon", namespace=NAMESPACE, key=f"home{n}"))
        for n in range(pairs)
    ]
    service.flush()
    return [r.memory.memory_id for r in old], [r.memory.memory_id for r in new]


Op = Callable[[MemoryService, list[str], list[str], datetime], Callable[[], Any]]


def operations() -> dict[str, Op]:
    """Each takes the filled service and answers the call to count (after any setup)."""

    def restore(service: MemoryService, old: list[str], new: list[str], before: datetime) -> Callable[[], Any]:
        service.delete(NAMESPACE, new[0])
        return lambda: service.rollbacks.restore(NAMESPACE, new[0])

    def rollback_one(service: MemoryService, old: list[str], new: list[str], before: datetime) -> Callable[[], Any]:
        service.update(NAMESPACE, new[0], MemoryPatch(content="Person0 moved to Porto"))
        return lambda: service.rollbacks.to_version(NAMESPACE, new[0], 1)

    return {
        "recall": lambda s, o, n, b: lambda: s.recall("where does Person7 live?", namespaces=[NAMESPACE], top_k=10),
        "list (page of 50)": lambda s, o, n, b: lambda: s.list_page([NAMESPACE], MemoryFilter(), limit=50),
        "get by id": lambda s, o, n, b: lambda: s.get(NAMESPACE, n[0]),
        "history": lambda s, o, n, b: lambda: s.history(NAMESPACE, n[0]),
        "update": lambda s, o, n, b: lambda: s.update(NAMESPACE, n[0], MemoryPatch(content="Person0 moved to Porto")),
        "delete": lambda s, o, n, b: lambda: s.delete(NAMESPACE, n[0]),
        "rollback of one memory": rollback_one,
        "namespace rollback": lambda s, o, n, b: lambda: s.rollbacks.to_time(NAMESPACE, b),
        "restore": restore,
        "consolidation, dry run": lambda s, o, n, b: lambda: s.consolidator.run(NAMESPACE, dry_run=True),
        "consolidation": lambda s, o, n, b: lambda: s.consolidator.run(NAMESPACE),
        "export (with versions)": lambda s, o, n, b: (
            lambda: b"".join(open_export(s, NAMESPACE, versions=True).chunks())
        ),
    }


def session_ops(service: MemoryService, config: Any, counting: Counting, trips: Any) -> dict[str, dict[str, Any]]:
    sessions = open_sessions(config, service, background=False)
    ref = SessionRef(NAMESPACE, "local", "chat-1")
    out = {}
    try:
        say = [
            MessageDraft(Role.USER, "My name is Lena and I live in Lyon."),
            MessageDraft(Role.USER, "Remember that I am vegetarian this week."),
        ]
        out["session append"] = measured(service, counting, trips, lambda: sessions.append(ref, say, reach=Reach.FULL))
        out["session close"] = measured(service, counting, trips, lambda: sessions.close(ref))
    finally:
        sessions.stop()
    return out


def measured(service: MemoryService, counting: Counting, trips: Any, call: Callable[[], Any]) -> dict[str, Any]:
    service.flush()
    counting.reset()
    statements, transactions = trips.totals()
    start = time.perf_counter()
    call()
    service.flush()
    seconds = time.perf_counter() - start
    after_statements, after_transactions = trips.totals()
    return {
        "calls": sum(counting.calls.values()),
        "records": sum(counting.records.values()),
        "statements": after_statements - statements,
        "transactions": after_transactions - transactions,
        "seconds": seconds,
        "by_method": {name: [counting.calls[name], counting.records[name]] for name in sorted(counting.calls)},
    }


def open_one(store: str, embedder: Embedder, workdir: Path, arcadedb: Any) -> tuple[MemoryService, Any]:
    overrides: dict[str, Any] = {"data_dir": str(workdir)}
    if store == "graph":
        target = arcadedb.target()
        overrides.update(
            store="neo4j",
            neo4j={
                "uri": target.uri,
                "user": target.user,
                "password": target.password,
                "database": target.new_database(),
            },
        )
    config = load_config(env={}, **overrides)
    return open_service(config, embedder=embedder), config


def run_store(
    store: str, pairs: int, embedder: Embedder, workdir: Path, arcadedb: Any, only: str = ""
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for n, (name, op) in enumerate([*operations().items(), ("sessions", None)]):
        if only and name != only:
            continue
        service, config = open_one(store, embedder, workdir / f"{store}-{n}", arcadedb)
        try:
            trips = service.store.round_trips  # type: ignore[attr-defined]
            if hasattr(service.store, "count_round_trips"):
                service.store.count_round_trips()
            counting = Counting(service.store)
            if op is None:
                results.update(session_ops(service, config, counting, trips))
                continue
            old, new = fill(service, pairs)
            first_move = service.store.get(_whole(), new[0])
            assert first_move is not None
            call = op(service, old, new, first_move.created_at - timedelta(microseconds=1))
            results[name] = measured(service, counting, trips, call)
        finally:
            service.close()
    return results


def _whole() -> Any:
    from engine.records import Scope

    return Scope.whole([NAMESPACE])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--stores", default="sqlite,graph")
    parser.add_argument("--only", default="", help="one operation, by its name in the table")
    parser.add_argument("--out", type=Path, default=HERE / ".work" / "store_reads.json")
    args = parser.parse_args()
    embedder = load_embedder(load_config(env={}))
    report: dict[str, Any] = {"pairs": args.pairs}
    arcadedb = None
    try:
        with tempfile.TemporaryDirectory(prefix="twinmem-store-reads-") as tmp:
            for store in args.stores.split(","):
                if store == "graph" and arcadedb is None:
                    from tests.bolt import start_arcadedb

                    arcadedb = start_arcadedb()
                report[store] = run_store(store, args.pairs, embedder, Path(tmp), arcadedb, args.only)
    finally:
        if arcadedb is not None:
            arcadedb.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    stores = [s for s in args.stores.split(",")]
    print("| operation | " + " | ".join(f"{s}: calls / records / statements" for s in stores) + " |")
    print("|---|" + "---|" * len(stores))
    for name in report[stores[0]]:
        cells = [
            f"{report[s][name]['calls']} / {report[s][name]['records']} / {report[s][name]['statements']}"
            for s in stores
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
