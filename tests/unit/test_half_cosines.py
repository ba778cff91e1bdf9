"""The exact scan's rough first pass (``engine.adapters.half_cosines``): its error stays
within the bound it states, and a scan that uses it returns what the exact scan does."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from engine.adapters.bm25_lexical import build_scorer
from engine.adapters.half_cosines import half_cosines
from engine.fast_network import SCAN_CHUNK, FastNetwork
from engine.records import Memory, MemoryFilter, Scope, Source, Status, new_memory_id

DIM = 384
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _unit(rows: np.ndarray) -> np.ndarray:
    unit: np.ndarray = (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)
    return unit


def _exact(vectors: np.ndarray, rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    exact: np.ndarray = vectors[rows].astype(np.float32) @ vector
    return exact


@pytest.mark.parametrize(("dim", "count"), [(DIM, 6000), (512, 1000), (768, 3000)])
def test_the_rough_cosines_stay_within_their_stated_error(dim: int, count: int) -> None:
    rng = np.random.default_rng(7)
    stored = _unit(rng.standard_normal((count, dim)))
    vectors = stored.astype(np.float16)
    rows = np.arange(len(vectors))
    worst = 0.0
    for n in range(60):
        # Queries at every distance: the stored vector itself, a near copy, a far one, its opposite.
        noise = [0.0, 0.01, 0.1, 1.0, 10.0][n % 5]
        sign = -1.0 if n % 7 == 0 else 1.0
        vector = _unit(sign * stored[n] + noise * rng.standard_normal(dim))
        rough = half_cosines(vectors, rows, vector)
        assert rough.dtype == np.float32 and rough.shape == (len(rows),)
        worst = max(worst, float(np.abs(rough - _exact(vectors, rows, vector)).max()))
    assert worst <= half_cosines.error
    assert worst > 0.0  # it is rough: the bound is what the scan leans on


def _network(vectors: np.ndarray, *, rough: bool) -> FastNetwork:
    assert half_cosines.load()
    net = FastNetwork(build_scorer, dim=DIM, rough=half_cosines if rough else None)
    memories = [
        Memory(
            memory_id=new_memory_id(),
            namespace="ns",
            content=f"note {n}",
            category="fact",
            base_score=0.5,
            importance=0.5,
            source=Source.USER_INPUT,
            created_at=T0,
            updated_at=T0,
            last_accessed_at=T0,
            access_count=0,
            status=Status.ACTIVE,
        )
        for n in range(len(vectors))
    ]
    net.apply(memories, (), [])
    net.put_vectors([m.memory_id for m in memories], vectors)
    return net


def _decoys(rng: np.random.Generator, vector: np.ndarray, others: np.ndarray, count: int) -> np.ndarray:
    """``count`` rows of cosine about 0.03 to ``vector``: a tenth of them (the true best)
    leaning away from how ``vector`` rounds to float16, so their rough cosines come out
    low, the rest a little further off but leaning into it, so theirs come out high.
    A scan that kept only the best rough cosines would return the wrong rows. Their
    cosine to each of ``others`` (orthonormal, with ``vector``) is 0."""
    rounding = vector.astype(np.float16).astype(np.float32) - vector
    lean = _unit(_orthogonal(rounding, others))
    best = count // 10
    cosines = np.where(np.arange(count) < best, 0.0301, 0.0300) + 1e-6 * rng.permutation(count)
    sides = np.where(np.arange(count) < best, -1.0, 1.0)[:, None]
    return _unit(cosines[:, None] * vector + np.sqrt(1 - cosines**2)[:, None] * sides * lean)


def _orthogonal(rows: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """``rows`` less their parts along the orthonormal ``basis``."""
    left: np.ndarray = rows - (rows @ basis.T) @ basis
    return left


def test_a_scan_with_rough_cosines_returns_the_exact_scans_answer() -> None:
    rng = np.random.default_rng(11)
    # Per query, decoys the rough cosines rank wrongly, amid rows of cosine 0 to every
    # query, spread over several chunks.
    queries = np.linalg.qr(rng.standard_normal((DIM, 4)))[0].T.astype(np.float32)
    vectors = np.vstack(
        [_unit(_orthogonal(rng.standard_normal((2 * SCAN_CHUNK, DIM)), queries))]
        + [_decoys(rng, q, queries, 2000) for q in queries]
    )
    vectors = vectors[rng.permutation(len(vectors))]
    exact, rough = _network(vectors, rough=False), _network(vectors, rough=True)
    assert rough.scans_rough and not exact.scans_rough
    scope, everything = Scope.whole(["ns"]), MemoryFilter()
    for vector in queries:
        for k in (1, 10, 100, 150):
            want_rows, want = exact.nearest(vector, scope, everything, T0, k)
            got_rows, got = rough.nearest(vector, scope, everything, T0, k)
            assert len(got_rows) == len(want_rows) == k
            # The same cosines (BLAS may round the last bit otherwise for another set of
            # rows), each row's exact one.
            np.testing.assert_allclose(np.sort(got), np.sort(want), rtol=0, atol=1e-6)
            np.testing.assert_allclose(got, rough.cosines(vector, got_rows), rtol=0, atol=1e-6)


def test_widening_gives_numpys_float32_values_to_the_bit() -> None:
    """torch's conversion of float16 rows to float32 (``widen``) is numpy's ``astype``
    exactly, for every float16 there is (subnormals, both zeros, the largest) as for
    embeddings; and the network's cosines and typicality read the same with it or without."""
    assert half_cosines.load()
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = every[np.isfinite(every)]
    finite = np.concatenate([finite, np.zeros((-len(finite)) % 64, np.float16)]).reshape(-1, 64)
    rows = np.random.default_rng(3).permutation(len(finite))[:500]
    wide = half_cosines.widen(finite, rows)
    assert wide.dtype == np.float32
    np.testing.assert_array_equal(wide.view(np.uint32), finite[rows].astype(np.float32).view(np.uint32))

    rng = np.random.default_rng(4)
    vectors = _unit(rng.standard_normal((300, DIM)))
    exact, rough = _network(vectors, rough=False), _network(vectors, rough=True)
    assert rough.scans_rough
    taken = rng.permutation(300)[:120].astype(np.int64)
    query = _unit(rng.standard_normal(DIM))
    np.testing.assert_array_equal(rough.cosines(query, taken), exact.cosines(query, taken))
    np.testing.assert_array_equal(rough.typicality(taken), exact.typicality(taken))


def test_the_scans_margin_follows_the_longest_vector_held_and_is_saved(tmp_path: Path) -> None:
    """The rough error is stated for unit vectors; an imported vector may be longer, and
    the margin widens with the longest one the network ever held, also after a reload."""
    rng = np.random.default_rng(5)
    vectors = _unit(rng.standard_normal((50, DIM)))
    vectors[3] *= 8.0
    net = _network(vectors, rough=True)
    assert net._widest == pytest.approx(8.0, rel=1e-6)
    net.save(tmp_path)
    loaded = FastNetwork.load(tmp_path, build_scorer, model="", dim=DIM, rough=half_cosines)
    assert loaded is not None and loaded._widest == pytest.approx(8.0, rel=1e-6)


def _in_a_fresh_interpreter(code: str) -> list[str]:
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def _after_start(*, import_torch_first: bool) -> tuple[int, bool]:
    """As a service starts the scan's torch, in a fresh interpreter: ``ready`` imports it
    on a background thread; then the thread count a request thread's first torch operation
    takes, and whether the product was given one thread."""
    threads, alone = _in_a_fresh_interpreter(
        ("import torch\n" if import_torch_first else "")
        + "import threading\n"
        + "from engine.adapters.half_cosines import half_cosines\n"
        + "half_cosines.ready()\n"
        + "half_cosines._loader.join()\n"
        + "import torch\n"
        + "seen = []\n"
        + "def request():\n"
        + "    torch.ones(4) @ torch.ones(4)\n"
        + "    seen.append(torch.get_num_threads())\n"
        + "worker = threading.Thread(target=request)\n"
        + "worker.start(); worker.join()\n"
        + "print(seen[0], half_cosines.one_thread)\n"
    )
    return int(threads), alone == "True"


def test_where_torch_is_the_products_alone_it_gets_one_thread() -> None:
    assert _after_start(import_torch_first=False) == (1, True)


def test_where_a_model_imported_torch_first_its_thread_count_is_left_as_it_is() -> None:
    (default,) = _in_a_fresh_interpreter("import torch\nprint(torch.get_num_threads())\n")
    assert _after_start(import_torch_first=True) == (int(default), False)
