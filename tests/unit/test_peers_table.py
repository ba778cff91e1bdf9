"""The pure parts of benchmarks/peers.py: rates and the Markdown tables its numbers are read from."""

from __future__ import annotations

from typing import Any

from benchmarks.peers_tables import latency_table, per_second, quality_table, timed_ingest


def _run(system: str, *, given: dict[str, Any]) -> dict[str, Any]:
    return {
        "system": system,
        "size": 10_000,
        "single": {"per_s": per_second(1000, 4.0)},
        "batched": {"per_s": per_second(9000, 30.0)},
        "recall_with_embedding": {"n": 4, "p50_ms": 16.0, "p95_ms": 28.5, "p99_ms": 29.7},
        "recall_given_vector": given,
        "rss_mb": 812.4,
        "disk_mb": 61.25,
        "vectors": "given",
    }


def test_a_rate_needs_a_count_and_a_duration() -> None:
    assert per_second(9000, 30.0) == 300.0
    assert per_second(0, 3.0) is None
    assert per_second(10, 0.0) is None


def test_latency_rows_show_rates_percentiles_and_what_a_system_cannot_do() -> None:
    table = latency_table(
        [
            _run("twinmem", given={"n": 2, "p50_ms": 2.5, "p95_ms": 3.0, "p99_ms": 3.0}),
            _run("twinmem-http", given={"n": 0}),
            {"system": "mem0-faiss", "size": 10_000, "error": "exit 1: ValueError: boom"},
        ]
    ).splitlines()
    assert table[0].startswith("| system | N | single saves/s | batched saves/s |")
    assert len(table) == 5
    in_process, http, failed = table[2:]
    assert in_process.startswith("| twinmem (in process) | 10,000 | 250.0 | 300.0 | 16.0 / 28.5 / 29.7 |")
    assert "| 2.5 / 3.0 / 3.0 |" in in_process  # p50 / p95 / p99 of the given-vector recalls
    assert "| 812 | 61.2 | given |" in in_process
    assert "| n/a |" in http  # no route takes a query vector
    assert "failed: exit 1: ValueError: boom" in failed


def test_quality_rows_align_every_data_set_and_mark_what_is_missing() -> None:
    table = quality_table(
        {
            "twinmem": {"LME": {"recall@5": 0.7711, "recall@10": 0.8633, "p50_ms": 39.2}, "MADial": {"recall@5": 0.5}},
            "chroma": {"LME": {"recall@5": 0.6122, "recall@10": 0.7522}},
        }
    ).splitlines()
    assert table[0] == "| system | LME recall@10 | LME recall@5 | MADial recall@5 |"
    assert table[2] == "| twinmem (in process) | 0.863 | 0.771 | 0.500 |"
    assert table[3] == "| Chroma | 0.752 | 0.612 | n/a |"


def test_ingest_saves_the_first_ones_one_call_each_and_the_rest_in_batches() -> None:
    calls: list[list[int]] = []

    def one(item: int) -> int:
        calls.append([item])
        return 1

    def many(chunk: list[int]) -> int:
        calls.append(list(chunk))
        return len(chunk) - 1  # one of each batch folded into an earlier memory

    stored, phases = timed_ingest(list(range(10)), 3, 4, one, many)
    assert calls == [[0], [1], [2], [3, 4, 5, 6], [7, 8, 9]]
    assert stored == 3 + 3 + 2
    assert phases["single"]["count"] == 3 and len(phases["single"]["latencies"]) == 3
    assert phases["batched"]["count"] == 7 and len(phases["batched"]["latencies"]) == 2
    assert phases["batched"]["batch_size"] == 4
