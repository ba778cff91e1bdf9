"""What the client raises. One root, ``ClientError``::

ClientError
├── TransportError          the service could not be reached, or did not answer in time
└── APIError                the service answered with an error: status, message, field
    ├── BadRequest              400  a body that is not JSON, or nested too deeply
    ├── AuthenticationFailed    401  no token, or an unknown or revoked one
    ├── PermissionDenied        403  no grant on the namespace, or a blocked writer
    ├── NotFound                404  an unknown id (or one in another namespace)
    ├── Conflict                409  e.g. restoring a memory that is quarantined (one deleted
    │                                while quarantined comes back quarantined, 200)
    ├── PreconditionFailed      412  a stale If-Match / expected_version (``current_version``)
    ├── PayloadTooLarge         413
    ├── ValidationFailed        422  a bad field (``field``), or an import's report
    ├── RateLimited             429  (``retry_after`` seconds)
    └── ServerError             5xx  (``request_id``, as the service logged it)
"""

from __future__ import annotations

from typing import Any

import httpx


class ClientError(Exception):
    """Everything this client raises."""


class TransportError(ClientError):
    """No answer: the connection failed or timed out (after the retries an idempotent call gets)."""

    def __init__(self, message: str, *, method: str, url: str) -> None:
        super().__init__(f"{method} {url}: {message}")
        self.method = method
        self.url = url


class APIError(ClientError):
    """The service answered with an error. ``detail`` is its message, ``field`` the request
    field it is about (when it names one), ``body`` the whole JSON answer."""

    def __init__(self, status_code: int, detail: str, *, field: str | None = None, body: Any = None) -> None:
        super().__init__(f"{status_code}: {detail}" + (f" (field: {field})" if field else ""))
        self.status_code = status_code
        self.detail = detail
        self.field = field
        self.body = body


class BadRequest(APIError):
    pass


class AuthenticationFailed(APIError):
    pass


class PermissionDenied(APIError):
    pass


class NotFound(APIError):
    pass


class Conflict(APIError):
    pass


class PreconditionFailed(APIError):
    """A conditional write found the memory at another version: read it again and retry."""

    @property
    def current_version(self) -> int | None:
        value = self.body.get("current_version") if isinstance(self.body, dict) else None
        return value if isinstance(value, int) else None


class PayloadTooLarge(APIError):
    pass


class ValidationFailed(APIError):
    pass


class RateLimited(APIError):
    def __init__(self, status_code: int, detail: str, *, field: str | None = None, body: Any = None) -> None:
        super().__init__(status_code, detail, field=field, body=body)
        self.retry_after: float | None = None


class ServerError(APIError):
    @property
    def request_id(self) -> str | None:
        value = self.body.get("request_id") if isinstance(self.body, dict) else None
        return value if isinstance(value, str) else None


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest,
    401: AuthenticationFailed,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    413: PayloadTooLarge,
    422: ValidationFailed,
    429: RateLimited,
}


def error_for(response: httpx.Response) -> APIError:
    """The typed error for an error answer, with the service's message and field."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    field = body.get("field") if isinstance(body, dict) else None
    kind = ServerError if response.status_code >= 500 else _BY_STATUS.get(response.status_code, APIError)
    error = kind(
        response.status_code,
        detail if isinstance(detail, str) else (response.text or response.reason_phrase),
        field=field if isinstance(field, str) else None,
        body=body,
    )
    if isinstance(error, RateLimited):
        try:
            error.retry_after = float(response.headers.get("Retry-After", ""))
        except ValueError:
            error.retry_after = None
    return error
