"""Precision and recall of the write guard's detectors (engine/guard.py) per class.

Reads the labelled texts in tests/data/guard.jsonl (label ``pii`` with its kinds,
``injection`` or ``benign``) and prints, per class (each personal-data kind and
injection), precision and recall, and the false-positive rate on benign texts
(any finding at all on a text labelled benign), for each split: ``dev`` texts
were written while the rules were developed, ``holdout`` texts were written
after and never tuned against, so they are the fairer estimate. ``--errors``
lists every text the detectors get wrong.

Then the inferred-instruction rule (``steers_agent``), on tests/data/steering.jsonl:
texts an assistant might write, labelled ``steer`` (an instruction to a future agent:
how to answer, what to tell the user, what to send, a sensitive action, a claimed
permission, encoded text) or ``advice`` (advice to the user, which must pass).

    .venv/bin/python benchmarks/guard.py [--errors] [--data FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scores import Scores
from engine.guard import INJECTION, PII_KINDS, find_injection, find_pii, steers_agent

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "guard.jsonl"
STEERING = DATA.with_name("steering.jsonl")
CLASSES = (*PII_KINDS, INJECTION)


@dataclass(frozen=True)
class Sample:
    split: str
    lang: str
    label: str
    text: str
    truth: frozenset[str]


def load(path: Path = DATA) -> list[Sample]:
    samples = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        label = row["label"]
        # An injection may carry personal data too (its kinds say which).
        truth = frozenset(row["kinds"]) | ({INJECTION} if label == INJECTION else set())
        samples.append(Sample(row["split"], row["lang"], label, row["text"], truth))
    return samples


def predict(text: str) -> frozenset[str]:
    """The classes the detectors find in a text."""
    kinds = {finding.kind for finding in find_pii(text)}
    if find_injection(text):
        kinds.add(INJECTION)
    return frozenset(kinds)


def scores(samples: list[Sample], predictions: list[frozenset[str]]) -> dict[str, Scores]:
    return {
        kind: Scores(
            support=sum(kind in s.truth for s in samples),
            predicted=sum(kind in p for p in predictions),
            correct=sum(kind in s.truth and kind in p for s, p in zip(samples, predictions, strict=True)),
            vacuous=1.0,
        )
        for kind in CLASSES
    }


def benign_fpr(samples: list[Sample], predictions: list[frozenset[str]]) -> tuple[int, int]:
    """(benign texts with any finding, benign texts)."""
    pairs = [(s, p) for s, p in zip(samples, predictions, strict=True) if s.label == "benign"]
    return sum(bool(p) for _, p in pairs), len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--errors", action="store_true", help="list every misclassified text")
    args = parser.parse_args()
    everything = load(args.data)
    for split in ("dev", "holdout", "all"):
        samples = [s for s in everything if split in ("all", s.split)]
        predictions = [predict(s.text) for s in samples]
        counts = {label: sum(s.label == label for s in samples) for label in ("pii", "injection", "benign")}
        langs = {lang: sum(s.lang == lang for s in samples) for lang in sorted({s.lang for s in samples})}
        print(f"\n[{split}] {len(samples)} texts: {counts} by language {langs}")
        print(f"{'class':<10} {'support':>7} {'precision':>9} {'recall':>7}")
        for kind, score in scores(samples, predictions).items():
            print(f"{kind:<10} {score.support:>7} {score.precision:>9.3f} {score.recall:>7.3f}")
        flagged, benign = benign_fpr(samples, predictions)
        print(f"benign false-positive rate: {flagged}/{benign} = {flagged / benign:.3%}")
        if args.errors and split != "all":
            for sample, predicted in zip(samples, predictions, strict=True):
                if predicted != sample.truth:
                    print(f"  truth={sorted(sample.truth)} predicted={sorted(predicted)}: {sample.text!r}")
    steering(args.errors)


def steering(errors: bool) -> None:
    rows = [json.loads(line) for line in STEERING.read_text(encoding="utf-8").splitlines() if line.strip()]
    predicted = [steers_agent(row["text"]) is not None for row in rows]
    for lang in ("en", "zh", "all"):
        chosen = [(row, got) for row, got in zip(rows, predicted, strict=True) if lang in ("all", row["lang"])]
        score = Scores(
            support=sum(row["label"] == "steer" for row, _ in chosen),
            predicted=sum(got for _, got in chosen),
            correct=sum(got and row["label"] == "steer" for row, got in chosen),
        )
        advice = sum(row["label"] == "advice" for row, _ in chosen)
        passed = sum(not got and row["label"] == "advice" for row, got in chosen)
        print(
            f"\n[steering {lang}] {len(chosen)} texts: steer precision {score.precision:.3f} recall {score.recall:.3f}"
            f" ({score.support} steer); advice passed {passed}/{advice}"
        )
    if errors:
        for row, got in zip(rows, predicted, strict=True):
            if got != (row["label"] == "steer"):
                print(f"  label={row['label']} predicted={'steer' if got else 'advice'}: {row['text']!r}")


if __name__ == "__main__":
    main()
