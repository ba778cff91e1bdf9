"""One table maps engine errors to HTTP statuses; every error body is JSON with a message.

Body shape: ``{"status_code": 422, "detail": "what was wrong", "field": "...", "extra": ...}``.
A 5xx body also names the request's id (``request_id``, as in the ``X-Request-Id``
header), and the log holds the traceback under the same id: an unexpected failure
is never silent, and a client's report of it can be matched to the log line.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from litestar import Request, Response
from litestar.exceptions import ClientException, HTTPException, SerializationException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from api.auth import AUDIT_KEY
from engine.errors import (
    BackendError,
    ConfigError,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    TwinmemError,
    Unauthenticated,
    VersionMismatch,
)

log = logging.getLogger(__name__)

# Most specific first: the first matching class wins.
STATUS_BY_ERROR: tuple[tuple[type[TwinmemError], int], ...] = (
    (InvalidInput, 422),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (VersionMismatch, 412),
    (Conflict, 409),
    (ConfigError, 500),
    (BackendError, 503),
    (TwinmemError, 500),
)


def etag(version: int) -> str:
    """A memory version as an entity tag: ``"7"``. ``If-Match`` takes it back, or the bare number."""
    return f'"{version}"'


def status_for(error: TwinmemError) -> int:
    for kind, status in STATUS_BY_ERROR:
        if isinstance(error, kind):
            return status
    return HTTP_500_INTERNAL_SERVER_ERROR


def _body(status: int, detail: str, **more: Any) -> dict[str, Any]:
    return {"status_code": status, "detail": detail, **{k: v for k, v in more.items() if v is not None}}


def request_id(request: Request[Any, Any, Any]) -> tuple[str, bool]:
    """The id the audit middleware gave this request, which it sends as ``X-Request-Id``
    (then True); else, for a request that never reached it, a fresh one (False)."""
    state: dict[str, Any] = request.scope.setdefault("state", {})
    found = getattr(state.get(AUDIT_KEY), "request_id", None)
    if isinstance(found, str):
        return found, True
    made: str = state.setdefault("twinmem_request_id", uuid.uuid4().hex)
    return made, False


def _failed(request: Request[Any, Any, Any], status: int, detail: str, exc: BaseException) -> Response[dict[str, Any]]:
    """A 5xx: logged with its traceback and the request id, which the answer carries too."""
    rid, sent = request_id(request)
    log.error("%s %s failed (request id %s): %s", request.method, request.url.path, rid, exc, exc_info=exc)
    headers = {} if sent else {"X-Request-Id": rid}
    return Response(_body(status, detail, request_id=rid), status_code=status, headers=headers)


def engine_error(request: Request[Any, Any, Any], exc: TwinmemError) -> Response[dict[str, Any]]:
    status = status_for(exc)
    if status == 401:
        response: Response[dict[str, Any]] = Response(
            _body(status, str(exc)), status_code=status, headers={"WWW-Authenticate": 'Bearer realm="twinmem"'}
        )
        return response
    if status >= 500:
        return _failed(request, status, str(exc), exc)
    body = _body(
        status,
        str(exc),
        field=getattr(exc, "field", None),
        reasons=getattr(exc, "reasons", None),
        current_version=getattr(exc, "current_version", None),
    )
    headers = {"ETag": etag(exc.current_version)} if isinstance(exc, VersionMismatch) else {}
    return Response(body, status_code=status, headers=headers)


def unexpected_error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """Anything no other handler claims is a bug: 500, logged with its traceback."""
    rid, _ = request_id(request)
    return _failed(request, HTTP_500_INTERNAL_SERVER_ERROR, f"internal error (request id {rid})", exc)


def validation_error(request: Request[Any, Any, Any], exc: ValidationException) -> Response[dict[str, Any]]:
    """Litestar reports invalid bodies and parameters as 400; invalid fields are 422 here,
    with ``field`` naming the first of them, as the engine's own refusals do."""
    extra = exc.extra if isinstance(exc.extra, list) else None
    detail = exc.detail
    field = None
    if extra:
        detail = "; ".join(_describe(item) for item in extra) or detail
        field = next(filter(None, map(_field_of, extra)), None)
    status = 422 if extra or "validation" in exc.detail.lower() else 400
    return Response(_body(status, detail, extra=extra, field=field), status_code=status)


def http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    if exc.status_code >= 500:
        return _failed(request, exc.status_code, exc.detail, exc)
    return Response(_body(exc.status_code, exc.detail), status_code=exc.status_code, headers=exc.headers)


# How Litestar reports a request without the body its route takes.
_NO_BODY = {"message": "'data'", "key": "data", "source": "body"}


def _field_of(item: Any) -> str | None:
    """The field an item of Litestar's report names (``body`` for a missing body)."""
    if item == _NO_BODY:
        return "body"
    key = item.get("key") if isinstance(item, dict) else None
    return str(key) if key else None


def _describe(item: Any) -> str:
    if item == _NO_BODY:
        return "the request has no body: send a JSON object"
    if isinstance(item, dict):
        key = item.get("key") or item.get("loc") or ""
        return f"{key}: {item.get('message', '')}".strip(": ")
    return str(item)


class TwinmemRequest(Request[Any, Any, Any]):
    """Litestar's request, with a JSON body that cannot be decoded refused with 400 where
    the decoder raises what would otherwise be a 500: ``RecursionError`` for one nested
    too deeply, ``UnicodeDecodeError`` for one with bytes that are not UTF-8 in a string."""

    async def json(self) -> Any:
        try:
            return await super().json()
        except RecursionError as exc:
            raise ClientException("the JSON body is nested too deeply to read") from exc
        except UnicodeDecodeError as exc:
            raise ClientException(
                f"the JSON body is not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
            ) from exc
        except SerializationException as exc:
            # The decoder reads a lone surrogate escape as "Input data was truncated".
            lone = _LONE_SURROGATE.search(await self.body()) if "truncated" in str(exc) else None
            if lone is None:
                raise
            raise ClientException(
                f"the JSON body holds {lone.group('escape').decode()}, half of a UTF-16 surrogate pair without its"
                " other half: not a character"
            ) from exc


# A \uD800-\uDBFF escape not followed by a \uDC00-\uDFFF one, or one of those not after
# one; an escape is a backslash after an even run of them (``\\ud800`` is a backslash, then text).
_LONE_SURROGATE = re.compile(
    rb"(?<!\\)(?:\\\\)*(?P<escape>\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})"
)


EXCEPTION_HANDLERS = {
    TwinmemError: engine_error,
    ValidationException: validation_error,
    HTTPException: http_error,
    Exception: unexpected_error,
}
