"""Checks that bound what one request may ask of the engine, shared by every entry point.

Each walks its input without recursion, so that a hostile input is refused with a
message instead of exhausting Python's stack (a ``RecursionError`` is a 500).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.config import LimitsConfig
from engine.errors import InvalidInput

# SQLite and Bolt both keep integers in 64 bits; a larger one cannot be compared there.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# The most a counter of a record (``access_count``, ``version``) may hold: the largest
# integer every JSON reader keeps exactly (a JavaScript number's), so an export reads the
# same anywhere, and far enough below INT64_MAX that counting on never leaves 64 bits.
MAX_COUNTER = 2**53 - 1
# The longest entity name or key a record holds.
MAX_NAME_CHARS = 200


def nesting_depth(value: Any, *, stop_after: int) -> int:
    """How deeply ``value``'s objects and lists nest (a scalar is 0, ``{}`` and ``[]`` are 1),
    counted up to ``stop_after + 1`` at most: enough to tell that a limit is exceeded."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > stop_after:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def fits_int64(value: object) -> bool:
    """Whether ``value`` is not an integer the stores cannot hold (bools and floats pass)."""
    return not isinstance(value, int) or isinstance(value, bool) or INT64_MIN <= value <= INT64_MAX


def metadata_problem(metadata: object, config: LimitsConfig) -> str | None:
    """What is wrong with a memory's (or a session message's) metadata under ``config``
    (too deep, too large as JSON), or None."""
    depth = nesting_depth(metadata, stop_after=config.max_metadata_depth)
    if depth > config.max_metadata_depth:
        return f"metadata nests deeper than {config.max_metadata_depth} levels of objects and lists"
    size = len(json.dumps(metadata, ensure_ascii=False, default=str))
    if size > config.max_metadata_bytes:
        return f"metadata is {size} bytes as JSON, at most {config.max_metadata_bytes} are allowed"
    return None


def check_query(query: str, config: LimitsConfig, *, field: str = "query") -> None:
    """Refuse a recall query (or its ``focus``) longer than ``max_query_chars`` (``InvalidInput``, 422)."""
    if len(query) > config.max_query_chars:
        raise InvalidInput(
            f"{field} holds {len(query)} characters, at most {config.max_query_chars} are allowed",
            field=field,
        )
