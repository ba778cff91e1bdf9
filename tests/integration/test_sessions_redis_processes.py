"""Two ``twinmem serve`` processes sharing sessions in one real redis-server.

Each process has its own data directory (its own long-term store); the sessions are
Redis's. What one process appends the other reads, appends to and closes; an expired
session is promoted by exactly one of them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import redis_server as redis_server_module
from tests.api.conftest import free_port
from tests.redis_server import RedisServer
from tests.serving import wait_until_serving

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def two_servers(tmp_path: Path, redis_server: RedisServer) -> Iterator[tuple[str, str]]:
    redis_server.flush()
    env = {
        **os.environ,
        "TWINMEM_SESSIONS__BACKEND": "redis",
        "TWINMEM_SESSIONS__REDIS_URL": redis_server.url,
        "TWINMEM_SESSIONS__SWEEP_EVERY_SECONDS": "0.2",
        # The test is about sharing sessions, not meaning: the fastest embedder to load.
        "TWINMEM_EMBEDDING__PROVIDER": "use",
    }
    twinmem = Path(sys.executable).with_name("twinmem")
    started: list[subprocess.Popen[bytes]] = []
    urls = []
    try:
        for name in ("a", "b"):
            port, log = free_port(), tmp_path / f"{name}.log"
            command = [str(twinmem), "serve", "--port", str(port), "--data-dir", str(tmp_path / name)]
            with log.open("ab") as out:
                process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
            started.append(process)
            wait_until_serving(process, port, log, f"twinmem serve {name}")
            urls.append(f"http://127.0.0.1:{port}")
        yield urls[0], urls[1]
    finally:
        for process in started:
            process.send_signal(signal.SIGINT)
        for process in started:
            process.wait(timeout=60)


def _said(*texts: str) -> dict[str, object]:
    return {"namespace": "user:1", "messages": [{"role": "user", "content": text} for text in texts]}


def _memories(url: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = httpx.get(f"{url}/v1/memories", params={"namespace": "user:1"}).json()["memories"]
    return found


def test_two_api_processes_share_sessions(two_servers: tuple[str, str]) -> None:
    a, b = two_servers
    assert httpx.post(f"{a}/v1/sessions/s1/messages", json=_said("I live in Lyon.")).status_code == 200
    seen = httpx.get(f"{b}/v1/sessions/s1", params={"namespace": "user:1"}).json()
    assert [m["content"] for m in seen["window"]] == ["I live in Lyon."]
    assert httpx.post(f"{b}/v1/sessions/s1/messages", json=_said("我喜欢蓝色。")).status_code == 200
    window = httpx.get(f"{a}/v1/sessions/s1", params={"namespace": "user:1"}).json()
    assert [m["content"] for m in window["window"]] == ["I live in Lyon.", "我喜欢蓝色。"]
    listed = httpx.get(f"{a}/v1/sessions", params={"namespace": "user:1"}).json()["sessions"]
    assert [s["session_id"] for s in listed] == ["s1"]
    # The close saves a Chinese memory, whose first segmentation loads jieba in the request:
    # seconds on a loaded machine, past httpx's 5 s default.
    closed = httpx.post(f"{b}/v1/sessions/s1/close", json={"namespace": "user:1"}, timeout=60).json()
    assert len(closed["created"]) == 2
    assert httpx.get(f"{a}/v1/sessions/s1", params={"namespace": "user:1"}).status_code == 404
    assert {m["content"] for m in _memories(b)} == {"I live in Lyon.", "我喜欢蓝色。"}


def test_an_expired_session_is_promoted_by_exactly_one_process(two_servers: tuple[str, str]) -> None:
    a, b = two_servers
    body = {**_said("I work at Acme Corp as a nurse.", "I have two cats."), "expire_after_seconds": 0.5}
    assert httpx.post(f"{a}/v1/sessions/s2/messages", json=body).status_code == 200
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = _memories(a) + _memories(b)
        if len(found) >= 2:
            break
        time.sleep(0.2)
    time.sleep(1)  # give a second promoter every chance to (wrongly) write again
    found = _memories(a) + _memories(b)
    assert sorted(m["content"] for m in found) == ["I have two cats.", "I work at Acme Corp as a nurse."]
    assert sorted([len(_memories(a)), len(_memories(b))]) == [0, 2]  # one process promoted it, once


def test_health_says_when_the_session_backend_is_away(tmp_path: Path) -> None:
    """Redis gone: /health is degraded and names it, and long-term memory goes on."""
    if not redis_server_module.available():
        pytest.skip(redis_server_module.REDIS_MISSING)
    (tmp_path / "redis").mkdir()
    redis = RedisServer(tmp_path / "redis")
    env = {
        **os.environ,
        "TWINMEM_SESSIONS__BACKEND": "redis",
        "TWINMEM_SESSIONS__REDIS_URL": redis.url,
        "TWINMEM_EMBEDDING__PROVIDER": "use",
    }
    twinmem = Path(sys.executable).with_name("twinmem")
    port, log = free_port(), tmp_path / "serve.log"
    command = [str(twinmem), "serve", "--port", str(port), "--data-dir", str(tmp_path / "data")]
    with log.open("ab") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until_serving(process, port, log, "twinmem serve")
        url = f"http://127.0.0.1:{port}"
        health = httpx.get(f"{url}/health").json()
        assert (health["status"], health["sessions"]) == ("ok", "ok")
        redis.stop()
        health = httpx.get(f"{url}/health", timeout=30).json()
        assert health["status"] == "degraded" and health["sessions"].startswith("unreachable: "), health
        saved = httpx.post(f"{url}/v1/memory/save", json={"content": "The user keeps bees"}, timeout=30)
        assert saved.status_code == 201, saved.text
    finally:
        redis.stop()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
