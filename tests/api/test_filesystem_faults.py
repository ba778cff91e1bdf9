"""Faults injected through the filesystem under a running server (a subprocess on a real
SQLite file), not through its own connection:

* disk full, two ways: a file-size limit (``RLIMIT_FSIZE``) set on the running process,
  so every write past a file's first page fails (``EFBIG``); and, where mounting is
  allowed, a small tmpfs holding the data directory, filled up by another file
  (``ENOSPC``, SQLite's "database or disk is full");
* the database turned read-only: its file and its write-ahead log made immutable
  (``chattr +i``; every write to them fails, open descriptors included), where the
  filesystem and the privileges allow it.

Each: writes answer 503 with a message and a request id, nothing is acknowledged that
was not stored, /health still answers, and once the fault clears, writes succeed again
without a restart; a restart afterwards finds the same memories.
"""

from __future__ import annotations

import contextlib
import errno
import resource
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from engine.adapters import DB_FILE
from tests.api.conftest import free_port, saves_until_refused
from tests.serving import spawn, stop, wait_until_serving

pytestmark = pytest.mark.slow

FSIZE_LIMIT = 4096
TMPFS_SIZE = "8m"


@dataclass(frozen=True)
class Fault:
    """How to break the filesystem under a running server, and mend it."""

    inject: Callable[[int, Path], None]  # (server pid, data directory)
    clear: Callable[[int, Path], None]
    message: str  # in the 503's detail


def _limit_file_size(pid: int, data_dir: Path) -> None:
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (FSIZE_LIMIT, resource.RLIM_INFINITY))


def _unlimit_file_size(pid: int, data_dir: Path) -> None:
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def _fill(pid: int, data_dir: Path) -> None:
    with (data_dir / "ballast").open("wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def _empty(pid: int, data_dir: Path) -> None:
    (data_dir / "ballast").unlink(missing_ok=True)


def _database_files(data_dir: Path) -> list[Path]:
    db = data_dir / DB_FILE
    return [db, db.with_name(db.name + "-wal")]


def _chattr(flag: str, paths: list[Path]) -> None:
    subprocess.run(["chattr", flag, *map(str, paths)], check=True, capture_output=True)


FAULTS = {
    "disk-full-file-size-limit": Fault(_limit_file_size, _unlimit_file_size, "disk I/O error"),
    "disk-full-tmpfs": Fault(_fill, _empty, "disk is full"),
    "read-only-immutable": Fault(
        lambda pid, data_dir: _chattr("+i", _database_files(data_dir)),
        lambda pid, data_dir: _chattr("-i", _database_files(data_dir)),
        "SQLITE_IOERR_WRITE",
    ),
}


def _immutable_files_refuse_writes(directory: Path) -> str | None:
    """None when ``chattr +i`` stops writes through a descriptor already open; else why not."""
    if shutil.which("chattr") is None:
        return "chattr is not installed"
    probe = directory / "immutable-probe"
    with probe.open("wb") as fh:
        fh.write(b"x")
        fh.flush()
        made = subprocess.run(["chattr", "+i", str(probe)], capture_output=True, text=True)
        if made.returncode != 0:
            return f"chattr +i is refused here: {made.stderr.strip()}"
        try:
            fh.write(b"y")
            fh.flush()
        except OSError:
            return None
        finally:
            subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
    return "this filesystem lets an open descriptor write to an immutable file"


@contextlib.contextmanager
def _tmpfs(mount_point: Path) -> Iterator[None]:
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not allowed here: {mounted.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


@pytest.fixture(params=sorted(FAULTS))
def fault_and_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Fault, Path]]:
    data_dir = tmp_path / "data"
    if request.param == "disk-full-tmpfs":
        with _tmpfs(data_dir):
            yield FAULTS[request.param], data_dir
        return
    if request.param == "read-only-immutable" and (why := _immutable_files_refuse_writes(tmp_path)):
        pytest.skip(why)
    yield FAULTS[request.param], data_dir


def _serve(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    return wait_until_serving(spawn(data_dir, port, log, {}), port, log, "the server"), f"http://127.0.0.1:{port}"


def _stop(process: subprocess.Popen[bytes]) -> None:
    stop(process, 60)


def _contents(http: httpx.Client) -> set[str]:
    return {m["content"] for m in http.get("/v1/memories", params={"limit": 500}).json()["memories"]}


def test_a_filesystem_fault_is_a_503_stores_nothing_unacknowledged_and_clears_by_itself(
    fault_and_dir: tuple[Fault, Path], tmp_path: Path
) -> None:
    fault, data_dir = fault_and_dir
    log = tmp_path / "server.log"
    process, url = _serve(data_dir, log)
    injected = False
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            kept = http.post("/v1/memory/save", json={"content": "Saved before the fault"}).json()["memory_id"]
            fault.inject(process.pid, data_dir)
            injected = True
            acked, refused = saves_until_refused(http, fault.message)
            acked.add("Saved before the fault")
            patch = http.patch(f"/v1/memory/{kept}", json={"key": "changed"})
            assert patch.status_code in (200, 503), patch.text
            recall = http.post("/v1/memory/recall", json={"query": "saved before the fault"})
            # A full disk refuses reads too: the audit log cannot record them. A read-only
            # memory store still answers them.
            assert recall.status_code in (200, 503), recall.text
            assert recall.status_code == 200 or "audit log" in recall.json()["detail"]
            assert http.get("/health").status_code == 200
            fault.clear(process.pid, data_dir)
            injected = False
            saved = http.post("/v1/memory/save", json={"content": "Saved after the fault cleared"})
            assert saved.status_code == 201, saved.text
            acked.add("Saved after the fault cleared")
            listed = _contents(http)
            # Every acknowledged write; a refused one only where the store kept it and the
            # audit log then failed to record the request (the answer said so).
            assert acked <= listed <= acked | refused
            memory = http.get(f"/v1/memory/{kept}").json()
            if patch.status_code == 200:
                assert (memory["version"], memory["key"]) == (2, "changed")
        _stop(process)
        process, url = _serve(data_dir, log)
        with httpx.Client(base_url=url, timeout=60) as http:
            assert _contents(http) == listed
            assert http.get("/health").json()["index_current"] is True
    finally:
        if injected:
            fault.clear(process.pid, data_dir)
        _stop(process)
