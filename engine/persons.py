"""A query in the other grammatical person: "the user" for "I", and back (English).

Memories are written both ways. What a user says is in the first person ("I moved to
Berlin"); what an agent notes about its user is in the third ("The user lives in
Berlin"). Queries are too: a user asks "where do I live?", an agent "where does the
user live?". The embedders read the two phrasings as different texts: over LongMemEval
dev60, its questions asked in the third person found 0.821 of their evidence turns in
the top 10 by cosine alone, against 0.874 asked as written (benchmarks/RESULTS.md,
"The query in the other person"). So recall also embeds the query rewritten in the
other person, and each candidate's cosine is the larger of its two
(``RecallQuery.phrasing``).

The rewriting is by rule, a few patterns of pronouns and the verbs that agree with
them; it need not be grammatical, only read as the same question by the model. It
leaves "they", "their" and "them" alone: they may name anyone. Chinese is not
rewritten (用户 / 我): no development data measures it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

THE_USER = "user"  # how a memory written about the user names them
_MODALS = "can|could|would|will|should|shall|may|might|must|did"
_USER = r"user\b(?![-'’])"  # "user", not "user's", "user-friendly"
_APOSTROPHE = "['’]"

Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]


def _rule(pattern: str, replacement: str | Callable[[re.Match[str]], str], flags: int = re.IGNORECASE) -> Rule:
    if isinstance(replacement, str):
        fixed = replacement
        return re.compile(pattern, flags), lambda match: _cased(match, fixed)
    return re.compile(pattern, flags), replacement


# Third person to first, applied in order.
_TO_FIRST: list[Rule] = [
    _rule(rf"\b(?:the )?user{_APOSTROPHE}s\b", "my"),
    _rule(rf"\b(?:does|do) (?:the )?{_USER}", "do I"),
    _rule(rf"\b(?:has|have) (?:the )?{_USER}", "have I"),
    _rule(rf"\bis (?:the )?{_USER}", "am I"),
    _rule(rf"\bwas (?:the )?{_USER}", "was I"),
    _rule(rf"\b({_MODALS}) (?:the )?{_USER}", lambda m: f"{m.group(1)} I"),
    _rule(rf"\bthe {_USER} (?:themselves|themself|himself|herself)\b", "myself"),
    _rule(rf"\bthe {_USER} is\b", "I am"),
    _rule(rf"\bthe {_USER} has\b", "I have"),
    _rule(rf"\bthe {_USER} does\b", "I do"),
    _rule(
        r"\b(to|for|with|about|from|of|by|at|on|remind|tell|told|help|ask|asked|give|gave|show|let|"
        rf"recommend|suggest) the {_USER}",
        lambda m: f"{m.group(1)} me",
    ),
    _rule(rf"\bthe {_USER}(?=\s*(?:[?.!,;:]|$))", lambda m: "me"),  # at a clause's end: an object
    _rule(rf"\bthe {_USER}", "I"),
]

# First person to third.
_TO_THIRD: list[Rule] = [
    _rule(r"\bdo I\b", "does the user"),
    _rule(r"\bhave I\b", "has the user"),
    _rule(r"\bam I\b", "is the user"),
    _rule(rf"\b({_MODALS}|was) I\b", lambda m: f"{m.group(1)} the user"),
    _rule(rf"\bI(?:{_APOSTROPHE}m| am)\b", "the user is", 0),
    _rule(rf"\bI(?:{_APOSTROPHE}ve| have)\b", "the user has", 0),
    _rule(rf"\bI{_APOSTROPHE}d\b", "the user would", 0),
    _rule(rf"\bI{_APOSTROPHE}ll\b", "the user will", 0),
    _rule(r"\bI do\b", "the user does", 0),
    _rule(r"\bI\b", "the user", 0),
    _rule(r"\b(?:my|mine)\b", "the user's"),
    _rule(r"\bmyself\b", "the user themselves"),
    _rule(r"\bme\b", "the user"),
]

_FIRST_PERSON = re.compile(r"\bI\b|\b(?:me|my|mine|myself)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?:^|[.!?]\s+|[\"“(]\s*)$")


def _cased(match: re.Match[str], replacement: str) -> str:
    """``replacement`` begun with a capital where a sentence begins at the match ("I"
    and "I am" always begin with one)."""
    if replacement.startswith("I ") or replacement == "I":
        return replacement
    if _SENTENCE_END.search(match.string[: match.start()]):
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _rewritten(rules: list[Rule], text: str) -> str:
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    return text


@dataclass(frozen=True, slots=True)
class Phrasing:
    """A text rewritten in the other person."""

    text: str
    # Whether ``text`` is in the first person: the text it was made from named "the user".
    first_person: bool


def other_person(text: str) -> Phrasing | None:
    """``text`` rewritten in the other person: where it names "the user" (or "user's"),
    in the first person; else where it speaks in the first person, with "the user".
    None where it does neither (nothing to rewrite)."""
    first = _rewritten(_TO_FIRST, text)
    if first != text:
        return Phrasing(first, first_person=True)
    if _FIRST_PERSON.search(text):
        third = _rewritten(_TO_THIRD, text)
        if third != text:
            return Phrasing(third, first_person=False)
    return None
