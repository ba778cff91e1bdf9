"""`twinmem import` and `twinmem export` as subprocesses, with the default (real) embedder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.adapters import open_security
from engine.config import load_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TWINMEM = str(Path(sys.executable).with_name("twinmem"))
CSV = ROOT / "tests" / "data" / "importers" / "notes.csv"


def twinmem(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TWINMEM, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_import_export_import_through_the_cli(tmp_path: Path) -> None:
    first, second, out = tmp_path / "first", tmp_path / "second", tmp_path / "notes.jsonl"
    mapping = "memory_id=note_id,content=text,created_at=ts,category=kind,entities=tags"
    imported = twinmem("import", CSV, "--data-dir", first, "--namespace", "notes", "--format", "csv", "--map", mapping)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["inserted"] == 3

    exported = twinmem("export", "--namespace", "notes", "--data-dir", first, "-o", out, "--versions", "--vectors")
    assert exported.returncode == 0, exported.stderr
    assert "exported 3 memories" in exported.stdout

    copied = twinmem("import", out, "--data-dir", second)
    assert copied.returncode == 0, copied.stderr
    report = json.loads(copied.stdout)
    assert (report["inserted"], report["vectors_kept"], report["namespaces"]) == (3, 3, ["notes"])

    out.write_bytes(out.read_bytes()[:-20])  # cut short: refused, exit 1, nothing written
    for target in (tmp_path / "third", first):
        refused = twinmem("import", out, "--data-dir", target, "--namespace", "copy")
        assert refused.returncode == 1
        assert "nothing was imported" in refused.stderr
        assert json.loads(refused.stdout)["inserted"] == 0
    assert not (tmp_path / "third").exists()  # made for the import, which wrote nothing: not left behind

    # Each command left an entry in its data directory's audit log, the refused one too.
    def logged(data_dir: Path) -> list[tuple[str, str, str]]:
        security = open_security(load_config(env={}, data_dir=data_dir))
        try:
            return [(r.entry["actor"], r.entry["action"], r.entry["outcome"]) for r in security.audit_rows()]
        finally:
            security.close()

    assert logged(first) == [("cli", "import", "ok"), ("cli", "export", "ok"), ("cli", "import", "rejected")]
    # The copy without --namespace is logged under the namespace it wrote and the memories it
    # stored, not under '*' alone.
    security = open_security(load_config(env={}, data_dir=second))
    try:
        (entry,) = [row.entry for row in security.audit_rows()]
    finally:
        security.close()
    assert (entry["namespaces"], len(entry["memory_ids"])) == (["*", "notes"], 3)
