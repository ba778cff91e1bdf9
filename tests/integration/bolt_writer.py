"""One writer process for the two-process test in ``test_neo4j_concurrency.py``.

Run as ``python -m tests.integration.bolt_writer`` with a JSON job in ``TWINMEM_TEST_JOB``: where
the graph store is, this writer's name, the memory ids, how many rounds of edits
and how many reinforcements. One thread reinforces every memory, again and again;
another, each round, edits each memory (a metadata key of its own, from a fresh
read, again after a version conflict) and then all of them together in one
``insert_linked``, in the order the job gives (the other writer gets the reverse).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from engine.adapters.neo4j_store import Neo4jStore
from engine.errors import Conflict
from engine.records import Memory, Scope

BONUS = 0.001
JOB_VARIABLE = "TWINMEM_TEST_JOB"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def add_bonus(memory: Memory, bonus: float, at: datetime) -> float:
    return min(1.0, memory.base_score + bonus)


def edited(store: Neo4jStore, scope: Scope, memory_id: str, key: str, at: datetime) -> Memory:
    current = store.get(scope, memory_id)
    assert current is not None
    return current.evolve(metadata={**current.metadata, key: True}, version=current.version + 1, updated_at=at)


def main() -> None:
    job = json.loads(os.environ[JOB_VARIABLE])
    store = Neo4jStore(job["uri"], user=job["user"], password=job["password"], database=job["database"])
    store.open()
    try:
        # Reinforcing beside editing, so that use lands between an edit's read and its write.
        reinforcer = threading.Thread(target=reinforce, args=(store, job["ids"], job["reinforcements"]))
        reinforcer.start()
        conflicts = edit(store, job)
        reinforcer.join()
    finally:
        store.close()
    json.dump({"conflicts": conflicts}, sys.stdout)


def reinforce(store: Neo4jStore, ids: list[str], times: int) -> None:
    for n in range(times):
        store.reinforce([(memory_id, BONUS, T0 + timedelta(seconds=n)) for memory_id in ids], add_bonus)


def edit(store: Neo4jStore, job: dict[str, Any]) -> int:
    scope = Scope.whole([job["namespace"]])
    name, ids = job["name"], job["ids"]
    conflicts = 0
    for round_ in range(job["rounds"]):
        at = T0 + timedelta(seconds=round_)
        for memory_id in ids:
            while True:
                try:
                    update = edited(store, scope, memory_id, f"{name}-{round_}", at)
                    store.update(update, None, changed_by=name, reason="edit")
                    break
                except Conflict:
                    conflicts += 1
        while True:
            try:
                updates = [(edited(store, scope, i, f"{name}-pair-{round_}", at), "pair edit") for i in ids]
                store.insert_linked([], [], updates=updates, edges=[], changed_by=name)
                break
            except Conflict:
                conflicts += 1
    return conflicts


if __name__ == "__main__":
    main()
