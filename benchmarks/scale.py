"""Scale: the engine at 10k, 100k and 1M memories, all in one namespace or spread over 1,000.

For each layout and size N, in child processes of their own (so memory figures do not
carry over):

1. **Build** (cached under ``--workdir`` and reused): N synthetic memories
   (``synthetic.py``) inserted through ``Store.insert``, 5,000 a transaction, then the
   HNSW index and the fast network catch up from the change sequence and are saved.
   Vectors come from a near-free hashing embedder (``hashing.py``, 384 dimensions), not
   the model: embedding 1M sentences with MiniLM takes over an hour on two cores, and
   what is measured here is the engine. The write path is not used (see
   ``engine_costs.py`` for its cost).
2. **Start-up**: ``open_service`` on the built directory, index and fast network loaded
   from disk, their files read once beforehand (so both engines start from the page
   cache, not from whatever an earlier step left there); RSS before and after, the fast
   network's own size estimate.
3. **Recall**: warm-up, a wait for what it left building in the background (a
   category's own HNSW index, as in a service that has run a while; the seconds are
   reported as ``settled_s``), then ``--queries`` recalls (top 10, production defaults,
   reinforcement on) with the query vectors computed beforehand, so the times are the
   engine's alone. Spread: each query asks one namespace, chosen at random. Then the
   same queries again, each filtered to one category drawn at random (a share of 8% to
   24% of the memories each), as a client's ``filter: {"category": …}`` asks.
4. **HNSW recall@10 against exact search**: for ``--exact-queries`` query vectors, the
   semantic channel's 10 nearest in the namespace against an exact scan of the
   namespace's vectors (the fast network's float16 copies).
5. **Rebuild** (sizes up to ``--rebuild-max``): the index directory removed and
   ``open_service`` rebuilding the index and fast network from the store.
6. **Ingest** (``--ingest-batches`` batches of 256, 0 to leave out): on a scratch copy of the
   built directory (index files included, so nothing is rebuilt), new synthetic memories of
   another seed, content and category only, through ``save_batch``: the whole write path
   (write guard, entity extraction, exact and near-duplicate check, conflict rules, one
   store transaction, index and fast-network upkeep), with the hashing embedder, so the
   engine's cost alone. One untimed batch first; spread: each batch to one namespace, at
   random. Wall and CPU time (``time.process_time``) per saved memory, and the bytes the
   saves had written to storage per saved memory (Linux's ``write_bytes``).

Memory beyond the vectors: the RSS a start-up added, less the vectors' own bytes (the
HNSW index's float32 copy and the fast network's float16 one), per memory. It holds
everything else of both (HNSW's graph links, the columns, lexicon, postings, ids and
digests) and SQLite's page cache.

With ``--baseline-ref REV`` each start-up and recall measurement is taken twice on the
same data, one after the other: first with the engine of that git revision (``git
archive`` into a scratch tree; this script's measuring code either way), then with
this tree's. The table then holds both, side by side. The baseline runs on a copy of the
built directory of its own (``…-baseline``, made once and kept beside it): each engine
saves its index files when it closes, and one whose files are in another's format would
rebuild them at its start.

Prints a Markdown table, writes JSON and draws recall latency against N per layout
(``--plots``; this tree's p50 and p95, the baseline's beside them). Never asserts a time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import synthetic  # noqa: E402
from hashing import HashingEmbedder, KnownQueries  # noqa: E402

SPREAD_NAMESPACES = 1_000
BATCH = 5_000
INGEST_BATCH = 256
MB = 2**20


def namespace_of(layout: str, index: int) -> str:
    return "bench" if layout == "one" else f"user-{index % SPREAD_NAMESPACES:04d}"


def _open(data_dir: Path, embedder: HashingEmbedder) -> Any:
    from engine.adapters import open_service
    from engine.config import load_config

    return open_service(load_config(env={}, data_dir=data_dir), embedder=embedder, background_reembed=False)


def build(layout: str, size: int, data_dir: Path, seed: int) -> dict[str, Any]:
    from latency import stored_memory

    embedder = HashingEmbedder()
    service = _open(data_dir, embedder)
    stream = synthetic.memories(seed)
    started = time.perf_counter()
    stored = 0
    while stored < size:
        items = list(itertools.islice(stream, min(BATCH, size - stored)))
        vectors = embedder.embed_documents([item.content for item in items])
        now = datetime.now(UTC)
        memories = [
            stored_memory(item, namespace_of(layout, stored + n), embedder, now) for n, item in enumerate(items)
        ]
        service.store.insert(memories, list(vectors), changed_by=None)
        stored += len(memories)
    inserted = time.perf_counter() - started
    service.keeper.catch_up()
    caught_up = time.perf_counter() - started - inserted
    service.flush()
    service.keeper.save()
    service.close()
    return {"insert_s": round(inserted, 1), "index_catch_up_s": round(caught_up, 1), "stored": stored}


def _percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000.0
    return {f"p{q}": round(float(np.percentile(ms, q)), 2) for q in (50, 95, 99)}


def _disk_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / MB, 1)


def measure(layout: str, size: int, data_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    import engine.adapters  # noqa: F401  (imported before the clock starts: start-up is the engine's)
    from engine.records import MemoryFilter, Scope

    rng = random.Random(args.seed)
    texts = synthetic.queries(args.warmup + args.queries, seed=args.seed)
    plain = HashingEmbedder()
    embedder = KnownQueries({text: plain.embed_query(text) for text in texts})
    process = psutil.Process()
    _read_through(data_dir / "index")
    rss_before = process.memory_info().rss
    started = time.perf_counter()
    service = _open(data_dir, embedder)
    startup = time.perf_counter() - started
    rss_after = process.memory_info().rss
    await_rough_cosines()
    net = service.keeper.network
    vector_bytes = len(service.keeper.index) * plain.dim * 4 + len(net) * plain.dim * 2
    row: dict[str, Any] = {
        "startup_s": round(startup, 2),
        "rss_mb": round(rss_after / MB, 1),
        "rss_added_mb": round((rss_after - rss_before) / MB, 1),
        "vectors_mb": round(vector_bytes / MB, 1),
        "beyond_vectors_kb_per_memory": round((rss_after - rss_before - vector_bytes) / 1024 / size, 2),
        "fast_network_estimate_mb": round(net.nbytes() / MB, 1),
        "disk_mb": _disk_mb(data_dir),
    }
    spaces = [namespace_of(layout, rng.randrange(size)) for _ in texts]
    plain_asked = [(text, space, MemoryFilter()) for text, space in zip(texts, spaces, strict=True)]
    row["how_recall_ms"] = {}
    row["recall_ms"] = _timed(service, plain_asked, args.warmup, row["how_recall_ms"])
    categories = list(synthetic.CATEGORIES)
    filtered = [(text, space, MemoryFilter(categories=(rng.choice(categories),))) for text, space, _ in plain_asked]
    row["filtered_recall_ms"] = _timed(service, filtered, args.warmup)
    # The plain queries once more: each namespace has been asked before (in the spread
    # layout the first recall of a namespace builds its BM25 index, unless a saved one is
    # adopted; see the README).
    row["recall_again_ms"] = _timed(service, plain_asked, args.warmup)
    service.flush()

    hits = 0
    asked = 0
    now = datetime.now(UTC)
    for text, space in list(zip(texts, spaces, strict=True))[: args.exact_queries]:
        vector = embedder.embed_query(text)
        with net.reading():
            rows = net.rows_in([space])
            rows = rows[net.sees(Scope.whole([space]), rows)]
            exact = np.asarray(net._vectors[rows], dtype=np.float32) @ vector
            found, _ = service.recaller.nearest(net, vector, Scope.whole([space]), MemoryFilter(), now, pool=10)
        # Ties are common (texts of the same words): a found row counts when its exact
        # cosine reaches the tenth best's, within float16's rounding.
        want = min(10, len(rows))
        tenth = np.sort(exact)[-want] if want else 0.0
        cosine_of = dict(zip(rows.tolist(), exact.tolist(), strict=True))
        hits += min(want, sum(cosine_of.get(int(r), -2.0) >= tenth - 2e-3 for r in found[:10]))
        asked += want
    row["hnsw_recall_at_10"] = round(hits / asked, 3) if asked else None
    service.close()
    return row


def _read_through(directory: Path) -> None:
    """Read every file in ``directory`` once, into the page cache."""
    block = bytearray(8 * MB)
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            with open(path, "rb", buffering=0) as fh:
                while fh.readinto(block):
                    pass


def _baseline_copy(data_dir: Path) -> Path:
    """The baseline engine's own copy of a built directory, made when absent."""
    copy = data_dir.with_name(data_dir.name + "-baseline")
    if not (copy / "built.json").exists():
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(data_dir, copy, ignore=shutil.ignore_patterns(".lock"))
    return copy


def _timed(
    service: Any, asked: list[tuple[str, str, Any]], warmup: int, how: dict[str, float] | None = None
) -> dict[str, float]:
    """Percentiles of the recalls of ``asked`` (query, namespace, filter), the first
    ``warmup`` untimed; into ``how``, those of the "how …" queries among them (ranked
    twice, the second time narrowed to procedures) and how many there were."""
    from engine.procedures import asks_how

    for text, space, flt in asked[:warmup]:
        service.recall(text, namespaces=[space], top_k=10, flt=flt)
    settled = settle_service(service)
    timed: list[float] = []
    asked_how: list[float] = []
    for text, space, flt in asked[warmup:]:
        began = time.perf_counter()
        service.recall(text, namespaces=[space], top_k=10, flt=flt)
        timed.append(time.perf_counter() - began)
        if not flt.categories and asks_how(text):
            asked_how.append(timed[-1])
    if how is not None and asked_how:
        how.update(_percentiles(asked_how), n=len(asked_how))
    return _percentiles(timed) | {"settled_s": settled}


def settle_service(service: Any) -> float:
    """Wait for what a service that has just started, or been warmed up, runs in the
    background, as one that has run a while has finished: the store's start-up check
    (SQLite's ``quick_check`` reads the whole file, 4 GB at 1M; recalls beside it took
    half as long again) and what the warm-up left building (a category's own HNSW index,
    asked for by a "how" question's second ranking or a category filter), as
    ``latency.py`` does; the seconds waited. A baseline engine without either has
    nothing to wait for."""
    began = time.perf_counter()
    for wait in (getattr(service.keeper.network, "settle", None), getattr(service.store, "wait_checked", None)):
        if wait is not None:
            wait()
    return round(time.perf_counter() - began, 2)


def await_rough_cosines() -> None:
    """Wait for the torch import a service starts in the background for its exact scan
    (engine/adapters/half_cosines.py), so the timed recalls are those of a warm service;
    an engine without it (a baseline) has nothing to wait for."""
    try:
        from engine.adapters.half_cosines import half_cosines
    except ImportError:
        return
    half_cosines.load()


def rebuild(data_dir: Path, scratch: Path) -> dict[str, Any]:
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(data_dir, scratch, ignore=shutil.ignore_patterns(".lock", "index"))
    process = psutil.Process()
    started = time.perf_counter()
    service = _open(scratch, HashingEmbedder())
    seconds = time.perf_counter() - started
    rss = process.memory_info().rss
    service.close()
    shutil.rmtree(scratch, ignore_errors=True)
    return {"rebuild_s": round(seconds, 1), "rebuild_rss_mb": round(rss / MB, 1)}


def ingest(layout: str, size: int, data_dir: Path, scratch: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``--ingest-batches`` batches of new memories through the write path, on a copy."""
    from engine.records import MemoryDraft

    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(data_dir, scratch, ignore=shutil.ignore_patterns(".lock"))
    rng = random.Random(args.seed + 1)
    fresh = synthetic.memories(args.seed + 1)
    service = _open(scratch, HashingEmbedder())
    try:

        def batch() -> list[Any]:
            space = namespace_of(layout, rng.randrange(size))
            items = itertools.islice(fresh, INGEST_BATCH)
            return [MemoryDraft(item.content, namespace=space, category=item.category) for item in items]

        service.save_batch(batch())  # untimed: the first batch's one-off costs
        results = []
        wall = cpu = 0.0
        written = _written()
        for _ in range(args.ingest_batches):
            drafts = batch()
            began, began_cpu = time.perf_counter(), time.process_time()
            results += service.save_batch(drafts)
            wall += time.perf_counter() - began
            cpu += time.process_time() - began_cpu
        written = _written() - written  # the saves' own: before the flush's index files
        service.flush()
    finally:
        service.close()
        shutil.rmtree(scratch, ignore_errors=True)
    saved = len(results)
    return {
        "ingest_saved": saved,
        "ingest_created": sum(r.created for r in results),
        "ingest_per_s": round(saved / wall, 1),
        "ingest_ms_per_memory": round(wall * 1000 / saved, 3),
        "ingest_cpu_ms_per_memory": round(cpu * 1000 / saved, 3),
        "ingest_written_kb_per_memory": round(written / 1024 / saved, 1),
    }


def _written() -> int:
    """Bytes this process has had written to storage (Linux's write_bytes: the store's
    log and checkpoints, the index files), 0 where the platform does not count them."""
    try:
        return int(psutil.Process().io_counters().write_bytes)
    except (AttributeError, psutil.Error):
        return 0


def _child(
    step: str, layout: str, size: int, args: argparse.Namespace, engine_tree: Path | None = None
) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", step, "--layouts", layout, "--sizes", str(size)]
    command += ["--workdir", args.workdir, "--seed", str(args.seed), "--queries", str(args.queries)]
    command += ["--warmup", str(args.warmup), "--exact-queries", str(args.exact_queries)]
    command += ["--ingest-batches", str(args.ingest_batches)]
    if engine_tree is not None:
        command += ["--engine-tree", str(engine_tree)]
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def _data_dir(args: argparse.Namespace, layout: str, size: int) -> Path:
    return Path(args.workdir) / f"{layout}-{size}-seed{args.seed}"


def run_child(args: argparse.Namespace) -> None:
    import resource

    layout, size = args.layouts[0], args.sizes[0]
    data_dir = _data_dir(args, layout, size)
    if args.engine_tree:  # the baseline's engine, before anything imports one
        sys.path.insert(0, args.engine_tree)
        data_dir = _baseline_copy(data_dir)
    if args.child == "build":
        shutil.rmtree(data_dir, ignore_errors=True)
        result = build(layout, size, data_dir, args.seed)
        (data_dir / "built.json").write_text(json.dumps(result), encoding="utf-8")
    elif args.child == "measure":
        result = measure(layout, size, data_dir, args)
    elif args.child == "ingest":
        result = ingest(layout, size, data_dir, Path(args.workdir) / "ingest-scratch", args)
    else:
        result = rebuild(data_dir, Path(args.workdir) / "rebuild-scratch")
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--layouts", nargs="+", choices=["one", "spread"], default=["one", "spread"])
    parser.add_argument("--queries", type=int, default=300, help="timed recalls per run")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--exact-queries", type=int, default=100, help="queries for HNSW recall@10 against exact")
    parser.add_argument("--rebuild-max", type=int, default=100_000, help="largest size whose rebuild is timed")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--workdir", default=str(HERE / ".work" / "scale"), help="built data directories (kept)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "scale.json")
    parser.add_argument("--plots", default=str(HERE / "results" / "plots"), help="folder of the PNG ('' for none)")
    parser.add_argument("--cached-only", action="store_true", help="measure only what an earlier run built")
    parser.add_argument("--baseline-ref", help="git revision whose engine is measured first, on the same data")
    parser.add_argument(
        "--ingest-batches", type=int, default=10, help=f"timed batches of {INGEST_BATCH} saves per size (0: none)"
    )
    parser.add_argument("--child", choices=["build", "measure", "rebuild", "ingest"], help=argparse.SUPPRESS)
    parser.add_argument("--engine-tree", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return
    baseline_tree, baseline = None, None
    if args.baseline_ref:
        baseline_tree = Path(tempfile.mkdtemp(prefix="baseline-", dir=args.workdir)) / "tree"
        baseline = {"ref": args.baseline_ref, "revision": _archive(args.baseline_ref, baseline_tree)}
    try:
        rows = _measure_all(args, baseline_tree)
    finally:
        if baseline_tree is not None:
            shutil.rmtree(baseline_tree.parent, ignore_errors=True)
    _report(args, rows, baseline)


def _archive(ref: str, into: Path) -> str:
    """The tree of git revision ``ref`` extracted into ``into``; its short hash."""
    git = ["git", "-C", str(HERE.parent)]
    revision = subprocess.run([*git, "rev-parse", "--short", ref], check=True, capture_output=True, text=True)
    tar = subprocess.run([*git, "archive", "--format=tar", ref], check=True, capture_output=True)
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar.stdout, check=True)
    return revision.stdout.strip()


def _measure_all(args: argparse.Namespace, baseline_tree: Path | None) -> list[dict[str, Any]]:
    rows = []
    for layout in args.layouts:
        for size in args.sizes:
            data_dir = _data_dir(args, layout, size)
            row: dict[str, Any] = {"layout": layout, "size": size}
            if not (data_dir / "built.json").exists():
                if args.cached_only:
                    print(f"{layout} {size:,}: not built, left out (--cached-only)", flush=True)
                    continue
                print(f"building {layout} {size:,} …", flush=True)
                _child("build", layout, size, args)
            row["build"] = json.loads((data_dir / "built.json").read_text(encoding="utf-8"))
            if baseline_tree is not None:
                row["baseline"] = _child("measure", layout, size, args, baseline_tree)
                if args.ingest_batches:
                    row["baseline"] |= _ingested(_child("ingest", layout, size, args, baseline_tree))
            row |= _child("measure", layout, size, args)
            if args.ingest_batches:
                row |= _ingested(_child("ingest", layout, size, args))
            if size <= args.rebuild_max:
                rebuilt = _child("rebuild", layout, size, args)
                row |= {"rebuild_s": rebuilt["rebuild_s"], "rebuild_peak_rss_mb": rebuilt["peak_rss_mb"]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def _ingested(result: dict[str, Any]) -> dict[str, Any]:
    """An ingest child's answer, its peak RSS renamed (the row's own is the measuring child's)."""
    peak = result.pop("peak_rss_mb")
    return result | {"ingest_peak_rss_mb": peak}


def _report(args: argparse.Namespace, rows: list[dict[str, Any]], baseline: dict[str, str] | None) -> None:
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average": os.getloadavg()},
        "revision": subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "workdir", "child", "engine_tree")},
        "baseline": baseline,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.plots and rows:
        print(f"wrote {_plot(rows, baseline, Path(args.plots) / (args.out.stem + '-recall.png'))}")
    print()
    print(
        '| layout | N | engine | recall p50 / p95 / p99 ms | of which "how …" p50 / p95 / p99 ms (n) | '
        "one category p50 / p95 / p99 ms | "
        "asked again p50 / p95 / p99 ms | HNSW recall@10 | "
        "start-up s | rebuild s | RSS MB (loaded / peak) | KB a memory beyond the vectors | fast network MB | "
        "disk MB | ingest saves/s (CPU ms, KB written a memory) |"
    )
    print("|---|---:|---|---|---|---|---|---:|---:|---:|---|---:|---:|---:|---|")
    for row in rows:
        measured = [(baseline["revision"], row["baseline"])] if baseline is not None else []
        for engine, one in [*measured, ("this tree", row)]:
            ms = one["recall_ms"]
            filtered, again = (_three(one.get(name)) for name in ("filtered_recall_ms", "recall_again_ms"))
            how = one.get("how_recall_ms")
            hows = f"{_three(how)} ({how['n']:.0f})" if how else "—"
            print(
                f"| {row['layout']} | {row['size']:,} | {engine} | {_three(ms)} | {hows} | {filtered} | {again} | "
                f"{one['hnsw_recall_at_10']} | {one['startup_s']} | {row.get('rebuild_s', '—')} | "
                f"{one['rss_mb']} / {one['peak_rss_mb']} | {one.get('beyond_vectors_kb_per_memory', '—')} | "
                f"{one['fast_network_estimate_mb']} | {one['disk_mb']} | {_ingest(one)} |"
            )


def _plot(rows: list[dict[str, Any]], baseline: dict[str, str] | None, path: Path) -> Path:
    """Recall p50 (solid) and p95 (dashed) against N, a panel per layout."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layouts = list(dict.fromkeys(row["layout"] for row in rows))
    fig, axes = plt.subplots(1, len(layouts), figsize=(5.5 * len(layouts), 4.2), sharey=True, squeeze=False)
    engines = [("this tree", None, "tab:blue")]
    if baseline is not None:
        engines.insert(0, (baseline["revision"], "baseline", "tab:gray"))
    for ax, layout in zip(axes[0], layouts, strict=True):
        mine = sorted((row for row in rows if row["layout"] == layout), key=lambda row: row["size"])
        for label, key, colour in engines:
            done = [(row["size"], (row[key] if key else row)["recall_ms"]) for row in mine if not key or key in row]
            sizes = [size for size, _ in done]
            for percentile, style in (("p50", "-"), ("p95", "--")):
                times = [ms[percentile] for _, ms in done]
                ax.plot(sizes, times, marker="o", linestyle=style, color=colour, label=f"{label} {percentile}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("memories")
        ax.set_title("all in one namespace" if layout == "one" else f"spread over {SPREAD_NAMESPACES:,} namespaces")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("engine recall, ms (query vector given, log scale)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("twinmem recall latency against memory count (lower is better)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _ingest(one: dict[str, Any]) -> str:
    if "ingest_per_s" not in one:
        return "—"
    written = one.get("ingest_written_kb_per_memory")  # absent from results of before it was measured
    kb = f", {written} KB" if written is not None else ""
    return f"{one['ingest_per_s']} ({one['ingest_cpu_ms_per_memory']}{kb})"


def _three(ms: dict[str, float] | None) -> str:
    return f"{ms['p50']} / {ms['p95']} / {ms['p99']}" if ms else "—"


if __name__ == "__main__":
    main()
