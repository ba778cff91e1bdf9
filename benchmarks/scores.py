"""Precision and recall of one class, shared by the detector benchmarks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Scores:
    """Counts for one class. ``vacuous`` is the value of a ratio with nothing to count:
    precision when the class was never predicted, recall when it never occurred. The
    guard benchmark reads that as "no mistakes" (1.0); the conflict benchmark, whose
    classes always occur, as "no evidence" (0.0)."""

    support: int
    predicted: int
    correct: int
    vacuous: float = 0.0

    @property
    def precision(self) -> float:
        return self.correct / self.predicted if self.predicted else self.vacuous

    @property
    def recall(self) -> float:
        return self.correct / self.support if self.support else self.vacuous
