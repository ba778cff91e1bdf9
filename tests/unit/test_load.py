"""The load benchmark's pure parts: the traffic mix, the step summary, the check that
every acknowledged write is read back, and the table and plots it writes."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks.load import markdown, plots, profile_shares
from benchmarks.loadgen import (
    DELETE,
    RECALL,
    SAVE,
    UNANSWERED,
    UPDATE,
    Ack,
    Mix,
    Readback,
    expectations,
    step_summary,
    verify,
)


def test_the_mix_draws_each_operation_at_its_share() -> None:
    rng = random.Random(5)
    drawn = Counter(Mix().pick(rng, can_change=True) for _ in range(40_000))
    assert drawn[RECALL] / 40_000 == pytest.approx(0.80, abs=0.01)
    assert drawn[SAVE] / 40_000 == pytest.approx(0.15, abs=0.01)
    assert drawn[UPDATE] / 40_000 == pytest.approx(0.025, abs=0.005)
    assert drawn[DELETE] / 40_000 == pytest.approx(0.025, abs=0.005)


def test_without_a_memory_of_its_own_a_worker_saves_instead_of_changing() -> None:
    rng = random.Random(5)
    drawn = Counter(Mix(recall=0.0, save=0.0, change=1.0).pick(rng, can_change=False) for _ in range(100))
    assert drawn == Counter({SAVE: 100})


def test_a_mix_that_does_not_add_up_is_refused() -> None:
    with pytest.raises(ValueError, match="add up to 1"):
        Mix(recall=0.8, save=0.15, change=0.1)


def test_the_summary_times_only_the_window_and_counts_unexpected_answers_as_errors() -> None:
    records = [(RECALL, 200, ms / 1000, True) for ms in range(1, 101)]
    records += [(SAVE, 201, 0.5, True), (SAVE, 200, 0.5, True), (DELETE, 404, 0.01, True)]
    records += [(RECALL, 500, 9.0, False)]  # a warm-up request: neither timed nor an error
    summary = step_summary(records, elapsed=2.0)
    assert summary["requests"] == 103
    assert summary["requests_per_s"] == 51.5
    assert summary["errors"] == 1
    assert summary["by_operation"][RECALL]["p50_ms"] == pytest.approx(50.5)
    assert summary["by_operation"][RECALL]["p99_ms"] == pytest.approx(99.01)
    assert summary["by_operation"][UPDATE] == {"n": 0}
    assert summary["status"][SAVE] == {"201": 1, "200": 1}
    assert summary["status"][DELETE] == {"404": 1}


def _acks() -> list[Ack]:
    return [
        Ack(SAVE, "kept", 1, "a", True, worker=0, seq=0),
        Ack(UPDATE, "kept", 2, "a (revised)", True, worker=0, seq=2),
        Ack(SAVE, "gone", 1, "b", True, worker=1, seq=1),
        Ack(DELETE, "gone", 2, None, True, worker=1, seq=3),
        # another worker's save folded into "kept": its version is checked, its fate is not ours
        Ack(SAVE, "kept", 2, "a (revised)", False, worker=1, seq=4),
        Ack(SAVE, "lost", 1, "c", True, worker=0, seq=5),
        Ack(UNANSWERED, "lost", 0, None, True, worker=0, seq=6),
    ]


def test_expectations_follow_each_workers_acknowledgements() -> None:
    expected = expectations(_acks())
    assert expected["kept"].versions == {1: "a", 2: "a (revised)"} and expected["kept"].gone is False
    assert expected["gone"].versions == {1: "b"} and expected["gone"].gone is True
    assert expected["lost"].gone is None  # a change without an answer: either state is right


def test_verify_passes_when_the_store_holds_what_was_acknowledged() -> None:
    found = {
        "kept": Readback(200, {1: "a", 2: "a (revised)", 3: "a (revised)"}),  # later superseded: fine
        "gone": Readback(404, {1: "b", 2: "b"}),
        "lost": Readback(404, {1: "c"}),
    }
    assert verify(expectations(_acks()), found) == []


@pytest.mark.parametrize(
    ("memory_id", "readback", "problem"),
    [
        ("kept", Readback(200, {1: "a"}), "acknowledged version 2 is not in its history"),
        ("kept", Readback(200, {1: "a", 2: "a (edited)"}), "version 2 holds 'a (edited)'"),
        ("kept", Readback(404, {1: "a", 2: "a (revised)"}), "never deleted, but GET answers 404"),
        ("kept", Readback(200, None), "but no history"),
        ("gone", Readback(200, {1: "b"}), "acknowledged as deleted, but GET answers 200"),
    ],
)
def test_verify_reports_each_acknowledged_write_the_store_contradicts(
    memory_id: str, readback: Readback, problem: str
) -> None:
    found = {
        "kept": Readback(200, {1: "a", 2: "a (revised)"}),
        "gone": Readback(404, {1: "b", 2: "b"}),
        "lost": Readback(200, {1: "c"}),
        memory_id: readback,
    }
    problems = verify(expectations(_acks()), found)
    assert len(problems) == 1 and problems[0].startswith(memory_id) and problem in problems[0]


def test_verify_reports_a_memory_that_was_not_read_back() -> None:
    assert verify(expectations(_acks()[:2]), {}) == ["kept: not read back"]


def _results() -> dict[str, Any]:
    def step(concurrency: int, rate: float) -> dict[str, Any]:
        timing = {"n": 10, "p50_ms": 10.0 * concurrency, "p95_ms": 20.0 * concurrency, "p99_ms": 30.0 * concurrency}
        return {
            "concurrency": concurrency,
            "requests": 10,
            "requests_per_s": rate,
            "seconds": 30.0,
            "overall": timing,
            "by_operation": {RECALL: timing, SAVE: timing, UPDATE: {"n": 0}, DELETE: timing},
            "errors": 0,
            "verification": {"memories_checked": 12, "problems": 0},
            "server_cpu_s": 45.0,
            "generator_cpu_s": 6.0,
            "uptime_after": {"load_average": [2.5, 2.0, 1.5]},
        }

    return {
        "args": {"memories": 10_000},
        "environment": {"cpus_usable": 2},
        "server": {"processes": 1},
        "steps": [step(1, 20.0), step(4, 31.5)],
        "after_restart": {"memories_checked": 24, "problems": 0, "deleted": 3},
    }


def test_the_table_has_a_row_per_step_and_the_restart_check() -> None:
    table = markdown(_results())
    assert (
        "| 4 | 31.5 | 40 / 80 / 120 | 40 / 80 / 120 | 40 / 80 / 120 | – | 40 / 80 / 120 "
        "| 0 | 12 of 12 | 1.50 / 0.20 | 4500 | 2.5 |" in table
    )
    assert "24 of 24 memories written under load read back as acknowledged (3 of them deleted)" in table


def test_the_plots_are_written_as_png(tmp_path: Path) -> None:
    written = plots(_results(), tmp_path / "plots", "load-10k")
    assert [path.name for path in written] == ["load-10k-throughput.png", "load-10k-p95.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_profile_samples_are_shared_out_by_the_first_part_their_stack_matches() -> None:
    collapsed = [
        "_worker (concurrent/futures/thread.py:81);Bm25Scorer.__init__ (engine/adapters/bm25_lexical.py:37) 30",
        "recall (api/controllers.py:90);embed_query (engine/adapters/embedders.py:60);forward (torch/nn/x.py:1) 50",
        "recall (api/controllers.py:90);Recaller.rank (engine/recall.py:136) 15",
        "_worker (concurrent/futures/thread.py:81);Condition.wait (threading.py:327) 5",
        "",
    ]
    found = profile_shares(collapsed)
    assert found["samples"] == 100
    share = found["share"]
    assert (share["BM25 rebuilds"], share["embedding"], share["engine, other"], share["other"]) == (
        0.3,
        0.5,
        0.15,
        0.05,
    )
    assert share["HTTP"] == 0.0
