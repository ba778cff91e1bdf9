"""The service's bounds on what one request may carry, and how the framework adapters keep
an agent's text within them.

The numbers are the service's defaults (``[limits]`` in its configuration,
``engine.config.LimitsConfig``): a recall query of at most ``MAX_QUERY_CHARS`` characters,
a memory's content of at most ``MAX_CONTENT_CHARS``. A plain client call sends what it is
given and the service refuses what is too long (``ValidationFailed``); an adapter, which
is handed whatever the user said, cuts a query with ``fit_query`` and saves a long message
as the parts ``split_content`` gives, so that a memory layer never fails an agent's run.
"""

from __future__ import annotations

import re

MAX_QUERY_CHARS = 4000
MAX_CONTENT_CHARS = 8000

# Where a part may end, best first: after a paragraph, after a sentence (closing
# punctuation and the space after it), after a line, at any whitespace.
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"[.!?;。！？；…](?:[\"'”’)\]]*)\s+|[。！？；]")
_LINE = re.compile(r"\n")
_SPACE = re.compile(r"\s+")


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
    else its start, cut at a sentence or word boundary where one is near the limit."""
    if len(text) <= limit:
        return text
    return text[: min(_cut(text[: limit + 1]), limit)].rstrip() or text[:limit]


def split_content(text: str, limit: int = MAX_CONTENT_CHARS) -> list[str]:
    """``text`` as parts of at most ``limit`` characters each, in order, each ending at a
    paragraph, sentence or word boundary where one lies in the second half of its span
    (else cut at the limit); whitespace around parts is dropped, blank parts are left out.
    A text that fits is one part, unchanged; one that fits without the whitespace around
    it is one part, that text stripped."""
    if len(text) <= limit:
        return [text]
    rest = text.strip()
    if len(rest) <= limit:
        return [rest] if rest else []
    parts: list[str] = []
    while len(rest) > limit:
        size = min(_cut(rest[: limit + 1]), limit)  # one more: a boundary right at the limit counts
        part = rest[:size].strip()
        if part:
            parts.append(part)
        rest = rest[size:]
    if rest.strip():
        parts.append(rest.strip())
    return parts
