"""What the conflict rules and the write guard do to real conversations.

Saves real chat logs the way a new user would, one memory per turn, each written
"Speaker: what they said", through the real engine (open_service, a real SQLite
file, the real HNSW index, the default MiniLM embedder):

* LongMemEval dev60 (../shared/data/longmemeval_dev): each question's haystack
  (~500 turns) in its own namespace, "user: …" and "assistant: …", assistant turns
  with source ``inference``, each session saved as one batch at its date;
* MADial-Bench English and Chinese (../shared/data/madial_bench): every dialogue
  line, "Bart: …" and "Assistant: …", one namespace per user and language.

For each conflict mode asked for (``--modes``, default ``supersede,off``) it
reports the share of memories that were superseded, flagged (linked without a
status change, ``flag`` mode) and contradicted, the share of assistant turns the
write guard quarantined, and of those left active, the share the read guard leaves
out of every recall; and how many turns the write guard found personal data in (so
stored redacted), by kind (``--redacted`` prints each, as said and as stored).
Every pair the rules superseded is checked against the hand labels in
benchmarks/data/chatlog_supersessions.jsonl (precision, and how many of the
labelled non-replacements are superseded); pairs without a label are listed with
``--unlabelled``. With ``--quality`` it also
measures LongMemEval turn recall@5/@10 of the evidence turns in each mode, so the
cost of conflicts to recall can be read off (the difference between the modes).

Vectors are cached under benchmarks/.work/chatlog-vectors (the model's output for
the same text never changes), so a rerun costs only the engine's time.

``--rules-only`` needs no model and no store: it judges every turn against every
earlier turn of its namespace (an upper bound: the engine only judges close
candidates) and runs the write and read guards over every turn. It uses nothing but
``conflicts.judge``, ``guard.check_write`` and ``guard.check_read``, so it also runs
against older versions of those two modules, for a before-and-after.

    .venv/bin/python benchmarks/chatlogs.py                      # both modes, counts
    .venv/bin/python benchmarks/chatlogs.py --quality            # and recall, on vs off
    .venv/bin/python benchmarks/chatlogs.py --modes flag --datasets madial-en
    .venv/bin/python benchmarks/chatlogs.py --unlabelled         # superseded pairs to label
    .venv/bin/python benchmarks/chatlogs.py --rules-only         # the pure rules, every pair, in seconds
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine import conflicts, guard  # noqa: E402
from engine.adapters import load_embedder, open_service  # noqa: E402
from engine.config import Config, GuardPolicy, load_config  # noqa: E402
from engine.guard import Action  # noqa: E402
from engine.lifecycle import Merge  # noqa: E402
from engine.ports import Embedder, Matrix, ReadsText, Vector  # noqa: E402
from engine.records import Memory, MemoryDraft, Source, Status, Visibility  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LME = DATA / "longmemeval_dev" / "longmemeval_s_dev60.json.gz"
MADIAL = DATA / "madial_bench"
WORK = ROOT / "benchmarks" / ".work"
LABELS = ROOT / "benchmarks" / "data" / "chatlog_supersessions.jsonl"
MODES = ("supersede", "flag", "off")


@dataclass(frozen=True)
class Turn:
    text: str
    assistant: bool
    created_at: datetime
    evidence: bool = False


@dataclass
class Conversation:
    """One namespace's turns, in the order they were said, cut into the batches they are saved in."""

    dataset: str
    namespace: str
    batches: list[list[Turn]] = field(default_factory=list)
    # LongMemEval: the question asked after the last session, and when.
    question: str = ""
    asked_at: datetime | None = None


def _lme_date(text: str) -> datetime:
    return datetime.strptime(text.split(" (")[0] + " " + text.split(") ")[1], "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def longmemeval() -> Iterator[Conversation]:
    for question in json.loads(gzip.open(LME).read()):
        talk = Conversation("lme", "lme-" + question["question_id"], question=question["question"])
        dates = [_lme_date(d) for d in question["haystack_dates"]]
        for session, created in zip(question["haystack_sessions"], dates, strict=True):
            turns = [
                Turn(
                    f"{turn['role']}: {turn['content']}",
                    turn["role"] == "assistant",
                    created,
                    turn.get("has_answer", False),
                )
                for turn in session
            ]
            talk.batches.append(turns)
        # A few questions are dated before some of their own sessions: ask them after the last.
        talk.asked_at = max(_lme_date(question["question_date"]), *dates)
        yield talk


def madial(lang: str) -> Iterator[Conversation]:
    """Every dialogue line of one language, a namespace per user, a batch per dialogue.
    The dialogues carry no dates; each is dated a day after the one before."""
    path = MADIAL / lang / f"MADial-Bench-{lang}-dialogue.jsonl"
    by_user: dict[int, Conversation] = {}
    for number, line in enumerate(path.open(encoding="utf-8")):
        dialogue = json.loads(line)
        user = dialogue["user-id"]
        talk = by_user.setdefault(user, Conversation(f"madial-{lang}", f"madial-{lang}-{user}"))
        created = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=number)
        turns = []
        for raw in dialogue["dialogue"]:
            raw = raw.strip()
            if not raw.startswith("<") or raw in ("<BOD>", "<EOD>") or ":" not in raw:
                continue
            speaker, said = raw[1:].split(">", 1)
            said = said.lstrip(":： ").strip().strip('"“”')
            if said:
                turns.append(Turn(f"{speaker}: {said}", speaker.casefold() == "assistant", created))
        talk.batches.append(turns)
    yield from by_user.values()


DATASETS = {"lme": longmemeval, "madial-en": lambda: madial("en"), "madial-zh": lambda: madial("zh")}


class CachedEmbedder:
    """The real embedder, with its document vectors kept on disk by text digest."""

    def __init__(self, inner: Embedder, folder: Path) -> None:
        self.inner = inner
        self.name, self.version, self.dim = inner.name, inner.version, inner.dim
        self.similarity_floor = inner.similarity_floor
        self.folder = folder / inner.name.replace("/", "_")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.cache: dict[str, np.ndarray] = {}
        for part in sorted(self.folder.glob("*.npz")):
            with np.load(part) as stored:
                self.cache.update({key: stored[key] for key in stored.files})
        self.pending: dict[str, np.ndarray] = {}

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def unread_share(self, text: str) -> float:
        """The model's own ``unread_share`` (0 for a model that cannot tell)."""
        return self.inner.unread_share(text) if isinstance(self.inner, ReadsText) else 0.0

    def unread_parts(self, text: str) -> frozenset[str]:
        """The model's own ``unread_parts`` (none for a model that cannot tell)."""
        return self.inner.unread_parts(text) if isinstance(self.inner, ReadsText) else frozenset()

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        keys = [self._key(text) for text in texts]
        missing = sorted({key: text for key, text in zip(keys, texts, strict=True) if key not in self.cache}.items())
        if missing:
            vectors = self.inner.embed_documents([text for _, text in missing])
            for (key, _), vector in zip(missing, vectors, strict=True):
                self.cache[key] = self.pending[key] = vector
            if len(self.pending) >= 2000:
                self.flush()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[key] for key in keys]).astype(np.float32)

    def embed_query(self, text: str) -> Vector:
        return self.inner.embed_query(text)

    def flush(self) -> None:
        if self.pending:
            np.savez(self.folder / f"part-{len(list(self.folder.glob('*.npz'))):05d}.npz", **self.pending)
            self.pending = {}


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2024, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _config(data_dir: Path, mode: str) -> Config:
    return load_config(
        None,
        {},
        data_dir=str(data_dir),
        durable_commits=False,
        conflicts={"mode": mode},
        limits={"max_content_chars": 1_000_000, "max_batch": 1000},
    )


@dataclass
class Outcome:
    mode: str
    memories: Counter[str] = field(default_factory=Counter)
    superseded: Counter[str] = field(default_factory=Counter)
    flagged: Counter[str] = field(default_factory=Counter)
    contradicted: Counter[str] = field(default_factory=Counter)
    assistant_turns: Counter[str] = field(default_factory=Counter)
    quarantined_assistant: Counter[str] = field(default_factory=Counter)
    quarantined_user: Counter[str] = field(default_factory=Counter)
    # Active assistant turns the read guard leaves out of every recall.
    read_hidden: Counter[str] = field(default_factory=Counter)
    # Turns saved as a repeat of an earlier memory (write-time dedup), and what a
    # consolidation run (dry run, at the question's date) would archive and merge.
    turns: Counter[str] = field(default_factory=Counter)
    archived: Counter[str] = field(default_factory=Counter)
    merged: Counter[str] = field(default_factory=Counter)
    pairs: list[dict[str, str]] = field(default_factory=list)
    # Turns folded into an earlier memory that says nearly the same (not the same digest).
    folded: list[tuple[str, str]] = field(default_factory=list)
    # The turns each merge of the consolidation dry runs would join (``--merged``).
    merges: list[list[str]] = field(default_factory=list)
    quarantined_texts: list[str] = field(default_factory=list)
    # Turns the write guard redacted (personal data, secrets), by dataset and by kind, and
    # each one as said beside what is stored, for a look by eye (``--redacted``).
    redacted: Counter[str] = field(default_factory=Counter)
    redacted_kinds: Counter[tuple[str, str]] = field(default_factory=Counter)
    redacted_texts: list[tuple[str, str]] = field(default_factory=list)
    recall: dict[int, list[float]] = field(default_factory=lambda: {5: [], 10: []})
    seconds: float = 0.0


def _count_redaction(outcome: Outcome, dataset: str, said: str, verdict: guard.WriteVerdict) -> None:
    kinds = [kind for kind in verdict.kinds if kind in guard.PII_KINDS]
    if not kinds:
        return
    outcome.redacted[dataset] += 1
    for kind in kinds:
        outcome.redacted_kinds[(dataset, kind)] += 1
    outcome.redacted_texts.append((said, verdict.content))


def run(mode: str, talks: list[Conversation], embedder: Embedder, quality: bool) -> Outcome:
    data_dir = WORK / f"chatlogs-{mode}"
    shutil.rmtree(data_dir, ignore_errors=True)
    clock = Clock()
    service = open_service(_config(data_dir, mode), embedder=embedder, clock=clock, background_reembed=False)
    outcome = Outcome(mode)
    started = time.perf_counter()
    try:
        for talk in talks:
            texts: dict[str, str] = {}
            evidence: set[str] = set()
            for batch in talk.batches:
                if not batch:
                    continue
                clock.now = batch[0].created_at
                drafts = [
                    MemoryDraft(
                        content=turn.text,
                        namespace=talk.namespace,
                        category="event",
                        source=Source.INFERENCE if turn.assistant else Source.USER_INPUT,
                        created_at=turn.created_at,
                    )
                    for turn in batch
                ]
                for turn, result in zip(batch, service.save_batch(drafts), strict=True):
                    memory_id = result.memory.memory_id
                    texts[memory_id] = turn.text
                    if turn.evidence:
                        evidence.add(memory_id)
                    outcome.memories[talk.dataset] += result.created
                    if result.deduplicated_by == "similar":
                        outcome.folded.append((result.memory.content, turn.text))
                    outcome.turns[talk.dataset] += 1
                    outcome.assistant_turns[talk.dataset] += turn.assistant
                    _count_redaction(outcome, talk.dataset, turn.text, result.guard)
                    if result.created and result.memory.status is Status.ACTIVE and guard.check_read(result.memory):
                        outcome.read_hidden[talk.dataset] += 1
                    if result.guard.action is Action.QUARANTINED:
                        counter = outcome.quarantined_assistant if turn.assistant else outcome.quarantined_user
                        counter[talk.dataset] += 1
                        outcome.quarantined_texts.append(turn.text)
                    for kind, ids in (("superseded", result.superseded), ("flagged", result.flagged)):
                        getattr(outcome, kind)[talk.dataset] += len(ids)
                        outcome.pairs += [
                            {"kind": kind, "dataset": talk.dataset, "old": texts[old], "new": turn.text} for old in ids
                        ]
                    outcome.contradicted[talk.dataset] += len(result.contradicted)
            clock.now = talk.asked_at or clock.now
            plan = service.consolidator.run(talk.namespace, dry_run=True)
            outcome.archived[talk.dataset] += plan.archived
            outcome.merged[talk.dataset] += plan.merged_sources
            outcome.merges += [
                [texts.get(source, source) for source in done.action.source_ids]
                for done in plan.outcomes
                if isinstance(done.action, Merge) and done.status != "skipped"  # as merged_sources counts
            ]
            if plan.truncated:  # the report lists its first actions only: --merged would miss some
                print(f"{talk.namespace}: the dry run listed only {len(plan.outcomes)} of its actions", file=sys.stderr)
            if quality and evidence and talk.asked_at is not None:
                hits = service.recall(talk.question, namespaces=[talk.namespace], top_k=10, reinforce=False).hits
                found = [hit.memory.memory_id for hit in hits]
                for k in outcome.recall:
                    outcome.recall[k].append(len(evidence & set(found[:k])) / len(evidence))
    finally:
        service.close()
        if isinstance(embedder, CachedEmbedder):
            embedder.flush()
    outcome.seconds = time.perf_counter() - started
    return outcome


def rules_only(talks: list[Conversation]) -> Outcome:
    """Every turn judged against every earlier one of its namespace, and the guards over
    every turn, without a model or a store."""
    outcome = Outcome("rules only")
    started = time.perf_counter()
    for talk in talks:
        earlier: list[conflicts.Statement] = []
        superseded: set[str] = set()
        for batch in talk.batches:
            for turn in batch:
                source = Source.INFERENCE if turn.assistant else Source.USER_INPUT
                outcome.memories[talk.dataset] += 1
                outcome.assistant_turns[talk.dataset] += turn.assistant
                verdict = guard.check_write(turn.text, source, GuardPolicy())
                _count_redaction(outcome, talk.dataset, turn.text, verdict)
                if verdict.action is Action.QUARANTINED:
                    counter = outcome.quarantined_assistant if turn.assistant else outcome.quarantined_user
                    counter[talk.dataset] += 1
                    outcome.quarantined_texts.append(turn.text)
                elif turn.assistant and guard.check_read(_as_memory(turn, talk.namespace)):
                    outcome.read_hidden[talk.dataset] += 1
                new = conflicts.Statement(turn.text)
                for old in earlier:
                    judged = conflicts.judge(new, old).verdict
                    if judged is conflicts.Verdict.REPLACE and old.text not in superseded:
                        superseded.add(old.text)
                        outcome.superseded[talk.dataset] += 1
                        outcome.pairs.append(
                            {"kind": "superseded", "dataset": talk.dataset, "old": old.text, "new": new.text}
                        )
                    elif judged is conflicts.Verdict.CONTRADICT:
                        outcome.contradicted[talk.dataset] += 1
                if conflicts.claims(turn.text):  # a text the rules read nothing in clashes with nothing
                    earlier.append(new)
    outcome.seconds = time.perf_counter() - started
    return outcome


def _as_memory(turn: Turn, namespace: str) -> Memory:
    return Memory(
        memory_id="-",
        namespace=namespace,
        content=turn.text,
        category="event",
        entities=(),
        importance=0.5,
        base_score=0.4,
        source=Source.INFERENCE,
        actor=None,
        session_id=None,
        visibility=Visibility.SHARED,
        created_at=turn.created_at,
        updated_at=turn.created_at,
        last_accessed_at=turn.created_at,
    )


def load_labels(path: Path = LABELS) -> dict[tuple[str, str], str]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(row["old"], row["new"]): row["label"] for row in rows}


def _share(part: int, whole: int) -> str:
    return f"{part} ({100 * part / whole:.2f}%)" if whole else "0"


def report(outcomes: list[Outcome], labels: dict[tuple[str, str], str], unlabelled: bool) -> dict[str, object]:
    summary: dict[str, object] = {}
    print(
        "| mode | dataset | memories | superseded | flagged | contradicted "
        "| assistant turns quarantined | assistant turns hidden by the read guard | user turns quarantined |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for outcome in outcomes:
        for dataset in outcome.memories:
            n, assistant = outcome.memories[dataset], outcome.assistant_turns[dataset]
            print(
                f"| {outcome.mode} | {dataset} | {n} | {_share(outcome.superseded[dataset], n)} | "
                f"{_share(outcome.flagged[dataset], n)} | {_share(outcome.contradicted[dataset], n)} | "
                f"{_share(outcome.quarantined_assistant[dataset], assistant)} | "
                f"{_share(outcome.read_hidden[dataset], assistant)} | "
                f"{_share(outcome.quarantined_user[dataset], n - assistant)} |"
            )
        labelled = [labels.get((pair["old"], pair["new"])) for pair in outcome.pairs]
        right = sum(label == "replace" for label in labelled)
        known = sum(label is not None for label in labelled)
        taken = {(pair["old"], pair["new"]) for pair in outcome.pairs if pair["kind"] == "superseded"}
        wrong = [pair for pair, label in labels.items() if label == "not_replace"]
        print(
            f"\n{outcome.mode}: {sum(pair in taken for pair in wrong)} of the {len(wrong)} hand-labelled "
            "non-replacements superseded"
        )
        entry: dict[str, object] = {
            "memories": dict(outcome.memories),
            "superseded": dict(outcome.superseded),
            "flagged": dict(outcome.flagged),
            "contradicted": dict(outcome.contradicted),
            "assistant_turns": dict(outcome.assistant_turns),
            "quarantined_assistant": dict(outcome.quarantined_assistant),
            "quarantined_user": dict(outcome.quarantined_user),
            "read_hidden": dict(outcome.read_hidden),
            "redacted": dict(outcome.redacted),
            "redacted_kinds": {f"{dataset} {kind}": n for (dataset, kind), n in sorted(outcome.redacted_kinds.items())},
            "turns": dict(outcome.turns),
            "deduplicated": {key: outcome.turns[key] - outcome.memories[key] for key in outcome.turns},
            "consolidation_dry_run": {"archived": dict(outcome.archived), "merged_sources": dict(outcome.merged)},
            "pairs": len(outcome.pairs),
            "labelled_pairs": known,
            "labelled_right": right,
            "labelled_non_replacements_superseded": sum(pair in taken for pair in wrong),
            "seconds": round(outcome.seconds, 1),
        }
        print(
            f"{outcome.mode}: turns with personal data (redacted under the default policy) "
            f"{dict(outcome.redacted)}; by kind {entry['redacted_kinds']}"
        )
        if outcome.pairs:
            print(
                f"\n{outcome.mode}: {len(outcome.pairs)} pairs linked, {known} of them hand-labelled, "
                f"precision {right}/{known}" + (f" = {right / known:.3f}" if known else "")
            )
        if outcome.turns:
            print(
                f"{outcome.mode}: write-time dedup folded "
                f"{ {key: outcome.turns[key] - outcome.memories[key] for key in outcome.turns} } turns into earlier "
                f"memories; a consolidation (dry run) would archive {dict(outcome.archived)} and merge "
                f"{dict(outcome.merged)} memories"
            )
        if outcome.recall[5]:
            entry["recall"] = {f"@{k}": round(statistics.fmean(v), 4) for k, v in outcome.recall.items()}
            print(f"{outcome.mode}: LongMemEval turn recall {entry['recall']} over {len(outcome.recall[5])} questions")
        summary[outcome.mode] = entry
        if unlabelled:
            for pair, label in zip(outcome.pairs, labelled, strict=True):
                if label is None:
                    row = {"old": pair["old"], "new": pair["new"], "dataset": pair["dataset"]}
                    print(json.dumps(row, ensure_ascii=False))
    return summary


def _print_texts(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    for outcome in outcomes:
        if args.quarantined:
            for text in outcome.quarantined_texts:
                print(f"{outcome.mode}\tquarantined\t{text[:300]!r}")
        if args.redacted:
            for said, stored in outcome.redacted_texts:
                print(f"{outcome.mode}\tredacted\t{said[:300]!r}\tstored\t{stored[:300]!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="supersede,off", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--datasets", default=",".join(DATASETS), help=f"comma-separated, of {', '.join(DATASETS)}")
    parser.add_argument("--quality", action="store_true", help="also LongMemEval turn recall in each mode")
    parser.add_argument("--unlabelled", action="store_true", help="print every linked pair without a hand label")
    parser.add_argument("--quarantined", action="store_true", help="print every quarantined turn")
    parser.add_argument("--redacted", action="store_true", help="print every redacted turn, as said and as stored")
    parser.add_argument("--folded", action="store_true", help="print every turn folded into a near-duplicate")
    parser.add_argument("--merged", action="store_true", help="print the turns of every merge a dry run would make")
    parser.add_argument("--rules-only", action="store_true", help="the pure rules over every pair, no model")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    modes = args.modes.split(",")
    talks = [talk for name in args.datasets.split(",") for talk in DATASETS[name]()]
    if args.rules_only:
        outcome = rules_only(talks)
        report([outcome], load_labels(), args.unlabelled)
        _print_texts([outcome], args)
        return 0
    embedder = CachedEmbedder(load_embedder(_config(WORK / "unused", "supersede")), WORK / "chatlog-vectors")
    outcomes = []
    for mode in modes:
        outcome = run(mode, talks, embedder, args.quality)
        print(f"{mode}: ingested in {outcome.seconds:.0f} s", file=sys.stderr)
        outcomes.append(outcome)
    summary = report(outcomes, load_labels(), args.unlabelled)
    if args.folded:
        for outcome in outcomes:
            for kept, folded in outcome.folded:
                print(f"{outcome.mode}\tfolded\t{folded[:200]!r}\tinto\t{kept[:200]!r}")
    if args.merged:
        for outcome in outcomes:
            for group in outcome.merges:
                print(f"{outcome.mode}\tmerged\t" + "\t".join(repr(text[:200]) for text in group))
    _print_texts(outcomes, args)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"embedder": embedder.name, "results": summary}, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
