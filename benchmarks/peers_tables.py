"""The pure parts of benchmarks/peers.py: rates, the timed ingest loop and the Markdown tables
(no imports of the engine or of benchmarks/latency.py, so a unit test can load it alone)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

LABELS = {
    "twinmem": "twinmem (in process)",
    "twinmem-http": "twinmem (HTTP)",
    "twinmem-semantic": "twinmem, semantic only",
    "mem0": "mem0 (Qdrant local)",
    "mem0-faiss": "mem0 (FAISS)",
    "chroma": "Chroma",
}


def per_second(count: int, seconds: float) -> float | None:
    return round(count / seconds, 1) if count and seconds > 0 else None


def cell(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _trio(run: dict[str, Any], key: str) -> str:
    stats = run.get(key)
    if not stats or not stats.get("n"):
        return "n/a"
    return " / ".join(cell(stats[p], 1) for p in ("p50_ms", "p95_ms", "p99_ms"))


def latency_table(runs: Sequence[dict[str, Any]]) -> str:
    """One row per system and size: ingest, recall percentiles, RSS, disk."""
    lines = [
        "| system | N | single saves/s | batched saves/s | recall p50 / p95 / p99 ms | "
        "given vector p50 / p95 / p99 ms | RSS MB | disk MB | vectors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        if "error" in run:
            lines.append(
                f"| {LABELS.get(run['system'], run['system'])} | {cell(run['size'])} | failed: "
                f"{run['error'][:80]} | | | | | | |"
            )
            continue

        lines.append(
            f"| {LABELS.get(run['system'], run['system'])} | {cell(run['size'])} "
            f"| {cell(run['single']['per_s'])} | {cell(run['batched']['per_s'])} "
            f"| {_trio(run, 'recall_with_embedding')} | {_trio(run, 'recall_given_vector')} "
            f"| {cell(run.get('rss_mb'), 0)} | {cell(run.get('disk_mb'), 1)} | {run['vectors']} |"
        )
    return "\n".join(lines)


def quality_table(quality: dict[str, dict[str, dict[str, float]]]) -> str:
    """Rows: systems; columns: each data set's recall@k."""
    columns = sorted(
        {
            (name, metric)
            for scores in quality.values()
            for name, values in scores.items()
            for metric in values
            if metric.startswith("recall@")
        }
    )
    lines = [
        "| system | " + " | ".join(f"{name} {metric}" for name, metric in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for system, scores in quality.items():
        cells = [cell(scores.get(name, {}).get(metric), 3) for name, metric in columns]
        lines.append(f"| {LABELS.get(system, system)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def timed_ingest(
    items: Sequence[Any], single: int, batch: int, save_one: Callable[[Any], int], save_many: Callable[[Any], int]
) -> tuple[int, dict[str, Any]]:
    """``items[:single]`` one call each, the rest ``batch`` per call (each call returns how many it
    stored): the count stored, and each phase's count, seconds and per-call latencies."""
    stored = 0
    phases: dict[str, Any] = {}
    for phase, calls in (
        ("single", [items[at : at + 1] for at in range(min(single, len(items)))]),
        ("batched", [items[at : at + batch] for at in range(single, len(items), batch)]),
    ):
        seconds: list[float] = []
        began_all = time.perf_counter()
        for chunk in calls:
            began = time.perf_counter()
            stored += save_one(chunk[0]) if phase == "single" else save_many(chunk)
            seconds.append(time.perf_counter() - began)
        phases[phase] = {
            "count": sum(len(chunk) for chunk in calls),
            "seconds": round(time.perf_counter() - began_all, 3),
            "latencies": seconds,
        }
    phases["batched"] |= {"batch_size": batch, "saves_deferred": None}
    return stored, phases
