"""A recall's engine time, done several ways in one process, query by query in turn.

Each way switches some of a recall's parts back to how they were, on the same service
and store, so before and after are timed under the same load and in the same caches
(two processes side by side slow each other: benchmarks/RESULTS.md). The parts:

* ``centring``: the semantic signal reads each cosine less ``[fusion] centring`` times
  the memory's typicality (``c0``: the cosine as it is, ``c<value>``: that centring);
* ``widen``: the float16 vectors widened to float32 through torch where it is loaded
  (``torch``, ``RoughCosines.widen``) or by numpy's ``astype`` (``numpy``);
* ``search``: the plain HNSW search answered as handles turned into rows by the fast
  network's table (``handles``, ``VectorIndex.search_handles``) or as ids looked up one
  by one (``ids``, as ``VectorIndex.search`` answers);
* ``lexical`` (optional, ``top`` where left out): the lexical channel asks for the best
  ``LEXICAL_LOOK`` × pool matches (``top``: ``FastNetwork.lexical(top=…)``, postings
  summed alone up to a tenth of the namespace) or for every match, picking the best
  from them (``all``: as before, postings summed alone up to a 64th of the namespace).

A way is named ``centring/widen/search[/lexical]``, e.g. ``c0/numpy/ids/all`` (every
part as it was) or ``c0.75/torch/handles/top`` (as it is now). The query vectors are given (the engine
alone), the order of the ways is reversed every other round, and the hits of ways that
differ only in ``widen`` or ``search`` are compared (they must be the same); between the
two lexical ways, the scores of the lexical channel's picks (the same scores; which of
those tied at the last place are picked may differ, and with them the hits). The store
is one ``latency.py --keep`` left (its synthetic memories and queries)::

    .venv/bin/python benchmarks/latency.py --sizes 100000 --bulk --no-http --baseline-budget-s 0 \\
        --seed-verbatim-queries 0 --hnsw-queries 10 --ef-sweep 128 --keep --workdir /tmp/lat
    .venv/bin/python benchmarks/recall_ways.py /tmp/lat/latency-100000-* --out benchmarks/results/recall-ways.json

or, with ``--scale``, one ``scale.py`` built (hashing vectors; its queries are of seed 42)::

    .venv/bin/python benchmarks/recall_ways.py --scale benchmarks/.work/scale/one-1000000-seed42 --seed 42
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import scale  # noqa: E402
import synthetic  # noqa: E402
from hashing import HashingEmbedder  # noqa: E402
from latency import NAMESPACE, summarize  # noqa: E402

from engine import recall  # noqa: E402
from engine.adapters import bm25_lexical, load_embedder, open_service  # noqa: E402
from engine.adapters.half_cosines import half_cosines  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.fast_network import FastNetwork, Rows  # noqa: E402
from engine.ports import Vector, VectorIndex  # noqa: E402

DEFAULT_WAYS = ("c0.75/torch/handles/all", "c0.75/torch/handles/top")


class Switches:
    """Puts a service's recall parts one way or the other (instance attributes over the
    methods, removed again to go back)."""

    def __init__(self, service: Any) -> None:
        self._service = service
        self._config = service.recaller._config
        self._net: FastNetwork = service.keeper.network
        self._index: VectorIndex = service.keeper.index
        self._search_handles = self._index.search_handles  # the index's own, before any switch
        self._sparse_share = bm25_lexical.SPARSE_SHARE
        self._best_passing = service.recaller._best_passing  # the recaller's own
        # The scores of the lexical channel's picks since this was last emptied: the same
        # for both lexical ways (which of the tied at the last place are picked may differ).
        self.lexical_scores: list[tuple[float, ...]] = []

    def set(self, way: str) -> None:
        centring, widen, search, lexical = [*way.split("/"), "top"][:4]
        fusion = replace(self._config.fusion, centring=float(centring.removeprefix("c")))
        self._service.recaller._config = replace(self._config, fusion=fusion)
        net, index = self._net, self._index
        for name in ("_widened", "rows_of_handles"):
            net.__dict__.pop(name, None)
        index.__dict__.pop("search_handles", None)
        if widen == "numpy":
            net._widened = lambda rows: net._vectors[rows].astype(np.float32)  # type: ignore[method-assign]
        elif widen != "torch":
            raise ValueError(f"widen is numpy or torch, not {widen!r}")
        if search == "ids":
            index.search_handles = self._ids_search  # type: ignore[method-assign]
            net.rows_of_handles = self._ids_rows  # type: ignore[method-assign,assignment]
        elif search != "handles":
            raise ValueError(f"search is ids or handles, not {search!r}")
        if lexical not in ("top", "all"):
            raise ValueError(f"lexical is top or all, not {lexical!r}")
        pick = self._best_of_all if lexical == "all" else self._best_passing
        bm25_lexical.SPARSE_SHARE = 64 if lexical == "all" else self._sparse_share

        def picked(net: FastNetwork, query: Any) -> tuple[Rows, Any]:
            rows, scores = pick(net, query)
            self.lexical_scores.append(tuple(sorted(scores.tolist())))
            return rows, scores

        self._service.recaller._best_passing = picked

    def forget_lexical(self) -> None:
        """Drop the last lexical answers the network and its scorers keep, so that no way
        is answered from what the way before it asked of the same query."""
        net = self._net
        net._last_lexical = None
        for lexicon in net._lexicons.values():
            if lexicon.scorer is not None:
                lexicon.scorer._last = None  # type: ignore[attr-defined]

    def _best_of_all(self, net: FastNetwork, query: Any) -> tuple[Rows, Any]:
        """The lexical channel's pick as it was: every match asked for, the best
        ``LEXICAL_LOOK`` × pool of them checked first, each pick a partition (which
        breaks ties by where its pivots fell)."""

        def best(rows: Rows, scores: Any, want: int) -> tuple[Rows, Any]:
            if len(rows) <= want:
                return rows, scores
            top = np.argpartition(-scores, want - 1)[:want]
            return rows[top], scores[top]

        rows, scores = net.lexical(query.sight.namespaces, query.terms)
        want = query.pool
        look = recall.LEXICAL_LOOK * want
        if len(rows) > look:
            top = np.argpartition(-scores, look - 1)[:look]
            keep = net.passes(query.sight, query.flt, query.now, rows[top])
            if int(keep.sum()) >= want:
                return best(rows[top[keep]], scores[top[keep]], want)
        keep = net.passes(query.sight, query.flt, query.now, rows)
        return best(rows[keep], scores[keep], want)

    def _ids_search(self, vector: Vector, k: int) -> tuple[Any, np.ndarray]:
        """The answer as ids and similarities, as ``search`` gives it (``_ids_rows`` reads the
        ids). Not through ``search`` itself, which answers through the switched method."""
        handles, sims = self._search_handles(vector, k)
        return self._index.ids_of(handles), sims

    def _ids_rows(self, index: VectorIndex, ids: Sequence[str]) -> Rows:
        """Each id's live row looked up one by one, as recall did (NONE where none)."""
        return self._net.live_rows(ids)


def open_kept(data_dir: Path, *, from_scale: bool) -> tuple[Any, Any, str]:
    """The service over a store ``latency.py --keep`` left, with the default embedder and
    its namespace, or (``from_scale``) over one ``scale.py`` built, opened as it opens
    it (its vectors are the hashing embedder's), with the namespace of its "one" layout."""
    if from_scale:
        embedder: Any = HashingEmbedder()
        return scale._open(data_dir, embedder), embedder, scale.namespace_of("one", 0)
    config = load_config(data_dir=str(data_dir))
    embedder = load_embedder(config)
    return open_service(config, embedder=embedder), embedder, NAMESPACE


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, help="a data directory latency.py --keep left (or scale.py built)")
    parser.add_argument(
        "--scale",
        action="store_true",
        help="data_dir is one scale.py built: hashing vectors, its namespace of the 'one' layout",
    )
    parser.add_argument("--ways", nargs="+", default=list(DEFAULT_WAYS), help="centring/widen/search each")
    parser.add_argument("--queries", type=int, default=300, help="queries per round (default 300)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--seed", type=int, default=43, help="seed of the synthetic queries")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    service, embedder, namespace = open_kept(args.data_dir, from_scale=args.scale)
    if not half_cosines.load():
        parser.error("torch is not installed: nothing to widen through")
    switches = Switches(service)
    for way in args.ways:
        switches.set(way)  # refuses a misspelt way before any timing

    def recall(way: str, query: str, vector: np.ndarray) -> tuple[str, ...]:
        switches.set(way)
        switches.forget_lexical()
        result = service.recall(query, namespaces=[namespace], top_k=10, vector=vector, reinforce=False)
        return tuple(hit.memory.memory_id for hit in result.hits)

    def same_ways(way: str) -> str:
        """Ways that must give the same hits: of one centring and one lexical way."""
        return "/".join([*way.split("/"), "top"][0:4:3])

    queries = synthetic.queries(args.warmup + args.queries, seed=args.seed)
    vectors = [embedder.embed_query(query) for query in queries]
    for query, vector in zip(queries[: args.warmup], vectors[: args.warmup], strict=True):
        for way in args.ways:
            recall(way, query, vector)
    service.flush()
    scale.settle_service(service)  # the store's start-up check, what the warm-up left building
    times: dict[str, list[float]] = {way: [] for way in args.ways}
    differ = 0  # queries whose hits differed between ways that must agree
    lexical_differ = 0  # queries whose lexical picks' scores differed between ways (they must not)
    for turn in range(args.rounds):
        for query, vector in zip(queries[args.warmup :], vectors[args.warmup :], strict=True):
            hits: dict[str, tuple[str, ...]] = {}
            scores: set[tuple[tuple[float, ...], ...]] = set()
            for way in args.ways if turn % 2 == 0 else list(reversed(args.ways)):
                switches.lexical_scores.clear()
                start = time.perf_counter()
                hits[way] = recall(way, query, vector)
                times[way].append(time.perf_counter() - start)
                scores.add(tuple(switches.lexical_scores))
            alike: dict[str, set[tuple[str, ...]]] = {}
            for way, found in hits.items():
                alike.setdefault(same_ways(way), set()).add(found)
            differ += any(len(answers) > 1 for answers in alike.values())
            lexical_differ += len(scores) > 1
    service.close()
    result: dict[str, Any] = {
        "benchmark": "recall_ways",
        "data_dir": str(args.data_dir),
        "queries": args.queries * args.rounds,
        "queries_whose_hits_differed_within_a_centring_and_lexical_way": differ,
        "queries_whose_lexical_picks_scored_differently": lexical_differ,
        "engine_ms": {way: summarize(seconds) for way, seconds in times.items()},
    }
    print("| way (centring/widen/search) | engine recall p50 / p95 / mean ms |\n|---|---|")
    for way, summary in result["engine_ms"].items():
        print(f"| {way} | {summary['p50_ms']:.2f} / {summary['p95_ms']:.2f} / {summary['mean_ms']:.2f} |")
    print(f"queries whose hits differed between ways of one centring and lexical way: {differ}")
    print(f"queries whose lexical picks scored differently between ways: {lexical_differ}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
