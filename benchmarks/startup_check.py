"""Recall at start-up, while the store's start-up check runs, and after it.

The SQLite store runs ``PRAGMA quick_check`` when it opens, on a thread of its own at the
lowest priority (README, "A damaged store is reported"): it reads every page of the file,
4 GB at a million memories. After a reboot, or once the OS has let the file's pages go,
the first recalls read their hits from the disk beside that check. This times the same
recalls three times in one process, on a store ``latency.py --keep`` or ``scale.py`` left:
at once after the start (how many of them began while the check ran is reported), then
after the check, then again. Before the start the store's file is dropped from the page
cache (``posix_fadvise(DONTNEED)``), or, with ``--cached``, read into it. The index files
are read into it either way (as ``scale.py`` does: they are read whole at start-up, and
the fast network's vectors in place). Query vectors are given and reinforcement is off, as
in ``recall_stages.py``. The "how" questions are left out: their second ranking, over
procedures, asks for the procedures' own index, which is built in the background only
after the first pass (30–40 s at 1M), so they would time the index, not the check::

    .venv/bin/python benchmarks/startup_check.py --scale benchmarks/.work/scale/one-1000000-seed42 --seed 42
    .venv/bin/python benchmarks/startup_check.py --scale benchmarks/.work/scale/one-1000000-seed42 --seed 42 --cached
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from latency import summarize  # noqa: E402
from recall_ways import open_kept  # noqa: E402
from scale import _read_through, await_rough_cosines, settle_service  # noqa: E402

from engine.procedures import asks_how  # noqa: E402

STORE_FILE = "twinmem.sqlite3"


def timed(service: Any, asked: list[tuple[str, Any]], namespace: str) -> tuple[list[float], int]:
    """Seconds of each recall of ``asked``, and how many began while the check ran."""
    seconds: list[float] = []
    during = 0
    for text, vector in asked:
        during += service.store.integrity() == "checking"
        began = time.perf_counter()
        service.recall(text, namespaces=[namespace], top_k=10, vector=vector, reinforce=False)
        seconds.append(time.perf_counter() - began)
    return seconds, during


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, help="a data directory latency.py --keep left (or scale.py built)")
    parser.add_argument("--scale", action="store_true", help="data_dir is one scale.py built (hashing vectors)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=43, help="seed of the synthetic queries")
    parser.add_argument("--cached", action="store_true", help="read the store's file into the page cache first")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    store = args.data_dir / STORE_FILE
    _read_through(args.data_dir / "index")
    if args.cached:
        with open(store, "rb", buffering=0) as fh:
            while fh.read(8 << 20):
                pass
    else:
        for path in (store, store.with_name(STORE_FILE + "-wal")):
            if path.exists():
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
    service, embedder, namespace = open_kept(args.data_dir, from_scale=args.scale)
    await_rough_cosines()
    texts = [text for text in synthetic.queries(2 * args.queries, seed=args.seed) if not asks_how(text)]
    texts = texts[: args.queries]
    asked = [(text, embedder.embed_query(text)) for text in texts]
    passes: dict[str, Any] = {}
    seconds, during = timed(service, asked, namespace)
    passes["at start"] = summarize(seconds) | {"begun_while_checking": during}
    passes["at start"]["waited_after_s"] = settle_service(service)
    for name in ("after the check", "again"):
        seconds, during = timed(service, asked, namespace)
        passes[name] = summarize(seconds) | {"begun_while_checking": during}
    service.close()
    for name, found in passes.items():
        print(
            f"{name}: p50 {found['p50_ms']:.2f} / p95 {found['p95_ms']:.2f} / mean {found['mean_ms']:.2f} ms,"
            f" {found['begun_while_checking']} of {found['n']} begun while the check ran"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"benchmark": "startup_check", "data_dir": str(args.data_dir), **passes}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
