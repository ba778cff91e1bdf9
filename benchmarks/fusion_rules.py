"""Score fusion against rank-based fusion (and reshaped scores), on the same candidates of the same recalls.

The engine fuses its channels by score: the semantic signal is the cosine scaled over
the recall's own candidates, the lexical one the BM25 score relative to the best, and
the weighted sum ranks (``engine/recall.py``). Rank-based fusion (reciprocal rank
fusion) reads each channel by rank instead, which is robust by construction to how a
model spreads its cosines. This asks whether it ranks better here.

Each development case (``quality.py``'s stored data sets: LongMemEval dev60, MADial-Bench
English and Chinese, and with ``--datasets`` the two sets of MADial-Bench among chat-log
lines) is recalled once by the real service with the default weights, and
every candidate's signals are recorded as the ranker saw them (a wrapper on the
recaller's scoring, which returns what it computed). Each rule then ranks those
candidates again, offline:

* ``semantic alone`` and ``lexical alone``: each channel's own ranking of the same
  candidates, for reference (never chosen);
* ``score``: the engine's weighted sum, recomputed; that it ranks every case's top k
  exactly as the live recall did is checked and printed (the recording is faithful);
* ``rank k0=K a=A b=B``: the semantic signal replaced by ``A·rrf + (1-A)·semantic``
  and the lexical one by ``B·rrf + (1-B)·lexical``, where ``rrf = (K+1)/(K+rank)`` is
  1 for a channel's best candidate (0 for one the lexical channel did not find); the
  other signals and every weight as the engine has them. ``A = B = 1`` is plain
  weighted RRF over the two channels;
* ``power a=A b=B``: the semantic signal raised to the power A and the lexical one to
  B (how sharply each channel's best stand out), the rest as the engine has it (the
  engine's own powers are ``[fusion] semantic_power`` and ``lexical_power``; ``a=1 b=1``
  is the signals as read);
* ``spread z=Z a=A b=B``: each channel's signal blended (shares A and B) with how far
  the candidate stands above the mean of the channel's candidates, in standard
  deviations, read as 1 at Z of them (``standing``).

A rule of each family is chosen on the tune parts alone (the best mean of the three data sets'
headline metric: LongMemEval recall@10, MADial-Bench recall@5) and reported on the
held-out parts beside the engine's. Run ``quality.py`` first (it stores the data sets)::

    .venv/bin/python benchmarks/fusion_rules.py --out benchmarks/results/fusion-rules.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import quality  # noqa: E402

from engine import scoring  # noqa: E402
from engine.config import DEFAULT_EMBEDDING_PROVIDER, FusionWeights, load_config  # noqa: E402

Signals = dict[str, Any]  # one recall's candidates: ids and one array per signal
Rule = Callable[[Signals], np.ndarray]

K0 = (1, 3, 10, 30, 60)
# The channels alone, ranking the same candidates (shown, never chosen).
SINGLE = ("semantic alone", "lexical alone")
SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
SEMANTIC_POWERS = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
LEXICAL_POWERS = (0.5, 0.75, 1.0, 1.5, 2.0)
FAMILIES = ("rank", "power", "spread")
# How many standard deviations above the candidates' mean a signal must stand to read 1
# in the ``spread`` family.
SPREADS = (1.5, 2.0, 3.0, 4.0)


def recorded(service: quality.MemoryService, sink: list[Signals]) -> None:
    """Record, for every final ranking the service's recaller scores, each candidate's
    signals (the context signal included: the ranking's, not the context seeds')."""
    recaller = service.recaller
    score = recaller._scores

    def scores(net: Any, query: Any, pool: Any, rows: np.ndarray, *, context: bool) -> np.ndarray:
        fused: np.ndarray = score(net, query, pool, rows, context=context)
        if context:
            listed = rows.tolist()
            cosine = recaller._read_cosines(net, query, pool, rows)  # less the centring, as the signal reads them
            times = query.windows
            sink.append(
                {
                    "ids": [net.id_of(row) for row in listed],
                    "cosine": cosine,
                    "semantic": pool.scale.values(cosine) if query.read_by_model else np.zeros(len(listed)),
                    "lexical": np.asarray([pool.lexical.get(row, 0.0) for row in listed], np.float64),
                    "graph": np.asarray([pool.graph.get(row, 0.0) for row in listed], np.float64),
                    "context": np.asarray([pool.context.get(row, 0.0) for row in listed], np.float64),
                    "decay": net.decayed(rows, query.now, service.config.scoring),
                    "time": scoring.time_fit(net.created_of(rows), times) if times else np.zeros(len(listed)),
                    "fused": fused,
                }
            )
        return fused

    recaller._scores = scores  # type: ignore[method-assign]


def weighted(weights: FusionWeights, semantic: np.ndarray, lexical: np.ndarray, c: Signals) -> np.ndarray:
    """The engine's sum, in its order, with these semantic and lexical signals (as weighed:
    any power already applied)."""
    score: np.ndarray = (
        weights.semantic * semantic
        + weights.lexical * lexical
        + weights.graph * c["graph"]
        + weights.decay * c["decay"]
    )
    return score + weights.context * c["context"] + weights.time * c["time"]


def reciprocal(values: np.ndarray, k0: float, found: np.ndarray) -> np.ndarray:
    """``(k0 + 1) / (k0 + rank)`` by descending value (1 for the best), 0 where not ``found``."""
    order = np.argsort(-values, kind="stable")
    rank = np.empty(len(values))
    rank[order] = np.arange(1, len(values) + 1)
    out: np.ndarray = np.where(found, (k0 + 1) / (k0 + rank), 0.0)
    return out


def rules(weights: FusionWeights) -> dict[str, Rule]:
    def score(c: Signals) -> np.ndarray:
        semantic = scoring.shaped(c["semantic"], weights.semantic_power)
        return weighted(weights, semantic, scoring.shaped(c["lexical"], weights.lexical_power), c)

    def by_rank(k0: float, a: float, b: float) -> Rule:
        def rule(c: Signals) -> np.ndarray:
            read = c["semantic"].any()  # a query the model cannot read has no semantic signal
            semantic = a * reciprocal(c["cosine"], k0, np.full(len(c["ids"]), read)) + (1 - a) * c["semantic"]
            lexical = b * reciprocal(c["lexical"], k0, c["lexical"] > 0) + (1 - b) * c["lexical"]
            return weighted(weights, semantic, lexical, c)

        return rule

    def by_power(a: float, b: float) -> Rule:
        def rule(c: Signals) -> np.ndarray:
            return weighted(weights, c["semantic"] ** a, c["lexical"] ** b, c)

        return rule

    def by_spread(z: float, a: float, b: float) -> Rule:
        def rule(c: Signals) -> np.ndarray:
            read = c["semantic"].any()
            semantic = a * standing(c["cosine"], z, np.full(len(c["ids"]), read)) + (1 - a) * c["semantic"]
            lexical = b * standing(c["lexical"], z, c["lexical"] > 0) + (1 - b) * c["lexical"]
            return weighted(weights, semantic, lexical, c)

        return rule

    found: dict[str, Rule] = {
        "score": score,
        SINGLE[0]: lambda c: c["cosine"] if c["semantic"].any() else np.zeros(len(c["ids"])),
        SINGLE[1]: lambda c: c["lexical"],
    }
    for k0, a, b in itertools.product(K0, SHARES, SHARES):
        if a or b:
            found[f"rank k0={k0} a={a:g} b={b:g}"] = by_rank(k0, a, b)
    for a, b in itertools.product(SEMANTIC_POWERS, LEXICAL_POWERS):
        found[f"power a={a:g} b={b:g}"] = by_power(a, b)  # "a=1 b=1": the signals as read
    for z, a, b in itertools.product(SPREADS, SHARES, SHARES):
        if a or b:
            found[f"spread z={z:g} a={a:g} b={b:g}"] = by_spread(z, a, b)
    return found


def standing(values: np.ndarray, z: float, found: np.ndarray) -> np.ndarray:
    """How far each value stands above the mean of the ``found`` ones, in standard
    deviations, read as 0 at the mean and 1 at ``z`` of them or more; 0 where not found.
    A channel whose best stand out from the rest (a rare word matched, a close paraphrase)
    then speaks louder than one whose candidates are all about alike (near-template
    chatter that every query resembles a little)."""
    if found.sum() < 2:
        return np.where(found, 1.0, 0.0)
    seen = values[found]
    spread = float(seen.std()) or 1.0
    out: np.ndarray = np.where(found, np.clip((values - float(seen.mean())) / (z * spread), 0.0, 1.0), 0.0)
    return out


def top(c: Signals, score: np.ndarray, k: int) -> list[str]:
    """The ``k`` best ids, ties by memory id (as the engine breaks them)."""
    order = np.lexsort((np.asarray(c["ids"]), -score))
    return [c["ids"][n] for n in order[:k]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument(
        "--datasets",
        default="longmemeval,madial,madial-zh",
        help="comma-separated, of quality.py's: longmemeval, madial, madial-zh, madial-chat, madial-chat-zh",
    )
    args = parser.parse_args()

    provider = DEFAULT_EMBEDDING_PROVIDER
    defaults = load_config(None, {}).fusion
    weights = tuple(getattr(defaults, name) for name in quality.SETTINGS)
    embedder = quality.load_embedder(quality._config(quality.WORK / "unused", provider, (1, 0, 0, 0, 0, 0)))
    clock = quality.Clock()
    turns = load_config(None, {}).sessions.context_query_messages
    sets = [
        ("longmemeval10", lambda s, c: quality.ingest_longmemeval(s, c, 10), 10),
        (f"madial{turns}", lambda s, c: quality.ingest_madial(s, c, turns), 5),
        (f"madial-zh{turns}", lambda s, c: quality.ingest_madial_zh(s, c, turns), 5),
        (f"madial-chat{turns}", lambda s, c: quality.ingest_madial_chat(s, c, "en", turns), 5),
        (f"madial-chat-zh{turns}", lambda s, c: quality.ingest_madial_chat(s, c, "zh", turns), 5),
    ]
    chosen = set(args.datasets.split(","))
    sets = [entry for entry in sets if entry[0].rstrip("0123456789") in chosen]
    candidates = rules(defaults)
    results: dict[str, dict[str, dict[str, float]]] = {}
    coverage: dict[str, dict[str, int]] = {}  # labelled memories among the candidates
    for name, ingest, k in sets:
        service, dataset = quality.open_prepared(name, provider, embedder, weights, clock, ingest)
        shares: dict[str, dict[str, list[float]]] = {rule: {"tune": [], "held-out": []} for rule in candidates}
        faithful = pooled = labelled = candidates_seen = 0
        sink: list[Signals] = []
        recorded(service, sink)
        try:
            for case in dataset.cases:
                clock.now = case.at
                sink.clear()
                live = service.recall(
                    case.query, namespaces=[case.namespace], top_k=k, reinforce=False, focus=case.focus
                )
                signals = sink[0]  # a "how" query ranks again, narrowed: its first ranking is the whole one
                for rule, ranked in candidates.items():
                    found = set(top(signals, ranked(signals), k))
                    shares[rule][case.part].append(len(case.relevant & found) / len(case.relevant))
                pooled += len(case.relevant & set(signals["ids"]))
                labelled += len(case.relevant)
                candidates_seen += len(signals["ids"])
                faithful += top(signals, candidates["score"](signals), k) == [h.memory.memory_id for h in live.hits]
        finally:
            service.close()
        cases = len(dataset.cases)
        coverage[dataset.name] = {"labelled": labelled, "candidates": pooled, "faithful": faithful, "cases": cases}
        print(
            f"{dataset.name}: the recomputed score ranks {faithful} of {cases} cases as live; "
            f"{pooled} of {labelled} labelled memories are among the candidates "
            f"({candidates_seen / cases:.0f} a recall)",
            file=sys.stderr,
        )
        results[dataset.name] = {
            rule: {part: round(statistics.fmean(values), 4) for part, values in parts.items()}
            for rule, parts in shares.items()
        }

    def tune(rule: str) -> float:
        return statistics.fmean(results[d][rule]["tune"] for d in results)

    # The best of each family on the tune parts (on a tie the first listed).
    best = {family: max((r for r in candidates if r.startswith(family + " ")), key=tune) for family in FAMILIES}
    shown = [*SINGLE, "score", *best.values(), "rank k0=60 a=1 b=1", "rank k0=10 a=1 b=1"]
    print("| rule | tune mean | " + " | ".join(f"{d} tune / held-out" for d in results) + " |")
    print("|---|---:|" + "---|" * len(results))
    for rule in dict.fromkeys(shown):
        cells = " | ".join(f"{results[d][rule]['tune']:.3f} / {results[d][rule]['held-out']:.3f}" for d in results)
        print(f"| {rule} | {tune(rule):.4f} | {cells} |")
    for family, rule in best.items():
        verdict = "above" if tune(rule) > tune("score") else "not above"
        print(f"\nbest {family} rule on the tune parts: {rule} ({verdict} the engine's score there)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"embedder": embedder.name, "chosen": best, "coverage": coverage, "results": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
