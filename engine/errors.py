"""Errors the engine raises.

Every error twinmem raises on purpose derives from one root, so a caller can
catch the engine's failures without catching programming mistakes::

    TwinmemError
    ├── InvalidInput            a request the engine cannot act on (bad field, bad filter)
    │   └── GuardRejected       the write guard refused the content (personal data, injection)
    ├── NotFound                no such memory in the caller's namespaces
    │   └── MemoryNotFound
    ├── Conflict                the request clashes with stored state
    │   └── VersionMismatch     the caller expected another version (If-Match, expected_version)
    ├── AccessDenied            the caller may not do this
    │   ├── Unauthenticated     no valid token
    │   └── Forbidden           outside the caller's grants (says nothing about the target)
    ├── ConfigError             the configuration file or environment is unusable
    └── BackendError            a storage, index or model backend failed
        ├── StoreError
        ├── VectorIndexError
        └── EmbedderError

Adapters translate their library's exceptions into ``BackendError`` leaves at
their boundary; nothing above ``engine/adapters`` sees ``sqlite3.Error`` and the
like. The HTTP layer maps this tree to statuses in one table (``api/errors.py``).
"""

from __future__ import annotations


class TwinmemError(Exception):
    """Root of every error twinmem raises on purpose."""


class InvalidInput(TwinmemError):
    """The request names something the engine cannot act on."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class GuardRejected(InvalidInput):
    """The write guard refused a memory's content; ``reasons`` says what it found
    (never the matched text itself, which may be a secret)."""

    def __init__(self, message: str, *, reasons: tuple[str, ...], field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.reasons = reasons


class NotFound(TwinmemError):
    """The thing asked for does not exist where the caller may look."""


class MemoryNotFound(NotFound):
    """``namespace`` is None for a memory looked for by id alone, in every namespace the caller sees."""

    def __init__(self, memory_id: str, namespace: str | None) -> None:
        where = f" in namespace {namespace!r}" if namespace is not None else ""
        super().__init__(f"memory {memory_id} not found{where}")
        self.memory_id = memory_id
        self.namespace = namespace


class Conflict(TwinmemError):
    """The request clashes with what is stored (for example a stale version)."""

    def __init__(self, message: str, *, memory_id: str | None = None) -> None:
        super().__init__(message)
        self.memory_id = memory_id


class StaleWrite(Conflict):
    """The store refused a write decided on a version another writer has replaced since
    (every write names the version it replaces, checked in its own transaction): within
    one process the write lock keeps this from happening, across replicas it does not."""

    def __init__(self, memory_id: str, *, replaces: int, current: int) -> None:
        super().__init__(
            f"memory {memory_id} is at version {current}, not {replaces}: another writer changed it first",
            memory_id=memory_id,
        )
        self.current_version = current


class SaveOvertaken(StaleWrite):
    """A save was judged on the memories as they stood at one change of the store, and
    another writer (another replica) stored, before the save's own transaction, a memory
    that judgment had to see: one of the same session, whose ``NEXT`` chain the save goes
    on (two saves after one end fork it), or one of the same text in the namespace (its
    repeat). Decided again on the store as it now stands."""

    def __init__(self, memory_id: str) -> None:
        Conflict.__init__(
            self,
            f"another writer stored memory {memory_id} of the same session or text first",
            memory_id=memory_id,
        )
        self.current_version = 0


class VersionMismatch(Conflict):
    """The caller made its change conditional on a version the memory no longer has
    (optimistic concurrency: read, then write only if nobody wrote in between)."""

    def __init__(self, memory_id: str, *, expected: int, current: int) -> None:
        super().__init__(
            f"memory {memory_id} is at version {current}, not the expected version {expected}: read it again and retry",
            memory_id=memory_id,
        )
        self.expected_version = expected
        self.current_version = current


def expect_version(memory_id: str, current: int, expected: int | None) -> None:
    """Raise ``VersionMismatch`` unless ``expected`` is None or the ``current`` version."""
    if expected is not None and expected != current:
        raise VersionMismatch(memory_id, expected=expected, current=current)


class AccessDenied(TwinmemError):
    """The caller may not do what it asked."""


class Unauthenticated(AccessDenied):
    """The request carries no valid token."""


class Forbidden(AccessDenied):
    """The request is outside the caller's grants. The message names the namespace and the
    permission only, never whether the memory asked for exists."""


class NotOwner(Forbidden):
    """Only a memory's writer or an admin of its namespace may change who sees it."""

    def __init__(self) -> None:
        super().__init__("only the memory's writer or a namespace admin may change its visibility")


class SourceBlocked(Forbidden):
    """The writing agent or session is blocked by an admin."""


class ConfigError(TwinmemError):
    """The configuration file or an environment override is unusable."""


class BackendError(TwinmemError):
    """A storage, index or model backend failed; the operation did not happen."""


class StoreError(BackendError):
    """The system of record failed."""


class VectorIndexError(BackendError):
    """The vector index failed."""


class EmbedderError(BackendError):
    """The embedding model failed or could not be loaded."""
