"""An export with versions, read a page at a time against memory by memory.

``make DIR PAIRS``: a namespace of PAIRS homes each superseded by a move, a fifth of the
moves edited, a seventh deleted, links of every kind, made through the service on SQLite
(the hashing embedder of the tests, a frozen clock), and its export in ``DIR/export.jsonl``.
``export DIR OUT``: the export with versions of a copy of that database, at one fixed time
(to compare the files two engines write). ``bolt FILE ROUNDS``: FILE imported into
ArcadeDB over Bolt (child process), exported ROUNDS times a page at a time and ROUNDS
times memory by memory (``edges`` and ``versions`` per id, as before ``edges_of`` and
``versions_of``), the arms alternating; each file must be the same.

    .venv/bin/python benchmarks/export_rounds.py make /tmp/export-data 1500
    .venv/bin/python benchmarks/export_rounds.py bolt /tmp/export-data/export.jsonl 10
"""

import io
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.adapters import DB_FILE  # noqa: E402
from engine.adapters.sqlite_store import SqliteStore  # noqa: E402
from engine.importers import run_import  # noqa: E402
from engine.portability import open_export  # noqa: E402
from engine.ports import Edge  # noqa: E402
from engine.records import MemoryDraft, MemoryPatch  # noqa: E402
from tests.conftest import EPOCH, FrozenClock, HashingEmbedder  # noqa: E402
from tests.integration.test_portability import service_on  # noqa: E402

NS = "bench"
NOW = EPOCH + timedelta(days=400)


def export(service: Any, **kw: Any) -> bytes:
    return b"".join(open_export(service, NS, versions=True, now=NOW, **kw).chunks())


def make(directory: Path, pairs: int) -> None:
    directory.mkdir(parents=True)
    clock = FrozenClock()
    s = service_on(SqliteStore(directory / DB_FILE), HashingEmbedder(), directory, clock)
    old = []
    for n in range(pairs):
        clock.advance(seconds=1)
        old.append(
            s.save(MemoryDraft(content=f"Person{n} lives in Berlin", namespace=NS, key=f"home{n}")).memory.memory_id
        )
    new = []
    for n in range(pairs):
        clock.advance(seconds=1)
        new.append(
            s.save(MemoryDraft(content=f"Person{n} moved to Lisbon", namespace=NS, key=f"home{n}")).memory.memory_id
        )
    for n in range(0, pairs, 5):
        clock.advance(seconds=1)
        s.update(NS, new[n], MemoryPatch(content=f"Person{n} moved to Lisbon in May"), reason="edited")
    for n in range(1, pairs, 7):
        clock.advance(seconds=1)
        s.delete(NS, new[n])
    edges = []
    for n in range(0, pairs - 1, 3):
        edges.append(Edge(NS, new[n], new[n + 1], "NEXT", clock.now))
        edges.append(Edge(NS, new[n], old[n + 1], "CONTRADICTS", clock.now))
        edges.append(Edge(NS, old[n], old[n + 1], "RELATED_TO", clock.now))
        edges.append(Edge(NS, new[n + 1], old[n], "MERGED_INTO", clock.now))
    s.store.add_edges(edges)
    s.flush()
    (directory / "export.jsonl").write_bytes(export(s))
    s.close()


def export_of(directory: Path, out: Path) -> None:
    work = Path(str(directory) + f"-copy-{time.time_ns()}")
    shutil.copytree(directory, work)
    s = service_on(SqliteStore(work / DB_FILE), HashingEmbedder(), work, FrozenClock(NOW))
    out.write_bytes(export(s))
    s.close()


def bolt(file: Path, rounds: int) -> None:
    from tests.bolt import start_arcadedb

    server = start_arcadedb()
    try:
        target = server.target()
        db = target.new_database()
        directory = Path(tempfile.mkdtemp(prefix="twinmem-export-rounds-"))
        s = service_on(target.store(db), HashingEmbedder(), directory, FrozenClock(NOW))
        report = run_import(s, io.BytesIO(file.read_bytes()), now=NOW)
        assert report.written, report.errors
        store: Any = s.store
        batched = (store.edges_of, store.versions_of)

        def per_memory() -> None:
            store.edges_of = lambda scope, ids: {i: store.edges(scope, i) for i in ids}
            store.versions_of = lambda scope, ids: {i: store.versions(scope, i) for i in ids}

        def by_page() -> None:
            store.edges_of, store.versions_of = batched

        times: dict[str, list[float]] = {"per memory": [], "by page": []}
        trips: dict[str, int] = {}
        reference = b""
        for r in range(rounds):
            for arm, setup in (
                (("per memory", per_memory), ("by page", by_page))
                if r % 2 == 0
                else (("by page", by_page), ("per memory", per_memory))
            ):
                setup()
                before = store.round_trips.totals()[0]
                start = time.perf_counter()
                data = export(s)
                times[arm].append(time.perf_counter() - start)
                trips[arm] = store.round_trips.totals()[0] - before
                if not reference:
                    reference = data
                assert data == reference, arm
        lines = reference.count(b"\n")
        print(f"lines {lines} rounds {rounds}")
        for arm, values in times.items():
            print(
                f"{arm}: statements {trips[arm]}, median {statistics.median(values):.2f} s,",
                f"all {[round(v, 2) for v in values]}",
            )
        s.close()
    finally:
        server.stop()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "make":
        make(Path(sys.argv[2]), int(sys.argv[3]))
    elif mode == "export":
        export_of(Path(sys.argv[2]), Path(sys.argv[3]))
    elif mode == "bolt":
        bolt(Path(sys.argv[2]), int(sys.argv[3]))
