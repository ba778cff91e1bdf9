"""One real twinmem server (SQLite, the real MiniLM) for a module of adapter tests; each
test works in namespaces of its own, so tests do not see each other's memories."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from engine.ports import Embedder
from tests.api.conftest import ROOT_TOKEN, LiveServer, server_factory, start_server

__all__ = ["server_factory"]  # the tier's fixture for servers of other configurations


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, minilm: Embedder) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("adapters"), minilm)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, minilm: Embedder) -> Iterator[LiveServer]:
    """A server in tokens mode, with an admin on '*' holding ``ROOT_TOKEN``."""
    auth = {"mode": "tokens", "tokens": [{"agent": "root", "token": ROOT_TOKEN, "grants": ["*:a"]}]}
    server = start_server(tmp_path_factory.mktemp("secured"), minilm, auth=auth)
    yield server
    server.stop()


@pytest.fixture
def tag() -> str:
    """A label no other test uses, to build namespaces from."""
    return uuid.uuid4().hex[:8]
