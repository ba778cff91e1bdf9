"""Text into search terms for the lexical channel, in English and Chinese.

Latin-script words are case-folded, stripped of a small stop-word list and
stemmed (Snowball English: "colours" and "colour" meet); runs of CJK characters
are segmented with jieba's search mode, which also emits the shorter words
inside a long one ("极简风格" → "极简", "风格", "极简风格"). The same function
turns stored content and queries into terms, so both sides always agree.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import re
import threading
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import version
from typing import Any

import jieba
import snowballstemmer

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_LOCK = threading.Lock()
_STEMMER = snowballstemmer.stemmer("english")

ENGLISH_STOP_WORDS = frozenset(
    """a s about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves""".split()
)
CHINESE_STOP_WORDS = frozenset(
    "的 了 是 在 和 也 就 都 而 及 与 着 或 一个 我 你 他 她 它 吗 呢 吧 啊 什么 怎么 有 这 那".split()
)

jieba.setLogLevel(logging.WARNING)


def terms(text: str) -> list[str]:
    """Search terms of ``text``, in order, repeats kept (they count in BM25)."""
    return list(_terms_of(text))


# A save reads its text's terms in the conflict rules and the fast network, and each near
# candidate's again on every save that meets it: 8,000 Chinese characters take jieba 50
# to 700 ms a reading. The last texts read are kept (about 50 MB, were every one at the
# 8,000-character limit).
_READ_CACHE = 32


@lru_cache(maxsize=_READ_CACHE)
def _terms_of(text: str) -> tuple[str, ...]:
    normal = unicodedata.normalize("NFKC", text).casefold()
    found: list[str] = []
    position = 0
    for match in _CJK.finditer(normal):
        found += _latin_terms(normal[position : match.start()])
        found += _cjk_terms(match.group())
        position = match.end()
    found += _latin_terms(normal[position:])
    return tuple(found)


# Raised whenever ``terms`` reads a text differently (what it finds, not how fast): the
# fast network keeps the terms of every memory, and one saved under another ``analysis``
# is rebuilt from the store.
TERMS_REVISION = 1


def analysis() -> str:
    """A fingerprint of what ``terms`` depends on: ``TERMS_REVISION``, the stop words and
    patterns, and the installed jieba and Snowball (a new dictionary segments otherwise)."""
    parts = [
        str(TERMS_REVISION),
        _WORD.pattern,
        _CJK.pattern,
        " ".join(sorted(ENGLISH_STOP_WORDS)),
        " ".join(sorted(CHINESE_STOP_WORDS)),
        f"jieba {version('jieba')}",
        f"snowballstemmer {version('snowballstemmer')}",
    ]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]


# Near-duplicates say the same thing in mostly the same words. The embedder alone cannot
# tell: MiniLM reads most Chinese characters as one unknown token, so any two Chinese
# lines score a cosine near 1 with it. Folding a save into an older memory at write time
# keeps only the older text, so it asks for more shared words than a consolidation merge,
# which keeps both texts (values measured on MADial-Bench, benchmarks/chatlogs.py --folded).
DEDUP_MIN_OVERLAP = 0.6
MERGE_MIN_OVERLAP = 0.4
# Nor is a text a repeat when it adds more than a few words of its own: "I'd like to explore
# more courses in data science, specifically machine learning and deep learning. …" was
# folded into the same sentence without "specifically machine learning and deep learning"
# (Jaccard 0.76, cosine over the threshold), and the new part lost. On the chat logs the
# folds this stops are long answers rewritten with a list item, an address or a paragraph
# more (benchmarks/chatlogs.py --folded).
DEDUP_MAX_NEW_TERMS = 3


# Nor is a text a repeat of another that gives other numbers: "the rent is 1500 euros"
# folded into "the rent is 1200 euros" (cosine over the threshold, most words shared) kept
# only the old rent, as a meeting moved from 3pm to 4pm and 5月3日 to 5月5日 did. A number
# is a run of digits (full-width ones read as ASCII; commas dropped only where they group
# thousands, so "1,200" is 1200 but "1,5" stays apart from 15), a number word, an ordinal
# or a run of Chinese numerals.
_NUMBER = re.compile(
    r"\d+(?:[.,:]\d+)*|[零〇一二三四五六七八九十百千万亿两]+|\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|"
    r"eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|"
    r"sixty|seventy|eighty|ninety|hundred|thousand|million|billion|half|dozen|first|second|third|fourth|fifth|"
    r"sixth|seventh|eighth|ninth|tenth|once|twice)\b"
)
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def _folded(text: str) -> str:
    """``text`` as ``numbers`` and ``markers`` read it: NFKC (full-width forms as ASCII,
    "℃" as "°C") and casefolded."""
    return unicodedata.normalize("NFKC", text).casefold()


def numbers(text: str) -> list[str]:
    """The numbers ``text`` gives, each as text, sorted (``same_numbers``)."""
    found = _NUMBER.findall(_folded(text))
    return sorted(match.replace(",", "") if _THOUSANDS.fullmatch(match) else match for match in found)


def same_numbers(a: str, b: str) -> bool:
    """Whether the two texts give the same numbers, each as often."""
    return numbers(a) == numbers(b)


# Nor is a text a repeat of another that differs from it in a word that turns what it says
# around while its vector barely moves (USE, cosine 0.96 to 0.99): "can" / "can't", "喜欢" /
# "不喜欢", "yes" / "no", "Monday" / "Tuesday", "tomorrow" / "today", "明天" / "后天",
# "before" / "after", "early" / "late", "liked" / "hated", "km" / "miles", "公斤" / "斤".
# Each was folded into the older memory and the new one lost. The conflict rules' ``clashes``
# reads none of these: it needs a claim (a holder, a slot and a value) on both sides, and a
# reminder, a question with its answer or a plan with a day gives it none. A closed list,
# each word read as its canonical form ("does not" and "doesn't" are one "not", "kilometres"
# and "km" one "km"); a pair that differs only in how it says a marker may be kept twice,
# which hides nothing. Of a pair of opposites one side is enough where the other is a common
# word in other senses ("like", "up", "right", "yes": "I'd like to add", "follow up", "you're
# right"): "likes" → "hates" and "yes" → "no" differ in "hates" and "no" all the same.
# A Latin form counts glued to a number ("20km", "3pm") but not inside a word; a Chinese
# form counts anywhere, so a common word that holds one without its sense ("不错", "特别",
# "然后", "没错", "左右") is a marker of its own: "不错" / "不好" and "特别好吃" / "不好吃"
# differ, "这家店不错" / "这家店真不错" do not.
_MARKER_FORMS: dict[str, tuple[str, ...]] = {
    # negation ("n't" and "cannot" are read apart, below)
    "not": (
        *("not", "no", "nope", "never", "nothing", "nobody", "none", "neither", "nor", "without", "cannot"),
        *("n't", "n’t"),
    ),
    # days and months, also abbreviated (not "may": a verb far more often), relative days and weeks
    "monday": ("monday", "mon"),
    "tuesday": ("tuesday", "tue", "tues"),
    "wednesday": ("wednesday", "wed"),
    "thursday": ("thursday", "thu", "thur", "thurs"),
    "friday": ("friday", "fri"),
    "saturday": ("saturday", "sat"),
    "sunday": ("sunday", "sun"),
    "weekend": ("weekend",),
    **{
        month: (month, month[:3], *(("sept",) if month == "september" else ()))
        for month in "january february march april june july august september october november december".split()
    },
    **{word: (word,) for word in "today tonight tomorrow yesterday next last ago".split()},
    "am": ("a.m.",),
    "pm": ("pm", "p.m."),
    "morning": ("morning", "mornings"),
    "afternoon": ("afternoon", "afternoons"),
    "evening": ("evening", "evenings"),
    # order in time, direction
    "before": ("before", "earlier"),
    "after": ("after", "later"),
    **{word: (word,) for word in "early late down off left north south east west".split()},
    "less": ("less", "fewer", "least"),
    # who, by their sex ("what are her pain points" / "… his …": pronouns are stop words, so
    # the terms do not tell them apart)
    "he": ("he", "him", "his", "himself"),
    "she": ("she", "her", "hers", "herself"),
    # not liking, giving up, being against ("takes the pills" / "stopped taking the pills",
    # "in favour of" / "against": merged by consolidation before; "Bob gave up smoking …" /
    # "Bob smokes …", USE cosine 0.961, would be)
    "hates": ("hate", "hates", "hated", "dislike", "dislikes", "disliked", "detest", "detests"),
    "stop": (
        *("stop", "stops", "stopped", "stopping", "quit", "quits", "quitting"),
        *("give up", "gives up", "gave up", "given up", "giving up"),
    ),
    "against": ("against",),
    # a hedge ("Alice will come" / "Alice might come": folded with USE, cosine 0.962; "may"
    # is no marker, as it is no month: "I may go in May")
    "might": ("might", "maybe", "perhaps", "possibly", "probably"),
    # units and currencies
    "km": ("km", "kilometer", "kilometers", "kilometre", "kilometres"),
    "mile": ("mile", "miles", "mi"),
    "m": ("meter", "meters", "metre", "metres"),
    "cm": ("cm", "centimeter", "centimeters", "centimetre", "centimetres"),
    "mm": ("mm", "millimeter", "millimeters", "millimetre", "millimetres"),
    "ft": ("ft", "foot", "feet"),
    "inch": ("inch", "inches"),
    "yard": ("yard", "yards", "yd", "yds"),
    "kg": ("kg", "kilo", "kilos", "kilogram", "kilograms", "kilogramme", "kilogrammes"),
    "lb": ("lb", "lbs", "pound", "pounds"),
    "g": ("gram", "grams", "gramme", "grammes"),
    "mg": ("mg", "milligram", "milligrams"),
    "mcg": ("mcg", "μg", "microgram", "micrograms"),
    "oz": ("oz", "ounce", "ounces"),
    "l": ("liter", "liters", "litre", "litres"),
    "ml": ("ml", "milliliter", "milliliters", "millilitre", "millilitres"),
    "gallon": ("gallon", "gallons", "gal"),
    "second": ("sec", "secs", "seconds"),
    "minute": ("min", "mins", "minute", "minutes"),
    "hour": ("hr", "hrs", "hour", "hours"),
    "day": ("day", "days"),
    "week": ("week", "weeks"),
    "month": ("month", "months"),
    "year": ("year", "years"),
    "celsius": ("celsius", "centigrade", "°c"),
    "fahrenheit": ("fahrenheit", "°f"),
    "eur": ("eur", "euro", "euros", "€"),
    "usd": ("usd", "dollar", "dollars", "$"),
    "gbp": ("gbp", "£"),
    "cny": ("cny", "rmb", "yuan", "元", "块", "块钱", "人民币"),
    # Chinese: negation, relative days and parts of the day, before and after, not liking, units
    "不": ("不", "没", "别", "未"),
    **{
        word: (word,)
        for word in (
            "今天 明天 后天 大后天 昨天 前天 大前天 今晚 明晚 昨晚 上周 下周 周末 上个月 下个月 "
            "今年 明年 去年 前年 后年 早上 上午 中午 下午 晚上 早 晚 左 讨厌 恨"
        ).split()
    },
    "这周": ("这周", "本周", "这个星期", "这星期"),
    "这个月": ("这个月", "本月"),
    "周日": ("周日", "周天", "星期日", "星期天", "礼拜天", "礼拜日"),
    "之前": ("之前", "以前", "前"),
    "之后": ("之后", "以后", "后"),
    "公里": ("公里", "千米"),
    "英里": ("英里",),
    "公斤": ("公斤", "千克"),
    **{word: (word,) for word in "斤 磅 分钟 小时 美元 欧元 英镑 日元 他 她".split()},
    # Chinese words that hold one of the forms above without its sense
    **{
        word: (word,)
        for word in "不错 没错 不过 差不多 不少 不断 不然 没关系 特别 别人 别的 区别 分别 个别 级别 类别 "
        "然后 目前 左右 其他".split()
    },
}
_MARKER_OF = {form: canonical for canonical, forms in _MARKER_FORMS.items() for form in forms}


def _latin(form: str) -> bool:
    """Whether a marker form is Latin-script words (read only where a word begins and ends)."""
    return form.isascii() and form.replace(" ", "").isalpha()


_LATIN_MARKERS = sorted((form for form in _MARKER_OF if _latin(form)), key=len, reverse=True)
_OTHER_MARKERS = sorted((form for form in _MARKER_OF if not _latin(form)), key=len, reverse=True)
# Read in casefolded text and matched as they are: ignoring case, "i" would match the
# Turkish dotless "ı" too, and "mı" or "kılometre" is in no list.
_MARKER = re.compile(
    r"(?<![^\W\d_])(?:" + "|".join(_LATIN_MARKERS) + r")(?![^\W\d_])|" + "|".join(map(re.escape, _OTHER_MARKERS))
)


def markers(text: str) -> list[str]:
    """The words of ``text`` that turn what it says around (``same_markers``), each in its
    canonical form, sorted."""
    return sorted(_MARKER_OF[match] for match in _MARKER.findall(_folded(text)))


def same_markers(a: str, b: str) -> bool:
    """Whether the two texts hold the same such words, each as often."""
    return markers(a) == markers(b)


# Nor is it a repeat of a text that has one of its words negated by a prefix: "able" /
# "unable", "sure" / "unsure", "agree" / "disagree", "correct" / "incorrect" are one word
# each, so no closed list holds them ("unable to walk without a cane" was folded into
# "able …" with USE, cosine 0.955). Read on the words as written, not their stems
# (Snowball stems "sure" as "sure" and "unsure" as "unsur").
_NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non")
_NEGATED_MIN_CHARS = 3
# A prefix written apart from its word, "non-smoker", "un-American", "non smoker", is read
# as one word with it ("smoker" / "non-smoker" was no pair: "non" alone negates nothing).
_APART_PREFIX = re.compile(
    r"(?<![^\W\d_])(" + "|".join(_NEGATING_PREFIXES) + r")-(?=[^\W\d_])|(?<![^\W\d_])(non)\s+(?=[^\W\d_])"
)


def _latin_words(text: str) -> frozenset[str]:
    joined = _APART_PREFIX.sub(lambda match: match.group(1) or match.group(2), without_chinese(_folded(text)))
    return frozenset(_WORD.findall(joined))


def _negated(left: frozenset[str], right: frozenset[str]) -> bool:
    """Whether a word one of the two word sets holds alone is a word the other holds,
    with a negating prefix (``_NEGATING_PREFIXES``), of at least ``_NEGATED_MIN_CHARS``
    letters ("into" is no "to" negated). The plain word may be in both: "able to drive
    and able to walk" / "able to drive and unable to walk" say different things."""
    only_left, only_right = left - right, right - left
    return any(
        word[len(prefix) :] in other
        for ours, other in ((only_left, right), (only_right, left))
        for word in ours
        for prefix in _NEGATING_PREFIXES
        if word.startswith(prefix) and len(word) - len(prefix) >= _NEGATED_MIN_CHARS
    )


# Names as written, in order: "Alice owes Bob money" and "Bob owes Alice money" hold the
# same words (USE: cosine 0.959) and say the opposite.
_NAME = re.compile(r"\b[A-Z][a-z]+(?:['’-][A-Za-z]+)*\b")


def _names(text: str) -> tuple[str, ...]:
    return tuple(_NAME.findall(text))


def _swapped(left: tuple[str, ...], right: tuple[str, ...]) -> bool:
    """Whether the two texts name the same people or things, two or more, in another order
    (the roles swapped: "Alice is taller than Bob" / "Bob is taller than Alice")."""
    return len(left) > 1 and left != right and sorted(left) == sorted(right)


# Nor is a text a repeat of one that says another word where it said one: "Alice buys the
# house" / "Alice sells the house", "goes" / "went", "opens" / "closes", "arrives" /
# "leaves", "prefers tea over coffee" / "prefers coffee over tea" were folded with USE
# (cosines 0.955 to 0.998, most words shared) and the new text lost, and consolidation
# would merge "accepts" / "rejects", "wins" / "loses" (0.940, 0.945) into one memory that no
# longer told which holds; "blue" / "green", "Carol" / "Dave", "Tokyo" / "Osaka" are the
# same shape (under the thresholds with USE in the sentences tried, not with every model). No
# closed list holds every pair of words that differ in what they say, so any content word
# (no stop word, number or marker) put in the place of another counts, its stem compared
# ("buying" / "buys" is no change): a paraphrase that swaps a word ("recommend" /
# "suggest") is kept twice, which hides nothing. A word only added or left out is not
# this (``DEDUP_MAX_NEW_TERMS`` bounds what is added; a shorter restatement folds), nor a
# phrase moved elsewhere, nor a word written apart ("e-mail" / "email").
Token = tuple[str, bool]  # its stem (a stop word as written), and whether it is a content word
# Where a sentence ends (``_tokens`` marks it by an empty stop word): the texts are aligned
# sentence by sentence first, and word by word only where a sentence differs, so that two
# long texts cost no more than the sentences they differ in (8,000 characters: well under
# 50 ms, as many times on every candidate of a save).
_SENTENCE_END = re.compile(r"[.!?;:,。！？；：，、\n]+")
_BREAK: Token = ("", False)
# A word's clitic read as the word it stands for: "don't" is "do not" (one "not" marker,
# as ``markers`` reads it), "I'll" is "I will"; left as written, "don" and "t" were two
# content words and "I don't know" / "I do not know" said another word.
_CLITIC = re.compile(r"\b(\w*?)n['’]t\b|\bcannot\b|['’](ll|ve|re|m|d)\b")
_CLITIC_WORD = {"ll": " will", "ve": " have", "re": " are", "m": " am", "d": " would"}
_NEGATED_VERB = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}


def _unclitic(match: re.Match[str]) -> str:
    if match.group(2):
        return _CLITIC_WORD[match.group(2)]
    if match.group(0) == "cannot":
        return "can not"
    verb = match.group(1)
    return f"{_NEGATED_VERB.get(verb, verb)} not"


def _capitalised(text: str) -> frozenset[str]:
    """The stems of the Latin-script words ``text`` writes capitalised (``_said_alike``)."""
    written = without_chinese(unicodedata.normalize("NFKC", text))
    said = " ".join(word for word in _WORD.findall(written) if word[0].isupper())
    return frozenset(stem for stem, content in _latin_tokens(said.casefold()) if content)


def _tokens(text: str) -> tuple[Token, ...]:
    """The words of ``text`` in order (``_substituted``): Latin-script words casefolded and
    stemmed, runs of CJK characters segmented by jieba, each sentence's end marked."""
    found: list[Token] = []
    for sentence in _SENTENCE_END.split(_folded(text)):
        said = _sentence_tokens(sentence)
        if said:
            found += [*said, _BREAK]
    return tuple(found[:-1])


def _sentence_tokens(normal: str) -> list[Token]:
    found: list[Token] = []
    position = 0
    for match in _CJK.finditer(normal):
        found += _latin_tokens(normal[position : match.start()])
        with _LOCK:
            words = jieba.lcut(match.group())
        found += [(w, w not in CHINESE_STOP_WORDS and w not in _MARKER_OF) for w in words if w.strip()]
        position = match.end()
    found += _latin_tokens(normal[position:])
    return found


def _latin_tokens(text: str) -> list[Token]:
    found: list[Token] = []
    words = _WORD.findall(_CLITIC.sub(_unclitic, text))
    with _LOCK:  # the Snowball stemmer object is not thread-safe
        for position, word in enumerate(words):
            if word in ENGLISH_STOP_WORDS or word in _MARKER_OF or any(char.isdigit() for char in word):
                found.append((word, False))
                continue
            stem = _spelled(_stem(_american(word)))
            if word.endswith("ed") and stem != word and _after_be(words, position):
                stem += _DONE  # "was cleared": another word than "was clear" or "was clearing"
            found.append((stem, True))
    return found


# After a form of "be" (``_BE``), a word in "-ed" is a thing done to its subject, the same stem
# otherwise a state or a thing going on: "The sky was clear" / "The sky was cleared", "The
# door was open" / "… opened", "The shop is closed" / "… closing" say other things, and were
# folded as one (Snowball stems each pair alike). Elsewhere a word's forms stay one word
# ("buys" / "buying", "cat" / "cats", "cleared the table" / "clear the table").
_DONE = "+ed"
_BE = frozenset({"am", "is", "are", "was", "were", "be", "been", "being"})
# Words that may stand between "be" and the word: "was not cleared", "is really interested".
_BETWEEN_BE = frozenset({"not", "never", "so", "too", "very", "just", "still", "already", "also", "all", "now"})


def _after_be(words: Sequence[str], position: int) -> bool:
    for back in (1, 2):
        if position - back < 0:
            return False
        before = words[position - back]
        if before in _BE:
            return True
        if before not in _BETWEEN_BE and not (before.endswith("ly") and len(before) > 3):
            return False
    return False


# The same word spelt otherwise is no other word: British and American spelling, read as
# American ("colour" / "color", "organise" / "organize", "analyse" / "analyze", "catalogue" /
# "catalog"; only long words, where no other word is spelt so: "hour" is no "hor", "prise"
# no "prize"), and a stem Snowball leaves apart ("goes" / "go"). No synonym is read alike.
_BRITISH = (
    (re.compile(r"(?<=\w{3})our(s|ed|ing|ite|ites|able|er|ers)?$"), r"or\1"),
    (re.compile(r"(?<=\w{3})is(e|es|ed|ing|ation|ations|er|ers)$"), r"iz\1"),
    (re.compile(r"(?<=\w{3})ys(e|es|ed|ing)$"), r"yz\1"),
    (re.compile(r"(?<=\w{4})ogue(s)?$"), r"og\1"),
)
_STEM_OF = {"goe": "go"}


@lru_cache(maxsize=65536)
def _american(word: str) -> str:
    if len(word) < 6:
        return word
    for pattern, replacement in _BRITISH:
        word = pattern.sub(replacement, word)
    return word


def _spelled(stem: str) -> str:
    return _STEM_OF.get(stem, stem)


def _misspelt(left: str, right: str) -> bool:
    """Whether two stems are one word, one of them misspelt the common ways that make no
    other word: "ie" for "ei" ("recieve" / "receive", five letters or more: "lie" / "lei"
    are two words) or a consonant doubled inside a long stem ("accomodate" /
    "accommodate"; not "desert" / "dessert"). A doubled vowel makes another word
    ("discrete" / "discreet", "Cameron" / "Cameroon"), and so does a letter doubled at the
    end of a stem, where Snowball left a suffix on ("transmit" / "transmitter", "Gabriel" /
    "Gabrielle")."""
    if len(left) == len(right):
        if len(left) < 5:
            return False
        differ = [i for i, (a, b) in enumerate(zip(left, right, strict=True)) if a != b]
        return (
            len(differ) == 2
            and differ[1] == differ[0] + 1
            and {left[differ[0] : differ[1] + 1], right[differ[0] : differ[1] + 1]} == {"ie", "ei"}
        )
    short, long = sorted((left, right), key=len)
    if len(long) != len(short) + 1 or len(long) < 8:
        return False
    return any(
        long[i] == long[i + 1] and long[:i] + long[i + 1 :] == short and long[i] not in _VOWELS and i + 2 < len(long)
        for i in range(len(long) - 1)
    )


_VOWELS = frozenset("aeiouy")


def _said_alike(ours: set[str], theirs: set[str], names: frozenset[str] = frozenset()) -> bool:
    """Whether each content word one side of a replaced span holds and the other does not
    is one of the other side's, misspelt (``_misspelt``). A word either text writes
    capitalised (``names``) is read as a name, and a name spelt with a letter more or
    another is another person or place ("Paterson" / "Patterson", "Monterey" / "Monterrey")."""
    if (ours | theirs) & names:
        return False
    return all(any(_misspelt(word, other) for other in theirs) for word in ours) and all(
        any(_misspelt(word, other) for other in ours) for word in theirs
    )


def _substituted(left: tuple[Token, ...], right: tuple[Token, ...], names: frozenset[str] = frozenset()) -> bool:
    """Whether, aligned word by word, one text says a content word where the other says
    another: a span replaced in which each side holds a content word the other side's
    span does not, and that is not the same letters written apart nor a misspelling; or
    in which one side holds content words and the other only a marker ("no" / "I don't
    know": both one "not", and said of nothing or of "know"); or that negates another word
    (``_negations``). Aligned clause by clause first, then word by word within the clauses
    that differ."""
    if left == right:
        return False
    if _negations(left) != _negations(right):
        return True
    for ours_clauses, theirs_clauses in _replaced_spans(_sentences(left), _sentences(right)):
        ours = tuple(token for clause in ours_clauses for token in (*clause, _BREAK))
        theirs = tuple(token for clause in theirs_clauses for token in (*clause, _BREAK))
        if min(len(ours), len(theirs)) > _ALIGN_MAX:  # unsure: kept apart
            return True
        if any(_span_substituted(one, other, names) for one, other in _replaced_spans(ours, theirs)):
            return True
    return _exchanged(left, right) or _exchanged(right, left)


def _negations(tokens: tuple[Token, ...]) -> list[tuple[str, ...]]:
    """What each negation of ``tokens`` is said of: the content words after it in its
    clause, ``_EXCHANGE_SPAN`` words at most. "No, the user is coming" / "The user doesn't
    know if coming" and "Alice does not like tea but likes coffee" / "Alice likes tea but
    does not like coffee" hold one "not" each and the same words, moved: no span is
    replaced."""
    found: list[tuple[str, ...]] = []
    for position, (stem, _) in enumerate(tokens):
        if _MARKER_OF.get(stem) != "not" or not stem.isascii():
            continue
        scope: list[str] = []
        for token in tokens[position + 1 : position + 1 + _EXCHANGE_SPAN]:
            if token == _BREAK:
                break
            if token[1]:
                scope.append(token[0])
        found.append(tuple(scope))
    return sorted(found)


# The most words a span that differs may hold on both sides and be aligned word by word
# (8,000 characters of Chinese without a stop or a comma, edited here and there: about
# 100 ms); a longer one counts as saying another word, and the two texts are kept apart.
_ALIGN_MAX = 1500


def _replaced_spans(left: Sequence[Any], right: Sequence[Any]) -> Iterator[tuple[Sequence[Any], Sequence[Any]]]:
    """The spans replaced in aligning ``left`` with ``right``, a prefix and a suffix both
    share left out first (an edit in a long text costs no more than its own span)."""
    start, end = 0, 0
    limit = min(len(left), len(right))
    while start < limit and left[start] == right[start]:
        start += 1
    while end < limit - start and left[-1 - end] == right[-1 - end]:
        end += 1
    ours, theirs = left[start : len(left) - end], right[start : len(right) - end]
    if ours and theirs:
        for operation, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ours, theirs, autojunk=False).get_opcodes():
            if operation == "replace":
                yield ours[i1:i2], theirs[j1:j2]


def _sentences(tokens: tuple[Token, ...]) -> list[tuple[Token, ...]]:
    found: list[tuple[Token, ...]] = []
    start = 0
    for position, token in enumerate(tokens):
        if token == _BREAK:
            found.append(tokens[start:position])
            start = position + 1
    found.append(tokens[start:])
    return found


def _span_substituted(left: Sequence[Token], right: Sequence[Token], names: frozenset[str]) -> bool:
    ours = {stem for stem, content in left if content}
    theirs = {stem for stem, content in right if content}
    if not ours or not theirs:
        # A marker that stood alone now stands with content words, or they with none:
        # "no. Make sure …" / "I don't know. Make sure …" are two answers.
        return bool(ours or theirs) and any(stem in _MARKER_OF for stem, _ in (right if ours else left))
    if not (ours - theirs and theirs - ours):
        return False
    ours_said, theirs_said = "".join(stem for stem, _ in left), "".join(stem for stem, _ in right)
    if ours_said == theirs_said:
        return False
    # jieba cuts the same Chinese words otherwise as a sentence ends otherwise ("试试看吧"
    # / "试试"): a run that holds the other whole says no other word.
    if is_chinese(ours_said + theirs_said) and (ours_said in theirs_said or theirs_said in ours_said):
        return False
    return not _said_alike(ours - theirs, theirs - ours, names)


# How far apart two exchanged words may stand: a clause ("Alice is taller than Bob").
_EXCHANGE_SPAN = 8
_COORDINATION = frozenset(((("and", False),), (("or", False),), (("nor", False),)))


def _exchanged(left: tuple[Token, ...], right: tuple[Token, ...]) -> bool:
    """Whether two content words of ``left`` stand in each other's place in ``right``
    around the same words ("prefers tea over coffee" / "prefers coffee over tea"): an
    alignment reads that as one word moved, and no word as replaced. Counted, so that a
    text that says both orders, as often in each, exchanges nothing."""
    ours, theirs = _orders(left), _orders(right)
    return any(
        count > theirs.get(order, 0)
        and theirs.get((order[2], order[1], order[0]), 0) > ours.get((order[2], order[1], order[0]), 0)
        for order, count in ours.items()
    )


def _orders(tokens: tuple[Token, ...]) -> dict[tuple[Token, tuple[Token, ...], Token], int]:
    """Each two content words of ``tokens`` with the words between them, at most
    ``_EXCHANGE_SPAN`` apart within a sentence, and how often the text says them so."""
    found: dict[tuple[Token, tuple[Token, ...], Token], int] = {}
    for i, first in enumerate(tokens):
        if not first[1]:
            continue
        for j in range(i + 1, min(len(tokens), i + 1 + _EXCHANGE_SPAN)):
            second = tokens[j]
            if second == _BREAK:
                break
            if not second[1] or second == first:
                continue
            between = tokens[i + 1 : j]
            if between in _COORDINATION:  # "coffee and tea" / "tea and coffee"
                continue
            key = (first, between, second)
            found[key] = found.get(key, 0) + 1
    return found


def is_blank(text: str) -> bool:
    """Whether ``text`` says nothing: only whitespace, control characters (NUL, say) and
    invisible format marks (zero-width spaces, direction marks, a byte-order mark)."""
    return all(char.isspace() or unicodedata.category(char) in _SILENT for char in text)


_SILENT = frozenset(("Cc", "Cf"))

# Where a part of a long text may end, best first: after a paragraph, a sentence, a line,
# at any whitespace but one between two digits, which would cut a card or phone number in two
# (the rule of ``twinmem_client.limits.split_content``, which the
# adapters split a long message by; the client cannot import the engine, nor it the client).
_PART_ENDS = (
    re.compile(r"\n\s*\n"),
    re.compile(r"[.!?;。！？；…](?:[\"'”’)\]]*)\s+|[。！？；]"),
    re.compile(r"\n"),
    re.compile(r"(?<![\d\s])\s+|\s+(?=[^\d\s])"),
)


def parts(text: str, limit: int) -> list[str]:
    """``text`` stripped, as parts of at most ``limit`` characters each, in order, each
    ending at a paragraph, sentence or word boundary where one lies in the second half of
    its span (else cut at the limit), stripped; blank parts are left out."""
    rest = text.strip()
    found: list[str] = []
    while len(rest) > limit:
        window = rest[: limit + 1]  # one more: a boundary right at the limit counts
        size = limit
        for pattern in _PART_ENDS:
            ends = [m.end() for m in pattern.finditer(window) if m.end() > limit // 2]
            if ends:
                size = min(ends[-1], limit)
                break
        found.append(rest[:size].strip())
        rest = rest[size:].lstrip()
    found.append(rest)
    return [part for part in found if not is_blank(part)]


def is_chinese(text: str) -> bool:
    """Whether ``text`` holds a CJK character (a Chinese search term does)."""
    return _CJK.search(text) is not None


def without_chinese(text: str) -> str:
    """``text`` with its runs of CJK characters replaced by spaces: what is left has the
    same Latin-script terms, and segmenting it never needs jieba."""
    return _CJK.sub(" ", text)


def word_overlap(a: str, b: str) -> float:
    """The Jaccard similarity of the two texts' search terms (0 when either has none)."""
    return _jaccard(frozenset(terms(a)), frozenset(terms(b)))


def _jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


@dataclass(frozen=True, slots=True)
class Wording:
    """What write-time dedup compares of a text (``repeats``): its search terms, numbers
    and markers, each read once however many candidates it meets."""

    terms: frozenset[str]
    numbers: tuple[str, ...]
    markers: tuple[str, ...]
    # Its Latin-script words as written (casefolded), for ``_negated``.
    words: frozenset[str] = frozenset()
    # Its capitalised words in order, for ``_swapped``.
    names: tuple[str, ...] = ()
    # The text, whose words in order (``tokens``) and capitalised stems (``capitalised``)
    # are read only where ``_substituted`` is asked: most candidates a save reads differ in
    # their terms first, and the alignment's reading is half the cost of the whole.
    text: str = ""

    @classmethod
    def of(cls, text: str) -> Wording:
        return _wording_of(text)

    @property
    def tokens(self) -> tuple[Token, ...]:
        """Its words in order, for ``_substituted``."""
        return _aligned_of(self.text)[0]

    @property
    def capitalised(self) -> frozenset[str]:
        """The stems of its words written capitalised, for ``_said_alike``."""
        return _aligned_of(self.text)[1]

    def overlap(self, other: Wording) -> float:
        """The Jaccard similarity of the two texts' search terms (``word_overlap``)."""
        return _jaccard(self.terms, other.terms)

    def says_as(self, other: Wording) -> bool:
        """Whether the two give the same numbers and the same words that turn what they say
        around ("can" / "can't", "Monday" / "Tuesday", "km" / "miles"), each as often,
        neither negates a word of the other by a prefix ("able" / "unable"), they name
        their people in the same order ("Alice owes Bob" / "Bob owes Alice") and neither
        says another word where the other says one ("buys" / "sells", "blue" / "green"):
        what both write-time dedup (``repeats``) and a consolidation merge ask of a pair."""
        return (
            self.numbers == other.numbers
            and self.markers == other.markers
            and not _negated(self.words, other.words)
            and not _swapped(self.names, other.names)
            and not _substituted(self.tokens, other.tokens, self.capitalised | other.capitalised)
        )


@lru_cache(maxsize=_READ_CACHE)
def _wording_of(text: str) -> Wording:
    """``Wording.of``, each of the last texts read once: a save compares its text with
    each near candidate, and a candidate is met again by the next save like it."""
    return Wording(
        frozenset(terms(text)),
        tuple(numbers(text)),
        tuple(markers(text)),
        _latin_words(text),
        _names(text),
        text,
    )


@lru_cache(maxsize=_READ_CACHE)
def _aligned_of(text: str) -> tuple[tuple[Token, ...], frozenset[str]]:
    """``Wording.tokens`` and ``Wording.capitalised``, each of the last texts read once."""
    return _tokens(text), _capitalised(text)


def repeats(newer: Wording, older: Wording) -> bool:
    """Whether ``newer`` says nothing ``older`` does not, by its words: mostly the same
    words (``DEDUP_MIN_OVERLAP``), at most ``DEDUP_MAX_NEW_TERMS`` of its own, the same
    numbers and the same words that turn what it says around (``Wording.says_as``)."""
    return (
        newer.overlap(older) >= DEDUP_MIN_OVERLAP
        and len(newer.terms - older.terms) <= DEDUP_MAX_NEW_TERMS
        and newer.says_as(older)
    )


def _latin_terms(text: str) -> list[str]:
    words = [w for w in _WORD.findall(text) if w not in ENGLISH_STOP_WORDS]
    with _LOCK:  # the Snowball stemmer object is not thread-safe
        return [_stem(word) for word in words]


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    stem: str = _STEMMER.stemWord(word)
    return stem


def _cjk_terms(run: str) -> list[str]:
    with _LOCK:  # jieba initialises its dictionary lazily, once
        words = jieba.lcut_for_search(run)
    return [w for w in words if w.strip() and w not in CHINESE_STOP_WORDS]
