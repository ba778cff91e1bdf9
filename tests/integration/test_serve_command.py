"""The README's serve command, as a subprocess: start, save, recall, stop, restart, recall again."""

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

from tests.serving import wait_until_serving

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _serve(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    twinmem = Path(sys.executable).with_name("twinmem")
    command = [str(twinmem), "serve", "--port", str(port), "--data-dir", str(data_dir)]
    with log.open("ab") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=os.environ)
    return wait_until_serving(process, port, log, "twinmem serve")


def _stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGINT)
    return process.wait(timeout=60)


def test_serve_command_saves_recalls_and_survives_a_restart(tmp_path: Path) -> None:
    data_dir, port, log = tmp_path / "data", _free_port(), tmp_path / "serve.log"
    base = f"http://127.0.0.1:{port}"
    process = _serve(data_dir, port, log)
    try:
        for content in (
            "The user prefers a minimalist style and always asks about the return policy before ordering",
            "User's favourite colour is blue",
        ):
            saved = httpx.post(f"{base}/v1/memory/save", json={"content": content, "category": "preference"})
            assert saved.status_code == 201, saved.text
        query = {"query": "any suggestions for cool-toned colours?", "top_k": 10}
        first = httpx.post(f"{base}/v1/memory/recall", json=query).json()["memories"]
        assert first[0]["content"] == "User's favourite colour is blue"
        # A token put in the URL is refused, and the access log line keeps it out.
        assert httpx.get(f"{base}/v1/memories?namespace=default&token=s3cr3t-in-url").status_code == 422
    finally:
        assert _stop(process) == 0, log.read_text()
    logged = log.read_text()
    assert (
        "s3cr3t-in-url" not in logged and '"GET /v1/memories?namespace=default&token=[redacted] HTTP/1.1" 422' in logged
    )
    assert (data_dir / "index" / "hnsw.meta.json").exists()  # the index was saved on shutdown

    process = _serve(data_dir, port, log)
    try:
        again = httpx.post(f"{base}/v1/memory/recall", json=query).json()["memories"]
        assert [m["memory_id"] for m in again] == [m["memory_id"] for m in first]
        health = httpx.get(f"{base}/health").json()
        assert health["memories_indexed"] == 2 and health["index_current"] is True
    finally:
        assert _stop(process) == 0, log.read_text()


def _logged_serving(tmp_path: Path, *options: str) -> tuple[subprocess.Popen[bytes], str]:
    """``twinmem serve`` started with ``options``, once its log says "twinmem serving" (or
    it stopped): the process and its log so far."""
    log = tmp_path / "serve.log"
    twinmem = Path(sys.executable).with_name("twinmem")
    command = [str(twinmem), "serve", "--data-dir", str(tmp_path / "data"), *options]
    with log.open("ab") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=os.environ)
    deadline = time.monotonic() + 120
    while "twinmem serving" not in log.read_text() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return process, log.read_text()


def test_serve_with_an_expired_config_token_starts_and_warns_once(tmp_path: Path) -> None:
    """``expires_at = 2020-01-01T00:00:00Z`` in ``[[auth.tokens]]``: the server starts (a
    config valid yesterday must restart), and its log says, in one line, which agent's
    token has expired and when; it used to start without a word."""
    config = tmp_path / "twinmem.toml"
    config.write_text(
        '[auth]\nmode = "tokens"\n\n'
        '[[auth.tokens]]\nagent = "ops"\ntoken-hash = "' + "ab" * 32 + '"\ngrants = ["*:a"]\n'
        "expires_at = 2020-01-01T00:00:00Z\n"
    )
    process, said = _logged_serving(tmp_path, "--port", str(_free_port()), "--config", str(config))
    try:
        assert "twinmem serving" in said, said
    finally:
        assert _stop(process) == 0
    warned = [line for line in said.splitlines() if "expired at 2020-01-01T00:00:00" in line]
    assert len(warned) == 1, said
    assert "WARNING" in warned[0] and "agent 'ops'" in warned[0], said


def test_a_stop_just_after_the_serving_line_stops_the_server(tmp_path: Path) -> None:
    # Noted by serve's own handler before uvicorn took the signals, and read by nothing:
    # the server served on (3 of 3 runs).
    process, said = _logged_serving(tmp_path, "--port", str(_free_port()))
    assert "twinmem serving" in said, said
    assert _stop(process) == 0


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 here")
def test_serve_on_an_ipv6_address_logs_the_url_as_a_url_writes_it(tmp_path: Path) -> None:
    # "http://::1:PORT" is no URL a browser or curl reads; "http://[::1]:PORT" is.
    port = _free_port()
    process, said = _logged_serving(tmp_path, "--host", "::1", "--port", str(port))
    try:
        if "cannot listen" in said:
            pytest.skip("no IPv6 loopback here")
        assert f"on http://[::1]:{port} " in said, said
    finally:
        if process.poll() is None:
            assert _stop(process) == 0


def test_sigterm_stops_the_server_cleanly_with_status_0(tmp_path: Path) -> None:
    data_dir, port, log = tmp_path / "data", _free_port(), tmp_path / "serve.log"
    process = _serve(data_dir, port, log)
    try:
        saved = httpx.post(f"http://127.0.0.1:{port}/v1/memory/save", json={"content": "Saved before SIGTERM"})
        assert saved.status_code == 201, saved.text
    finally:
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=60)
    assert status == 0, log.read_text()
    assert (data_dir / "index" / "hnsw.meta.json").exists()  # shut down gracefully: the index was saved


def test_an_idle_connection_outlives_the_clients_pool_expiry(tmp_path: Path) -> None:
    """The server keeps an idle connection open longer than twinmem_client keeps it pooled
    (uvicorn's default, 5 s, equals httpx's: a request sent at that moment meets a
    closing connection, and a save is not retried)."""
    from api.cli import SERVER_KEEP_ALIVE_S
    from twinmem_client._base import KEEP_ALIVE_S

    assert KEEP_ALIVE_S < SERVER_KEEP_ALIVE_S
    data_dir, port, log = tmp_path / "data", _free_port(), tmp_path / "serve.log"
    process = _serve(data_dir, port, log)
    try:
        limits = httpx.Limits(keepalive_expiry=KEEP_ALIVE_S)
        ends = []
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", limits=limits) as http:
            for pause in (0.0, 6.5):  # then past uvicorn's default keep-alive
                time.sleep(pause)
                answer = http.get("/health")
                assert answer.status_code == 200
                ends.append(answer.extensions["network_stream"].get_extra_info("client_addr"))
        assert ends[0] == ends[1]  # the same connection, still open
    finally:
        assert _stop(process) == 0, log.read_text()


def test_a_second_serve_on_a_data_directory_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    """Another process holds the data directory's lock (a running server): serve refuses to
    start, as the README says, with the reason in one line and status 2, not a failed
    start-up's traceback."""
    import fcntl

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    twinmem = Path(sys.executable).with_name("twinmem")
    command = [str(twinmem), "serve", "--port", str(_free_port()), "--data-dir", str(data_dir)]
    with (data_dir / ".lock").open("a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=os.environ)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"twinmem: data directory {data_dir} is in use by another twinmem process" in done.stderr


def test_serve_on_a_port_in_use_says_so_in_one_line_without_claiming_to_serve(tmp_path: Path) -> None:
    """Another program listens on the port: serve opened the engine, logged "twinmem serving
    …", and only then failed in uvicorn's bind. It refuses at once now, in one line, status 2,
    and makes nothing in the data directory."""
    data_dir = tmp_path / "data"
    twinmem = Path(sys.executable).with_name("twinmem")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [str(twinmem), "serve", "--port", str(port), "--data-dir", str(data_dir)]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=os.environ)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "serving" not in done.stdout + done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"twinmem: cannot listen on 127.0.0.1:{port}: "), done.stderr
    assert "in use" in lines[0], done.stderr
    assert not data_dir.exists()  # nothing made there, no lock left held


def test_serve_port_0_is_refused_not_replaced_by_the_configured_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--port 0`` was dropped as if not given (a falsy port), and serve went on with the
    configured port, or 8420: asked for port 0, it served where it was not asked to. Port 0
    is refused as ``[server] port = 0`` is, in one line, before anything opens."""
    from api.cli import main

    with socket.socket() as taken:  # the configured port: one serve must never reach
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        config = tmp_path / "twinmem.toml"
        config.write_text(f"[server]\nport = {taken.getsockname()[1]}\n")
        status = main(["serve", "--port", "0", "--config", str(config), "--data-dir", str(tmp_path / "data")])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.strip() == "twinmem: server.port must be a TCP port, got 0", err


def test_a_second_serve_on_a_port_another_serve_holds_while_it_starts_is_refused() -> None:
    """The socket was bound, with SO_REUSEADDR, and only listened on once uvicorn ran, after
    the engine had opened: a second serve started meanwhile bound the same port too, logged
    "twinmem serving …" and served nothing, without a word. It listens at once now."""
    from api.cli import _listening_socket
    from engine.errors import ConfigError

    first = _listening_socket("127.0.0.1", 0)
    try:
        with pytest.raises(ConfigError) as refused:
            _listening_socket("127.0.0.1", first.getsockname()[1]).close()
        assert "in use" in str(refused.value), refused.value
    finally:
        first.close()


@pytest.mark.parametrize(
    ("host", "said"),
    [("no-such-host.invalid", "no address for no-such-host.invalid"), ("192.0.2.1", "not an address")],
)
def test_an_address_serve_cannot_bind_is_not_blamed_on_another_server(host: str, said: str) -> None:
    """Every bind error said "(another twinmem, or another server, on it?); choose another
    with --port": a host name that does not resolve, or an address of no interface here, is
    not a port someone else holds."""
    from api.cli import _listening_socket
    from engine.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        _listening_socket(host, 0)
    assert said in str(refused.value), refused.value
    assert "another server" not in str(refused.value)
    assert "--host or [server] host" in str(refused.value)


@pytest.mark.parametrize(
    ("table", "reason"),
    [
        (
            'store = "neo4j"\n[neo4j]\nuri = "bolt://127.0.0.1:{port}"\npassword = "x"\n',
            "open failed in the graph store",
        ),
        ('[sessions]\nbackend = "redis"\nredis_url = "redis://127.0.0.1:{port}/0"\n', "could not reach Redis"),
    ],
    ids=["bolt", "redis"],
)
def test_a_store_that_cannot_open_stops_serve_in_one_line(tmp_path: Path, table: str, reason: str) -> None:
    """A Bolt server or a Redis that refuses the connection (here: a port nobody listens
    on) stops `twinmem serve` with the store's reason in one line and status 2, as a data
    directory in use does, not with a failed start-up's traceback of over 100 lines."""
    config, port = tmp_path / "twinmem.toml", _free_port()
    config.write_text(table.format(port=port))
    twinmem = Path(sys.executable).with_name("twinmem")
    command = [str(twinmem), "serve", "--config", str(config), "--port", str(_free_port())]
    command += ["--data-dir", str(tmp_path / "data")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=os.environ)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"twinmem: {reason}" in done.stderr and f"127.0.0.1:{port}" in done.stderr, done.stderr
    assert "serving" not in done.stderr  # nothing said it was serving before it stopped


def test_serve_holds_the_data_directory_from_its_check_to_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check that answers "in use" in one line keeps the lock it took until the engine
    opens with it: another process that takes the directory in between (a second serve
    started at the same moment) would otherwise make this one fail in its start-up's
    traceback after all."""
    import fcntl

    import uvicorn

    from api.cli import main

    data_dir = tmp_path / "data"
    held_at_start: list[bool] = []

    def run(server: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
        with (data_dir / ".lock").open("a+") as other:
            try:
                fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held_at_start.append(True)
            else:
                held_at_start.append(False)
                fcntl.flock(other.fileno(), fcntl.LOCK_UN)
        server.started = True  # as a server that started, then stopped

    monkeypatch.setattr(uvicorn.Server, "run", run)
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    assert main(["serve", "--port", str(_free_port()), "--data-dir", str(data_dir)]) == 0
    assert held_at_start == [True]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_asked_while_serve_starts_lets_the_start_finish_then_stops_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: signal.Signals
) -> None:
    """SIGINT or SIGTERM while `twinmem serve` opens the store and promotes the sessions that
    expired while it was down: the start-up is not cut wherever it was (a promotion half
    done, an index half built; Ctrl-C ended in a traceback), it finishes, then the command
    closes everything and stops with status 0 without serving."""
    import uvicorn

    import engine.adapters
    from api.cli import main
    from engine.adapters import open_service, open_sessions
    from engine.config import load_config
    from engine.records import MemoryFilter, Reach
    from engine.session_records import Role, SessionRef
    from engine.sessions import MessageDraft

    data_dir = tmp_path / "data"
    config = load_config(None, None, data_dir=str(data_dir))
    ref = SessionRef("default", "local", "chat-1")
    service = open_service(config)
    sessions = open_sessions(config, service, background=False)
    sessions.append(ref, [MessageDraft(Role.USER, "I live in Lyon.")], reach=Reach.FULL, expire_after_seconds=0.01)
    sessions.stop()
    service.close()
    time.sleep(0.05)  # the session expires while the server is down

    def open_while_asked_to_stop(*args: object, **options: object) -> object:
        signal.raise_signal(stop)  # arrives as the start-up's promotion begins
        return open_sessions(*args, **options)  # type: ignore[arg-type]

    served: list[object] = []
    monkeypatch.setattr(engine.adapters, "open_sessions", open_while_asked_to_stop)
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: served.append(server))
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = main(["serve", "--port", str(_free_port()), "--data-dir", str(data_dir)])
    except (KeyboardInterrupt, SystemExit) as exc:
        pytest.fail(f"the stop was raised inside the start-up: {exc!r}")
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    assert status == 0 and served == []
    service = open_service(config)  # the data directory was freed
    try:
        promoted = service.list_page(["default"], MemoryFilter(session_id="chat-1"), limit=10).items
        assert [memory.content for memory in promoted] == ["I live in Lyon."]  # the start-up's promotion finished
    finally:
        service.close()


def test_serve_closes_the_engine_when_a_force_quit_skips_the_apps_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second Ctrl-C while uvicorn waits for requests to end ("CTRL+C to force quit")
    skips the app's shutdown, and the end of uvicorn's event loop cancels it before it
    closes anything: serve, which opened the store and the sessions, closes them itself,
    so the index is saved as on any stop."""
    import json
    import threading

    import uvicorn

    from api.cli import main

    data_dir, port = tmp_path / "data", _free_port()
    real_run = uvicorn.Server.run
    saved: list[int] = []

    def run(server: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
        def save_then_force_quit() -> None:
            while not server.started and not server.should_exit:
                time.sleep(0.05)
            answer = httpx.post(f"http://127.0.0.1:{port}/v1/memory/save", json={"content": "Saved, then a force quit"})
            saved.append(answer.status_code)
            server.should_exit = server.force_exit = True  # what two Ctrl-C set

        threading.Thread(target=save_then_force_quit, daemon=True).start()
        real_run(server, sockets)

    monkeypatch.setattr(uvicorn.Server, "run", run)
    assert main(["serve", "--port", str(port), "--data-dir", str(data_dir)]) == 0
    assert saved == [201]
    meta = json.loads((data_dir / "index" / "hnsw.meta.json").read_text())
    assert meta["live"] == 1  # the index was saved with the memory in it


def _unloadable_model_config(tmp_path: Path) -> Path:
    config = tmp_path / "twinmem.toml"
    config.write_text('[embedding]\nprovider = "sentence-transformers"\nmodel = "all-MiniLM-L6-v3"\n')
    return config


@pytest.mark.parametrize("offline", [False, True], ids=["hub-unreachable", "hf-hub-offline"])
@pytest.mark.parametrize("fresh", [True, False], ids=["no-data-dir", "empty-data-dir"])
def test_a_model_that_cannot_load_stops_serve_at_once_in_one_line_making_nothing(
    tmp_path: Path, offline: bool, fresh: bool
) -> None:
    """A sentence-transformers model name this machine does not hold, with no hub to ask:
    the library retried the hub for about two and a half minutes, and the data directory
    held security.sqlite3 and a lock file by then. It fails at once now, in one line,
    status 2, and the data directory is as it was."""
    data_dir = tmp_path / "data"
    if not fresh:
        data_dir.mkdir()
    env = {name: value for name, value in os.environ.items() if name != "HF_HUB_OFFLINE"}
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    twinmem = Path(sys.executable).with_name("twinmem")
    command = [str(twinmem), "serve", "--config", str(_unloadable_model_config(tmp_path))]
    command += ["--port", str(_free_port()), "--data-dir", str(data_dir)]
    began = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    took = time.monotonic() - began
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("twinmem: ")]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("twinmem: could not load sentence-transformers model 'all-MiniLM-L6-v3'")
    assert took < 60, f"took {took:.0f} s"
    assert (not data_dir.exists()) if fresh else list(data_dir.iterdir()) == []


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_while_serve_loads_the_model_ends_it_at_once(tmp_path: Path, stop: signal.Signals) -> None:
    """A stop while the model loads (a hub asked for a model retries for minutes) was only
    noted, to be read once the start-up had finished: serve went on loading. It stops at
    once now, status 0, with nothing made in the data directory."""
    data_dir, port = tmp_path / "data", _free_port()
    script = (
        "import sys, time\n"
        "import engine.adapters\n"
        "def slow(config):\n"
        "    print('loading', flush=True)\n"
        "    time.sleep(300)\n"
        "engine.adapters.load_embedder = slow\n"
        "from api.cli import main\n"
        f"sys.exit(main(['serve', '--port', '{port}', '--data-dir', {str(data_dir)!r}]))\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ
    )
    assert process.stdout is not None
    with process.stdout:
        try:
            assert process.stdout.readline().strip() == b"loading"
            process.send_signal(stop)
            status = process.wait(timeout=15)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        said = process.stdout.read().decode()
    assert status == 0, said
    assert "asked to stop while it loaded the embedding model" in said
    assert not data_dir.exists()


def _serve_with_a_held_back_model(port: int, data_dir: Path, gate: Path | None = None) -> subprocess.Popen[bytes]:
    """``twinmem serve`` whose model load prints "loading", then waits for ``gate`` to exist
    (for ever without one) before it loads the real model: a slow load (torch, a model the hub
    is asked for) that a test can hold where it wants."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "import engine.adapters\n"
        "real = engine.adapters.load_embedder\n"
        f"gate = {str(gate) if gate else None!r}\n"
        "def held_back(config):\n"
        "    print('loading', flush=True)\n"
        "    while gate is None or not Path(gate).exists():\n"
        "        time.sleep(0.05)\n"
        "    return real(config)\n"
        "engine.adapters.load_embedder = held_back\n"
        "from api.cli import main\n"
        f"sys.exit(main(['serve', '--port', '{port}', '--data-dir', {str(data_dir)!r}]))\n"
    )
    command = [sys.executable, "-c", script]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ)


def _ended(process: subprocess.Popen[bytes], timeout: float) -> tuple[int | None, str]:
    """The status (None where it had to be killed) and the output of ``process``."""
    try:
        status: int | None = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        status = None
        process.kill()
        process.wait()
    assert process.stdout is not None
    with process.stdout:
        return status, process.stdout.read().decode()


def test_a_port_in_use_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    """serve loaded the model before it bound the port: a port in use was said only once
    the model had loaded (seconds with the default, minutes with a hub asked for a model).
    The port comes first again, as the README says: one line, status 2, no model loaded,
    nothing made in the data directory."""
    data_dir = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        process = _serve_with_a_held_back_model(taken.getsockname()[1], data_dir)
        status, said = _ended(process, timeout=30)
    assert status == 2, said
    assert "loading" not in said, said
    assert said.strip().splitlines()[-1].startswith("twinmem: cannot listen on 127.0.0.1:"), said
    assert not data_dir.exists()


def test_a_data_directory_in_use_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    """A second serve on a data directory a running twinmem holds loaded its model first, and
    was refused only then. It is refused before, in one line, status 2."""
    import fcntl

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with (data_dir / ".lock").open("a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        process = _serve_with_a_held_back_model(_free_port(), data_dir)
        status, said = _ended(process, timeout=30)
    assert status == 2, said
    assert "loading" not in said, said
    lines = [line for line in said.splitlines() if line.startswith("twinmem: ")]
    assert lines == [f"twinmem: data directory {data_dir} is in use by another twinmem process"], said
    assert [path.name for path in data_dir.iterdir()] == [".lock"]  # nothing else made


def test_a_request_sent_while_the_model_loads_waits_until_serve_serves(tmp_path: Path) -> None:
    """With the model loaded before the port was bound, a request sent while it loaded was
    refused (connection refused), where the README says it waits until the service serves."""
    import threading

    data_dir, port, gate = tmp_path / "data", _free_port(), tmp_path / "load-now"
    process = _serve_with_a_held_back_model(port, data_dir, gate)
    answers: list[int | str] = []
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == b"loading"

        def ask() -> None:
            try:
                answers.append(httpx.get(f"http://127.0.0.1:{port}/health", timeout=120).status_code)
            except httpx.HTTPError as exc:
                answers.append(repr(exc))

        asking = threading.Thread(target=ask)
        asking.start()
        time.sleep(0.5)  # sent, and waiting, while the model is held back
        assert answers == []
        gate.touch()
        asking.join(timeout=120)
    finally:
        process.send_signal(signal.SIGTERM)
        status, said = _ended(process, timeout=60)
    assert answers == [200], said
    assert status == 0, said
