"""mem0's identifiers as namespaces: the one rule the ``/mem0`` routes and a mem0 import share.

The first of ``user_id``, ``agent_id``, ``run_id`` that a memory or request names picks the
namespace ``user:<id>``, ``agent:<id>`` or ``run:<id>``. A character a namespace does not
allow (anything but letters, digits, ``_``, ``-``, ``@``) is written ``.xx`` per UTF-8 byte,
the rule of the LangGraph store, so mem0's ``user_id="42"`` and LangGraph's
``("user", "42")`` share one memory space.
"""

from __future__ import annotations

import re

OWNERS = ("user_id", "agent_id", "run_id")
MAX_NAMESPACE = 128  # a namespace's longest name (``service.NAMESPACE_PATTERN``)
PREFIX = {"user_id": "user:", "agent_id": "agent:", "run_id": "run:"}

_SAFE = re.compile(r"[A-Za-z0-9_\-@]")
_ESCAPED = re.compile(r"(?:\.[0-9a-f]{2})+")


def to_label(value: str) -> str:
    """An identifier as a namespace label: unsafe characters as ``.xx`` per UTF-8 byte."""
    return "".join(c if _SAFE.fullmatch(c) else "".join(f".{b:02x}" for b in c.encode()) for c in value)


def from_label(label: str) -> str | None:
    """The identifier a label encodes, or None when it is not one ``to_label`` writes."""
    try:
        value = _ESCAPED.sub(lambda m: bytes.fromhex(m.group().replace(".", "")).decode(), label)
    except UnicodeDecodeError:
        return None
    return value if value and to_label(value) == label else None


def namespace_of(name: str, value: str) -> str:
    """The namespace of the owner ``name`` (one of ``OWNERS``) with the identifier ``value``."""
    return PREFIX[name] + to_label(value)


def too_long(name: str, namespace: str) -> str | None:
    """What is wrong with the identifier ``name`` whose namespace is ``namespace``
    (``namespace_of``), where that is longer than a namespace may be; else None."""
    if len(namespace) <= MAX_NAMESPACE:
        return None
    return (
        f"{name} is too long: as the namespace {PREFIX[name]}… it takes {len(namespace)} characters, at most "
        f"{MAX_NAMESPACE} are allowed (a character other than a letter, digit, _, - or @ takes 3 per byte)"
    )
