"""A small Python client for the twinmem HTTP API (what the SDK adapters build on).

    from api.client import TwinmemClient
    with TwinmemClient("http://127.0.0.1:8420", namespace="user:42") as memory:
        memory.save("User's favourite colour is blue", category="preference")
        hits = memory.recall("any suggestions for cool-toned colours?", top_k=5)

Errors the service reports come back as ``ClientError`` with the HTTP status and
the service's message.
"""

from __future__ import annotations

import builtins
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx


class ClientError(Exception):
    def __init__(self, status_code: int, detail: str, body: Any = None) -> None:
        super().__init__(f"{status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
        self.body = body


class TwinmemClient:
    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8420",
        *,
        namespace: str = "default",
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.namespace = namespace
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport)

    def __enter__(self) -> TwinmemClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        if response.is_error:
            try:
                body = response.json()
                detail = body.get("detail", response.text)
            except ValueError:
                body, detail = None, response.text
            raise ClientError(response.status_code, detail, body)
        return response.json()

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/health")
        return result

    def save(self, content: str, **fields: Any) -> dict[str, Any]:
        """Save one memory; ``fields`` are the optional record fields (category, entities, ...)."""
        body = {"namespace": self.namespace, **fields, "content": content}
        result: dict[str, Any] = self._call("POST", "/v1/memory/save", json=body)
        return result

    def save_batch(self, memories: list[dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST", "/v1/memory/save_batch", json={"namespace": self.namespace, "memories": memories}
        )
        return result

    def recall(
        self,
        query: str,
        *,
        top_k: int = 10,
        filter: dict[str, Any] | None = None,
        explain: bool = False,
    ) -> list[dict[str, Any]]:
        body = {"query": query, "top_k": top_k, "namespace": self.namespace, "explain": explain}
        if filter:
            body["filter"] = filter
        memories: list[dict[str, Any]] = self._call("POST", "/v1/memory/recall", json=body)["memories"]
        return memories

    def get(self, memory_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/v1/memory/{memory_id}", params={"namespace": self.namespace})
        return result

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        versions: list[dict[str, Any]] = self._call(
            "GET", f"/v1/memory/{memory_id}/history", params={"namespace": self.namespace}
        )["versions"]
        return versions

    def list(self, *, limit: int = 50, cursor: str | None = None, **filters: Any) -> dict[str, Any]:
        params = {"namespace": self.namespace, "limit": limit, **filters}
        if cursor:
            params["cursor"] = cursor
        result: dict[str, Any] = self._call("GET", "/v1/memories", params=params)
        return result

    def update(self, memory_id: str, **changes: Any) -> dict[str, Any]:
        """A new version; pass ``expected_version=N`` to change it only while it is at version N."""
        result: dict[str, Any] = self._call(
            "PATCH", f"/v1/memory/{memory_id}", json={"namespace": self.namespace, **changes}
        )
        return result

    def delete(self, memory_id: str, *, hard: bool = False, expected_version: int | None = None) -> dict[str, Any]:
        """Delete; with ``expected_version``, only while the memory is at that version (else 412)."""
        params: dict[str, Any] = {"namespace": self.namespace}
        if hard:
            params["hard"] = "true"
        if expected_version is not None:
            params["expected_version"] = expected_version
        result: dict[str, Any] = self._call("DELETE", f"/v1/memory/{memory_id}", params=params)
        return result

    # --- admin: blocked sources (an admin token on '*') ------------------------------

    def block(self, kind: str, value: str, reason: str | None = None) -> dict[str, Any]:
        """Block an agent or a session (``kind`` is ``"agent"`` or ``"session"``): its writes
        are refused and what it wrote is quarantined; the answer lists those ids."""
        result: dict[str, Any] = self._call(
            "POST", "/v1/admin/blocks", json={"kind": kind, "value": value, "reason": reason}
        )
        return result

    def blocks(self) -> builtins.list[dict[str, Any]]:
        """Every block in force, oldest first."""
        blocks: builtins.list[dict[str, Any]] = self._call("GET", "/v1/admin/blocks")["blocks"]
        return blocks

    def unblock(self, kind: str, value: str) -> dict[str, Any]:
        """Lift a block; what was quarantined stays quarantined (release memories one by one)."""
        result: dict[str, Any] = self._call(
            "DELETE", f"/v1/admin/blocks/{quote(kind, safe='')}/{quote(value, safe='')}"
        )
        return result
