"""Sustained mixed traffic over HTTP at increasing concurrency.

    .venv/bin/python benchmarks/load.py                       # 10,000 memories; 1, 2, 4, 8, 16, 32 in flight, 30 s each
    .venv/bin/python benchmarks/load.py --memories 1000 --concurrency 1 4 --duration 5   # a quick look

1. A data directory is filled with ``--memories`` synthetic memories in one namespace, as
   ``latency.py --bulk`` fills one (``Store.insert`` in batches, then the index and the fast
   network catch up; not the write path), with vectors precomputed by the configured
   embedder (USE by default) and cached with ``sessions.py``'s (``--vectors``).
2. ``twinmem serve`` starts on it (a real process on a loopback port, the README's default
   start-up: local mode, one process; the embedded store allows one, see ``SERVER_PROCESSES``).
3. For each ``--concurrency``, ``loadgen.py`` runs as a separate process: that many requests
   in flight, 80% recall / 15% save / 5% update or delete, ``--warmup`` seconds untimed and
   ``--duration`` timed, then every write it saw acknowledged is read back through the API.
   The server's CPU time and the load average are taken around each step.
4. The server is stopped (gracefully) and started again on the same directory, and every
   acknowledgement of every step is checked once more.

Requests per second, p50/p95/p99 per operation and overall, errors by status (with their
bodies) and the read-back go to ``--out`` (JSON) and a Markdown table; ``--plots DIR``
draws throughput and p95 against concurrency (PNG, matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from latency import bulk_ingest, environment, installed_command, log, rss_mb, running_server  # noqa: E402
from loadgen import OPERATIONS  # noqa: E402
from sessions import memory_vectors  # noqa: E402

from engine.adapters import open_service  # noqa: E402
from engine.config import load_config  # noqa: E402

# The embedded store (one SQLite file) takes an exclusive lock on its data directory:
# the HNSW index and the fast network live in the serving process and its write lock is
# process-local, so a second process on the same directory is refused at start-up.
SERVER_PROCESSES = 1
SERVER_PROCESSES_WHY = (
    "embedded mode: open_service takes an exclusive flock on the data directory (the HNSW index, "
    "the fast network and the write lock are per process), so one process serves it"
)


def uptime() -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    return {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_average": [one, five, fifteen]}


def _shown(value: Any) -> Any:
    """A path under the checkout as a relative one, so the results name no machine's folders."""
    if isinstance(value, str) and value.startswith(str(HERE.parent) + os.sep):
        return os.path.relpath(value, HERE.parent)
    return value


def prepare(data_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Fill ``data_dir`` with the memories; the service is closed again (its index saved)."""
    config = load_config(env={}, data_dir=data_dir)
    service = open_service(config)
    try:
        folder = Path(args.vectors or HERE / ".work" / f"sessions-vectors-{config.embedding.provider}")
        vectors, embed_seconds = memory_vectors(
            config.embedding.provider, service.embedder.name, args.memories, folder, args.embed_workers
        )
        ingest = bulk_ingest(service, args.memories, 2048, seed=42, vectors=vectors)
        ingest["embedding_seconds"] = round(embed_seconds, 1)  # 0: the vectors were read from the cache
        ingest["embedder"] = service.embedder.name
    finally:
        service.close()
    return ingest


# Where the server's sampled time goes (``--profile``): the first rule a stack matches names it.
PROFILE_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("BM25 rebuilds", ("Bm25Scorer.__init__",)),
    ("embedding", ("sentence_transformers", "transformers/", "torch/", "adapters/embedders.py")),
    ("BM25 scoring", ("bm25",)),
    ("HNSW", ("hnsw_index.py",)),
    ("audit log", ("security_store.py",)),
    ("memory store", ("sqlite_store.py",)),
    ("engine, other", ("engine/",)),
    ("HTTP", ("litestar", "uvicorn", "api/", "h11", "httptools", "msgspec")),
)
OTHER = "other"


def profile_shares(collapsed: Sequence[str]) -> dict[str, Any]:
    """Shares of py-spy's samples (collapsed stacks, ``frame;frame;… count`` a line) by
    ``PROFILE_PARTS``; what matches none (thread pool, event loop, …) is ``other``."""
    counts = dict.fromkeys([name for name, _ in PROFILE_PARTS] + [OTHER], 0)
    for line in collapsed:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack:
            continue
        part = next((name for name, marks in PROFILE_PARTS if any(mark in stack for mark in marks)), OTHER)
        counts[part] += int(count)
    total = sum(counts.values())
    return {"samples": total, "share": {name: round(n / total, 4) if total else 0.0 for name, n in counts.items()}}


def bm25_build_cost(size: int, seed: int = 42, repeat: int = 5) -> dict[str, Any]:
    """What one build of the namespace's BM25 index costs (the fast network rebuilds it
    after writes; see ``engine.fast_network._Lexicon``): the same memories' search terms,
    coded as the network codes them, built ``repeat`` times in this process; the median."""
    import itertools
    import resource

    import synthetic

    from engine import text
    from engine.adapters.bm25_lexical import Bm25Scorer

    codes: dict[str, int] = {}
    docs = [
        tuple(codes.setdefault(term, len(codes)) for term in text.terms(item.content))
        for item in itertools.islice(synthetic.memories(seed), size)
    ]
    walls, cpus = [], []
    for _ in range(repeat):
        before, began = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        Bm25Scorer.of_documents(docs)
        after = resource.getrusage(resource.RUSAGE_SELF)
        walls.append(time.perf_counter() - began)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {
        "documents": size,
        "wall_s": round(sorted(walls)[repeat // 2], 3),
        "cpu_s": round(sorted(cpus)[repeat // 2], 3),
    }


def run_step(base: str, server: Any, concurrency: int, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    out = workdir / f"step-{concurrency:03d}.json"
    samples = workdir / f"step-{concurrency:03d}.prof"
    command = [
        sys.executable, str(HERE / "loadgen.py"), "--base", base, "--concurrency", str(concurrency),
        "--duration", str(args.duration), "--warmup", str(args.warmup), "--seed", str(1000 + concurrency),
        "--mix", *map(str, args.mix), "--server-pid", str(server.pid), "--out", str(out),
    ]  # fmt: skip
    if args.profile:
        command += ["--profile-out", str(samples), "--py-spy", installed_command("py-spy", "pip install -e '.[bench]'")]
    before = uptime()
    began = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - began
    step: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    acks = step.pop("acks")
    step["acks_file"] = out.name
    step["acks_count"] = len(acks)
    step["server_rss_mb"] = rss_mb(server)
    step["generator_wall_s"] = round(wall, 2)
    step["uptime_before"], step["uptime_after"] = before, uptime()
    if args.profile:
        step["profile"] = profile_shares(samples.read_text(encoding="utf-8").splitlines())
    return step


def _trio(summary: dict[str, Any]) -> str:
    if not summary.get("n"):
        return "–"
    return f"{summary['p50_ms']:.0f} / {summary['p95_ms']:.0f} / {summary['p99_ms']:.0f}"


def markdown(results: dict[str, Any]) -> str:
    head = (
        "| in flight | requests/s | all p50 / p95 / p99 ms | recall | save | update | delete "
        "| errors | writes read back | CPU cores used: server / load generator | server CPU ms per request "
        "| load average |"
    )
    lines = [head, "|" + "---:|" * 2 + "---|" * 5 + "---:|---|---|---:|---|"]
    for step in results["steps"]:
        ops = step["by_operation"]
        check = step["verification"]
        written = check["memories_checked"]
        read_back = f"{written - check['problems']:,} of {written:,}"
        cores = f"{step['server_cpu_s'] / step['seconds']:.2f} / {step['generator_cpu_s'] / step['seconds']:.2f}"
        per_request = 1000 * step["server_cpu_s"] / step["requests"] if step["requests"] else 0.0
        load = step["uptime_after"]["load_average"][0]
        lines.append(
            f"| {step['concurrency']} | {step['requests_per_s']:.1f} | {_trio(step['overall'])} "
            + "".join(f"| {_trio(ops[op])} " for op in OPERATIONS)
            + f"| {step['errors']} | {read_back} | {cores} | {per_request:.0f} | {load:.1f} |"
        )
    profiled = [step for step in results["steps"] if "profile" in step]
    if profiled:
        parts = list(profiled[0]["profile"]["share"])
        lines += ["", "| in flight | " + " | ".join(parts) + " | samples |", "|---:|" + "---:|" * (len(parts) + 1)]
        for step in profiled:
            share = step["profile"]["share"]
            cells = " | ".join(f"{100 * share[part]:.0f}%" for part in parts)
            lines.append(f"| {step['concurrency']} | {cells} | {step['profile']['samples']:,} |")
    build = results.get("bm25_build")
    if build:
        lines.append(
            f"\nOne build of the namespace's BM25 index ({build['documents']:,} memories, as the fast network "
            f"rebuilds it after writes): {build['cpu_s']:.2f} s of CPU, {build['wall_s']:.2f} s of wall time."
        )
    restart = results.get("after_restart")
    if restart:
        lines.append(
            f"\nAfter a restart: {restart['memories_checked'] - restart['problems']:,} of "
            f"{restart['memories_checked']:,} memories written under load read back as acknowledged "
            f"({restart['deleted']:,} of them deleted)."
        )
    return "\n".join(lines)


def plots(results: dict[str, Any], folder: Path, stem: str) -> list[Path]:
    """Throughput, and p95 per operation, against concurrency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    steps = results["steps"]
    levels = [step["concurrency"] for step in steps]
    loads = [step["uptime_after"]["load_average"][0] for step in steps]
    caption = (
        f"{results['args']['memories']:,} memories, {results['server']['processes']} server process, "
        f"{results['environment']['cpus_usable']} CPUs shared with the load generator\n"
        f"(1-minute load average {min(loads):.0f}–{max(loads):.0f} after the steps)"
    )
    written: list[Path] = []

    figure, axes = plt.subplots(figsize=(6.4, 4.4))
    axes.plot(levels, [step["requests_per_s"] for step in steps], marker="o")
    axes.set_xscale("log", base=2)
    axes.set_xticks(levels, [str(level) for level in levels])
    axes.set_xlabel("requests in flight")
    axes.set_ylabel("requests / s")
    axes.set_ylim(bottom=0)
    axes.set_title(f"Throughput over HTTP: 80% recall, 15% save, 5% update or delete\n{caption}", fontsize=9)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    written.append(folder / f"{stem}-throughput.png")
    figure.savefig(written[-1], dpi=110)
    plt.close(figure)

    figure, axes = plt.subplots(figsize=(6.4, 4.4))
    for op in ("overall", *OPERATIONS):
        points = [
            (step["concurrency"], (step["overall"] if op == "overall" else step["by_operation"][op]).get("p95_ms"))
            for step in steps
        ]
        points = [(x, y) for x, y in points if y is not None]
        if points:
            style = {"color": "black", "linestyle": "--"} if op == "overall" else {}
            axes.plot(*zip(*points, strict=True), marker="o", label=op, **style)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xticks(levels, [str(level) for level in levels])
    axes.set_xlabel("requests in flight")
    axes.set_ylabel("p95 latency, ms")
    axes.set_title(f"p95 latency per operation\n{caption}", fontsize=9)
    axes.grid(alpha=0.3, which="both")
    axes.legend()
    figure.tight_layout()
    written.append(folder / f"{stem}-p95.png")
    figure.savefig(written[-1], dpi=110)
    plt.close(figure)
    return written


def report(results: dict[str, Any], folder: str, stem: str) -> None:
    print(markdown(results))
    if folder:
        for path in plots(results, Path(folder), stem):
            log(f"wrote {path}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000, help="memories in the namespace before the load")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--duration", type=float, default=30.0, help="timed seconds per step")
    parser.add_argument("--warmup", type=float, default=3.0, help="untimed seconds of load before each step")
    parser.add_argument("--mix", type=float, nargs=3, default=(0.80, 0.15, 0.05), help="recall, save, update/delete")
    parser.add_argument("--vectors", default=None, help="folder caching the memories' vectors (sessions.py's)")
    parser.add_argument("--embed-workers", type=int, default=2, help="processes embedding uncached memories")
    parser.add_argument("--serve-timeout-s", type=float, default=300.0)
    parser.add_argument("--no-restart-check", action="store_true", help="skip the read-back after a restart")
    parser.add_argument("--out", default=None, help="default: benchmarks/results/load-<N>.json")
    parser.add_argument("--plots", default=str(HERE / "results" / "plots"), help="folder for the PNGs ('' for none)")
    parser.add_argument("--profile", action="store_true", help="sample the server with py-spy in each window")
    parser.add_argument("--replot", metavar="JSON", help="only print the table and draw the plots of a results file")
    parser.add_argument("--keep", action="store_true", help="keep the data directory under benchmarks/.work/")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replot:
        results = json.loads(Path(args.replot).read_text(encoding="utf-8"))
        report(results, args.plots, Path(args.replot).stem)
        return 0
    size = f"{args.memories // 1000}k" if args.memories % 1000 == 0 else str(args.memories)
    out = Path(args.out or HERE / "results" / f"load-{size}.json")
    (HERE / ".work").mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="load-", dir=HERE / ".work"))
    data_dir = workdir / "data"
    results: dict[str, Any] = {
        "args": {k: _shown(v) for k, v in vars(args).items()},
        "environment": environment(),
        "uptime_start": uptime(),
    }
    try:
        log(f"filling {data_dir} with {args.memories:,} memories")
        results["prepare"] = prepare(data_dir, args)
        results["bm25_build"] = bm25_build_cost(args.memories)
        results["server"] = {"processes": SERVER_PROCESSES, "why": SERVER_PROCESSES_WHY, "auth": "local"}
        shutdown: dict[str, Any] = {}
        with running_server(data_dir, workdir / "serve.log", args.serve_timeout_s, shutdown) as (server, base, ready):
            results["server"]["ready_s"] = round(ready, 2)
            results["steps"] = []
            for concurrency in args.concurrency:
                log(f"{concurrency} in flight for {args.warmup:g} + {args.duration:g} s")
                step = run_step(base, server, concurrency, workdir, args)
                results["steps"].append(step)
                log(
                    f"  {step['requests_per_s']} requests/s, p95 {step['overall'].get('p95_ms')} ms, "
                    f"{step['errors']} errors, {step['verification']['problems']} read-back problems"
                )
        results["server"]["shutdown"] = shutdown
        if not args.no_restart_check:
            log("restarting the server to read every acknowledged write back")
            again: dict[str, Any] = {}
            with running_server(data_dir, workdir / "serve-again.log", args.serve_timeout_s, again) as (_, base, _):
                check = workdir / "after-restart.json"
                files = [str(workdir / step["acks_file"]) for step in results["steps"]]
                subprocess.run(
                    [sys.executable, str(HERE / "loadgen.py"), "--base", base, "--verify", *files, "--out", str(check)],
                    check=True,
                )
            results["after_restart"] = json.loads(check.read_text(encoding="utf-8"))
            results["after_restart"]["shutdown"] = again
        results["uptime_end"] = uptime()
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    report(results, args.plots, out.stem)
    failed = sum(step["errors"] + step["verification"]["problems"] for step in results["steps"])
    failed += results.get("after_restart", {}).get("problems", 0)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
