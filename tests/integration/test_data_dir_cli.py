"""`twinmem` commands given a wrong data directory, input file, output or agent name, through
``api.cli.main``: a clear line on stderr, a status that is not 0, and nothing made, filled or
overwritten. The service gets the tests' hashing embedder (``load_embedder`` patched)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import engine.adapters
import engine.portability
from api.cli import main
from engine.adapters import open_security
from engine.config import load_config
from engine.records import Memory, MemoryDraft
from tests.integration.conftest import OpenService

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _hashing_embedder(monkeypatch: pytest.MonkeyPatch, embedder: Any) -> None:
    monkeypatch.setattr(engine.adapters, "load_embedder", lambda config: embedder)


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _stored(open_svc: OpenService) -> Memory:
    """One memory stored in namespace ``u1`` of the data directory, which is closed again."""
    service = open_svc()
    memory = service.save(MemoryDraft("The user likes oolong", namespace="u1")).memory
    service.close()
    return memory


def _actions(data_dir: Path) -> list[tuple[str, str]]:
    security = open_security(load_config(env={}, data_dir=data_dir))
    try:
        return [(row.entry["action"], row.entry["outcome"]) for row in security.audit_rows()]
    finally:
        security.close()


@pytest.mark.parametrize(
    "command",
    [
        ("export",),
        ("consolidate",),
        ("consolidate", "--dry-run"),
        ("token", "revoke", "tok-0123456789ab"),
        ("block", "remove", "--agent", "mallory"),
        ("block", "add", "--agent", "mallory"),
    ],
    ids=lambda c: " ".join(c),
)
def test_a_command_on_a_data_directory_without_twinmem_data_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    missing, other = tmp_path / "typo" / "data", tmp_path / "elsewhere"
    other.mkdir()
    for path in (missing, other):
        code, out, err = _run(capsys, *command, "--data-dir", path)
        # not "exported 0 memories", an empty consolidation report, "no live token" or a block
        # stored in a new store nobody serves
        assert (code, out) == (2, "") and f"no twinmem data at {path}" in err
    assert not missing.parent.exists() and list(other.iterdir()) == []


def test_export_and_consolidate_need_the_memory_store_not_only_the_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "data"
    code, _, _ = _run(capsys, "token", "create", "--agent", "planner", "--grant", "u:r", "--data-dir", data_dir)
    assert code == 0  # tokens made before the first serve: the store itself is not there yet
    held = sorted(p.name for p in data_dir.iterdir())
    for command in (("export",), ("consolidate",)):
        code, out, err = _run(capsys, *command, "--data-dir", data_dir)
        assert (code, out) == (2, "") and f"no twinmem data at {data_dir}" in err
    assert sorted(p.name for p in data_dir.iterdir()) == held


@pytest.mark.parametrize(
    "command",
    [
        ("export", "-o", "-"),
        ("import", "FILE"),
        ("token", "create", "--agent", "planner", "--grant", "u:r"),
        ("token", "list"),
        ("serve", "--port", "18439"),
    ],
    ids=lambda c: c[0] if c[0] != "token" else " ".join(c[:2]),
)
def test_a_data_directory_that_is_a_file_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    not_a_dir = tmp_path / "notes.txt"
    not_a_dir.write_text("my notes\n")
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    argv = [str(source) if arg == "FILE" else arg for arg in command]
    code, out, err = _run(capsys, *argv, "--data-dir", not_a_dir)
    assert (code, out) == (2, "") and f"{not_a_dir} is not a directory" in err
    assert not_a_dir.read_text() == "my notes\n"


def test_import_of_a_file_that_cannot_be_read_opens_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = tmp_path / "data"
    for source in (tmp_path / "missing.jsonl", tmp_path):
        code, out, err = _run(capsys, "import", source, "--data-dir", data_dir)
        assert (code, out) == (2, "") and f"cannot read {source}" in err
    assert not data_dir.exists()


def test_a_refused_import_leaves_no_data_directory_it_made(
    open_svc: OpenService, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "g.jsonl"
    garbage.write_text("hello\nworld\n")
    new = tmp_path / "new" / "data"
    code, out, err = _run(capsys, "import", garbage, "--data-dir", new)
    assert code == 1 and json.loads(out)["written"] is False and "nothing was imported" in err
    assert not new.parent.exists()  # not an empty store (and its parent) left for the next command to read
    # Refused whole as another format, or by a column the file lacks: the same.
    table = tmp_path / "notes.csv"
    table.write_text("note_id,text\nn-1,hello\n")
    for refused in (("--format", "mem0"), ("--format", "langchain"), ("--format", "csv", "--map", "content=body")):
        source = table if "csv" in refused else garbage
        code, out, err = _run(capsys, "import", source, "--data-dir", new, *refused)
        assert (code, out) == (2, "") and err.startswith("twinmem: the ")
        assert not new.parent.exists()

    # Into a data directory that was there, the refusal is logged and what was stored stays.
    kept = _stored(open_svc)
    code, _, _ = _run(capsys, "import", garbage, "--data-dir", data_dir)
    assert code == 1
    assert _actions(data_dir)[-1] == ("import", "rejected")
    service = open_svc()
    assert service.get("u1", kept.memory_id).content == "The user likes oolong"


def test_export_refuses_an_output_it_cannot_write_before_it_opens_anything(
    open_svc: OpenService, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    open_svc().close()
    logged = _actions(data_dir)
    for output in (tmp_path, tmp_path / "missing" / "out.jsonl"):
        code, out, err = _run(capsys, "export", "--data-dir", data_dir, "-o", output)
        assert (code, out) == (2, "") and f"cannot write the export to {output}" in err
    assert not (tmp_path / "missing").exists()
    assert _actions(data_dir) == logged


def test_export_refuses_an_output_in_the_data_directory(
    open_svc: OpenService, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = _stored(open_svc)
    link = tmp_path / "backup.jsonl"
    link.symlink_to(data_dir / "twinmem.sqlite3")
    for output in (data_dir / "twinmem.sqlite3", data_dir / "security.sqlite3", data_dir / "u1.jsonl", link):
        code, out, err = _run(capsys, "export", "--namespace", "u1", "--data-dir", data_dir, "-o", output)
        # opened "wb", the store was truncated under the service that read it: every memory lost
        assert (code, out) == (2, "") and "inside the data directory" in err
    assert not (data_dir / "u1.jsonl").exists()
    service = open_svc()
    assert service.get("u1", kept.memory_id).content == "The user likes oolong"


def test_an_export_that_fails_leaves_the_file_it_would_replace_as_it_was(
    open_svc: OpenService,
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _stored(open_svc)
    backup = tmp_path / "u1.jsonl"
    code, _, _ = _run(capsys, "export", "--namespace", "u1", "--data-dir", data_dir, "-o", backup)
    assert code == 0
    before = backup.read_bytes()
    assert b"oolong" in before

    def cut(self: engine.portability.Export) -> Any:
        yield engine.portability._line(self.header)
        raise OSError(28, "No space left on device")  # as a full disk would, after the header

    monkeypatch.setattr(engine.portability.Export, "chunks", cut)
    code, out, err = _run(capsys, "export", "--namespace", "u1", "--data-dir", data_dir, "-o", backup)
    assert (code, out) == (2, "") and f"cannot write the export to {backup}: No space left on device" in err
    assert backup.read_bytes() == before  # the last good backup, not a header without its memories
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["data", "u1.jsonl"])  # no part file left


def test_an_export_of_a_namespace_without_memories_says_so(
    open_svc: OpenService, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = open_svc()
    service.save(MemoryDraft("The user likes oolong", namespace="user:42"))
    service.close()
    out_file = tmp_path / "out.jsonl"
    code, out, err = _run(capsys, "export", "--namespace", "user:24", "--data-dir", data_dir, "-o", out_file)
    # A valid (empty) export, as GET /v1/export gives, but a mistyped namespace is named.
    assert code == 0 and "exported 0 memories of 'user:24'" in out
    assert "no memories in namespace 'user:24'" in err and "user:42" in err


@pytest.mark.parametrize("agent", ["", " planner", "plan ner", "planner\n", "p" * 129])
def test_token_create_refuses_an_agent_name_the_api_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    data_dir = tmp_path / "data"
    code, _, _ = _run(capsys, "token", "create", "--agent", "ok", "--grant", "u:r", "--data-dir", data_dir)
    assert code == 0
    code, out, err = _run(capsys, "token", "create", "--agent", agent, "--grant", "u:r", "--data-dir", data_dir)
    assert (code, out) == (2, "") and "agent" in err
    code, out, _ = _run(capsys, "token", "list", "--data-dir", data_dir)
    assert [token["agent"] for token in json.loads(out)] == ["ok"]


@pytest.mark.parametrize("agent", ["twinmem", "cli", "anonymous", "local", "CLI"])
def test_token_create_refuses_the_names_the_audit_log_gives_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    """The service's own entries carry the actor ``twinmem``, the commands' ``cli``, refused
    requests' ``anonymous`` and local mode's ``local``: a token's agent so named would pass
    for them in the log."""
    data_dir = tmp_path / "data"
    code, out, err = _run(capsys, "token", "create", "--agent", agent, "--grant", "u:r", "--data-dir", data_dir)
    assert (code, out) == (2, "") and f"the agent name {agent!r} is reserved" in err
    code, out, _ = _run(capsys, "token", "list", "--data-dir", data_dir)
    assert json.loads(out) == []


def test_token_create_refuses_more_grants_than_the_api_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "data"
    grants = [arg for n in range(65) for arg in ("--grant", f"team{n}:r")]
    code, out, err = _run(capsys, "token", "create", "--agent", "ok", *grants, "--data-dir", data_dir)
    assert (code, out) == (2, "") and "at most 64 grants, got 65" in err
    code, out, _ = _run(capsys, "token", "create", "--agent", "ok", *grants[:128], "--data-dir", data_dir)
    assert code == 0 and len(json.loads(_run(capsys, "token", "list", "--data-dir", data_dir)[1])[0]["grants"]) == 64


@pytest.mark.parametrize(
    "command", [("serve", "--port", "8499"), ("token", "create", "--agent", "a", "--grant", "u:r")], ids=lambda c: c[0]
)
def test_a_data_directory_that_cannot_be_made_is_said_in_one_line(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    data_dir = Path("/proc/twinmem-data")  # no directory can be made there, not even by root
    code, out, err = _run(capsys, *command, "--data-dir", data_dir)
    assert (code, out) == (
        2,
        "",
    ) and err == f"twinmem: could not make the data directory {data_dir}: No such file or directory\n"


def test_an_export_into_a_pipe_is_written_into_it(
    open_svc: OpenService, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stored(open_svc)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_bytes()))
    reader.start()
    code, out, err = _run(capsys, "export", "--namespace", "u1", "--data-dir", data_dir, "-o", fifo)
    reader.join(timeout=60)
    assert code == 0 and "exported 1 memories" in out, err
    assert b"oolong" in read[0] and fifo.is_fifo()  # not replaced by a file beside it


@pytest.mark.parametrize(
    ("command", "over_http"),
    [
        (("export", "-o", "-"), "GET /v1/export"),
        (("import", "FILE"), "POST /v1/import"),
        (("consolidate",), "POST /v1/memory/consolidate"),
    ],
    ids=["export", "import", "consolidate"],
)
def test_a_command_on_a_data_directory_a_server_holds_says_what_to_do(
    open_svc: OpenService,
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: tuple[str, ...],
    over_http: str,
) -> None:
    service = open_svc()  # holds the data directory, as a running `twinmem serve` does
    service.save(MemoryDraft("The user likes oolong", namespace="default"))
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    argv = [str(source) if arg == "FILE" else arg for arg in command]
    code, out, err = _run(capsys, *argv, "--data-dir", data_dir)
    assert (code, out) == (2, "") and "in use" in err
    assert "stop the server first" in err and over_http in err


def test_a_reader_that_goes_away_ends_the_command_without_a_traceback(tmp_path: Path) -> None:
    """`twinmem token list | head -1`: the pipe closed under the command. It says so in one
    line and exits 1 (an export cut off there did not export everything)."""
    data_dir = tmp_path / "data"
    for n in range(3):
        assert main(["token", "create", "--agent", f"agent-{n}", "--grant", "u:r", "--data-dir", str(data_dir)]) == 0
    command = [sys.executable, "-m", "api.cli", "token", "list", "--data-dir", str(data_dir)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT) as listing:
        assert listing.stdout is not None and listing.stderr is not None
        listing.stdout.close()  # before it writes: it starts a new interpreter first
        err = listing.stderr.read().decode()
        code = listing.wait(timeout=120)
    assert code == 1 and "Traceback" not in err and "the output was closed" in err


@pytest.mark.parametrize(
    "command",
    [
        ("audit", "verify"),
        ("token", "list"),
        ("token", "revoke", "tok-0123456789ab"),
        ("block", "list"),
        ("block", "remove", "--agent", "mallory"),
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_data_directory_whose_audit_log_is_gone_is_not_read_as_a_new_one(
    open_svc: OpenService, data_dir: Path, capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    _stored(open_svc)
    for path in data_dir.glob("security.sqlite3*"):
        path.unlink()  # the tokens, blocks and audit log deleted, the memories kept
    code, out, err = _run(capsys, *command, "--data-dir", data_dir)
    # not "audit log intact: 0 entries" or "[]" over a new, empty log made for the check, which
    # the next audit verify would then have read as intact
    assert (code, out) == (2, "") and f"no tokens, blocks or audit log at {data_dir}" in err
    assert not (data_dir / "security.sqlite3").exists()


@pytest.mark.parametrize(
    "command",
    [
        ("serve", "--port", "8499"),
        ("export",),
        ("consolidate",),
        ("import", "EXPORT"),
        ("token", "create", "--agent", "planner", "--grant", "u1:rw"),
        ("block", "add", "--agent", "mallory"),
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_memories_whose_security_file_is_gone_are_not_served_with_a_new_empty_one(
    open_svc: OpenService,
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
) -> None:
    _stored(open_svc)
    export = tmp_path / "u1.jsonl"
    assert _run(capsys, "export", "--namespace", "u1", "--data-dir", data_dir, "-o", export)[0] == 0
    blocked = _run(capsys, "block", "add", "--agent", "mallory", "--data-dir", data_dir)
    assert blocked[0] == 0
    for path in data_dir.glob("security.sqlite3*"):
        path.unlink()  # left behind when the memory file was copied to another machine, say

    def not_reached(host: str, port: int) -> None:
        raise AssertionError("serve went on to listen")

    monkeypatch.setattr("api.cli._listening_socket", not_reached)
    argv = [str(export) if part == "EXPORT" else part for part in command]
    code, out, err = _run(capsys, *argv, "--data-dir", data_dir)
    # made anew, the file held no block on mallory and an audit log that began again
    assert (code, out) == (2, "") and "holds twinmem.sqlite3 but not security.sqlite3" in err
    assert "--new-security-file" in err and not (data_dir / "security.sqlite3").exists()


def test_a_new_security_file_is_made_where_asked(
    open_svc: OpenService, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stored(open_svc)
    for path in data_dir.glob("security.sqlite3*"):
        path.unlink()
    argv = ("token", "create", "--agent", "planner", "--grant", "u1:rw", "--data-dir", data_dir)
    code, out, _ = _run(capsys, *argv, "--new-security-file")
    assert code == 0 and out.strip() and (data_dir / "security.sqlite3").is_file()
    assert _run(capsys, "token", "list", "--data-dir", data_dir)[0] == 0  # and from now on, without the option


@pytest.mark.parametrize(
    "options",
    [
        ("--map", "content=text"),  # a CSV imported without --format csv: its mapping was dropped
        ("--format", "mem0", "--map", "content=text"),
        ("--format", "csv", "--session-id", "s-1"),
        ("--session-id", "s-1"),
    ],
    ids=lambda options: " ".join(options),
)
def test_import_refuses_an_option_its_format_does_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: tuple[str, ...]
) -> None:
    source = tmp_path / "notes.csv"
    source.write_text("text\nhello\n")
    data_dir = tmp_path / "data"
    code, out, err = _run(capsys, "import", source, "--data-dir", data_dir, *options)
    assert (code, out) == (2, "") and "applies to --format" in err
    assert not data_dir.exists()


@pytest.mark.parametrize(
    "command",
    [("import", "FILE"), ("token", "create", "--agent", "planner", "--grant", "u:r"), ("export", "-o", "-")],
    ids=lambda c: " ".join(c[:2]),
)
def test_an_empty_data_directory_or_config_path_is_refused_not_read_as_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    """``--data-dir "$DATA"`` with DATA unset: not ./twinmem-data, made or read in its place."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    argv = [str(source) if arg == "FILE" else arg for arg in command]
    code, out, err = _run(capsys, *argv, "--data-dir", "")
    assert (code, out) == (2, "") and "--data-dir is empty" in err
    code, out, err = _run(capsys, *argv, "--data-dir", tmp_path / "data", "--config", "")
    assert (code, out) == (2, "") and "--config is empty" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_a_config_path_that_cannot_be_read_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "twinmem.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    for config, message in ((tmp_path, "Is a directory"), (binary, "not UTF-8")):
        code, out, err = _run(capsys, "token", "list", "--data-dir", tmp_path / "data", "--config", config)
        assert (code, out) == (2, "") and f"cannot read the config file {config}" in err and message in err


def test_an_export_interrupted_says_so_and_leaves_the_last_backup(
    open_svc: OpenService,
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _stored(open_svc)
    backup = tmp_path / "u1.jsonl"
    backup.write_bytes(b"the last good backup\n")

    def interrupted(self: engine.portability.Export) -> Any:
        yield engine.portability._line(self.header)
        raise KeyboardInterrupt  # Ctrl-C while it writes

    monkeypatch.setattr(engine.portability.Export, "chunks", interrupted)
    code, out, err = _run(capsys, "export", "--namespace", "u1", "--data-dir", data_dir, "-o", backup)
    assert (code, out) == (130, "") and err == "twinmem: interrupted\n"  # not a traceback
    assert backup.read_bytes() == b"the last good backup\n"
    assert _actions(data_dir)[-1] == ("export", "error")


def test_a_refused_import_takes_away_only_what_it_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another command's data made meanwhile in a directory the import made (a sibling data
    directory under the same new parent, a file in the data directory) is not removed with it:
    rmtree of the outermost directory made took a second import's stored memories along."""
    import engine.importers

    garbage = tmp_path / "g.jsonl"
    garbage.write_text("hello\n")
    root = tmp_path / "tenants"
    mine, sibling = root / "a", root / "b"
    real_import = engine.importers.run_import

    def meanwhile(*args: Any, **kwargs: Any) -> Any:
        # While this import runs, another fills a sibling data directory, and a note lands in this one.
        sibling.mkdir()
        (sibling / "twinmem.sqlite3").write_bytes(b"another import's store")
        (mine / "notes.txt").write_text("kept\n")
        return real_import(*args, **kwargs)

    monkeypatch.setattr(engine.importers, "run_import", meanwhile)
    code, _, err = _run(capsys, "import", garbage, "--data-dir", mine)
    assert code == 1 and "nothing was imported" in err
    assert (sibling / "twinmem.sqlite3").read_bytes() == b"another import's store"
    assert (mine / "notes.txt").read_text() == "kept\n"


def test_a_refused_import_leaves_a_data_directory_another_twinmem_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A serve that took the new data directory once the import let it go keeps it."""
    import engine.service

    garbage = tmp_path / "g.jsonl"
    garbage.write_text("hello\n")
    new = tmp_path / "new" / "data"
    taken: list[Any] = []
    real_close = engine.service.MemoryService.close

    def close_then_taken(self: Any) -> None:
        real_close(self)
        if not taken:  # the import's service let the directory go: another process takes it now
            lock = subprocess.Popen(
                [sys.executable, "-c", HOLD_LOCK, str(new / ".lock")], stdout=subprocess.PIPE, text=True
            )
            assert lock.stdout is not None and lock.stdout.readline() == "held\n"
            taken.append(lock)

    monkeypatch.setattr(engine.service.MemoryService, "close", close_then_taken)
    try:
        code, _, _ = _run(capsys, "import", garbage, "--data-dir", new)
        assert code == 1 and taken
        assert (new / "twinmem.sqlite3").is_file()
    finally:
        for lock in taken:
            lock.kill()
            lock.wait()
            assert lock.stdout is not None
            lock.stdout.close()


HOLD_LOCK = (
    "import fcntl, sys, time\n"
    "fh = open(sys.argv[1], 'a+')\n"
    "fcntl.flock(fh.fileno(), fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "time.sleep(60)\n"
)


def test_an_export_is_on_disk_once_it_says_exported(
    open_svc: OpenService,
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The file is synced before the rename and the directory after it: without the second, a
    crash after "exported" could leave the old file, or none, under the name."""
    import stat

    _stored(open_svc)
    backup = tmp_path / "u1.jsonl"
    synced: list[tuple[str, bool]] = []
    real_fsync = os.fsync

    def noted(fd: int) -> None:
        kind = "directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        synced.append((kind, backup.exists() and b"oolong" in backup.read_bytes()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", noted)
    code, out, _ = _run(capsys, "export", "--namespace", "u1", "--data-dir", data_dir, "-o", backup)
    assert code == 0 and "exported 1 memories" in out
    assert ("file", False) in synced and ("directory", True) in synced


def test_an_export_to_an_open_descriptor_is_written_into_it(
    open_svc: OpenService, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-o /dev/stdout`` (here ``/dev/fd/N``) with the descriptor a file opened to append
    (``>> exports.jsonl``): the export goes where the descriptor writes, after what the file
    held, not renamed over the file, dropping it."""
    _stored(open_svc)
    log = tmp_path / "exports.jsonl"
    log.write_text("an earlier export\n")
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        code, _, _ = _run(capsys, "export", "--namespace", "u1", "--data-dir", data_dir, "-o", f"/dev/fd/{fd}")
        os.write(fd, b"written after\n")
    finally:
        os.close(fd)
    assert code == 0
    text = log.read_text()
    assert text.startswith("an earlier export\n") and "oolong" in text and text.endswith("written after\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "exports.jsonl"]


def test_an_export_to_standard_output_by_name_holds_the_export_alone(
    open_svc: OpenService, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``twinmem export -o /dev/stdout > u1.jsonl`` (or ``| gzip``): the line that says what
    was exported goes to stderr, not after the end line, where the import refused it."""
    _stored(open_svc)
    written = tmp_path / "u1.jsonl"
    said = tmp_path / "said.txt"
    with open(written, "w") as stdout, open(said, "w") as stderr:
        monkeypatch.setattr(sys, "stdout", stdout)
        monkeypatch.setattr(sys, "stderr", stderr)
        code = main(["export", "--namespace", "u1", "--data-dir", str(data_dir), "-o", f"/dev/fd/{stdout.fileno()}"])
    monkeypatch.undo()
    assert code == 0 and "exported 1 memories" in said.read_text()
    lines = written.read_text().splitlines()
    assert json.loads(lines[-1])["kind"] == "end" and "oolong" in lines[1]


def test_a_data_directory_behind_a_link_to_nothing_is_said_plainly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A link whose target is gone (a volume not mounted, a moved folder): a traceback
    ("FileExistsError: File exists") before, from the mkdir that met the link."""
    source = tmp_path / "notes.csv"
    source.write_text("content\nThe user likes oolong\n")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    for data_dir in (link, link / "data"):
        for command in (
            ("import", source, "--format", "csv"),
            ("token", "create", "--agent", "planner", "--grant", "u:r"),
            ("export",),
        ):
            code, out, err = _run(capsys, *command, "--data-dir", data_dir)
            assert (code, out) == (2, "") and f"{link} is a link to {tmp_path / 'gone'}, which is not there" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "notes.csv"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_an_export_that_cannot_be_written_says_so_in_one_line(
    open_svc: OpenService, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk met while writing (/dev/full answers every write so): a traceback before."""
    _stored(open_svc)
    code, out, err = _run(capsys, "export", "--namespace", "u1", "--data-dir", data_dir, "-o", "/dev/full")
    assert (code, out) == (2, "") and err == "twinmem: cannot write the export to /dev/full: No space left on device\n"
    assert _actions(data_dir)[-1] == ("export", "error")


def test_a_refused_import_keeps_a_token_created_in_its_new_data_directory_meanwhile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``token create`` takes no lock on the data directory: one run while the import ran
    stored a token (shown once) that the import's clean-up then removed with the directory."""
    import engine.importers

    garbage = tmp_path / "g.jsonl"
    garbage.write_text("hello\n")
    new = tmp_path / "new" / "data"
    real_import = engine.importers.run_import
    tokens: list[str] = []

    def meanwhile(*args: Any, **kwargs: Any) -> Any:
        code, out, _ = _run(capsys, "token", "create", "--agent", "ops", "--grant", "*:a", "--data-dir", new)
        assert code == 0
        tokens.append(out.strip())
        return real_import(*args, **kwargs)

    monkeypatch.setattr(engine.importers, "run_import", meanwhile)
    code, _, _ = _run(capsys, "import", garbage, "--data-dir", new)
    assert code == 1 and tokens
    code, out, _ = _run(capsys, "token", "list", "--data-dir", new)
    assert code == 0 and [token["agent"] for token in json.loads(out)] == ["ops"]


def test_a_refused_import_keeps_a_directory_that_was_there_named_through_dot_dot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--data-dir new/../data`` with ``new`` not there: the path reads as missing (``new``
    is), but ``data`` was there, made ready by its owner; it is not taken away."""
    garbage = tmp_path / "g.jsonl"
    garbage.write_text("hello\n")
    ready = tmp_path / "data"
    ready.mkdir(mode=0o750)
    code, _, _ = _run(capsys, "import", garbage, "--data-dir", f"{tmp_path}/new/../data")
    assert code == 1
    assert ready.is_dir()


def test_an_import_cut_short_leaves_no_data_directory_it_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while it read the file: nothing was written, and the new, empty store was left
    for the next command to read as the data ("exported 0 memories")."""
    import engine.importers

    source = tmp_path / "notes.csv"
    source.write_text("content\nThe user likes oolong\n")

    def cut(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(engine.importers, "run_import", cut)
    new = tmp_path / "new" / "data"
    code, out, err = _run(capsys, "import", source, "--format", "csv", "--data-dir", new)
    assert (code, out, err) == (130, "", "twinmem: interrupted\n")
    assert not new.parent.exists()


def test_a_new_export_is_readable_by_its_owner_alone_and_a_replaced_one_keeps_its_mode(
    open_svc: OpenService, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An export holds every memory of its namespace, and the data directory is 0700: a new
    file is 0600 whatever the umask (it was 0644 under the usual one), and an export over an
    older file keeps the mode its owner gave it."""
    _stored(open_svc)
    fresh, kept = tmp_path / "fresh.jsonl", tmp_path / "kept.jsonl"
    kept.write_text("older\n")
    kept.chmod(0o640)
    for output in (fresh, kept):
        code, _, err = _run(capsys, "export", "--namespace", "u1", "--data-dir", data_dir, "-o", output)
        assert code == 0, err
    assert fresh.stat().st_mode & 0o777 == 0o600
    assert kept.stat().st_mode & 0o777 == 0o640 and b"oolong" in kept.read_bytes()


def _a_model_that_cannot_load(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.errors import EmbedderError

    def cannot(config: object) -> None:
        raise EmbedderError("could not load sentence-transformers model 'no-such-model': not on this machine")

    monkeypatch.setattr(engine.adapters, "load_embedder", cannot)


def test_an_import_whose_model_cannot_load_leaves_a_new_data_directory_unmade(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _a_model_that_cannot_load(monkeypatch)
    source, data_dir = tmp_path / "in.jsonl", tmp_path / "new" / "data"
    source.write_text('{"text": "The user likes oolong"}\n')
    code, out, err = _run(capsys, "import", source, "--format", "jsonl", "--data-dir", data_dir)
    assert (code, out) == (2, "") and "no-such-model" in err
    # not a lock and an audit log made only to record that nothing was
    assert not (tmp_path / "new").exists()


def test_memories_given_a_new_security_file_keep_none_when_the_model_cannot_load(
    open_svc: OpenService, data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _stored(open_svc)
    for path in data_dir.glob("security.sqlite3*"):
        path.unlink()
    held = sorted(p.name for p in data_dir.iterdir())
    _a_model_that_cannot_load(monkeypatch)
    code, out, err = _run(capsys, "consolidate", "--new-security-file", "--data-dir", data_dir)
    assert (code, out) == (2, "") and "no-such-model" in err
    assert sorted(p.name for p in data_dir.iterdir()) == held


@pytest.mark.parametrize("command", [("import", "FILE"), ("consolidate",), ("export", "-o", "-")], ids=lambda c: c[0])
def test_a_model_that_cannot_load_is_audited_where_the_audit_log_is_there(
    open_svc: OpenService,
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
) -> None:
    _stored(open_svc)
    before = _actions(data_dir)
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "The user likes oolong"}\n')
    _a_model_that_cannot_load(monkeypatch)
    argv = [str(source) if arg == "FILE" else arg for arg in command]
    code, out, err = _run(capsys, *argv, "--data-dir", data_dir)
    assert (code, out) == (2, "") and "no-such-model" in err
    assert _actions(data_dir) == [*before, (command[0], "error")]
