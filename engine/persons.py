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
# Longer texts are read as written: a question is short, and the prompt context's query
# (the latest messages joined, up to 4,000 characters) would cost a long text's
# embedding again (about 125 ms at 4,000 characters with USE) for what no data measured.
MAX_CHARS = 600
_MODALS = "can|could|would|will|should|shall|may|might|must|did"
# "The user" is a person, not the first word of a compound noun: "the user table", "the
# user account", "the user interface" name things.
NOUNS = (
    "account accounts agent agents agreement api base class column columns consent context count data database "
    "db directory docs documentation email emails endpoint entity experience feedback field fields flow folder "
    "form goal goals group groups guide history id ids info information input intent interface interfaces "
    "journey key keys level list login management manual memories memory message messages mode model models "
    "module name names object objects page password passwords permission permissions persona preference "
    "preferences profile profiles prompt prompts query record records request requests research role roles "
    "row rows schema segment segments service session sessions setting settings space status stories story "
    "support table tables test testing tests token tokens turn turns type types"
).split()
_USER = rf"user\b(?![-'’])(?!\s+(?:{'|'.join(NOUNS)})\b)"  # the person: not "user's", "user-friendly", "user table"
_APOSTROPHE = "['’]"

Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]


def _rule(pattern: str, replacement: str | Callable[[re.Match[str]], str], flags: int = re.IGNORECASE) -> Rule:
    if isinstance(replacement, str):
        fixed = replacement
        return re.compile(pattern, flags), lambda match: _cased(match, fixed)
    return re.compile(pattern, flags), replacement


# Third person to first, applied in order. "The" is required: "a user's password" and
# "how do user permissions work" are about users, not the user.
_TO_FIRST: list[Rule] = [
    _rule(rf"\bthe user{_APOSTROPHE}s\b", "my"),
    _rule(rf"\b(?:does|do) the {_USER}", "do I"),
    _rule(rf"\b(?:has|have) the {_USER}", "have I"),
    _rule(rf"\bis the {_USER}", "am I"),
    _rule(rf"\bwas the {_USER}", "was I"),
    _rule(rf"\b({_MODALS}) the {_USER}", lambda m: f"{m.group(1)} I"),
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

# First person to third. "I" as a letter or a numeral is left as it is where it reads so:
# "I/O", "I-beam", "Type I", "World War I", "Part I".
_NUMERAL_BEFORE = "".join(
    rf"(?<!(?i:{word})[\s-])"
    for word in ("type", "war", "part", "phase", "stage", "class", "chapter", "act", "grade", "level", "episode")
)
_I = rf"{_NUMERAL_BEFORE}(?<!-)\bI\b(?![/-])"
_TO_THIRD: list[Rule] = [
    _rule(rf"\bdo {_I}", "does the user"),
    _rule(rf"\bhave {_I}", "has the user"),
    _rule(rf"\bam {_I}", "is the user"),
    _rule(rf"\b({_MODALS}|was) {_I}", lambda m: f"{m.group(1)} the user"),
    _rule(rf"\bI(?:{_APOSTROPHE}m| am)\b", "the user is", 0),
    _rule(rf"\bI(?:{_APOSTROPHE}ve| have)\b", "the user has", 0),
    _rule(rf"\bI{_APOSTROPHE}d\b", "the user would", 0),
    _rule(rf"\bI{_APOSTROPHE}ll\b", "the user will", 0),
    _rule(rf"{_I} do\b", "the user does", 0),
    _rule(_I, "the user", 0),
    _rule(r"\b(?:my|mine)\b", "the user's"),
    _rule(r"\bmyself\b", "the user themselves"),
    _rule(r"\bme\b", "the user"),
]

# The speaker: "I" as _I reads it (not "I/O", "Type I"), "me", "my", "mine", "myself".
_FIRST_PERSON = re.compile(rf"(?-i:{_I})|\b(?:me|my|mine|myself)\b", re.IGNORECASE)
_OPENS = frozenset('.!?"“(')


def _cased(match: re.Match[str], replacement: str) -> str:
    """``replacement`` begun with a capital where a sentence begins at the match ("I"
    and "I am" always begin with one)."""
    if replacement.startswith("I ") or replacement == "I":
        return replacement
    text, at = match.string, match.start() - 1
    while at >= 0 and text[at].isspace():  # only the spaces before it: no copy of the text
        at -= 1
    if at < 0 or text[at] in _OPENS:
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


def first_person(text: str) -> str | None:
    """``text`` in the first person, where it names "the user" ("where does the user
    live?" → "where do I live?"); None where it does not, where it speaks in the first
    person already (there "the user" is someone else: "how do I log the user out?"), or
    is longer than ``MAX_CHARS``."""
    if len(text) > MAX_CHARS or _FIRST_PERSON.search(text):  # beside "I", "the user" is someone else
        return None
    return _named_user_as_i(text)


def _named_user_as_i(text: str) -> str | None:
    """``text`` with "the user" as "I" (``_TO_FIRST``), where it names the user; else None."""
    if "user" not in text.casefold():
        return None
    rewritten = _rewritten(_TO_FIRST, text)
    return rewritten if rewritten != text else None


def third_person(text: str) -> str | None:
    """``text`` with "the user" for "I", where it speaks in the first person ("where do I
    live?" → "where does the user live?"); None where it does not, where it names "the
    user" too (two people: "how do I log the user out?" is not about one), or is longer
    than ``MAX_CHARS``."""
    if len(text) > MAX_CHARS or not _FIRST_PERSON.search(text) or _named_user_as_i(text) is not None:
        return None
    rewritten = _rewritten(_TO_THIRD, text)
    return rewritten if rewritten != text else None


def other_person(text: str) -> Phrasing | None:
    """``text`` rewritten in the other person: where it names "the user", in the first
    person; else where it speaks in the first person, with "the user". None where it
    does neither (nothing to rewrite), or is longer than ``MAX_CHARS``."""
    if (first := first_person(text)) is not None:
        return Phrasing(first, first_person=True)
    if (third := third_person(text)) is not None:
        return Phrasing(third, first_person=False)
    return None
