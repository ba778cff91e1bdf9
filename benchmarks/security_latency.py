"""What the security checks on the request path cost, per store: SQLite and a Bolt graph store.

Every request in tokens mode looks its token up (``principal_for``), every write asks
whether its source is blocked (``is_blocked``), and every request appends one audit
entry (``append_audit``). This times each, in process, on:

* the SQLite security store of a data directory (the embedded mode's);
* the graph security store (server mode) on ArcadeDB's Bolt endpoint, started in this
  process as the tests do, or on any Bolt server given with ``--bolt-uri`` (a real
  Neo4j): once reading the graph on every check (``security_cache_seconds = 0``) and
  once with the default bound (answers remembered for 1 s).

The stores take turns call by call, so load from elsewhere falls on all alike. Run::

    .venv/bin/python benchmarks/security_latency.py --calls 2000

Results print as a Markdown table and go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.adapters.neo4j_security_store import DEFAULT_CACHE_SECONDS, Neo4jSecurityStore  # noqa: E402
from engine.adapters.security_store import SECURITY_FILE, SqliteSecurityStore  # noqa: E402
from engine.ports import SecurityStore  # noqa: E402
from engine.security import AuditEvent, Block, BlockKind, TokenRecord, hash_token, parse_grant  # noqa: E402

AT = datetime(2025, 1, 1, tzinfo=UTC)
TOKENS = 100


def _fill(store: SecurityStore) -> None:
    for n in range(TOKENS):
        store.add_token(TokenRecord(f"t{n}", f"agent-{n}", (parse_grant("user:*:rw"),), AT), hash_token(f"tok-{n}"))
    for n in range(10):
        store.block(Block(BlockKind.AGENT, f"blocked-{n}", "root", AT))


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls of each kind per store")
    parser.add_argument("--bolt-uri", help="a Bolt server to use instead of an ArcadeDB child process")
    parser.add_argument("--bolt-user", default="neo4j")
    parser.add_argument("--bolt-password", default=os.environ.get("NEO4J_PASSWORD", ""))
    parser.add_argument("--bolt-database", default=None)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "security-latency.json")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="twinmem-security-bench-"))
    arcade: Any = None
    if args.bolt_uri:
        uri, user, password, database = args.bolt_uri, args.bolt_user, args.bolt_password, args.bolt_database
        server = "Bolt server at " + uri
    else:
        from tests.bolt import start_arcadedb

        arcade = start_arcadedb()
        uri, user, password, database = arcade.uri, arcade.user, arcade.password, arcade.new_database()
        server = "ArcadeDB over Bolt (child process)"

    def graph(cache: float) -> SecurityStore:
        return Neo4jSecurityStore(uri, user=user, password=password, database=database, cache_seconds=cache)

    stores: dict[str, SecurityStore] = {
        "SQLite": SqliteSecurityStore(work / SECURITY_FILE),
        f"{server}, no cache": graph(0),
        f"{server}, cache {DEFAULT_CACHE_SECONDS:g} s": graph(DEFAULT_CACHE_SECONDS),
    }
    try:
        for store in stores.values():
            store.open()
        _fill(stores["SQLite"])
        _fill(next(iter(s for name, s in stores.items() if name != "SQLite")))

        calls: dict[str, Callable[[SecurityStore, int], object]] = {
            "principal_for": lambda store, n: store.principal_for(hash_token(f"tok-{n % TOKENS}")),
            "is_blocked": lambda store, n: store.is_blocked(f"agent-{n % TOKENS}", f"session-{n % TOKENS}"),
            "append_audit": lambda store, n: store.append_audit(
                AuditEvent(f"agent-{n % TOKENS}", "recall", "ok", AT, f"req-{n}", ("user:1",), (), None, 200)
            ),
        }
        timings: dict[str, dict[str, list[float]]] = {name: {call: [] for call in calls} for name in stores}
        for call, run in calls.items():
            for n in range(-50, args.calls):  # 50 warm-up calls each
                for name, store in stores.items():
                    started = time.perf_counter()
                    run(store, n)
                    if n >= 0:
                        timings[name][call].append(time.perf_counter() - started)
    finally:
        for store in stores.values():
            store.close()
        if arcade is not None:
            arcade.stop()

    results = {name: {call: _ms(samples) for call, samples in by_call.items()} for name, by_call in timings.items()}
    report = {
        "calls": args.calls,
        "tokens": TOKENS,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print("| store | `principal_for` p50 / p95 ms | `is_blocked` p50 / p95 ms | `append_audit` p50 / p95 ms |")
    print("|---|---|---|---|")
    for name, by_call in results.items():
        cells = [f"{by_call[c]['p50_ms']} / {by_call[c]['p95_ms']}" for c in calls]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(report["machine"])


if __name__ == "__main__":
    main()
