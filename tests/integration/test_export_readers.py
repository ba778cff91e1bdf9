"""The README's readers of an export, run as written against a real export file."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.portability import open_export
from engine.records import MemoryDraft, MemoryPatch, Status
from engine.service import MemoryService

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "### Reading an export without twinmem"
CONTENTS = ["User's favourite colour is blue", "喜欢蓝色\tand tabs", "Old hobby: stamp collecting"]


def readme_block(language: str) -> str:
    section = README.read_text(encoding="utf-8").split(SECTION, 1)[1]
    match = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert match, f"no {language} block under {SECTION!r}"
    return match.group(1)


@pytest.fixture
def export_file(service: MemoryService, tmp_path: Path) -> Path:
    ids = [service.save(MemoryDraft(content=text, namespace="user:42")).memory.memory_id for text in CONTENTS]
    service.update("user:42", ids[2], MemoryPatch(status=Status.ARCHIVED))
    path = tmp_path / "user42.jsonl"
    path.write_bytes(b"".join(open_export(service, "user:42", versions=True, vectors=True).chunks()))
    return path


def test_the_ten_line_python_reader(export_file: Path, tmp_path: Path, service: MemoryService) -> None:
    snippet = readme_block("python")
    assert len(snippet.strip().splitlines()) <= 11
    script = tmp_path / "reader.py"
    script.write_text(snippet, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-I", str(script), str(export_file)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == f"user:42 3 memories, model {service.embedder.name}"
    rows = sorted(line.split(" ", 1)[1] for line in out[1:])
    dim = service.embedder.dim
    assert rows == sorted(
        [f"active {CONTENTS[0]} {dim}", f"active {CONTENTS[1]} {dim}", f"archived {CONTENTS[2]} {dim}"]
    )


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_jq_reader(export_file: Path) -> None:
    command = next(line for line in readme_block("bash").splitlines() if line.startswith("jq "))
    out = subprocess.run(
        command.replace("user42.jsonl", str(export_file)), shell=True, capture_output=True, text=True, check=True
    ).stdout
    rows = sorted(line.split("\t", 2)[1:] for line in out.splitlines())
    assert rows == sorted([["active", CONTENTS[0]], ["active", "喜欢蓝色\\tand tabs"], ["archived", CONTENTS[2]]])
