"""MemoryService over a real SQLite file and a real HNSW index, with the hashing embedder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.adapters import open_service
from engine.config import Config, load_config
from engine.errors import TwinmemError
from engine.service import MemoryService

OpenService = Callable[..., MemoryService]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def config(data_dir: Path) -> Config:
    # The hashing embedder knows words, not meaning ("live in Berlin" and "moved to Lisbon"
    # share none), so the conflict rules' second check, semantic closeness, is off here;
    # tests/api/test_conflicts_api.py runs it with the real model.
    return load_config(env={}, data_dir=data_dir, conflicts={"min_similarity": 0.0})


@pytest.fixture
def open_svc(config: Config, embedder: Any, clock: Any) -> Iterator[OpenService]:
    """Open a service on the test's data directory; every one opened is closed at teardown."""
    opened: list[MemoryService] = []

    def _open(*, config: Config = config, embedder: Any = embedder, **options: Any) -> MemoryService:
        service = open_service(config, embedder=embedder, clock=clock, **options)
        opened.append(service)
        return service

    yield _open
    for service in reversed(opened):
        try:
            service.close()
        except TwinmemError:
            pass  # a test that broke the data directory on purpose


@pytest.fixture
def service(open_svc: OpenService) -> MemoryService:
    return open_svc()


def count_calls(store: Any, names: tuple[str, ...]) -> dict[str, int]:
    """Count the engine's calls to ``names`` on this store instance from now on (not the
    store's calls to itself: its ``versions`` asks its ``get``)."""
    calls = dict.fromkeys(names, 0)
    depth = [0]
    for name in names:
        method = getattr(store, name)

        def counted(*args: Any, _method: Any = method, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += depth[0] == 0
            depth[0] += 1
            try:
                return _method(*args, **kwargs)
            finally:
                depth[0] -= 1

        setattr(store, name, counted)
    return calls
