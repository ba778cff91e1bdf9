"""A real twinmem server on a loopback port, with the real embedding models.

The models are loaded once per session and shared by every server; each test
gets its own data directory and server. The ``server`` fixture runs each test on
every store: SQLite, ArcadeDB's Bolt endpoint, and a real Neo4j when one is
reachable (see ``tests/bolt.py``); a store that cannot run skips with its reason.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from litestar import Litestar

from api.app import create_app
from api.client import TwinmemClient
from engine.adapters import open_service
from engine.config import load_config
from engine.ports import Embedder
from engine.service import MemoryService
from tests.bolt import BoltTarget


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class LiveServer:
    url: str
    app: Litestar
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def service(self) -> MemoryService:
        service: MemoryService = self.app.state.service
        return service

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def start_server(data_dir: Path, embedder: Embedder, **config: Any) -> LiveServer:
    port = free_port()
    app = create_app(
        load_config(data_dir=str(data_dir), server={"port": port}, **config),
        open_engine=lambda cfg: open_service(cfg, embedder=embedder),
    )
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    return LiveServer(f"http://127.0.0.1:{port}", app, server, thread)


STORES = ("sqlite", "arcadedb", "neo4j")
_BOLT_FIXTURE = {"arcadedb": "arcadedb", "neo4j": "neo4j_server"}


def store_overrides(request: pytest.FixtureRequest, store: str) -> dict[str, Any]:
    """``load_config`` overrides selecting ``store``; a graph store gets a fresh database."""
    if store == "sqlite":
        return {}
    target: BoltTarget = request.getfixturevalue(_BOLT_FIXTURE[store])
    return target.config(target.new_database())


@pytest.fixture(params=STORES)
def store_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    return store_overrides(request, request.param)


@pytest.fixture
def server(tmp_path: Path, minilm: Embedder, store_config: dict[str, Any]) -> Iterator[LiveServer]:
    live = start_server(tmp_path / "data", minilm, **store_config)
    yield live
    live.stop()


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def save(http: httpx.Client, content: str, **fields: Any) -> dict[str, Any]:
    """Save one memory that must be new (201); the response body."""
    response = http.post("/v1/memory/save", json={"content": content, **fields})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def recall(http: httpx.Client, query: str, **fields: Any) -> list[dict[str, Any]]:
    """The memories a recall returns (200)."""
    response = http.post("/v1/memory/recall", json={"query": query, **fields})
    assert response.status_code == 200, response.text
    memories: list[dict[str, Any]] = response.json()["memories"]
    return memories


def saves_until_refused(http: httpx.Client, message: str, refusals: int = 3) -> tuple[set[str], set[str]]:
    """Save large memories, under a fault that fills or locks the store, until ``refusals``
    of them are answered 503 with ``message`` in the detail and the request id in the body
    and the header; the contents acknowledged (201) and those refused."""
    acked: set[str] = set()
    refused: set[str] = set()
    for n in range(200):
        content = f"Write number {n} during the fault " + " ".join(f"word{n}x{i}" for i in range(300))
        response = http.post("/v1/memory/save", json={"content": content})
        if response.status_code == 201:
            acked.add(content)
            continue
        assert response.status_code == 503, response.text
        assert message in response.json()["detail"], response.text
        assert response.json()["request_id"] == response.headers["x-request-id"]
        refused.add(content)
        if len(refused) == refusals:
            break
    assert len(refused) == refusals
    return acked, refused


@pytest.fixture
def client(server: LiveServer) -> Iterator[TwinmemClient]:
    with TwinmemClient(server.url) as api:
        yield api


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    started: list[LiveServer] = []

    def make(embedder: Embedder, name: str = "data", **config: Any) -> LiveServer:
        live = start_server(tmp_path / name, embedder, **config)
        started.append(live)
        return live

    yield make
    for live in started:
        live.stop()


# --- tokens mode ---------------------------------------------------------------------------

ROOT_TOKEN = "root-token-for-the-api-tests"


@pytest.fixture
def secured(server_factory: Callable[..., LiveServer], minilm: Embedder) -> LiveServer:
    """A server in tokens mode on the SQLite store, with an admin on '*' holding ``ROOT_TOKEN``."""
    return server_factory(
        minilm, auth={"mode": "tokens", "tokens": [{"agent": "root", "token": ROOT_TOKEN, "grants": ["*:a"]}]}
    )


def bearer(live: LiveServer, token: str | None) -> httpx.Client:
    """An HTTP client for ``live`` sending ``token`` (none: no Authorization header)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=live.url, headers=headers, timeout=60)


def new_token(live: LiveServer, agent: str, *grants: str) -> str:
    """A token for ``agent`` with ``grants``, created by the admin over HTTP."""
    with bearer(live, ROOT_TOKEN) as root:
        response = root.post("/v1/admin/tokens", json={"agent": agent, "grants": list(grants)})
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token
