"""The PNGs of benchmarks/peers.py: retrieval quality as grouped bars per system, recall latency
per system (p50 and p95, with the query embedded by the system and with its vector given), and
recall latency against the number of memories when more than one size ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

LABELS = {
    "twinmem": "twinmem\n(in process)",
    "twinmem-http": "twinmem\n(HTTP)",
    "twinmem-semantic": "twinmem\nsemantic only",
    "mem0": "mem0\n(Qdrant local)",
    "mem0-faiss": "mem0\n(FAISS)",
    "chroma": "Chroma",
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def quality_bars(quality: dict[str, dict[str, dict[str, float]]], path: Path) -> Path:
    plt = _pyplot()
    systems = list(quality)
    metrics = sorted(
        {(name, m) for scores in quality.values() for name, v in scores.items() for m in v if m.startswith("recall@")}
    )
    width = 0.8 / max(1, len(metrics))
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(systems)), 4.5))
    for i, (name, metric) in enumerate(metrics):
        values = [quality[s].get(name, {}).get(metric, 0.0) for s in systems]
        xs = [x + (i - (len(metrics) - 1) / 2) * width for x in range(len(systems))]
        bars = ax.bar(xs, values, width, label=f"{name} {metric}")
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    ax.set_xticks(range(len(systems)), [LABELS.get(s, s) for s in systems], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("recall")
    ax.set_title("Retrieval quality, same MiniLM vectors (higher is better)")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def latency_bars(runs: list[dict[str, Any]], size: int, path: Path) -> Path:
    plt = _pyplot()
    runs = [r for r in runs if r.get("size") == size and "error" not in r]
    systems = [r["system"] for r in runs]
    fig, axes = plt.subplots(1, 2, figsize=(max(9, 2.2 * len(systems)), 4.5), sharey=False)
    for ax, key, title in (
        (axes[0], "recall_with_embedding", "query embedded by the system"),
        (axes[1], "recall_given_vector", "query vector given"),
    ):
        for i, (percentile, offset) in enumerate((("p50_ms", -0.2), ("p95_ms", 0.2))):
            values = [(r.get(key) or {}).get(percentile) or 0.0 for r in runs]
            bars = ax.bar(
                [x + offset for x in range(len(runs))],
                values,
                0.4,
                label=percentile.split("_")[0],
                color=("tab:blue", "tab:orange")[i],
            )
            ax.bar_label(bars, labels=[f"{v:.1f}" if v else "n/a" for v in values], fontsize=7, padding=1)
        for x, r in enumerate(runs):
            if not (r.get(key) or {}).get("n"):
                ax.annotate("n/a", (x, 0.5), xycoords=("data", "axes fraction"), ha="center", fontsize=8)
        ax.set_xticks(range(len(runs)), [LABELS.get(s, s) for s in systems], fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("ms (log scale)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(f"Recall latency, top 10 of {size:,} memories (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def latency_by_size(runs: list[dict[str, Any]], path: Path) -> Path:
    """Recall p50 and p95 against N per system, with the query embedded and with its vector given."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    systems = list(dict.fromkeys(r["system"] for r in runs))
    colours = dict(zip(systems, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    for ax, key, title in (
        (axes[0], "recall_with_embedding", "query embedded by the system"),
        (axes[1], "recall_given_vector", "query vector given"),
    ):
        for system in systems:
            done = sorted(
                (r["size"], r[key]) for r in runs if r["system"] == system and "error" not in r and r[key].get("n")
            )
            if not done:
                continue
            label = LABELS.get(system, system).replace("\n", " ")
            sizes = [size for size, _ in done]
            ax.plot(sizes, [t["p50_ms"] for _, t in done], marker="o", color=colours[system], label=f"{label} p50")
            ax.plot(sizes, [t["p95_ms"] for _, t in done], marker="x", linestyle="--", color=colours[system])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("memories in the namespace")
        ax.set_title(f"{title} (solid p50, dashed p95)", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("recall latency, ms (log scale)")
    axes[0].legend(fontsize=7)
    fig.suptitle("Recall latency against memory count (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw(report: dict[str, Any], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    if report.get("quality"):
        written.append(quality_bars(report["quality"], folder / "peers-quality.png"))
    sizes = sorted({r["size"] for r in report["latency"]})
    if sizes:
        written.append(latency_bars(report["latency"], sizes[-1], folder / "peers-recall-latency.png"))
    if len(sizes) > 1:
        written.append(latency_by_size(report["latency"], folder / "peers-latency-by-size.png"))
    return written
