"""The Python client moved to its own package, ``twinmem_client``; this name stays for old imports.

from twinmem_client import TwinmemClient
"""

from twinmem_client import APIError as ClientError
from twinmem_client import AsyncTwinmemClient, TwinmemClient

__all__ = ["AsyncTwinmemClient", "ClientError", "TwinmemClient"]
