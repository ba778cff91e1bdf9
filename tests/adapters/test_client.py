"""The typed client over real HTTP: typed errors carrying the service's message and field,
retries after connection errors for idempotent calls only, the async client, the new
namespace and key listings."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from tests.api.conftest import LiveServer
from twinmem_client import (
    AsyncTwinmemClient,
    NotFound,
    PreconditionFailed,
    TransportError,
    TwinmemClient,
    ValidationFailed,
)

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


def test_async_client(live: LiveServer, tag: str) -> None:
    async def scenario() -> None:
        async with AsyncTwinmemClient(live.url, namespace=f"user:{tag}") as client:
            saved = await client.save("The user is learning Portuguese", category="fact")
            hits = await client.recall("which language is the user studying?")
            assert hits[0].memory_id == saved.memory_id and hits[0].score > 0
            lines = [line async for line in client.export()]
            assert len(lines) == 3  # header, the memory, the end line
            assert [m.memory_id async for m in client.iter_memories()] == [saved.memory_id]

    asyncio.run(scenario())
