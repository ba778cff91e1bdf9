"""``scoring.best_positions``: the k highest scores, by a sampled threshold or a partition, ties to the first."""

from __future__ import annotations

import numpy as np
import pytest

from engine import scoring


@pytest.mark.parametrize("n", [0, 1, 10, 4095, 4096, 50_000, 300_000])
@pytest.mark.parametrize("k", [1, 10, 200, 3000])
@pytest.mark.parametrize("shape", ["uniform", "ties", "sorted", "reversed", "one-high"])
def test_the_k_highest_whatever_their_order(n: int, k: int, shape: str) -> None:
    rng = np.random.default_rng(n + k)
    scores = {
        "uniform": rng.random(n),
        "ties": rng.integers(0, 5, n).astype(np.float64),  # a threshold many share
        "sorted": np.sort(rng.random(n)),  # a strided sample of an ordered array
        "reversed": np.sort(rng.random(n))[::-1].copy(),
        "one-high": np.r_[np.zeros(max(n - 1, 0)), np.ones(min(n, 1))],
    }[shape].astype(np.float32)
    found = scoring.best_positions(scores, k)
    assert found.dtype == np.int64
    # The k first by score, highest first, then by position: of the tied, the first.
    assert sorted(found.tolist()) == sorted(np.lexsort((np.arange(n), -scores))[:k].tolist())


def test_no_positions_for_k_zero() -> None:
    assert scoring.best_positions(np.ones(10, np.float32), 0).tolist() == []


def test_a_threshold_only_the_sample_reaches_falls_back_to_a_partition_of_all() -> None:
    """The strided sample holds the only high scores: its threshold keeps fewer than k,
    and all the scores are partitioned instead."""
    scores = np.random.default_rng(3).random(50_000).astype(np.float32) * 0.5
    scores[: 5 * scoring.THRESHOLD_STRIDE : scoring.THRESHOLD_STRIDE] = 1.0  # five sampled positions
    found = scoring.best_positions(scores, 10)
    assert sorted(found.tolist()) == sorted(np.lexsort((np.arange(len(scores)), -scores))[:10].tolist())
    assert set(range(0, 5 * scoring.THRESHOLD_STRIDE, scoring.THRESHOLD_STRIDE)) <= set(found.tolist())
