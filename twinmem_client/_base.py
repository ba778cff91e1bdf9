"""What the sync and async clients share: configuration, headers, retry policy, answers."""

from __future__ import annotations

import os
from typing import Any, Self, TypeVar

import httpx

from twinmem_client import calls
from twinmem_client.errors import APIError, TransportError, error_for

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8420"
DEFAULT_NAMESPACE = "default"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 2
# A pooled connection is dropped after this long idle: well before the server closes it
# (``api.cli.SERVER_KEEP_ALIVE_S``), so a call (a save, which is not retried) never goes
# out on a connection the server is closing at that moment.
KEEP_ALIVE_S = 30.0
BACKOFF_S = 0.2  # before retry n (0-based): BACKOFF_S * 2**n


class ClientBase:
    """Settings of a client. ``base_url`` defaults to ``$TWINMEM_URL`` (else the local service),
    ``token`` to ``$TWINMEM_TOKEN`` (the attribute holds the one sent, None for none);
    ``namespace`` is the one every call uses unless it names another. ``retries``: how many
    more times an idempotent call is sent after a transport failure (never a POST or PATCH,
    which could apply twice): a read (GET) after any, a PUT or DELETE only where the request
    never reached the service (``_sent_again``)."""

    def __init__(
        self,
        base_url: str | None,
        namespace: str,
        token: str | None,
        timeout: float | httpx.Timeout,
        retries: int,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self.base_url = (base_url or os.environ.get("TWINMEM_URL") or DEFAULT_URL).rstrip("/")
        self.namespace = namespace
        self.retries = retries
        self.timeout = timeout
        token = token if token is not None else os.environ.get("TWINMEM_TOKEN")
        self.token = token or None
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    @classmethod
    def like(cls, other: ClientBase) -> Self:
        """A client of this class for the same service as ``other`` (a sync one for an async
        one, say): same URL, namespace, token, timeout and retries (not its transport)."""
        # token "" for none: not $TWINMEM_TOKEN read again
        return cls(
            other.base_url,
            namespace=other.namespace,
            token=other.token or "",
            timeout=other.timeout,
            retries=other.retries,
        )

    def _ns(self, namespace: str | None) -> str:
        return namespace if namespace is not None else self.namespace

    def _attempts(self, call: calls.Call[Any]) -> int:
        return 1 + (self.retries if call.idempotent else 0)

    @staticmethod
    def _sent_again(method: str, exc: httpx.TransportError) -> bool:
        """Whether an idempotent request that failed with ``exc`` is sent again. A read is;
        a change (PUT, DELETE) only where the connection was never made: one that timed out
        waiting for its answer may have been applied, and its second try would then report
        its own outcome (a DELETE's 404, a conditional write's 412) for a change that was
        made."""
        return method == "GET" or isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))

    @staticmethod
    def _request_args(call: calls.Call[Any]) -> dict[str, Any]:
        args: dict[str, Any] = {"params": call.params}
        if call.json is not None:
            args["json"] = call.json
        if call.content is not None:
            args["content"] = call.content
        return args

    def _failed(self, call: calls.Call[Any], exc: httpx.TransportError) -> TransportError:
        return TransportError(_what(exc), method=call.method, url=self.base_url + call.path)

    @staticmethod
    def _answer(call: calls.Call[T], response: httpx.Response) -> T:
        if response.is_error:
            raise error_for(response)
        try:
            body = response.json()
        except ValueError as exc:  # something between the client and the service answered
            raise APIError(response.status_code, f"the answer is not JSON: {response.text[:200]!r}") from exc
        return call.read(body)

    def _export_failed(self, exc: httpx.TransportError) -> TransportError:
        return TransportError(_what(exc), method="GET", url=self.base_url + "/v1/export")


def _what(exc: httpx.TransportError) -> str:
    """What went wrong: the error's name and message. httpx's async transport raises its
    time-outs without one ("ReadTimeout: "), where the sync one says "timed out"."""
    detail = str(exc) or ("timed out" if isinstance(exc, httpx.TimeoutException) else "no detail given")
    return f"{type(exc).__name__}: {detail}"
