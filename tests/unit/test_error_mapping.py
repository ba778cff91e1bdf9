"""Foreign errors are translated at the adapter boundary; engine errors map to one HTTP status each."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from api.errors import STATUS_BY_ERROR, status_for
from engine import errors
from engine.adapters.hnsw_index import HnswIndex
from engine.adapters.sqlite_store import SqliteStore


def test_sqlite_failures_become_store_errors(tmp_path: Path) -> None:
    not_a_database = tmp_path / "garbage.sqlite3"
    not_a_database.write_bytes(b"this is not an SQLite file" * 100)
    store = SqliteStore(not_a_database)
    with pytest.raises(errors.StoreError, match="SQLite") as caught:
        store.open()
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)


def test_a_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "db.sqlite3")
    with pytest.raises(errors.StoreError, match="not open"):
        store.last_seq()


def test_hnswlib_failures_become_vector_index_errors() -> None:
    index = HnswIndex(8, model="m")
    with pytest.raises(errors.VectorIndexError, match="dimension"):
        index.upsert(["a"], np.ones((1, 4), dtype=np.float32))


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.InvalidInput("bad", field="content"), 422),
        (errors.MemoryNotFound("id", "ns"), 404),
        (errors.Conflict("stale", memory_id="id"), 409),
        (errors.VersionMismatch("id", expected=2, current=3), 412),
        (errors.ConfigError("bad config"), 500),
        (errors.StoreError("disk full"), 503),
        (errors.VectorIndexError("broken"), 503),
        (errors.EmbedderError("no model"), 503),
        (errors.TwinmemError("other"), 500),
    ],
)
def test_every_engine_error_has_a_status(error: errors.TwinmemError, status: int) -> None:
    assert status_for(error) == status


def test_the_table_covers_every_error_class() -> None:
    classes = {cls for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, Exception)}
    mapped = {kind for kind, _ in STATUS_BY_ERROR}
    assert all(any(issubclass(cls, kind) for kind in mapped) for cls in classes)
    assert errors.TwinmemError in mapped
