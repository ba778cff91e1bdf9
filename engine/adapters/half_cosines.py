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

torch runs the product on its thread pool, which sleeps between scans and wakes slowly,
most of all when the other core is busy: after 50 ms idle, a scan of 1,000-30,000 rows
of 512 took 13-15 ms at the median on two threads, 4-15 on one, growing with the rows,
and at p95 up to 22 ms on two threads in one pair of runs and 50 in another, against at
most 17 on one (benchmarks/plan_costs.py). So where torch is the
product's alone (the default model, USE, is numpy; so are e5 and the test embedders),
``load`` gives torch one thread for the whole process. Where a model already runs on
torch (MiniLM), its inference wants both cores, and the thread count is left as it is.
Which of the two is decided by whether torch was imported before the first ``load``
(``open_service`` loads the model first): a torch model loaded later in the same process
runs on one thread.

The count is not set around each product instead. torch keeps it both process-wide and
per thread: each thread takes the process's count when it first runs a torch operation
and keeps it. A product on one thread, set and put back, left any thread that started
its first operation meanwhile on one thread for good (measured: a matrix product of
2,048 stayed at 113 ms against 60). An earlier attempt at the set-and-put-back also
ended one full test run with a segmentation fault at exit.

Importing torch takes about 2 s and 190 MB. A model that runs on torch imports it anyway;
for the others (and the engine's own benchmarks) it is imported on a
background thread the first time ``ready`` is asked, and the scan runs without rough
cosines until it is there, or for good where torch is not installed.
"""

from __future__ import annotations

import logging
import sys
import threading
from types import ModuleType

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

# Which rows a scan keeps is decided on these; the answer's cosines are exact.
ERROR = 2 * (2.0**-11 + 2.0**-11)


class HalfCosines:
    """``RoughCosines`` (``engine.ports``) on torch."""

    error = ERROR

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._torch: ModuleType | None = None
        self._loader: threading.Thread | None = None
        self._alone: bool | None = None  # whether nothing had imported torch before ``load``
        self.one_thread = False  # whether torch was given one thread for the product (``load``)

    def ready(self) -> bool:
        """Whether torch is imported; the first call starts importing it (not waiting)."""
        if self._torch is not None:
            return True
        with self._lock:
            if self._loader is None:
                self._loader = threading.Thread(target=self.load, name="torch-import", daemon=True)
                self._loader.start()
        return False

    def settle(self, timeout: float | None = None) -> None:
        """Wait for the background import ``ready`` began, if it still runs. A process
        that ends while the thread is inside torch's import can abort in its native
        code or print a half traceback ("Exception in thread"): ``twinmem serve``
        stopped at once after its start did, 1 run in about 20."""
        loader = self._loader
        if loader is not None:
            loader.join(timeout)

    def load(self) -> bool:
        """Import torch now (waiting for it); False where it is not installed. Where
        nothing in the process had imported torch before (no model runs on it), the
        product is torch's only work and it is given one thread (see above)."""
        with self._lock:
            # Decided once, by the first caller, before any caller imports: a second one
            # arriving while the first imports would see torch half imported.
            if self._alone is None:
                self._alone = "torch" not in sys.modules
        try:
            import torch
        except ImportError:
            return False
        with self._lock:
            if self._torch is None:
                if self._alone:
                    torch.set_num_threads(1)
                    log.info("torch runs the exact scan's rough cosines alone here: given one thread")
                self.one_thread = bool(self._alone)
                self._torch = torch
        return True

    def __call__(
        self, vectors: npt.NDArray[np.float16], rows: npt.NDArray[np.int64], vector: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        import torch

        matrix = torch.from_numpy(vectors)
        taken = matrix.index_select(0, torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int64)))
        query = torch.from_numpy(np.asarray(vector, dtype=np.float16)).reshape(1, -1)
        found = torch.nn.functional.linear(query, taken).reshape(-1)  # a matrix product: see above
        rough: npt.NDArray[np.float32] = found.numpy().astype(np.float32)
        return rough

    def widen(self, vectors: npt.NDArray[np.float16], rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """``vectors[rows]`` widened to float32 by torch's vectorised conversion: the same
        values as numpy's ``astype``, which widens one value at a time (about 0.25 ms for
        250 rows of 512 against 0.035 here)."""
        import torch

        taken = torch.from_numpy(vectors).index_select(0, torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int64)))
        wide: npt.NDArray[np.float32] = taken.float().numpy()
        return wide


half_cosines = HalfCosines()
