"""BM25 for the lexical channel, from ``bm25s`` (sparse-matrix BM25, scipy/numpy only).

bm25s's quirks stay in here:

* it indexes a fixed corpus: there is no add or remove, so a changed namespace is a
  new scorer (``engine.fast_network`` builds one when first needed after a change);
* its vocabulary must be dense ids ``0..V-1`` with string names: the engine's term
  codes (global, sparse) are renumbered per corpus, and a query term the corpus
  lacks is dropped before scoring (bm25s would look it up and fail);
* it shows progress bars unless told not to.

Scoring is Lucene's BM25 variant (bm25s's default: k1 1.5, b 0.75, idf
``log(1 + (N - df + 0.5) / (df + 0.5))``), so no score is negative.
"""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np
import numpy.typing as npt


class Bm25Scorer:
    """``LexicalScorer`` over one corpus of term-code lists (see ``engine.ports``)."""

    def __init__(self, documents: Sequence[Sequence[int]]) -> None:
        local: dict[int, int] = {}
        ids = [[local.setdefault(code, len(local)) for code in doc] for doc in documents]
        self._size = len(documents)
        self._vocab = {str(code): n for code, n in local.items()}
        self._model: bm25s.BM25 | None = None
        if local:
            model = bm25s.BM25()
            model.index(bm25s.tokenization.Tokenized(ids=ids, vocab=self._vocab), show_progress=False)
            self._model = model

    def scores(self, query_terms: Sequence[int]) -> npt.NDArray[np.float32]:
        known = [str(code) for code in dict.fromkeys(query_terms) if str(code) in self._vocab]
        if self._model is None or not known:
            return np.zeros(self._size, dtype=np.float32)
        return np.asarray(self._model.get_scores(known), dtype=np.float32)


def build_scorer(documents: Sequence[Sequence[int]]) -> Bm25Scorer:
    return Bm25Scorer(documents)
