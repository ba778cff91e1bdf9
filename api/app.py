"""The Litestar application factory.

No I/O at import or in the factory: the lifespan opens the engine (store,
embedder, index) when the server starts and closes it, saving the index, when
the server stops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.di import Provide
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import RedocRenderPlugin, SwaggerRenderPlugin

from api.admin import AdminController
from api.auth import (
    AUTH_LIMITER,
    MEM0_PATH,
    OPEN_PATHS,
    RATE_LIMITER,
    AuditMiddleware,
    FailedAuthReport,
    authenticate,
    provide_access,
)
from api.controllers import HealthController, MemoryController
from api.errors import EXCEPTION_HANDLERS, TwinmemRequest
from api.graph import GraphController
from api.lifecycle import LifecycleController
from api.mem0 import Mem0Controller
from api.portability import PortabilityController
from api.ratelimit import FailedAuthLimiter, RateLimiter
from api.sessions import SessionController
from engine.adapters import open_sessions
from engine.config import Config
from engine.errors import ConfigError, InvalidInput
from engine.security import check_bind
from engine.service import MemoryService
from engine.sessions import Sessions

ServiceFactory = Callable[[Config], MemoryService]
SessionsFactory = Callable[[Config, MemoryService], Sessions]
# app.state: each route handler's query parameters, by its function (a guard is handed a
# copy of the handler that the routes hold, with the same function).
QUERY_PARAMETERS = "query_parameters"
# Takes no query parameter and ignores any it is given (see refuse_unknown_query).
HEALTH_PATH = "/health"


def _default_factory(config: Config) -> MemoryService:
    from engine.adapters import open_service

    return open_service(config)


def _rate_limiter(config: Config) -> dict[str, RateLimiter]:
    limits = config.limits
    if limits.requests_per_minute <= 0:
        return {}
    return {RATE_LIMITER: RateLimiter(limits.requests_per_minute, limits.request_burst)}


def _auth_limiter(config: Config) -> dict[str, FailedAuthLimiter]:
    limits = config.limits
    if config.auth.mode != "tokens" or limits.failed_auths_per_second <= 0:
        return {}  # in local mode no request fails to authenticate
    return {AUTH_LIMITER: FailedAuthLimiter(limits.failed_auths_per_second, limits.failed_auth_burst)}


def create_app(
    config: Config,
    *,
    open_engine: ServiceFactory = _default_factory,
    open_session_store: SessionsFactory = open_sessions,
) -> Litestar:
    @asynccontextmanager
    async def engine_lifespan(app: Litestar) -> AsyncIterator[None]:
        check_bind(config.auth.mode, config.server.host)
        # The engine opens its security store beside its system of record and enforces its
        # block list; the API authenticates and audits through the same one.
        service = await anyio.to_thread.run_sync(open_engine, config)
        app.state.service = service
        try:
            if service.security is None:
                raise ConfigError("the engine was opened without a security store (tokens, blocks, audit)")
            app.state.security = service.security
            # Opening sessions promotes what expired while the service was down.
            sessions = await anyio.to_thread.run_sync(open_session_store, config, service)
            app.state.sessions = sessions
            limiter: FailedAuthLimiter | None = app.state.get(AUTH_LIMITER)
            report = None
            if limiter is not None:
                report = FailedAuthReport(limiter, service.security, config.limits.failed_auth_report_seconds)
                report.start()
            try:
                yield
            finally:
                try:
                    if report is not None:
                        await anyio.to_thread.run_sync(report.stop)
                finally:
                    await anyio.to_thread.run_sync(sessions.stop)
        finally:
            await anyio.to_thread.run_sync(service.close)

    app = Litestar(
        route_handlers=[
            MemoryController,
            HealthController,
            PortabilityController,
            LifecycleController,
            GraphController,
            AdminController,
            SessionController,
            Mem0Controller,
        ],
        lifespan=[engine_lifespan],
        # Every routed request is authenticated (guard) and leaves an audit entry (middleware): api/auth.py.
        guards=[authenticate, refuse_unknown_query],
        middleware=[AuditMiddleware],
        dependencies={"access": Provide(provide_access, sync_to_thread=False)},
        state=State({"config": config, **_rate_limiter(config), **_auth_limiter(config)}),
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        request_class=TwinmemRequest,
        request_max_body_size=config.server.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title="twinmem",
            version="0.1.0",
            description="Long-term memory for LLM agents, independent of any agent framework.",
            path="/schema",
            render_plugins=[SwaggerRenderPlugin(path="/swagger"), RedocRenderPlugin(path="/redoc")],
        ),
    )
    app.state[QUERY_PARAMETERS] = {
        handler.fn: frozenset(parameter.field_alias for parameter in kwargs.expected_query_params)
        for route in app.routes
        for handler, kwargs in getattr(route, "route_handler_map", {}).values()
        if kwargs is not None
    }
    return app


def refuse_unknown_query(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """A query parameter the endpoint does not take is refused (422), as an unknown field of
    a body is: a misspelt ``namespace`` would otherwise act on ``default``. Not on the mem0
    routes, whose clients send parameters of mem0's platform, nor on the schema's pages, nor
    on ``/health``: a probe or monitor may add a cache-busting parameter (``?_=1733600000``),
    and a health check answered 422 reads as the service being down."""
    path = connection.url.path
    if connection.scope.get("method") == "OPTIONS":  # a preflight carries the query of the request it asks for
        return
    if path.startswith(OPEN_PATHS) or path == MEM0_PATH or path.startswith(MEM0_PATH + "/"):
        return
    if path.rstrip("/") == HEALTH_PATH:
        return
    known: frozenset[str] | None = connection.app.state[QUERY_PARAMETERS].get(handler.fn)
    if known is None:
        return
    unknown = sorted(set(connection.query_params) - known)
    if unknown:
        takes = f"it takes {', '.join(sorted(known))}" if known else "it takes none"
        raise InvalidInput(f"unknown query parameter(s) {', '.join(unknown)}: {takes}", field=unknown[0])
