"""The value types of short-term session memory (``engine/sessions.py``).

A session is one conversation of one agent in one namespace: a rolling window of
messages bounded by a token budget and a time to live. Each run of a session is a
*generation* with an id of its own: when a session expires or is closed, its
generation waits for promotion while a new message under the same session id
starts a new one, so nothing of the old one is overwritten before it is promoted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from engine.codec import from_iso, to_iso

SESSION_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:@\-]{1,200}$")


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class SessionState(StrEnum):
    OPEN = "open"  # taking messages until its deadline
    # Closed by its agent, waiting for promotion: written by older releases only (a close
    # now claims the generation at once, PROMOTING); still read and promoted where found.
    CLOSED = "closed"
    PROMOTING = "promoting"  # claimed by a promotion; claimed again if that one never finishes


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a window. ``tokens`` is its content's length under the service's
    tokenizer, counted once when it is appended."""

    role: Role
    content: str
    at: datetime
    tokens: int
    name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SessionRef:
    """Which session: its namespace, the agent it belongs to, and the agent's own id for it.
    Two agents using the same ``session_id`` in one namespace have two sessions."""

    namespace: str
    agent: str
    session_id: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """What the extraction rules picked from a message as worth keeping for the long term,
    waiting in its session until the session is promoted."""

    content: str
    category: str
    rule: str
    at: datetime
    # The text as it was said, when ``content`` left out an explicit request ("remember
    # that …"): the write guard judges the original, so the request cannot hide an injection.
    said: str | None = None
    # The visibility its append asked for; None: the session's own (set by its first append).
    visibility: str | None = None
    # The ``name`` of the message it came from (a group conversation's speaker); a
    # promotion of several voices writes its content and ``said`` as ``<name>: …``
    # (``engine.sessions.spoken_by``).
    speaker: str | None = None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session generation as the store holds it (its messages apart)."""

    ref: SessionRef
    generation: str
    state: SessionState
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    max_tokens: int
    expire_after_seconds: float
    tokens: int  # of the messages in the window now
    messages: int  # in the window now
    appended: int  # ever appended, rolled out of the window or not
    reach: str  # the agent's reach on the namespace when the session started (engine.records.Reach)
    visibility: str  # of the memories its promotion writes
    # When a close ended it (None: open, or expired): a promotion the sweep takes after a
    # close was cut off finishes that close, and says so, not "expired".
    closed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of a namespace's open sessions, oldest first; ``next_cursor`` continues
    after its last (None: this is the last page)."""

    items: tuple[SessionInfo, ...]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Claimed:
    """A generation taken for promotion: its record and its candidates, in order."""

    info: SessionInfo
    candidates: tuple[Candidate, ...]


# --- one JSON shape for every backend --------------------------------------------------


def message_to_json(message: Message) -> str:
    return json.dumps(
        {
            "role": message.role.value,
            "content": message.content,
            "at": to_iso(message.at),
            "tokens": message.tokens,
            "name": message.name,
            "metadata": dict(message.metadata),
        },
        ensure_ascii=False,
    )


def message_from_json(text: str | bytes) -> Message:
    data = json.loads(text)
    return Message(
        role=Role(data["role"]),
        content=data["content"],
        at=from_iso(data["at"]),
        tokens=int(data["tokens"]),
        name=data.get("name"),
        metadata=data.get("metadata") or {},
    )


def candidate_to_json(candidate: Candidate) -> str:
    return json.dumps(
        {
            "content": candidate.content,
            "category": candidate.category,
            "rule": candidate.rule,
            "at": to_iso(candidate.at),
            "said": candidate.said,
            "visibility": candidate.visibility,
            "speaker": candidate.speaker,
        },
        ensure_ascii=False,
    )


def candidate_from_json(text: str | bytes) -> Candidate:
    data = json.loads(text)
    return Candidate(
        data["content"],
        data["category"],
        data["rule"],
        from_iso(data["at"]),
        data.get("said"),
        data.get("visibility"),
        data.get("speaker"),
    )
