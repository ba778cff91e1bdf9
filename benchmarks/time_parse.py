"""What reading the times in a text costs, and what it reads, against another revision.

The texts are those a recall is asked with on the development data: LongMemEval dev60's
questions, MADial-Bench's prompt-context queries in English and Chinese (the latest 1, 2,
3 and 5 user turns joined, as ``[sessions] context_query_messages`` makes them),
synthetic queries (``benchmarks/synthetic.py``), and LongMemEval's user turns (long,
many-sentence texts). Each text is read by this tree's
``engine/adapters/time_expressions.py`` and by the same file at ``--baseline-ref``
(loaded from ``git show`` as a module of its own, beside this tree's engine), in turn,
text by text, on the same data and machine load. Printed per set: the mean time a text
takes to read in each, and every text whose windows differ.

    .venv/bin/python benchmarks/time_parse.py --baseline-ref HEAD --out benchmarks/results/time-parse.json
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import quality  # noqa: E402
import synthetic  # noqa: E402

from engine.adapters.time_expressions import LibraryTimeExpressions  # noqa: E402

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)  # for the texts without a date of their own
MODULE = "engine/adapters/time_expressions.py"


def texts(turns_per_question: int) -> dict[str, list[tuple[str, datetime]]]:
    sets: dict[str, list[tuple[str, datetime]]] = {
        "LongMemEval questions": [(q.query, q.at) for q in quality.longmemeval_corpus(10).questions]
    }
    for turns in (1, 2, 3, 5):
        for lang in ("en", "zh"):
            corpus = quality.madial_corpus(lang, turns)
            sets[f"MADial-Bench {lang}, latest {turns} user turns"] = [(q.query, q.at) for q in corpus.questions]
    sets["synthetic queries"] = [(q, NOW) for q in synthetic.queries(2000, seed=42)]
    questions = json.loads(gzip.open(quality.LME).read())
    turns = [
        turn["content"]
        for question in questions[:10]
        for session in question["haystack_sessions"]
        for turn in session
        if turn["role"] == "user"
    ]
    sets["LongMemEval user turns"] = [(turn, NOW) for turn in turns[:turns_per_question]]
    return sets


def baseline(ref: str, folder: Path) -> Any:
    """``LibraryTimeExpressions`` of ``MODULE`` at ``ref``."""
    source = subprocess.run(["git", "show", f"{ref}:{MODULE}"], check=True, capture_output=True, text=True).stdout
    path = folder / "baseline_time_expressions.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("baseline_time_expressions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LibraryTimeExpressions()


def _windows(found: Any) -> list[tuple[str, str, str]]:
    return [(w.start.isoformat(), w.end.isoformat(), w.text) for w in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-ref", default="HEAD", help="git revision whose time reading is compared")
    parser.add_argument("--turns", type=int, default=1500, help="LongMemEval user turns read")
    parser.add_argument("--repeat", type=int, default=3, help="times each set is read (the means are over all)")
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        before = baseline(args.baseline_ref, Path(folder))
    after = LibraryTimeExpressions()
    before.load(chinese=True)
    after.load(chinese=True)
    report: dict[str, Any] = {"baseline_ref": args.baseline_ref, "sets": {}}
    for name, asked in texts(args.turns).items():
        spent = [0.0, 0.0]
        differ = []
        for turn in range(args.repeat):
            for text, at in asked:
                began = time.perf_counter()
                old = before.windows(text, at)
                middle = time.perf_counter()
                new = after.windows(text, at)
                spent[0] += middle - began
                spent[1] += time.perf_counter() - middle
                if turn == 0 and _windows(old) != _windows(new):
                    differ.append({"text": text[:300], "before": _windows(old), "after": _windows(new)})
        reads = len(asked) * args.repeat
        row = {
            "texts": len(asked),
            "differ": len(differ),
            "mean_ms_before": round(spent[0] * 1000 / reads, 3),
            "mean_ms_after": round(spent[1] * 1000 / reads, 3),
            "differences": differ,
        }
        report["sets"][name] = row
        means = f"mean ms {row['mean_ms_before']} -> {row['mean_ms_after']}"
        print(f"{name}: {len(asked)} texts, {len(differ)} read differently; {means}")
        for entry in differ:
            print(f"    {entry['text'][:120]!r}: {entry['before']} -> {entry['after']}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
