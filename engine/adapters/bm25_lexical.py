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

from collections.abc import Mapping, Sequence
from typing import Any

import bm25s
import numpy as np
import numpy.typing as npt
from bm25s.scoring import _score_idf_lucene

# Postings summed on their own (sorted, then added) while they number under a
# SPARSE_SHARE-th of the corpus; above that, a dense array over the corpus is cheaper
# (measured: even at about 1/64 of 100,000 and of 1,000,000 documents).
SPARSE_SHARE = 64


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

    def matches(self, query_terms: Sequence[int]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The documents that hold a query term, ascending, and their scores: what bm25s's
        ``get_scores`` gives, without the zeros. bm25s adds every posting one at a time
        (``np.add.at``); a term's column names each document once, so here a term's
        weights are added as one vectorised step, term after term, in float32: the same
        additions in the same order, so every score is bit-for-bit bm25s's. Where the
        postings are few against the corpus they are summed on their own
        (``SPARSE_SHARE``), so the cost follows the postings, not the corpus size."""
        known = [self._vocab[str(code)] for code in dict.fromkeys(query_terms) if str(code) in self._vocab]
        if self._model is None or not known:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        matrix = self._model.scores
        indptr, data, indices = matrix["indptr"], matrix["data"], matrix["indices"]
        spans = [(int(indptr[term]), int(indptr[term + 1])) for term in known]
        if sum(end - start for start, end in spans) * SPARSE_SHARE > self._size:
            dense = np.zeros(self._size, dtype=np.float32)
            for start, end in spans:
                dense[indices[start:end]] += data[start:end]
            docs = np.flatnonzero(dense > 0)
            return docs.astype(np.int64, copy=False), dense[docs]
        docs, at = np.unique(np.concatenate([indices[start:end] for start, end in spans]), return_inverse=True)
        scores = np.zeros(len(docs), dtype=np.float32)
        offset = 0
        for start, end in spans:
            scores[at[offset : offset + end - start]] += data[start:end]
            offset += end - start
        held = scores > 0
        return docs[held].astype(np.int64, copy=False), scores[held]

    def ceiling(self, query_terms: Sequence[int]) -> float:
        """The sum of the query terms' idf. In Lucene's BM25 a term adds
        ``idf · tf / (tf + k1 · (1 - b + b · length / average))``, which stays below its
        idf and tends to it as the term's frequency grows. Document frequencies are the
        lengths of the terms' columns in bm25s's matrix, so a restored scorer agrees."""
        if self._model is None:
            return 0.0
        indptr = self._model.scores["indptr"]
        known = [self._vocab[str(code)] for code in dict.fromkeys(query_terms) if str(code) in self._vocab]
        frequencies = [int(indptr[term + 1]) - int(indptr[term]) for term in known if term + 1 < len(indptr)]
        return float(sum(_score_idf_lucene(df, self._size) for df in frequencies if df))

    def state(self) -> dict[str, npt.NDArray[Any]]:
        """The corpus size, the term codes in local-id order and bm25s's score matrix
        (compressed sparse columns: one column of precomputed weights per term)."""
        codes = sorted(self._vocab, key=self._vocab.__getitem__)
        state = {
            "size": np.asarray([self._size], dtype=np.int64),
            # bm25s adds the empty token to the vocabulary it is given: code -1 here.
            "codes": np.asarray([int(code) if code else -1 for code in codes], dtype=np.int64),
        }
        if self._model is not None:
            matrix = self._model.scores
            state |= {name: np.asarray(matrix[name]) for name in ("data", "indices", "indptr")}
        return state

    @classmethod
    def restore(cls, state: Mapping[str, npt.NDArray[Any]]) -> Bm25Scorer:
        scorer = cls(())
        scorer._size = int(state["size"][0])
        codes = state["codes"].tolist()
        scorer._vocab = {str(code) if code >= 0 else "": n for n, code in enumerate(codes)}
        if codes:
            indptr, data, indices = state["indptr"], state["data"], state["indices"]
            # One column per term (the empty token bm25s adds has none), in compressed form.
            if len(indptr) > len(codes) + 1 or int(indptr[-1]) != len(data) or len(data) != len(indices):
                raise ValueError("the BM25 state's arrays do not fit together")
            model = bm25s.BM25()
            # What ``BM25.index`` leaves behind (bm25s 0.3), set from the saved arrays.
            model.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": scorer._size}
            model.vocab_dict = scorer._vocab
            model.unique_token_ids_set = set(scorer._vocab.values())
            model.nonoccurrence_array = None  # the Lucene variant has none
            scorer._model = model
        return scorer


class Bm25Build:
    """``LexicalBuild``: a new ``Bm25Scorer``, or one restored from its ``state``."""

    def __call__(self, documents: Sequence[Sequence[int]]) -> Bm25Scorer:
        return Bm25Scorer(documents)

    def restore(self, state: Mapping[str, npt.NDArray[Any]]) -> Bm25Scorer:
        return Bm25Scorer.restore(state)


build_scorer = Bm25Build()
