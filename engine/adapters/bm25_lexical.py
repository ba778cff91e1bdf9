"""BM25 for the lexical channel, from ``bm25s`` (sparse-matrix BM25, scipy/numpy only).

bm25s's quirks stay in here:

* it indexes a fixed corpus: there is no add or remove, so a changed namespace is a
  new scorer (``engine.fast_network`` builds one when first needed after a change);
* its ``BM25.index`` loops over the documents in Python (about 33 µs a document: 3.3 s
  at 100,000, holding the interpreter's lock nearly throughout). ``build_index_from_ids`` is
  the step bm25s names for overriding; here it is done over the whole corpus at once
  (numpy), with bm25s's own idf and term-frequency functions applied in the
  same order and types, so the matrix is bit for bit the one bm25s builds
  (tests/unit/test_bm25_lexical.py);
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
from bm25s.scoring import _score_idf_lucene, _score_tfc_lucene

from engine.scoring import best_of

# Postings summed on their own (``_summed``) while they number at most a SPARSE_SHARE-th
# of the corpus; above that, a dense array over the corpus is cheaper. Measured with the
# caches cold, as a recall's other steps leave them, four query terms
# (benchmarks/lexical_sums.py): at 100,000 documents the two ways cost the same up to a
# tenth (0.3 ms), at 1,000,000 summing alone costs a quarter less at a tenth (2.5
# against 3.2 ms) and a third at a hundredth; above an eighth, dense is cheaper at both
# sizes, twice so at a quarter.
SPARSE_SHARE = 10


class Bm25Scorer:
    """``LexicalScorer`` over one corpus of term-code lists (see ``engine.ports``)."""

    def __init__(self, size: int, vocab: dict[str, int], model: bm25s.BM25 | None) -> None:
        self._size = size
        self._vocab = vocab  # the term codes, as strings, to bm25s's dense ids
        self._model = model
        # The last query's matches: a "how" question ranks twice, the second time (over
        # procedures) asking for every match where few of the first's best pass. 12
        # bytes a match held until the next query (a word in every one of a million
        # memories: 12 MB).
        self._last: tuple[tuple[int, ...], tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] | None = None

    @classmethod
    def build(cls, lengths: npt.NDArray[np.int64], codes: npt.NDArray[np.int64]) -> Bm25Scorer:
        """Over the documents whose code counts are ``lengths``, their codes one document
        after another in ``codes``."""
        lengths, codes = np.asarray(lengths, np.int64), np.asarray(codes, np.int64)
        if not len(codes):
            return cls(len(lengths), {}, None)
        known, local = _dense(codes)
        vocab = {str(code): n for n, code in enumerate(known.tolist())}
        model = bm25s.BM25()
        model.scores = _index(model, lengths, local, len(known))
        _fit(model, vocab)
        return cls(len(lengths), vocab, model)

    @classmethod
    def of_documents(cls, documents: Sequence[Sequence[int]]) -> Bm25Scorer:
        lengths = np.fromiter((len(doc) for doc in documents), np.int64, len(documents))
        codes = np.fromiter((code for doc in documents for code in doc), np.int64, int(lengths.sum()))
        return cls.build(lengths, codes)

    def matches(self, query_terms: Sequence[int]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The documents that hold a query term, ascending, and their scores: what bm25s's
        ``get_scores`` gives, without the zeros. bm25s adds every posting one at a time
        (``np.add.at``); a term's column names each document once, so here a term's
        weights are added as one vectorised step, term after term, in float32: the same
        additions in the same order, so every score is bit-for-bit bm25s's. Where the
        postings are few against the corpus (at most a ``SPARSE_SHARE``-th) they are
        summed on their own (``_summed``), so the cost follows the postings, not the
        corpus size."""
        asked = tuple(query_terms)
        last = self._last
        if last is not None and last[0] == asked:
            return last[1]
        found = self._matches(self._spans(query_terms))
        for array in found:
            array.flags.writeable = False  # handed out again
        self._last = asked, found
        return found

    def _matches(self, spans: Sequence[tuple[int, int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        if not spans:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if sum(end - start for start, end in spans) * SPARSE_SHARE <= self._size:
            return self._summed(spans)
        assert self._model is not None
        matrix = self._model.scores
        data, indices = matrix["data"], matrix["indices"]
        dense = np.zeros(self._size, dtype=np.float32)
        for start, end in spans:
            dense[indices[start:end]] += data[start:end]
        docs = np.flatnonzero(dense > 0)
        return docs.astype(np.int64, copy=False), dense[docs]

    def top(self, query_terms: Sequence[int], k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ``k`` best of ``matches`` (every match where fewer), in no order, with the
        same scores; of those tied at the last place, the first documents."""
        return best_of(*self.matches(query_terms), k)

    def _summed(self, spans: Sequence[tuple[int, int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The documents of these columns, ascending, and their weights summed term after
        term in float32, as ``matches``'s dense sums are. Each column's documents are
        ascending already, so a stable sort of the columns one after another merges
        sorted runs (numpy's stable sort of these integers is timsort); the sums are made
        in an array of the matches alone, not of the corpus."""
        assert self._model is not None
        matrix = self._model.scores
        data, indices = matrix["data"], matrix["indices"]
        every = np.concatenate([indices[start:end] for start, end in spans])
        order = np.argsort(every, kind="stable")
        ordered = every[order]
        first = np.empty(len(ordered), np.bool_)  # where a document's postings begin
        first[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
        at = np.empty(len(every), np.int64)  # each posting's document, as a position among the matches
        at[order] = np.cumsum(first) - 1
        scores = np.zeros(int(first.sum()), dtype=np.float32)
        offset = 0
        for start, end in spans:
            scores[at[offset : offset + end - start]] += data[start:end]
            offset += end - start
        docs = ordered[first].astype(np.int64)
        held = scores > 0
        return docs[held], scores[held]

    def _spans(self, query_terms: Sequence[int]) -> list[tuple[int, int]]:
        """Where each known query term's column lies in bm25s's matrix (none without a model)."""
        if self._model is None:
            return []
        known = [self._vocab[str(code)] for code in dict.fromkeys(query_terms) if str(code) in self._vocab]
        indptr = self._model.scores["indptr"]
        return [(int(indptr[term]), int(indptr[term + 1])) for term in known]

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
        size = int(state["size"][0])
        codes = state["codes"].tolist()
        vocab = {str(code) if code >= 0 else "": n for n, code in enumerate(codes)}
        if not codes:
            return cls(size, vocab, None)
        indptr, data, indices = state["indptr"], state["data"], state["indices"]
        # One column per term (the empty token bm25s adds has none), in compressed form.
        if len(indptr) > len(codes) + 1 or int(indptr[-1]) != len(data) or len(data) != len(indices):
            raise ValueError("the BM25 state's arrays do not fit together")
        model = bm25s.BM25()
        model.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": size}
        _fit(model, vocab)
        return cls(size, vocab, model)


def _dense(codes: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct codes, ascending, and each code's position among them (``np.unique``
    with ``return_inverse``). The engine's codes are small non-negative integers (an
    interner's), so a table over them does it without sorting every code."""
    low, high = int(codes.min()), int(codes.max())
    if low < 0 or high > 8 * len(codes) + (1 << 16):
        known, local = np.unique(codes, return_inverse=True)
        return known, local.astype(np.int64, copy=False)
    present = np.zeros(high + 1, np.bool_)
    present[codes] = True
    return np.flatnonzero(present), (np.cumsum(present, dtype=np.int64) - 1)[codes]


def _fit(model: bm25s.BM25, vocab: dict[str, int]) -> None:
    """What ``BM25.index`` leaves behind (bm25s 0.3) besides the score matrix."""
    model.vocab_dict = vocab
    model.unique_token_ids_set = set(vocab.values())
    model.nonoccurrence_array = None  # the Lucene variant has none


def _index(
    model: bm25s.BM25, lengths: npt.NDArray[np.int64], local: npt.NDArray[np.int64], vocabulary: int
) -> dict[str, Any]:
    """``BM25.build_index_from_ids`` for ``model``'s method (Lucene) over the documents
    whose dense term ids are ``local``, ``lengths[i]`` of them for document ``i``: per
    (document, term) its frequency, per term its document frequency and idf (bm25s's
    ``_score_idf_lucene``, once per distinct frequency), the weights from bm25s's
    ``_score_tfc_lucene`` in float64, stored in float32, then bm25s's own ``_np_csc``."""
    if model.method != "lucene" or model.idf_method not in (None, "lucene"):
        raise ValueError(f"the whole-corpus build is bm25s's Lucene variant, not {model.method!r}")
    documents = len(lengths)
    doc = np.repeat(np.arange(documents, dtype=np.int64), lengths)
    # By term, then document: the order of the compressed columns, which ``_np_csc``
    # then finds already sorted.
    pairs, tf = np.unique(local * documents + doc, return_counts=True)
    pair_term, pair_doc = np.divmod(pairs, documents)
    frequencies, which = np.unique(np.bincount(pair_term, minlength=vocabulary), return_inverse=True)
    idf = np.asarray([_score_idf_lucene(int(df), N=documents) for df in frequencies.tolist()], model.dtype)[which]
    tfc = _score_tfc_lucene(
        tf_array=tf.astype(model.dtype), l_d=lengths[pair_doc], l_avg=lengths.mean(), k1=model.k1, b=model.b
    )
    scores = (idf[pair_term] * tfc).astype(model.dtype)
    data, indices, indptr = model._np_csc(
        data=scores,
        rows=pair_doc.astype(model.int_dtype),
        cols=pair_term.astype(model.int_dtype),
        shape=(documents, vocabulary),
    )
    return {"data": data.astype(model.dtype), "indices": indices, "indptr": indptr, "num_docs": documents}


class Bm25Build:
    """``LexicalBuild``: a new ``Bm25Scorer``, or one restored from its ``state``."""

    def __call__(self, lengths: npt.NDArray[np.int64], codes: npt.NDArray[np.int64]) -> Bm25Scorer:
        return Bm25Scorer.build(lengths, codes)

    def restore(self, state: Mapping[str, npt.NDArray[Any]]) -> Bm25Scorer:
        return Bm25Scorer.restore(state)


build_scorer = Bm25Build()
