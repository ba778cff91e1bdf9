"""A flood of requests with random tokens against a ``twinmem serve`` in tokens mode: how the
server answers them, how much the audit log grows, and another (valid) token's latency before
and during the flood (README, "Failed authentications").

It starts ``twinmem serve`` from ``--repo`` (a checkout: compare two by running this on each)
on a fresh data directory, sends 200 requests with a valid token one at a time, then runs
``--clients`` threads sending random tokens for ``--seconds`` while the valid token keeps
asking, every 50 ms. The flood ignores ``Retry-After``, as an attacker would::

    .venv/bin/python benchmarks/auth_flood.py --repo . --port 18563
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

TOKEN = "valid-token-for-the-flood-benchmark-0123456789"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--port", type=int, default=18563)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="twinmem-auth-flood-"))
    config = data / "twinmem.toml"
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    config.write_text(
        f'[auth]\nmode = "tokens"\n[[auth.tokens]]\nagent = "ops"\ntoken-hash = "{digest}"\ngrants = ["*:a"]\n'
    )
    env = {**os.environ, "PYTHONPATH": str(args.repo.resolve()), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "api.cli", "serve", "--config", str(config), "--data-dir", str(data / "d")]
    server = subprocess.Popen([*command, "--port", str(args.port), "--log-level", "warning"], cwd=args.repo, env=env)
    url = f"http://127.0.0.1:{args.port}"
    good = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    try:
        _wait(good)
        before = [_timed(good) for _ in range(200)]
        stop = threading.Event()
        statuses: dict[int, int] = {}
        lock = threading.Lock()

        def flood() -> None:
            with httpx.Client(base_url=url, timeout=60) as client:
                while not stop.is_set():
                    headers = {"Authorization": f"Bearer {secrets.token_urlsafe(16)}"}
                    status = client.get("/v1/memories", headers=headers).status_code
                    with lock:
                        statuses[status] = statuses.get(status, 0) + 1

        threads = [threading.Thread(target=flood) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        during: list[float] = []
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            during.append(_timed(good))
            time.sleep(0.05)
        stop.set()
        for thread in threads:
            thread.join()
    finally:
        good.close()
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    security = data / "d" / "security.sqlite3"
    with sqlite3.connect(security) as db:
        anonymous = db.execute("SELECT count(*) FROM audit WHERE actor = 'anonymous'").fetchone()[0]
    size = sum(path.stat().st_size for path in security.parent.glob("security.sqlite3*"))
    print(
        json.dumps(
            {
                "flood_answers": statuses,
                "median_ms_before": round(statistics.median(before), 1),
                "median_ms_during": round(statistics.median(during), 1),
                "anonymous_audit_entries": anonymous,
                "security_file_bytes": size,
            }
        )
    )


def _wait(client: httpx.Client) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if client.get("/health").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not start")


def _timed(client: httpx.Client) -> float:
    started = time.perf_counter()
    response = client.get("/v1/memories")
    assert response.status_code == 200, response.text
    return (time.perf_counter() - started) * 1000


if __name__ == "__main__":
    main()
