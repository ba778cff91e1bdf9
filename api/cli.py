"""The ``twinmem`` command."""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import logging
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Literal

from engine.config import Config, load_config
from engine.errors import ConfigError, InvalidInput, TwinmemError
from engine.security import check_bind

if TYPE_CHECKING:
    from engine.ports import Embedder, SecurityStore
    from engine.service import MemoryService

# The formats `twinmem import` reads (engine.importers.FORMATS; not imported here,
# so that `twinmem --help` stays quick).
IMPORT_FORMATS = ("twinmem", "mem0", "langchain", "csv", "jsonl")
# How long an idle HTTP connection stays open. Longer than clients keep theirs
# (twinmem_client: 30 s), so a client does not send a request just as the server
# closes the connection under it (uvicorn's default is 5 s, the same as httpx's).
SERVER_KEEP_ALIVE_S = 75
# The status of a serve whose app failed to start (uvicorn.run's own).
STARTUP_FAILURE = 3
# uvicorn's own backlog (uvicorn.Config's default), which it sets again when it serves.
LISTEN_BACKLOG = 2048


class _Stops:
    """The SIGINT and SIGTERM ``_stops_kept`` noted, and what a stop does once the server
    that answers it exists (``then``)."""

    def __init__(self) -> None:
        self.noted: list[int] = []
        self._act: Callable[[], None] | None = None

    def note(self, signum: int, frame: FrameType | None) -> None:
        self.noted.append(signum)
        if self._act is not None:
            self._act()

    def then(self, act: Callable[[], None]) -> None:
        """Do ``act`` at a stop from now on, and at once for one already noted."""
        self._act = act
        if self.noted:
            act()

    def __bool__(self) -> bool:
        return bool(self.noted)


@contextlib.contextmanager
def _stops_kept() -> Iterator[_Stops]:
    """SIGINT and SIGTERM noted instead of raised, while ``serve`` opens or closes the
    engine itself: raised in the main thread, a stop cut the start-up (an index build, a
    promotion of expired sessions) wherever it was, and Ctrl-C ended in a traceback.
    uvicorn takes both signals while it runs, and on the way out raises again the one that
    stopped it, which is then only noted: a clean stop is status 0, on SIGTERM as on
    Ctrl-C (the default handler would turn SIGTERM into status 143). A stop that comes
    after the start-up but before uvicorn takes the signals asks the server to exit
    (``_Stops.then``): it was noted and nothing read it, and the server served on."""
    stops = _Stops()
    previous = {number: signal.signal(number, stops.note) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stops
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class _Stopped(Exception):
    """SIGINT or SIGTERM, raised where ``serve`` may stop at once (``_stops_raised``)."""


@contextlib.contextmanager
def _stops_raised() -> Iterator[None]:
    """SIGINT and SIGTERM raised as ``_Stopped`` in the main thread, wherever it is: while
    ``serve`` loads the embedding model, which holds nothing to finish or close (a model the
    hub is asked for retried for minutes, and a stop waited for the end of it)."""

    def stop(number: int, frame: FrameType | None) -> None:
        raise _Stopped(signal.Signals(number).name)

    previous = {number: signal.signal(number, stop) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _listening_socket(host: str, port: int) -> socket.socket:
    """The socket ``serve`` listens on, bound as uvicorn binds its own, before anything opens:
    bound by uvicorn, an address in use failed after the engine had opened and the log said
    "twinmem serving …", in uvicorn's error line and a lifespan shutdown. It listens at once:
    with SO_REUSEADDR, a port bound by a socket that does not listen yet is no port in use
    to another's bind, so a second serve started while the first opened took it too.
    Connections that arrive while the engine opens wait in the backlog."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        where = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            hint = "(another twinmem, or another server, on it?); choose another with --port or [server] port"
        elif isinstance(exc, socket.gaierror):
            hint = f"(no address for {host}); choose another with --host or [server] host"
        elif exc.errno == errno.EADDRNOTAVAIL:
            hint = f"({host} is not an address of this machine); choose another with --host or [server] host"
        else:
            hint = "; choose another with --host or [server] host, or --port or [server] port"
        raise ConfigError(f"cannot listen on {where}: {exc.strerror or exc} {hint}".replace(" ;", ";")) from exc
    sock.set_inheritable(True)
    return sock


# Query parameters whose values an access-log line never shows. Tokens go in a header;
# a client that puts one in the URL is refused (422), but uvicorn logs the URL first.
# A name is read as the server reads it, percent-decoded ("t%6Fken" is "token").
_SECRET_PARAMETER = re.compile(r"token|key|secret|pass|pwd|auth|credential|signature|jwt", re.IGNORECASE)


def redacted_target(target: str) -> str:
    """A request's path and query with the value of each parameter whose name reads as a
    credential (``_SECRET_PARAMETER``) replaced by ``[redacted]``; the rest as sent."""
    path, mark, query = target.partition("?")
    if not mark:
        return target
    parts = []
    for part in query.split("&"):
        name, equals, _ = part.partition("=")
        secret = _SECRET_PARAMETER.search(urllib.parse.unquote_plus(name))
        parts.append(f"{name}=[redacted]" if equals and secret else part)
    return f"{path}?{'&'.join(parts)}"


class SecretsOutOfAccessLog(logging.Filter):
    """uvicorn's access lines (``client - "METHOD target HTTP/x" status``: the target is
    their third argument) with ``redacted_target``'s target."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redacted_target(args[2]), *args[3:])
        return True


def _serve(args: argparse.Namespace) -> int:
    overrides = _data_dir_override(args)
    server: dict[str, object] = {}
    if args.host:
        server["host"] = args.host
    if args.port is not None:  # --port 0 too: refused as [server] port = 0 is, not dropped
        server["port"] = args.port
    if server:
        overrides["server"] = server
    config = _checked(load_config(args.config, None, **overrides), new_security=args.new_security_file)
    check_bind(config.auth.mode, config.server.host)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The port first, before anything loads (the app's modules, the model: seconds, or minutes
    # with a hub asked for a model): one in use stops the command at once, in one line, and
    # requests sent while it starts wait in the backlog until it serves.
    listening = _listening_socket(config.server.host, config.server.port)
    try:
        return _serve_on(args, config, listening)
    finally:
        listening.close()


def _serve_on(args: argparse.Namespace, config: Config, listening: socket.socket) -> int:
    """``serve`` once its socket listens (``_serve`` closes it)."""
    from engine.adapters import hold_data_dir, load_embedder, open_service, open_sessions, refuse_data_dir_in_use

    # A directory another twinmem holds is refused before the load, without making anything.
    refuse_data_dir_in_use(config.data_dir)
    # The model next, before anything is made in the data directory (its lock, the security
    # store): a model that cannot load stops the command with the directory as it was. A stop
    # asked meanwhile ends the command at once: a load holds nothing to finish or close, and
    # requests waiting in the backlog are refused as the socket closes.
    try:
        with _stops_raised():
            embedder = load_embedder(config)
            import uvicorn

            from api.app import create_app
    except _Stopped:
        logging.getLogger(__name__).info("twinmem stopped: asked to stop while it loaded the embedding model")
        return 0
    # Taken here, to refuse a directory taken since the check in one line, and held until the
    # engine opens with it: no other process can take it in between.
    held = hold_data_dir(config.data_dir)
    try:
        with _stops_kept() as stops:
            # Opened here rather than in the app's start-up, so that a store that cannot open
            # (a Bolt server or a Redis that refuses, a damaged file) stops the command in one
            # line (main: status 2), not in a failed start-up's traceback.
            service = open_service(config, dir_lock=held, embedder=embedder, configured=True)
            try:
                sessions = open_sessions(config, service)  # promotes what expired while it was down
            except BaseException:
                service.close()
                raise
            if stops:  # asked to stop while it opened: the start-up finished; nothing is served
                logging.getLogger(__name__).info("twinmem stopped: asked to stop while it started")
                sessions.stop()
                service.close()
                return 0
            host = config.server.host
            logging.getLogger(__name__).info(
                "twinmem serving %s on http://%s:%d (embedder: %s)",
                config.data_dir,
                f"[{host}]" if ":" in host else host,  # an IPv6 address, as a URL writes it
                listening.getsockname()[1],
                config.embedding.provider,
            )
            handed: list[MemoryService] = []

            def hand_over(_config: Config) -> MemoryService:
                handed.append(service)  # the app's start-up takes both, and its shutdown closes both
                return service

            uvicorn_config = uvicorn.Config(
                create_app(config, open_engine=hand_over, open_session_store=lambda _config, _service: sessions),
                host=config.server.host,
                port=config.server.port,
                log_level=args.log_level,
                timeout_graceful_shutdown=10,
                timeout_keep_alive=SERVER_KEEP_ALIVE_S,
                # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise: any local
                # client could name itself another address, and so get past the per-address
                # limit on failed authentications. Only the configured proxies are believed.
                proxy_headers=bool(config.server.trusted_proxies),
                forwarded_allow_ips=list(config.server.trusted_proxies),
            )
            logging.getLogger("uvicorn.access").addFilter(SecretsOutOfAccessLog())  # after the Config's set-up
            uvicorn_server = uvicorn.Server(uvicorn_config)
            stops.then(lambda: setattr(uvicorn_server, "should_exit", True))
            try:
                uvicorn_server.run(sockets=[listening])
                if not uvicorn_server.started:
                    return STARTUP_FAILURE  # the app's start-up failed; uvicorn logged why
            finally:
                # Not taken by the app's start-up, or not closed by its shutdown: a force quit
                # (a second Ctrl-C) skips that, and the end of uvicorn's loop cancels it
                # before it closes anything. The service frees the data directory as it closes.
                if not handed or held.held:
                    sessions.stop()
                    service.close()
    finally:
        held.release()  # the engine freed it when it closed; not where it never opened
    return 0


def _open_service(
    config: Config,
    security: SecurityStore,
    embedder: Embedder,
    *,
    over_http: str,
    background_reembed: bool = True,
) -> MemoryService:
    """The service on the command's data directory, with the model the command loaded
    (``_audited``); where a server holds it, a ``StoreError`` that says to stop it first, or
    to ask it over HTTP (``over_http``, the route)."""
    from engine.adapters import hold_data_dir, open_service
    from engine.errors import StoreError

    try:
        held = hold_data_dir(config.data_dir)
    except StoreError as exc:
        raise _held_by_a_server(exc, over_http) from exc
    return open_service(
        config,
        background_reembed=background_reembed,
        security=security,
        dir_lock=held,
        embedder=embedder,
        configured=True,
    )


@dataclass
class _CliEntry:
    """What one command did, for its audit entry."""

    outcome: str = "error"
    memory_ids: list[str] = field(default_factory=list)
    # Written beyond the one the command names (an import without --namespace writes the file's).
    namespaces: list[str] = field(default_factory=list)
    detail: str | None = None


def _held_by_a_server(exc: TwinmemError, over_http: str) -> TwinmemError:
    """The refusal of a data directory another twinmem holds, with what to do instead."""
    from engine.errors import StoreError

    return StoreError(f"{exc}; stop the server first, or ask it over HTTP ({over_http})")


@contextlib.contextmanager
def _audited(
    config: Config, action: str, namespace: str | None, *, over_http: str
) -> Iterator[tuple[_CliEntry, SecurityStore, Embedder]]:
    """Leave an audit entry (actor ``cli``) for an export, import or consolidation run from the
    command line, as the API does for its requests: with the outcome, also when it fails.
    Yields the entry to fill in, the security store and the embedding model (for the service
    the command opens, ``_open_service``).

    The model is loaded first, before anything is made in the data directory, as ``serve``
    does: a model that cannot load (or a directory a server holds) leaves a new data directory
    as it was, with no audit log made only to record that. Where the audit log is there
    already, the failure is recorded in it. ``over_http``: the route to ask a server that
    holds the directory (``_held_by_a_server``)."""
    from engine.adapters import load_embedder, open_security, refuse_data_dir_in_use
    from engine.errors import StoreError

    entry = _CliEntry()
    try:
        try:
            refuse_data_dir_in_use(config.data_dir)  # before the load (seconds), as serve does
        except StoreError as exc:
            raise _held_by_a_server(exc, over_http) from exc
        embedder = load_embedder(config)
    except BaseException:
        if _audit_log_there(config):
            security = open_security(config)
            try:
                _append_entry(security, action, namespace, entry)
            finally:
                security.close()
        raise
    security = open_security(config)
    try:
        yield entry, security, embedder
    finally:
        try:
            _append_entry(security, action, namespace, entry)
        finally:
            security.close()


def _audit_log_there(config: Config) -> bool:
    """Whether the command's audit log is there already: in server mode always (the graph holds
    it); with SQLite, where the data directory holds its file."""
    from engine.adapters.security_store import SECURITY_FILE

    return config.store != "sqlite" or (Path(config.data_dir) / SECURITY_FILE).exists()


def _append_entry(security: SecurityStore, action: str, namespace: str | None, entry: _CliEntry) -> None:
    import uuid

    from engine.records import utcnow
    from engine.security import AuditEvent

    namespaces = tuple(dict.fromkeys([namespace or "*", *entry.namespaces]))
    event = AuditEvent("cli", action, entry.outcome, utcnow(), uuid.uuid4().hex, namespaces, tuple(entry.memory_ids))
    security.append_audit(replace(event, detail=entry.detail))


def _export(args: argparse.Namespace) -> int:
    from engine.portability import deployment_id, open_export

    config = _config(args, held="memories")
    if args.output != "-":
        data_dir = Path(os.path.realpath(config.data_dir))
        if Path(os.path.realpath(args.output)).is_relative_to(data_dir):
            # Over the store itself, the export destroyed what it exported; no file there is the user's.
            raise InvalidInput(
                f"cannot write the export to {args.output}: it is inside the data directory {config.data_dir};"
                " write it elsewhere",
                field="output",
            )
    try:
        with contextlib.ExitStack() as stack:
            # Opened before the data directory, so that an output that cannot be written stops the
            # command in one line, and an export that fails leaves the file it would replace as it was.
            out = sys.stdout.buffer if args.output == "-" else stack.enter_context(_replacing(args.output))
            with _audited(config, "export", args.namespace, over_http="GET /v1/export") as (entry, security, embedder):
                service = _open_service(config, security, embedder, over_http="GET /v1/export")
                try:
                    export = open_export(
                        service,
                        args.namespace,
                        versions=args.versions,
                        vectors=args.vectors,
                        source_deployment=deployment_id(service.config.data_dir),
                    )
                    for chunk in export.chunks():
                        out.write(chunk)
                    out.flush()
                    count = export.header["counts"]["memories"]
                    others = [] if count else service.namespaces()
                finally:
                    service.close()
                entry.outcome = "ok"
                entry.detail = f"{count} memories to {args.output}"
    except OSError as exc:
        # A full disk or quota, a file too big, a read-only or failing device: said in one
        # line, as an output that cannot be opened is, not in a traceback. (A closed pipe is
        # main's to say.)
        if isinstance(exc, BrokenPipeError) or exc.errno not in _WRITE_FAILURES:
            raise
        where = "standard output" if args.output == "-" else args.output
        raise InvalidInput(f"cannot write the export to {where}: {exc.strerror or exc}", field="output") from exc
    if args.output != "-":
        # Not into the export itself, where -o names standard output (/dev/stdout): a line
        # after its end line, it was refused when imported.
        said = sys.stderr if _same_file(args.output, sys.stdout) else sys.stdout
        print(f"exported {count} memories of {args.namespace!r} to {args.output}", file=said)
    if not count:
        # A valid export (it imports as nothing), as GET /v1/export gives; but a mistyped
        # namespace would go unseen, so say which namespaces hold memories.
        shown = ", ".join(others[:_NAMESPACES_SHOWN]) + (", …" if len(others) > _NAMESPACES_SHOWN else "")
        print(
            f"twinmem: no memories in namespace {args.namespace!r}"
            + (f" (the namespaces with memories here: {shown})" if others else " (none here holds any)"),
            file=sys.stderr,
        )
    return 0


@contextlib.contextmanager
def _replacing(output: str) -> Iterator[IO[bytes]]:
    """A file that takes the place of ``output`` only once it is whole: written beside it and
    renamed over it. Opened on ``open(output, "wb")``, an export truncated the last good
    backup at once, and one that failed left a header without its memories in its place.
    Something not a regular file (a pipe) is written into as it is, and so is a descriptor
    named by path (``/dev/stdout``, ``/dev/fd/N``): renamed over the file the descriptor had
    open (``>> exports.jsonl``), the export dropped what the file held, and what was written
    to the descriptor after it went to a file no longer there. Once renamed, the directory
    is synced too, so that an export that said "exported" is there after a crash."""
    path = Path(output)
    real = Path(os.path.realpath(path))  # a link is followed, not replaced
    fd: int | None = None
    part: str | None = None
    try:
        descriptor = _descriptor(output)
        if descriptor is not None:
            stream = os.fdopen(os.dup(descriptor), "wb")  # its offset and its O_APPEND, shared
        elif path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "it is a directory; name a file")
        elif path.exists() and not path.is_file():
            stream = open(path, "wb")
        else:
            if real.exists() and not os.access(real, os.W_OK):
                # A rename needs no write permission on the file: a backup made read-only stays so.
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            fd, part = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".part")
    except OSError as exc:
        raise InvalidInput(f"cannot write the export to {output}: {exc.strerror or exc}", field="output") from exc
    if fd is None or part is None:
        with stream:
            yield stream
        return
    try:
        # The old file's mode where it replaces one; a new one keeps mkstemp's 0600: it holds
        # every memory of the namespace, and the data directory itself is 0700.
        if real.exists():
            os.chmod(part, real.stat().st_mode & 0o7777)
        with os.fdopen(fd, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(part, real)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
        raise
    directory = os.open(real.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _descriptor(output: str) -> int | None:
    """The descriptor of this process that ``output`` names through /proc (``/dev/stdout``,
    ``/dev/fd/3``, ``/proc/self/fd/3``, or a link to one of them), or None."""
    path = os.path.abspath(output)
    for _ in range(40):  # the kernel's own bound on links followed
        folder, name = os.path.split(path)
        if re.fullmatch(rf"/proc/{os.getpid()}(/task/\d+)?/fd", os.path.realpath(folder)) and name.isdigit():
            return int(name)
        if not os.path.islink(path):
            return None
        path = os.path.join(folder, os.readlink(path))
    return None


def _same_file(output: str, stream: IO[str]) -> bool:
    """Whether ``output`` is the file, pipe or terminal ``stream`` writes to."""
    try:
        there, here = os.stat(output), os.fstat(stream.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return False
    return (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino)


def _import(args: argparse.Namespace) -> int:
    from engine.importers import parse_mapping, run_import

    # Dropped by the other formats, they went unseen: a CSV imported without --format csv
    # was read as a twinmem export, its mapping ignored.
    if args.map is not None and args.format not in ("csv", "jsonl"):
        raise InvalidInput(f"--map applies to --format csv or jsonl, not {args.format}", field="map")
    if args.session_id is not None and args.format != "langchain":
        raise InvalidInput(f"--session-id applies to --format langchain, not {args.format}", field="session_id")
    mapping = parse_mapping(args.map)
    config = _config(args)
    try:
        source = open(args.file, "rb")  # before the data directory: a wrong path changes nothing there
    except OSError as exc:
        raise InvalidInput(f"cannot read {args.file}: {exc.strerror or exc}", field="file") from exc
    made = _made_for(Path(config.data_dir))
    try:
        with (
            source,
            _audited(config, "import", args.namespace, over_http="POST /v1/import") as (entry, security, embedder),
        ):
            # What a blocked source wrote arrives quarantined.
            service = _open_service(config, security, embedder, over_http="POST /v1/import")
            try:
                report = run_import(
                    service,
                    source,
                    format_name=args.format,
                    namespace=args.namespace,
                    mapping=mapping,
                    session_id=args.session_id or Path(args.file).stem,
                    actor="cli",
                )
            finally:
                service.close()
            entry.outcome = "ok" if report.written else "rejected"
            entry.namespaces, entry.memory_ids = report.namespaces, report.stored
            entry.detail = (
                f"{args.file}: {report.inserted} inserted, {report.updated} updated, {report.unchanged} unchanged"
            )
    except (InvalidInput, KeyboardInterrupt):
        # Refused whole (not JSON, a column the file lacks), or cut short by Ctrl-C: one
        # transaction, nothing was written (and where it was, the clean-up leaves it all).
        _take_away(made, Path(config.data_dir))
        raise
    print(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
    if not report.written:
        _take_away(made, Path(config.data_dir))
        print(f"twinmem: {len(report.errors)} problem(s) in {args.file}; nothing was imported", file=sys.stderr)
        return 1
    return 0


def _take_away(made: Path | None, data_dir: Path) -> None:
    """The data directory an import made (``made``: it, or the outermost parent it made),
    once it wrote nothing there: left, it was an empty store that the next command read as
    the data (export: "exported 0 memories"). Only what the import made goes: the data
    directory's lock is taken again first (a twinmem that took the directory since keeps
    it), the store's own files are removed only where nothing else is there, and each
    directory is removed only empty, so a sibling data directory, or a file, made meanwhile
    under the same new parent stays, as do the directories above it."""
    from engine.adapters import INDEX_DIR, hold_data_dir

    if made is None or not data_dir.is_dir() or data_dir.is_symlink():
        return
    try:
        held = hold_data_dir(data_dir)
    except (TwinmemError, OSError):
        return  # another twinmem process holds it now: it is that one's
    try:
        if _holds_anything(data_dir):  # first: reading a store may add its -wal and -shm
            return
        entries = list(data_dir.iterdir())
        if any(entry.name not in _store_entries() for entry in entries):
            return
        for entry in entries:
            if entry.name == INDEX_DIR and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            elif not entry.is_dir():
                entry.unlink()
    except OSError:
        return  # what is left stays
    finally:
        held.release()
    for path in (data_dir, *data_dir.parents):
        try:
            path.rmdir()  # only an empty one
        except OSError:
            return
        if path == made:
            return


def _holds_anything(data_dir: Path) -> bool:
    """Whether the stores in ``data_dir`` hold a memory, a token or a block (or cannot be read):
    ``token create`` and ``block add`` take no lock on the directory, so one run while the
    import ran wrote there."""
    import sqlite3

    from engine.adapters import DB_FILE
    from engine.adapters.security_store import SECURITY_FILE

    for name, tables in ((DB_FILE, ("memories",)), (SECURITY_FILE, ("tokens", "blocks"))):
        path = Path(os.path.abspath(data_dir / name))
        if not path.exists():
            continue
        try:
            with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
                if any(db.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0] for table in tables):
                    return True
        except sqlite3.Error:
            return True
    return False


def _store_entries() -> frozenset[str]:
    from engine.adapters import DB_FILE, INDEX_DIR, LOCK_FILE
    from engine.adapters.security_store import SECURITY_FILE
    from engine.adapters.session_sqlite import SESSIONS_FILE
    from engine.portability import DEPLOYMENT_FILE

    files = (DB_FILE, SECURITY_FILE, SESSIONS_FILE)
    return frozenset(
        {
            LOCK_FILE,
            INDEX_DIR,
            DEPLOYMENT_FILE,
            *(name + end for name in files for end in ("", "-wal", "-shm", "-journal")),
        }
    )


def _consolidate(args: argparse.Namespace) -> int:
    """Consolidate one namespace of a data directory no server holds; print the report as JSON."""
    import json as json_

    from api.lifecycle import report_out

    config = _config(args, held="memories")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with _audited(config, "consolidate", args.namespace, over_http="POST /v1/memory/consolidate") as (
        entry,
        security,
        embedder,
    ):
        service = _open_service(
            config, security, embedder, over_http="POST /v1/memory/consolidate", background_reembed=False
        )
        try:
            report = service.consolidator.run(args.namespace, dry_run=args.dry_run)
        finally:
            service.close()
        entry.outcome = "ok"
        entry.detail = "dry run" if args.dry_run else None
    print(json_.dumps(report_out(report), ensure_ascii=False, indent=2))
    return 0


# The errors of a write that could not be written (not of a store the export reads).
_WRITE_FAILURES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})
# How many namespaces an export of an empty one names.
_NAMESPACES_SHOWN = 10
# What a command needs its data directory to hold already (``_checked``): the memory store,
# the audit log (with the tokens and blocks), or either.
Held = Literal["memories", "audit", "data"] | None


def _config(args: argparse.Namespace, *, held: Held = None) -> Config:
    """The command's config, its data directory checked (``_checked``) before anything opens there."""
    new_security = getattr(args, "new_security_file", False)
    return _checked(load_config(args.config, None, **_data_dir_override(args)), held=held, new_security=new_security)


def _data_dir_override(args: argparse.Namespace) -> dict[str, object]:
    """``--data-dir`` as a config override. An empty ``--data-dir`` or ``--config`` (``"$DATA"``
    with DATA unset) is refused: read as not given, it put the default ./twinmem-data, made
    there if need be, in place of the one meant; an empty --config ended in a traceback."""
    for option, value in (("--data-dir", args.data_dir), ("--config", args.config)):
        if value is not None and not value.strip():
            raise InvalidInput(f"{option} is empty (an unset variable?): name it, or leave the option out")
    return {"data_dir": args.data_dir} if args.data_dir is not None else {}


def _checked(config: Config, *, held: Held = None, new_security: bool = False) -> Config:
    """``config``, once its data directory is a directory, or can be made one: a file there
    stopped each command in a traceback. ``held``: the command reads or changes what is
    stored (a listing, a check, a revocation, a block, an export), so an embedded store's data
    directory must hold the memory store (``"memories"``), the tokens, blocks and audit log
    (``"audit"``) or either (``"data"``) already: a mistyped path would otherwise be made, or
    filled, and read as a new, empty store ("exported 0 memories", "audit log intact: 0 entries", a block stored
    where nothing is served). ``import``, ``token create`` and ``serve`` may make a new one.

    Memories without the tokens, blocks and audit log beside them (``security.sqlite3`` deleted,
    or left behind when the memory file was copied to another machine) are refused unless
    ``new_security`` (``--new-security-file``): opened, the file was made anew and empty, so
    every blocked source could write again and the audit log began again at its first entry,
    with nothing to say that one had been there."""
    data_dir = Path(config.data_dir)
    gone = next((path for path in (data_dir, *data_dir.parents) if path.is_symlink() and not path.exists()), None)
    if gone is not None:
        # The mkdir that met it ended the command in a traceback ("File exists").
        raise InvalidInput(
            f"{gone} is a link to {os.readlink(gone)}, which is not there: make it, or name another --data-dir",
            field="data_dir",
        )
    there = next((path for path in (data_dir, *data_dir.parents) if path.exists()), None)
    if there is not None and not there.is_dir():
        raise InvalidInput(f"{there} is not a directory: --data-dir names the data directory", field="data_dir")
    if held and config.store == "sqlite" and not any((data_dir / name).is_file() for name in _files(held)):
        if held == "audit" and any((data_dir / name).is_file() for name in _files("data")):
            # Made new for the reading, it listed nothing and verified as "intact: 0 entries".
            raise InvalidInput(
                f"no tokens, blocks or audit log at {data_dir}: {_files('audit')[0]} is not there, or no longer"
            )
        raise InvalidInput(f"no twinmem data at {data_dir} (a mistyped --data-dir?): nothing to read there")
    if config.store == "sqlite" and not new_security:
        memories, security = _files("data")
        if (data_dir / memories).is_file() and not (data_dir / security).exists():
            raise InvalidInput(
                f"{data_dir} holds {memories} but not {security} (its tokens, blocks and audit log): copy it"
                " back beside the memories, or pass --new-security-file to start with none (no blocks, a new"
                " audit log)"
            )
    return config


def _files(held: Held) -> tuple[str, ...]:
    from engine.adapters import DB_FILE
    from engine.adapters.security_store import SECURITY_FILE

    return {"memories": (DB_FILE,), "audit": (SECURITY_FILE,)}.get(held or "", (DB_FILE, SECURITY_FILE))


def _made_for(data_dir: Path) -> Path | None:
    """The outermost directory that opening ``data_dir`` would make, or None where it is there,
    or where that cannot be told from the path: through ``..`` after a missing part
    (``new/../data``), the path reads as missing while what it names may be there."""
    if ".." in data_dir.parts:
        return None
    missing = None
    for path in (data_dir, *data_dir.parents):
        if path.exists():
            return missing
        missing = path
    return missing


def _cli_audit(security: SecurityStore, detail: str, *ids: str) -> None:
    """Token and block changes made here are admin actions too; the actor is the local command line."""
    import uuid

    from engine.records import utcnow
    from engine.security import AuditEvent

    event = AuditEvent("cli", "admin", "ok", utcnow(), uuid.uuid4().hex, ("*",), ids, detail=detail)
    security.append_audit(event)


def _expiry(text: str) -> datetime:
    """``--expires-at``: an ISO 8601 date and time with its offset."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date and time such as 2027-01-31T00:00:00Z: {text!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"give the offset too (2027-01-31T00:00:00Z), not {text!r}")
    return value


def _token(args: argparse.Namespace) -> int:
    from api.admin import create_token, token_out
    from engine.adapters import open_security
    from engine.records import utcnow

    security = open_security(_config(args, held=None if args.token_command == "create" else "audit"))
    try:
        if args.token_command == "create":
            record, token = create_token(security, args.agent, args.grant, args.expires_at)
            _cli_audit(security, "token create", record.token_id)
            print(token)
            print(
                f"token {record.token_id} for {record.agent} ({', '.join(map(str, record.grants))}); "
                "it is shown only now",
                file=sys.stderr,
            )
        elif args.token_command == "list":
            print(json.dumps([token_out(record) for record in security.tokens()], indent=2))
        else:
            if not security.revoke(args.token_id, utcnow()):
                print(f"twinmem: no live token {args.token_id!r}", file=sys.stderr)
                return 1
            _cli_audit(security, "token revoke", args.token_id)
            print(f"revoked {args.token_id}")
    finally:
        security.close()
    return 0


def _block(args: argparse.Namespace) -> int:
    """Block an agent or a session (and quarantine what it wrote), list blocks, or lift one."""
    from api.admin import block_out, block_source, check_source, source_id
    from engine.adapters import open_security
    from engine.errors import StoreError

    # block add opens the service, which makes the audit log where it is gone, as serve does.
    config = _config(args, held="data" if args.block_command == "add" else "audit")
    if args.block_command == "list":
        security = open_security(config)
        try:
            print(json.dumps([block_out(block) for block in security.blocks()], ensure_ascii=False, indent=2))
        finally:
            security.close()
        return 0
    kind, value = check_source(*(("agent", args.agent) if args.agent is not None else ("session", args.session)))
    if args.block_command == "remove":
        security = open_security(config)
        try:
            if not security.unblock(kind, value):
                print(f"twinmem: no block on {kind.value} {value!r}", file=sys.stderr)
                return 1
            _cli_audit(security, f"block remove {kind.value}", source_id(kind, value))
        finally:
            security.close()
        print(f"unblocked {kind.value} {value!r}; what it wrote stays quarantined until released one by one")
        return 0
    from engine.adapters import open_service

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    security = open_security(config)
    try:
        # The service first: while a server holds the data directory this fails and nothing changes.
        try:
            service = open_service(config, background_reembed=False, security=security)
        except StoreError as exc:
            raise StoreError(f"{exc}; stop the server first, or block over HTTP (POST /v1/admin/blocks)") from exc
        try:
            block, created, quarantined = block_source(security, service, kind, value, by="cli", reason=args.reason)
            _cli_audit(security, f"block add {kind.value}", source_id(kind, value), *quarantined)
        finally:
            service.close()
    finally:
        security.close()
    print(
        json.dumps(
            {**block_out(block), "already_blocked": not created, "quarantined": quarantined},
            ensure_ascii=False,
            indent=2,
        )
    )
    return 0


def _audit_verify(args: argparse.Namespace) -> int:
    from engine.adapters import open_security
    from engine.security import GENESIS_HASH, AuditRow, verify_chain

    expected = args.expect_head.lower() if args.expect_head is not None else None
    if expected is not None and not re.fullmatch(r"[0-9a-f]{64}", expected):
        # Never matched, it read as a cut-off tail: a tampering alarm for a typo.
        raise InvalidInput(
            f"--expect-head {args.expect_head!r} is not a head hash: 64 hex digits, as 'audit verify' prints them"
        )
    # Where the noted head is in the chain, once found. The genesis hash (the head an empty
    # log prints) is before every chain: nothing before it can have been cut off.
    noted: list[int] = [0] if expected == GENESIS_HASH else []

    def watched(rows: Iterator[AuditRow]) -> Iterator[AuditRow]:
        for row in rows:
            if row.hash == expected:
                noted.append(row.seq)
            yield row

    security = open_security(_config(args, held="audit"))
    try:
        report = verify_chain(watched(security.audit_rows()))
    finally:
        security.close()
    if not report.ok:
        for problem in report.problems:
            print(f"twinmem: audit log broken at {problem}", file=sys.stderr)
        return 1
    if expected and not noted:
        # A chain can only show edits before its last entry; a head noted elsewhere shows a cut-off
        # tail. The log has usually grown since it was noted, so the noted entry need not be the last.
        print(
            f"twinmem: the noted head {args.expect_head} is not in the audit log: entries were cut off"
            f" (it now ends at entry {report.entries}, head {report.head})",
            file=sys.stderr,
        )
        return 1
    print(f"audit log intact: {report.entries} entries, head {report.head}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="twinmem", description="Long-term memory service for LLM agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP API")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="TCP port (default 8420)")
    serve.add_argument("--data-dir", help="where the SQLite file and the index live (default ./twinmem-data)")
    serve.add_argument("--config", help="a twinmem TOML file (see twinmem.example.toml)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    _new_security_option(serve)
    serve.set_defaults(run=_serve)
    export = commands.add_parser("export", help="write a namespace as JSON Lines (stop the server first)")
    export.add_argument("--namespace", default="default", help="the namespace to export (default: default)")
    export.add_argument("--data-dir", help="the data directory (default ./twinmem-data)")
    export.add_argument("--config", help="a twinmem TOML file")
    export.add_argument("-o", "--output", default="-", help="the file to write ('-' for standard output)")
    export.add_argument("--versions", action="store_true", help="include every memory's history")
    export.add_argument("--vectors", action="store_true", help="include vectors (base64 float32)")
    _new_security_option(export)
    export.set_defaults(run=_export)
    import_ = commands.add_parser("import", help="import an export or other tools' data (all or nothing)")
    import_.add_argument("file", help="the file to import")
    import_.add_argument("--data-dir", help="the data directory (default ./twinmem-data)")
    import_.add_argument("--config", help="a twinmem TOML file")
    import_.add_argument("--namespace", help="import into this namespace (default: the file's own)")
    import_.add_argument("--format", default="twinmem", choices=list(IMPORT_FORMATS), help="the file's format")
    import_.add_argument("--map", help="csv/jsonl: twinmem field=column pairs, e.g. content=text,created_at=ts")
    import_.add_argument("--session-id", help="langchain: the session of the messages (default: the file name)")
    _new_security_option(import_)
    import_.set_defaults(run=_import)
    consolidate = commands.add_parser(
        "consolidate", help="archive faded memories, purge old deletes, merge near-duplicates (stop the server first)"
    )
    consolidate.add_argument("--namespace", default="default", help="the namespace (default: default)")
    consolidate.add_argument("--data-dir", help="the data directory (default ./twinmem-data)")
    consolidate.add_argument("--config", help="a twinmem TOML file")
    consolidate.add_argument("--dry-run", action="store_true", help="only report what would be done")
    _new_security_option(consolidate)
    consolidate.set_defaults(run=_consolidate)
    token = commands.add_parser("token", help="create, list and revoke agent tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    create = token_commands.add_parser("create", help="create a token and print it (shown once)")
    create.add_argument("--agent", required=True, help="the agent the token identifies")
    create.add_argument(
        "--grant", action="append", required=True, help="NAMESPACE:PERMS, r/w/a (e.g. user:*:rw); repeatable"
    )
    create.add_argument(
        "--expires-at",
        type=_expiry,
        default=None,
        help="when the token stops being accepted, with its offset (2027-01-31T00:00:00Z); default: never",
    )
    _new_security_option(create)
    token_commands.add_parser("list", help="every token (never the token itself)")
    revoke = token_commands.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id", help="the id 'token list' shows")
    for sub in token_commands.choices.values():
        sub.add_argument("--data-dir", help="the data directory (default ./twinmem-data)")
        sub.add_argument("--config", help="a twinmem TOML file")
    token.set_defaults(run=_token)
    block = commands.add_parser("block", help="block an agent or a session, list blocks, lift one")
    block_commands = block.add_subparsers(dest="block_command", required=True)
    add = block_commands.add_parser(
        "add",
        help="block a source and quarantine what it wrote (stop the server first: it opens the data directory)",
        description="Refuse the source's writes from now on and quarantine every memory it wrote, in every"
        " namespace. It opens the data directory, so stop the server first (or block over HTTP:"
        " POST /v1/admin/blocks). Blocking a source already blocked runs the quarantine pass again.",
    )
    remove = block_commands.add_parser(
        "remove",
        help="lift a block (what it wrote stays quarantined)",
        description="Let the source write again. What was quarantined stays quarantined: review those"
        " memories and release them one by one (PATCH /v1/memory/{id} with status active).",
    )
    for sub in (add, remove):
        source = sub.add_mutually_exclusive_group(required=True)
        source.add_argument("--agent", help="the agent (a token's agent, a memory's actor)")
        source.add_argument("--session", help="the session id its memories carry")
    add.add_argument("--reason", help="why, for the admins who review it")
    _new_security_option(add)
    block_commands.add_parser("list", help="every block in force, oldest first")
    for sub in block_commands.choices.values():
        sub.add_argument("--data-dir", help="the data directory (default ./twinmem-data)")
        sub.add_argument("--config", help="a twinmem TOML file")
    block.set_defaults(run=_block)
    audit = commands.add_parser("audit", help="check the audit log")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    verify = audit_commands.add_parser("verify", help="check that no entry was edited, removed or reordered")
    verify.add_argument("--data-dir", help="the data directory (default ./twinmem-data)")
    verify.add_argument("--config", help="a twinmem TOML file")
    verify.add_argument(
        "--expect-head",
        help="a head hash noted earlier: also detects a tail cut off at or before it (entries added since are fine)",
    )
    audit.set_defaults(run=_audit_verify)
    return parser


def _new_security_option(command: argparse.ArgumentParser) -> None:
    """For the commands that open the tokens, blocks and audit log, making them where they are not."""
    command.add_argument(
        "--new-security-file",
        action="store_true",
        help="where the memories are there but security.sqlite3 is not, start a new one (no tokens or blocks)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.run(args)
    except TwinmemError as exc:
        print(f"twinmem: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C: what was cut short says so itself (an export leaves the file it would have
        # replaced, an import is one transaction, the audit entry reads "error"). 128 + SIGINT,
        # as a shell reports a command stopped by it.
        print("twinmem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of the output went away (`twinmem token list | head -1`). Not a
        # traceback; and not status 0: an export cut off there did not export everything.
        # Standard output is pointed at /dev/null, so that flushing it at exit raises nothing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("twinmem: the output was closed before all of it was written", file=sys.stderr)
        return 1
    return result


if __name__ == "__main__":
    sys.exit(main())
