"""Two OS processes, each with its own Neo4jStore over one ArcadeDB database, reinforcing
and editing the same memories at once: nothing is lost (``tests/integration/bolt_writer.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.records import Memory, Scope, new_memory_id
from tests.bolt import BoltTarget
from tests.integration.bolt_writer import BONUS, JOB_VARIABLE
from tests.integration.test_neo4j_store import memory as stored_memory

ROUNDS = 15
REINFORCEMENTS = 60
NS = "ns"  # the namespace of test_neo4j_store.memory
ROOT = Path(__file__).resolve().parents[2]


def memory() -> Memory:
    return stored_memory(new_memory_id()).evolve(content="a memory two processes edit", base_score=0.1)


@pytest.mark.slow
def test_two_processes_reinforcing_and_editing_the_same_memories_lose_nothing(arcadedb: BoltTarget) -> None:
    database = arcadedb.new_database()
    store = arcadedb.store(database)
    store.open()
    try:
        memories = [memory() for _ in range(3)]
        store.insert(memories, [np.ones(4, np.float32)] * len(memories), changed_by=None)
        ids = sorted(m.memory_id for m in memories)
        jobs = [
            {"name": name, "ids": order, "rounds": ROUNDS, "reinforcements": REINFORCEMENTS}
            for name, order in (("first", ids), ("second", ids[::-1]))
        ]
        for job in jobs:
            job |= {
                "uri": arcadedb.uri,
                "user": arcadedb.user,
                "password": arcadedb.password,
                "database": database,
                "namespace": NS,
            }
        writers = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.integration.bolt_writer"],
                cwd=ROOT,
                env={**os.environ, JOB_VARIABLE: json.dumps(job)},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for job in jobs
        ]
        for writer in writers:
            out, err = writer.communicate(timeout=600)
            assert writer.returncode == 0, err
            json.loads(out)

        scope = Scope.whole([NS])
        names = [job["name"] for job in jobs]
        for memory_id in ids:
            after = store.get(scope, memory_id)
            assert after is not None
            # Every reinforcement counted, and none of their bonuses written over by an edit.
            assert after.access_count == 2 * REINFORCEMENTS
            assert after.base_score == pytest.approx(0.1 + 2 * REINFORCEMENTS * BONUS)
            # Every edit present, each a version of its own.
            wanted = {f"{name}-{kind}{r}" for name in names for kind in ("", "pair-") for r in range(ROUNDS)}
            assert set(after.metadata) == wanted
            assert after.version == 1 + len(wanted)
            assert len(store.versions(scope, memory_id)) == after.version
    finally:
        store.close()
