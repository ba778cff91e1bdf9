"""`twinmem block add / list / remove` on a data directory, through ``api.cli.main``.

The command opens the service as `twinmem consolidate` does; here it gets the
tests' hashing embedder instead of loading a model (``load_embedder`` patched).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import engine.adapters
from api.cli import main
from engine.adapters import open_security
from engine.config import Config
from engine.records import MemoryDraft, Status
from engine.security import AuditQuery, verify_chain
from tests.integration.conftest import OpenService


@pytest.fixture(autouse=True)
def _hashing_embedder(monkeypatch: pytest.MonkeyPatch, embedder: Any) -> None:
    monkeypatch.setattr(engine.adapters, "load_embedder", lambda config: embedder)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_block_add_list_and_remove(
    open_svc: OpenService, config: Config, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = open_svc()
    theirs = service.save(MemoryDraft("The user likes oolong", namespace="u1", actor="mallory")).memory
    also = service.save(MemoryDraft("The user's cat is Miso", namespace="u2", actor="mallory")).memory
    chat = service.save(MemoryDraft("The user plays chess", namespace="u2", actor="bob", session_id="s-9")).memory
    mine = service.save(MemoryDraft("The user likes green tea", namespace="u1", actor="alice")).memory

    # While a process holds the data directory, `block add` refuses and changes nothing.
    code, _, err = _run(capsys, "block", "add", "--agent", "mallory", "--data-dir", str(data_dir))
    assert code == 2 and "in use" in err and "stop the server" in err
    service.close()
    code, out, _ = _run(capsys, "block", "list", "--data-dir", str(data_dir))
    assert code == 0 and json.loads(out) == []

    data = ("--data-dir", str(data_dir))
    code, out, _ = _run(capsys, "block", "add", "--agent", "mallory", "--reason", "planted instructions", *data)
    added = json.loads(out)
    assert code == 0
    assert sorted(added["quarantined"]) == sorted([theirs.memory_id, also.memory_id])
    assert (added["kind"], added["value"], added["blocked_by"], added["reason"]) == (
        "agent",
        "mallory",
        "cli",
        "planted instructions",
    )
    assert not added["already_blocked"]
    # Again: the block stands as it was, and there is nothing left to quarantine.
    code, out, _ = _run(capsys, "block", "add", "--agent", "mallory", *data)
    assert code == 0 and json.loads(out)["already_blocked"] and json.loads(out)["quarantined"] == []
    code, out, _ = _run(capsys, "block", "add", "--session", "s-9", *data)
    assert code == 0 and json.loads(out)["quarantined"] == [chat.memory_id]

    code, out, _ = _run(capsys, "block", "list", *data)
    assert [(b["kind"], b["value"]) for b in json.loads(out)] == [("agent", "mallory"), ("session", "s-9")]

    code, out, _ = _run(capsys, "block", "remove", "--agent", "mallory", *data)
    assert code == 0 and "stays quarantined" in out
    code, _, err = _run(capsys, "block", "remove", "--agent", "mallory", *data)
    assert code == 1 and "no block on agent 'mallory'" in err
    code, _, err = _run(capsys, "block", "add", "--agent", " mallory", *data)
    assert code == 2 and "without spaces" in err

    service = open_svc()
    assert service.get("u1", theirs.memory_id).status is Status.QUARANTINED  # lifting keeps the quarantine
    assert service.history("u2", also.memory_id)[-1].reason == "agent blocked"
    assert service.get("u2", chat.memory_id).status is Status.QUARANTINED
    assert service.get("u1", mine.memory_id).status is Status.ACTIVE
    service.close()

    security = open_security(config)
    try:
        entries = [row.entry for row in security.audit(AuditQuery(actor="cli"))]
        assert [e["detail"] for e in entries] == [
            "block remove agent",
            "block add session",
            "block add agent",
            "block add agent",
        ]
        assert entries[-1]["memory_ids"] == ["agent:mallory", *added["quarantined"]]
        assert verify_chain(security.audit_rows()).ok
    finally:
        security.close()


@pytest.mark.parametrize(
    "command", [("block", "list"), ("token", "list"), ("audit", "verify")], ids=lambda c: " ".join(c)
)
def test_a_reading_command_on_a_data_directory_that_is_not_there_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    missing, other = tmp_path / "typo", tmp_path / "elsewhere"
    other.mkdir()
    for path in (missing, other):  # not there, or not twinmem's
        code, out, err = _run(capsys, *command, "--data-dir", str(path))
        assert (code, out) == (2, "") and f"no twinmem data at {path}" in err
    # neither made nor filled, so not read as an empty store ("audit log intact: 0 entries")
    assert not missing.exists() and list(other.iterdir()) == []
