"""``twinmem serve`` and X-Forwarded-For: believed from the configured proxies only.

uvicorn's own default believes the header from 127.0.0.1, so any local client (every client
of a loopback deployment) could name itself a new address on each request and never meet
the per-address limit on failed authentications."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ROOT_TOKEN = "root-token-for-the-forwarded-tests"
BURST = 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _serve(tmp_path: Path, server_table: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    """``twinmem serve`` in tokens mode with a small failed-authentication budget, once it
    answers the root token's /health (a probe without a token would spend that budget)."""
    config = tmp_path / "twinmem.toml"
    config.write_text(
        f"{server_table}\n"
        f'[auth]\nmode = "tokens"\n'
        f'[[auth.tokens]]\nagent = "root"\ntoken = "{ROOT_TOKEN}"\ngrants = ["*:a"]\n'
        f"[limits]\nfailed_auth_burst = {BURST}\nfailed_auths_per_second = 0.01\n"
    )
    config.chmod(0o600)
    port, log = _free_port(), tmp_path / "serve.log"
    twinmem = Path(sys.executable).with_name("twinmem")
    command = [str(twinmem), "serve", "--config", str(config), "--port", str(port), "--data-dir", str(tmp_path / "d")]
    with log.open("ab") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=os.environ)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(f"{url}/health", headers={"Authorization": f"Bearer {ROOT_TOKEN}"}).status_code == 200:
                return process, url, log
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"twinmem serve did not answer:\n{log.read_text()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)
    process.wait(timeout=60)


def _failed_auths(url: str, forwarded_for: list[str]) -> list[int]:
    """The statuses of one request with a wrong token per ``forwarded_for`` address."""
    with httpx.Client(base_url=url, headers={"Authorization": "Bearer not-a-token-at-all"}) as client:
        return [client.get("/v1/namespaces", headers={"X-Forwarded-For": a}).status_code for a in forwarded_for]


def test_a_local_client_cannot_name_another_address_to_dodge_the_failed_auth_limit(tmp_path: Path) -> None:
    # Before: uvicorn believed the header from 127.0.0.1, and ten wrong tokens, each from a
    # "new" address, were ten 401s; the limit never held.
    process, url, log = _serve(tmp_path, "")
    try:
        statuses = _failed_auths(url, [f"198.51.100.{n}" for n in range(10)])
    finally:
        _stop(process)
    assert statuses == [401] * BURST + [429] * (10 - BURST), log.read_text()


def test_the_configured_proxy_is_believed(tmp_path: Path) -> None:
    """Behind a proxy (here: the loopback address, named in ``[server] trusted_proxies``),
    the client is the address the proxy names: each has a budget of its own."""
    process, url, log = _serve(tmp_path, '[server]\ntrusted_proxies = ["127.0.0.1"]')
    try:
        statuses = _failed_auths(url, [f"198.51.100.{n}" for n in range(10)])
        repeated = _failed_auths(url, ["203.0.113.7"] * (BURST + 1))
    finally:
        _stop(process)
    assert statuses == [401] * 10, log.read_text()
    assert repeated == [401] * BURST + [429], log.read_text()
