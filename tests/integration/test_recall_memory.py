"""A recall over a huge namespace is bounded in memory. The exact scan walks the filtered
set a chunk at a time and keeps only the best candidates, so what it allocates does not
grow with the namespace (it used to hold a float32 copy of every filtered vector: about
1.1 KB per memory here, 44 MiB at 40,000); the filtered HNSW search holds a mask and the
ids of what passes, a few bytes a memory. A real SQLite file, a real HNSW index; the peak
is measured with ``tracemalloc``, which numpy reports to."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engine import recall
from engine.fast_network import SCAN_CHUNK
from engine.records import Scope
from engine.service import MemoryService
from tests.huge_namespace import FAR, NAMESPACE, QUERY, open_filled, recall_peak

pytestmark = pytest.mark.slow

SMALL, LARGE = 4_000, 28_000
# Allowed growth of the peak per memory added to the namespace. The unbounded scan
# allocated about 1,160 bytes for each (half of them filtered in, 384 dimensions).
MAX_BYTES_PER_MEMORY = 64


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryService]:
    service = open_filled(tmp_path_factory.mktemp("large"), LARGE, widest=64)
    yield service
    service.close()


@pytest.mark.parametrize("path", ["scan", "filtered search"])
def test_a_recall_allocates_no_more_over_a_namespace_seven_times_larger(
    large: MemoryService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    if path == "scan":
        monkeypatch.setattr(recall, "FILTERED_US", math.inf)  # the filtered search priced out
    small = open_filled(tmp_path / "small", SMALL, widest=64)
    try:
        small_peak, small_exact = recall_peak(small)
    finally:
        small.close()
    large_peak, large_exact = recall_peak(large)
    assert small_exact  # 2,000 pass: scanned at once
    assert large_exact == (path == "scan")  # 14,000 pass: scanned, or searched among
    growth = (large_peak - small_peak) / (LARGE - SMALL)
    assert growth < MAX_BYTES_PER_MEMORY, f"{small_peak=} {large_peak=}: {growth:.0f} bytes per memory"


def test_the_chunked_scan_finds_the_exact_best_across_chunks(large: MemoryService) -> None:
    assert LARGE // 2 > 3 * SCAN_CHUNK  # the filtered set spans several chunks
    net, now = large.keeper.network, large._clock()
    vector = large.embedder.embed_query(QUERY)
    sight = Scope.whole([NAMESPACE])
    with net.reading():
        rows, cosines = net.nearest(vector, sight, FAR, now, 100)
        every = net.rows_in([NAMESPACE])
        passing = every[net.passes(sight, FAR, now, every)]
        expected = net.cosines(vector, passing)
    best = np.argsort(-expected)[:100]
    assert sorted(rows.tolist()) == sorted(passing[best].tolist())
    assert np.allclose(np.sort(cosines), np.sort(expected[best]))
    assert len(passing) == LARGE // 2
