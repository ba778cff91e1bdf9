"""The derived files' helpers: checksums, and an array read from an .npz in place."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from engine.files import CHECKSUM, checksum_matches, checksum_of, read_npz_array_into


def _saved(path: Path, **arrays: np.ndarray) -> Path:
    with open(path, "wb") as fh:
        np.savez(fh, allow_pickle=False, **arrays)
    return path


def test_an_array_is_read_into_a_slice_of_a_larger_buffer(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((1000, 24)).astype(np.float16)
    path = _saved(tmp_path / "a.npz", ids=np.asarray(["x", "yy"]), vectors=vectors, other=np.arange(5))
    buffer = np.full((1300, 24), 7, np.float16)
    read_npz_array_into(path, "vectors", buffer[:1000])
    np.testing.assert_array_equal(buffer[:1000], vectors)
    assert (buffer[1000:] == 7).all()
    small = np.zeros(5, np.int64)
    read_npz_array_into(path, "other", small)
    assert small.tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (np.zeros((999, 24), np.float16), "not float16"),
        (np.zeros((1000, 24), np.float32), "not float32"),
    ],
)
def test_another_shape_or_type_is_refused(tmp_path: Path, out: np.ndarray, message: str) -> None:
    path = _saved(tmp_path / "a.npz", vectors=np.ones((1000, 24), np.float16))
    with pytest.raises(ValueError, match=message):
        read_npz_array_into(path, "vectors", out)


def test_a_missing_compressed_or_torn_member_is_refused(tmp_path: Path) -> None:
    vectors = np.ones((100, 8), np.float16)
    path = _saved(tmp_path / "a.npz", vectors=vectors)
    with pytest.raises(ValueError, match="holds no array 'others'"):
        read_npz_array_into(path, "others", np.zeros((100, 8), np.float16))
    squeezed = tmp_path / "c.npz"
    np.savez_compressed(squeezed, vectors=vectors)
    with pytest.raises(ValueError, match="compressed"):
        read_npz_array_into(squeezed, "vectors", np.zeros((100, 8), np.float16))
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="not a whole zip file"):
        read_npz_array_into(path, "vectors", np.zeros((100, 8), np.float16))


def test_checksums_find_a_changed_byte_and_files_saved_with_sha256_still_match(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    data = bytes(range(256)) * 50_000  # more than one read block
    path.write_bytes(data)
    now = {CHECKSUM: checksum_of(path)}
    before = {"sha256": hashlib.sha256(data).hexdigest()}
    per_file = {CHECKSUM: {"f.bin": checksum_of(path)}}
    assert checksum_matches(path, now) and checksum_matches(path, before)
    assert checksum_matches(path, per_file, "f.bin")
    assert not checksum_matches(path, {"md5": "whatever"})
    changed = bytearray(data)
    changed[len(data) // 2] ^= 1
    path.write_bytes(bytes(changed))
    assert not checksum_matches(path, now) and not checksum_matches(path, before)
    assert not checksum_matches(path, per_file, "f.bin")
