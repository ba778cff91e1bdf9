"""A query's BM25 sums, the two ways ``Bm25Scorer.matches`` makes them, caches cold.

For each corpus size N and share s: a corpus of N documents whose four query terms are
held by about s × N of its documents together (each term by a quarter of that, at
random, beside ten filler terms a document), built with ``Bm25Scorer.build``, then, in
alternating rounds, one query of the four terms summed

* **dense**: over an array of the whole corpus, term after term, then the matches found
  in it (``matches`` above a ``SPARSE_SHARE``-th of the corpus; timed without the last
  answer ``matches`` keeps);
* **alone**: in an array of the matches only, found by merging the terms' sorted
  columns (``Bm25Scorer._summed``, ``matches`` up to that share).

Before each timed call a 32 MB array is written, as the rest of a recall leaves the
CPU's caches (the dense array of a million documents is 4 MB, and a warm one fits
them). Medians in milliseconds, and whether the two ways gave the same documents and
scores bit for bit. Chooses ``SPARSE_SHARE``
(engine/adapters/bm25_lexical.py). Never asserts a time::

    .venv/bin/python benchmarks/lexical_sums.py --out benchmarks/results/lexical-sums.json
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.adapters import bm25_lexical  # noqa: E402
from engine.adapters.bm25_lexical import Bm25Scorer  # noqa: E402

QUERY = [0, 1, 2, 3]  # the query's term codes; filler terms are coded from 100 on
FILLER_TERMS = 10
FILLER_VOCABULARY = 5_000


def corpus(size: int, share: float, rng: np.random.Generator) -> Bm25Scorer:
    """``size`` documents: ten filler terms each, and each query term in a quarter of
    ``share`` of them, at random."""
    terms = np.empty((size, FILLER_TERMS + len(QUERY)), np.int64)
    terms[:, :FILLER_TERMS] = rng.integers(100, 100 + FILLER_VOCABULARY, (size, FILLER_TERMS))
    terms[:, FILLER_TERMS:] = QUERY
    present = np.ones(terms.shape, np.bool_)
    present[:, FILLER_TERMS:] = rng.random((size, len(QUERY))) < share / len(QUERY)
    return Bm25Scorer.build(present.sum(axis=1).astype(np.int64), terms[present])


def timed(call: Callable[[], object], rounds: int, evict: np.ndarray) -> float:
    """Median milliseconds of ``call``, the caches cleared before each."""
    times = []
    for _ in range(rounds):
        evict += 1.0
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return round(float(np.median(times)) * 1000.0, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--shares", type=float, nargs="+", default=[0.01, 0.05, 0.1, 0.125, 0.25, 0.5, 1.0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    evict = np.ones(8 * 2**20, np.float32)  # 32 MB
    rows: list[dict[str, Any]] = []
    print("| documents | share holding a query term | postings | dense ms | alone ms | same |")
    print("|---:|---:|---:|---:|---:|---|")
    for size in args.sizes:
        for share in args.shares:
            scorer = corpus(size, share, rng)
            spans = scorer._spans(QUERY)
            postings = sum(end - start for start, end in spans)
            bm25_lexical.SPARSE_SHARE = 10**12  # every query dense
            (dense_docs, dense_scores), (alone_docs, alone_scores) = scorer._matches(spans), scorer._summed(spans)
            same = dense_docs.tobytes() == alone_docs.tobytes() and dense_scores.tobytes() == alone_scores.tobytes()
            ways: dict[str, Callable[[], object]] = {
                "dense": functools.partial(scorer._matches, spans),  # ``matches`` keeps its last answer
                "alone": functools.partial(scorer._summed, spans),
            }
            ms = {way: 0.0 for way in ways}
            for order in (("dense", "alone"), ("alone", "dense")):  # each way timed twice, in turn
                for way in order:
                    ms[way] += timed(ways[way], args.rounds, evict) / 2
            dense_ms, alone_ms = ms["dense"], ms["alone"]
            rows.append(
                {"documents": size, "share": share, "postings": postings, "dense_ms": round(dense_ms, 3)}
                | {"alone_ms": round(alone_ms, 3), "same_bit_for_bit": same}
            )
            print(f"| {size:,} | {share} | {postings:,} | {dense_ms:.2f} | {alone_ms:.2f} | {same} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        result = {
            "benchmark": "lexical_sums",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {platform.python_version()}",
            "rounds": args.rounds,
            "rows": rows,
        }
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
