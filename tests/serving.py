"""The tests' subprocesses: a twinmem server started, waited for; any child stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

START_TIMEOUT_S = 120
ROOT = Path(__file__).resolve().parents[1]


def spawn(
    data_dir: Path, port: int, log: Path, overrides: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``tests/crash/serve.py`` as a subprocess (the real app, the hashing embedder), its
    output appended to ``log``; not yet serving (see ``wait_until_serving``)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.crash.serve", str(data_dir), str(port), json.dumps(overrides)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
        )


def wait_until_serving(process: subprocess.Popen[bytes], port: int, log: Path, what: str) -> subprocess.Popen[bytes]:
    """``process`` once its /health answers 200; if it exits or stays silent for
    ``START_TIMEOUT_S``, fail with what it logged (a silent one is killed first)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"{what} did not answer within {START_TIMEOUT_S} s:\n{log.read_text()}")


def stop(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM, then SIGKILL where ``process`` has not exited within ``timeout_s``
    (nothing where it has exited already)."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
