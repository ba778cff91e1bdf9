"""Pure scoring: the decayed score, reinforcement, and the fusion ranker.

Nothing here reads a clock or touches storage: ``now`` and the configuration
are passed in, so every rule can be tested with frozen time.

The decayed score (DESIGN.md)::

    current = min(1, base * 0.5 ** (Δt / half_life) + min(cap, step * access_count))

with Δt measured from the last reinforcement (``last_accessed_at``). When a
recall reinforces a memory, the decay so far is folded into its base before the
rank bonus is added, so a memory recalled today after a month of silence keeps
the month's decay instead of springing back to its original base.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from engine.config import FusionWeights, ScoringConfig
from engine.records import Memory, TimeWindow, micros

ScoreT = TypeVar("ScoreT", bound=np.floating)
SECONDS_PER_DAY = 86_400.0
MICROS_PER_DAY = 86_400_000_000
GRAPH_QUERY_ENTITY = 1.0
GRAPH_NEIGHBOUR = 0.5
TOP_RANKS_REINFORCED = 5


# ``best_positions`` first keeps the scores at or above a threshold read from one in
# THRESHOLD_STRIDE of them, where they number at least THRESHOLD_FROM.
THRESHOLD_STRIDE = 16
THRESHOLD_FROM = 4096


def best_positions(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.int64]:
    """The positions of the ``k`` highest of ``scores`` (all where fewer), in no order;
    of those tied at the last place, the first. So the choice among ties depends on
    the scores' order alone, not on how they were found (a partition breaks them by
    where its pivots fell). Over many scores a partition of them all costs about 10 ns
    a score; here a threshold read from a strided sample (about the ``2k``-th highest)
    keeps some ``2k`` of them first, and only those are partitioned, where at least
    ``k`` reach it (else all are). The scores hold no NaN (none of the engine's do):
    a NaN would be neither above nor tied, and fewer than ``k`` would come back."""
    n = len(scores)
    if n <= k:
        return np.arange(n, dtype=np.int64)
    if k <= 0:
        return np.zeros(0, np.int64)
    kept = None  # ascending positions that hold the k highest
    if n >= THRESHOLD_FROM and 2 * k * THRESHOLD_STRIDE < n:
        sample = scores[::THRESHOLD_STRIDE]
        at = len(sample) - 1 - (2 * k) // THRESHOLD_STRIDE
        kept = np.flatnonzero(scores >= np.partition(sample, at)[at])
        if len(kept) < k:
            kept = None
    values = scores if kept is None else scores[kept]
    last = np.partition(values, len(values) - k)[len(values) - k]  # the k-th highest
    above = np.flatnonzero(values > last)
    tied = np.flatnonzero(values == last)[: k - len(above)]
    found = np.concatenate([above, tied])
    return (found if kept is None else kept[found]).astype(np.int64, copy=False)


def best_of(
    rows: npt.NDArray[np.int64], scores: npt.NDArray[ScoreT], k: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[ScoreT]]:
    """The ``k`` highest-scored of ``rows`` and their scores (all where fewer), in no
    order (``best_positions``)."""
    if len(rows) <= k:
        return rows, scores
    taken = best_positions(scores, k)
    return rows[taken], scores[taken]


def decayed_base(memory: Memory, now: datetime, scoring: ScoringConfig) -> float:
    """The base score after exponential decay since the last reinforcement."""
    elapsed_days = max(0.0, (now - memory.last_accessed_at).total_seconds() / SECONDS_PER_DAY)
    return float(memory.base_score * 0.5 ** (elapsed_days / scoring.half_life(memory.category)))


def access_bonus(access_count: int, scoring: ScoringConfig) -> float:
    return min(scoring.access_bonus_cap, scoring.access_bonus_step * access_count)


def current_score(memory: Memory, now: datetime, scoring: ScoringConfig) -> float:
    """The decayed score of DESIGN.md, in 0..1."""
    return min(1.0, decayed_base(memory, now, scoring) + access_bonus(memory.access_count, scoring))


def rank_bonus(rank: int, scoring: ScoringConfig) -> float:
    """What a recall at 1-based ``rank`` adds to a memory's base score."""
    if rank == 1:
        return scoring.reinforce_top1
    if 2 <= rank <= TOP_RANKS_REINFORCED:
        return scoring.reinforce_top5
    return 0.0


def reinforced_base(memory: Memory, bonus: float, now: datetime, scoring: ScoringConfig) -> float:
    """The new base score when a recall reinforces ``memory`` with ``bonus``."""
    return min(1.0, decayed_base(memory, now, scoring) + bonus)


def calibrated_similarity(cosine: float, floor: float) -> float:
    """Map an embedder's cosine onto 0..1, where ``floor`` is what unrelated text scores.

    Models differ a lot here: MiniLM gives unrelated sentences about 0, e5 about
    0.7. Without this, the decay signal would swamp e5's narrow similarity band.
    """
    if floor >= 1.0:
        raise ValueError("similarity floor must be below 1")
    return min(1.0, max(0.0, (cosine - floor) / (1.0 - floor)))


@dataclass(frozen=True, slots=True)
class SemanticScale:
    """How one recall turns cosines into the semantic signal: linearly from ``low`` (0)
    to ``high`` (1), clipped to 0..1; nothing at all when ``high`` is not above ``low``.

    ``semantic_scale`` sets it from the recall's own candidates, so the signal means the
    same whatever a model's cosines look like: MiniLM spreads related text over 0.2..0.8,
    e5 packs everything into 0.75..0.95, and near-template text (one sentence pattern
    with a different noun) packs it tighter still. Scaled to the candidates, the best
    semantic candidate scores 1 and the weakest 0, as the lexical signal's best does."""

    low: float
    high: float

    def values(self, cosines: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        if self.high <= self.low:
            return np.zeros(len(cosines), np.float64)
        scaled: npt.NDArray[np.float64] = np.clip((cosines - self.low) / (self.high - self.low), 0.0, 1.0)
        return scaled

    def as_dict(self) -> dict[str, float]:
        return {"low": round(self.low, 6), "high": round(self.high, 6)}


UNSCALED = SemanticScale(0.0, 1.0)  # the cosine itself (clipped at 0)


def shaped(values: npt.NDArray[np.float64], power: float) -> npt.NDArray[np.float64]:
    """A channel's signal (0..1) raised to its ``[fusion]`` power before it is weighed
    (``semantic_power``, ``lexical_power``): the same numpy operation wherever a fused
    score is summed, so that the ranking and its explanation agree to the bit."""
    if power == 1.0:
        return values
    out: npt.NDArray[np.float64] = np.power(values, power)
    return out


def read_cosines(
    cosines: npt.NDArray[np.float64], typicality: npt.NDArray[np.float64], centring: float
) -> npt.NDArray[np.float64]:
    """The cosines the semantic signal reads: each less ``centring`` times its
    typicality (``[fusion] centring``; 0 leaves them as they are). The same numpy
    operation wherever a fused score is summed, as ``shaped``."""
    if centring == 0.0:
        return cosines
    read: npt.NDArray[np.float64] = cosines - centring * typicality
    return read


# The narrowest band of cosines a recall's scale stretches to 0..1, as a share of the
# model's range above its floor. Recomputed over the development data's candidates, up
# to 0.2 it changes no result with USE or e5; 0.3 already costs e5 on MADial-Bench Chinese.
MIN_SPAN = 0.2


def semantic_scale(cosines: npt.NDArray[np.float64], floor: float) -> SemanticScale:
    """The scale of a recall whose candidates have ``cosines``: from the weakest (but
    never below ``floor``, what unrelated text scores with this model) to the best, and
    never narrower than ``MIN_SPAN`` of the model's range above its floor, so that a few
    candidates the model finds all but alike are not told apart by noise. When even
    the best is at the floor there is no semantic signal."""
    if not len(cosines):
        return SemanticScale(floor, 1.0)
    high = float(cosines.max())
    low = max(floor, min(float(cosines.min()), high - MIN_SPAN * (1.0 - floor)))
    return SemanticScale(low, high)


def raw_cosine(calibrated: float, floor: float) -> float:
    """The cosine that ``calibrated_similarity`` maps to ``calibrated`` for a model whose
    unrelated text scores ``floor``: how a threshold set on the calibrated scale
    (``dedup_cosine``, ``merge_cosine``) reads in one model's own cosines."""
    return floor + calibrated * (1.0 - floor)


def time_fit(created: npt.NDArray[np.int64], windows: Sequence[TimeWindow]) -> npt.NDArray[np.float64]:
    """How well each creation time (microseconds since the epoch) fits the query's time
    windows, in 0..1: 1 inside one, halving with every window length (at least a day)
    outside it; the best window counts. All zeros without windows."""
    fit = np.zeros(len(created), np.float64)
    for window in windows:
        start, end = window.micros()
        span = max(end - start, MICROS_PER_DAY)
        outside = np.maximum(start - created, 0) + np.maximum(created - end, 0)
        fit = np.maximum(fit, 0.5 ** (outside / span))
    return fit


@dataclass(frozen=True, slots=True)
class Candidate:
    memory: Memory
    cosine: float
    # Lexical match in 0..1 (BM25 relative to the best lexical hit of the query); 0 when none.
    lexical: float = 0.0
    # Graph context in 0..1: mentions an entity named in the query (1), or shares an
    # entity with one of the strongest candidates (GRAPH_NEIGHBOUR); 0 otherwise.
    graph: float = 0.0
    # Conversation context in 0..1: linked NEXT to one of the strongest candidates (the
    # strongest one's fused score relative to the best); ``next_to`` names that one.
    context: float = 0.0
    next_to: str | None = None
    # How typical of its namespace the memory's vector is (``FastNetwork.typicality``);
    # the semantic signal reads the cosine less ``[fusion] centring`` times it.
    typicality: float = 0.0


@dataclass(frozen=True, slots=True)
class Signal:
    value: float
    weight: float

    @property
    def contribution(self) -> float:
        return self.value * self.weight


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Why a hit scored what it did: each signal's value, weight and contribution."""

    semantic: Signal
    lexical: Signal
    graph: Signal
    decay: Signal
    cosine: float
    context: Signal = Signal(0.0, 0.0)
    next_to: str | None = None  # the strong candidate the context signal came from
    time: Signal | None = None  # only when the query names a time
    scale: SemanticScale | None = None  # how this recall turned cosines into ``semantic``
    typicality: float | None = None  # only with ``[fusion] centring`` above 0 (``Candidate``)

    def as_dict(self) -> dict[str, object]:
        signals: list[tuple[str, Signal]] = [
            ("semantic", self.semantic),
            ("lexical", self.lexical),
            ("graph", self.graph),
            ("decay", self.decay),
            ("context", self.context),
        ]
        if self.time is not None:
            signals.append(("time", self.time))
        explained: dict[str, object] = {"cosine": round(self.cosine, 6)}
        if self.typicality is not None:
            explained["typicality"] = round(self.typicality, 6)
        explained["signals"] = {
            name: {"value": round(sig.value, 6), "weight": sig.weight, "contribution": round(sig.contribution, 6)}
            for name, sig in signals
        }
        if self.scale is not None:
            explained["semantic_scale"] = self.scale.as_dict()
        if self.next_to is not None:
            explained["next_to"] = self.next_to
        return explained


@dataclass(frozen=True, slots=True)
class Hit:
    memory: Memory
    score: float
    breakdown: Breakdown


def fuse(
    candidates: Sequence[Candidate],
    *,
    now: datetime,
    weights: FusionWeights,
    scoring: ScoringConfig,
    scale: SemanticScale,
    windows: Sequence[TimeWindow] = (),
) -> list[Hit]:
    """Rank candidates by the weighted sum of their signals, best first.

    ``scale``: how cosines become the semantic signal (``semantic_scale`` of the recall's
    candidates). ``windows``: the time the query names (``TimeWindow``); without one
    there is no time signal at all, and the score is the sum of the others exactly.
    Ties are broken by the memory id so that a ranking is reproducible.
    """
    hits = []
    fits = time_fit(np.asarray([micros(c.memory.created_at) for c in candidates], np.int64), windows)
    cosines = read_cosines(
        np.asarray([c.cosine for c in candidates], np.float64),
        np.asarray([c.typicality for c in candidates], np.float64),
        weights.centring,
    )
    semantics = shaped(scale.values(cosines), weights.semantic_power)
    lexicals = shaped(np.asarray([c.lexical for c in candidates], np.float64), weights.lexical_power)
    for cand, fit, value, lexical_value in zip(
        candidates, fits.tolist(), semantics.tolist(), lexicals.tolist(), strict=True
    ):
        semantic = Signal(value, weights.semantic)
        lexical = Signal(lexical_value, weights.lexical)
        graph = Signal(cand.graph, weights.graph)
        decay = Signal(current_score(cand.memory, now, scoring), weights.decay)
        context = Signal(cand.context, weights.context)
        score = semantic.contribution + lexical.contribution + graph.contribution + decay.contribution
        score += context.contribution
        time = Signal(fit, weights.time) if windows else None
        if time is not None:
            score += time.contribution
        typicality = cand.typicality if weights.centring else None
        breakdown = Breakdown(
            semantic, lexical, graph, decay, cand.cosine, context, cand.next_to, time, scale, typicality
        )
        hits.append(Hit(cand.memory, score, breakdown))
    hits.sort(key=lambda h: (-h.score, h.memory.memory_id))
    return hits
