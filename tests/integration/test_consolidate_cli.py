"""`twinmem consolidate` on a data directory, as a subprocess: dry run first, then for real."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.adapters import open_service
from engine.config import load_config
from engine.records import MemoryDraft, Status

pytestmark = pytest.mark.slow


def _consolidate(data_dir: Path, *extra: str) -> dict[str, object]:
    command = [sys.executable, "-m", "api.cli", "consolidate", "--namespace", "ns", "--data-dir", str(data_dir)]
    done = subprocess.run([*command, *extra], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_consolidate_command_dry_run_then_apply(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    config = load_config(env={}, data_dir=data_dir)
    service = open_service(config)
    expired = service.save(
        MemoryDraft("the parking permit for March", namespace="ns", expire_at=datetime.now(UTC) - timedelta(days=1))
    ).memory
    kept = service.save(MemoryDraft("the user's name is Ada", namespace="ns")).memory
    service.close()

    planned = _consolidate(data_dir, "--dry-run")
    assert planned["dry_run"] is True and planned["archived"] == 1

    service = open_service(config)
    try:
        assert service.get("ns", expired.memory_id).status is Status.ACTIVE  # a dry run changes nothing
    finally:
        service.close()

    applied = _consolidate(data_dir)
    assert applied["dry_run"] is False and applied["archived"] == 1
    service = open_service(config)
    try:
        assert service.get("ns", expired.memory_id).status is Status.ARCHIVED
        assert service.get("ns", kept.memory_id).status is Status.ACTIVE
    finally:
        service.close()
