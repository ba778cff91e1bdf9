"""A namespace's BM25 build: bm25s's own ``BM25.index`` beside the engine's whole-corpus build.

For each size N: N synthetic memories (``synthetic.py``) turned into term codes as the
fast network turns them (``engine.text.terms``, one code per distinct term), then, in
alternating rounds on the same codes,

* **bm25s's index**: ``BM25.index`` over the documents as lists of dense ids, which is
  what the engine called before (the dense ids are the build's own, so both matrices
  are over the same columns);
* **the whole-corpus build**: ``Bm25Scorer.build`` over the flat arrays the fast
  network holds (``engine/adapters/bm25_lexical.py``).

Wall and CPU seconds (medians of ``--repeat`` rounds) and whether the two score
matrices are equal byte for byte. bm25s's index is skipped above ``--bm25s-max``
documents (a round of it at 1M takes over a minute). Never asserts a time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402

from engine import text  # noqa: E402
from engine.adapters.bm25_lexical import Bm25Scorer  # noqa: E402


def _documents(size: int, seed: int) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
    codes: dict[str, int] = {}
    documents = [
        [codes.setdefault(term, len(codes)) for term in text.terms(item.content)]
        for item in itertools.islice(synthetic.memories(seed), size)
    ]
    lengths = np.fromiter((len(doc) for doc in documents), np.int64, len(documents))
    flat = np.fromiter((code for doc in documents for code in doc), np.int64, int(lengths.sum()))
    return documents, lengths, flat


def _timed(run: Callable[[], Any]) -> tuple[float, float, Any]:
    before, began = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    result = run()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return time.perf_counter() - began, cpu, result


def measure(size: int, seed: int, repeat: int, bm25s_max: int) -> dict[str, Any]:
    documents, lengths, flat = _documents(size, seed)
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    equal: bool | None = None
    for _ in range(repeat):
        wall, cpu, scorer = _timed(lambda: Bm25Scorer.build(lengths, flat))
        ours.append((wall, cpu))
        if size > bm25s_max:
            continue
        vocab = dict(scorer._vocab)
        ids = [[vocab[str(code)] for code in doc] for doc in documents]
        reference = bm25s.BM25()
        corpus = bm25s.tokenization.Tokenized(ids=ids, vocab=vocab)
        wall, cpu, _ = _timed(lambda model=reference, corpus=corpus: model.index(corpus, show_progress=False))
        theirs.append((wall, cpu))
        equal = all(
            np.asarray(scorer._model.scores[name]).tobytes() == np.asarray(reference.scores[name]).tobytes()
            for name in ("data", "indices", "indptr")
        )
    row: dict[str, Any] = {"documents": size, "terms": int(lengths.sum()), "vocabulary": len(set(flat.tolist()))}
    row["whole_corpus"] = _medians(ours)
    if theirs:
        row["bm25s_index"] = _medians(theirs)
        row["equal_bytes"] = equal
    return row


def _medians(runs: list[tuple[float, float]]) -> dict[str, float]:
    walls, cpus = sorted(w for w, _ in runs), sorted(c for _, c in runs)
    return {"wall_s": round(walls[len(walls) // 2], 4), "cpu_s": round(cpus[len(cpus) // 2], 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--bm25s-max", type=int, default=200_000, help="largest size bm25s's own index is run at")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    rows = [measure(size, args.seed, args.repeat, args.bm25s_max) for size in args.sizes]
    print("| documents | terms | bm25s's index wall / CPU s | whole-corpus build wall / CPU s | faster | same bytes |")
    print("|---:|---:|---|---|---:|---|")
    for row in rows:
        ours, theirs = row["whole_corpus"], row.get("bm25s_index")
        old = f"{theirs['wall_s']} / {theirs['cpu_s']}" if theirs else "—"
        ratio = f"{theirs['wall_s'] / ours['wall_s']:.0f}×" if theirs else "—"
        same = {True: "yes", False: "NO", None: "—"}[row.get("equal_bytes")]
        new = f"{ours['wall_s']} / {ours['cpu_s']}"
        print(f"| {row['documents']:,} | {row['terms']:,} | {old} | {new} | {ratio} | {same} |")
    if args.out:
        report = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "args": vars(args),
            "rows": rows,
        }
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
