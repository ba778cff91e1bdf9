"""Helpers for the derived files kept beside the store (the HNSW index, the fast network)."""

from __future__ import annotations

import hashlib
import struct
import threading
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from engine.errors import StoreError

BLOCK = 8 << 20
# A data directory twinmem makes is its owner's alone (as PostgreSQL's is): with tokens, the
# grants keep agents apart, and other local users must not read the files behind them. The
# parents it makes on the way and a directory that already exists keep their modes.
DATA_DIR_MODE = 0o700

# numpy reads an .npy header with ``ast.literal_eval``, and CPython 3.11 counts the AST
# builder's recursion per interpreter, not per thread: two threads reading headers at once
# (the fast network and the vector index, loaded side by side at start-up) can fail with
# "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905; seen once in the
# test suite, failing a service's start). Every read of an array header here holds this lock.
ARRAY_HEADERS = threading.Lock()


def make_data_dir(path: Path) -> None:
    """Make the data directory ``path`` (``DATA_DIR_MODE``) where it is not there; where it
    cannot be made (under /proc, a read-only mount, no permission), a ``StoreError`` that
    names it, which the command line says in one line (a traceback before)."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=DATA_DIR_MODE)
    except OSError as exc:
        raise StoreError(f"could not make the data directory {path}: {exc.strerror or exc}") from exc


# What a meta file names a checksum by; "sha256" is read in the files saved before.
CHECKSUM = "xxh3_128"
_ZIP_LOCAL_HEADER = struct.Struct("<4s22xHH")


def _digest_of(path: Path, digest: Any) -> str:
    block = bytearray(BLOCK)
    view = memoryview(block)
    with open(path, "rb", buffering=0) as fh:
        while read := fh.readinto(block):
            digest.update(view[:read])
    hexdigest: str = digest.hexdigest()
    return hexdigest


def checksum_of(path: Path) -> str:
    """The XXH3-128 of a file's bytes, in hex. It finds a torn or damaged file; it is no
    defence against someone who can also write the meta file beside it, and neither was
    SHA-256, which hashed about 1 GB/s here against XXH3's 6: at a million memories the
    index and the fast network are 3 GB, hashed at every start."""
    return _digest_of(path, xxhash.xxh3_128())


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex (the checksum of files saved before XXH3)."""
    return _digest_of(path, hashlib.sha256())


_CHECKSUMS: tuple[tuple[str, Callable[[Path], str]], ...] = ((CHECKSUM, checksum_of), ("sha256", sha256_of))


def checksum_matches(path: Path, recorded: Mapping[str, Any], name: str | None = None) -> bool:
    """Whether ``path`` has the checksum a meta file recorded for it (``recorded[algorithm]``,
    or ``recorded[algorithm][name]`` where the meta holds one per file)."""
    for algorithm, digest_of in _CHECKSUMS:
        if algorithm in recorded:
            expected = recorded[algorithm] if name is None else recorded[algorithm][name]
            return digest_of(path) == str(expected)
    return False


def read_npz_array_into(path: Path, name: str, out: npt.NDArray[Any]) -> None:
    """Read the array ``name`` of an uncompressed ``.npz`` (``np.savez``) straight into
    ``out``, whose shape and dtype it must have: no array of its size is allocated and
    copied, which for the fast network's vectors at a million memories was 1.5 s of its
    start. The zip's CRC is not checked: the caller checks the whole file's checksum.
    Raises ``ValueError`` for a member that is missing, compressed or of another shape."""
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo(name + ".npy")
    except KeyError:
        raise ValueError(f"{path.name} holds no array {name!r}") from None
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path.name} is not a whole zip file: {exc}") from None
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"{name!r} is compressed in {path.name}")
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        signature, name_bytes, extra_bytes = _ZIP_LOCAL_HEADER.unpack(fh.read(_ZIP_LOCAL_HEADER.size))
        if signature != b"PK\x03\x04":
            raise ValueError(f"{name!r} has no zip header in {path.name}")
        fh.seek(info.header_offset + _ZIP_LOCAL_HEADER.size + name_bytes + extra_bytes)
        start = fh.tell()
        with ARRAY_HEADERS:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                raise ValueError(f"{name!r} is in .npy format {version}")
        if shape != out.shape or dtype != out.dtype or fortran:
            raise ValueError(f"{name!r} is {dtype}{shape}, not {out.dtype}{out.shape}")
        if fh.tell() - start + out.nbytes != info.file_size:
            raise ValueError(f"{name!r} is not {out.nbytes} bytes of data")
        view = memoryview(out.reshape(-1).view(np.uint8).data)
        done = 0
        while done < len(view):
            read = fh.readinto(view[done : done + BLOCK])
            if not read:
                raise ValueError(f"{path.name} ends inside {name!r}")
            done += read
