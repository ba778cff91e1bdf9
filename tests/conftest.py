"""Generic fixtures shared by every test tier: a deterministic embedder and a frozen clock."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from engine.ports import Matrix, Vector

EPOCH = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
_TOKEN = re.compile(r"\w+")


class HashingEmbedder:
    """Bag of words hashed into signed buckets, L2-normalised (the hashing trick).

    Deterministic across processes (blake2b, not ``hash()``): texts sharing words
    are close, texts sharing none are near-orthogonal. Good enough for ranking
    math, never a stand-in for a real model's quality.
    """

    def __init__(self, name: str = "fake-bow", *, version: str = "1", dim: int = 64) -> None:
        self.name = name
        self.version = version
        self.dim = dim
        self.similarity_floor = 0.0
        self.documents_embedded = 0

    def _vector(self, text: str) -> Vector:
        vector = np.zeros(self.dim, dtype=np.float32)
        for token in _TOKEN.findall(text.casefold()):
            digest = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
            vector[digest % self.dim] += 1.0 if (digest >> 32) & 1 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            vector[0], norm = 1.0, 1.0
        return vector / norm

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        self.documents_embedded += len(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([self._vector(text) for text in texts])

    def embed_query(self, text: str) -> Vector:
        return self._vector(text)


class FrozenClock:
    """A clock that only moves when a test moves it."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def make_embedder() -> Callable[..., HashingEmbedder]:
    return HashingEmbedder


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder()
