"""The service's bounds on what one request may carry, and how the framework adapters keep
an agent's text within them.

The numbers are the service's defaults (``[limits]`` and ``[server]`` in its configuration,
``engine.config.LimitsConfig`` and ``ServerConfig``): a recall query of at most
``MAX_QUERY_CHARS`` characters, a memory's content of at most ``MAX_CONTENT_CHARS``, a batch
of at most ``MAX_BATCH`` memories in a request body of at most ``MAX_BODY_BYTES``. A plain
client call sends what it is given and the service refuses what is too long
(``ValidationFailed``, or a 413 for a body past its bound); an adapter, which is handed
whatever the user said, skips a blank text (``is_blank``), cuts a query with ``fit_query``
and saves a long message as the parts ``split_content`` gives, sent in the ``batches`` that
fit a request, so that a memory layer never fails an agent's run.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

MAX_QUERY_CHARS = 4000
MAX_CONTENT_CHARS = 8000
MAX_BATCH = 500
MAX_BODY_BYTES = 2 * 1024 * 1024
# What a batch's body holds besides its memories: the braces, the field names, the
# namespace (at most 200 characters) and the conflict mode.
_BATCH_ENVELOPE_BYTES = 1024

# The characters the service counts as saying nothing (``engine.text.is_blank``, which
# refuses a blank content or query with a 422): whitespace, control characters and
# invisible format marks (zero-width spaces, direction marks, a byte-order mark).
# tests/adapters/test_text_limits.py holds the two rules to each other.
_SILENT = frozenset(("Cc", "Cf"))


def is_blank(text: str) -> bool:
    """Whether the service would call ``text`` blank (it refuses such a content or query)."""
    return all(char.isspace() or unicodedata.category(char) in _SILENT for char in text)


def _trim(text: str) -> str:
    """``text`` without the blank characters (``is_blank``) at either end."""
    start, end = 0, len(text)
    while start < end and is_blank(text[start]):
        start += 1
    while end > start and is_blank(text[end - 1]):
        end -= 1
    return text[start:end]


# Where a part may end, best first: after a paragraph, after a sentence (closing
# punctuation and the space after it), after a line, at any whitespace but one between two
# digits: a card or phone number cut in two ("4111 1111 | 1111 1111") was two halves the
# service's guard could not tell for one, and stored in clear.
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"[.!?;。！？；…](?:[\"'”’)\]]*)\s+|[。！？；]")
_LINE = re.compile(r"\n")
_SPACE = re.compile(r"(?<![\d\s])\s+|\s+(?=[^\d\s])")


def _last_end(pattern: re.Pattern[str], window: str, floor: int) -> int | None:
    """Where the last match of ``pattern`` in ``window`` ends, if it ends past ``floor``."""
    ends = [m.end() for m in pattern.finditer(window) if m.end() > floor]
    return ends[-1] if ends else None


def _cut(window: str) -> int:
    """How much of ``window`` (text that goes on after it) to keep: up to its last paragraph,
    sentence or line end, else its last whitespace, in its second half; else all of it."""
    floor = len(window) // 2
    for pattern in (_PARAGRAPH, _SENTENCE, _LINE, _SPACE):
        end = _last_end(pattern, window, floor)
        if end is not None:
            return end
    return len(window)


def fit_query(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    """``text`` as a recall query of at most ``limit`` characters: all of it when it fits,
    else, without the blank characters around it, its start, cut at a sentence or word
    boundary where one is near the limit ("" for a blank text: the caller skips it)."""
    if len(text) <= limit:
        return text
    text = _trim(text)
    if len(text) <= limit:
        return text
    return _trim(text[: min(_cut(text[: limit + 1]), limit)]) or text[:limit]


def split_content(text: str, limit: int = MAX_CONTENT_CHARS) -> list[str]:
    """``text`` as parts of at most ``limit`` characters each, in order, each ending at a
    paragraph, sentence or word boundary where one lies in the second half of its span
    (else cut at the limit); blank characters (``is_blank``) around parts are dropped and
    blank parts are left out. A text that fits is one part, unchanged (none if blank); one
    that fits without the blank characters around it is one part, that text trimmed."""
    if len(text) <= limit:
        return [] if is_blank(text) else [text]
    rest = _trim(text)
    if len(rest) <= limit:
        return [rest] if rest else []
    parts: list[str] = []
    while len(rest) > limit:
        size = min(_cut(rest[: limit + 1]), limit)  # one more: a boundary right at the limit counts
        part = _trim(rest[:size])
        if part:
            parts.append(part)
        rest = rest[size:]
    if _trim(rest):
        parts.append(_trim(rest))
    return parts


def batches(
    memories: Sequence[Mapping[str, Any]], *, max_batch: int = MAX_BATCH, max_body_bytes: int = MAX_BODY_BYTES
) -> Iterator[list[Mapping[str, Any]]]:
    """``memories`` in order, as the batches of a save that each fit one request: at most
    ``max_batch`` memories in a body of at most ``max_body_bytes`` (each memory measured
    as the client sends it, compact UTF-8 JSON). A memory too large for a body alone is a
    batch of its own (the service refuses it, as it would any other way)."""
    batch: list[Mapping[str, Any]] = []
    size = _BATCH_ENVELOPE_BYTES
    for memory in memories:
        item = len(json.dumps(memory, ensure_ascii=False, separators=(",", ":"), default=str).encode()) + 1
        if batch and (len(batch) == max_batch or size + item > max_body_bytes):
            yield batch
            batch, size = [], _BATCH_ENVELOPE_BYTES
        batch.append(memory)
        size += item
    if batch:
        yield batch
