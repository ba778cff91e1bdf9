"""The decayed score, reinforcement and the fusion ranker, with time frozen by hand."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from engine.config import HALF_LIFE_DAYS_BY_CATEGORY, FusionWeights, ScoringConfig
from engine.records import Memory, Source, TimeWindow, micros
from engine.scoring import (
    MIN_SPAN,
    UNSCALED,
    Candidate,
    SemanticScale,
    access_bonus,
    calibrated_similarity,
    current_score,
    decayed_base,
    fuse,
    rank_bonus,
    read_cosines,
    reinforced_base,
    semantic_scale,
    time_fit,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)
POLICY = ScoringConfig()


def memory(
    *,
    memory_id: str = "m-1",
    category: str = "fact",
    base: float = 0.6,
    access_count: int = 0,
    last_accessed_at: datetime = T0,
) -> Memory:
    return Memory(
        memory_id=memory_id,
        namespace="ns",
        content="text",
        category=category,
        base_score=base,
        importance=base,
        source=Source.USER_INPUT,
        created_at=T0,
        updated_at=T0,
        last_accessed_at=last_accessed_at,
        access_count=access_count,
    )


# --- decay ---------------------------------------------------------------------


@pytest.mark.parametrize(("category", "days"), sorted(HALF_LIFE_DAYS_BY_CATEGORY.items()))
def test_base_halves_after_exactly_one_half_life_of_its_category(category: str, days: float) -> None:
    m = memory(category=category, base=0.8)
    later = T0 + timedelta(days=days)
    assert decayed_base(m, later, POLICY) == pytest.approx(0.4)
    assert current_score(m, later, POLICY) == pytest.approx(0.4)
    assert current_score(m, T0 + timedelta(days=2 * days), POLICY) == pytest.approx(0.2)


def test_task_decays_much_faster_than_fact() -> None:
    week_later = T0 + timedelta(days=7)
    task = current_score(memory(category="task"), week_later, POLICY)
    fact = current_score(memory(category="fact"), week_later, POLICY)
    assert task == pytest.approx(0.3)
    assert fact > 0.58


def test_unconfigured_category_uses_the_default_half_life() -> None:
    m = memory(category="hobby", base=0.5)
    later = T0 + timedelta(days=POLICY.half_life_default_days)
    assert decayed_base(m, later, POLICY) == pytest.approx(0.25)


def test_no_decay_without_elapsed_time_and_none_backwards() -> None:
    m = memory(base=0.6, last_accessed_at=T0)
    assert decayed_base(m, T0, POLICY) == pytest.approx(0.6)
    # A clock behind the last access (clock skew between replicas) never inflates the score.
    assert decayed_base(m, T0 - timedelta(days=30), POLICY) == pytest.approx(0.6)


def test_decay_is_measured_from_the_last_access_not_creation() -> None:
    m = memory(category="task", base=0.6, last_accessed_at=T0 + timedelta(days=7))
    assert decayed_base(m, T0 + timedelta(days=7), POLICY) == pytest.approx(0.6)


@pytest.mark.parametrize(("count", "bonus"), [(0, 0.0), (1, 0.01), (5, 0.05), (20, 0.2), (21, 0.2), (1000, 0.2)])
def test_access_bonus_is_one_hundredth_per_access_capped_at_a_fifth(count: int, bonus: float) -> None:
    assert access_bonus(count, POLICY) == pytest.approx(bonus)


def test_current_score_adds_access_bonus_to_decayed_base() -> None:
    m = memory(category="event", base=0.6, access_count=7)
    assert current_score(m, T0 + timedelta(days=30), POLICY) == pytest.approx(0.3 + 0.07)


def test_current_score_never_exceeds_one() -> None:
    m = memory(base=0.95, access_count=50)
    assert current_score(m, T0, POLICY) == 1.0


def test_configured_half_life_and_bonus_are_honoured() -> None:
    policy = ScoringConfig(half_life_days={"task": 2.0}, access_bonus_step=0.1, access_bonus_cap=0.3)
    m = memory(category="task", base=0.8, access_count=5)
    assert current_score(m, T0 + timedelta(days=2), policy) == pytest.approx(0.4 + 0.3)


# --- reinforcement ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("rank", "bonus"), [(1, 0.1), (2, 0.05), (3, 0.05), (4, 0.05), (5, 0.05), (6, 0.0), (10, 0.0), (100, 0.0)]
)
def test_rank_bonus_rewards_the_top_five(rank: int, bonus: float) -> None:
    assert rank_bonus(rank, POLICY) == pytest.approx(bonus)


def test_reinforced_base_folds_decay_before_adding_the_bonus() -> None:
    m = memory(category="preference", base=0.6)
    # One half-life of silence: 0.6 -> 0.3, then the top-1 bonus; not 0.6 + 0.1.
    assert reinforced_base(m, 0.1, T0 + timedelta(days=60), POLICY) == pytest.approx(0.4)


def test_reinforced_base_with_frozen_time_adds_the_bonus() -> None:
    assert reinforced_base(memory(base=0.6), 0.05, T0, POLICY) == pytest.approx(0.65)


def test_reinforced_base_is_capped_at_one() -> None:
    assert reinforced_base(memory(base=0.97), 0.1, T0, POLICY) == 1.0


# --- similarity calibration --------------------------------------------------------


@pytest.mark.parametrize(
    ("cosine", "floor", "expected"),
    [
        (1.0, 0.0, 1.0),
        (0.4, 0.0, 0.4),
        (0.0, 0.0, 0.0),
        (-0.3, 0.0, 0.0),
        (0.73, 0.73, 0.0),
        (0.5, 0.73, 0.0),
        (0.865, 0.73, 0.5),
        (1.0, 0.73, 1.0),
        (1.0000001, 0.0, 1.0),
    ],
)
def test_calibrated_similarity_maps_floor_to_zero_and_one_to_one(cosine: float, floor: float, expected: float) -> None:
    assert calibrated_similarity(cosine, floor) == pytest.approx(expected)


def test_calibrated_similarity_rejects_a_floor_of_one() -> None:
    with pytest.raises(ValueError, match="floor"):
        calibrated_similarity(0.9, 1.0)


# --- fusion ------------------------------------------------------------------------


def _fuse(candidates: list[Candidate], *, weights: FusionWeights | None = None) -> list:
    return fuse(candidates, now=T0, weights=weights or FusionWeights(), scoring=POLICY, scale=UNSCALED)


def test_fuse_ranks_by_weighted_semantic_lexical_and_decay_signals() -> None:
    close_weak = Candidate(memory(memory_id="a", base=0.1), cosine=0.9)
    far_strong = Candidate(memory(memory_id="b", base=1.0), cosine=0.5)
    middling = Candidate(memory(memory_id="c", base=0.5), cosine=0.7, lexical=1.0)
    weights = FusionWeights(semantic=0.6, lexical=0.2, decay=0.2, semantic_power=1.0, lexical_power=1.0)
    hits = _fuse([far_strong, middling, close_weak], weights=weights)
    # c: 0.6*0.7 + 0.2*1.0 + 0.2*0.5 = 0.72; a: 0.54 + 0 + 0.02 = 0.56; b: 0.30 + 0 + 0.2 = 0.50
    assert [h.memory.memory_id for h in hits] == ["c", "a", "b"]
    assert [h.score for h in hits] == pytest.approx([0.72, 0.56, 0.50])


def test_fuse_breakdown_contributions_sum_to_the_score() -> None:
    cands = [
        Candidate(memory(memory_id="a", base=0.3, access_count=4, category="task"), cosine=0.81, lexical=0.4),
        Candidate(memory(memory_id="b", base=0.9), cosine=0.42),
    ]
    for hit in fuse(
        cands,
        now=T0 + timedelta(days=3),
        weights=FusionWeights(semantic=0.5, lexical=0.2, decay=0.3, semantic_power=1.0, lexical_power=1.0),
        scoring=POLICY,
        scale=SemanticScale(0.2, 1.0),
    ):
        parts = hit.breakdown
        total = parts.semantic.contribution + parts.lexical.contribution + parts.decay.contribution
        assert total == pytest.approx(hit.score)
        assert parts.semantic.weight == 0.5
        assert parts.lexical.weight == 0.2
        assert parts.decay.weight == 0.3
        assert parts.semantic.value == pytest.approx(calibrated_similarity(parts.cosine, 0.2))
        assert parts.decay.value == pytest.approx(current_score(hit.memory, T0 + timedelta(days=3), POLICY))
        explained = parts.as_dict()
        signals = explained["signals"]
        assert isinstance(signals, dict)
        assert set(signals) == {"semantic", "lexical", "graph", "decay", "context"}
        assert explained["semantic_scale"] == {"low": 0.2, "high": 1.0}
        total = sum(sig["contribution"] for sig in signals.values())
        assert total == pytest.approx(hit.score, abs=1e-5)


def test_fuse_raises_the_semantic_and_lexical_signals_to_their_powers() -> None:
    # Chatter the model finds closest, beside a memory a little less close that shares
    # the query's words: read as they are, the chatter wins by a hair; with the default
    # powers (the semantic signal's square root, the lexical one squared) the memory does.
    chatter = Candidate(memory(memory_id="a", base=0.5), cosine=1.0)
    fact = Candidate(memory(memory_id="b", base=0.5), cosine=0.5, lexical=0.95)
    linear = FusionWeights(semantic=0.4, lexical=0.2, decay=0.0, semantic_power=1.0, lexical_power=1.0)
    assert [h.memory.memory_id for h in _fuse([chatter, fact], weights=linear)] == ["a", "b"]
    weights = FusionWeights(semantic=0.4, lexical=0.2, decay=0.0)
    assert (weights.semantic_power, weights.lexical_power) == (0.5, 2.0)
    hits = _fuse([chatter, fact], weights=weights)
    assert [h.memory.memory_id for h in hits] == ["b", "a"]
    memory_b = hits[0].breakdown
    assert memory_b.semantic.value == pytest.approx(0.5**0.5)
    assert memory_b.lexical.value == pytest.approx(0.95**2)
    assert hits[0].score == pytest.approx(0.4 * 0.5**0.5 + 0.2 * 0.95**2)
    assert hits[1].score == pytest.approx(0.4)


def test_fuse_reads_each_cosine_less_its_typicality_by_the_centring() -> None:
    # Chatter close to the middle of its namespace (typicality 0.3), beside a particular
    # memory a little less close to the query (typicality -0.1): with centring 1 the
    # semantic signal reads 0.9 - 0.3 = 0.6 against 0.8 + 0.1 = 0.9, and the memory wins.
    chatter = Candidate(memory(memory_id="a", base=0.5), cosine=0.9, typicality=0.3)
    particular = Candidate(memory(memory_id="b", base=0.5), cosine=0.8, typicality=-0.1)
    plain = FusionWeights(semantic=1.0, lexical=0.0, decay=0.0, semantic_power=1.0, centring=0.0)
    off = _fuse([chatter, particular], weights=plain)
    assert [h.memory.memory_id for h in off] == ["a", "b"]
    assert all(h.breakdown.typicality is None and "typicality" not in h.breakdown.as_dict() for h in off)
    centred = _fuse([chatter, particular], weights=replace(plain, centring=1.0))
    assert [h.memory.memory_id for h in centred] == ["b", "a"]
    assert [h.score for h in centred] == pytest.approx([0.9, 0.6])
    best = centred[0].breakdown
    assert best.cosine == 0.8  # the cosine is explained as it is, its typicality beside it
    assert best.as_dict()["typicality"] == -0.1
    np.testing.assert_array_equal(
        read_cosines(np.array([0.9, 0.8]), np.array([0.3, -0.1]), 0.5),
        np.array([0.9, 0.8]) - 0.5 * np.array([0.3, -0.1]),
    )


def test_fuse_breaks_ties_by_memory_id() -> None:
    cands = [Candidate(memory(memory_id=mid), cosine=0.5) for mid in ("m-c", "m-a", "m-b")]
    hits = _fuse(cands)
    assert [h.memory.memory_id for h in hits] == ["m-a", "m-b", "m-c"]
    assert len({h.score for h in hits}) == 1


def test_fuse_honours_the_weights() -> None:
    semantic_only = FusionWeights(semantic=1.0, lexical=0.0, decay=0.0)
    cands = [Candidate(memory(memory_id="strong", base=1.0), 0.3), Candidate(memory(memory_id="close", base=0.0), 0.9)]
    assert [h.memory.memory_id for h in _fuse(cands, weights=semantic_only)] == ["close", "strong"]
    decay_only = FusionWeights(semantic=0.0, lexical=0.0, decay=1.0)
    assert [h.memory.memory_id for h in _fuse(cands, weights=decay_only)] == ["strong", "close"]


def test_fuse_of_nothing_is_nothing() -> None:
    assert _fuse([]) == []


# --- the semantic scale ---------------------------------------------------------------


def test_semantic_scale_runs_from_the_weakest_candidate_to_the_best() -> None:
    cosines = np.asarray([0.8, 0.9, 0.85, 0.825])  # e5-like: everything packed near 0.85
    scale = semantic_scale(cosines, floor=0.73)
    assert (scale.low, scale.high) == (0.8, 0.9)
    assert scale.values(cosines).tolist() == pytest.approx([0.0, 1.0, 0.5, 0.25])
    assert scale.values(np.asarray([0.95, 0.5])).tolist() == [1.0, 0.0]  # clipped to 0..1


def test_semantic_scale_never_starts_below_the_floor() -> None:
    scale = semantic_scale(np.asarray([0.02, 0.4, 0.6]), floor=0.1)
    assert scale.low == 0.1 and scale.values(np.asarray([0.35])).tolist() == pytest.approx([0.5])


def test_semantic_scale_never_stretches_a_narrow_band_to_the_full_range() -> None:
    # Three candidates the model finds all but alike (0.60..0.62, floor 0.2): the band
    # stretched to 0..1 is at least MIN_SPAN of 0.2..1, so their signals stay close.
    scale = semantic_scale(np.asarray([0.6, 0.61, 0.62]), floor=0.2)
    assert scale.low == pytest.approx(0.62 - MIN_SPAN * 0.8) and scale.high == 0.62
    top, bottom = scale.values(np.asarray([0.62, 0.6])).tolist()
    assert top - bottom == pytest.approx(0.02 / (MIN_SPAN * 0.8))
    assert semantic_scale(np.asarray([0.6]), floor=0.2).values(np.asarray([0.6])).tolist() == pytest.approx([1.0])
    near_floor = semantic_scale(np.asarray([0.25, 0.26]), floor=0.2)  # the band starts at the floor
    assert near_floor.low == 0.2


def test_semantic_scale_gives_nothing_when_even_the_best_is_at_the_floor() -> None:
    scale = semantic_scale(np.asarray([0.01, 0.05]), floor=0.05)
    assert scale.values(np.asarray([0.01, 0.05])).tolist() == [0.0, 0.0]
    assert semantic_scale(np.zeros(0), floor=0.3) == SemanticScale(0.3, 1.0)


def test_the_same_candidates_rank_alike_whatever_the_models_cosine_spread() -> None:
    """Two models that agree on the order of the candidates but spread their cosines
    differently (one wide, one packed near 0.9) give the same fused ranking."""
    weights = FusionWeights(semantic=0.5, lexical=0.3, decay=0.0)
    wide = [0.2, 0.5, 0.8]
    packed = [0.82, 0.85, 0.88]
    lexical = [1.0, 0.4, 0.0]

    def ranked(cosines: list[float], floor: float) -> list[str]:
        cands = [
            Candidate(memory(memory_id=f"m{i}"), cosine=c, lexical=lex)
            for i, (c, lex) in enumerate(zip(cosines, lexical, strict=True))
        ]
        scale = semantic_scale(np.asarray(cosines), floor)
        return [h.memory.memory_id for h in fuse(cands, now=T0, weights=weights, scoring=POLICY, scale=scale)]

    assert ranked(wide, 0.08) == ranked(packed, 0.73) == ["m2", "m1", "m0"]


# --- the time signal ------------------------------------------------------------------


def _at(*moments: datetime) -> np.ndarray:  # type: ignore[type-arg]
    return np.asarray([micros(moment) for moment in moments], np.int64)


WEEK = TimeWindow(T0, T0 + timedelta(days=7), "last week", "test")


def test_time_fit_is_one_inside_and_halves_per_window_length_outside() -> None:
    fit = time_fit(_at(T0, T0 + timedelta(days=3), T0 - timedelta(days=7), T0 + timedelta(days=21)), [WEEK])
    assert fit.tolist() == pytest.approx([1.0, 1.0, 0.5, 0.25])  # 21 days: two weeks past its end


def test_time_fit_counts_a_short_window_as_a_day_and_takes_the_best_window() -> None:
    hour = TimeWindow(T0, T0 + timedelta(hours=1), "an hour", "test")
    later = TimeWindow(T0 + timedelta(days=30), T0 + timedelta(days=31), "later", "test")
    fit = time_fit(_at(T0 + timedelta(hours=1, days=1), T0 + timedelta(days=30, hours=5)), [hour, later])
    assert fit.tolist() == pytest.approx([0.5, 1.0])
    assert time_fit(_at(T0), []).tolist() == [0.0]


def test_fuse_adds_the_time_signal_only_when_the_query_names_a_time() -> None:
    weights = FusionWeights(semantic=0.5, lexical=0.2, decay=0.3, context=0.1, time=0.2)
    cands = [Candidate(memory(memory_id="a"), cosine=0.8, context=0.5, next_to="b")]
    (plain,) = fuse(cands, now=T0, weights=weights, scoring=POLICY, scale=UNSCALED)
    (timed,) = fuse(cands, now=T0, weights=weights, scoring=POLICY, scale=UNSCALED, windows=[WEEK])
    assert plain.breakdown.time is None and timed.breakdown.time is not None
    assert timed.breakdown.time.value == 1.0 and timed.score == pytest.approx(plain.score + 0.2)
    explained = timed.breakdown.as_dict()
    signals = explained["signals"]
    assert isinstance(signals, dict) and explained["next_to"] == "b"
    assert sum(sig["contribution"] for sig in signals.values()) == pytest.approx(timed.score, abs=1e-5)
