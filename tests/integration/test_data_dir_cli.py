"""`twinmem` commands given a wrong data directory, input file, output or agent name, through
``api.cli.main``: a clear line on stderr, a status that is not 0, and nothing made, filled or
overwritten. The service gets the tests' hashing embedder (``load_embedder`` patched)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import engine.adapters
from api.cli import main


@pytest.fixture(autouse=True)
def _hashing_embedder(monkeypatch: pytest.MonkeyPatch, embedder: Any) -> None:
    monkeypatch.setattr(engine.adapters, "load_embedder", lambda config: embedder)


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


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
