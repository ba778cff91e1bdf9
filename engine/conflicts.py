"""Conflicts on write: does a new memory replace, contradict or repeat an older one?

Pure rules for English and Chinese, no I/O. Each text is read into *claims*:
who it is about (the holder: "I", "the user", "用户" are one holder; "Alice",
"小王", "the user's sister" are others), a *slot* (what is said about them),
a value, a polarity and whether the text marks a change ("now", "no longer",
"moved", "quit", "现在", "不再", "改成", "搬到", "戒", a final "不…了").

Slots come in two kinds:

* single-valued — residence, employer, name, birthplace, an attribute
  ("my favourite drink is …", "the deadline is …", "主题改成 …", "X: value"),
  and preferences whose value has a known class (a colour, a display theme, a
  notification channel: "I like blue" and "把主题改成黑色" are both the colour
  preference). A different value replaces the older one; for attributes that do
  not change (birthday, birthplace, blood type) it contradicts instead;
* many-valued — likes and habits ("likes coffee", "plays tennis", "喜欢猫"),
  states ("is vegetarian", "是素食者"), possessions ("has a car", "有驾照"),
  allergies. Only the same value with the opposite polarity clashes: with a
  change marker the newer replaces ("I like coffee" → "I quit coffee"), without
  one nothing says which is true, so they contradict ("I like coffee" /
  "I don't like coffee").

A replacement is whole: an older text is replaced only where every claim it makes is
replaced or repeated and it says nothing the rules do not read; where it says more ("My
name is Anna and I live in Oslo" → "I live in Bergen now") the two contradict, so that
nothing it holds leaves recall (``judge``).

The same claim twice is a duplicate. Memories that carry the same explicit
``key`` are the same subject: the newer replaces the older (or repeats it);
different keys are different subjects. Anything else is unrelated.

Verdicts are computed by ``judge``; ``detect`` runs it over candidates and may
consult an optional ``ConflictJudge`` (for example one that asks an LLM) for the
pairs the rules leave unrelated. No judge is required.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Literal, Protocol

from engine import entities
from engine.entities import ALIASES, canonical_key
from engine.text import is_chinese, terms, without_chinese

# Edge kinds (DESIGN.md): newer → older for SUPERSEDES; CONTRADICTS is read in both directions;
# MERGED_INTO from each source of a consolidation's merge to the merged memory (engine.lifecycle),
# named here with the other links a replacement follows, so that engine.supersession reads it
# without importing the consolidation.
SUPERSEDES = "SUPERSEDES"
CONTRADICTS = "CONTRADICTS"
MERGED_INTO = "MERGED_INTO"
# How many memories each candidate channel (semantic, each shared entity) offers the detector.
CANDIDATES_PER_CHANNEL = 20


class Verdict(StrEnum):
    REPLACE = "replace"
    CONTRADICT = "contradict"
    DUPLICATE = "duplicate"
    UNRELATED = "unrelated"


@dataclass(frozen=True, slots=True)
class Statement:
    """One memory as the detector sees it."""

    text: str
    key: str | None = None
    memory_id: str = ""


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    reason: str


@dataclass(frozen=True, slots=True)
class Claim:
    holder: str
    slot: str
    value: str
    positive: bool = True
    change: bool = False
    # The reading names a slot that holds one value by itself: a rule for residence,
    # employer or name, a setting verb ("change my theme to …"), or an attribute whose
    # name says so ("deadline", "favourite colour", "时区").
    unique: bool = False
    # The claim is the holder's own: a subject and its verb, or a possessive ("my car is …").
    owned: bool = False

    @property
    def single_valued(self) -> bool:
        return self.slot in _SINGLE_SLOTS or self.slot.startswith(("attr:", "pref:"))

    @property
    def immutable(self) -> bool:
        return self.slot in _IMMUTABLE_SLOTS or any(word in self.slot for word in _IMMUTABLE_ATTRS)


class ConflictJudge(Protocol):
    """A second opinion for pairs the rules call unrelated (e.g. an LLM); None abstains."""

    def __call__(self, new: Statement, old: Statement) -> Judgement | None: ...


_SINGLE_SLOTS = frozenset({"residence", "employer", "name", "birthplace"})
_IMMUTABLE_SLOTS = frozenset({"birthplace"})
_IMMUTABLE_ATTRS = ("birthday", "birth date", "date of birth", "blood type", "生日", "血型", "出生")

# Values with a class make a preference single-valued: one colour, one theme, one channel.
_VALUE_CLASSES: dict[str, frozenset[str]] = {
    "colour": frozenset("blue black white red green yellow purple pink orange grey brown".split()),
    "theme": frozenset({"dark mode", "light mode", "dark", "light", "深色", "浅色", "暗色", "亮色"}),
    "channel": frozenset({"email", "sms", "wechat", "phone call"}),
}
# Broader words a value may be filed under ("stopped drinking alcohol" covers wine).
_BROADER: dict[str, str] = {
    "wine": "alcohol",
    "beer": "alcohol",
    "whisky": "alcohol",
    "红酒": "alcohol",
    "啤酒": "alcohol",
}

# Words that say when or how often, not what: dropped from values before comparing.
_FILLER = frozenset(
    """every morn even night day week weekend month year time today tomorrow yesterday last next ago just
    recent recently lot really also still usual usually alway often sometim now anymor ani more much
    januari februari march april may june juli august septemb octob novemb decemb
    drink eat use play watch write read listen take have get go cup two three one
    after befor dure sinc becaus due
    每天 早上 晚上 周末 经常 常常 平时 最近 现在 已经 一直 每周 上个月 去年 今年 半年 一年 两次 一次 一杯 两杯
    了 的 吃 喝 看 玩 用 打 听 说 做 过 再 都 很 非常 特别 更 最 也 还""".split()
)


# --- reading text into claims -----------------------------------------------------------

# A text is read by the Chinese rules where it holds a Han character.
_HAN = re.compile(r"[\u4e00-\u9fff]")
# "(?<!\s)": from the first space of a run only; tried from every one, a run of n took n².
# Captured, so that a clause is known to be joined by "and", "but", "so" or "then".
_CLAUSE_SPLIT = re.compile(
    r"([.;!?\n，,。；！？]+|(?<!\s)(?!(?<=\bon)\s+and\s+off\b)(?!(?<=\boff)\s+and\s+on\b)\s+(?:and|but|so|then)\s+|"
    r"(?:并且|而且|但是|但|然后|所以))"
)
_EN_JOINED = frozenset({"and", "but", "so", "then"})


def _clauses(sentence: str) -> Iterator[tuple[str, str, str]]:
    """The clauses of ``sentence``, each with the "and", "but", "so" or "then" that joins it
    to the one before ("I met Tom and moved to Paris"), or "" where none does, and what
    split it from the one before (a joiner, punctuation, or "" for the first)."""
    parts = _CLAUSE_SPLIT.split(sentence)
    for at in range(0, len(parts), 2):
        split = parts[at - 1].strip() if at > 0 else ""
        yield parts[at], split if split in _EN_JOINED else "", split


def _normal(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    for short, full in (
        ("n't", " not"),
        ("can not", "cannot"),
        ("'m", " am"),
        ("'re", " are"),
        ("'ve", " have"),
    ):
        text = text.replace(short, full)
    return text.replace("cannot", "can not").replace("ca not", "can not").replace("wo not", "will not")


def claims(text: str) -> tuple[Claim, ...]:
    """Every claim the rules can read in ``text`` (cached: a memory is judged against many)."""
    return _claims(text).claims


@dataclass(frozen=True, slots=True)
class _Reading:
    """What the rules read in a text: its claims, and the clauses that say something they
    read no claim in ("… and I love my dog", a question, someone else's home after "he").
    A memory with unread clauses holds more than its claims, so a newer memory that replaces
    every claim still does not replace all it says."""

    claims: tuple[Claim, ...]
    unread: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Voice:
    """Whose words a text is: ``me`` is who "I", "my", "我" refer to (the user, or the
    speaker a ``Name:`` prefix names); in a speaker's line "he", "she", "他" are someone
    else, never the user."""

    me: str = "user"
    spoken: bool = False
    # The text says "I", "my", "我": its "he"/"she"/"他" is never who speaks it.
    first_person: bool = False
    # A clause before was read: a "he", "she", "他" that opens the text follows no one, and is
    # someone unread ("他搬到北京了", "He moved to Berlin"), not the user.
    opened: bool = False
    # Names the text gives after a verb of fondness or "a friend of" ("The user loves Anna",
    # "… is a friend of Tom"), and in Chinese text ("用户是Anna的粉丝"), casefolded: read
    # lowercased, "loves anna" could be "loves coffee" (see _after).
    fond_of: frozenset[str] = frozenset()


# A text that takes back what it says ("I told you I live in Paris, but I lied", "just
# kidding", "其实是骗你的", "…是开玩笑的"): whatever it claims, the speaker says is untrue.
# Read whole, not clause by clause: what is taken back may come before or after.
# Not one said to be no lie: "不是骗你的", "我没骗你", "这不是开玩笑的", "别以为我在开玩笑",
# "骗你是小狗" insist on what they say; nor "JK Rowling".
_RETRACTED = re.compile(
    r"\b(?:(?:i|we) (?:lied|(?:was|were|am|are) (?:lying|joking|kidding)|"
    r"made (?:that|it) up(?! (?:to|the|into|onto|a|some)\b))|"
    r"just (?:kidding|joking)|jk(?=\s*(?:[^\w\s]|$))|"
    r"(?:that|it|this)(?:'s| is| was) (?:a lie|a joke|not true|untrue|made up)|(?:that|it|this) (?:was|is) not true)\b|"
    r"(?<![不没别])(?<!不是)(?<!没有)(?<!以为我)(?<!以为我在)(?:骗你(?!是小狗)|逗你(?:玩|的)|开玩笑(?:的|呢|啦)?(?:啦|呢|哈|嘛)?\W*$)|"
    r"(?:那|这)(?:些)?(?:都)?是假的|不是真的"
)

# Nor another's word that the speaker lied: "Tom thinks I lied, but I live in Paris".
_ANOTHER_SAYS = re.compile(
    r"\b(?!(?:i|we)\b)\w+ (?:says|said|thinks|thought|claims|claimed|believes|insists|insisted) "
    r"(?:that )?$"
)


def _retracted(said: str) -> bool:
    return any(
        _ANOTHER_SAYS.search(said, max(0, taken.start() - 40), taken.start()) is None
        for taken in _RETRACTED.finditer(said)
    )


@lru_cache(maxsize=8192)
def _claims(text: str) -> _Reading:
    voice, body = _voice(text)
    if voice is None:
        return _Reading(())
    if _retracted(_normal(body)):
        # No claim, but it says something: a later home replaces none of it either.
        return _Reading((), (body.strip(),))
    found: list[Claim] = []
    unread: list[str] = []
    # Whom the he/she/they of the next clause are, and whom it is about if it has no
    # subject and is joined to the one before by "and" (see _Subject).
    holder = joined = voice.me
    # Whom a Chinese clause with no subject goes on with: the holder, but after "用户喜欢张伟"
    # the user, where a 他 may be 张伟 ("用户喜欢张伟，住在上海" is the user's home).
    subject = voice.me
    infinitive = speaker = away = False
    voice = replace(voice, first_person=bool(_FIRST_PERSON_WORD.search(_normal(body))), fond_of=_fond_of(body))
    # "I moved to Paris. Only for two weeks though.": the move is a stay, as one clause would say.
    stints = _stint_said(body)
    for at, sentence in enumerate(_SENTENCE.findall(body)):
        if _question(sentence):
            if _says_something(sentence):
                unread.append(sentence.strip())
            continue
        dated = False
        home = False  # the clause before, in this sentence, held a claim of a home
        for clause, joiner, split in _clauses(_normal(sentence)):
            clause = clause.strip(" :-\"'“”「」")
            if not clause or _chatter(clause):
                continue
            if _HAN.search(clause):
                clause = _ZH_TOLD.sub("", clause)
                read, holder, subject = _chinese_clause(clause, holder, voice, subject)
                joined, speaker = holder, False
            else:
                # "but" sets what holds against the verb left open ("I wanted to stay but live in …").
                open_verb = infinitive and joiner != "but"
                read, holder, joined, speaker = _english_clause(
                    clause, holder, voice, joined if joiner else None, infinitive=open_verb, speaker=speaker
                )
                subject = holder
            if not voice.opened:
                voice = replace(voice, opened=True)
            read = [claim for claim in read if claim.value not in _NO_VALUE and _SOMEONE not in claim.holder]
            if not _HAN.search(clause) and not _named_move(clause, sentence):
                read = [claim for claim in read if claim.slot != "residence"]
            infinitive = not _HAN.search(clause) and bool(_EN_INFINITIVE.search(clause))
            if at in stints:
                read = [claim for claim in read if claim.slot not in ("residence", "employer")]
            if dated:
                # "我今天在上海，住在酒店", "I'm in Shanghai this week and stay in Pudong": where the
                # holder stays or works that day is no home or employer, unless they say it
                # changed ("去年我在上海工作，现在住在北京").
                read = [claim for claim in read if claim.change or claim.slot not in ("residence", "employer")]
            elif away and _STAY.search(clause):
                # "I'm on a trip. I stay in Shanghai", "我在出差。我住在外滩附近": past its
                # sentence a trip still tells a stay from a home; "… I live in Shanghai" is
                # a home, and so is a move ("我在出差。我搬到上海住了"), but not one the
                # claim does not make ("… while they are moving the office"), nor a 现在.
                # A trip's own stay (_chinese_subject) stays, to meet the same trip again.
                moved = bool(_MOVED.search(clause))
                read = [
                    claim
                    for claim in read
                    if claim.slot != "residence" or (moved and claim.change) or _ZH_TRIP.search(claim.holder)
                ]
            # A stay for now ("我临时搬到上海，住在浦东", "我搬到上海住一段时间，住在…"): where
            # the holder stays then is no home either, as after a day.
            dated = dated or _dated(clause) or _zh_for_now(clause) or _zh_while(clause)
            away = away or _away(clause, read)
            found += read
            role = _EN_ROLE.search(clause) if any(claim.slot == "employer" for claim in read) else None
            if role is not None and _says_something(role.group(1)):
                # "I work as a nurse at Acme": the employer rule reads Acme, not the role.
                unread.append(role.group(0))
            holds_home = any(claim.slot == "residence" for claim in read)
            if holds_home:
                # "I live in Oslo with my wife", "我和老婆住在奥斯陆": the home rule reads Oslo,
                # not who shares it; a move replaces the home, not the wife.
                unread += [found_with.group(0) for found_with in _COMPANION.finditer(clause)]
                unread += [
                    found_with.group(1)
                    for found_with in [_ZH_COMPANION.match(clause)]
                    if found_with and not re.fullmatch(_ZH_WITH_EMPLOYER, found_with.group(1))
                ]
            if (
                not read
                and _says_something(clause)
                and not _DISCOURSE.fullmatch(clause)
                and not (home and split == "," and _detail(clause, sentence))
            ):
                unread.append(clause)
            home = holds_home
    return _Reading(tuple(found), tuple(unread))


# A short phrase after a comma that says where, not what: "I live in Berlin, Germany",
# "I live in Porto, by the river". With the home before it, it goes when the home does.
# Only phrases known to name a place: "in debt", "at Google", "on medication", "near Anna",
# "Dog Lover" or "Vegan" say something of the holder, and a memory holding one says more.
_EN_DETAIL_LEAD = re.compile(r"^(?:(?:by|near|outside|close to|next to) the\b|downtown$)")
_EN_DETAIL_NOT = frozenset({"i", "we", "he", "she", "they", "you", "me", "my", "our", "his", "her", "their", "your"})
# The last word of a capitalised place that is not a country: "Upper West Side", "Kreuzberg
# District".
_EN_PLACE_KINDS = frozenset(
    """side district quarter borough county state province region area city town village island
    coast valley heights hills park beach bay shore""".split()
)
_EN_COUNTRIES = frozenset(
    """germany france spain portugal italy norway sweden denmark finland iceland ireland england scotland
    wales uk usa us america canada mexico brazil argentina chile peru colombia china japan korea india
    taiwan singapore malaysia thailand vietnam indonesia philippines australia zealand austria
    switzerland belgium netherlands holland poland czechia hungary greece turkey russia ukraine romania
    egypt israel morocco kenya nigeria california texas florida""".split()
)


def _detail(clause: str, sentence: str) -> bool:
    """Whether ``clause`` (read, lowercased, from ``sentence``), split by a comma from a home
    before it, only tells that home more closely: at most three English words, naming no one,
    that name a place (a country, or capitalised words as written ending in a kind of place:
    "Germany", "Upper West Side") or open with a word of place and "the" ("by the river").
    Anything else it says, or anything the rules are unsure of, is information of its own."""
    # "I live in Oslo, Norway now": the "now" says when the home holds, not more of it.
    words = re.sub(r"(?: (?:now|currently|these days))+$", "", clause).split()
    if not 0 < len(words) <= 3 or _HAN.search(clause) or _EN_DETAIL_NOT & set(words):
        return False
    if _EN_DETAIL_LEAD.match(clause):
        return True
    written = re.search(r"(?<!\w)" + r"\W+".join(map(re.escape, words)) + r"(?!\w)", sentence, re.IGNORECASE)
    if written is None or not all(word[:1].isupper() for word in re.findall(r"\w+", written.group())):
        return False
    return " ".join(words[-2:]) == "new zealand" or words[-1] in _EN_COUNTRIES or words[-1] in _EN_PLACE_KINDS


# The role an English employer clause names besides the employer ("works as a nurse at
# Acme", "works at Acme as a nurse"), which no claim holds.
_EN_ROLE = re.compile(
    r"\bas (?!well\b|of\b|before\b|always\b|planned\b)(?:an? |the )?([a-z][a-z ]*?)(?= (?:at|for|by)\b|$)"
)


# Who shares a home, or lives near it, beside the home a clause names: "with my wife", "near
# my older sister", but not the word after ("with my wife in Oslo", "… now": a move "with my
# wife" repeats it). In Chinese, before the first verb of the home or move ("我和老婆住在…",
# "我和老婆搬到…"): a 和 or 同 in the place after it is no one ("我住在和平里住了十年").
_EN_COMPANION_NOT = (
    "in|at|on|to|near|by|with|from|for|of|since|until|till|now|then|here|there|today|currently|still|too|"
    "as|and|or|but|so|last|this|these|next|who|which|that|when|while|because|after|before|again|anymore"
)
_COMPANION = re.compile(
    r"\b(?:together )?(?:with|near) (?:my|our|his|her|their|the user's) [a-z]+"
    rf"(?: (?!(?:{_EN_COMPANION_NOT})\b)[a-z]+)?\b"
)
_ZH_COMPANION = re.compile(
    r"[^住搬，。,.]*?([和跟与同随带][^住搬，。,.]{1,8}?)(?=(?:一起)?(?:住|生活在|定居在|搬到|搬去|搬来))"
)


# "As I said", "like I mentioned": what follows is said again, no more than it says.
_EN_TOLD = r"(?:as|like) (?:i|we) (?:said|mentioned|told you)(?: before| earlier)?"
# A clause of words that only open or pace a sentence ("Actually, …", "By the way, …",
# "对了，…"): it says nothing of its own.
_DISCOURSE = re.compile(
    r"(?:(?:actually|well|btw|by the way|anyway|anyhow|currently|basically|honestly|oh|ok|okay|yes|yeah|so|"
    rf"also|fyi|hey|{_EN_TOLD}|对了|嗯|其实|另外|顺便说一下|顺便|目前|现在|好的|哦)\s*)+"
)


def _says_something(clause: str) -> bool:
    """Whether a clause the rules read no claim in still holds words of its own (not
    "now", "so", "and"): a memory holding one says more than its claims."""
    return any(term not in _FILLER for term in terms(clause))


# Someone a clause names but the rules cannot tell apart from anyone else's: "he" after a
# clause about the speaker ("I met Tom. He …"), "他" in a speaker's line, "his wife", "the
# user's doctor", or whoever a clause names besides its subject ("The user met a friend.
# He …", "用户有个朋友，住在…"). The clauses after it without a subject of their own, and its
# "he", "she", "they", are theirs, and nothing read about them is kept: two texts' "he"
# need not be one person.
_SOMEONE = "\x00someone"


# A value that only points elsewhere ("I like it", "他们不喜欢我") says nothing to compare.
_NO_VALUE = frozenset(
    {"", *"it this that them him her me us you one 我 你 他 她 它 我们 你们 他们 她们 这 那 这个 那个".split()}
)


# A trip: it holds for the clauses after it in its sentence, as a day does (_EN_PERIOD),
# and for the stays in the sentences after it too ("I'm on a trip. I stay in …").
_EN_TRIP_WORDS = (
    r"on (?:a |my |the |our |this )?(?:(?:business|work|road|school|family|ski|camping) )?(?:trip|vacation|holiday)|"
    r"on business|on the road|while (?:(?:i|we|he|she|they) (?:am |are |is )?)?(?:travel|visit)\w*|"
    r"(?:am|are|is) (?:currently |still |now |just )?(?:travell?ing|visiting|backpacking|touring|sightseeing)"
)
_EN_TRIP = re.compile(rf"\b(?:{_EN_TRIP_WORDS})\b")
# Where one stays, which after a trip is no home: "stay", and "住" but not "居住" (reside).
_STAY = re.compile(r"\bstay(?:s|ing|ed)?\b|(?<!居)住")


def _away(clause: str, read: list[Claim]) -> bool:
    """Whether ``clause`` says its holder is on a trip ("I'm on a trip", "我在出差"); not a
    Chinese clause that reads a claim of its own ("我喜欢旅游": a taste, not a trip)."""
    if _HAN.search(clause):
        return not read and bool(_ZH_TRIP.search(clause))
    return bool(_EN_TRIP.search(clause))


# When a clause holds: a day, a week, a date gone by or to come. Not since when
# ("从去年开始", "2020年起", "as of today"), nor a move or a new job on that day ("我上个月搬家了，现在住在…").
# For how long, or for what a stay is: a move said so is a stay too ("I moved to Paris for a week").
# "For a while", "for the time being", "temporarily" and "for now" say so without a length
# (the Chinese 暂时, 临时: _ZH_TEMPORARY).
# A count of days to years: "six", "6", "a few", "a couple of", "one or two" (_EN_FOR_A_WHILE).
_EN_COUNT = (
    r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|eighteen|twenty|thirty|"
    r"a few|a couple(?: of)?|a couple more|a few more|few|couple(?: of)?|several|some|\d+(?:\.\d+)?)"
)
# An end that a stay is said to have: "until June", "till the end of the year", "'til my lease
# ends", "up until Christmas", "through the summer", "through March". Not "through an agency".
_EN_UNTIL = (
    r"(?:(?:up|right|only|just) )?(?:until|till|til)(?: [\w'-]+)+|"
    r"(?:through|thru) (?:to )?(?:the )?(?:(?:end|rest|middle) of (?:the )?)?(?:summer|winter|spring|autumn|fall|"
    r"holidays|christmas|new year|easter|semester|term|school year|academic year|year|month|week|weekend|season|"
    r"january|february|march|april|may|june|july|august|september|october|november|december|next \w+|\d{4})"
)
# Work or study for a term: "a six-month contract", "a fixed-term contract", "a temporary job".
_EN_TERM = (
    rf"(?:{_EN_COUNT}[- ](?:day|week|month|year)(?:[- ]long)? |"
    r"(?:short|fixed|limited)[- ]term |temporary |temp |interim )"
    r"(?:contract|assignment|project|placement|posting|rotation|stint|exchange|internship|job|gig|position|role)"
)
_EN_FOR_A_WHILE = (
    r"(?:for|over) the (?:week|weekend|night|holidays?|summer|winter|semester|term|(?:school|academic) year|season)|"
    r"for the rest of the (?:week|month|year|summer|winter|semester)|"
    r"for (?:a|an|the|my|our|her|his) (?:conference|festival|wedding|funeral|event|meeting|course|workshop|"
    r"internship|sabbatical|secondment|fellowship|residency)|"
    rf"for (?:(?:about|around|roughly|approximately|approx|maybe|perhaps|probably|at least|at most|up to|only|just|"
    rf"the next|the coming|the first|another|an extra|a further) )*{_EN_COUNT}(?:(?: or |-| to ){_EN_COUNT})? "
    r"(?:(?:more|further|extra) )?(?:days?|nights?|weeks?|months?|years?|semesters?|terms?|quarters?)|"
    r"for (?:the next|the coming) (?:days?|weeks?|months?|years?|semester|term|quarter)|for half a (?:year|month)|"
    r"for (?:a (?:little |short |good |long )?while|a bit|a short time|the time being|now)|temporarily|"
    # An end said ("until June", "till the end of the year", "through the summer"): a stay, however long.
    rf"{_EN_UNTIL}|"
    # A term of work or study ("on a six-month contract", "on secondment", "for an exchange semester").
    rf"(?:on|for) (?:a|an|my|the) {_EN_TERM}|"
    r"on (?:a |an )?(?:secondment|assignment|exchange|rotation|placement|sabbatical)|"
    r"for (?:a |an |my |the )?(?:(?:student|study|academic|university|school) )?exchange|"
    r"for (?:a|an|my|the) (?:stint|gap year|working holiday|year abroad|semester abroad)|"
    r"on (?:a )?working holiday|for the duration of|"
    # While the home is being done up ("I moved to Paris while my flat is being renovated").
    r"while (?:my|our|the) (?:flat|apartment|house|home|place) is (?:being )?(?:renovated|repaired|rebuilt|"
    r"refurbished|redone|remodell?ed|fixed up|done up)|"
    # An intern or a temp, by the role ("I joined Globex as a summer intern").
    r"as (?:a|an) (?:(?:summer|paid|unpaid|research|software|\w+) )?(?:intern|temp)"
)
_EN_PERIOD = re.compile(
    r"\b(?:(?<!as of )today|tonight|tomorrow|(?:this|next) (?:week|weekend|month|summer|winter|spring|autumn|fall)|"
    rf"{_EN_FOR_A_WHILE}|"
    rf"on (?:(?:mon|tues|wednes|thurs|fri|satur|sun)days?|weekends|weekdays)|during the|{_EN_TRIP_WORDS})\b"
)
# Where the holder lives part of the time only ("half the time", "in the summer"), or not in
# earnest ("in my dreams", "as a joke"): the home they had may still be theirs.
_EN_PART_TIME = (
    r"half (?:of )?the (?:time|year|week|month)|part of the (?:time|year|week|month)|part[- ]time|"
    r"(?:some|most) of the (?:time|year)|sometimes|occasionally|on and off|off and on|seasonally|"
    r"every (?:other )?(?:summer|winter|spring|autumn|fall|weekend|week|month|year)"
)
# A season, of where the holder lives ("I live in Nice in the summer"), not of when they moved
# ("I moved to Paris in the summer" is a move).
_EN_IN_SEASON = r"in (?:the )?(?:summers?|winters?|springs?|autumns?)"
_EN_NOT_IN_EARNEST = (
    r"in (?:my|a|her|his|their|our) (?:(?:wildest )?dreams?|head|imagination|fantas(?:y|ies)|mind)|"
    r"(?:as|for) a (?:joke|prank|gag|laugh)|jokingly|in (?:the|a|my) (?:game|story|novel|book|movie|film|role-?play)|"
    r"in (?:another|a past|a previous|a parallel) (?:life|universe|world)|on paper"
)
# A stay, not a home: "I moved to Paris for a while", "I live in Paris half the time", "…
# in my dreams". The home the holder had stays where it was.
_EN_STINT = re.compile(rf"\b(?:{_EN_FOR_A_WHILE}|{_EN_PART_TIME}|{_EN_NOT_IN_EARNEST})\b")
_EN_SEASONAL = re.compile(rf"\b{_EN_IN_SEASON}\b")
# And in Chinese: "我搬到上海住一段时间", "…出差一周", "…过暑假", "…住两个星期"; not since
# when ("我搬来上海已经一周了", "…住一年了", "我搬到上海有一段时间了", "…一阵子了").
# An end said ("住到六月", "待到年底", "直到明年", "到明年三月为止", "干到合同结束"): a stay,
# however long. A date must follow 到, which is also the 到 of 搬到上海.
_ZH_NUMBER = "[0-9零〇一二两三四五六七八九十几半]"
_ZH_UNTIL = (
    r"(?:(?:住|待|呆|留|干|做|工作|上班)(?:到|至)|直到|^(?:只|就|先|大概|可能)?(?:到|至))"
    r"(?:今年|明年|后年|下半年|(?:今年|明年)?(?:年底|年中|年初|月底)|"
    rf"(?:今年|明年)?{_ZH_NUMBER}{{1,3}}月(?:份|底|初|中)?|下个?月(?:底)?|(?:这个|今年)?(?:夏天|冬天|春天|秋天)|"
    r"(?:这个|今年)?(?:暑假|寒假)|春节|过年|毕业|合同(?:到期|结束)|项目结束)(?:为止|前|之前|结束)?"
)
# Work or study for a term ("合同半年", "签了一年的合同", "交换一学期", "短期合同"), as a stay is.
# Months only: a labour contract of a year or three is how most jobs in China are signed.
_ZH_TERM = (
    rf"(?:合同期?|劳动合同)(?:只有|只签了?|签了?|是|为)?(?:{_ZH_NUMBER}{{1,3}}个月|半年)|"
    rf"(?:签了?)?(?:{_ZH_NUMBER}{{1,3}}个月|半年)的?(?:合同|劳动合同)|短期合同|"
    rf"交换(?:{_ZH_NUMBER}{{1,3}}(?:个?学期|年|个月))?|做交换生|当交换生|"
    rf"(?:做|干|参与)(?:{_ZH_NUMBER}{{1,3}}个月|半年|一年)的?项目|读(?:{_ZH_NUMBER}{{1,3}}(?:个月|年|个?学期))的?书"
)
_ZH_STINT = re.compile(
    r"暂时|临时(?!决定|起意)|出差|(?:过|度)(?:暑假|寒假|假期|周末|春节|年)|(?<!已经)(?:一段时间|一阵子)(?![了来])|"
    rf"(?:住|待|呆)上?(?:{_ZH_NUMBER}{{1,3}}(?:天|晚|周|个?星期|个?礼拜|个?月|年|个?学期)(?!了))|"
    rf"{_ZH_UNTIL}|{_ZH_TERM}"
)
# The same said in a clause of its own, before or after the home or move ("I moved to Paris.
# Only for two weeks though.", "…, it's just for a month", "In my dreams, I live in Paris",
# "我搬到上海了，只住两个星期", "…，不过只是暂时的"): the text's homes and employers are stays.
# Only a clause that says nothing else, so that "I'm in Rome for a week" after a move is no
# such word on the move, nor "That's it for now".
# When a return is planned for, said after "back" with no subject: by a day or a season,
# next month or year, in a named month or season, at the end of something.
_EN_BACK_BY = (
    r"by (?!popular|the way|accident|mistake|chance|default)|"
    r"next (?:year|month|spring|summer|autumn|fall|winter|term|semester)|"
    r"in (?:the )?(?:spring|summer|autumn|fall|winter|new year)|"
    r"in (?:january|february|march|april|may|june|july|august|september|october|november|december)|"
    r"at the end of|after (?:the|my|our|this)|before (?:the|my|our|christmas|summer|winter)"
)
# A return planned ("I moved to Paris, I'll be back in Berlin by Christmas", "我搬到上海，明年就回
# 北京"): the move is a stay. Only the holder's own return said as a plan, not "go back to work".
_EN_RETURN = (
    r"(?:(?:i|we)(?:'ll| will| shall| am going to| are going to| plan to| intend to| hope to| expect to) (?:also )?"
    r"(?:be back|come back|move back|return|go back home|head back home)"
    # Said without a subject, a return with its date ("Moved to Paris for work, back in Berlin
    # by March"): a plan, as "I'll be back in Berlin by March" is. Undated ("back in Berlin
    # now") it may be a move back or a visit: no stay. Nor "back in 2019 I lived in Rome",
    # "back then": a time gone by, and a clause of its own after it.
    r"|back(?![\w' -]*\b(?:i|we|he|she|they|you|it|then)\b)"
    rf"(?=(?: home| (?:in|to) [\w'-]+(?: [\w'-]+)?)? (?:{_EN_BACK_BY})\b))"
    # Not back for a visit, an errand, a holiday or now and then ("I'll be back in Berlin to visit
    # my parents", "... for Christmas", "... every few months", "I'll return to work"): the move stands.
    r"(?![\w' -]*\b(?:to (?:visit|see|pick|get|collect|grab|fetch|sell|pack|sign|attend|celebrate|spend|work|the "
    r"office|school|class|college|uni)|visit(?:s|ing)?|for (?!good\b)|every|each|often|occasionally|sometimes|"
    r"regularly|now and then|from time to time|tomorrow|on business)\b)"
    r"(?: [\w' -]+)?"
    # Not back from a break ("I'll be back in five minutes", "... later", "brb").
    r"(?<!\bminutes)(?<!\bminute)(?<!\bmins)(?<!\bmin)(?<!\bhours)(?<!\bhour)(?<!\bseconds)(?<!\bsec)(?<!\blater)"
    r"(?<!\bin a bit)(?<!\bin a moment)(?<!\btonight)(?<!\bafter lunch)(?<!\bin a while)"
)
_ZH_RETURN_WHEN = (
    rf"(?:今年|明年|后年|年底|年初|月底|下个?月|下半年|(?:今年|明年)?{_ZH_NUMBER}{{1,3}}月份?|以后|将来|"
    rf"(?:过|等)(?:{_ZH_NUMBER}{{1,3}}|几)(?:天|周|个?星期|个?月|年)(?:以后|之后|后)?|毕业(?:以后|之后|后)?|"
    # After a while said as such ("三个月后回上海", "之后再回上海").
    rf"(?:{_ZH_NUMBER}{{1,3}}|几)(?:天|周|个?星期|个?月|年)(?:以后|之后|后)|之后|然后)"
)
_ZH_MEANS = r"(?:就|再|会|要|还会|还要|打算|准备|计划|想)"
_ZH_RETURN = (
    rf"(?:{_ZH_MEANS}*{_ZH_RETURN_WHEN}{_ZH_MEANS}*|{_ZH_MEANS}+)(?:搬)?回"
    # Not back for a visit or an errand ("以后回北京探亲", "下个月回北京出差", "回去看看").
    r"(?![\u4e00-\u9fff]{0,4}?(?:探亲|看|出差|玩|办事|拿|取|开会|参加|度假|旅游|过年|过节|一趟|一次|几天))"
    r"(?:来|去|[\u4e00-\u9fff]{1,4})"
)
_EN_STINT_SAID = re.compile(
    r"(?:(?:but|though|although|and|well|so|anyway|it's|it is|that's|that is|this is|it will be|"
    r"it is going to be|it was|only|just|at least|at most|probably|maybe|mostly|i think|i guess|"
    r"hopefully|not for long|the move is|the plan is)\s+)*"
    rf"(?:{_EN_FOR_A_WHILE}|{_EN_PART_TIME}|{_EN_IN_SEASON}|{_EN_NOT_IN_EARNEST}|temporary|(?:a|an) {_EN_TERM}|"
    rf"not (?:permanent(?:ly)?|for good|forever)|{_EN_RETURN})"
    r"(?:\s+(?:though|anyway|at least|at most|or so|tops|probably|i think|i guess|hopefully|at first|for now))*"
)
_ZH_STINT_SAID = re.compile(
    r"(?:我们?)?(?:不过|但是?|可是|只是|而且|其实|就|只|也就|先|才|大概|可能|应该)*(?:是)?"
    r"(?:(?:暂时|临时)(?:的|性的|而已|罢了)?|不(?:会|打算|准备)?(?:长住|久住|久留|定居)|不是长期的?|"
    r"(?:住|待|呆)?上?(?:一段时间|一阵子?|[0-9零〇一二两三四五六七八九十几半]{1,3}(?:天|晚|周|个?星期|个?礼拜|个?月|年))"
    rf"(?:左右)?(?:而已|罢了)?|(?:{_ZH_UNTIL}|{_ZH_TERM})(?:而已|罢了)?|{_ZH_RETURN})"
    r"(?:啦|呢|吧|哦|而已)*"
)


def _stint_said(body: str) -> frozenset[int]:
    """The sentences of ``body`` (by their place) whose homes and moves a clause says are a
    stay (_EN_STINT_SAID, _ZH_STINT_SAID): its own sentence ("I moved to Paris, but only for
    a year", "In my dreams, I live in Paris"), or the one before where it stands alone ("I
    moved to Paris. Only for two weeks though."). Not another sentence ("I moved to Paris.
    Mom is staying with me, just for a month."), nor what a question asks ("Just for a week?
    No, for good.")."""
    stints: set[int] = set()
    before = None  # the sentence before, if it asked nothing
    for at, sentence in enumerate(_SENTENCE.findall(body)):
        if _question(sentence):
            before = None
            continue
        clauses = [clause.strip(" :-\"'“”「」") for clause, _, _ in _clauses(_normal(sentence))]
        clauses = [clause for clause in clauses if clause]
        for clause in clauses:
            said = _ZH_STINT_SAID if _HAN.search(clause) else _EN_STINT_SAID
            if said.fullmatch(clause):
                stints.add(at if len(clauses) > 1 or before is None else before)
        before = at
    return frozenset(stints)


def says_a_stay(text: str) -> bool:
    """Whether ``text`` says nothing but that something is a stay ("It's only for six
    months.", "只住半年。"): what ``continued`` reads with the speaker's text before it."""
    voice, body = _voice(text)
    return voice is not None and _only_a_stay(body)


def _only_a_stay(body: str) -> bool:
    said = False
    for sentence in _SENTENCE.findall(body):
        if _question(sentence):
            return False
        for clause, _, _ in _clauses(_normal(sentence)):
            clause = clause.strip(" :-\"'“”「」")
            if not clause or _DISCOURSE.fullmatch(clause):
                continue
            if not (_ZH_STINT_SAID if _HAN.search(clause) else _EN_STINT_SAID).fullmatch(clause):
                return False
            said = True
    return said


def continued(earlier: str, later: str) -> str | None:
    """``earlier`` and ``later`` read as one text, where ``later`` says only that what its
    speaker said before is a stay ("It's only for six months.", "Just until June though.",
    "只住半年。", "不过只是暂时的"), saved apart: "I moved to Paris." then "It's only for six
    months." is the stay that "I moved to Paris. It's only for six months." is
    (``_stint_said``). ``None`` where ``later`` says anything more (a claim, a question,
    any other clause), or is another speaker's line than ``earlier``: then it is read alone."""
    voice, body = _voice(later)
    earlier_voice, _ = _voice(earlier)
    if voice is None or earlier_voice is None or voice.me != earlier_voice.me or not _only_a_stay(body):
        return None
    joint = "" if _HAN.search(body[-1:] + earlier[-1:]) else " "
    end = "" if re.search(r"[.!?。！？]\s*$", earlier) else ("。" if _HAN.search(earlier) else ".")
    return f"{earlier.rstrip()}{end}{joint}{body.strip()}"


# Before the verb, for now: what the clause says holds for a while, not from now on.
# Not "临时决定", "临时起意": decided on the spot, not for now.
_ZH_TEMPORARY = re.compile(r"暂时|临时(?!决定|起意)")
# When, gone by: "我(和朋友)住在上海的时候很开心", "我在阿里工作那年…" tell of a time, not of
# where the holder lives or works now. Not "有时候", "平时", "小时", "时间".
_ZH_WHILE = re.compile(r"(?<![有随按准及暂临同当平小])时候?(?![间代尚装光刻常])|那(?:年|会儿?|阵子?|几年)|期间")
_MOVED = re.compile(r"\b(?:moved|moving|relocated|joined|started)\b|搬|迁|跳槽|入职|加入|换了?工作")


def _dated(clause: str) -> bool:
    """Whether ``clause`` says when it holds, for the clauses after it in its sentence."""
    if _MOVED.search(clause):
        return False
    if _HAN.search(clause):
        # A trip holds its own stays (_chinese_subject): the same trip twice is a duplicate.
        when = _ZH_DATE.search(clause) or _ZH_WHEN.search(clause)
        return bool(when and not _ZH_SINCE.search(clause) and not _ZH_TRIP.search(clause))
    return bool(_EN_PERIOD.search(clause))


def _zh_while(clause: str) -> bool:
    """Whether a Chinese ``clause`` tells of a time ("我住在上海的时候"): what the clauses
    after it say held then ("…，在腾讯工作"), not now."""
    return bool(_HAN.search(clause) and _ZH_WHILE.search(clause))


def _zh_for_now(clause: str) -> bool:
    """Whether a Chinese ``clause`` says it holds for now (暂时, 临时), or is a move for a
    while ("我搬到上海住一段时间")."""
    if not _HAN.search(clause):
        return False
    return bool(_ZH_TEMPORARY.search(clause) or (_MOVED.search(clause) and _ZH_STINT.search(clause)))


# Where one stays, not lives: a hotel ("I stay in a hotel in Shanghai", "住在酒店") is no
# home, nor a place for a few nights ("住在朋友家三天"). A serviced flat (酒店式公寓) may be.
# A hotel goes by its chain's name as often ("I stay at the Hilton in Paris", "an inn"),
# but not a street, a park or a town named alike ("Hilton Avenue", "Westin Park", "Hilton
# Head", "the Four Seasons Residences"): one lives there.
_LODGING = re.compile(
    r"\b(?:hotel|hostel|motel|airbnb|b&b|bnb|guest ?house|resort|campsite|campground|inn)s?\b|"
    r"\b(?:hilton|marriott|hyatt|sheraton|westin|radisson|novotel|ibis|sofitel|intercontinental|kempinski|"
    r"ritz(?:-carlton)?|four seasons|best western|shangri-la|mandarin oriental|premier inn|travelodge)\b"
    r"(?!\s+(?:street|st|avenue|ave|road|rd|drive|dr|lane|ln|way|boulevard|blvd|park|place|pl|court|ct|crescent|"
    r"close|terrace|gardens|heights|head|residences?|estates?)\b)|"
    r"酒店(?!式)|宾馆|旅馆|民宿|旅店|旅社|招待所|客栈|青旅|青年旅舍|度假村|"
    r"(?:[0-9零〇一二两三四五六七八九十几]{1,4}|这几|这两)(?:天|晚|个?晚上|周|个?星期|个?礼拜)$|一段时间$"
)


# Speakers and chatter ----------------------------------------------------------------------

# "Marco: …", "<Bart>: "…"", "user: …", "小明：…": a transcript line names its speaker first.
_SPEAKER = re.compile(
    r"^\s*(?:<(?P<tag>[^<>\n]{1,40})>|(?P<name>[^\s:：<>\"'][^:：\n]{0,39}?))\s*[:：]\s*(?P<rest>.*)$", re.S
)
_USER_ROLES = frozenset({"user", "human", "me", "i", "customer", "client", "用户", "我", "客户"})
# The assistant's own lines say nothing about anyone the memory should track.
_ASSISTANT_ROLES = frozenset(
    {
        "assistant",
        "ai",
        "bot",
        "chatbot",
        "system",
        "agent",
        "model",
        "gpt",
        "chatgpt",
        "claude",
        "助手",
        "系统",
        "机器人",
    }
)
# A capitalised word before a colon is a speaker, unless it names an attribute ("Deadline: Friday").
_EN_NAME = re.compile(r"^[A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}$")
_ZH_NAME = re.compile(r"^[\u4e00-\u9fff]{1,4}$")
# Sentences with their end marks, so that a question can be told from a statement.
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？\n]*|[.!?。！？\n]+")
_EN_QUESTION = re.compile(
    r"^\W*(?:what|how|why|which|who|whom|whose|do|does|did|can|could|would|will|shall|should|is|are|am|was|were|"
    r"have|has|may|might|any idea|wonder)\b.*\b(?:you|i|we|it|there|they|he|she|this|that)\b"
)
# 几 asks "how many", but not as "a few" ("这几天", "好几年", "十几个", "前几天", "最近几周").
_ZH_QUESTION = re.compile(
    r"(?:吗|呢|么|吧|啊|嘛)\W*$|什么|怎么|为什么|哪|(?<![这那好十前近])几(?!乎)|多少|是否|是不是|有没有|能不能|"
    r"可不可以|要不要"
)
# Greetings, thanks and reactions: said to someone, not about anyone. "Oh" or "ah" before
# "I" or "we" only opens what they say ("oh I moved to …"), as "Oh, I moved to …" does.
_EN_CHATTER = re.compile(
    r"^\W*(?:thanks|thank you|thx|haha+|hehe|lol|hi|hello|hey|wow|(?:oh|ah)(?! (?:i|we)\b)|ok|okay|sure|yes|yeah|yep|"
    r"no(?! longer| more)|nope|sorry|you are welcome|"
    r"welcome|bye|goodbye|good (?:morning|night|evening|luck|job)|great|awesome|"
    r"cool|nice|congrat\w*|well done|of course|absolutely|exactly|indeed|cheers|hmm+|alright|glad|that's|that is|"
    r"what a|how (?:nice|great|cool|sweet|wonderful|exciting))\b",
    re.I,
)
_ZH_CHATTER = re.compile(
    r"^\W*(?:谢谢|多谢|感谢|你好|您好|哈哈|嘿|嗨|哇|哦|噢|嗯|好的|好吧|太好了|太棒了|真棒|不客气|再见|晚安|早上好|加油|恭喜|没关系|对不起|抱歉)"
)


def is_role(name: str) -> bool:
    """Whether a speaker named ``name`` ("System", "user", "我") is read as a role — the
    user, or the assistant whose lines say nothing — rather than as a person."""
    who = unicodedata.normalize("NFKC", name.strip()).casefold()
    return who in _USER_ROLES or who in _ASSISTANT_ROLES


def _voice(text: str) -> tuple[_Voice | None, str]:
    """Who speaks in ``text`` and the words they say; ``None`` for the assistant's
    own lines. A ``Name:`` that reads as an attribute ("Deadline: Friday",
    "Notification channel: email") is no speaker: the text is read whole."""
    match = _SPEAKER.match(text)
    if match is None:
        return _Voice(), text
    tag, name, rest = match.group("tag"), match.group("name"), match.group("rest")
    who = unicodedata.normalize("NFKC", (tag or name).strip()).casefold()
    if who in _ASSISTANT_ROLES:
        return None, rest
    if who in _USER_ROLES:
        return _Voice("user", spoken=True), rest
    if tag is not None:
        return _Voice(who, spoken=True), rest
    if _names_attribute(who) or not (_EN_NAME.match(name.strip()) or _ZH_NAME.match(name.strip())):
        return _Voice(), text
    return _Voice(who, spoken=True), rest


def _question(sentence: str) -> bool:
    """A question asks; it never replaces or contradicts anything."""
    stripped = sentence.strip().strip("\"'“”「」")
    if stripped.endswith(("?", "？")):
        return True
    if _HAN.search(stripped):
        return bool(_ZH_QUESTION.search(stripped))
    return bool(_EN_QUESTION.match(_normal(stripped)))


def _chatter(clause: str) -> bool:
    """Greetings, thanks and reactions ("thanks for asking", "that is great news", "太好了"):
    said to someone, not about anyone."""
    return bool((_ZH_CHATTER if _HAN.search(clause) else _EN_CHATTER).match(clause))


# English ---------------------------------------------------------------------------------

_EN_CHANGE = re.compile(
    r"\b(now|no longer|anymore|any more|switched|switch|changed|moved|relocated|quit|stopped|gave up|given up|"
    r"started|joined|left|upgraded|downgraded|renamed|raised|lowered|from now on|instead|these days|"
    r"recently|took up|as of today)\b"
)
# Words that only open a sentence ("btw I moved to …", "as of today I live in …", "oh I …"):
# the clause is read from its subject after them. Those added last take a space, a comma or
# the clause's end after them, so that "well-being", "btw-free" or "oh-so" keep their word;
# "I told you" only before the same "I" or "we" ("I told you I live in …", not "I told you
# my sister lives in …").
_EN_FILLERS = re.compile(
    r"^(?:(?:actually|please|so|also|note|remember|that|now|then|hey|ok|okay|fyi)\b[, ]*|"
    r"(?:btw|by the way|as of (?:today|now)|well|oh|ah|anyway|anyhow|honestly|basically)(?:[, ]+|$)|"
    rf"(?:{_EN_TOLD}|(?:i|we) (?:told you|said|mentioned)(?: before| earlier)?(?: that)?)[, ]+(?=(?:i|we) ))+"
)
# When something happened, before its subject ("Last week I moved to …", "These days I live in …").
# Not a day or a period to come ("Today I stay in …"): _EN_PERIOD reads those in the clause.
_EN_PAST_LEAD = re.compile(
    r"^(?:recently|lately|these days|nowadays|yesterday|"
    r"last (?:night|week|weekend|month|year|summer|winter|spring|autumn|fall)|"
    r"(?:a|one|a few|a couple of|several|some|two|three|four|five|six|\d+) (?:days?|weeks?|months?|years?) ago|"
    r"since (?:last (?:week|month|year)|\d{4}))\b[, ]*"
)
_EN_ADVERBS = r"(?:(?:really|also|still|now|just|usually|always|often|recently|actually|currently|totally|very much) )*"
_EN_ADVERBS_LEAD = re.compile(rf"^{_EN_ADVERBS}")
_EN_VERB_START = (
    r"(?:is|am|are|was|were|has|have|had|does|do|did|can|will|likes?|loves?|enjoys?|prefers?|hates?|dislikes?|"
    r"wants?|drinks?|eats?|uses?|plays?|watch(?:es)?|writes?|smokes?|speaks?|runs?|reads?|owns?|lives?|works?|"
    r"moved|relocated|joined|left|quit|stopped|gave|started|switched|changed|upgraded|no|never|not|avoids?|"
    r"goes|went|took|adores?|resides?|stays?)"
)
_EN_NOT_HOLDER = frozenset(
    """the a an this that it there here what which who call set change switch make please do does did not no
    never can will is am are was were has have had""".split()
)
_EN_POSSESSIVE = re.compile(r"^(my|our|the user's|user's|his|her|their|[a-z]+'s) (.+)$")
_EN_SUBJECT = re.compile(rf"^(i|we|he|she|they|the user|user|[a-z]+) (?={_EN_ADVERBS}{_EN_VERB_START}\b)")
_EN_RELATIVES = re.compile(
    r"^(sister|brother|mother|father|mom|dad|parents|wife|husband|partner|son|daughter|boss|manager|friend|"
    r"colleague|kids|children|team|cousin|neighbou?r|roommate|flatmate|housemate|landlord|landlady)s? (.+)$"
)

_EN_NEG = r"(?P<neg>(?:do|does|did|can|will) not |(?:do|does|did) not |no longer |never |not |can no longer )?"
_EN_LIKE_POS = (
    r"likes?|loves?|enjoys?|adores?|prefers?|wants?|drinks?|eats?|uses?|plays?|watch(?:es)?|writes?|smokes?|speaks?|"
    r"runs?|reads?|is into|am into|is a fan of|listens? to|goes|go"
)
_EN_LIKE_NEG = r"hates?|dislikes?|can not stand|avoids?"
_EN_STOP = r"quit|stopped|has stopped|gave up|has given up|given up"
_EN_START = r"started|has started|took up|taken up|picked up|went"

_EN_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(?:was |were )?born in (?P<v>.+)$"), "birthplace"),
    (re.compile(r"^(?:is |am |are )?(?P<neg>not |no longer )?allergic to (?P<v>.+)$"), "allergy"),
    (re.compile(r"^(?:has|have) (?:a |an )?(?P<v>[a-z]+) allergy$"), "allergy"),
    (
        re.compile(
            # "moved back to Berlin" too: back where one lived, a move all the same; not "moved
            # back the meeting", which names no place to.
            r"^(?:has |have |had )?(?:just )?(?:moved|relocated|moving|is moving)(?P<back> back)?(?: from (?:.+) )?"
            r"(?: to| into) (?P<v>.+)$"
        ),
        "residence+",
    ),
    (
        re.compile(rf"^{_EN_NEG}(?P<verb>lives?|living|resides?|stays?|is based|am based|based)(?: .*)? in (?P<v>.+)$"),
        "residence",
    ),
    (
        re.compile(
            rf"^{_EN_NEG}(?:works?|working|is employed|am employed|employed)(?: as [a-z ]+)? (?:at|for|by) (?P<v>.+)$"
        ),
        "employer",
    ),
    (
        re.compile(
            r"^(?:has )?(?:joined|started at|started working at|started working for|now works? (?:at|for)) (?P<v>.+)$"
        ),
        "employer+",
    ),
    (re.compile(r"^(?:has )?left (?P<v>.+)$"), "employer-"),
    (re.compile(r"^(?:call|please call) (?:me|her|him|them|the user) (?P<v>.+)$"), "name"),
    (re.compile(r"^(?:goes by|is called|am called|is named) (?P<v>.+)$"), "name"),
    (re.compile(r"^(?:switched|has switched|changed|moved) from (?P<old>.+?) to (?P<v>.+)$"), "from-to"),
    (re.compile(r"^(?:switched|has switched|changed) to (?P<v>.+)$"), "switch"),
    (
        re.compile(
            r"^(?:please )?(?:change|set|switch|turn|update|upgraded|downgraded|changed|set|switched|updated) "
            r"(?:my |the |their |his |her |our )?(?P<attr>[a-z0-9 ]+?) (?:to|into) (?P<v>.+)$"
        ),
        "setting",
    ),
    (re.compile(rf"^{_EN_NEG}(?:{_EN_STOP}) (?P<v>.+)$"), "like-stop"),
    (re.compile(rf"^{_EN_NEG}(?:{_EN_STOP})$"), "like-stop-bare"),
    (re.compile(rf"^(?:{_EN_START}) (?P<v>.+)$"), "like-start"),
    (re.compile(rf"^{_EN_NEG}(?:{_EN_LIKE_NEG}) (?P<v>.+)$"), "dislike"),
    (re.compile(rf"^{_EN_NEG}(?P<verb>{_EN_LIKE_POS})(?: (?P<v>.+))?$"), "like"),
    # Possession, not the perfect tense ("have been", "have tried") or an obligation ("have to").
    (
        re.compile(
            rf"^{_EN_NEG}(?:has|have|owns?|had|got)(?: not)? (?!(?:been|to|got|gotten|done|gone|seen|made|had|taken|"
            r"given|heard|found|thought|bought|brought|told|said|written|read|left|lost|won|begun|known|shown|grown|"
            r"never|always|already|just|also|ever|\w+ed)\b)(?:a |an |any )?(?P<v>.+)$"
        ),
        "has",
    ),
    # Present tense only: "was …" narrates, it does not say what holds now.
    (re.compile(r"^(?:is|am|are) (?P<neg>not |no longer )?(?:a |an )?(?P<v>.+)$"), "state"),
)
_EN_ATTR = re.compile(
    r"^(?P<attr>[a-z0-9 +]{1,40}?)(?: is| are| was| has been| happens| takes place| is held|:) "
    r"(?:now |currently |still |actually )?(?:(?:was |been |got )?(?:moved|changed|pushed|postponed|rescheduled|"
    r"shifted|raised|lowered|increased|reduced|set|updated) )?(?:to |at |on |in |called |named |set to )?(?P<v>.+)$"
)
_EN_ATTR_STRICT = re.compile(
    r"^(?P<attr>[a-z0-9 +]{1,40}?)(?: is| are| was| has been| happens| takes place|:) (?P<v>.+)$"
)
# "… was moved to", "… has been changed to": the attribute's value was set anew.
_EN_MOVED = re.compile(
    r"\s*(?:is |are |was |were |has been |have been |got |: ?)?(?:now |just |been )?"
    r"(?:moved|changed|pushed|postponed|rescheduled|shifted|raised|lowered|increased|reduced|updated)\b"
)
_EN_ATTR_MOVE = re.compile(
    r"^(?P<attr>[a-z0-9 +]{1,40}?) (?:was |has been |got )?(?:moved|changed|pushed|postponed|rescheduled|shifted|"
    r"raised|lowered|increased|reduced|updated) to (?P<v>.+)$"
)
_EN_TRAILING = re.compile(
    r"\b(?:after|because|since|so that|so|when|but|as|for now|from now on|last|this|next week|in (?:january|february|"
    r"march|april|may|june|july|august|september|october|november|december)|ago|every|on weekends|at work)\b.*$"
)


@dataclass(frozen=True, slots=True)
class _Subject:
    """Who an English clause is about, read once: for its own claims and for the clauses after it."""

    # Whose claims the clause's rules read; None where it is about no one the memory
    # tracks ("that is …", "he" in a speaker's line): nothing is read.
    holder: str | None
    # What the clause says of them: the words after its subject or possessive.
    rest: str
    # Whom the clauses after it are about: their "he", "she", "they", and the subject of
    # one without its own ("Tom works at home. He …", "Tom is here, lives in …").
    after: str
    # Whom the next clause is about where "and", "but", "so" or "then" joins it to this one
    # and it has no subject of its own: this one's subject, where it opens with one, even
    # if it names someone else besides ("The user met Tom and moved to Paris"); else
    # ``after`` ("I have a friend who lives in Rome and works at …", "Tom met the user
    # and moved to …", where "met" is no verb _EN_SUBJECT knows).
    joined: str
    # The clause opens with a subject and its verb ("Tom lives …", "I am …").
    named: bool = False
    # It opens with a possessive ("my …", "the user's …", "his …").
    owned: bool = False
    # "my X is …" where X is no relative: read as an attribute of the holder.
    attribute: bool = False
    # It opens with "I" or "we": a verb joined to it without a subject agrees with them
    # ("… and live in Paris"), and one that does not ("… and now lives in Paris") is not theirs.
    speaker: bool = False


def _english_subject(clause: str, holder: str, voice: _Voice, joined: str | None = None) -> _Subject:
    """Who ``clause`` (its fillers dropped) is about; ``holder`` is whom the clause before
    was about, and ``joined`` that clause's :attr:`_Subject.joined` where "and" joins the
    two. After the clause it is still its subject ("Tom works at home. He lives in …" is
    Tom's home, "The user's wife works at home. She …" the wife's) unless the clause names
    someone else besides ("The user met a friend. He …", "My doctor is Dr. Lee and lives in
    …"), or someone the rules cannot tell apart ("I met Tom. He …", "the user's doctor …"):
    then it is ``_SOMEONE``. Where it names no one the holder before it still holds."""
    subject = _EN_SUBJECT.match(clause)
    named = subject is not None
    possessive = _EN_POSSESSIVE.match(clause)
    if possessive:
        owner = _holder(possessive.group(1).removesuffix("'s"), holder, voice)
        rest = possessive.group(2)
        relative = _EN_RELATIVES.match(rest)
        if owner is None:
            return _Subject(None, rest, _SOMEONE, _SOMEONE, named, owned=True)
        if relative is None:
            # An attribute of the owner; what follows it is about the X ("My doctor is Dr. Lee
            # and lives in Paris", "The user's favourite singer is Adele. She …"), or may
            # be, unless the X is the owner's name ("The user's name is Anna. She …").
            after = owner if _EN_OWN_NAME.match(rest) else _SOMEONE
            return _Subject(owner, rest, after, after, named, owned=True, attribute=True)
        whose, rest = f"{owner}'s {relative.group(1)}", relative.group(2)
        after = _after(whose, rest, fond_of=voice.fond_of)
        return _Subject(whose, rest, after, _joined(whose, rest, after), named, owned=True)
    if subject is None:
        if joined is not None and _EN_PARTICIPLE.match(clause):
            joined = None  # "a friend living in Rome and working at …": the friend's
        about = holder if joined is None else joined
        after = _after(holder, clause, opened=False, fond_of=voice.fond_of)
        if first := _EN_FIRST_WORD.match(clause):
            joined = _holder(first.group(1), holder, voice)  # "I met Tom and moved to …"
        speaker = first is not None and first.group(1) in ("i", "we")
        return _Subject(
            about, clause, after, after if joined is None else _joined(joined, clause, after), speaker=speaker
        )
    word, rest = subject.group(1), clause[subject.end() :]
    if word in _NOT_A_HOLDER:
        # "that is …", "there was a guy": about no one, though it may name someone.
        after = _after(holder, rest, opened=False)
        return _Subject(None, rest, after, after, named)
    if word in _EN_NOT_HOLDER:
        after = _after(holder, rest, fond_of=voice.fond_of)
        return _Subject(holder, rest, after, after, named)
    found = _holder(word, holder, voice)
    if found is None:
        return _Subject(None, rest, _SOMEONE, _SOMEONE, named)
    after = _after(found, rest, fond_of=voice.fond_of)
    return _Subject(found, rest, after, _joined(found, rest, after), named, speaker=word in ("i", "we"))


def _joined(subject: str, rest: str, after: str) -> str:
    """:attr:`_Subject.joined` of a clause about ``subject`` that says ``rest``: the subject,
    unless a relative clause in it may be what the joined clause goes on with ("I have a
    friend who lives in Rome and works at …")."""
    return after if _EN_RELATIVE_CLAUSE.search(rest) else subject


# The subject words that open a clause even before a verb _EN_SUBJECT does not know ("I met …").
_EN_FIRST_WORD = re.compile(r"^(i|we|the user|user) ")
_EN_RELATIVE_CLAUSE = re.compile(r"\b(?:who|whom|whose|which|that|where)\b")
# A clause that opens with a participle goes on with the one before it: "living in Rome
# and working at …" is about whoever "living" is.
_EN_PARTICIPLE = re.compile(r"\w+ing\b|based\b")


def _after(holder: str, rest: str, *, opened: bool = True, fond_of: frozenset[str] = frozenset()) -> str:
    """Whom the clauses after one about ``holder`` are about, where ``rest`` is what it says
    of them: ``holder``, unless it names someone else too ("met a friend", "talked to her
    doctor", "visited Tom", "lives with her sister", "loves Anna": a name in ``fond_of``),
    whom a "he", "she" or "they" after it may be. With ``opened`` the holder opened the
    clause, and a person after "is" is the holder itself ("The user's sister is a nurse. She …")."""
    if _EN_WITH_SOMEONE.search(rest):
        return _SOMEONE
    if fond_of and any(match.group(1) in fond_of for match in _EN_FOND_OF.finditer(rest)):
        return _SOMEONE  # "The user loves Anna. She …", not "The user loves coffee. She …"
    if opened and _EN_IS.match(rest):
        return holder  # "is a nurse", "works as a nurse": the holder itself
    return _SOMEONE if _EN_PERSON.search(rest) else holder


# "called"/"named" bring in someone, "is called"/"is named" name the subject itself.
_NOT_AFTER_BE = r"(?<!is )(?<!am )(?<!are )(?<!was )(?<!were )(?<!be )(?<!now )"
# Words that bring someone besides the subject into a clause, a name included ("visited Tom").
_EN_WITH_SOMEONE = re.compile(
    r"\b(?:with|him|them|met|meets?|meeting|visit(?:s|ed|ing)?|saw|sees?|seeing|told|tells?|asked|"
    rf"{_NOT_AFTER_BE}call(?:s|ed|ing)?|"
    r"(?:talk(?:s|ed|ing)?|spoke|speak(?:s|ing)?|chat(?:s|ted|ting)?) to|text(?:s|ed|ing)?|"
    r"married (?!(?:for|since|in|last|now|and|but)\b)|marr(?:y|ies)|dat(?:ed|ing)|hired|invited|introduced|"
    r"help(?:s|ed|ing)|hug(?:s|ged|ging)?|kiss(?:es|ed|ing)?|thank(?:s|ed|ing)?|e-?mail(?:s|ed|ing)?|"
    r"messag(?:es|ed|ing)|phon(?:es|ed|ing)|interview(?:s|ed|ing)?|mention(?:s|ed|ing)?|adopt(?:s|ed|ing)?|"
    r"babys[ai]t(?:s|ting)?|look(?:s|ed|ing)? after|t(?:ake|akes|ook|aking) care of|"
    rf"{_NOT_AFTER_BE}named|"
    # Someone's ("Tom's car"), but not "it's", "the user's", "today's" …
    r"(?!(?:it|that|he|she|there|here|what|who|let|user|one|today|tonight|tomorrow|yesterday)'s)[a-z]+'s)\b"
)
# A verb of fondness, or a word that a person may follow, and the word after it. "Loves
# Anna" names someone and "loves coffee" does not, which only the capital tells: _claims
# reads the capitalised words after these in the text as it came (Voice.fond_of), _after
# finds them in the clause read lowercased. After "about", "for" and "of" ("worries about
# Anna", "has a soft spot for Tom", "is a friend of Tom") any verb may bring someone in; an
# organisation there ("works for Acme") reads as someone too: a change missed, not a home
# taken from someone else.
_EN_FOND_OF = re.compile(
    r"\b(?i:lov(?:e|es|ed|ing)|lik(?:e|es|ed|ing)|ador(?:e|es|ed|ing)|miss(?:es|ed|ing)?|"
    r"hat(?:e|es|ed|ing)|dislik(?:e|es|ed|ing)|admir(?:e|es|ed|ing)|fanc(?:y|ies|ied|ying)|trust(?:s|ed|ing)?|"
    r"respect(?:s|ed|ing)?|env(?:y|ies|ied|ying)|worship(?:s|ped|ping)?|idoli[sz](?:e|es|ed|ing)|about|for|of|"
    r"(?:look(?:s|ed|ing)? up|close|engaged|devoted|attached|kind|loyal|propos(?:e|es|ed|ing)) to|"
    r"(?:a crush|hooked|dot(?:e|es|ed|ing)) on) "
    r"([A-Za-z][\w'-]*)"
)
# Where someone or something comes from ("loves Italian food", "likes Korean dramas"):
# capitalised, but never the name of a person a "she" after it could be.
_EN_ORIGINS = frozenset(
    """american british english irish scottish welsh canadian australian mexican brazilian argentinian peruvian
    cuban caribbean french italian spanish portuguese german dutch belgian swiss austrian greek turkish
    polish russian ukrainian swedish norwegian danish finnish nordic scandinavian european mediterranean
    chinese japanese korean taiwanese cantonese thai vietnamese indonesian malaysian filipino indian pakistani
    nepali persian iranian lebanese israeli arab arabic moroccan egyptian ethiopian african asian latin""".split()
)
# A name after where someone comes from and what they are ("Italian singer Laura",
# "Korean YouTuber Jisoo"): one or two words, then a capitalised one.
_EN_TITLED_NAME = re.compile(r"(?: (?!(?:and|or|but|in|at|to|from|with|by)\b)[A-Za-z][\w'-]*){1,2} [A-Z]")
# What the rules know by name ("Paris", "New York", "Python"), which no "he" or "she" is.
_KNOWN = frozenset(ALIASES.values())
# The capitalised words that may go on with a name's first ("New York"): two at most, so
# that a run of them is not read again from each name in it.
_EN_NAME_RUN = re.compile(r"(?: [A-Z][\w'-]*){1,2}")


def _fond_of(body: str) -> frozenset[str]:
    """The names ``body`` is fond of (:attr:`_Voice.fond_of`), casefolded: the capitalised
    word after a verb of fondness ("loves Anna") or in Chinese text ("用户喜欢Anna"),
    unless it, or it with the capitalised words after it, is a known concept ("loves
    Paris", "loves New York") or says where something comes from ("loves Italian food")."""
    names = set()
    for match in (*_EN_FOND_OF.finditer(body), *_ZH_LATIN_WORD.finditer(body)):
        name = match.group(1)
        if not name[0].isupper() or name == "I":
            continue
        if name.casefold() in _EN_ORIGINS and not _EN_TITLED_NAME.match(body, match.end()):
            continue  # "loves Italian food", not "loves Italian singer Laura"
        run = _EN_NAME_RUN.match(body, match.end())
        words = [name, *(run.group().split() if run else ())]
        if all(canonical_key(" ".join(words[:count])) not in _KNOWN for count in range(1, len(words) + 1)):
            names.add(name.casefold())
    return frozenset(names)


# People by what they are to someone: "a friend", "her doctor", "a guy".
_EN_PERSON = re.compile(
    r"\b(?:(?:boy|girl)?friend|fianc[eé]e?|partner|wife|husband|spouse|ex|mother|father|mom|mum|dad|parent|"
    r"sister|brother|sibling|son|daughter|kid|child|baby|cousin|aunt|uncle|niece|nephew|"
    r"grand(?:ma|pa|mother|father|parent|son|daughter)|relative|boss|manager|colleague|co-?worker|classmate|"
    r"teammate|roommate|flatmate|housemate|neighbou?r|landlord|landlady|tenant|doctor|dentist|therapist|nurse|"
    r"teacher|professor|tutor|coach|trainer|lawyer|vet|mentor|client|customer|student|guest|stranger|guy|"
    r"man|woman|lady|girl|boy|person|someone|somebody|mr|mrs|ms|dr|"
    r"nanny|babysitter|caregiver|carer|housekeeper|maid|cleaner|plumber|electrician|driver|buddy|pal|bestie|bff|"
    r"hubby|crush|lover|bride|groom|step(?:mom|mother|dad|father|son|daughter|sister|brother)|in-law|twin|"
    r"toddler|infant|grandkid|grandchild|godmother|godfather|supervisor|director|ceo|founder|employee|intern|"
    r"assistant|secretary|recruiter|patient|surgeon|physician|psychiatrist|psychologist|counsell?or|"
    r"pediatrician|pastor|priest|rabbi|imam|hairdresser|barber|stylist|singer|actor|actress|author|writer|"
    r"artist|musician|host|hostess|roomie|acquaintance)s?\b|\b(?:men|women|ladies|children|people)\b"
)
# A person after these is the subject itself ("is a nurse", "works as a nurse"), as after 是/当 (_ZH_IS).
_EN_IS = re.compile(r"(?:is|am|are|was|were|works? as|worked as|working as)\b")
# The holder's own name: "she" after it is still the holder.
_EN_OWN_NAME = re.compile(r"(?:(?:full|first|last|real|preferred|given|nick) ?)?name is\b")


def _english_clause(
    clause: str,
    holder: str,
    voice: _Voice,
    joined: str | None = None,
    *,
    infinitive: bool = False,
    speaker: bool = False,
) -> tuple[list[Claim], str, str, bool]:
    """The claims an English clause reads, whom the clauses after it are about
    (:attr:`_Subject.after` and :attr:`_Subject.joined`), and whether it opens with "I"
    or "we" (:attr:`_Subject.speaker`). With ``infinitive`` the clause before it leaves a
    verb to come open (:data:`_EN_INFINITIVE`); with ``speaker`` it opened with "I" or "we"."""
    clause = _EN_FILLERS.sub("", clause).strip()
    if joined is not None and infinitive and _EN_BARE_START.match(clause):
        # "I want my son to retire and live in Paris", "I will quit and work at Acme": the
        # bare verb goes on with the one left open, as "I want my son to live in Paris"
        # would, whoever's it is; no one's claim.
        joined = _SOMEONE
    elif joined is not None and speaker and _EN_THIRD_SINGULAR.match(clause):
        # "I sent my son to college and now lives in Paris": "lives" is not what "I" does.
        joined = _SOMEONE
    change = bool(_EN_CHANGE.search(clause))
    subject = _english_subject(_EN_PAST_LEAD.sub("", clause), holder, voice, joined)
    return _english_claims(subject, change), subject.after, subject.joined, subject.speaker


# The perfect tense of a change the rules read in the past ("I have joined Globex", "I've
# started working at Acme", "I have quit coffee", "I've been living in Paris"): read as the
# past is, "have" left out. Not the perfect of a verb no rule reads ("I have been to Paris").
_EN_PERFECT = re.compile(
    r"^(?:has|have) (?:(?:just|recently|finally|now|already|officially|also) )*"
    r"(?:been (?=(?:living|working) (?:in|at|for)\b))?"
    r"(?=(?:joined|started|left|quit|stopped|given up|moved|relocated|switched|changed|taken up|picked up|"
    r"living|working)\b)"
)


def _english_claims(subject: _Subject, change: bool) -> list[Claim]:
    holder = subject.holder
    if holder is None:
        return []  # "that is …", "it was …", "you are …": about no one the memory tracks
    if subject.attribute:
        return _english_attribute(subject.rest, holder, change, owned=True)
    rest = _EN_ADVERBS_LEAD.sub("", subject.rest)
    rest = _EN_ADVERBS_LEAD.sub("", _EN_PERFECT.sub("", rest))
    for pattern, kind in _EN_RULES:
        match = pattern.match(rest)
        if match:
            if not (subject.named or subject.owned) and kind != "setting" and _commands(rest):
                return []
            besides = "also" in subject.rest[: len(subject.rest) - len(rest)].split() or _EN_BESIDES.search(rest)
            side_job = _EN_SIDE_JOB.search(rest) and not _EN_AFTER_QUITTING.search(rest)
            if (kind in ("residence", "employer") and besides) or (kind == "employer+" and side_job):
                return []  # "I also work at Acme", "I live in Paris too": a second job or home, not a new one
            return _owned(_english_rule(kind, match, holder, change), unique=kind == "setting")
    if not subject.named and (strict := _EN_ATTR_STRICT.match(rest) or _EN_ATTR_MOVE.match(rest)):
        return _english_attribute(rest, holder, change, strict)
    return []


# A home or a job besides the one the holder has, or the same as someone else's ("I live in
# Paris too", "I work for Acme on the side", with "also" before the verb): no new one. Not a
# move or a new job ("I also moved to Paris": as someone else did, and they left the old one).
_EN_BESIDES = re.compile(
    r"\b(?:too|as well|on the side|besides|in addition|as a (?:side|second) (?:job|gig|hustle))\b|\balso\W*$"
)


# A job started besides the one the holder has ("I've started working at Globex on weekends too",
# "I started working at Globex on the side", "…, my second job"): no new employer. Not a bare "too"
# or "also" ("I joined Globex too": as someone else did, leaving the old job).
_EN_SIDE_JOB = re.compile(
    r"\b(?:on the side|besides|in addition|as a (?:side|second) (?:job|gig|hustle)|(?:my|a) (?:second|side) "
    r"(?:job|gig|hustle)|(?:on|at|over) (?:the )?weekends?|(?:in the )?evenings)\b"
)
# ... unless the old one was left for it ("I started working at Globex in the evenings after
# quitting Acme"): a new employer.
_EN_AFTER_QUITTING = re.compile(r"\b(?:after|since) (?:quitting|leaving|i (?:quit|left))\b")


# First person and "the user" are the voice's holder; in a speaker's line the third
# person is someone unnamed, so nothing is read (elsewhere it is whom the clause before
# was about: the user in "User lives in Rome. She works at Acme", see _holder).
_FIRST_PERSON = frozenset({"i", "we", "me", "my", "our", "我", "我们"})
_FIRST_PERSON_WORD = re.compile(r"\b(?:i|we|me|my|our)\b|我")
_THIRD_PERSON = frozenset({"he", "she", "they", "his", "her", "their", "him", "them", "他", "她"})
_HE_OR_SHE = frozenset({"he", "she", "his", "her", "him", "他", "她"})
# A relative "he" or "she" cannot be: "The user's husband is a chef. She works at Acme" says
# nothing about the husband. The word is the holder's last ("user's wife", "user的老婆").
_NOT_HIM = frozenset(
    "wife sister mother mom daughter girlfriend 老婆 妻子 太太 媳妇 妈妈 母亲 姐姐 妹妹 女儿 女朋友".split()
)
_NOT_HER = frozenset("husband brother father dad son boyfriend 老公 丈夫 爸爸 父亲 哥哥 弟弟 儿子 男朋友".split())
_RELATIVE_OF = re.compile(r"^.*(?:'s |的)")
_NOT_A_HOLDER = frozenset(
    """it its that this these those there here you your what which who everything everyone everybody something
    someone somebody nothing nobody anything anyone""".split()
    # Words that open a clause without naming who it is about ("… and then reads the
    # checklist", "sounds like a plan", "just use the app", "to use it daily"); none a
    # name ("may" is left out: May is someone).
    + """then also just only still even so and but or as if to too one would could should might must let
    sounds seems looks today tonight tomorrow yesterday now later soon first next finally afterwards maybe
    perhaps really actually""".split()
)


def _commands(rest: str) -> bool:
    """Whether a clause without a subject opens with a bare verb: an imperative."""
    words = re.sub(r"^(?:do not|don't|never|please|just|always) ", "", rest).split(" ", 1)
    return words[0] in _EN_BARE_VERBS


def _holder(word: str, holder: str, voice: _Voice) -> str | None:
    """Whom ``word``, the subject or possessive that opens a clause, names; ``holder`` is
    whom the clause before was about. Outside a speaker's line "he", "she", "他", "她" are
    that holder: the user ("User lives in Rome. She works at Acme"), or whoever the clause
    before named instead ("Tom is my colleague. He lives in …", "王芳来了，她住在上海").
    "They" is the user's own pronoun, after the user or their team ("The user's team moved
    to Go, and they no longer write Python", a labelled replacement), and someone unread
    after anyone else ("The user's parents are retired. They live in …"). After a clause
    that named someone besides its subject (``_SOMEONE``) none of them is anyone."""
    if word in _FIRST_PERSON:
        return voice.me
    if word in ("user", "the user", "用户"):
        return "user"
    if word in _THIRD_PERSON:
        if voice.spoken or holder == _SOMEONE or not voice.opened:
            return None
        if word not in _HE_OR_SHE:
            return "user" if holder == voice.me or _RELATIVE_OF.sub("", holder) == "team" else None
        if holder == voice.me and voice.first_person:
            return None  # "I met Tom. He lives in …": someone the clause before did not name
        relative = _RELATIVE_OF.sub("", holder)
        if relative in (_NOT_HIM if word in ("he", "his", "him", "他") else _NOT_HER):
            return None
        return holder
    if word in _NOT_A_HOLDER:
        return None
    return word


def _owned(found: list[Claim], *, unique: bool = False) -> list[Claim]:
    """Claims read by a rule about a subject and its verb: the holder's own, and single-valued
    where the rule's slot is (residence, employer, name) or the verb sets a value."""
    return [replace(c, owned=True, unique=unique or c.slot in _SINGLE_SLOTS) for c in found]


def _english_attribute(
    rest: str, holder: str, change: bool, match: re.Match[str] | None = None, *, owned: bool = False
) -> list[Claim]:
    match = match or _EN_ATTR_MOVE.match(rest) or _EN_ATTR.match(rest)
    if not match:
        return []
    moved = bool(_EN_MOVED.match(rest, match.end("attr")))
    attr = re.sub(r"^(?:the|a|an|my|our|their) ", "", match.group("attr").strip())
    value = re.sub(
        r"^(?:now |currently |still |actually |set to |to |at |on |in |called |named )+", "", match.group("v")
    )
    value = re.sub(r"^(?:a|an|the) ", "", value)
    if re.fullmatch(r"(?:not|no longer) .+", value):
        return [Claim(holder, "state", _value(value.split(" ", 1)[1]), False, change, owned=owned)]
    if owned and _EN_NEW_JOB.fullmatch(attr) and _EN_AT_EMPLOYER.match(rest, match.end("attr")):
        # "My new job is at Acme": a new employer. Not "my job is at risk", nor "… at home".
        employer = _value(value)
        if _workplace(employer) or _EN_STINT.search(rest):
            return []  # "My new job is at home", "… at Acme for the summer"
        return [Claim(holder, "employer", employer, True, True, True, owned)]
    slot = _attribute_slot(attr, value)
    labelled = ":" in rest[match.end("attr") : match.start("v")]
    if slot in ("name", "residence") and not (owned or (labelled and attr in (*_NAME_ATTRS, *_RESIDENCE_ATTRS))):
        # "the city is beautiful", "game name: Rush Royale": not where or who the holder is.
        slot = "attr:" + " ".join(terms(attr))
    if slot == "residence" and (_region(value) or _EN_STINT.search(rest) or _EN_SEASONAL.search(rest)):
        return []  # "My home is in Europe now", "Home: Europe", "My home is in Paris for now", as a home said so
    unique = moved or _known_attribute(attr) or slot in _SINGLE_SLOTS
    return [Claim(holder, slot, _value(value), True, change, unique=unique, owned=owned)]


_EN_NEW_JOB = re.compile(r"new (?:job|workplace)")
# Not "… with the sales team", "… at the same company": a new role where the holder works.
_EN_AT_EMPLOYER = re.compile(r" is (?:now )?at (?!(?:the )?same\b)")


# What one moves back to besides a home, said with "the", "my": "the old team", "my old
# setup", "my parents' place". A move back names its place ("I moved back to Berlin").
_EN_BACK_NOT_A_PLACE = re.compile(r"(?:the|a|an|my|our|his|her|their|your|this|that|old|original|previous)\b")


# A move (_EN_RULES "residence+"), back or not, as said, before casefolding: where to.
_EN_MOVED_TO = re.compile(
    r"\b(?:moved|moving|relocated)(?P<back> back)?\b(?: from .+?)? (?:to|into) (?P<to>[\w'.-]+)", re.I
)
# Moved to besides a home, and named: a system, a tool, an app ("I moved back to Windows",
# "I moved to Vim"), a company ("... to Google Docs"), a department ("... to Marketing"), a day.
_EN_BACK_TO_A_TOOL = frozenset(
    """windows mac macos osx linux ubuntu debian fedora arch android ios iphone ipad pixel samsung python java
    javascript typescript rust go ruby php react vue angular postgres postgresql mysql sqlite mongodb chrome firefox
    safari edge brave vim neovim emacs vscode vs sublime intellij pycharm xcode iterm excel word notion obsidian
    evernote jira trello asana figma sketch kindle dvorak qwerty colemak gmail outlook slack teams zoom discord
    whatsapp telegram signal spotify netflix github gitlab google microsoft apple amazon meta
    engineering marketing sales finance hr legal product design operations support research management
    monday tuesday wednesday thursday friday saturday sunday plan building floor room level version""".split()
)
# What one moves to in a team or a job, not a home ("I moved to the old team", "... to night shifts").
_EN_MOVED_TO_A_TEAM = re.compile(
    r"\b(?:team|department|division|role|position|shifts?|project|desk|squad|unit|setup|stack|schedule|office|"
    r"branch)s?$"
)
# Where what is moved to ends, and where it is, or when, begins ("a flat in Paris").
_EN_MOVED_TO_STOP = frozenset(
    "in at on of near with for from by and but because since after before last this next".split()
)


# A number after the name that counts time ("I moved to Berlin 2 weeks ago"): no "Building 4".
_EN_TIME_UNIT = re.compile(r"(?:sec(?:ond)?|min(?:ute)?|hour|hr|day|week|wk|month|mo|year|yr)s?")


def _named_move(clause: str, sentence: str) -> bool:
    """Whether an English ``clause`` that moves ("I moved to Berlin", "I moved back to
    Berlin") names a place to, as ``sentence`` says it: a name ("Berlin", "a flat in Paris"),
    not a thing ("coffee", "the old team"), a tool ("Windows"), a department or a day
    ("Marketing", "Monday"), nor a numbered thing ("Building 4", "Plan A"). A move back must
    open with the name; any other move names one where the sentence is written with capitals
    at all ("I moved to coffee" names none, "i moved to berlin" may). When unsure, no home:
    the one held stays. Any other clause passes."""
    if not _EN_MOVED_TO.search(clause):
        return True
    said = _EN_MOVED_TO.search(sentence)
    if said is None:
        return True
    words = re.split(r"[,.;:!?]", sentence[said.start("to") :], maxsplit=1)[0].split()
    head = list(itertools.takewhile(lambda word: word.casefold() not in _EN_MOVED_TO_STOP, words))
    if _EN_MOVED_TO_A_TEAM.search(" ".join(head).casefold()):
        return False
    names = [at for at, word in enumerate(words) if word[:1].isupper()]
    if said.group("back") and names[:1] != [0]:
        return False  # "I moved back to the old team", "... to coffee": back to no name
    if not names:
        return not any(char.isupper() for char in sentence)
    name, after, unit = [*words[names[0] :], "", ""][:3]
    if re.fullmatch(r"[A-Z]", after) or (after.isdigit() and not _EN_TIME_UNIT.fullmatch(unit.casefold())):
        return False  # "Building 4", "Plan A", "Python 2"; not "Berlin 2 weeks ago"
    return name.casefold().strip("'.-") not in _EN_BACK_TO_A_TOOL


def _english_rule(kind: str, match: re.Match[str], holder: str, change: bool) -> list[Claim]:
    groups = match.groupdict()
    negative = bool(groups.get("neg"))
    if groups.get("neg", "") and "no longer" in (groups.get("neg") or ""):
        change = True
    raw = groups.get("v") or ""
    if kind == "birthplace":
        return [Claim(holder, "birthplace", _value(raw))]
    if kind == "allergy":
        return [Claim(holder, "allergy", _value(raw), not negative, change)]
    said = match.group(0)
    if kind == "residence" and (_LODGING.search(said) or _EN_PERIOD.search(said) or _EN_SEASONAL.search(said)):
        return []  # "I stay in a hotel in Shanghai this week", "… in Nice in the summer": a stay, not a home
    if kind == "residence" and match.group("verb").startswith("stay") and _EN_HOSTED.search(said):
        return []  # "I stay with my friend in Shanghai", "… at Tom's place": their home, if anyone's
    if kind in ("residence", "residence+") and _EN_STINT.search(said):
        return []  # "I moved to Paris for a while", "I live in Paris half the time": a stay, not a home
    if (kind == "employer" and _EN_PERIOD.search(said)) or (kind.startswith("employer") and _EN_STINT.search(said)):
        return []  # "I work at Acme this week", "I joined Acme for a few months": a stint, not an employer
    if kind in ("residence", "residence+"):
        value = _value(raw)
        if _unnamed_place(value) or _en_unnamed_home(raw) or _region(raw):
            return []  # "I live in my hometown", "I moved to a new apartment", "… to the south": where, it does not say
        if groups.get("back") and (_EN_BACK_NOT_A_PLACE.match(raw) or _value_class(value) is not None):
            return []  # "I moved back to the old team", "… to coffee": back to a habit or a thing, no home
        return [Claim(holder, "residence", value, not negative, change or kind == "residence+")]
    if kind in ("employer", "employer+", "employer-"):
        value = _value(re.sub(r" as .*$", "", raw))
        if _workplace(value) or (_EN_JOINED_GROUP.match(said) and _en_group(raw)):
            return []  # "I work at home", "I joined a gym": no employer
        return [Claim(holder, "employer", value, kind != "employer-" and not negative, change or kind != "employer")]
    if kind == "name":
        return [Claim(holder, "name", _value(raw), True, change)]
    if kind == "from-to":
        old, new = _value(groups["old"]), _value(raw)
        return [Claim(holder, _like_slot(old), old, False, True), Claim(holder, _like_slot(new), new, True, True)]
    if kind == "switch":
        value = _value(raw)
        return [Claim(holder, _like_slot(value, switched=True), value, True, True)]
    if kind == "setting":
        return [Claim(holder, _attribute_slot(groups["attr"], raw), _value(raw), True, True)]
    if kind in ("like-stop", "like-stop-bare"):
        if _EN_HALT.match(raw):
            return []  # "stopped overnight in Flagstaff": a halt on the way, not giving something up
        verb = match.group(0).split(" ")[-1] if kind == "like-stop-bare" else raw
        return [Claim(holder, "like", _value(verb), False, True)]
    if kind == "like-start":
        value = _value(raw)
        return [Claim(holder, _like_slot(value), value, True, True)]
    if kind == "dislike":
        value = _value(raw)
        return [Claim(holder, _like_slot(value), value, False, change)]
    if kind == "like":
        if groups["verb"] in ("want", "wants") and raw.startswith("to "):
            return []  # "I don't want to paint anymore": a wish of the moment, not a taste
        value = _value(raw) or _value(groups["verb"])
        return [Claim(holder, _like_slot(value), value, not negative, change)]
    if kind == "has":
        return [Claim(holder, "has", _value(raw), not negative and " not " not in f" {match.group(0)} ", change)]
    if kind == "state":
        if _EN_PASSING.match(raw):
            return []  # "I'm not sure", "I'm thinking of …": a moment, not a state
        value = _value(raw)
        return [Claim(holder, "state", value, not negative, change or "no longer" in (groups.get("neg") or ""))]
    return []


# What one joins besides a job: a gym, a club, a class ("I joined a gym", "I joined a book club",
# "I started at a new gym"). Joined, it hid the employer; working there ("I work at a gym",
# "I started working at a gym") is a job.
_EN_JOINED_GROUP = re.compile(r"(?:has )?(?:joined|started at|left) ")
# The club is the head of what was joined: last, or before what says where, when or with whom
# ("a gym near my office", "the Sierra Club in 2020"); not "Studio Ghibli", "Club Med", "Server
# Labs". Some name a company after a bare name ("Alibaba Group", "Acme Studio"), not after
# "a", "the", "my".
# What one joins as a member by its brand's name: gyms and studios ("I joined Equinox"),
# warehouse clubs, slimming and learning programmes, social networks and dating apps. Some are
# employers too ("I joined Peloton", "I joined LinkedIn"): joined bare, no one can tell, and
# the rules leave the employer where it was (a stale hit beside the new one, never a hidden
# one); working there ("I work at Equinox") is a job.
_EN_MEMBERSHIPS = (
    r"equinox|soulcycle|orangetheory|orange theory|f45|barry's|barrys bootcamp|peloton|classpass|"
    r"planet fitness|la fitness|anytime fitness|24 hour fitness|snap fitness|life time|lifetime fitness|ymca|ywca|"
    r"crunch|blink fitness|club pilates|pure barre|solidcore|rumble|"
    r"puregym|pure gym|the gym group|david lloyd|virgin active|fitness first|gold's|curves|"
    r"costco|sam's club|bj's|amazon prime|weight ?watchers|ww|noom|slimming world|"
    # Streaming and other subscriptions ("I joined Netflix" is a subscription as often as a job).
    r"netflix|spotify|hulu|disney ?\+|disney plus|hbo max|paramount ?\+|paramount plus|crunchyroll|audible|"
    r"youtube premium|youtube tv|apple music|apple tv ?\+|tidal|deezer|twitch|xbox game pass|game pass|"
    r"playstation plus|ps plus|kindle unlimited|"
    r"strava|duolingo|goodreads|letterboxd|nextdoor|reddit|twitter|facebook|instagram|tiktok|snapchat|linkedin|"
    r"mastodon|bluesky|patreon|substack|meetup|tinder|bumble|hinge|okcupid|eharmony|match\.com|"
    r"超级猩猩|乐刻|keep|小红书|豆瓣|微博|抖音|快手"
)
_EN_GROUP = re.compile(
    r"\b(?:gym|fitness|club|choir|band|orchestra|league|class(?:es)?|course|group|community|society|church|"
    r"hackathon|wait ?list|waiting list|mailing list|newsletter|discord|server|chat|forum|subreddit|party|meetup|"
    r"union|movement|campaign|protest|crossfit|yoga|pilates|studio|fan ?club|fandom|guild|clan|raid|challenge|"
    r"circle|crew|workshop|bootcamp|boot camp|carpool|coworking(?: space)?|toastmasters|"
    rf"board|advisory board|alumni(?: network| association)?|rewards|"
    # Joined in a role ("I joined Netflix as an engineer"), as "Slack as" below: a job.
    # Its plan too ("I joined Spotify Premium", "... Netflix Basic"): a subscription.
    rf"(?:{_EN_MEMBERSHIPS})(?: (?:premium|family|duo|individual|student|basic|standard|plus|unlimited|free|"
    r"trial|membership|subscription|account|plan|tier|video))*"
    r"(?! as (?:a|an) (?!(?:member|subscriber|customer|user|guest|family|couple|student|"
    r"beginner|trial|paying|premium|free|new member|streamer|creator|content creator|influencer|partner|affiliate|"
    r"moderator|volunteer|contributor|seller|host)\b)\w)|"
    # A call, a meeting, a channel or a meal joined, or left ("I've joined the call", "I joined
    # Globex's Slack", "I joined Tom at Globex for lunch", "I left Acme's Slack channel"): no job.
    r"call|meeting|webinar|(?:zoom|slack|teams)(?! as\b)|channel|stream|livestream|conversation|session|"
    r"stand-?up|huddle|all-?hands|all hands|town ?hall|workspace|group chat|group call|"
    r"lunch|dinner|breakfast|brunch|drinks|coffee|tour|trip)s?"
    r"(?=$|[ ,.!;](?:last|this|yesterday|today|recently|again|now|near|in|on|at|for|with|and|by|from|of|downtown|"
    r"early|late|after|before|tonight|"
    r"nearby|around|that|which|where|who|called|named|as|because|since|so|but|too|also|a|an|the|\d+)\b|[,.!;]?$)"
)
_EN_NAMED_GROUP = re.compile(
    r"(?!(?:a|an|the|my|our|his|her|their|this|that|another|some|one|a new|a local) )[^ ]+ .*"
    r"\b(?:group|studio|community|society|union|party|band|league|movement|campaign)s?\b"
)


def _en_group(raw: str) -> bool:
    """Whether ``raw``, what was joined, is a club, a class, a group (_EN_GROUP), not a company.
    A company named with a club word ends in it ("Alibaba Group"), not before another ("Acme's
    group chat", "the Globex group call"), and is no one's ("Globex's studio" is a group)."""
    found = _EN_GROUP.search(raw)
    if found is None:
        return False
    head = raw[: found.end()]
    return "'s " in head or "s' " in head or not _EN_NAMED_GROUP.fullmatch(head)


# Staying with someone, or at someone's ("at my friend's place", "at my parents' flat").
_EN_HOSTED = re.compile(r" with | at (?:(?:my|a|an|our|his|her|their|the) )?[a-z]+(?:'s|s')(?: |$)")
_EN_HALT = re.compile(r"(?:at|by|in|for|to|over|off|on|overnight|briefly|there|here|when|after|before)\b")
# Verbs in their bare form: with no subject before them they command ("write a reply",
# "play over 265 million tracks"), they do not describe anyone.
_EN_BARE_VERBS = frozenset(
    """like love enjoy adore prefer want drink eat use play watch write smoke speak run read listen go hate dislike
    avoid have own get take""".split()
)
# What leaves a verb to come open, so that a bare verb joined after it by "and" goes on with
# it: an infinitive after a wish or a request ("I want my husband to leave Google", "I asked
# Tom to come back"), a modal ("I will quit", "my son can finish school"), someone made,
# let, helped, seen or watched doing it ("I let my daughter quit school").
_EN_INFINITIVE = re.compile(
    r"\b(?:(?:wants?|wanted|like|love|hop(?:e|es|ed)|plan(?:s|ned)?|wish(?:es|ed)?|ask(?:s|ed)?|tell|tells|told|"
    r"need(?:s|ed)?|expect(?:s|ed)?|encourag(?:e|es|ed)|convinc(?:e|es|ed)|persuad(?:e|es|ed)|urg(?:e|es|ed)|"
    r"advis(?:e|es|ed)|allow(?:s|ed)?|forc(?:e|es|ed)|tr(?:y|ies|ied)|going|intend(?:s|ed)?|beg(?:s|ged)?|"
    r"invit(?:e|es|ed))(?: [\w']+){0,4}? to [a-z]+|"
    r"would|could|can|might|will|shall|should|must|i'd|we'd|i'll|we'll|"
    r"(?:let|lets|make|makes|made|help|helps|helped|watch|watches|watched|see|sees|saw|hear|hears|heard) "
    r"(?:(?:[a-z]+'s |my |his |her |our |their |the |a |an |your )[a-z]+|"
    r"(?!(?:the|a|an|my|his|her|our|their|your)\b)[a-z]+) "
    r"(?!(?:and|but|so|then|in|at|to|for|with|from|on|of|by|yesterday|today|tonight|last|this|a|an|the)\b)[a-z]+)\b"
)
# A clause that opens with a verb of the rules in its third person singular ("lives in
# Paris", "now works at Acme"): joined to "I …" or "we …", its subject is someone else.
_EN_THIRD_SINGULAR = re.compile(
    rf"^{_EN_ADVERBS}(?:(?:no longer|never) )?(?:is|has|does|goes|"
    r"(?:live|reside|stay|work|move|relocate|join|leave|quit|stop|start|change|like|love|enjoy|adore|prefer|want|"
    r"drink|eat|use|play|write|smoke|speak|run|read|listen|hate|dislike|avoid|own|get|take)s|"
    r"(?:watch|switch)es)\b"
)
# A clause that opens with a verb's bare form ("live in Paris", "work at Acme", "not eat meat").
_EN_BARE_START = re.compile(
    rf"^{_EN_ADVERBS}(?:(?:do not|never|not|no longer) )?(?:{'|'.join(sorted(_EN_BARE_VERBS))}|"
    r"live|reside|stay|work|be|become|move|relocate|join|leave|quit|stop|start|switch|change|call|pick|give)\b"
)

# What "I am …" says of a passing moment: hedges, feelings, plans and anything in progress.
_EN_PASSING = re.compile(
    r"^(?:(?:so|very|really|pretty|quite|not|also|still|a bit|kind of|totally|just|always|now) )*"
    r"(?:\w+ing|sure|certain|unsure|glad|happy|sorry|excited|afraid|worried|nervous|curious|interested|able|unable|"
    r"ready|aware|here|back|done|fine|ok|okay|good|great|bored|tired|busy|free|new to|about to|going to|going|"
    r"trying|thinking|planning|looking|wondering|considering|hoping|supposed to|sad|upset|angry|confused|stuck|"
    r"lost|grateful|thankful|proud|impressed|amazed|surprised|open to)\b"
)


# Chinese ---------------------------------------------------------------------------------

_ZH_CHANGE = re.compile(
    r"现在|如今|最近|已经|不再|改|换|搬|戒|开始|以后|从此|转而|跳槽|离职|加入|提高|降低|调成|调到|切换|升级"
)
_ZH_HOLDER = re.compile(r"^(我们|我|用户|他|她|小.|老.|阿.)")
_ZH_FIRST = re.compile(r"(我们|我|用户)")
# "I told you" before what the holder says of themself ("我和你说过我住在上海", "我告诉过你我…",
# "我说过我…"): the words between read as someone else, whose home it was. Only where the
# same first person goes on; "我没和你说过…", "我和你说过我妈…" are read as they are.
_ZH_TOLD = re.compile(
    r"^(我们?)(?:(?:和|跟|对|同)(?:你|您)(?:说|讲|提)(?:起|到)?过?了?|告诉过?(?:你|您)过?|"
    r"(?:说|讲|提)[过了])(?=\1)"
)
_ZH_RELATIVE = re.compile(r"^的?(父母|妹妹|姐姐|哥哥|弟弟|妈妈|爸爸|朋友|同事|孩子|老婆|老公|妻子|丈夫|老板|家人)")
_ZH_LEAD = re.compile(
    r"^(?:现在|如今|最近|已经|一直|平时|每天|每周|早上|晚上|上个月|去年|今年|也|还|都|更|很|非常|特别|真的)+"
)
# One word that may stand between the holder and a rule's verb without naming anyone else
# ("我目前住在…", "以后请叫我…", "我最喜欢…", "用户膝盖受伤后不打…", "用户家里有…").
# Any other words there name whose claim it is: "张伟住在上海", "我妈妈住在成都",
# "我老家在成都", "我家狗名字叫旺财" say nothing of the holder.
# With the holder's employer ("我跟着公司搬到了上海"): neither someone else's claim nor
# someone who shares the home (_ZH_COMPANION).
_ZH_WITH_EMPLOYER = r"(?:跟着?|随着?)(?:公司|单位|部门|团队)"
_ZH_ADVERB = re.compile(
    r"现在|如今|最近|已经|一直|平时|每天|每周|早上|晚上|上个月|去年|今年|目前|以后|今后|从此|将来|"
    r"请|也|还|都|更|很|最|就|又|再|才|常|总是?|非常|特别|真的|确实|其实|本来|终于|刚刚?|正在|经常|通常|一般|平常|"
    # Not "真", "超" or "好" alone: a name of two ("真真来了，住在…") would read as no one.
    r"超级|挺|十分|尤其|比较|"
    # A day ("我今天早上吃了…", "我昨天开始戒…"); see _ZH_DAY for what a day leaves out.
    r"今天|今早|今晚|昨天|昨晚|"
    # A date or a time gone by ("今年三月", "前年", "上周", "2023年", "从上个月开始"); not one
    # to come ("下个月搬到…"): a plan is not yet a change.
    r"(?:[0-9零〇一二两三四五六七八九十几]{1,4}|上+个?|这个?|本|前|每个?)(?:年|月份?|周|星期|礼拜|号|日|天)|"
    r"(?:年|月)(?:初|底|中)|从|开始|起|"
    # The holder's household or company, not someone else ("我们一家", "我家", "我和老婆一起").
    # Following them is the holder's move too ("我跟着老公搬到了上海", "我随父母搬到…"); not 陪,
    # which may be helping them move ("我陪朋友搬家").
    r"[一全]?家里?|一个人|自己|独自|一起|(?:和|跟着?|与|同|带着|随着?)(?:我的?)?(?:老婆|老公|妻子|丈夫|爱人|对象|"
    r"女朋友|男朋友|孩子|儿子|女儿|父母|爸妈|爸爸|妈妈|家人)|在家里?|[，,\s]|"
    # Who came along, as "I moved to Paris with my friend": the holder's move all the same
    # (_ZH_COMPANION keeps who it was, which a later move does not take back).
    r"(?:和|跟着?|与|同|随着?)(?:我的?)?(?:好?朋友|同事|同学|室友|闺蜜|伴侣|男友|女友)|"
    # On a whim, or suddenly ("我临时起意搬到了上海", "我突然搬到上海了"): a move all the same.
    r"临时起意|一时兴起|突然|忽然|"
    # For now (_ZH_TEMPORARY): the holder's, but a claim said so is read as none.
    r"暂时|临时|"
    # Moved with the holder's employer ("我跟着公司搬到了上海", "我随单位调到…"): no one else.
    rf"{_ZH_WITH_EMPLOYER}"
)
# When something happened: a change made then is the holder's ("我今天搬到上海了", "我去年
# 搬到上海了"), but where they lived or stayed then is no home now ("我昨天住在朋友家", "去年
# 我住在北京", "我这周住在朋友家"), nor where they worked then ("去年我在阿里工作") their
# employer, unless it still holds ("从去年开始", "2020年起", but not the 起 of 一起), and a
# "不…了" on a day ("我今天不喝咖啡了") is no change of taste.
_ZH_DAY = re.compile(r"今天|今早|今晚|昨天|昨晚|前天")
_ZH_DATE = re.compile(
    rf"{_ZH_DAY.pattern}|去年|前年|"
    r"(?:[0-9零〇一二两三四五六七八九十几]{1,4}|上个?|这个?|本)(?:年|月份?|周|星期|礼拜|号|日|天)"
)
_ZH_SINCE = re.compile(r"从|开始|(?<!一)起|以来")
# "After something happened" ("用户膝盖受伤后…", "我毕业后…"): the holder's own only where
# the holder opened the clause and the event names no one, since "张伟毕业后住在上海" and
# "我朋友毕业后住在上海" are someone else's move.
_ZH_AFTER = re.compile(r"[^，,]{1,8}?(?:之后|以后|后)")
_ZH_PERSON = re.compile(
    r"[他她它你们人]|妈|爸|父|母|哥|姐|弟|妹|儿|女|孩|爷|奶|姥|外公|外婆|叔|伯|姑|舅|姨|婶|老婆|老公|妻|夫|"
    r"朋友|同事|同学|室友|邻居|对象|老板|领导|上司|客户|宝宝|家人|亲戚|猫|狗|"
    r"先生|太太|媳妇|伴侣|保姆|师傅|师兄|学长|网友|闺蜜|男友|前任|上级|下属|员工|房东|租客|侄|甥|队友|患者|娃|"
    r"医生|大夫|护士|律师|老师|导师|教练|司机|学生"
)
# The most characters a Chinese value or attribute may hold: the labelled pairs' longest
# is 10 (an address), a full postal address about 30. Anything longer is no claim worth
# comparing, and reading it cost up to half a second a save on 8,000 characters (one
# segmentation; "从…离职" tried from every 从).
_ZH_LONGEST = 64
_ZH_NEG = r"(?P<neg>不再|再也不|已经不|从来不|从不|没有|不会|不|没)?"
_ZH_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"出生(?:在|于)(?P<v>.+)$"), "birthplace"),
    (re.compile(r"^(?:对)?(?P<v>.+?)(?P<neg>不)?过敏$"), "allergy"),
    # 搬回: back where one lived, a move all the same ("我搬回北京了"); "搬回来了", "搬回家" name no
    # place. Not 迁回, said of a household registration (户口) as often as of a home.
    (
        re.compile(r"(?:搬到|搬去|搬家到|搬家去|搬来|迁到|迁居到?|(?P<back>搬回(?:到|去|来)?))了?(?P<v>.+)$"),
        "residence+",
    ),
    # A bare 住 only opens the clause: "记不住", "忍不住" are no homes.
    # Nor "一家在", "全家在" ("我们一家在度假"): the household, where it is, not its home.
    (re.compile(r"(?:住在|居住在|定居在|定居|(?<![一全])家在|生活在|^住)(?P<v>.+)$"), "residence"),
    (re.compile(r"(?:跳槽到|跳槽去|入职|加入了?)(?P<v>.+)$"), "employer+"),
    (re.compile(rf"从(?P<v>.{{1,{_ZH_LONGEST}}}?)离职"), "employer-"),
    (re.compile(r"^在(?P<v>.+?)(?:工作|上班|任职|实习|做.*)$"), "employer"),
    (re.compile(r"(?:我叫|叫我|名字是|名字叫|称呼我?为|改名为|改名叫)(?P<v>.+)$"), "name"),
    (re.compile(r"^叫(?P<v>.+)$"), "name"),
    (
        re.compile(
            r"^把?(?P<attr>[^把]*?)(?P<verb>改成|换成|改为|换为|设为|设置为|设成|切换到|切换成|调成|调为|调到|改到|换到|"
            r"提高到|降低到|定在|定为|改用|换用)了?(?P<v>.+)$"
        ),
        "setting",
    ),
    (re.compile(r"戒(?:掉|了)?(?P<v>.+)$"), "stop"),
    (re.compile(r"^(?:(?P<neg>不是|已经不是|不再是)|是)(?P<v>.+)$"), "state"),
    (re.compile(r"^(?P<v>已婚|未婚)$"), "married"),
    (re.compile(r"^(?:开始)(?P<v>.+)$"), "start"),
    (re.compile(r"(?:讨厌|不喜欢|受不了|反感)(?P<v>.+)$"), "dislike"),
    (re.compile(r"^用的是(?P<v>.+)$"), "like"),
    (re.compile(rf"{_ZH_NEG}(?:有|养了?)(?P<v>.+)$"), "has"),
    (
        re.compile(
            rf"{_ZH_NEG}(?P<verb>喜欢|爱喝|爱吃|爱看|爱|喜爱|偏好|偏爱|热爱|习惯|会说|喝|吃|抽|用|看|打|玩|听|说)(?P<v>.+)$"
        ),
        "like",
    ),
)
# "张伟是我同事", "王芳是我的朋友": someone the holder knows, and whom the clauses after it
# are about ("…，他住在上海", "…。现在住在上海"), as after a name _ZH_HOLDER knows ("小王是我同事").
_ZH_INTRODUCED = re.compile(r"^(?P<who>[^是]{1,8})是(?P<v>我的?.{1,12})$")
# "X是Y", but not the 是 of 总是, 还是, 但是, 就是, …
_ZH_ATTR = re.compile(
    r"^(?:的)?(?P<attr>.{1,12}?)(?<![总还但就可要于只真也都不像算正而或凡若倒硬实却竟即便乃又老])是(?P<v>.+)$"
)


def _chinese_clause(clause: str, holder: str, voice: _Voice, subject: str) -> tuple[list[Claim], str, str]:
    """The claims a Chinese clause reads, whom the 他/她 of the clauses after it are, and
    whom those with no subject are about; ``holder`` and ``subject`` are the same of the
    clause before. Both are the clause's subject (the claims' holder, or
    :func:`_chinese_subject`'s), unless the clause opens with the holder's X ("我的医生是李医生，
    住在…": what follows may be the X's) or names someone besides its subject ("用户认识了一个
    朋友，他住在…", "用户有个朋友，住在…"): then ``_SOMEONE``, as in English
    (:func:`_english_subject`). A name the subject is fond of ("用户喜欢张伟") may be a 他
    after it, but a clause with no subject goes on with the subject ("…，住在上海")."""
    if subject.startswith(_KIDS):
        # After the holder's children ("我有两个孩子，…") a clause with no subject is the
        # holder's, unless it may be about the children: then it, and those after it, are
        # no one's ("…，现在都住在上海", "…，都上大学了，住在上海", "…，住在上海的学校").
        subject = subject.removeprefix(_KIDS)
        if not _chinese_lead(clause):
            if _ZH_THEIRS.search(clause) or _ZH_PERSON.search(clause.replace("一家人", "")):
                return [], _SOMEONE, _SOMEONE
            read, holder, after = _chinese_clause(clause, holder, voice, subject)
            # One that reads nothing ("…，一男一女，…") leaves the children the topic.
            return read, holder, after if read or after != subject else _KIDS + subject
    read = _chinese_claims(clause, holder, voice, subject)
    after = read[0].holder if read else _chinese_subject(clause, holder, voice, subject)
    lead = _chinese_lead(clause)
    rest = clause[lead.end() :] if lead else clause
    if relative := _ZH_RELATIVE.match(rest):
        rest = rest[relative.end() :]
    rest = _ZH_LEAD.sub("", rest)
    if lead and rest.startswith("的"):
        after = after if _ZH_OWN_NAME.match(rest) else _SOMEONE
        return read, after, after
    others = rest.replace("一个人", "")  # alone, not with anyone
    if _ZH_WITH_SOMEONE.search(rest) or (not _ZH_IS.match(rest) and _ZH_PERSON.search(others)):
        if lead and _ZH_FIRST.fullmatch(lead.group(1)) and _ZH_CHILDREN.fullmatch(rest):
            # "我有两个孩子，住在上海": a 他 may be one child, but a clause about them says
            # 都 or 他们 (_ZH_ALL); one with no subject goes on with the holder. Only a holder
            # who is the user by name: after "她有两个孩子" a 她 may be anyone, and so may
            # what follows.
            return read, _SOMEONE, _KIDS + after
        return read, _SOMEONE, _SOMEONE
    if _zh_fond_of_someone(rest, voice.fond_of) or _zh_of_someone(rest):
        return read, _SOMEONE, after
    return read, after, after


# The holder's children, more than one ("有两个孩子", "有一儿一女"). Not "有个儿子，住在…",
# which says where the son lives.
_ZH_CHILDREN = re.compile(r"有(?:[两二三四五几]|好几)个(?:孩子|小孩|儿子|女儿|娃)|有一儿一女")
# A clause with no subject about several ("…，都住在上海", "也都…"): never one holder's.
_ZH_ALL = re.compile(r"(?:也|还)?(?:都|全都|各自|分别)")
# The subject of the clauses with no subject after the holder's children (_chinese_clause):
# the holder, marked so.
_KIDS = "\x01"
# A clause after the holder's children that may be about them: all of them, anywhere in it
# ("现在都住在…", "都上大学了"), "也" (they too, or the holder too), school (住校), one of them,
# a job ("在上海工作": grown children work, and where they do says nothing of where the
# holder does, as a home shared with young ones would).
_ZH_THEIRS = re.compile(
    r"都|各自|分别|也|上学|读书|念书|上课|校|幼儿园|宿舍|寄宿|工作|上班|任职|实习|打工|"
    r"^(?:一个|一男|一女|老[大二三四]|大的|小的|两个|俩)"
)


# A verb of fondness before a name ("用户喜欢张伟", "用户崇拜王芳的…"): a surname and one or
# two characters, or 小/老/阿 and one, ending the clause or before 的. Not "喜欢咖啡"; but
# also "喜欢李子", "喜欢马拉松" (as jieba tags them too): the clauses after them go to no one,
# a change missed rather than a home taken from someone else.
_ZH_SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢"
    "姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
)
# Surnames of two characters: "欧阳娜娜" has no surname above.
_ZH_DOUBLE_SURNAMES = (
    "欧阳|司马|诸葛|上官|东方|皇甫|慕容|司徒|令狐|公孙|夏侯|尉迟|长孙|端木|独孤|南宫|西门|宇文|轩辕|呼延"
)
_ZH_GIVEN_NAME = (
    rf"(?:(?:{_ZH_DOUBLE_SURNAMES})[\u4e00-\u9fff]{{0,2}}|[{_ZH_SURNAMES}][\u4e00-\u9fff]{{1,2}}|"
    r"[小老阿][\u4e00-\u9fff])"
)
# Someone's home ("住在朋友家", "住在张伟家里"): where the holder stays, as "I stay at my
# friend's place" (_EN_HOSTED); 住 is to live and to stay, and which it is the rules cannot tell.
_ZH_HOSTED = re.compile(rf"(?:{_ZH_PERSON.pattern}|{_ZH_GIVEN_NAME})家[里中]?$")
# An aspect mark may come between ("爱上了张伟", "喜欢过王芳"), and how long after ("喜欢张伟很久了").
_ZH_FOND_VERB = (
    r"(?:喜欢|爱|暗恋|崇拜|欣赏|讨厌|恨|迷恋|佩服|怀念|羡慕|信任|嫉妒|心疼|担心|关心|在乎|惦记|尊敬|敬佩|支持|"
    # Or calls them to mind ("用户想起了张伟，他住在上海"), as "mentioned Tom" does in English.
    r"想起|想到|记起|记得|梦见|梦到|提到|提起|说起|聊起|谈到|谈起)"
    r"(?:上了|上|了|过)?"
)
_ZH_FOND_OF = re.compile(rf"{_ZH_FOND_VERB}(?P<who>{_ZH_GIVEN_NAME})(?:的|$|很久|好久|多年|[了啊呀吧呢])")
# A Latin word in Chinese text ("用户喜欢Anna", "用户是Anna的粉丝"): a name where the text as
# it came capitalises it and the alias table does not know it (_fond_of), whatever the verb;
# "喜欢python", "换了iPhone" are things. "在Google工作" reads as a name too: a change missed.
_ZH_LATIN_WORD = re.compile(r"[\u4e00-\u9fff]\s*([A-Za-z][A-Za-z'-]*)")
# A clause with no subject that ends as a noun ("住在上海的那个", "…的那位"): it says who
# someone is, not what its subject does.
_ZH_THE_ONE = re.compile(r"的(?:那|这)一?[个位](?:人)?$")
# "是张伟的朋友", "当他的助理": the holder is someone's X, and a 他 after it may be that someone.
# Not "是两个孩子的妈妈" (a 她 is no two children), nor "是公司的老板".
_ZH_WHOSE = re.compile(r"^(?:是|当|做)(?P<owner>[^的，,]{1,8}?)的")
_ZH_MANY = re.compile(r"^[两二三四五六七八九十几多好许]|^(?:这|那)些|们$")
# What may come between the one person and 的 ("是张伟最好的朋友", "张伟多年的同事").
_ZH_WHOSE_HOW = re.compile(r"(?:最[\u4e00-\u9fff]{1,2}|多年|唯一)$")


def _zh_fond_of_someone(rest: str, fond_of: frozenset[str]) -> bool:
    """Whether ``rest`` is fond of someone by name ("喜欢张伟"), not of a known concept
    ("喜欢上海"), or names someone in Latin letters ("是Anna的粉丝": a name in ``fond_of``)."""
    if any(word in fond_of for word in re.findall(r"[a-z][a-z'-]*", rest)):
        return True
    return any(canonical_key(match.group("who")) not in _KNOWN for match in _ZH_FOND_OF.finditer(rest))


def _zh_of_someone(rest: str) -> bool:
    """Whether ``rest`` makes its subject one person's X ("是张伟的朋友", "是一个孩子的妈妈")."""
    whose = _ZH_WHOSE.match(rest)
    if whose is None:
        return False
    owner = _ZH_WHOSE_HOW.sub("", whose.group("owner"))
    return not _ZH_MANY.search(owner) and bool(_ZH_PERSON.search(owner) or re.fullmatch(_ZH_GIVEN_NAME, owner))


# Words that bring someone besides the subject into a clause, a name included ("见了张伟").
_ZH_WITH_SOMEONE = re.compile(
    r"认识|见了|见到|见面|遇到|遇见|碰到|碰见|看望|拜访|探望|陪|约了|告诉|嫁给|娶|和|跟|与|"
    r"帮(?!忙)|想念|照顾|感谢|谢谢|联系|采访|介绍|雇|请了|收养|领养|有一?位"
)
# A person after these is the subject itself ("用户是护士", "用户在医院当护士").
_ZH_IS = re.compile(r"是|当|做|(?:在.{1,12}?)?(?:当|做)")
_ZH_OWN_NAME = re.compile(r"的(?:名字|姓名|全名|小名|昵称|称呼)")


def _chinese_claims(clause: str, holder: str, voice: _Voice, subject: str) -> list[Claim]:
    """The claims ``clause`` reads: about whom it opens with (a 他 is ``holder``), or ``subject``."""
    change = bool(_ZH_CHANGE.search(clause))
    rest = clause
    possessive = False
    lead = _chinese_lead(rest)
    if not lead:
        if _ZH_THE_ONE.search(rest):
            return []  # "用户喜欢张伟，住在上海的那个": who lives there, not what the subject does
        if _ZH_ALL.match(rest):
            return []  # "我有两个孩子，都住在上海": theirs
        holder = subject
    else:
        found = _holder(lead.group(1), holder, voice)
        if found is None:
            return []
        holder = found
        rest = rest[lead.end() :]
        relative = _ZH_RELATIVE.match(rest)
        if relative:
            holder = f"{holder}的{relative.group(1)}"
            rest = rest[relative.end() :]
        elif rest.startswith("的"):
            possessive = True
    rest = _ZH_LEAD.sub("", rest)
    if possessive or rest.startswith("的"):
        rest = rest.removeprefix("的")
        setting = _ZH_RULES[9][0].match(rest)
        if setting:
            return _owned(_chinese_rule("setting", setting, holder, change, clause), unique=True)
        attr = _ZH_ATTR.match(rest)
        return _chinese_attribute(attr, holder, change, owned=True) if attr else []
    for pattern, kind in _ZH_RULES:
        match = pattern.search(rest)
        if match:
            before = rest[: match.start()]
            if not _only_adverbials(before, opened=lead is not None):
                # Someone or something else's: a name the holder pattern does not know, a
                # relative without 的, the holder's hometown or pet.
                holder = f"{holder}的{before}" if lead else before
            elif kind == "name" and lead is None and match.group().startswith("名字"):
                return []  # "我养了一只猫，名字叫橙子": the name of what was just mentioned
            opening = clause[: len(clause) - len(rest) + match.start()]  # "今天我", "我今天"
            if _ZH_TEMPORARY.search(opening):
                return []  # "我临时搬到上海", "我暂时住在上海": a stay, as "我搬到上海住一段时间" is
            if kind in ("residence", "employer") and _ZH_ALSO.search(opening):
                return []  # "我也在腾讯工作", "我也住在上海": a second job or home, or the same as someone's
            if kind.rstrip("+-") in ("residence", "employer") and _ZH_WHILE.search(rest, match.start()):
                return []  # "我和朋友住在上海的时候很开心": when, not where the holder lives now
            dated = kind in ("residence", "employer") and _ZH_DATE.search(opening) and not _ZH_SINCE.search(opening)
            if dated or (_ZH_DAY.search(opening) and match.groupdict().get("neg")):
                return []
            return _owned(_chinese_rule(kind, match, holder, change, clause), unique=kind == "setting")
    introduced = None if lead else _ZH_INTRODUCED.match(rest)
    if introduced and _ZH_PERSON.search(introduced.group("v")):
        return _owned(_chinese_rule("state", introduced, introduced.group("who"), change, clause))
    attr = _ZH_ATTR.match(rest)
    return _chinese_attribute(attr, holder, change, owned=lead is not None) if attr else []


# What one joins (加入) besides a job (_EN_GROUP): "加入了读书会", "加入了一个跑步俱乐部". Not
# 集团 ("加入了蚂蚁集团"), 出版社, 基金会: employers.
_ZH_GROUP = re.compile(
    r"(?:俱乐部|读书会|工会|协会|学生会|社团|合唱团|乐团|乐队|球队|战队|车队|群|班|课程?|小组|社区|健身房|"
    r"志愿者(?:协会|团队|组织)?|党|兴趣小组|后援会|粉丝团|合唱队|跑团|共青团|瑜伽馆|健身馆|健身(?:中心|会所|俱乐部)?|"
    rf"董事会|理事会|校友会|会员店|(?<![a-z]){_EN_MEMBERSHIPS}|"
    # A chat, a meeting, a call or a channel joined ("加入了腾讯的会议", "加入了群聊"): no job.
    r"群聊|群组|讨论组|聊天室?|会议|例会|周会|晨会|早会|年会|大会|研讨会|讨论会|分享会|发布会|聚会|饭局|"
    r"通话|电话会议?|视频会议?|语音|直播间?|频道|活动|"
    # A membership by any name ("加入了腾讯视频会员", "QQ音乐会员"): a subscription, no job.
    r"会员)(?:的会员|会员)?$"
)
# Also, at the same time (_EN_BESIDES): a home or job besides, not instead.
_ZH_ALSO = re.compile(r"也|同时")
# When something happens, to come or gone by: with _ZH_ADVERB, what may open a clause before its subject.
_ZH_WHEN = re.compile(
    r"下个?(?:月|周|星期|礼拜)|[上下中]午|明天|明年|后天|今天|今晚|昨天|昨晚|周末|这次|那次|(?:周|星期|礼拜)[一二三四五六日天]|"
    r"春节|过年|国庆|中秋|端午|元旦|五一|暑假|寒假|假期|放假"
)
# A trip: where the holder stays on it is not their home.
_ZH_TRIP = re.compile(r"出差|旅游|旅行|度假|出游|开会|玩|婚礼|葬礼|探亲|培训|看病|比赛|会议|展会")
# Where a clause's predicate begins: a verb, an auxiliary, a negation.
_ZH_VERB = re.compile(r"[去来到回在住搬要想会能可说讲是有叫把被给让对带打准计正已不没别看吃喝玩买做写学坐走出进上下过]")


def _chinese_lead(clause: str) -> re.Match[str] | None:
    """The holder that opens ``clause``, or the first person after adverbials that open it
    ("现在我住在上海", "去年我们搬到…"). Read one word at a time, as in :func:`_only_adverbials`."""
    lead = _ZH_HOLDER.match(clause)
    at = 0
    while lead is None and (word := _ZH_ADVERB.match(clause, at)):
        at = word.end()
    return lead or (_ZH_FIRST.match(clause, at) if at else None)


def _chinese_subject(clause: str, holder: str, voice: _Voice, subject: str) -> str:
    """Whom a clause that reads no claim names as its subject, for the clauses after it
    that have none: "王芳下周去上海出差，住在外滩附近" is 王芳's stay, "我朋友来杭州玩，住在
    西湖边" the friend's. Where it names no one, ``subject`` still holds: whom a clause with
    no subject was about before it (:func:`_chinese_clause`). On a trip
    ("下周去上海出差，住在外滩附近") the holder is the trip, named by its clause: where they
    stay on it is no home, and no other trip's stay either. After "我" only a person counts
    ("我朋友"): what follows "我" is mostly its predicate ("我觉得…")."""
    lead = _chinese_lead(clause)
    owner, at = None, 0
    if lead:
        owner = _holder(lead.group(1), holder, voice)
        if owner is None:
            return _SOMEONE  # "他" in a speaker's line, or after a clause about the speaker
        at = lead.end()
    while opening := _ZH_ADVERB.match(clause, at) or _ZH_WHEN.match(clause, at):
        at = opening.end()
    start = at
    while at < len(clause) and not (
        _ZH_ADVERB.match(clause, at) or _ZH_WHEN.match(clause, at) or _ZH_VERB.match(clause, at)
    ):
        at += 1
    words = clause[start:at]
    if owner is None and words:
        owner = words
    elif owner is not None and words and _ZH_PERSON.match(words):
        owner = f"{owner}的{words}"
    owner = owner or subject
    trip = _ZH_TRIP.search(clause)
    return f"{owner}的{trip.group()}（{clause}）" if trip else owner


def _only_adverbials(words: str, *, opened: bool) -> bool:
    """Whether ``words`` are adverbials and nothing else, read one word at a time; with
    ``opened`` (the holder opened the clause) an event that names no one may come first.
    Not one regex with the words under a star: its alternatives overlap ("以后" is also
    "以" + "后", "刚刚" is "刚" twice), and a run of them that fails at its end is tried
    every way it splits, so 40 characters took a minute."""
    at = 0
    after = _ZH_AFTER.match(words) if opened else None
    if after is not None and not _ZH_PERSON.search(after.group()):
        at = after.end()
    while at < len(words):
        word = _ZH_ADVERB.match(words, at)
        if word is None:
            return False
        at = word.end()
    return True


def _too_long(match: re.Match[str]) -> bool:
    return any(len(words) > _ZH_LONGEST for words in match.groupdict().values() if words)


def _chinese_attribute(match: re.Match[str], holder: str, change: bool, *, owned: bool) -> list[Claim]:
    if _too_long(match):
        return []
    attr, raw = match.group("attr"), match.group("v")
    slot = _attribute_slot(attr, raw)
    if slot == "residence" and _region(raw):
        return []  # "我的住址是南方", as 我住在南方
    unique = _known_attribute(attr) or slot in _SINGLE_SLOTS
    return [Claim(holder, slot, _value(raw), True, change, unique=unique, owned=owned)]


# What one moves back to besides a named place (_EN_BACK_NOT_A_PLACE): "原来的公司", "以前的宿舍".
_ZH_BACK_NOT_A_PLACE = re.compile(r"的|^(?:原来|以前|之前|从前|老)")


def _chinese_rule(kind: str, match: re.Match[str], holder: str, change: bool, clause: str) -> list[Claim]:
    if _too_long(match):
        return []
    groups = match.groupdict()
    negative = bool(groups.get("neg"))
    said = (groups.get("v") or "").strip()  # with its 了: "…有一段时间了" is since when
    raw = re.sub(r"(?:了|啦|的|呢|吧)+$", "", said)
    # "不…了" is the Chinese "no longer".
    if negative and clause.endswith("了"):
        change = True
    if kind == "birthplace":
        return [Claim(holder, "birthplace", _value(raw))]
    if kind == "allergy":
        return [Claim(holder, "allergy", _value(raw), not negative, change)]
    if kind == "residence" and (_LODGING.search(raw) or _ZH_HOSTED.search(raw)):
        return []  # "住在酒店", "住在上海的民宿", "住在朋友家": a stay, not a home
    if kind == "residence+" and _ZH_STINT.search(said):
        return []  # "我搬到上海住一段时间": a stay, not a home
    if kind in ("residence", "residence+"):
        if kind == "residence+":
            raw = re.sub(r"(?:去|来)?住(?:下)?$", "", raw) or raw  # "搬到宿舍住了": the 宿舍
        value = _value(raw)
        if _unnamed_place(value) or _region(raw):
            return []  # "住在家里", "住在老家", "搬到郊区", "住在南方": where, it does not say
        if groups.get("back") and _ZH_BACK_NOT_A_PLACE.search(raw):
            return []  # "搬回原来的公司", "搬回以前的宿舍": back where, it does not name
        return [Claim(holder, "residence", value, True, change or kind == "residence+")]
    if kind in ("employer", "employer+", "employer-"):
        value = _value(raw)
        if _workplace(value) or (match.group().startswith("加入") and _ZH_GROUP.search(raw)):
            return []  # "在家工作", "加入了读书会": no employer
        return [Claim(holder, "employer", value, kind != "employer-", change or kind != "employer")]
    if kind == "name":
        return [Claim(holder, "name", _value(raw), True, change)]
    if kind == "setting":
        attr = groups["attr"]
        if not attr:
            value = _value(raw)
            return [Claim(holder, _like_slot(value, switched=True), value, True, True)]
        plain = groups["verb"] in ("设为", "设置为", "设成", "定在", "定为")
        return [Claim(holder, _attribute_slot(attr, raw), _value(raw), True, change or not plain)]
    if kind == "stop":
        return [Claim(holder, "like", _value(raw), False, True)]
    if kind == "state":
        return [Claim(holder, "state", _value(raw), not negative, change)]
    if kind == "married":
        return [Claim(holder, "state", "married", raw == "已婚", change)]
    if kind == "start":
        value = _value(raw)
        return [Claim(holder, _like_slot(value), value, True, True)]
    if kind == "dislike":
        value = _value(raw)
        return [Claim(holder, _like_slot(value), value, False, change)]
    if kind == "has":
        return [Claim(holder, "has", _value(raw), not negative, change)]
    if kind == "like":
        value = _value(raw)
        return [Claim(holder, _like_slot(value), value, not negative, change)]
    return []


# --- values and slots ---------------------------------------------------------------------


def _value(raw: str) -> str:
    """A comparable form of a value: its alias-table concept, else its content terms."""
    text = _EN_TRAILING.sub("", raw).strip(" .,:;'\"") if raw.isascii() else raw.strip()
    text = re.sub(r"^(?:a|an|the|some|my|their|his|her|more|to|in|of)\s+", "", text)
    text = re.sub(r"^(?:drinking|eating|using|playing|watching|writing|reading|smoking|doing) ", "", text)
    key = canonical_key(text)
    if key != text:
        return key
    for part in sorted(_concepts_in(text), key=len, reverse=True):
        if not re.sub(r"[^a-z\u4e00-\u9fff]", "", text.replace(part, "")):
            return part
        break
    # Short codes ("A型", "o") may be nothing but stop words to the term splitter.
    if (len(text) <= 3 and re.search(r"[a-z0-9]", text)) or not terms(text):
        return key
    return _terms_value(text)


# Where work is done, not for whom: "I work at home", "我在家远程工作", "在公司上班" name no
# employer. Each word as _value reads it ("offic", "办公 公室 办公室"); "Home Depot" and
# "家乐福" hold other words, so they stay employers.
_WORKPLACE_WORDS = frozenset(
    {"home", "hous", "offic", "remot", "家", "家里", "家中", "远程", "公司", "单位", "办公", "公室", "办公室"}
)


def _workplace(value: str) -> bool:
    return set(value.split()) <= _WORKPLACE_WORDS


# A home that names no place: home itself, a hometown or a kind of dwelling or district
# ("my hometown", "a small apartment", "a townhouse", "the suburbs", "the other side of
# town", "家里", "老家", "郊区", "学校宿舍", "新房子", "三楼"),
# with what may qualify it. Read as a city of its own, "我住在家里" superseded "我住在上海";
# whether the holder moved, and where to, it does not say, so it is no home to compare.
# Each word as _value reads it; one word besides ("a flat in Paris" reads "pari", "北京的
# 郊区" reads "beijing 郊区") names the place, and the home stays.
_UNNAMED_PLACE_WORDS = frozenset(
    """home hometown town citi centr center downtown villag countrysid suburb area neighbourhood neighborhood
    place here there hous apart flat condo studio dorm dormitori room basement build
    new old small big littl tini nice quiet share rent own parent famili student
    townhous farmhous penthous duplex bungalow cottag cabin villa mansion loft uptown midtown side wood
    van houseboat boat caravan trailer camper rv tent farm ranch
    家 家里 家中 我家 老家 自己 家乡 故乡 新 这里 这儿 那里 那儿 这边 那边 附近 郊区 城郊 市区 中心 市中心 城里 乡下
    农村 村里 镇上 城市 同一 同一个 公寓 宿舍 学校 单位 出租 租屋 出租屋 小区 房子 楼上 楼下
    公司 里 小 大 更大 更小 一 两 一个 一套 新房 新房子 老房 老房子 大房 大房子 小房 小房子 房间 小房间 别墅 平房 楼房
    居室 两居室 三居室 单间 合租 租房 合租房 旁边 隔壁 对面 楼 层""".split()
)
# A floor of a building ("三楼", "28楼"): where in the building, not where in the world.
_ZH_FLOOR = re.compile(r"[0-9一二三四五六七八九十两几顶]+楼")


def _unnamed_place(value: str) -> bool:
    return all(word in _UNNAMED_PLACE_WORDS or _ZH_FLOOR.fullmatch(word) for word in value.split())


# A region that holds, or may hold, the home the holder had: a part of the world, or of a
# country, by its direction ("Europe", "the south", "southern Germany", "the west coast",
# "abroad", "南方", "欧洲", "国外", "江苏南部", "上海一带"). "I live in Europe now" after
# "I live in Berlin" may say the same; which it is, the rules cannot tell, so it is no home
# to compare, as "the suburbs" is none. A country is weighed in _compare. Names that open
# with a direction stay names ("South Africa", "North Carolina", "West Virginia").
_EN_COMPASS = r"(?:north|south|east|west)(?:[- ]?(?:east|west))?"
_EN_REGION = re.compile(
    rf"(?:the )?(?:{_EN_COMPASS}|midwest|mainland|continent|tropics)(?: (?:of|in) .+)?|"
    rf"(?:the )?(?:{_EN_COMPASS} )?coast|"
    rf"(?:{_EN_COMPASS}ern|central|upstate|downstate|rural|inland|coastal) .+|"
    rf"(?!south africa$)(?:(?:{_EN_COMPASS}(?:ern)?|central|latin|the) )?"
    r"(?:europe|asia|africa|americas?|oceania|antarctica|scandinavia|nordics|balkans|baltics|caribbean|mediterranean|"
    r"middle east|far east|near east|eu|european union|pacific northwest)|"
    r"abroad|overseas"
)
_ZH_REGION = re.compile(
    r".{0,8}?[东南西北中](?:部|边)|[东南西北]方|东北|西北|西南|东南|华[东南西北中]|江南|江北|岭南|关外|塞外|沿海|内地|大陆|"
    r"国外|海外|外地|外省|异国他乡|异国|他乡|"
    r"欧洲|亚洲|非洲|美洲|北美洲?|南美洲?|拉美|中美洲|大洋洲|中东|东南亚|东亚|南亚|中亚|西亚|[北西东南中]欧|欧盟|"
    r".{1,8}?(?:一带|地区)"
)
_EN_TRAILING_WHEN = re.compile(r"(?: (?:now|currently|these days|today|again|for good))+$")


def _region(raw: str) -> bool:
    """Whether a home as said (``raw``) is a region (_EN_REGION, _ZH_REGION)."""
    if _HAN.search(raw):
        return bool(_ZH_REGION.fullmatch(raw))
    text = _EN_TRAILING_WHEN.sub("", _EN_TRAILING.sub("", raw).strip(" .,:;'\""))
    return bool(_EN_REGION.fullmatch(text))


# What an English home may say after the dwelling ("a house with a garden", "a flat near the
# park"), and the words that make one a kind of dwelling, not a name: "a", "my" … before it
# ("a bigger apartment", "my parents' old house"); after "the" a name may end so ("the Bay
# Area", "the East Village"), which only _unnamed_place leaves out, all its words known.
_EN_HOME_DETAIL = re.compile(r" (?:with|near|by|next to|close to|on|at|facing|overlooking|above|behind|opposite) ")
_EN_INDEFINITE = frozenset("a an my our his her their this that your".split())
_UNNAMED_DWELLINGS = frozenset(
    """home hometown town villag area neighbourhood neighborhood place hous apart flat condo studio dorm dormitori
    room basement build bungalow cottag cabin loft""".split()
)


def _en_unnamed_home(raw: str) -> bool:
    """Whether an English home (``raw``, as the rule read it) is a kind of dwelling or place
    that no name follows: "a house with a garden", "a bigger apartment close to the station"."""
    head = _EN_HOME_DETAIL.split(raw.strip(), maxsplit=1)[0].split()
    return (
        len(head) > 1
        and head[0] in _EN_INDEFINITE
        and (_unnamed_place(_value(" ".join(head))) or _value(head[-1]) in _UNNAMED_DWELLINGS)
    )


def _terms_value(text: str) -> str:
    words = [w for w in terms(text) if (w not in _FILLER and not w.isdigit()) or (w.isdigit() and len(w) <= 4)]
    return " ".join(canonical_key(w) for w in words if w not in _FILLER)


def _concepts_in(text: str) -> list[str]:
    return [key for key, pattern in _CONCEPTS if pattern.search(text)]


def _whole_word(value: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z]){re.escape(value)}(?![a-z])")


# Every class value, each with its pattern as a whole word (compiled once: a save reads
# the claims of every candidate, and each value read is looked up in all of them).
_CONCEPTS = tuple((value, _whole_word(value)) for values in _VALUE_CLASSES.values() for value in values)
_CLASS_WORDS = {name: tuple(_whole_word(m) for m in members if len(m) > 3) for name, members in _VALUE_CLASSES.items()}


# The most search terms a value may hold for a word in it to give it a class ("a blue theme",
# "the dark mode on my phone"): in a longer one ("a sleep mask to block out any light", "the
# idea of incorporating dark, rich colors") the word is part of something else, and read as a
# theme it replaced the user's "I like dark mode".
_CLASS_TERMS = 3


def _value_class(value: str) -> str | None:
    canonical = canonical_key(value)
    if canonical in ALIASES.values() and not any(canonical in members for members in _VALUE_CLASSES.values()):
        return None  # a known concept of its own: "green tea" is a drink, not a colour
    for name, members in _VALUE_CLASSES.items():
        if canonical in members:
            return name
    if len(terms(value)) > _CLASS_TERMS:
        return None  # "a sleep mask to block out any light": a word of a long value names no theme
    for name, patterns in _CLASS_WORDS.items():
        if any(pattern.search(value) for pattern in patterns):
            return name
    for alias_value in terms(value):
        key = canonical_key(alias_value)
        for name, members in _VALUE_CLASSES.items():
            if key in members:
                return name
    return None


def _like_slot(value: str, *, switched: bool = False) -> str:
    value_class = _value_class(value)
    if value_class in ("colour", "theme", "channel"):
        return f"pref:{value_class}"
    return "switch" if switched else "like"


# Attributes that hold one value at a time by their name (a word of the attribute, stemmed):
# a person has one timezone and one favourite colour, but many budgets, goals and plans,
# so those replace only when their holder says they changed.
_SINGLE_ATTRS = """favourite favorite preferred default timezone currency address hometown birthday birthdate
    blood nickname name theme colour color font ringtone wallpaper notification channel
    最喜欢 最爱 偏好 默认 首选 时区 货币 地址 住址 生日 血型 昵称 名字 主题 颜色 字体 铃声 壁纸 通知"""
# Words that make a "Label: value" line an attribute rather than a speaker's line.
_LABELS = """deadline due appointment meeting standup sync schedule language budget salary income rent age height
    weight title role position job occupation employer company school university major plan tier subscription
    diet goal target phone email status contact home city residence
    截止 日期 时间 会议 周会 例会 预约 语言 预算 工资 薪水 房租 年龄 身高 体重 职位 公司 学校 专业 套餐 饮食 目标
    电话 手机号 邮箱 状态 家 居住地"""


@lru_cache(maxsize=4)
def _stems(words: str, chinese: bool) -> frozenset[str]:
    """The search terms of ``words``; of their Latin-script part alone unless ``chinese``.
    Terms without a Chinese one meet no Chinese term, and segmenting the Chinese words
    would load jieba's dictionary (about 1.7 s) at the first English claim."""
    return frozenset(terms(words if chinese else without_chinese(words)))


def _known_attribute(attr: str) -> bool:
    words = set(terms(attr))
    return bool(words & _stems(_SINGLE_ATTRS, any(map(is_chinese, words))))


def _names_attribute(label: str) -> bool:
    """Whether a ``Label:`` prefix names an attribute rather than a speaker."""
    words = set(terms(label))
    chinese = any(map(is_chinese, words))
    return bool(words & (_stems(_SINGLE_ATTRS, chinese) | _stems(_LABELS, chinese)))


_RESIDENCE_ATTRS = frozenset({"home", "home city", "city", "residence", "address", "住址", "家", "居住地"})
_NAME_ATTRS = ("name", "名字", "姓名", "昵称", "称呼")


def _attribute_slot(attr: str, raw_value: str) -> str:
    attr = re.sub(r"^(?:the|my|our|their|his|her|a|an) ", "", attr.strip())
    attr = re.sub(r"^(?:现在|目前|最近)?的?", "", attr)
    if attr in _RESIDENCE_ATTRS:
        return "residence"
    if any(word in attr for word in _NAME_ATTRS):
        return "name"
    value_class = _value_class(raw_value)
    if value_class is not None and (
        value_class != "channel" or any(word in attr for word in ("notif", "通知", "channel", "contact"))
    ):
        return f"pref:{value_class}"
    words = [w for w in terms(attr) if w not in ("user", "用户", "current", "default", "目前")]
    return "attr:" + " ".join(words or [attr])


# --- comparing ----------------------------------------------------------------------------


def _same_value(a: str, b: str) -> bool:
    if a == b:
        return True
    wa = {_BROADER.get(w, w) for w in a.split()} | set(a.split())
    wb = {_BROADER.get(w, w) for w in b.split()} | set(b.split())
    if _BROADER.get(a) == b or _BROADER.get(b) == a or (wa & set(_BROADER.values()) & wb):
        return True
    if not wa or not wb or not wa & wb:
        return False
    small, large = sorted((wa, wb), key=len)
    return small <= large or len(wa & wb) / len(wa | wb) >= 0.5


def _same_slot(old: Claim, new: Claim) -> bool:
    # Keep ``slots_of`` in step: it must meet wherever this holds.
    if old.holder != new.holder:
        return False
    if old.slot == new.slot:
        return True
    # "switched to an iPhone" against "uses an Android phone": the same kind of thing.
    pair = {old.slot, new.slot}
    if pair == {"switch", "like"}:
        return True
    return False


def slots_of(text: str) -> frozenset[str]:
    """What the claims of ``text`` are about, one key per claim: its holder and slot
    ("switch" filed with "like", as ``_same_slot`` pairs them). Two memories without keys
    are judged other than unrelated only where their keys meet, so a candidate whose keys
    miss the new memory's needs no reading (``FastNetwork.may_conflict``)."""
    return frozenset(f"{claim.holder}\x1f{'like' if claim.slot == 'switch' else claim.slot}" for claim in claims(text))


def rules() -> str:
    """A fingerprint of the rules that read claims: this module and the entity keys it
    uses, as installed. The fast network keeps ``slots_of`` each memory under it; slots
    kept under another fingerprint are read again (``FastNetwork.load``)."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(Path(entities.__file__).read_bytes())
    return digest.hexdigest()[:16]


def _compare(old: Claim, new: Claim) -> Verdict:
    if not _same_slot(old, new):
        return Verdict.UNRELATED
    if "switch" in (old.slot, new.slot):
        old_head, new_head = old.value.split()[-1:], new.value.split()[-1:]
        if old.value != new.value and old_head == new_head and old.positive and new.positive:
            return Verdict.REPLACE
        if old.value == new.value and old.positive == new.positive:
            return Verdict.DUPLICATE
        return Verdict.UNRELATED
    same = _same_value(old.value, new.value)
    if same:
        if old.positive == new.positive:
            return Verdict.DUPLICATE
        return Verdict.REPLACE if new.change else Verdict.CONTRADICT
    if old.single_valued and old.positive and new.positive:
        # A different value replaces only where the slot holds one value by its name or
        # rule, or the holder says it changed ("my laptop is now a MacBook"). Anything
        # else ("the weather is cold" / "the weather is nice now") is two observations.
        if not (old.unique or new.unique or (new.owned and new.change)):
            return Verdict.UNRELATED
        if old.slot == "residence" and _country(old.value) != _country(new.value):
            return Verdict.UNRELATED  # "I live in Berlin" → "I live in Germany now": the same home, maybe
        return Verdict.CONTRADICT if old.immutable else Verdict.REPLACE
    return Verdict.UNRELATED


_PRECEDENCE = (Verdict.REPLACE, Verdict.CONTRADICT, Verdict.DUPLICATE)

_CITY_STATES = ("singapore", "monaco", "vatican")
# Countries as a home is said in them. A home in a country after one in a city, or the other
# way round ("I live in Berlin" → "I live in Germany now", "我住在北京" → "我住在中国"), may be
# the same home told more widely or more closely; which, the rules do not know, so neither
# replaces the other. One country after another still does ("I live in Germany" → "I moved to
# France"), and so does one city after another.
_EN_COUNTRY_NAMES = (
    # Not a city-state: "I moved to Singapore" after "I live in Berlin" is a move.
    *(name for name in _EN_COUNTRIES if name not in ("america", "zealand", *_CITY_STATES)),
    *("the us", "the usa", "the uk", "the united states", "united states", "the united states of america"),
    *("the united kingdom", "united kingdom", "the states", "new zealand", "south korea", "north korea"),
    *("the netherlands", "the philippines", "the czech republic", "czech republic", "south africa"),
    *("great britain", "britain", "northern ireland"),
)
_ZH_COUNTRY_NAMES = tuple(
    """中国 美国 英国 法国 德国 日本 韩国 朝鲜 意大利 西班牙 葡萄牙 荷兰 瑞士 瑞典 挪威 丹麦 芬兰 冰岛 爱尔兰
    俄罗斯 乌克兰 波兰 奥地利 比利时 希腊 土耳其 捷克 匈牙利 罗马尼亚 加拿大 墨西哥 巴西 阿根廷 智利 秘鲁
    哥伦比亚 印度 泰国 越南 马来西亚 印尼 印度尼西亚 菲律宾 澳大利亚 澳洲 新西兰 以色列 埃及 南非 肯尼亚
    尼日利亚 摩洛哥 伊朗 巴基斯坦""".split()
)


@lru_cache(maxsize=2)
def _country_values(chinese: bool) -> frozenset[str]:
    """The values (_value) a home in a country reads as; the Chinese ones only when asked,
    since segmenting them loads jieba's dictionary."""
    return frozenset(_value(name) for name in (_ZH_COUNTRY_NAMES if chinese else _EN_COUNTRY_NAMES))


def _country(value: str) -> bool:
    return value in _country_values(bool(_HAN.search(value)))


def judge(new: Statement, old: Statement, *, hidden: Literal["old", "new"] = "old") -> Judgement:
    """What ``new`` (the later text) does to ``old``. ``hidden`` is the one a replacement
    would take out of recall: ``old``, or ``new`` where time order reads the pair the other
    way round (``new`` back-dated before ``old``: an old chat imported, ``engine.writing``).

    A replacement is whole or it is no replacement: the hidden memory is replaced only
    where every claim it makes is replaced or repeated by the other's and it says nothing
    the rules do not read (``_Reading.unread``). "My name is Anna and I live in Oslo" is not
    replaced by "I live in Bergen now", which says nothing of the name; nor is "I live in
    Oslo and I love my dog". Such a partial replacement is a clash both sides of which stay
    in recall: ``CONTRADICT``, with the replaced claim and what else the hidden one says as
    its reason. Memories with the same explicit ``key`` are one subject: the newer value
    replaces the older whole, as in any key-value store."""
    if new.key is not None and old.key is not None:
        if new.key != old.key:
            return Judgement(Verdict.UNRELATED, "different keys")
        if _normal(new.text).split() == _normal(old.text).split():
            return Judgement(Verdict.DUPLICATE, f"same key {new.key!r} and content")
        return Judgement(Verdict.REPLACE, f"same key {new.key!r}")
    new_reading, old_reading = _claims(new.text), _claims(old.text)
    found: dict[Verdict, str] = {}
    # The claims of each side that a claim of the other replaces or repeats, by position.
    met_old: set[int] = set()
    met_new: set[int] = set()
    for at_old, old_claim in enumerate(old_reading.claims):
        for at_new, new_claim in enumerate(new_reading.claims):
            verdict = _compare(old_claim, new_claim)
            if verdict is not Verdict.UNRELATED:
                found.setdefault(verdict, f"{new_claim.slot}: {old_claim.value!r} → {new_claim.value!r}")
            if verdict in (Verdict.REPLACE, Verdict.DUPLICATE):
                met_old.add(at_old)
                met_new.add(at_new)
    if Verdict.REPLACE in found:
        reading, met = (old_reading, met_old) if hidden == "old" else (new_reading, met_new)
        kept = [f"{claim.slot}: {claim.value!r}" for at, claim in enumerate(reading.claims) if at not in met]
        # A clause the other says word for word is repeated, as a claim would be.
        other = new_reading if hidden == "old" else old_reading
        kept += [repr(clause) for clause in reading.unread if clause not in other.unread]
        if kept:
            said = "older" if hidden == "old" else "back-dated"
            return Judgement(
                Verdict.CONTRADICT, f"{found[Verdict.REPLACE]}, but the {said} memory says more: {'; '.join(kept)}"
            )
    for verdict in _PRECEDENCE:
        if verdict in found:
            return Judgement(verdict, found[verdict])
    return Judgement(Verdict.UNRELATED, "no shared subject")


def detect(
    new: Statement, olds: Sequence[Statement], *, fallback: ConflictJudge | None = None
) -> list[tuple[Statement, Judgement]]:
    """The candidates ``new`` replaces, contradicts or repeats, with why; unrelated ones are left out."""
    found: list[tuple[Statement, Judgement]] = []
    for old in olds:
        judgement = judge(new, old)
        if judgement.verdict is Verdict.UNRELATED and fallback is not None:
            judgement = fallback(new, old) or judgement
        if judgement.verdict is not Verdict.UNRELATED:
            found.append((old, judgement))
    return found
