"""A near-free embedder for benchmarks that time the engine, not a model.

Words are hashed into 384 signed buckets (all-MiniLM-L6-v2's dimension) and the vector
normalised: texts that share words are close, so dedup, conflicts and recall behave as
with a weak real model, at a few microseconds a text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

TOKEN = re.compile(r"\w+")


class HashingEmbedder:
    name, version, dim, similarity_floor = "hashing-384", "1", 384, 0.0

    def _vector(self, text: str) -> npt.NDArray[np.float32]:
        vector = np.zeros(self.dim, dtype=np.float32)
        for token in TOKEN.findall(text.casefold()):
            digest = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
            vector[digest % self.dim] += 1.0 if (digest >> 32) & 1 else -1.0
        norm = float(np.linalg.norm(vector)) or 1.0
        return vector / norm

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.vstack([self._vector(text) for text in texts])

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._vector(text)


class KnownQueries(HashingEmbedder):
    """The hashing embedder with the benchmark's queries embedded beforehand, so a timed
    recall holds no embedding work at all."""

    def __init__(self, vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        self._known = dict(vectors)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        known = self._known.get(text)
        return known if known is not None else self._vector(text)
