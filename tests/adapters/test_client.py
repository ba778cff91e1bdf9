"""The typed client over real HTTP: typed errors carrying the service's message and field,
retries after connection errors for idempotent calls only, the async client, the new
namespace and key listings."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from tests.api.conftest import LiveServer
from twinmem_client import (
    APIError,
    AsyncTwinmemClient,
    NotFound,
    PreconditionFailed,
    TransportError,
    TwinmemClient,
    ValidationFailed,
)
from twinmem_client.langchain import TwinmemRetriever

pytestmark = pytest.mark.slow


class CountingTransport(httpx.HTTPTransport):
    """A real transport to a port nobody listens on, counting the attempts."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.attempts.append(request.method)
        return super().handle_request(request)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port  # closed when the socket is: nothing listens there


def test_typed_errors_carry_message_and_field(live: LiveServer, tag: str) -> None:
    with TwinmemClient(live.url, namespace=f"user:{tag}") as client:
        with pytest.raises(ValidationFailed) as invalid:
            client.save("x", base_score=1.5)
        assert invalid.value.status_code == 422 and "base_score" in invalid.value.detail
        with pytest.raises(NotFound) as missing:
            client.get("00000000-0000-0000-0000-000000000000")
        assert "not found" in missing.value.detail
        saved = client.save("The weekly sync is on Monday")
        client.update(saved.memory_id, content="The weekly sync is on Tuesday")
        with pytest.raises(PreconditionFailed) as stale:
            client.update(saved.memory_id, content="The weekly sync is on Friday", expected_version=1)
        assert stale.value.current_version == 2
        with pytest.raises(ValidationFailed) as combined:
            client.list(key="k", category="fact")
        assert combined.value.field == "key"


def test_retries_only_idempotent_calls() -> None:
    transport = CountingTransport()
    url = f"http://127.0.0.1:{closed_port()}"
    with TwinmemClient(url, retries=2, transport=transport) as client:
        with pytest.raises(TransportError):
            client.get("some-id")
        assert transport.attempts == ["GET", "GET", "GET"]
        transport.attempts.clear()
        with pytest.raises(TransportError):
            client.save("never sent twice")
        assert transport.attempts == ["POST"]


def test_namespaces_and_keys(live: LiveServer, tag: str) -> None:
    with TwinmemClient(live.url) as client:
        client.save("Prefers tea", namespace=f"{tag}:a", key="drink")
        client.save("Prefers tea", namespace=f"{tag}:b")
        assert client.namespaces(prefix=tag) == [f"{tag}:a", f"{tag}:b"]
        (keyed,) = client.by_key("drink", namespace=f"{tag}:a")
        assert keyed.content == "Prefers tea" and client.by_key("drink", namespace=f"{tag}:b") == []


def test_every_typed_result_keeps_its_json_as_raw(live: LiveServer, tag: str) -> None:
    with TwinmemClient(live.url, namespace=f"user:{tag}") as client:
        saved = client.save("The user keeps bees on the roof", category="fact")
        batch = client.save_batch([{"content": "The bees swarmed in May"}])
        (hit,) = client.recall("bees on the roof", top_k=1)
        page = client.list(limit=1)
        (version,) = client.history(saved.memory_id)
        deleted = client.delete(batch.results[0].memory_id)
        assert saved.raw["created"] is True and saved.raw["memory"]["memory_id"] == saved.memory_id
        assert batch.raw["created"] == 1 and hit.raw["memory_id"] == hit.memory_id == saved.memory_id
        assert page.raw["memories"][0]["memory_id"] == page.memories[0].memory_id
        assert version.raw["version"] == 1 and deleted.raw["memory_id"] == deleted.memory_id
        with pytest.raises(ValidationFailed) as unknown:
            client.list(categroy="fact")
        assert unknown.value.field == "categroy"


def test_async_client(live: LiveServer, tag: str) -> None:
    async def scenario() -> None:
        async with AsyncTwinmemClient(live.url, namespace=f"user:{tag}") as client:
            saved = await client.save("The user is learning Portuguese", category="fact")
            hits = await client.recall("which language is the user studying?")
            assert hits[0].memory_id == saved.memory_id and hits[0].score > 0
            lines = [line async for line in client.export()]
            assert len(lines) == 3  # header, the memory, the end line
            assert [m.memory_id async for m in client.iter_memories()] == [saved.memory_id]
            for session_id in ("a", "b", "c"):
                await client.append_messages(session_id, [{"role": "user", "content": "hello"}])
            page = await client.sessions_page(limit=2)
            assert len(page["sessions"]) == 2 and page["next_cursor"]
            every = [s["session_id"] async for s in client.iter_sessions(page_size=2)]
            assert sorted(every) == ["a", "b", "c"]
            assert [s["session_id"] for s in await client.sessions()] == every

    asyncio.run(scenario())


class OneWayServer:
    """A loopback socket that accepts connections and answers each request with ``reply``
    (bytes), or never answers when it is None, counting the requests it read."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.requests: list[str] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self._sock.settimeout(0.2)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            conn.settimeout(2)
            try:
                head = conn.recv(65536).decode("latin-1")
            except OSError:
                conn.close()
                continue
            self.requests.append(head.split(" ", 1)[0])
            if self.reply is None:
                self._held.append(conn)  # read, never answered
            else:
                conn.sendall(self.reply)
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        self._sock.close()


@pytest.fixture
def silent() -> Iterator[OneWayServer]:
    server = OneWayServer(None)
    yield server
    server.close()


def test_a_change_that_timed_out_waiting_for_its_answer_is_not_sent_again(silent: OneWayServer) -> None:
    # The first DELETE may have been applied: a second would report its own 404 for it.
    with TwinmemClient(silent.url, retries=2, timeout=0.3) as client:
        with pytest.raises(TransportError, match="ReadTimeout"):
            client.delete("some-id")
        assert silent.requests == ["DELETE"]
        with pytest.raises(TransportError, match="ReadTimeout"):
            client.get("some-id")  # a read is
        assert silent.requests == ["DELETE", "GET", "GET", "GET"]

    async def scenario() -> None:
        async with AsyncTwinmemClient(silent.url, retries=0, timeout=0.3) as client:
            with pytest.raises(TransportError) as failed:
                await client.get("some-id")
        assert (
            str(failed.value) == f"GET {silent.url}/v1/memory/some-id: ReadTimeout: timed out"
        )  # before: "ReadTimeout: "

    asyncio.run(scenario())


def test_a_change_that_never_reached_the_service_is_sent_again() -> None:
    transport = CountingTransport()
    with TwinmemClient(f"http://127.0.0.1:{closed_port()}", retries=2, transport=transport) as client:
        with pytest.raises(TransportError):
            client.delete("some-id")
    assert transport.attempts == ["DELETE", "DELETE", "DELETE"]


def test_an_export_that_cannot_be_read_raises_the_clients_error_after_its_retries() -> None:
    transport = CountingTransport()
    with TwinmemClient(f"http://127.0.0.1:{closed_port()}", retries=2, transport=transport) as client:
        with pytest.raises(TransportError, match="ConnectError") as failed:
            list(client.export())
    assert transport.attempts == ["GET", "GET", "GET"]
    assert failed.value.url.endswith("/v1/export")

    async def scenario() -> None:
        async with AsyncTwinmemClient(f"http://127.0.0.1:{closed_port()}", retries=1) as client:
            with pytest.raises(TransportError, match="ConnectError"):
                [line async for line in client.export()]

    asyncio.run(scenario())


def test_an_answer_that_is_not_json_is_the_clients_error() -> None:
    server = OneWayServer(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 9\r\n\r\n<p>hi</p>")
    try:
        with TwinmemClient(server.url) as client, pytest.raises(APIError, match="not JSON"):
            client.health()
    finally:
        server.close()


def test_a_field_the_schema_refuses_is_named(live: LiveServer, tag: str) -> None:
    with TwinmemClient(live.url, namespace=f"user:{tag}") as client:
        for call, field in [
            (lambda: client.recall("x", top_k=0), "top_k"),
            (lambda: client.save("x", key="k" * 201), "key"),
            (lambda: client.save("x", base_score="high"), "base_score"),
            # A plain call sends what it is given: only the adapters cut or split long text.
            (lambda: client.save("x " * 4001), "content"),
            (lambda: client.recall("x " * 2001), "query"),
        ]:
            with pytest.raises(ValidationFailed) as refused:
                call()
            assert refused.value.field == field, refused.value.body

    async def scenario() -> None:
        async with AsyncTwinmemClient(live.url, namespace=f"user:{tag}") as client:
            with pytest.raises(ValidationFailed) as refused:
                await client.recall("x", top_k=101)
            assert refused.value.field == "top_k"

    asyncio.run(scenario())


def test_the_async_client_works_in_every_event_loop_it_is_used_in(live: LiveServer, tag: str) -> None:
    client = AsyncTwinmemClient(live.url, namespace=f"user:{tag}")
    saved = asyncio.run(client.save("The user is learning Portuguese"))
    for _ in range(2):  # each run is a new loop; before: RuntimeError "Event loop is closed"
        assert [hit.memory_id for hit in asyncio.run(client.recall("which language?"))] == [saved.memory_id]
    asyncio.run(client.aclose())


@pytest.mark.filterwarnings("ignore::ResourceWarning")  # the dead loop's socket, closed by the collector
def test_aclose_closes_the_pools_of_loops_already_closed(live: LiveServer, tag: str) -> None:
    client = AsyncTwinmemClient(live.url, namespace=f"user:{tag}")
    dead = asyncio.new_event_loop()
    dead.run_until_complete(client.save("The user has a cat called Miso"))
    dead.close()  # without shutdown_asyncgens, which would have closed its pool
    (orphan,) = client._pools.values()
    asyncio.run(client.aclose())
    assert orphan.is_closed and not client._pools  # before: left open, aclose closed only its own loop's
    assert [m.content for m in asyncio.run(client.list()).memories] == ["The user has a cat called Miso"]
    asyncio.run(client.aclose())
    gc.collect()


def test_like_makes_a_client_of_its_own_class() -> None:
    sync = TwinmemClient("http://127.0.0.1:1", namespace="user:1", token="t", timeout=3.0, retries=4)
    made = AsyncTwinmemClient.like(sync)
    assert isinstance(made, AsyncTwinmemClient)
    assert (made.base_url, made.namespace, made.token, made.timeout, made.retries) == (
        "http://127.0.0.1:1",
        "user:1",
        "t",
        3.0,
        4,
    )
    assert isinstance(TwinmemClient.like(made), TwinmemClient)
    sync.close()


def test_recall_sends_the_namespaces_it_is_given(live: LiveServer, tag: str) -> None:
    with TwinmemClient(live.url, namespace=f"{tag}:a") as client:
        client.save("Prefers tea", namespace=f"{tag}:b")
        for kwargs, field in [
            ({"namespaces": []}, "namespaces"),
            ({"namespace": "x", "namespaces": [f"{tag}:b"]}, "namespace"),
        ]:
            with pytest.raises(ValidationFailed) as refused:  # before: the default namespace, or namespace dropped
                client.recall("tea", **kwargs)  # type: ignore[arg-type]
            assert refused.value.field == field
        both = client.recall("tea", namespace=f"{tag}:b", namespaces=[f"{tag}:a", f"{tag}:b"])
        assert [hit.content for hit in both] == ["Prefers tea"]

    async def scenario() -> None:
        async with AsyncTwinmemClient(live.url, namespace=f"{tag}:a") as client:
            with pytest.raises(ValidationFailed):
                await client.recall("tea", namespaces=[])

    asyncio.run(scenario())
    retriever = TwinmemRetriever(base_url=live.url, namespace="unused", namespaces=[f"{tag}:a", f"{tag}:b"])
    assert [doc.page_content for doc in retriever.invoke("tea")] == ["Prefers tea"]
    retriever.close()
