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

from engine.config import FusionWeights, ScoringConfig
from engine.records import Memory

SECONDS_PER_DAY = 86_400.0
GRAPH_QUERY_ENTITY = 1.0
GRAPH_NEIGHBOUR = 0.5
TOP_RANKS_REINFORCED = 5


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
class Candidate:
    memory: Memory
    cosine: float
    # Lexical match in 0..1 (BM25 relative to the best lexical hit of the query); 0 when none.
    lexical: float = 0.0
    # Graph context in 0..1: mentions an entity named in the query (1), or shares an
    # entity with one of the strongest candidates (GRAPH_NEIGHBOUR); 0 otherwise.
    graph: float = 0.0


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

    def as_dict(self) -> dict[str, object]:
        return {
            "cosine": round(self.cosine, 6),
            "signals": {
                name: {
                    "value": round(sig.value, 6),
                    "weight": sig.weight,
                    "contribution": round(sig.contribution, 6),
                }
                for name, sig in (
                    ("semantic", self.semantic),
                    ("lexical", self.lexical),
                    ("graph", self.graph),
                    ("decay", self.decay),
                )
            },
        }


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
    similarity_floor: float,
) -> list[Hit]:
    """Rank candidates by the weighted sum of their signals, best first.

    Ties are broken by the memory id so that a ranking is reproducible.
    """
    hits = []
    for cand in candidates:
        semantic = Signal(calibrated_similarity(cand.cosine, similarity_floor), weights.semantic)
        lexical = Signal(cand.lexical, weights.lexical)
        graph = Signal(cand.graph, weights.graph)
        decay = Signal(current_score(cand.memory, now, scoring), weights.decay)
        score = semantic.contribution + lexical.contribution + graph.contribution + decay.contribution
        hits.append(Hit(cand.memory, score, Breakdown(semantic, lexical, graph, decay, cand.cosine)))
    hits.sort(key=lambda h: (-h.score, h.memory.memory_id))
    return hits
