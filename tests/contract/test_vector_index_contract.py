"""The VectorIndex contract (engine/ports.py), run against every VectorIndex adapter,
plus the persistence rules of the HNSW adapter (a torn or foreign save is never served)."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hnswlib
import numpy as np
import pytest

from engine.adapters.hnsw_index import HnswIndex
from engine.errors import VectorIndexError
from engine.ports import Matrix, VectorIndex

DIM = 32
MODEL = "model-a"

IndexFactory = Callable[..., VectorIndex]

INDEX_BACKENDS: dict[str, IndexFactory] = {
    "hnsw": lambda dim=DIM: HnswIndex(dim, model=MODEL),
}


@pytest.fixture(params=sorted(INDEX_BACKENDS))
def new_index(request: pytest.FixtureRequest) -> IndexFactory:
    return INDEX_BACKENDS[request.param]


@pytest.fixture
def index(new_index: IndexFactory) -> VectorIndex:
    return new_index()


def unit_rows(n: int, seed: int = 0, dim: int = DIM) -> Matrix:
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def names(n: int, prefix: str = "m") -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def test_adapter_satisfies_the_protocol(index: VectorIndex) -> None:
    assert isinstance(index, VectorIndex)
    assert index.dim == DIM
    assert index.applied_seq == 0


def test_search_returns_similarity_most_similar_first(index: VectorIndex) -> None:
    vectors = unit_rows(50)
    index.upsert(names(50), vectors)
    found = index.search(vectors[7], 5)
    assert found[0][0] == "m-7"
    assert found[0][1] == pytest.approx(1.0, abs=1e-5)
    sims = [sim for _, sim in found]
    assert sims == sorted(sims, reverse=True)
    exact = vectors @ vectors[7]
    for memory_id, sim in found:
        assert sim == pytest.approx(float(exact[int(memory_id.split("-")[1])]), abs=1e-5)


def test_similarity_of_an_opposite_vector_is_minus_one(index: VectorIndex) -> None:
    v = unit_rows(1)[0]
    index.upsert(["a"], v.reshape(1, -1))
    ((_, sim),) = index.search(-v, 1)
    assert sim == pytest.approx(-1.0, abs=1e-5)


def test_unnormalised_input_is_compared_by_cosine(index: VectorIndex) -> None:
    v = unit_rows(1)[0]
    index.upsert(["a"], (v * 7.5).reshape(1, -1))
    ((_, sim),) = index.search(v * 0.1, 1)
    assert sim == pytest.approx(1.0, abs=1e-5)


def test_upsert_of_a_present_id_replaces_its_vector(index: VectorIndex) -> None:
    old, new = unit_rows(2, seed=1)
    index.upsert(["a", "b"], np.vstack([old, unit_rows(1, seed=2)[0]]))
    index.upsert(["a"], new.reshape(1, -1))
    assert len(index) == 2
    assert index.search(new, 1)[0] == ("a", pytest.approx(1.0, abs=1e-5))
    assert "a" not in [mid for mid, sim in index.search(old, 2) if sim > 0.999]
    ((_, sim),) = index.similarities(new, ["a"])
    assert sim == pytest.approx(1.0, abs=1e-5)


def test_insert_absent_adds_only_the_ids_not_held_and_says_which(index: VectorIndex) -> None:
    held, other = unit_rows(2, seed=4)
    index.upsert(["a"], held.reshape(1, -1))
    fresh = unit_rows(2, seed=5)
    added = index.insert_absent(["b", "a", "c"], np.vstack([fresh[0], other, fresh[1]]))
    assert added == ["b", "c"]
    assert len(index) == 3
    ((_, kept),) = index.similarities(held, ["a"])
    assert kept == pytest.approx(1.0, abs=1e-5)  # "a" keeps its vector
    np.testing.assert_allclose(index.paired_similarities(["b", "c"], fresh), [1.0, 1.0], atol=1e-5)
    assert index.insert_absent(["a", "b"], np.vstack([other, other])) == []
    assert index.insert_absent([], np.zeros((0, DIM), np.float32)) == []


def test_paired_similarities_compare_each_id_with_its_own_row(index: VectorIndex) -> None:
    vectors = unit_rows(4, seed=3)
    index.upsert(names(4), vectors)
    asked = ["m-2", "absent", "m-0", "m-3"]
    given = np.stack([vectors[2], vectors[1], vectors[1] * 3.0, -vectors[3]])
    found = index.paired_similarities(asked, given)
    expected = [1.0, np.nan, float(vectors[0] @ vectors[1]), -1.0]
    np.testing.assert_allclose(found, expected, atol=1e-5)
    assert index.paired_similarities([], np.zeros((0, DIM), np.float32)).shape == (0,)


def test_remove_forgets_ids_and_ignores_absent_ones(index: VectorIndex) -> None:
    vectors = unit_rows(10)
    index.upsert(names(10), vectors)
    index.remove(["m-3", "never-there", "m-3"])
    assert len(index) == 9
    assert "m-3" not in index
    assert "m-3" not in [mid for mid, _ in index.search(vectors[3], 10)]
    assert index.similarities(vectors[3], ["m-3"]) == []
    index.remove([])
    # A removed id can come back.
    index.upsert(["m-3"], vectors[3:4])
    assert index.search(vectors[3], 1)[0][0] == "m-3"


def test_len_and_contains(index: VectorIndex) -> None:
    assert len(index) == 0
    assert "m-0" not in index
    index.upsert(names(3), unit_rows(3))
    assert len(index) == 3
    assert "m-2" in index
    assert 42 not in index


def test_empty_upsert_and_search_of_an_empty_index(index: VectorIndex) -> None:
    index.upsert([], np.zeros((0, DIM), dtype=np.float32))
    assert index.search(unit_rows(1)[0], 10) == []


def test_wrong_dimension_is_refused(index: VectorIndex) -> None:
    with pytest.raises(VectorIndexError):
        index.upsert(["a"], unit_rows(1, dim=DIM + 1))
    assert len(index) == 0


def test_index_grows_past_its_initial_capacity(index: VectorIndex) -> None:
    vectors = unit_rows(3000, seed=3)
    for start in range(0, 3000, 500):
        index.upsert(names(3000)[start : start + 500], vectors[start : start + 500])
    assert len(index) == 3000
    for probe in (0, 1500, 2999):
        assert index.search(vectors[probe], 1)[0][0] == f"m-{probe}"


def test_k_larger_than_ef_and_larger_than_size_returns_everything_live(index: VectorIndex) -> None:
    vectors = unit_rows(300, seed=4)
    index.upsert(names(300), vectors)
    index.remove(names(300)[:20])
    found = index.search(vectors[50], 1000)
    assert len(found) == 280
    assert {mid for mid, _ in found} == set(names(300)[20:])
    sims = [sim for _, sim in found]
    assert sims == sorted(sims, reverse=True)
    # k above ef but below size: still k results (the adapter raises ef for the query).
    assert len(index.search(vectors[50], 200)) == 200


def test_similarities_are_exact_and_skip_absent_ids(index: VectorIndex) -> None:
    vectors = unit_rows(20, seed=5)
    index.upsert(names(20), vectors)
    query = unit_rows(1, seed=6)[0]
    got = dict(index.similarities(query, ["m-4", "absent", "m-11"]))
    assert set(got) == {"m-4", "m-11"}
    assert got["m-4"] == pytest.approx(float(vectors[4] @ query), abs=1e-5)
    assert got["m-11"] == pytest.approx(float(vectors[11] @ query), abs=1e-5)
    assert index.similarities(query, []) == []


def test_concurrent_upserts_and_searches(index: VectorIndex) -> None:
    vectors = unit_rows(1200, seed=7)
    ids = names(1200)
    writers_done = threading.Event()

    def writer(part: int) -> None:
        for start in range(part * 300, part * 300 + 300, 10):
            index.upsert(ids[start : start + 10], vectors[start : start + 10])

    def reader(seed: int) -> int:
        rng = np.random.default_rng(seed)
        searches = 0
        while not writers_done.is_set():
            probe = int(rng.integers(0, 1200))
            index.search(vectors[probe], 10)
            index.similarities(vectors[probe], ids[probe : probe + 5])
            len(index)
            searches += 1
        return searches

    with ThreadPoolExecutor(max_workers=7) as pool:
        readers = [pool.submit(reader, seed) for seed in range(3)]
        writers = [pool.submit(writer, part) for part in range(4)]
        try:
            for future in writers:
                future.result()
        finally:
            writers_done.set()
        for future in readers:
            future.result()
    assert len(index) == 1200
    assert index.search(vectors[1199], 1)[0][0] == "m-1199"


def test_recall_at_10_against_exact_search(index: VectorIndex) -> None:
    # A quality property of the approximate search, not a timing.
    vectors = unit_rows(2000, seed=8, dim=DIM)
    index.upsert(names(2000), vectors)
    queries = unit_rows(100, seed=9, dim=DIM)
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    hits = 0
    for query, truth in zip(queries, exact, strict=True):
        found = {mid for mid, _ in index.search(query, 10)}
        hits += len(found & {f"m-{i}" for i in truth})
    assert hits / (100 * 10) >= 0.95


# --- persistence (HNSW adapter) -------------------------------------------------------


def _saved(tmp_path: Path, n: int = 200, seed: int = 10) -> tuple[HnswIndex, Matrix, Path]:
    index = HnswIndex(DIM, model=MODEL)
    vectors = unit_rows(n, seed=seed)
    index.upsert(names(n), vectors)
    index.remove(["m-0", "m-1"])
    index.applied_seq = 4242
    directory = tmp_path / f"index-{n}"
    index.save(directory)
    return index, vectors, directory


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    original, vectors, directory = _saved(tmp_path)
    loaded = HnswIndex.load(directory, dim=DIM, model=MODEL)
    assert loaded is not None
    assert loaded.applied_seq == 4242
    assert len(loaded) == len(original) == 198
    assert "m-0" not in loaded and "m-1" not in loaded and "m-2" in loaded
    for probe in (0, 5, 100):
        assert loaded.search(vectors[probe], 10) == original.search(vectors[probe], 10)


def test_a_loaded_index_keeps_accepting_vectors_past_its_capacity(tmp_path: Path) -> None:
    _, _, directory = _saved(tmp_path)
    loaded = HnswIndex.load(directory, dim=DIM, model=MODEL)
    assert loaded is not None
    more = unit_rows(1500, seed=11)
    loaded.upsert(names(1500, prefix="new"), more)
    assert len(loaded) == 198 + 1500
    assert loaded.search(more[1499], 1)[0][0] == "new-1499"


def test_save_of_an_empty_index_loads_back_empty(tmp_path: Path) -> None:
    HnswIndex(DIM, model=MODEL).save(tmp_path / "empty")
    loaded = HnswIndex.load(tmp_path / "empty", dim=DIM, model=MODEL)
    assert loaded is not None and len(loaded) == 0


def test_save_over_an_older_save_replaces_it(tmp_path: Path) -> None:
    index, vectors, directory = _saved(tmp_path)
    index.upsert(["late"], vectors[0:1])
    index.applied_seq = 5000
    index.save(directory)
    loaded = HnswIndex.load(directory, dim=DIM, model=MODEL)
    assert loaded is not None
    assert loaded.applied_seq == 5000
    assert "late" in loaded


def test_load_returns_none_for_an_absent_directory(tmp_path: Path) -> None:
    assert HnswIndex.load(tmp_path / "nothing-here", dim=DIM, model=MODEL) is None


def test_load_returns_none_for_another_model(tmp_path: Path) -> None:
    _, _, directory = _saved(tmp_path)
    assert HnswIndex.load(directory, dim=DIM, model="model-b") is None


def test_load_returns_none_for_another_dimension(tmp_path: Path) -> None:
    _, _, directory = _saved(tmp_path)
    assert HnswIndex.load(directory, dim=DIM * 2, model=MODEL) is None


def test_load_returns_none_for_a_truncated_graph(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, _, directory = _saved(tmp_path)
    graph = directory / "hnsw.bin"
    data = graph.read_bytes()
    graph.write_bytes(data[: len(data) // 2])
    assert HnswIndex.load(directory, dim=DIM, model=MODEL) is None
    assert f"holds {len(data) // 2} bytes, not {len(data)}: not loaded" in caplog.text  # a rebuild that says why


def test_load_returns_none_for_labels_of_another_save(tmp_path: Path) -> None:
    _, _, directory = _saved(tmp_path, n=200)
    _, _, other = _saved(tmp_path, n=300, seed=12)
    shutil.copy(other / "hnsw.labels.npy", directory / "hnsw.labels.npy")
    assert HnswIndex.load(directory, dim=DIM, model=MODEL) is None


def test_load_returns_none_when_a_file_is_missing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, _, directory = _saved(tmp_path)
    (directory / "hnsw.labels.npy").unlink()
    assert HnswIndex.load(directory, dim=DIM, model=MODEL) is None
    assert "lacks a file" in caplog.text and "hnsw.labels.npy" in caplog.text


def test_load_returns_none_for_garbage_meta(tmp_path: Path) -> None:
    _, _, directory = _saved(tmp_path)
    (directory / "hnsw.meta.json").write_text("{not json", encoding="utf-8")
    assert HnswIndex.load(directory, dim=DIM, model=MODEL) is None


def test_load_returns_none_for_a_graph_damaged_in_place(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Same size, bytes changed: hnswlib would load it and crash the process at the first query.
    _, _, directory = _saved(tmp_path)
    graph = directory / "hnsw.bin"
    data = bytearray(graph.read_bytes())
    data[len(data) // 3 : len(data) // 3 + 4096] = b"\xff" * 4096
    graph.write_bytes(bytes(data))
    assert HnswIndex.load(directory, dim=DIM, model=MODEL) is None
    assert "does not match its checksum" in caplog.text


def test_load_returns_none_for_shuffled_labels(tmp_path: Path) -> None:
    _, _, directory = _saved(tmp_path)
    path = directory / "hnsw.labels.npy"
    labels = np.load(path, allow_pickle=False)
    np.save(path, np.random.default_rng(1).permutation(labels), allow_pickle=False)
    assert HnswIndex.load(directory, dim=DIM, model=MODEL) is None


def test_hnswlib_alone_fails_when_deleted_elements_hide_the_live_ones() -> None:
    # The quirk the adapter absorbs: hnswlib raises although one live element exists.
    rng = np.random.default_rng(0)
    native = hnswlib.Index(space="cosine", dim=16)
    native.init_index(max_elements=1024, M=16, ef_construction=200)
    native.set_ef(10)
    failures = []
    for label in range(200):
        if label:
            native.mark_deleted(label - 1)
        native.add_items(rng.standard_normal((1, 16)).astype(np.float32), [label])
        try:
            native.knn_query(rng.standard_normal((1, 16)).astype(np.float32), k=1)
        except RuntimeError as exc:
            failures.append(str(exc))
    assert failures and "contiguous 2D array" in failures[0]


def test_search_never_fails_because_of_deleted_elements() -> None:
    index = HnswIndex(16, model=MODEL, ef_search=10)
    rng = np.random.default_rng(0)
    for _ in range(200):
        index.upsert(["only"], rng.standard_normal((1, 16)).astype(np.float32))
        assert [memory_id for memory_id, _ in index.search(rng.standard_normal(16).astype(np.float32), 1)] == ["only"]
    assert index.search_retries > 0  # the scenario did hit the quirk


def test_exact_fallback_ranks_like_a_brute_force_search() -> None:
    index = HnswIndex(DIM, model=MODEL, ef_search=10)
    vectors = unit_rows(300, seed=3)
    index.upsert(names(300), vectors)
    index.remove(names(300)[:250])
    query = unit_rows(1, seed=4)[0]
    with index._lock:
        exact = index._exact(query.reshape(1, -1)[0], 10)
    expected = np.argsort(-(vectors[250:] @ query))[:10] + 250
    assert [memory_id for memory_id, _ in exact] == [f"m-{i}" for i in expected]
    assert index.search(query, 10)[0][0] == exact[0][0]


def test_similarities_over_more_ids_than_one_chunk(index: VectorIndex) -> None:
    vectors = unit_rows(10_000, seed=5)
    index.upsert(names(10_000), vectors)
    found = dict(index.similarities(vectors[9_999], names(10_000)))
    assert len(found) == 10_000
    expected = vectors @ vectors[9_999]
    assert max(abs(found[f"m-{i}"] - float(expected[i])) for i in range(10_000)) < 1e-4


def test_search_many_answers_each_row_as_search_does(index: VectorIndex) -> None:
    vectors = unit_rows(3000, seed=5)
    index.upsert(names(3000), vectors)
    index.remove(names(3000)[::7])  # removed labels stay in the graph: they must not be answered
    queries = np.vstack([vectors[:40], unit_rows(10, seed=6)])
    for k in (1, 10, 200):
        assert index.search_many(queries, k) == [index.search(query, k) for query in queries]
    assert index.search_many(queries[:0], 10) == []
    small = INDEX_BACKENDS["hnsw"]()
    small.upsert(names(3), vectors[:3])
    # More neighbours asked than there are ids: every id, as ``search`` answers.
    assert small.search_many(vectors[:2], 10) == [small.search(vectors[0], 10), small.search(vectors[1], 10)]


def test_search_handles_answers_as_search_does_and_ids_of_names_them(index: VectorIndex) -> None:
    vectors = unit_rows(3000, seed=5)
    index.upsert(names(3000), vectors)
    index.remove(names(3000)[::7])  # removed labels stay in the graph: they must not be answered
    index.upsert(names(3000)[1:50:7], unit_rows(7, seed=7))  # replaced: new handles, the old dead
    for query in [*vectors[:20], *unit_rows(5, seed=6)]:
        for k in (1, 10, 200):
            handles, sims = index.search_handles(query, k)
            assert handles.dtype == np.int64 and sims.dtype == np.float64
            assert list(zip(index.ids_of(handles), sims.tolist(), strict=True)) == index.search(query, k)
    dead = index.handles(names(3000)[:1])  # removed above (every seventh, from the first)
    assert dead.tolist() == [-1]
    live = index.handles(names(3000)[1:3])
    assert index.ids_of(np.asarray([*live.tolist(), -1, 10**9], np.int64)) == [*names(3000)[1:3], None, None]
    # A handle names its id for good: after its vector is replaced, and after it is removed.
    before = index.handles(names(3000)[2:4])
    index.upsert(names(3000)[2:3], unit_rows(1, seed=8))
    index.remove(names(3000)[3:4])
    assert not index.live(before).any()
    assert index.ids_of(before) == names(3000)[2:4]
    empty = INDEX_BACKENDS["hnsw"]()
    handles, sims = empty.search_handles(vectors[0], 10)
    assert len(handles) == len(sims) == 0


def test_search_handles_answers_the_fallback_as_search_does() -> None:
    # Three ids whose vectors are replaced again and again: the deleted elements soon hide
    # the live ones from hnswlib, and the adapter's fallback answers (``search_retries``).
    index = HnswIndex(16, model=MODEL, ef_search=10)
    rng = np.random.default_rng(1)
    for _ in range(200):
        index.upsert(["a", "b", "c"], rng.standard_normal((3, 16)).astype(np.float32))
        query = rng.standard_normal(16).astype(np.float32)
        handles, sims = index.search_handles(query, 3)
        assert list(zip(index.ids_of(handles), sims.tolist(), strict=True)) == index.search(query, 3)
    assert index.search_retries > 0  # the scenario did hit the quirk


def test_search_handles_never_fails_because_of_deleted_elements() -> None:
    index = HnswIndex(16, model=MODEL, ef_search=10)
    rng = np.random.default_rng(0)
    for _ in range(200):
        index.upsert(["only"], rng.standard_normal((1, 16)).astype(np.float32))
        handles, _ = index.search_handles(rng.standard_normal(16).astype(np.float32), 1)
        assert index.ids_of(handles) == ["only"]
    assert index.search_retries > 0  # the scenario did hit the quirk


def test_search_among_answers_only_the_handles_given_most_similar_first(index: VectorIndex) -> None:
    vectors = unit_rows(3000, seed=8)
    index.upsert(names(3000), vectors)
    allowed = names(3000)[::12]  # 250 of them, one in twelve
    handles = index.handles([*allowed, "absent", allowed[0]])
    assert handles[-2] == -1
    query = unit_rows(1, seed=9)[0]
    found = index.search_among(query, 10, handles)
    assert len(found) == 10 and {memory_id for memory_id, _ in found} <= set(allowed)
    sims = [sim for _, sim in found]
    assert sims == sorted(sims, reverse=True)
    exact = vectors[::12] @ query
    assert sims[0] == pytest.approx(float(exact.max()), abs=1e-5)
    # as good as the plain search: the ten best of the allowed, found approximately
    best = {allowed[i] for i in np.argsort(-exact)[:10]}
    assert len(best & {memory_id for memory_id, _ in found}) >= 9


def test_a_handle_dies_with_its_vector_and_is_never_given_to_another_id(index: VectorIndex) -> None:
    vectors = unit_rows(6, seed=12)
    index.upsert(names(3), vectors[:3])
    first = index.handles(names(3))
    assert index.live(first).all() and len(set(first.tolist())) == 3
    index.upsert(["m-0"], vectors[3:4])  # replaced
    index.remove(["m-1"])
    index.upsert(["m-9"], vectors[4:5])
    assert index.live(first).tolist() == [False, False, True]
    now = index.handles(["m-0", "m-1", "m-2", "m-9"])
    assert now[1] == -1 and now[2] == first[2]
    assert not set(now.tolist()) & {int(first[0]), int(first[1])}  # dead handles stay unused
    assert index.live(np.asarray([-1, 10**6], dtype=np.int64)).tolist() == [False, False]
    # a dead handle finds nothing, its id's new one does
    assert index.search_among(vectors[3], 5, first[:1]) == []
    assert [m for m, _ in index.search_among(vectors[3], 5, now[:1])] == ["m-0"]


def test_each_index_has_its_own_handle_space(new_index: IndexFactory, tmp_path: Path) -> None:
    one, two = new_index(), new_index()
    assert one.handle_space != two.handle_space
    if not isinstance(one, HnswIndex):
        return
    one.upsert(names(3), unit_rows(3))
    one.save(tmp_path)
    loaded = HnswIndex.load(tmp_path, dim=DIM, model=MODEL)
    assert loaded is not None and loaded.handle_space != one.handle_space
    assert loaded.live(loaded.handles(names(3))).all()


def test_search_among_never_answers_fewer_than_the_live_handles_asked() -> None:
    index = HnswIndex(DIM, model=MODEL, ef_search=10)
    vectors = unit_rows(500, seed=10)
    index.upsert(names(500), vectors)
    handles = index.handles(names(20))
    index.remove(names(500)[5:])  # the five kept ones sit among 495 deleted elements
    found = index.search_among(unit_rows(1, seed=11)[0], 10, handles)
    assert sorted(memory_id for memory_id, _ in found) == names(5)
    assert index.search_among(vectors[0], 10, index.handles(["absent"])) == []
    assert index.search_among(vectors[0], 0, handles) == []


def test_search_among_never_fails_because_of_deleted_elements() -> None:
    index = HnswIndex(16, model=MODEL, ef_search=10)
    rng = np.random.default_rng(0)
    for _ in range(200):
        index.upsert(["only"], rng.standard_normal((1, 16)).astype(np.float32))
        found = index.search_among(rng.standard_normal(16).astype(np.float32), 1, index.handles(["only"]))
        assert [memory_id for memory_id, _ in found] == ["only"]
    assert index.exact_searches > 0  # hnswlib raised, and the exact scan of the ids answered
