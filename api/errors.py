"""One table maps engine errors to HTTP statuses; every error body is JSON with a message.

Body shape: ``{"status_code": 422, "detail": "what was wrong", "field": "...", "extra": ...}``.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from engine.errors import (
    BackendError,
    ConfigError,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    TwinmemError,
    Unauthenticated,
)

log = logging.getLogger(__name__)

# Most specific first: the first matching class wins.
STATUS_BY_ERROR: tuple[tuple[type[TwinmemError], int], ...] = (
    (InvalidInput, 422),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (ConfigError, 500),
    (BackendError, 503),
    (TwinmemError, 500),
)


def status_for(error: TwinmemError) -> int:
    for kind, status in STATUS_BY_ERROR:
        if isinstance(error, kind):
            return status
    return HTTP_500_INTERNAL_SERVER_ERROR


def _body(status: int, detail: str, **more: Any) -> dict[str, Any]:
    return {"status_code": status, "detail": detail, **{k: v for k, v in more.items() if v is not None}}


def engine_error(request: Request[Any, Any, Any], exc: TwinmemError) -> Response[dict[str, Any]]:
    status = status_for(exc)
    if status == 401:
        response: Response[dict[str, Any]] = Response(
            _body(status, str(exc)), status_code=status, headers={"WWW-Authenticate": 'Bearer realm="twinmem"'}
        )
        return response
    if status >= 500:
        log.error("%s %s failed: %s", request.method, request.url.path, exc, exc_info=exc)
    body = _body(status, str(exc), field=getattr(exc, "field", None), reasons=getattr(exc, "reasons", None))
    return Response(body, status_code=status)


def validation_error(request: Request[Any, Any, Any], exc: ValidationException) -> Response[dict[str, Any]]:
    """Litestar reports invalid bodies and parameters as 400; invalid fields are 422 here."""
    extra = exc.extra if isinstance(exc.extra, list) else None
    detail = exc.detail
    if extra:
        detail = "; ".join(_describe(item) for item in extra) or detail
    status = 422 if extra or "validation" in exc.detail.lower() else 400
    return Response(_body(status, detail, extra=extra), status_code=status)


def http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    return Response(_body(exc.status_code, exc.detail), status_code=exc.status_code)


def _describe(item: Any) -> str:
    if isinstance(item, dict):
        key = item.get("key") or item.get("loc") or ""
        return f"{key}: {item.get('message', '')}".strip(": ")
    return str(item)


EXCEPTION_HANDLERS = {
    TwinmemError: engine_error,
    ValidationException: validation_error,
    HTTPException: http_error,
}
