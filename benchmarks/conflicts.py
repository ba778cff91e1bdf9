"""Precision and recall of the conflict detector (engine/conflicts.py) per class.

Reads the labelled pairs in tests/data/conflicts.jsonl (older memory, newer
memory, label: replace / contradict / duplicate / unrelated) and prints
precision and recall per class, per language, for each split: ``dev`` pairs were
written while the rules were developed, ``holdout`` pairs were written after the
rules were frozen and never tuned against, so they are the fairer estimate.
``--errors`` lists every pair the detector gets wrong.

    .venv/bin/python benchmarks/conflicts.py [--errors] [--data FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scores import Scores
from engine.conflicts import Statement, Verdict, judge

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "conflicts.jsonl"


@dataclass(frozen=True)
class Pair:
    lang: str
    split: str
    old: Statement
    new: Statement
    label: Verdict


def load(path: Path = DATA) -> list[Pair]:
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            pairs.append(
                Pair(
                    row["lang"],
                    row.get("split", "dev"),
                    Statement(row["old"], row.get("old_key")),
                    Statement(row["new"], row.get("new_key")),
                    Verdict(row["label"]),
                )
            )
    return pairs


def predict(pairs: Iterable[Pair]) -> list[tuple[Pair, Verdict]]:
    return [(pair, judge(pair.new, pair.old).verdict) for pair in pairs]


def scores(results: list[tuple[Pair, Verdict]], verdict: Verdict) -> Scores:
    return Scores(
        support=sum(pair.label is verdict for pair, _ in results),
        predicted=sum(got is verdict for _, got in results),
        correct=sum(pair.label is verdict and got is verdict for pair, got in results),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--errors", action="store_true", help="list the pairs the detector gets wrong")
    args = parser.parse_args()
    pairs = load(args.data)
    results = predict(pairs)
    for split in ("dev", "holdout", "all"):
        chosen = [(p, v) for p, v in results if split == "all" or p.split == split]
        if not chosen:
            continue
        english = sum(p.lang == "en" for p, _ in chosen)
        print(f"\n== {split}: {len(chosen)} pairs ({english} English, {len(chosen) - english} Chinese)")
        print(f"{'class':<11} {'lang':<4} {'support':>7} {'precision':>9} {'recall':>6}")
        for verdict in Verdict:
            for lang in ("all", "en", "zh"):
                subset = [(p, v) for p, v in chosen if lang == "all" or p.lang == lang]
                s = scores(subset, verdict)
                print(f"{verdict.value:<11} {lang:<4} {s.support:>7} {s.precision:>9.2f} {s.recall:>6.2f}")
        accuracy = sum(pair.label is got for pair, got in chosen) / len(chosen)
        print(f"accuracy {accuracy:.2f}")
    if args.errors:
        for pair, got in results:
            if pair.label is not got:
                where = f"[{pair.split} {pair.lang}] want {pair.label.value:<10} got {got.value:<10}"
                print(f"{where} {pair.old.text!r} -> {pair.new.text!r}")


if __name__ == "__main__":
    main()
