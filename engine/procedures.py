"""Procedural memory: memories of category ``procedure`` carry ordered steps.

A procedure's content says what it achieves ("Deploy the web app to staging"); its
steps travel in ``metadata["steps"]`` — a list of ``{"description": …, "tool": …,
"arguments": {…}}`` in order (tool and arguments optional) — so every store, export
and import carries them unchanged and the write guard reads them like any metadata
(and, in an inferred procedure, for a step that steers the assistant: ``guard.steering_step``).
A question that asks how to do something ("how do I …", "what are the steps to …",
"怎么…", "如何…") recalls procedures first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from engine.persons import NOUNS

PROCEDURE = "procedure"
STEPS_KEY = "steps"
MAX_STEPS = 100
_STEP_FIELDS = frozenset({"description", "tool", "arguments"})

# An agent asking for its user: "how can the user export their data?", "how does the user
# reset the router?"; not "how does the user feel about …" or "how did the user like …",
# nor "how does the user interface work?" (a thing: ``persons.NOUNS``).
_THE_USER_DOES = (
    r"how (?:can|should|does) the user\b(?!\s+(?:feel|felt|like|think|know|look|seem|" + "|".join(NOUNS) + r")\b)"
)
_HOW_EN = re.compile(
    r"^\s*(?:(?:and|so|ok(?:ay)?|hey|please)[,\s]+)?"
    r"(?:how (?:do|can|should|would|could|did) (?:i|we|you|one)\b|"
    + _THE_USER_DOES
    + r"|how to\b|how does one\b|what(?:'s| is| are) the (?:steps|procedure|process|way) (?:to|for)\b|"
    r"steps (?:to|for)\b|walk me through\b|show me how\b|what do i (?:do|need to do) to\b|"
    r"remind me how\b|tell me how\b|the procedure for\b)",
    re.IGNORECASE,
)
_HOW_ZH = re.compile(r"(?:怎么|怎样|如何|咋)(?:才能|能|样|去|来)?.{0,30}|(?:步骤|流程|操作方法|方法是什么)")


def asks_how(query: str) -> bool:
    """Whether a query asks how to do something (English or Chinese)."""
    return bool(_HOW_EN.search(query) or _HOW_ZH.search(query))


def steps_of(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A procedure's steps, in order (empty when it has none)."""
    steps = metadata.get(STEPS_KEY)
    return list(steps) if isinstance(steps, list) else []


def steps_problem(category: str | None, metadata: Mapping[str, Any] | None) -> str | None:
    """What is wrong with the steps in ``metadata`` (None when they are sound or absent)."""
    if not metadata or STEPS_KEY not in metadata:
        return None
    if category is not None and category != PROCEDURE:
        return f"only memories of category {PROCEDURE!r} carry steps, not {category!r}"
    steps = metadata[STEPS_KEY]
    if not isinstance(steps, list) or not steps:
        return "steps must be a non-empty list of {description, tool, arguments}"
    if len(steps) > MAX_STEPS:
        return f"a procedure holds at most {MAX_STEPS} steps, got {len(steps)}"
    for number, step in enumerate(steps):
        if not isinstance(step, Mapping):
            return f"steps[{number}] must be an object with a description"
        unknown = set(step) - _STEP_FIELDS
        if unknown:
            return f"steps[{number}] has unknown fields: {', '.join(sorted(unknown))}"
        description = step.get("description")
        if not isinstance(description, str) or not description.strip():
            return f"steps[{number}].description must be a non-empty string"
        tool = step.get("tool")
        if tool is not None and (not isinstance(tool, str) or not tool.strip()):
            return f"steps[{number}].tool must be a non-empty string when given"
        arguments = step.get("arguments")
        if arguments is not None and not isinstance(arguments, Mapping):
            return f"steps[{number}].arguments must be an object when given"
    return None
