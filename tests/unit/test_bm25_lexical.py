"""The BM25 scorer: its build against bm25s's own index, its sparse matches against bm25s's own dense scores."""

from __future__ import annotations

import random

import bm25s
import numpy as np
import pytest

from engine.adapters import bm25_lexical
from engine.adapters.bm25_lexical import Bm25Scorer


def _corpus(rng: random.Random, size: int, vocabulary: int) -> list[list[int]]:
    # Codes are sparse and global in the engine: spread them out.
    return [[rng.randrange(vocabulary) * 7 + 3 for _ in range(rng.randrange(0, 12))] for _ in range(size)]


@pytest.mark.parametrize(
    "documents",
    [
        _corpus(random.Random(5), 2000, 300),
        _corpus(random.Random(6), 3, 5),
        [[5, 5, 5], [], [], [9]],  # repeats and empty documents
        [[42]],
        [[10**12, 3, 10**12], [3], [7 * 10**11]],  # codes too sparse for a table
    ],
    ids=["2000-documents", "3-documents", "repeats-and-empty", "one-term", "sparse-codes"],
)
def test_the_build_is_bm25s_own_index_bit_for_bit(documents: list[list[int]]) -> None:
    """The whole-corpus build against ``BM25.index`` over the same dense ids: every
    weight, index and pointer, and their types."""
    scorer = Bm25Scorer.of_documents(documents)
    assert scorer._model is not None
    ids = [[scorer._vocab[str(code)] for code in doc] for doc in documents]
    reference = bm25s.BM25()
    reference.index(bm25s.tokenization.Tokenized(ids=ids, vocab=dict(scorer._vocab)), show_progress=False)
    for name in ("data", "indices", "indptr"):
        ours, theirs = np.asarray(scorer._model.scores[name]), np.asarray(reference.scores[name])
        assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes(), name
    assert scorer._model.scores["num_docs"] == reference.scores["num_docs"] == len(documents)


def test_a_corpus_of_empty_documents_has_no_matrix() -> None:
    scorer = Bm25Scorer.of_documents([[], []])
    assert scorer._model is None and scorer.matches([1])[0].tolist() == [] and scorer.ceiling([1]) == 0.0


def _bm25s_scores(scorer: Bm25Scorer, query: list[int]) -> np.ndarray:
    """bm25s's own dense scores of ``query`` over the scorer's documents (float32, zeros
    where a document holds no query term)."""
    model = scorer._model
    assert model is not None
    known = [str(code) for code in dict.fromkeys(query) if str(code) in scorer._vocab]
    return np.asarray(model.get_scores(known), np.float32) if known else np.zeros(scorer._size, np.float32)


@pytest.mark.parametrize("share", [0, 16, 10**9], ids=["postings-only", "either", "dense-only"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matches_are_the_dense_scores_above_zero_bit_for_bit(
    seed: int, share: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25_lexical, "SPARSE_SHARE", share)
    rng = random.Random(seed)
    scorer = Bm25Scorer.of_documents(_corpus(rng, 500, 60))
    for _ in range(50):
        query = [rng.randrange(70) * 7 + 3 for _ in range(rng.randrange(1, 6))]
        dense = _bm25s_scores(scorer, query)
        docs, scores = scorer.matches(query)
        assert docs.tolist() == np.flatnonzero(dense > 0).tolist()
        assert scores.tobytes() == dense[dense > 0].tobytes()


def test_a_query_without_a_known_term_matches_nothing() -> None:
    scorer = Bm25Scorer.of_documents([[1, 2], [2, 3]])
    docs, scores = scorer.matches([99])
    assert len(docs) == 0 and len(scores) == 0
    assert Bm25Scorer.of_documents([]).matches([1])[0].tolist() == []


def test_a_restored_scorer_matches_as_the_built_one() -> None:
    rng = random.Random(9)
    built = Bm25Scorer.of_documents(_corpus(rng, 200, 30))
    restored = Bm25Scorer.restore(built.state())
    for _ in range(20):
        query = [rng.randrange(30) * 7 + 3 for _ in range(3)]
        a, b = built.matches(query), restored.matches(query)
        assert a[0].tolist() == b[0].tolist() and a[1].tobytes() == b[1].tobytes()


def test_no_match_reaches_the_ceiling_and_one_holding_the_terms_often_comes_close() -> None:
    rng = random.Random(4)
    query = [10, 20, 30]
    # The first document holds each query term 2,000 times: each term's part of its score
    # nears that term's idf, so its score nears the ceiling.
    others = [[rng.choice([10, 20, 30, 40, 50, 60, 70]) for _ in range(4)] for _ in range(49)]
    documents = [[10, 20, 30] * 2000, *others]
    scorer = Bm25Scorer.of_documents(documents)
    ceiling = scorer.ceiling(query)
    docs, scores = scorer.matches(query)
    assert len(docs) > 1 and float(scores.max()) < ceiling
    assert docs[int(np.argmax(scores))] == 0 and float(scores.max()) > 0.95 * ceiling
    assert scorer.ceiling([*query, 10, 12345]) == pytest.approx(ceiling)  # repeats and unknown terms add nothing
    assert scorer.ceiling([12345]) == 0.0 and Bm25Scorer.of_documents([]).ceiling(query) == 0.0
    assert Bm25Scorer.restore(scorer.state()).ceiling(query) == ceiling
    assert scorer.ceiling([99]) == 0.0  # not in the corpus
    assert scorer.ceiling([70]) > scorer.ceiling([10])  # a rarer term weighs more


def _best_k(docs: np.ndarray, scores: np.ndarray, k: int) -> tuple[list[float], set[int]]:
    """The k highest of ``scores`` (sorted) and the documents strictly above the k-th."""
    ranked = sorted(zip(scores.tolist(), docs.tolist(), strict=True), reverse=True)[:k]
    last = ranked[-1][0] if ranked else 0.0
    return [score for score, _ in ranked], {doc for score, doc in ranked if score > last}


@pytest.mark.parametrize("share", [0, 16, 10**9], ids=["matches-summed-alone", "either", "matches-dense"])
@pytest.mark.parametrize("k", [1, 7, 40, 5000])
def test_top_is_the_best_of_matches_with_their_scores(k: int, share: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``top`` against bm25s's own dense scores: the same k best, bit for bit; every
    document scored above the k-th is there (a tie at the k-th place may go either way).
    ``share`` sends the sums the dense way, alone, or either."""
    monkeypatch.setattr(bm25_lexical, "SPARSE_SHARE", share)
    rng = random.Random(k)
    scorer = Bm25Scorer.of_documents(_corpus(rng, 3000, 40))
    for _ in range(40):
        query = [rng.randrange(45) * 7 + 3 for _ in range(rng.randrange(1, 6))]
        docs, scores = scorer.top(query, k)
        dense = _bm25s_scores(scorer, query)
        matched = np.flatnonzero(dense > 0)
        want_scores, above = _best_k(matched, dense[matched], k)
        assert sorted(scores.tolist(), reverse=True) == want_scores
        assert above <= set(docs.tolist()) and len(set(docs.tolist())) == len(docs)
        assert scores.dtype == np.float32 and docs.dtype == np.int64


def test_top_of_nothing() -> None:
    scorer = Bm25Scorer.of_documents([[1, 2], [2, 3]])
    assert scorer.top([99], 5)[0].tolist() == [] and scorer.top([2], 0)[0].tolist() == []
    assert Bm25Scorer.of_documents([[], []]).top([1], 3)[0].tolist() == []


def test_the_last_query_asked_again_is_answered_without_summing_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A "how" question ranks twice and may ask for every match the second time: the
    scorer keeps its last answer (read-only), and sums again for any other query."""
    scorer = Bm25Scorer.of_documents(_corpus(random.Random(4), 300, 20))
    summed: list[tuple[tuple[int, int], ...]] = []
    inner = scorer._matches

    def counted(spans: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        summed.append(tuple(spans))
        return inner(spans)

    monkeypatch.setattr(scorer, "_matches", counted)
    first = scorer.matches([3, 10])
    assert scorer.matches([3, 10]) is first and len(summed) == 1
    best = scorer.top([3, 10], 5)
    assert sorted(best[1].tolist(), reverse=True) == sorted(first[1].tolist(), reverse=True)[:5]
    assert len(summed) == 1  # the best, from the matches kept
    other = scorer.matches([10])
    assert len(summed) == 2 and other is not first
    assert not first[0].flags.writeable and not first[1].flags.writeable
