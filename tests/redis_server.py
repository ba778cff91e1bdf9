"""A real redis-server for tests, on a free loopback port, with no persistence."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests import serving

REDIS_MISSING = "redis-server is not installed (scripts/bootstrap.sh installs Debian's redis-server)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    def __init__(self, directory: Path) -> None:
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._log = directory / "redis.log"
        self._process = subprocess.Popen(
            [
                "redis-server",
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(directory),
                "--logfile", str(self._log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self._log.read_text() if self._log.exists() else ''}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not answer within 20 s")

    def flush(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as conn:
            conn.sendall(b"FLUSHALL\r\n")
            conn.recv(16)

    def stop(self) -> None:
        serving.stop(self._process, 10)


def available() -> bool:
    return shutil.which("redis-server") is not None
