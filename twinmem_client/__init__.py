"""twinmem_client: a typed Python client for the twinmem memory service, sync and async.

    from twinmem_client import TwinmemClient, AsyncTwinmemClient

The framework adapters live beside it and import their framework only when used:
``twinmem_client.langgraph`` (a LangGraph ``BaseStore``), ``twinmem_client.langchain``
(a ``BaseRetriever``), ``twinmem_client.autogen`` (an ``autogen_core`` ``Memory``) and
``twinmem_client.agent_framework`` (a Microsoft Agent Framework context provider).
"""

from twinmem_client.async_client import AsyncTwinmemClient
from twinmem_client.client import TwinmemClient
from twinmem_client.errors import (
    APIError,
    AuthenticationFailed,
    BadRequest,
    ClientError,
    Conflict,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    PreconditionFailed,
    RateLimited,
    ServerError,
    TransportError,
    ValidationFailed,
)
from twinmem_client.models import BatchResult, Deleted, Hit, Memory, Page, SaveResult, Version

__all__ = [
    "APIError",
    "AsyncTwinmemClient",
    "AuthenticationFailed",
    "BadRequest",
    "BatchResult",
    "ClientError",
    "Conflict",
    "Deleted",
    "Hit",
    "Memory",
    "NotFound",
    "Page",
    "PayloadTooLarge",
    "PermissionDenied",
    "PreconditionFailed",
    "RateLimited",
    "SaveResult",
    "ServerError",
    "TransportError",
    "TwinmemClient",
    "ValidationFailed",
    "Version",
]
