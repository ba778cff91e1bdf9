"""Rough cosines of float16 rows, from torch's half-precision matrix product.

The fast network keeps its vectors in float16. numpy widens them to float32 one value
at a time (it has no F16C path here), about 1 µs a row of 384, which made the exact
scan cost about 2.2 µs a passing row. torch gathers the rows and multiplies them in
half precision with float32 sums, 4–8× faster (measured on 300–20,000 rows of 384). The
product is asked for as a one-row matrix product (``linear``), not a matrix-vector one:
torch's half-precision matrix-vector kernel took 1.4 ms for 8,000 contiguous rows of 512
on one thread, the matrix product 0.53 ms (with the gather, 1.3 ms against 2.2).

What that loses is bounded (``HalfCosines.error``), for rows and a vector of unit
length, as the ``Embedder`` port makes them: the vector is rounded to float16 (each
part within 2^-11 of itself, so the product moves by at most 2^-11), the float32 sum
adds next to nothing, and the result is rounded to float16 (within 2^-11 of a value
under 1). ``error`` is twice their sum. The scan (``FastNetwork.nearest``) computes
the cosines it keeps exactly, so only which rows are kept reads these.

torch would run the product on its thread pool, which wakes slowly after a pause: 4,096
rows of 512 took 1.0 ms back to back on two threads, 2.7 ms after 50 ms idle (12.8 at
worst) and 11.4 after 0.3 s, against 1.5, 2.8 (3.7 at worst) and 4.2 on one thread. A
recall's scan always comes after a pause of that kind (the search, the masks), and a
tail of 10 ms is worth more than the second core's help, so the product runs on the
calling thread alone: torch's thread count is set to 1 around it and put back. The
setting is the calling thread's for torch's own kernels, but MKL's is the process's, so
a model's inference on another thread in those few milliseconds runs on one MKL
thread: slower, never wrong (USE, the default model, is numpy and not touched).

Importing torch takes about 2 s and 190 MB. The default embedder imports it anyway;
for the others (and the engine's own tests and benchmarks) it is imported on a
background thread the first time ``ready`` is asked, and the scan runs without rough
cosines until it is there, or for good where torch is not installed.
"""

from __future__ import annotations

import threading
from types import ModuleType

import numpy as np
import numpy.typing as npt

# Which rows a scan keeps is decided on these; the answer's cosines are exact.
ERROR = 2 * (2.0**-11 + 2.0**-11)
# The product runs on the calling thread alone (see the module's docstring). torch's
# thread count is set and put back under this lock, so two scans cannot interleave their
# set and restore and leave the process on one thread.
_ONE_THREAD = threading.Lock()


class HalfCosines:
    """``RoughCosines`` (``engine.ports``) on torch."""

    error = ERROR

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._torch: ModuleType | None = None
        self._loader: threading.Thread | None = None

    def ready(self) -> bool:
        """Whether torch is imported; the first call starts importing it (not waiting)."""
        if self._torch is not None:
            return True
        with self._lock:
            if self._loader is None:
                self._loader = threading.Thread(target=self.load, name="torch-import", daemon=True)
                self._loader.start()
        return False

    def load(self) -> bool:
        """Import torch now (waiting for it); False where it is not installed."""
        try:
            import torch
        except ImportError:
            return False
        self._torch = torch
        return True

    def __call__(
        self, vectors: npt.NDArray[np.float16], rows: npt.NDArray[np.int64], vector: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        import torch

        with _ONE_THREAD:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                matrix = torch.from_numpy(vectors)
                taken = matrix.index_select(0, torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int64)))
                query = torch.from_numpy(np.asarray(vector, dtype=np.float16)).reshape(1, -1)
                found = torch.nn.functional.linear(query, taken).reshape(-1)  # a matrix product: see above
            finally:
                torch.set_num_threads(threads)
        rough: npt.NDArray[np.float32] = found.numpy().astype(np.float32)
        return rough


half_cosines = HalfCosines()
