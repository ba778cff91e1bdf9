"""Recall of questions and memories written in different grammatical persons.

A user asks "where do I live?"; an agent asks "where does the user live?". A user's own
words are in the first person; an agent's notes about its user in the third. Recall
reads each query in the other person too (``[recall] other_person``, engine/persons.py).
This measures it, both ways, on the development data:

* the engine (``quality.py``'s stored LongMemEval dev60 and MADial-Bench English, the
  default model), semantic-only and fused, with ``other_person`` off and on: the
  questions as written (first person), and LongMemEval's asked in the third person;
* ``--notes``: LongMemEval's haystacks with every user turn also rewritten in the third
  person, as an agent's notes would read, and with every other user turn so (both ways
  in one namespace), ranked by exact cosine alone (numpy, the default model): the
  questions as written and in the third person, each as written, and as the larger
  cosine of it and its other phrasing (``engine.persons.other_person``) over the written
  question's 100 nearest, as recall reads it (recall reads the other phrasing over the
  candidates the query found); beside it, a way tried and not kept (``axis_taken_out``). The
  turns' vectors are cached under benchmarks/.work/persons (the first run embeds some
  60,000 texts).

The third person is made here by its own rules (``third_person``), not the engine's:
"my" becomes "their", "I" "the user", the verbs agree. The engine's rewriting back
(engine/persons.py) is another set of rules, so neither side is the other's inverse.

    .venv/bin/python benchmarks/quality.py --datasets longmemeval,madial   # stores the data, if not yet
    .venv/bin/python benchmarks/persons.py --out benchmarks/results/persons.json
    .venv/bin/python benchmarks/persons.py --notes --out benchmarks/results/persons-notes.json
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import quality  # noqa: E402

from engine.adapters import load_embedder  # noqa: E402
from engine.config import load_config  # noqa: E402
from engine.persons import other_person  # noqa: E402

# First person to third, for the data: an agent's phrasing of a user's words.
_THIRD = [
    (r"\bdo I\b", "does the user"),
    (r"\bhave I\b", "has the user"),
    (r"\bam I\b", "is the user"),
    (r"\bwas I\b", "was the user"),
    (r"\bI've\b", "the user has"),
    (r"\bI'm\b", "the user is"),
    (r"\bI am\b", "the user is"),
    (r"\bI was\b", "the user was"),
    (r"\bI have\b", "the user has"),
    (r"\bI do\b", "the user does"),
    (r"\bI\b", "the user"),
    (r"\bmy\b", "their"),
    (r"\bMy\b", "Their"),
    (r"\bme\b", "them"),
    (r"\bmine\b", "theirs"),
    (r"\bmyself\b", "themselves"),
]
NOTES_WORK = quality.WORK / "persons"


def third_person(text: str) -> str:
    for pattern, replacement in _THIRD:
        text = re.sub(pattern, replacement, text)
    return text[:1].upper() + text[1:]


def _engine(args: argparse.Namespace) -> dict[str, Any]:
    default = load_config(None, {}).fusion
    variants = {
        "semantic only": (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        "fused": tuple(getattr(default, name) for name in quality.SETTINGS),
    }
    embedder = load_embedder(quality._config(quality.WORK / "unused", "use", (1, 0, 0, 0, 0, 0)))
    clock = quality.Clock()
    results: dict[str, Any] = {}
    for name, ks in (("longmemeval10", (5, 10, 20)), ("madial5", (5,))):
        for variant, weights in variants.items():
            for on in (False, True):
                service, dataset = quality.open_prepared(name, "use", embedder, weights, clock, _not_stored)
                recall = dataclasses.replace(service.config.recall, other_person=on)
                service.config = dataclasses.replace(service.config, recall=recall)
                try:
                    found = {"as written": quality.evaluate(service, clock, dataset, ks)}
                    if name.startswith("longmemeval"):
                        asked = [dataclasses.replace(case, query=third_person(case.query)) for case in dataset.cases]
                        found["third person"] = quality.evaluate(
                            service, clock, quality.Dataset(dataset.name, asked), ks
                        )
                finally:
                    service.close()
                label = f"{name} / {variant} / {'both persons' if on else 'as written only'}"
                results[label] = found
                headline = "recall@10" if name.startswith("longmemeval") else "recall@5"
                shown = {
                    form: {k: v for k, v in got.items() if k.endswith(headline) and ":" not in k}
                    for form, got in found.items()
                }
                print(label, json.dumps(shown), flush=True)
    return results


def _not_stored(*_: Any) -> quality.Dataset:
    raise SystemExit("run benchmarks/quality.py --datasets longmemeval,madial first: it stores the data sets")


def _notes(args: argparse.Namespace) -> dict[str, Any]:
    embedder = load_embedder(load_config(env={}, data_dir=str(quality.WORK / "unused")))
    questions = json.loads(gzip.open(quality.LME).read())
    NOTES_WORK.mkdir(parents=True, exist_ok=True)
    shares: dict[str, list[float]] = {}
    for n, question in enumerate(questions):
        turns = [turn for session in question["haystack_sessions"] for turn in session]
        evidence = {i for i, turn in enumerate(turns) if turn.get("has_answer")}
        if not evidence:
            continue
        kept = NOTES_WORK / f"{n}.npz"
        if not kept.exists():
            said = embedder.embed_documents([turn["content"] for turn in turns])
            notes = [third_person(t["content"]) if t["role"] == "user" else t["content"] for t in turns]
            np.savez(kept, said=said, notes=embedder.embed_documents(notes))
        stored = np.load(kept)
        # Both ways in one namespace: every other user turn as a note.
        users = [i for i, turn in enumerate(turns) if turn["role"] == "user"]
        mixed = stored["said"].copy()
        mixed[users[1::2]] = stored["notes"][users[1::2]]
        written = {"said": stored["said"], "notes": stored["notes"], "mixed": mixed}
        for form, query in (
            ("asked in the first person", question["question"]),
            ("asked in the third person", third_person(question["question"])),
        ):
            other = other_person(query)
            vector = embedder.embed_query(query)
            rephrased = embedder.embed_query(other.text) if other is not None else None
            for memories, matrix in written.items():
                cosines = matrix @ vector
                # A question with no other phrasing is read as written, as recall reads it.
                ways = {
                    "as written": cosines,
                    "both persons (the engine's)": cosines,
                    "the person axis taken out": cosines,
                }
                if rephrased is not None:
                    near = np.argsort(-cosines)[:100]  # recall reads the other phrasing over its candidates
                    others = matrix[near] @ rephrased
                    between = float(vector @ rephrased)
                    for way, read in (
                        ("both persons (the engine's)", np.maximum(cosines[near], others)),
                        ("the person axis taken out", axis_taken_out(cosines[near], others, between)),
                    ):
                        ranked = np.full_like(cosines, -np.inf)
                        ranked[near] = read
                        ways[way] = ranked
                for way, ranked in ways.items():
                    top = set(np.argsort(-ranked)[:10].tolist())
                    key = f"{_WRITTEN[memories]} / {form} / {way}"
                    shares.setdefault(key, []).append(len(evidence & top) / len(evidence))
        print(f"{n + 1}/{len(questions)}", end="\r", file=sys.stderr, flush=True)
    results = {
        key: {"recall@10": round(float(np.mean(found)), 4), "questions": len(found)} for key, found in shares.items()
    }
    for key, found in results.items():
        print(f"{key}: {found['recall@10']:.3f} ({found['questions']} questions)")
    return results


def axis_taken_out(written: np.ndarray, rephrased: np.ndarray, between: float) -> np.ndarray:
    """Tried, not kept: the larger of a memory's cosine to the query as written and its
    cosine with the person axis taken out of both (p = (q − o) / |q − o|, from the
    query q to its other phrasing o), read from the cosines alone: m·p = (m·q − m·o) /
    |q − o|, q·p = (1 − q·o) / |q − o|."""
    apart = math.sqrt(max(0.0, 2.0 - 2.0 * between))
    if apart < 1e-6:
        return written
    along = np.clip((written - rephrased) / apart, -1.0, 1.0)
    query_along = min(1.0, (1.0 - between) / apart)
    rest = np.sqrt(np.maximum((1.0 - along**2) * (1.0 - query_along**2), 1e-12))
    return np.maximum(written, (written - along * query_along) / rest)


_WRITTEN = {
    "said": "user turns as written",
    "notes": "user turns as third-person notes",
    "mixed": "every other user turn as a note",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--notes", action="store_true", help="the haystacks' user turns also as third-person notes, by cosine alone"
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    results = _notes(args) if args.notes else _engine(args)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"benchmark": "persons", "notes": args.notes, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
