"""A graph store that becomes unreachable while the service runs: requests that need it are
answered 503 with a message, nothing refused is stored, and the service recovers by itself
when the store is reachable again. The Bolt tier's server sits behind a TCP relay that the
test cuts and restores; the service, the driver and the store are real."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import start_server
from tests.bolt import BoltTarget
from tests.conftest import HashingEmbedder

pytestmark = pytest.mark.slow


class Relay:
    """Forwards TCP connections from a loopback port to ``target_port``; ``cut`` drops every
    connection and refuses new ones, ``restore`` listens again on the same port."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port: int = probe.getsockname()[1]
        probe.close()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, []
        if listener is not None:
            # shutdown, not only close: it wakes the thread blocked in accept(), which would
            # otherwise keep the listening socket open.
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._target))
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            try:
                sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass


@pytest.fixture
def relayed(arcadedb: BoltTarget) -> Iterator[tuple[Relay, dict[str, Any]]]:
    port = int(arcadedb.uri.rsplit(":", 1)[1])
    relay = Relay(port)
    relay.restore()
    config = arcadedb.config(arcadedb.new_database())
    config["neo4j"]["uri"] = f"bolt://127.0.0.1:{relay.port}"
    config["neo4j"]["retry_seconds"] = 1  # the driver's retries, before a request gives up: 30 s by default
    yield relay, config
    relay.cut()


def test_an_unreachable_graph_store_is_a_503_and_the_service_recovers(
    tmp_path: Path, relayed: tuple[Relay, dict[str, Any]]
) -> None:
    relay, config = relayed
    live = start_server(tmp_path / "data", HashingEmbedder(), **config)
    try:
        with httpx.Client(base_url=live.url, timeout=120) as http:
            kept = http.post("/v1/memory/save", json={"content": "Saved while the store answered"})
            assert kept.status_code == 201, kept.text
            relay.cut()
            for request in (
                lambda: http.post("/v1/memory/save", json={"content": "Refused while the store is away"}),
                lambda: http.post("/v1/memory/recall", json={"query": "store"}),
                lambda: http.get(f"/v1/memory/{kept.json()['memory_id']}"),
            ):
                response = request()
                assert response.status_code == 503, response.text
                assert "graph store" in response.json()["detail"] and response.json()["request_id"]
            relay.restore()
            saved = http.post("/v1/memory/save", json={"content": "Saved once the store is back"})
            assert saved.status_code == 201, saved.text
            listed = {m["content"] for m in http.get("/v1/memories").json()["memories"]}
            assert listed == {"Saved while the store answered", "Saved once the store is back"}
            hits = http.post("/v1/memory/recall", json={"query": "saved while the store answered"}).json()
            assert hits["memories"][0]["memory_id"] == kept.json()["memory_id"]
    finally:
        live.stop()


def test_once_a_request_found_the_graph_store_away_the_next_ones_answer_503_at_once(
    tmp_path: Path, relayed: tuple[Relay, dict[str, Any]]
) -> None:
    """Every store call used to wait out ``retry_seconds`` on its own: a recall waited for its
    read, then for its audit entry (2 x 30 s at the defaults), past twinmem_client's 30 s
    timeout, so a client never saw the 503, only a service that did not answer, request after
    request. Once one call has given up, the next ones try the server once."""
    relay, config = relayed
    config["neo4j"]["retry_seconds"] = 6
    live = start_server(tmp_path / "data", HashingEmbedder(), **config)
    try:
        with httpx.Client(base_url=live.url, timeout=120) as http:
            kept = http.post("/v1/memory/save", json={"content": "Saved while the store answered"})
            assert kept.status_code == 201, kept.text
            relay.cut()
            first = http.post("/v1/memory/recall", json={"query": "store"})
            assert first.status_code == 503, first.text
        # A client that gives up sooner than the store's retries would: it gets its 503.
        with httpx.Client(base_url=live.url, timeout=3) as http:
            for request in (
                lambda: http.post("/v1/memory/save", json={"content": "Refused while the store is away"}),
                lambda: http.post("/v1/memory/recall", json={"query": "store"}),
                lambda: http.get(f"/v1/memory/{kept.json()['memory_id']}"),
                lambda: http.get("/health"),
            ):
                response = request()
                assert response.status_code == 503, response.text
                assert "graph store" in response.json()["detail"]
            relay.restore()
            saved = http.post("/v1/memory/save", json={"content": "Saved once the store is back"})
            assert saved.status_code == 201, saved.text
    finally:
        live.stop()
