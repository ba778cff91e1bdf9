"""Adapters: the only modules that import backend libraries.

``open_service`` wires a ``MemoryService`` from a ``Config``: the store, the
security store (tokens, blocks, audit), the embedder, and the vector index
(loaded from the data directory and caught up, or rebuilt); which adapter each
name opens is the table in ``engine.adapters.registry``. It takes an exclusive
lock on the data directory, because the embedded SQLite mode keeps one
in-process index per data directory. In server
mode (``store = "neo4j"``) the data directory holds only that index, so several
processes with a data directory each share one graph database; each index
catches up from the store's change sequence.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from engine import conflicts, entities, guard, text
from engine.adapters import registry
from engine.adapters.registry import DB_FILE as DB_FILE  # where callers have always found it
from engine.config import Config
from engine.entities import extract_entities
from engine.errors import ConfigError, EmbedderError, StoreError
from engine.fast_network import FastNetwork
from engine.files import make_data_dir
from engine.index_keeper import IndexKeeper
from engine.ports import Embedder, SecurityStore, SessionStore, Store
from engine.records import utcnow
from engine.service import MemoryService
from engine.sessions import Sessions

if TYPE_CHECKING:
    from engine.adapters.time_expressions import LibraryTimeExpressions
    from engine.adapters.time_worker import WorkerTimeExpressions

log = logging.getLogger(__name__)

INDEX_DIR = "index"
LOCK_FILE = ".lock"
# How long a close waits for a library still loading in the background (torch takes
# about 2 s, jieba's dictionary 1.5 s).
LOADING_WAIT_S = 60.0


def load_embedder(config: Config) -> Embedder:
    """The embedder ``[embedding] provider`` names (``registry.EMBEDDERS``)."""
    return registry.embedder_kind(config.embedding.provider).load(config.embedding.model, config)


def load_embedder_named(name: str, config: Config) -> Embedder | None:
    """The embedder that records itself as ``name`` (a previous model), or None
    when it cannot be loaded here (logged: its memories are then embedded at start-up)."""
    try:
        return registry.embedder_recording(name).load(name, config)
    except (EmbedderError, ConfigError) as exc:
        log.warning("previous embedding model %r cannot be loaded (%s): its memories are embedded now", name, exc)
        return None


def _previous_embedder(store: Store, embedder: Embedder, config: Config) -> Embedder | None:
    """The model most memories lacking a current vector were embedded with, if it loads."""
    pending = store.missing_vector_models(embedder.name)
    if not pending:
        return None
    name = max(pending, key=lambda model: pending[model])
    return load_embedder_named(name, config) if name else None


def new_store(config: Config) -> Store:
    """The configured system of record (``registry.STORES``), not yet opened.

    SQLite lives in the data directory. With Neo4j the data directory still holds
    this process's HNSW index (and the lock on it), so several API processes, each
    with a data directory of its own, can share one graph database.
    """
    return registry.store_kind(config).store(config)


class _DirLock:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        make_data_dir(self._path.parent)
        fh = open(self._path, "a+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            fh.close()
            raise _in_use(self._path.parent) from exc
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    @property
    def held(self) -> bool:
        """Whether it is still held: a service that took it over frees it when it closes."""
        return self._fh is not None

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def _in_use(data_dir: Path) -> StoreError:
    return StoreError(f"data directory {data_dir} is in use by another twinmem process")


def refuse_data_dir_in_use(data_dir: Path) -> None:
    """``StoreError`` (as ``hold_data_dir``'s) where another twinmem process holds ``data_dir``,
    told without making anything there, nor taking the lock: ``twinmem serve`` asks before it
    loads the embedding model (seconds, or minutes), which it loads before it makes anything in
    the directory. The lock is taken after the load (``hold_data_dir``); a process that takes
    it in between is refused then."""
    try:
        fh = open(Path(data_dir) / LOCK_FILE, encoding="utf-8")  # read-only: never made here
    except OSError:
        return  # no lock file (no twinmem holds it), or none to read: hold_data_dir says why
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise _in_use(Path(data_dir)) from exc


def hold_data_dir(data_dir: Path) -> _DirLock:
    """The lock on ``data_dir``, taken now (``StoreError`` where another twinmem process holds
    it): ``twinmem serve`` takes it before it starts, so that it says so in one line rather
    than in a failed start-up's traceback, and hands it to ``open_service`` (``dir_lock``),
    so that no other process can take the directory in between."""
    lock = _DirLock(Path(data_dir) / LOCK_FILE)
    lock.acquire()
    return lock


def open_service(
    config: Config,
    *,
    embedder: Embedder | None = None,
    clock: Callable[[], datetime] = utcnow,
    previous_embedder: Embedder | None = None,
    background_reembed: bool = True,
    security: SecurityStore | None = None,
    dir_lock: _DirLock | None = None,
    configured: bool = False,
) -> MemoryService:
    """Open the store, load or rebuild the index, start background work.

    ``security`` is the tokens, blocks and audit store whose block list the service
    enforces (``service.security``); without one, the configured one (``open_security``)
    is opened here and closed with the service.

    After a change of embedding model, ``previous_embedder`` (by default loaded
    by the name the memories record, when it loads here) serves recall for the
    memories the background job has not re-embedded yet. ``background_reembed``
    False leaves that job to be run by hand (``service.reembedder.run()``).

    ``dir_lock`` is the data directory's lock already taken (``hold_data_dir``); the service
    then holds it, and frees it when it closes or fails to open, as one it takes itself.

    ``configured``: ``embedder`` is the one the config names, loaded by the caller (``twinmem
    serve`` loads it before it makes anything in the data directory); the previous model is
    then looked for as for one loaded here. The model is loaded before the security store
    opens: a model that cannot load makes no ``security.sqlite3``.
    """
    from engine.adapters.bm25_lexical import build_scorer
    from engine.adapters.half_cosines import half_cosines
    from engine.adapters.hnsw_index import HnswIndex
    from engine.adapters.time_expressions import LibraryTimeExpressions
    from engine.adapters.time_worker import WorkerTimeExpressions

    data_dir = Path(config.data_dir)
    if dir_lock is None:
        lock = _DirLock(data_dir / LOCK_FILE)
        lock.acquire()
    else:
        lock = dir_lock
    owned: SecurityStore | None = None
    store: Store | None = None
    keeper: IndexKeeper | None = None
    try:
        loaded_embedder = embedder is None or configured
        embedder = embedder or load_embedder(config)
        if security is None:
            security = owned = open_security(config, clock=clock)
        opening = new_store(config)
        opening.open()
        store = opening
        index_dir = data_dir / INDEX_DIR
        dim, model, idx = embedder.dim, embedder.name, config.index
        ahead = idx.lexicon_build_ahead_ms / 1000 if idx.lexicon_build_ahead_ms > 0 else None

        def new_index() -> HnswIndex:
            return HnswIndex(
                dim,
                model=model,
                m=idx.m,
                ef_construction=idx.ef_construction,
                ef_search=idx.ef_search,
                search_threads=idx.search_threads,
            )

        # The fast network's, made new or loaded; it keeps the read findings and claim
        # slots of these rules, and the terms and entity keys of this text analysis.
        network_options: dict[str, Any] = {
            "category_index": new_index,
            "category_indexes": idx.category_indexes,
            "model": model,
            "dim": dim,
            "rough": half_cosines,
            "warm_after": ahead,
            "read_rules": guard.read_rules(),
            "claim_rules": conflicts.rules(),
            "analysis": text.analysis(),
            "entity_keys": entities.key_rules(),
        }

        if previous_embedder is None and loaded_embedder:
            previous_embedder = _previous_embedder(store, embedder, config)

        def new_legacy_index(old: Embedder) -> HnswIndex:
            return HnswIndex(
                old.dim, model=old.name, m=idx.m, ef_construction=idx.ef_construction, ef_search=idx.ef_search
            )

        keeper = IndexKeeper(
            store,
            embedder,
            new_index=new_index,
            new_network=lambda: FastNetwork(build_scorer, **network_options),
            directory=index_dir,
            previous=previous_embedder,
            new_legacy_index=new_legacy_index,
        )
        # The two saved files are checked (SHA-256) and read side by side: hashing and
        # reading release the GIL, and at a million memories each is a gigabyte or more.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-load") as loader:
            index = loader.submit(
                HnswIndex.load,
                index_dir,
                dim=dim,
                model=model,
                ef_search=idx.ef_search,
                search_threads=idx.search_threads,
            )
            network = FastNetwork.load(index_dir, build_scorer, **network_options)
            keeper.start(index.result(), network)
        if keeper.rebuilt_at_start or keeper.network_rebuilt_at_start:
            keeper.save()
        times = WorkerTimeExpressions() if config.recall.time_worker else LibraryTimeExpressions()
        loading: list[threading.Thread] = []
        service = MemoryService(
            config,
            store,
            keeper,
            embedder,
            clock=clock,
            on_close=_closing(owned, lock, times, loading),
            times=times,
            security=security,
        )
        service.start(background_reembed=background_reembed)
        loading.append(_load_language_data(service, times))
        # torch, for the exact scan, imported from now on in the background (it would slow
        # the loading above): engine/adapters/half_cosines.py
        half_cosines.ready()
        return service
    except BaseException:
        try:  # what was opened here, closed again: no driver or build thread left behind
            if keeper is not None:
                keeper.stop()
            if store is not None:
                store.close()
        finally:
            _closing(owned, lock)()
        raise


def _load_language_data(
    service: MemoryService, times: LibraryTimeExpressions | WorkerTimeExpressions
) -> threading.Thread:
    """The libraries that read text, loaded in a background thread once the service is
    open, so that the first request needing one does not wait for it: dateparser (about
    0.3 s and 12 MB here) when the time signal is on; for a store that holds Chinese, also
    jieba's dictionary and its tagger (about 1.5 s and 110 MB: the search terms and the
    entities of Chinese text) and JioNLP (0.3 s). A store without Chinese loads those on
    its first Chinese text, as before."""

    def load() -> None:
        try:
            chinese = service.keeper.network.holds_chinese()
            if service.config.fusion.time > 0:
                times.load(chinese=chinese)
            if chinese:
                text.terms("中文")
                extract_entities("中文")
        except Exception:  # a library that fails here fails again, and is reported, where it is used
            log.warning("loading the text libraries in the background failed", exc_info=True)

    loader = threading.Thread(target=load, name="language-data", daemon=True)
    loader.start()
    return loader


def _closing(
    owned: SecurityStore | None,
    lock: _DirLock,
    times: LibraryTimeExpressions | WorkerTimeExpressions | None = None,
    loading: Sequence[threading.Thread] = (),
) -> Callable[[], None]:
    """Wait for the libraries still loading in the background (a process that ends while
    a thread is inside a native import can abort: ``HalfCosines.settle``), close the
    security store ``open_service`` opened itself and the time-parsing worker, then free
    the data directory."""

    def close() -> None:
        try:
            from engine.adapters.half_cosines import half_cosines

            for loader in loading:
                loader.join(LOADING_WAIT_S)
            half_cosines.settle(LOADING_WAIT_S)
            if times is not None:
                times.close()
            if owned is not None:
                owned.close()
        finally:
            lock.release()

    return close


def open_security(config: Config, *, clock: Callable[[], datetime] = utcnow) -> SecurityStore:
    """Open the tokens-and-audit store and store the tokens the
    config file declares (``[[auth.tokens]]``): their agent and grants follow the file,
    and a token revoked through the API stays revoked.

    It lives beside the system of record (``registry.STORES``): a file of the data
    directory with SQLite, the graph itself in server mode, shared by every replica."""
    from engine.errors import InvalidInput
    from engine.security import CONFIG_TOKEN_PREFIX, TokenRecord, grants_from

    store = registry.store_kind(config).security(config)
    store.open()
    try:
        for seed in config.auth.tokens:
            try:
                grants = grants_from(seed.grants)
            except InvalidInput as exc:
                raise ConfigError(f"[[auth.tokens]] of agent {seed.agent!r}: {exc}") from exc
            now = clock()
            record = TokenRecord(
                CONFIG_TOKEN_PREFIX + seed.token_hash[:12], seed.agent, grants, now, expires_at=seed.expires_at
            )
            store.add_token(record, seed.token_hash)
            if seed.expires_at is not None and now >= seed.expires_at:
                # Still stored and the start goes on (a config valid yesterday must restart
                # today); every request carrying it is refused, so say so once, here.
                log.warning(
                    "[[auth.tokens]] of agent %r (token %s) expired at %s: every request carrying it is refused;"
                    " give the entry a later expires_at or take it out",
                    seed.agent,
                    record.token_id,
                    seed.expires_at.isoformat(),
                )
    except BaseException:
        store.close()
        raise
    return store


def open_sessions(config: Config, service: MemoryService, *, background: bool = True) -> Sessions:
    """The configured session store, opened, with expired sessions promoted (an expiry
    while the service was down) and, with ``background``, the sweep started."""
    from engine.adapters.tokenizer import load_token_counter

    settings = config.sessions
    store: SessionStore
    if settings.backend == "redis":
        from engine.adapters.session_redis import RedisSessionStore

        store = RedisSessionStore(
            settings.redis_url, prefix=settings.redis_prefix, keep_seconds=settings.redis_keep_days * 86400
        )
    else:
        from engine.adapters.session_sqlite import SESSIONS_FILE, SqliteSessionStore

        store = SqliteSessionStore(Path(config.data_dir) / SESSIONS_FILE)
    store.open()
    sessions = Sessions(settings, store, service, load_token_counter())
    try:
        sessions.start(background=background)
    except BaseException:
        sessions.stop()
        raise
    return sessions
