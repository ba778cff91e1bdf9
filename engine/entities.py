"""Entities: what a memory is about, found in English and Chinese text, and how names link.

Two things live here, both pure (no I/O beyond jieba's dictionary, loaded lazily
on first use):

* ``canonical_key(name)`` — the key under which entity names are compared and
  linked. NFKC, case-folded, whitespace-collapsed, a leading English article
  dropped, then looked up in ``ALIASES``: a small built-in bilingual table of
  common concepts (colours, display themes, drinks and foods, pets, languages,
  notification channels, large cities), so that "Blue", "blue" and "蓝色" all
  become ``blue`` and "深色模式" meets "dark mode". Names outside the table keep
  their folded form: "Acme Corp" and "acme corp" link, "阿里巴巴" and "Alibaba"
  do not (no table can know every company).
* ``extract_entities(text)`` — the built-in extractor used when a client sends
  no entities. English: runs of capitalised words that are not sentence-initial
  function words ("Berlin", "New York", "VS Code"), words with inner capitals or
  digits ("iPhone", "GPT-4"), and concepts of the alias table ("coffee",
  "dark mode"). Chinese: ``jieba.posseg`` parts of speech — person (nr), place
  (ns), organisation (nt), other proper noun (nz), English token inside Chinese
  (eng) and ordinary nouns (n) of two or more characters that are not generic
  ("用户", "时候") — plus alias-table concepts ("茶", "猫").

Extractors are pluggable through the ``EntityExtractor`` protocol (a callable
from text to names); the service uses ``extract_entities`` unless told otherwise.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import threading
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Protocol

MAX_EXTRACTED = 16

# canonical key -> other names of the same concept (English variants and Chinese).
_CONCEPTS: dict[str, tuple[str, ...]] = {
    # colours
    "blue": ("蓝色", "蓝", "蓝颜色"),
    "black": ("黑色", "黑"),
    "white": ("白色", "白"),
    "red": ("红色", "红"),
    "green": ("绿色", "绿"),
    "yellow": ("黄色", "黄"),
    "purple": ("紫色", "紫", "violet"),
    "pink": ("粉色", "粉红色", "粉红"),
    "orange": ("橙色", "橘色", "橙"),
    "grey": ("gray", "灰色", "灰"),
    "brown": ("棕色", "咖啡色"),
    # display themes
    "dark mode": ("dark theme", "night mode", "深色模式", "暗色模式", "夜间模式", "暗黑模式", "深色主题", "暗色主题"),
    "light mode": ("light theme", "浅色模式", "亮色模式", "日间模式", "浅色主题", "亮色主题"),
    # drinks and food
    "coffee": ("咖啡",),
    "tea": ("茶", "茶叶"),
    "green tea": ("绿茶",),
    "milk tea": ("奶茶", "bubble tea"),
    "beer": ("啤酒",),
    "wine": ("红酒", "葡萄酒"),
    "alcohol": ("酒", "喝酒"),
    "meat": ("肉", "肉类"),
    "beef": ("牛肉",),
    "pork": ("猪肉",),
    "seafood": ("海鲜",),
    "peanuts": ("peanut", "花生"),
    "sugar": ("糖",),
    "spicy food": ("辣", "吃辣", "辣的", "辣菜"),
    "vegetarian": ("vegetarian diet", "素食", "吃素", "素食者"),
    # pets
    "cat": ("cats", "猫", "猫咪"),
    "dog": ("dogs", "狗", "狗狗"),
    # languages
    "english": ("英语", "英文"),
    "chinese": ("mandarin", "中文", "汉语", "普通话"),
    "japanese": ("日语", "日文"),
    "python": ("python语言",),
    "java": ("java语言",),
    # notification channels
    "email": ("e-mail", "邮件", "电子邮件", "邮箱"),
    "sms": ("text message", "text messages", "短信"),
    "wechat": ("微信",),
    "phone call": ("phone calls", "电话"),
    # cities
    "beijing": ("北京",),
    "shanghai": ("上海",),
    "shenzhen": ("深圳",),
    "guangzhou": ("广州",),
    "hangzhou": ("杭州",),
    "chengdu": ("成都",),
    "tokyo": ("东京",),
    "london": ("伦敦",),
    "paris": ("巴黎",),
    "berlin": ("柏林",),
    "lisbon": ("里斯本",),
    "new york": ("纽约",),
    "singapore": ("新加坡",),
    # styles
    "minimalist style": ("minimalism", "极简风格", "极简"),
}


def _fold(name: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


ALIASES: Mapping[str, str] = MappingProxyType(
    {_fold(alias): key for key, aliases in _CONCEPTS.items() for alias in (key, *aliases)}
)
_ARTICLE = re.compile(r"^(?:the|a|an) ")


def key_rules() -> str:
    """A fingerprint of what ``canonical_key`` makes of a name: its code and ``_fold``'s,
    the article it drops, the alias table, and the Unicode version NFKC and case folding
    follow. Keys the fast network holds under another are made again from the stored
    names (``FastNetwork.load``)."""
    parts = [
        inspect.getsource(_fold),
        inspect.getsource(canonical_key),
        _ARTICLE.pattern,
        unicodedata.unidata_version,
        *(f"{alias}\t{key}" for alias, key in sorted(ALIASES.items())),
    ]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]


@lru_cache(maxsize=65536)
def canonical_key(name: str) -> str:
    """The key entity names are compared and linked by (see the module docstring);
    cached, as the write path and recall ask for the same names again and again."""
    folded = _ARTICLE.sub("", _fold(name))
    return ALIASES.get(folded, folded)


class EntityExtractor(Protocol):
    """Finds the names a text is about; returns them in order of appearance, without repeats."""

    def __call__(self, text: str) -> tuple[str, ...]: ...


# --- English ----------------------------------------------------------------------

_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#.\-']*[A-Za-z0-9+#]|[A-Za-z]")
_SENTENCE_END = re.compile(r"[.!?;:。！？；：\n]")
# Capitalised words that are not names: pronouns, determiners, sentence openers,
# the generic subjects agent memories start with, and calendar words.
_NOT_NAMES = frozenset(
    """i i'm i've i'd i'll me my we our you your he she it they their his her its this that these those the a an
    user user's users assistant agent bot and or but if when then so also please note remember yes no ok okay
    monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday mr mrs ms dr
    always never every each some any all most now currently recently lately
    what where who whom whose which why how do does did can could would should is are was were have has had
    will shall may might tell remind give show find""".split()
)
_LATIN_CONCEPTS = sorted((alias for alias in ALIASES if alias.isascii()), key=len, reverse=True)
_LATIN_CONCEPT = re.compile(r"\b(" + "|".join(re.escape(alias) for alias in _LATIN_CONCEPTS) + r")\b", re.IGNORECASE)


def _english_entities(text: str) -> list[str]:
    found: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        run: list[str] = []
        for position, match in enumerate(_LATIN_WORD.finditer(sentence)):
            word = match.group()
            odd_shape = any(c.isupper() for c in word[1:]) or (any(c.isdigit() for c in word) and len(word) > 1)
            capitalised = word[0].isupper() and word.casefold() not in _NOT_NAMES
            if odd_shape or (capitalised and not (position == 0 and word.casefold() in _NOT_NAMES)):
                run.append(word)
                continue
            if run:
                found.append(" ".join(run))
                run = []
        if run:
            found.append(" ".join(run))
    found += [m.group(1) for m in _LATIN_CONCEPT.finditer(text)]
    return found


def misspelt_openers(text: str, other: str) -> tuple[str, ...]:
    """The words ``text`` opens a sentence with that are the word ``other`` opens the same
    sentence with (the same words after it), two letters of it swapped, where that word is
    none that names anything ("Teh meeting is at 5" / "The meeting is at 5"). Capitalised
    as a sentence's first word is, such a typo is read as a name (``extract_entities``), and
    a repeat of a text with it was kept twice: its names were not the other's. A name is
    rarely a function word spelt otherwise ("Amy" / "May"), and only the one place counts."""
    openers: dict[tuple[str, ...], set[str]] = {}
    for sentence in _SENTENCE_END.split(other):
        words = [word.casefold() for word in _LATIN_WORD.findall(sentence)]
        if words and words[0] in _NOT_NAMES:
            openers.setdefault(tuple(words[1:]), set()).add(words[0])
    found: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        words = _LATIN_WORD.findall(sentence)
        if not words or not words[0][0].isupper() or words[0].casefold() in _NOT_NAMES:
            continue
        first = words[0].casefold()
        rest = tuple(word.casefold() for word in words[1:])
        if any(_two_letters_swapped(first, said) for said in openers.get(rest, ())):
            found.append(words[0])
    return tuple(dict.fromkeys(found))


def _two_letters_swapped(left: str, right: str) -> bool:
    if len(left) != len(right) or len(left) < 3:
        return False
    differ = [i for i, (a, b) in enumerate(zip(left, right, strict=True)) if a != b]
    return (
        len(differ) == 2
        and differ[1] == differ[0] + 1
        and (left[differ[0]], left[differ[1]]) == (right[differ[1]], right[differ[0]])
    )


# --- Chinese ----------------------------------------------------------------------

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaffA-Za-z0-9]+")
_PROPER_TAGS = frozenset({"nr", "nrfg", "nrt", "ns", "nt", "nz", "eng"})
# Nouns too generic to be what a memory is about.
_GENERIC_NOUNS = frozenset(
    """用户 时候 东西 事情 问题 情况 方面 时间 地方 人 我们 你们 他们 大家 自己 之前 以后 现在 最近 今天 明天
    昨天 每天 一下 一点 方式 方法 内容 部分 样子 事 话 记忆 助手 信息 规则 习惯 感觉 意思 原因 结果 过程""".split()
)
_POSSEG_LOCK = threading.Lock()
_CJK_CONCEPTS = frozenset(alias for alias in ALIASES if not alias.isascii())
# Longer concepts jieba may split ("极简风格" → 极/简/风格) are matched as substrings;
# one-character ones ("红", "茶") only as whole words, or "红烧" would be red.
_CJK_CONCEPT = re.compile(
    "|".join(re.escape(a) for a in sorted((a for a in _CJK_CONCEPTS if len(a) >= 2), key=len, reverse=True))
)


# jieba tags a stretch of characters its dictionary makes no word of with an HMM whose
# cost per character grows with the square of the tags that character may take: a rare
# one may take any of 256, and 8,000 such characters took 76 s to save (under a second as
# single characters). A name is a few characters, so a stretch longer than
# ``_TAGGED_MAX_CHARS`` is read as single characters, and so is each once the text has
# spent ``_TAGGING_BUDGET`` (about a second; ordinary Chinese spends a thirtieth of a
# rare character's cost per character and never reaches it).
_TAGGED_MAX_CHARS = 32
_TAGGING_BUDGET = 3_000_000


def _tagger() -> Any:
    """jieba's tagger, with the bounds above. Imported here, and only for Chinese text:
    jieba.posseg loads its tagging model at import (half a second), and this module is
    imported by everything that compares entity names."""
    global _TAGGER
    if _TAGGER is None:
        import jieba
        import jieba.posseg

        states = jieba.posseg.char_state_tab_P
        every = len(jieba.posseg.start_P)

        class Bounded(jieba.posseg.POSTokenizer):  # type: ignore[misc]
            left = _TAGGING_BUDGET

            def _POSTokenizer__cut_detail(self, sentence: str) -> Iterator[Any]:  # noqa: N802
                cost = sum((len(states.get(char, ())) or every) ** 2 for char in sentence)
                if len(sentence) > _TAGGED_MAX_CHARS or cost > self.left:
                    for char in sentence:
                        yield jieba.posseg.pair(char, self.word_tag_tab.get(char, "x"))
                    return
                self.left -= cost
                yield from super()._POSTokenizer__cut_detail(sentence)

        _TAGGER = Bounded(jieba.dt)
    return _TAGGER


_TAGGER: Any = None


def _chinese_entities(text: str) -> list[str]:
    runs = [run for run in _CJK_RUN.findall(text) if not run.isascii()]  # English: the English pass
    if not runs:
        return []
    found: list[str] = []
    with _POSSEG_LOCK:  # jieba loads its dictionary lazily, once; the tagger keeps a budget
        tagger = _tagger()
        tagger.left = _TAGGING_BUDGET
        tagged = [[(pair.word, pair.flag) for pair in tagger.cut(run)] for run in runs]
    for run, pairs in zip(runs, tagged, strict=True):
        found += [m.group() for m in _CJK_CONCEPT.finditer(run)]
        for word, flag in pairs:
            if word.isascii():
                continue
            if _fold(word) in _CJK_CONCEPTS:
                found.append(word)
            elif flag in _PROPER_TAGS and len(word) >= 2:
                found.append(word)
            elif flag == "n" and len(word) >= 2 and word not in _GENERIC_NOUNS:
                found.append(word)
    return found


def extract_entities(text: str) -> tuple[str, ...]:
    """Names ``text`` is about, in order of first appearance, one per canonical key,
    at most ``MAX_EXTRACTED``."""
    normal = unicodedata.normalize("NFKC", text)
    seen: dict[str, str] = {}
    for name in _english_entities(normal) + _chinese_entities(normal):
        cleaned = " ".join(name.split()).strip(".-'")
        if cleaned and len(cleaned) <= 200:
            seen.setdefault(canonical_key(cleaned), cleaned)
    return tuple(seen.values())[:MAX_EXTRACTED]


def entities_for(given: Sequence[str], text: str, extractor: EntityExtractor = extract_entities) -> tuple[str, ...]:
    """The client's entities when it sent any, else what ``extractor`` finds in ``text``."""
    return tuple(given) if given else extractor(text)
