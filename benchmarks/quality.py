"""Retrieval quality on the development data: semantic-only, lexical-only and fused ranking.

Runs the real engine (open_service, real SQLite file, real HNSW index, real
embedder) over:

* LongMemEval dev60 (../shared/data/longmemeval_dev): each question's ~500-turn
  haystack goes into its own namespace, one memory per turn, created at its
  session's date; recall happens at the question's date. Turn recall@k is the
  share of the question's evidence turns (``has_answer``) among the top k.
* MADial-Bench English and Chinese (../shared/data/madial_bench/en, zh): each
  language's memories in one namespace, created at their date; the query is what the
  service's prompt context would recall with before the test turn: the dialogue's
  latest user turns, as many as ``[sessions] context_query_messages`` (5; runs before
  it took the latest two: ``--madial-turns 2``), with the latest of them as the
  recall's focus, as the prompt context gives it (``[fusion] focus``; ``--sweep
  focus=0,...`` to try without). Recall@5 is the share of the
  labelled relevant memories among the top 5. Its dialogues are split in two parts
  too (alternating), for the same purpose.
* MADial-Bench in a chat log (``--datasets madial-chat,madial-chat-zh``): the same
  memories and questions, each namespace also holding the lines of the other part's
  dialogues, one memory a line, as a new user who saves every message has them
  (``madial_chat_corpus``). Only the curated memories are labelled, so a line about the
  same event counts as a miss: read its numbers against the single channels beside them.

LongMemEval turns are saved with their session ids, so each session's turns are
linked NEXT in order (the context channel's chains). The questions are split in two
parts, alternating within each question type: weights are chosen on ``tune`` and
reported on ``held-out`` apart (``--grid``); results are also given per question
type, and ``timed queries`` counts the queries that named a time the parser read.

Memories are ingested once per embedder and kept under benchmarks/.work, so
re-running with other fusion weights only re-ranks. Reinforcement is off, so
variants do not influence each other.

    python benchmarks/quality.py                       # the default model (USE), all variants
    python benchmarks/quality.py --embedder sentence-transformers   # MiniLM
    python benchmarks/quality.py --weights 0.5,0.35,0.05,0.1,0.1,0.05   # try other fused weights
    python benchmarks/quality.py --grid context=0,0.05,0.1,0.2   # choose a weight on the tune part
    python benchmarks/quality.py --sweep "semantic=0.4,0.5,0.6,0.7,0.8 lexical=0.1,0.2,0.3,0.4 decay=0.05,0.1,0.2,0.3"
"""

from __future__ import annotations

import argparse
import functools
import gzip
import itertools
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.config import DEFAULT_EMBEDDING_PROVIDER, EMBEDDING_PROVIDERS, Config, load_config  # noqa: E402
from engine.ports import Embedder  # noqa: E402
from engine.records import MemoryDraft, MemoryFilter, Source, Status  # noqa: E402
from engine.service import MemoryService  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LME = DATA / "longmemeval_dev" / "longmemeval_s_dev60.json.gz"
MADIAL = DATA / "madial_bench"
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
    kind: str = ""  # LongMemEval's question type
    part: str = ""  # "tune" or "held-out": weights are chosen on the first only
    focus: str | None = None  # the part of the query to weigh more (``service.recall``'s focus)


@dataclass
class Dataset:
    name: str
    cases: list[Case] = field(default_factory=list)
    # How the ingest went (memories, seconds, per_s) when this run's ingest was timed whole.
    ingest: dict[str, float] | None = None


def _lme_date(text: str) -> datetime:
    return datetime.strptime(text.split(" (")[0] + " " + text.split(") ")[1], "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


# semantic, lexical, graph, decay, context, time, and optionally lexical_reference, focus,
# semantic_power, lexical_power and centring (not weights, see engine/config.py; left
# out, the engine's defaults)
Weights = tuple[float, ...]
SIGNALS = ("semantic", "lexical", "graph", "decay", "context", "time")
SETTINGS = (*SIGNALS, "lexical_reference", "focus", "semantic_power", "lexical_power", "centring")


def _config(data_dir: Path, provider: str, weights: Weights, min_candidates: int | None = None) -> Config:
    recall: dict[str, float] = {} if min_candidates is None else {"min_candidates": min_candidates}
    if weights[1] == 0:
        # The variants without the lexical channel ("semantic only", "semantic + decay") show
        # the semantic channel whatever the model reads: the service would otherwise rank a
        # query its model cannot read without it (README, Embedders).
        recall["unread_query_share"] = 1.0
    return load_config(
        None,
        {},
        data_dir=str(data_dir),
        durable_commits=False,
        embedding={"provider": provider},
        fusion=dict(zip(SETTINGS, weights, strict=False)),
        limits={"max_content_chars": 1_000_000, "max_batch": 1000},
        recall=recall,
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
    focus: str | None = None  # the latest user turn, where the query joins several


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


def _lme_drafts(question: dict[str, Any], namespace: str) -> tuple[list[MemoryDraft], list[int]]:
    """A LongMemEval question's turns as memories (with their session ids), and the
    positions of those that hold the answer."""
    drafts: list[MemoryDraft] = []
    evidence: list[int] = []
    sessions = zip(
        question["haystack_sessions"], question["haystack_dates"], question["haystack_session_ids"], strict=True
    )
    for session, date, session_id in sessions:
        created = _lme_date(date)
        for turn in session:
            if turn.get("has_answer"):
                evidence.append(len(drafts))
            drafts.append(
                MemoryDraft(
                    content=turn["content"],
                    namespace=namespace,
                    category="event",
                    source=Source.USER_INPUT if turn["role"] == "user" else Source.INFERENCE,
                    created_at=created,
                    session_id=session_id,
                )
            )
    return drafts, evidence


def _lme_asked(question: dict[str, Any]) -> datetime:
    """When the question is asked: a few are dated before some of their own sessions,
    so after the last of them."""
    return max(_lme_date(question["question_date"]), *(_lme_date(d) for d in question["haystack_dates"]))


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
        drafts, turns = _lme_drafts(question, namespace)
        evidence = {offset + n for n in turns}
        at = _lme_asked(question)
        corpus.groups.append(Group(at, drafts))
        corpus.questions.append(Question(namespace, question["question"], at, evidence))
        offset += len(drafts)
    return corpus


def ingest_longmemeval(service: MemoryService, clock: Clock, per_type: int, minutes: float = 0.0) -> Dataset:
    """The first ``per_type`` questions of each of the six question types (10 each in dev60),
    taken type by type in turn, so that an ingest cut short still covers every type.

    Each question's case is appended to ``cases.partial.jsonl`` once its turns are
    stored, so an ingest that stopped goes on where it was. A namespace stored by an
    earlier run without its case line has its ids found again by content (the question
    is left out if any turn is missing). With ``minutes``, ingesting stops after that
    long and the dataset is the questions stored by then."""
    questions = json.loads(gzip.open(LME).read())
    taken: dict[str, int] = {}
    questions = [
        q for q in questions if taken.setdefault(q["question_type"], 0) < per_type and _take(taken, q["question_type"])
    ]
    seen: dict[str, int] = {}
    parts: dict[str, str] = {}
    for question in questions:  # alternate within each question type, in the file's order
        kind = question["question_type"]
        seen[kind] = seen.get(kind, 0) + 1
        parts[question["question_id"]] = "tune" if seen[kind] % 2 else "held-out"
    by_type: dict[str, list[dict[str, Any]]] = {}
    for question in questions:
        by_type.setdefault(question["question_type"], []).append(question)
    ordered = [q for row in itertools.zip_longest(*by_type.values()) for q in row if q is not None]
    partial = Path(service.config.data_dir) / "cases.partial.jsonl"
    done = {}
    if partial.exists():
        done = {case["namespace"]: case for case in map(json.loads, partial.read_text().splitlines())}
    stored = set(service.namespaces("lme-"))
    started = time.monotonic()
    cases: list[Case] = []
    for question in ordered:
        namespace = "lme-" + question["question_id"]
        if namespace in done:
            cases.append(_case(done[namespace]))
            continue
        if minutes and time.monotonic() - started > minutes * 60:
            continue
        drafts, evidence = _lme_drafts(question, namespace)
        clock.now = _lme_asked(question)
        ids: list[str] | None = None
        if namespace in stored:
            ids = _found_again(service, namespace, drafts)
        else:
            ids = [result.memory.memory_id for batch in _batches(drafts, 256) for result in service.save_batch(batch)]
        if ids is None:
            print(f"{namespace}: stored incompletely by an earlier run, left out", file=sys.stderr)
            continue
        kind = question["question_type"]
        case = Case(
            namespace, question["question"], clock.now, {ids[i] for i in evidence}, kind, parts[question["question_id"]]
        )
        with partial.open("a") as out:
            out.write(json.dumps(_case_dict(case)) + "\n")
        cases.append(case)
    return Dataset(f"LongMemEval dev60 ({len(cases)} questions)", cases)


def _found_again(service: MemoryService, namespace: str, drafts: list[MemoryDraft]) -> list[str] | None:
    by_content: dict[str, str] = {}
    cursor: str | None = None
    while True:
        page = service.list_page([namespace], MemoryFilter(statuses=tuple(Status)), limit=500, cursor=cursor)
        by_content.update((memory.content, memory.memory_id) for memory in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    ids = [by_content.get(draft.content.strip()) for draft in drafts]
    return None if None in ids else [memory_id for memory_id in ids if memory_id is not None]


def _case(raw: dict[str, Any]) -> Case:
    return Case(
        raw["namespace"],
        raw["query"],
        datetime.fromisoformat(raw["at"]),
        set(raw["relevant"]),
        raw.get("kind", ""),
        raw.get("part", ""),
        raw.get("focus"),
    )


def _case_dict(case: Case) -> dict[str, Any]:
    return {
        "namespace": case.namespace,
        "query": case.query,
        "at": case.at.isoformat(),
        "relevant": sorted(case.relevant),
        "kind": case.kind,
        "part": case.part,
        "focus": case.focus,
    }


def _take(counts: dict[str, int], key: str) -> bool:
    counts[key] += 1
    return True


def madial_corpus(lang: str = "en", turns: int | None = None, named: bool = False) -> Corpus:
    """All of one language's memories (160 English, 171 Chinese) in one namespace
    (relevant ids are global across the two users); each query is the latest ``turns``
    user turns (default: the prompt context's ``context_query_messages``), and its focus
    the latest of them, as the prompt context's (``engine/sessions.py``). ``named``: the
    query starts with the speaker's name ("Bart: …"), as the prompt context's does where
    the client names the speaker, a tenth of the memories name them and another person is
    named about as often (``MemoryService.names_speaker``; every dialogue here: its lines
    are "<Bart>: …", and the memories name Bart or Lisa, about half each, in both
    languages)."""
    turns = turns or load_config(None, {}).sessions.context_query_messages
    corpus = Corpus(f"MADial-Bench {lang}")
    at = datetime(2025, 1, 1, tzinfo=UTC)  # after the newest memory
    memories = _madial_memories(lang)
    drafts: list[MemoryDraft] = []
    for row in memories:
        ((_, memory),) = row.items()
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
    for dialogue, users, relevant in _madial_asked(_madial_dialogues(lang), _madial_positions(memories)):
        focus = users[-1] if len(users[-turns:]) > 1 else None
        said_by = f"{_madial_speaker(dialogue)}: " if named else ""
        corpus.questions.append(Question("madial", said_by + " ".join(users[-turns:]), at, relevant, focus))
    return corpus


QUOTES = '"“”'  # around each line of a MADial-Bench dialogue


def _madial_memories(lang: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (MADIAL / lang / f"MADial-Bench-{lang}-memory.jsonl").open()]


def _madial_positions(memories: list[dict[str, Any]]) -> dict[int, int]:
    """Each memory's key (the dialogues' ``relevant-id``) -> its position in the file."""
    return {int(key): n for n, row in enumerate(memories) for key in row}


def _madial_speaker(dialogue: dict[str, Any]) -> str:
    """The user who speaks in a dialogue: its first line's tag (``<Bart>: …``)."""
    return str(dialogue["dialogue"][1].split(":", 1)[0].strip().strip("<>"))


def _madial_dialogues(lang: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (MADIAL / lang / f"MADial-Bench-{lang}-dialogue.jsonl").open()]


def _madial_asked(
    dialogues: list[dict[str, Any]], positions: dict[int, int]
) -> Iterator[tuple[dict[str, Any], list[str], set[int]]]:
    """The dialogues that make a question, in order, with their user turns before the test
    turn and the positions of their labelled memories (``positions``: memory key ->
    position): those with both."""
    for dialogue in dialogues:
        turn = dialogue["test-turn"][0]
        before = [line for line in dialogue["dialogue"][1:turn] if not line.startswith("<Assistant>")]
        users = [line.split(":", 1)[1].strip().strip('"') for line in before if ":" in line]
        relevant = {positions[key] for key in dialogue["relevant-id"] if key in positions}
        if users and relevant:
            yield dialogue, users, relevant


def madial_chat_corpus(lang: str = "en", turns: int | None = None, named: bool = False) -> Corpus:
    """MADial-Bench's memories among a chat log, as a new user who saves every message
    would have them: two namespaces, each holding all of the language's memories and,
    one memory a line (``Speaker: what they said``), every line of the dialogues of one
    part (about 1,000 memories a namespace). A question is asked in the namespace that
    holds the other part's lines, so its own dialogue is never among the messages, and
    judged as in ``madial_corpus``: the share of its labelled memories in the top 5.
    The lines are daily-life small talk around the same children and events as the
    memories, much of it near-template ("That's amazing! …"), and each is dated like a
    memory of the same position in the file, so the decay signal favours neither."""
    plain = madial_corpus(lang, turns, named)
    memories = plain.drafts
    positions = _madial_positions(_madial_memories(lang))
    asked = [dialogue for dialogue, _, _ in _madial_asked(_madial_dialogues(lang), positions)]
    corpus = Corpus(f"MADial-Bench {lang} in a chat log")
    parts = ("tune", "held-out")  # as ``ingest`` names the questions: alternating
    offsets: dict[str, int] = {}
    for part in parts:
        lines = [
            line.strip()
            for n, dialogue in enumerate(asked)
            if parts[n % 2] != part  # the other part's dialogues
            for line in dialogue["dialogue"]
            if line.strip() not in ("<BOD>", "<EOD>")
        ]
        namespace = f"madial-chat-{part}"
        drafts = [replace(draft, namespace=namespace) for draft in memories]
        for n, line in enumerate(lines):
            speaker, _, said = line.partition(":")
            said = said.strip().strip(QUOTES)
            drafts.append(
                MemoryDraft(
                    content=f"{speaker.strip('<> ')}: {said}",
                    namespace=namespace,
                    category="event",
                    created_at=memories[n % len(memories)].created_at,
                )
            )
        offsets[part] = sum(len(group.drafts) for group in corpus.groups)
        corpus.groups.append(Group(plain.questions[0].at, drafts))
    for n, question in enumerate(plain.questions):
        part = parts[n % 2]
        relevant = {offsets[part] + position for position in question.relevant}
        corpus.questions.append(replace(question, namespace=f"madial-chat-{part}", relevant=relevant))
    return corpus


def ingest(service: MemoryService, clock: Clock, corpus: Corpus) -> Dataset:
    """Store the corpus (each group at its own clock time, 256 per ``save_batch``)."""
    ids: list[str] = []
    for group in corpus.groups:
        clock.now = group.at
        for batch in _batches(group.drafts, 256):
            ids += [result.memory.memory_id for result in service.save_batch(batch)]
    dataset = Dataset(corpus.name)
    for n, question in enumerate(corpus.questions):
        relevant = {ids[i] for i in question.relevant}
        part = "held-out" if n % 2 else "tune"
        dataset.cases.append(
            Case(question.namespace, question.query, question.at, relevant, part=part, focus=question.focus)
        )
    return dataset


def ingest_madial(service: MemoryService, clock: Clock, turns: int | None = None, named: bool = False) -> Dataset:
    return ingest(service, clock, madial_corpus("en", turns, named))


def ingest_madial_zh(service: MemoryService, clock: Clock, turns: int | None = None, named: bool = False) -> Dataset:
    return ingest(service, clock, madial_corpus("zh", turns, named))


@functools.cache
def ingest_madial_chat(
    service: MemoryService, clock: Clock, lang: str, turns: int | None = None, named: bool = False
) -> Dataset:
    return ingest(service, clock, madial_chat_corpus(lang, turns, named))


def _answer_sessions() -> dict[str, frozenset[str]]:
    """LongMemEval's evidence sessions (``answer_session_ids``) by the question's namespace."""
    questions = json.loads(gzip.open(LME).read())
    return {"lme-" + q["question_id"]: frozenset(q["answer_session_ids"]) for q in questions}


SESSION_K = 5


def evaluate(service: MemoryService, clock: Clock, dataset: Dataset, ks: tuple[int, ...]) -> dict[str, float]:
    """Recall@k over every case, and over each part (``tune``, ``held-out``) and each
    question type (``type:<name>``) where the dataset has them; for LongMemEval also
    ``session recall@5``, the share of the question's evidence sessions that one of the
    top 5 turns comes from; ``timed queries``: how many queries named a time the parser
    read."""
    recalls: dict[str, dict[str, list[float]]] = {}
    latencies = []
    timed = 0
    for case in dataset.cases:
        clock.now = case.at
        started = time.perf_counter()
        result = service.recall(
            case.query, namespaces=[case.namespace], top_k=max(ks), reinforce=False, focus=case.focus
        )
        latencies.append(time.perf_counter() - started)
        timed += bool(result.windows)
        found = [hit.memory.memory_id for hit in result.hits]
        shares = {f"recall@{k}": len(case.relevant & set(found[:k])) / len(case.relevant) for k in ks}
        sessions = _answer_sessions().get(case.namespace) if case.kind else None
        if sessions:
            seen = {hit.memory.session_id for hit in result.hits[:SESSION_K]}
            shares[f"session recall@{SESSION_K}"] = len(sessions & seen) / len(sessions)
        groups = ["", *([case.part + " "] if case.part else []), *([f"type:{case.kind} "] if case.kind else [])]
        for group in groups:
            for metric, share in shares.items():
                recalls.setdefault(group, {}).setdefault(metric, []).append(share)
    out = {
        f"{group}{metric}": round(statistics.fmean(values), 4)
        for group, by_metric in recalls.items()
        for metric, values in by_metric.items()
    }
    out["timed queries"] = timed
    out["p50_ms"] = round(statistics.median(latencies) * 1000, 1)
    return out


def open_prepared(
    name: str,
    provider: str,
    embedder: Embedder,
    weights: Weights,
    clock: Clock,
    ingest: Callable[[MemoryService, Clock], Dataset],
    min_candidates: int | None = None,
) -> tuple[MemoryService, Dataset]:
    data_dir = WORK / f"quality-{name}-{provider}"
    cases_file = data_dir / "cases.json"
    if not cases_file.exists() and not (data_dir / "cases.partial.jsonl").exists():
        shutil.rmtree(data_dir, ignore_errors=True)  # an ingest that stopped halfway starts over
    service = open_service(_config(data_dir, provider, weights, min_candidates), embedder=embedder, clock=clock)
    if cases_file.exists():
        raw = json.loads(cases_file.read_text())
        dataset = Dataset(raw["name"], [_case(c) for c in raw["cases"]], raw.get("ingest"))
        return service, dataset
    resumed = (data_dir / "cases.partial.jsonl").exists()  # an ingest resumed halfway is not timed whole
    started = time.perf_counter()
    before = int(service.stats()["memories_indexed"])  # type: ignore[call-overload]
    dataset = ingest(service, clock)
    seconds = time.perf_counter() - started
    memories = int(service.stats()["memories_indexed"]) - before  # type: ignore[call-overload]
    print(f"ingested {dataset.name}: {memories} memories in {seconds:.0f} s", file=sys.stderr)
    if not resumed:
        dataset.ingest = {"memories": memories, "seconds": round(seconds, 1), "per_s": round(memories / seconds, 1)}
    cases = [_case_dict(c) for c in dataset.cases]
    cases_file.write_text(json.dumps({"name": dataset.name, "cases": cases, "ingest": dataset.ingest}))
    return service, dataset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--embedder", default=DEFAULT_EMBEDDING_PROVIDER, choices=EMBEDDING_PROVIDERS, help="default: the service's"
    )
    parser.add_argument(
        "--weights",
        help="extra fused variant: semantic,lexical,graph,decay,context,time"
        "[,lexical_reference[,focus[,semantic_power,lexical_power[,centring]]]]",
    )
    parser.add_argument(
        "--grid",
        help="tune one signal: NAME=v1,v2,... (context or time) on the default weights with the other new "
        "signal off; the value with the best tune-part LongMemEval recall@10 (then recall@5) is named",
    )
    parser.add_argument(
        "--sweep",
        help="sweep several signals at once: 'NAME=v1,v2,... NAME=...' (the others at their defaults); "
        "of the weightings whose fused ranking beats semantic-only and lexical-only on the tune part of "
        "every data set (LongMemEval recall@10, MADial-Bench recall@5), the best mean is named",
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument(
        "--per-type", type=int, default=10, help="LongMemEval questions per question type (10 = all 60)"
    )
    parser.add_argument(
        "--datasets",
        default="longmemeval,madial,madial-zh",
        help="comma-separated: longmemeval, madial, madial-zh, madial-chat, madial-chat-zh (MADial-Bench's "
        "memories among a chat log's lines, about 1,000 a namespace: madial_chat_corpus)",
    )
    parser.add_argument(
        "--ingest-minutes",
        type=float,
        default=0.0,
        help="stop ingesting LongMemEval after this long (0: never); the questions stored by then are the dataset",
    )
    parser.add_argument(
        "--madial-turns",
        type=int,
        help="MADial-Bench queries: the latest N user turns (default: [sessions] context_query_messages)",
    )
    parser.add_argument(
        "--madial-unnamed",
        action="store_true",
        help="MADial-Bench queries without the speaker's name (as the prompt context makes them where "
        "the client names no speaker, and as every run before 7 December 2026 did)",
    )
    parser.add_argument(
        "--min-candidates",
        type=int,
        help="[recall] min_candidates for the recalls (default: the engine's): how many candidates each channel gives",
    )
    args = parser.parse_args()

    default = load_config(None, {}).fusion
    fused: Weights = tuple(getattr(default, name) for name in SETTINGS)
    before = (*fused[:4], 0.0, 0.0, *fused[6:])
    variants: dict[str, Weights] = {
        "semantic only": (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        "lexical only": (0.0, 1.0, 0.0, 0.0, 0.0, 0.0),
        "semantic + decay": (default.semantic + default.lexical + default.graph, 0.0, 0.0, default.decay, 0.0, 0.0),
        "fused without graph": (default.semantic, default.lexical, 0.0, default.decay, 0.0, 0.0),
        "fused, no context or time (before)": before,
        "fused + context": (*fused[:4], default.context, 0.0),
        "fused + time": (*fused[:4], 0.0, default.time),
        "fused, the signals as read (semantic_power, lexical_power 1)": (*fused[:8], 1.0, 1.0),
        "fused (default: + context + time)": fused,
    }
    grid: list[tuple[str, float]] = []
    if args.grid:
        name, _, values = args.grid.partition("=")
        if name not in ("context", "time") or not values:
            parser.error("--grid takes context=... or time=...")
        grid = [(name, float(value)) for value in values.split(",")]
        variants = {f"{name} = {value:g}": _with(before, name, value) for name, value in grid}
    if args.sweep:
        axes = [
            (name, [float(v) for v in values.split(",")])
            for name, _, values in map(lambda axis: axis.partition("="), args.sweep.split())
        ]
        if not axes or any(name not in SETTINGS or not values for name, values in axes):
            parser.error(f"--sweep takes NAME=v1,v2,... for NAME in {', '.join(SETTINGS)}")
        variants = {name: variants[name] for name in SINGLE}
        for point in itertools.product(*(values for _, values in axes)):
            weights = fused
            for (name, _), value in zip(axes, point, strict=True):
                weights = _with(weights, name, value)
            label = " ".join(f"{name}={value:g}" for (name, _), value in zip(axes, point, strict=True))
            variants[label] = weights
    if args.weights:
        variants[f"fused ({args.weights})"] = tuple(float(w) for w in args.weights.split(","))

    embedder = load_embedder(_config(WORK / "unused", args.embedder, (1, 0, 0, 0, 0, 0)))
    clock = Clock()
    results: dict[str, dict[str, dict[str, float]]] = {}
    ingests: dict[str, dict[str, float]] = {}
    chosen = set(args.datasets.split(","))
    turns = args.madial_turns or load_config(None, {}).sessions.context_query_messages
    named = not args.madial_unnamed
    said = "-named" if named else ""  # the stored cases of each formulation apart
    runs: list[tuple[str, Callable[[MemoryService, Clock], Dataset], tuple[int, ...]]] = [
        (
            f"longmemeval{args.per_type}",
            lambda svc, clk: ingest_longmemeval(svc, clk, args.per_type, args.ingest_minutes),
            (5, 10, 20),
        ),
        # The turns in the name: each formulation of the queries has its own stored cases.
        (f"madial{turns}{said}", lambda svc, clk: ingest_madial(svc, clk, turns, named), (5,)),
        (f"madial-zh{turns}{said}", lambda svc, clk: ingest_madial_zh(svc, clk, turns, named), (5,)),
        (f"madial-chat{turns}{said}", lambda svc, clk: ingest_madial_chat(svc, clk, "en", turns, named), (5,)),
        (f"madial-chat-zh{turns}{said}", lambda svc, clk: ingest_madial_chat(svc, clk, "zh", turns, named), (5,)),
    ]
    for name, ingest, ks in runs:
        if name.removesuffix(said).rstrip("0123456789") not in chosen:
            continue
        service, dataset = open_prepared(name, args.embedder, embedder, before, clock, ingest)
        service.close()
        results[dataset.name] = {}
        if dataset.ingest is not None:
            ingests[dataset.name] = dataset.ingest
        for variant, weights in variants.items():
            service, _ = open_prepared(name, args.embedder, embedder, weights, clock, ingest, args.min_candidates)
            try:
                results[dataset.name][variant] = evaluate(service, clock, dataset, ks)
            finally:
                service.close()
            print(dataset.name, variant, results[dataset.name][variant], file=sys.stderr)

    print(f"\nembedder: {embedder.name}\n")
    for name, took in ingests.items():
        print(f"ingest of {name}: {took['memories']:.0f} memories in {took['seconds']:.0f} s, {took['per_s']:.1f}/s")
    _table(results, list(variants), lambda metric: ":" not in metric and metric not in ("p50_ms", "timed queries"))
    lme = next((name for name in results if name.startswith("LongMemEval")), None)
    if lme is not None:
        print()
        _table({lme: results[lme]}, list(variants), lambda metric: metric.startswith("type:") and "@10" in metric)
        if grid:
            # Best tune recall@10, then tune recall@5; on a tie the smallest value.
            tune = {v: (results[lme][v]["tune recall@10"], results[lme][v]["tune recall@5"]) for v in variants}
            best = max(tune.values())
            pick = next(variant for variant in variants if tune[variant] == best)
            print(f"\nchosen on the tune part: {pick} (tune recall@10, @5: {best[0]:.3f}, {best[1]:.3f})")
    if args.sweep:
        pick = swept(results, [v for v in variants if v not in SINGLE])
        print(f"\nchosen on the tune parts: {pick}" if pick else "\nno weighting beat both channels on every tune part")
        if pick:
            _table(results, [*SINGLE, pick], lambda metric: metric.startswith(("tune ", "held-out ")))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"embedder": embedder.name, "ingest": ingests, "results": results}, indent=2))
    return 0


SINGLE = ("semantic only", "lexical only")


def _headline(dataset: str) -> str:
    """The metric a data set is judged on: LongMemEval recall@10, MADial-Bench recall@5."""
    return "recall@10" if dataset.startswith("LongMemEval") else "recall@5"


def swept(results: dict[str, dict[str, dict[str, float]]], candidates: list[str]) -> str | None:
    """The weighting a sweep chooses, from the tune parts alone: of those whose fused
    ranking beats both single channels on every data set, the best mean; on a tie the
    first listed. None when no weighting beats both everywhere."""

    def tune(dataset: str, variant: str) -> float:
        return results[dataset][variant]["tune " + _headline(dataset)]

    beating = [
        variant
        for variant in candidates
        if all(tune(d, variant) > max(tune(d, single) for single in SINGLE) for d in results)
    ]
    if not beating:
        return None
    return max(beating, key=lambda variant: statistics.fmean(tune(d, variant) for d in results))


def _with(weights: Weights, name: str, value: float) -> Weights:
    changed = list(weights)
    changed[SETTINGS.index(name)] = value
    return tuple(changed)


def _table(results: dict[str, dict[str, dict[str, float]]], variants: list[str], shown: Callable[[str], bool]) -> None:
    names = list(results)
    columns = [(name, metric) for name in names for metric in next(iter(results[name].values())) if shown(metric)]
    print("| ranking | " + " | ".join(f"{name} {metric}" for name, metric in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for variant in variants:
        cells = [f"{results[name][variant][metric]:.3f}" for name, metric in columns]
        print(f"| {variant} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
