"""The times a query names, read by libraries made for it: dateparser for English
(``search_dates``, then the span's period: day, week, month, year) and JioNLP's time
parser for Chinese (``ner.extract_time``, which gives windows directly: 上周 is last
Monday to Sunday, 三天前 that day, 去年 last year).

What is glue here, not grammar:

* which parser reads a text: dateparser where it has Latin letters (with the Chinese
  left out) and a digit or a word of dateparser's own English date vocabulary (a month,
  a weekday, a unit, "yesterday", "ago", …) other than a time of day's ("morning",
  "an hour", whose spans are dropped below): most queries have none, and skip the parser),
  JioNLP where it has Chinese characters (both for a mixed one); dateparser is given only
  the sentences that hold such a word, one at a time (its search costs grow with the
  text: a prompt context's query, five user turns of about 250 characters, cost 1.5 ms
  read whole and 0.8 ms read so, with the same windows);
* turning a point and its period into a window (the day, the Monday-to-Sunday week,
  the month or year that holds it), and JioNLP's inclusive ends (23:59:59) into
  half-open ones;
* dropping what the parsers report that is not a time a memory was written in:
  a window narrower than a day ("三点建议", "早上好", "give me a second", "an hour"),
  unless it is said as a time ago ("2 hours ago", "三小时前"), and then it is that day;
  the moment itself ("now", "现在"); a window that starts after ``now`` (nothing is
  written in the future: "周末有什么推荐"); durations and repetitions (JioNLP's
  ``time_delta`` and ``time_period``: "一天喝三杯", "每周"); a span without a letter
  (a bare number: "I have 3 cats");
* a month said alone in Chinese, which JioNLP does not read (上个月, 上月, 这个月, 本月,
  五月, 5月, 五月份, 十二月) or misreads (三月 as three months' length, 十一月 as the holiday
  of 1 October): read here as that month (``_MONTH_ZH``; a named month is the latest one
  begun by ``now``, as dateparser's), its window labelled ``glue``; found in the whole
  text, not JioNLP's run alone, so that the words around it are seen (登上月球, 这个月台
  and 我都一月没吃肉了 name no month);
* a weekend (上周末, 上个周末) is its Saturday and Sunday: JioNLP gives the Sunday alone;
* "may" and "march" are words before they are months: as the only date word of an
  English span they count only after a word that introduces a month ("in May",
  "since March", "last May"), so "May I ask…" and "the march on Washington" name no
  time; a span that is one word of two letters ("we", read as a weekday) names none.

Quirks absorbed:

* JioNLP prints a banner to stdout when imported (swallowed), and logs a traceback on
  the root logger for a span it gives up on (a filter on the root logger drops the
  records whose source is JioNLP's own files; nothing else is filtered);
* JioNLP's extractor is a lazily built global: calls are serialised;
* both libraries load their data on first use (about 0.3 s each here, import and first
  parse): not at start-up, which would wait for them, but in the background after it
  (``load``, which ``open_service`` calls: JioNLP only for a store that holds Chinese),
  so the first query that names a time does not wait either; without ``load``, only the
  parser a text needs is loaded;
* dateparser wants a naive ``RELATIVE_BASE``; ``now`` is given as naive UTC and every
  window comes back in UTC.

Only the first ``MAX_CHARS`` characters of a query are read, and of those at most
``MAX_RUNS`` runs of time-like Chinese characters of ``MAX_RUN`` each, so a very long
or hostile query costs no more than a long one.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from engine.records import TimeWindow

MAX_CHARS = 300
# JioNLP searches each run of time-like characters substring by substring, from the
# longest down, until one parses: over a run that never does the search is quadratic
# in its length, and each try costs about a millisecond ("上周" forty times over took
# 15 s). So at most MAX_RUNS runs are read, each cut to MAX_RUN characters: no real
# time expression is longer ("2023年12月31日下午" is 14), and a query costs at most a
# few hundred milliseconds whatever it holds.
MAX_RUNS = 3
MAX_RUN = 14
# The periods of this many distinct English spans are kept (a span's period never changes).
PERIODS_KEPT = 4096
DAY = timedelta(days=1)
_LATIN = re.compile(r"[A-Za-z]")
_CJK = re.compile(r"[\u3400-\u9fff]")
_CJK_RUN = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]+")  # with CJK punctuation
_WORD = re.compile(r"[a-z]+")
# English words that are months only after a word introducing one.
_AMBIGUOUS_MONTHS = frozenset({"may", "march"})
_BEFORE_A_MONTH = frozenset(
    {"in", "of", "since", "during", "until", "till", "before", "after", "last", "this", "next", "early", "late"}
    | {"mid", "by", "from", "through", "around", "whole", "all", "entire"}
)
_DIGIT = re.compile(r"\d")
# Where one sentence ends and the next begins: its closing mark, space, and a capital (or
# an opening quote or bracket), or a line break. "Jan. 7", "7.5.2024" and "3.5 km" stay whole.
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[\"'“‘(\[A-Z])|\n+")
# Locale sections that are not date words, and connectives that name a date only beside one.
_NOT_DATE_WORDS = frozenset({"name", "date_order", "skip", "pertain", "sentence_splitter_group", "simplifications"})
_CONNECTIVES = frozenset({"in", "this", "last", "next", "time", "date", "early", "after", "before", "till", "small"})
_JIONLP_DIR = "jionlp"
# Date words whose spans, without a digit or "ago", are narrower than a day or the moment
# itself, and dropped.
_SUB_DAY = frozenset(
    {"morning", "afternoon", "evening", "night", "now", "hour", "hours", "hrs", "min", "mins", "minute", "minutes"}
    | {"sec", "secs", "second", "seconds"}
)
# Period-less spans said as a time ago ("2 hours ago") are that day; the same in Chinese.
_AGO_EN = frozenset({"ago"})
_AGO_ZH = "前"
# A time of day said with its day ("yesterday afternoon", "July 11, 2024 at 3pm",
# "2024-07-11 14:00", "昨天下午", "2023年12月31日下午", "上周三下午") names that day: a
# weekday or a relative day of the locale said in full (``_day_words``), a month said
# with a day of the month (a number not an hour's: "July 11 at 3pm", not "May at 5pm"),
# a numeric date of three parts, or in Chinese a day's character (日, 号, 天, a weekday).
# A month or a year alone with a time of day ("in May at 5pm", "in 2019 at night") names
# no day, nor do ranges and durations ("10-10:30 PM", "20-30 minutes", "two years now").
_NUMERIC_DATE = re.compile(r"\b\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}\b")
_DAY_OF_MONTH = re.compile(r"\b\d{1,2}(?:st|nd|rd|th)?\b(?!\s*(?:[:.]\d|a\.?m\b|p\.?m\b|h\b|o'clock))", re.IGNORECASE)
_MONTHS = frozenset("january february march april may june july august september october november december".split())
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_ZH = re.compile(r"[日号天]|星期.|礼拜.|周[一二三四五六日天末]")
# A month said alone in Chinese, which JioNLP (1.5) does not read: 上个月, 上月, 这个月 and
# 本月 fail as a pattern for a day of a month is tried first; 五月, 5月, 五月份 and 十二月
# fail, 三月 is read as three months' length and 十一月 as the holiday of 1 October.
# Not a month beside a year (JioNLP's), a day of the month ("5月3日"), a time of day
# ("5月下午": a month with only a time of day names none, as in English), nor where the
# characters belong to other words: 上 or 本 ending one ("登上月球", "网上月卡", "算上月薪",
# "日本月薪", "高一上月考"), 月 beginning one after 上月, 这个月 or 本月 (月台, 月亮, 月饼,
# 月色, 月季, 月嫂, 月球: "这个月台", not "这个月台风"), or after a number (五月天, 月亮,
# 月饼, 月薪), nor in 十月怀胎 or 三月不知肉味; 三个月, and a lone 一月 after 都, 已, 快, 近,
# 有 ("我都一月没吃肉了"), are lengths. Where a word beginning with 月 is as often the month's
# next word ("上月租了房", "这个月薪水", "本月票房", "这个月光是房租"), it is read as the month.
_WORD_BEFORE_BACK = (
    r"(?<![晚早马路身网楼加以之手线登爬走送爱赶追配带穿戴贴附挂坐跳冲飞搬摆放盖天山海街床桌墙班"
    r"〇零一二三四五六七八九十两])(?<!(?<![计结核清预决])算)"
)
_WORD_BEFORE_THIS = r"(?<![日基成课书账剧样版资根原笔脚标范文])"
_WORD_AFTER = r"(?!台(?!风)|亮(?![点相])|球(?![赛队员迷场])|饼(?!干)|季(?!度)|[色嫂])"
_MONTH_ZH = re.compile(
    rf"(?:{_WORD_BEFORE_BACK}(?P<back>上{{1,2}})个?|(?P<this>这个?|{_WORD_BEFORE_THIS}本))月{_WORD_AFTER}"
    r"|(?<![\d〇零一二三四五六七八九十两几百千年])"
    r"(?P<month>十[一二]?|(?<![都已快近有满足这那每])一|一(?=月份)|[二三四五六七八九]|1[0-2]|0?[1-9])月份?"
    r"(?![\d〇零一二三四五六七八九十两亮光球饼票薪天]|份?(?:[上中下]午|[早晚]上|凌晨|清晨|早晨|傍晚|夜)"
    r"|怀胎|不知肉味)"
)
_MONTH_NUMBERS = {"十": 10, "十一": 11, "十二": 12} | {c: n for n, c in enumerate("一二三四五六七八九", 1)}


class _JionlpRecords(logging.Filter):
    """Drops the tracebacks JioNLP logs on the root logger for spans it gives up on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _JIONLP_DIR not in Path(record.pathname).parts


_JIONLP_FILTER = _JionlpRecords()


class LibraryTimeExpressions:
    """``engine.ports.TimeExpressions`` over dateparser (English) and JioNLP (Chinese)."""

    name = "dateparser+jionlp"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jionlp: Any = None
        self._dateparser: Any = None

    def load(self, *, chinese: bool = True) -> None:
        """Load dateparser now, and JioNLP unless ``chinese`` is false, each through a
        first parse, so that no query waits for its library (``open_service`` calls this
        in the background)."""
        at = datetime.now(UTC)
        self.windows("yesterday", at)
        if chinese:
            self.windows("昨天", at)

    def begin(self, text: str, now: datetime) -> _ReadWhenAsked:
        """Reads nothing ahead: the answer reads the windows when asked."""
        return _ReadWhenAsked(self, text, now)

    def close(self) -> None:
        """Nothing to close: the libraries live in this process."""

    def may_name_time(self, text: str) -> bool:
        """Whether ``windows`` would hand ``text`` to a parser: Chinese characters, or an
        English sentence with a digit or a date word (loads dateparser's vocabulary). A
        text it would not hand over names no time."""
        text = text[:MAX_CHARS]
        if _CJK.search(text):
            return True
        return bool(_LATIN.search(text)) and any(True for _ in self._dated(_CJK_RUN.sub(" ", text)))

    def windows(self, text: str, now: datetime) -> tuple[TimeWindow, ...]:
        text = text[:MAX_CHARS]
        base = now.astimezone(UTC).replace(tzinfo=None)
        found: list[TimeWindow] = []
        if _LATIN.search(text):
            found += self._english(_CJK_RUN.sub(" ", text), base)
        if _CJK.search(text):
            found += self._chinese(text, base)
        kept: dict[tuple[datetime, datetime], TimeWindow] = {}
        for window in found:
            if window.end > window.start and window.start <= now:
                kept.setdefault((window.start, window.end), window)
        return tuple(kept.values())

    # --- English ---------------------------------------------------------------------

    def _english(self, text: str, base: datetime) -> list[TimeWindow]:
        windows: list[TimeWindow] = []
        for sentence in self._dated(text):
            windows += self._english_sentence(sentence, base)
        return windows

    def _dated(self, text: str) -> Iterator[str]:
        """The sentences of ``text`` that dateparser is given: those with a digit or a date
        word. The others have none of the locale's date words, or only words of a time of
        day ("in the morning", "an hour"): dateparser would find nothing kept there."""
        vocabulary = self._load_dateparser().vocabulary
        for sentence in _SENTENCE_END.split(text):
            if _DIGIT.search(sentence) or not vocabulary.intersection(_WORD.findall(sentence.lower())) <= _SUB_DAY:
                yield sentence

    def _english_sentence(self, text: str, base: datetime) -> list[TimeWindow]:
        search_dates, periods, skip, _, day_words = self._load_dateparser()
        settings = {
            "RELATIVE_BASE": base,
            "PREFER_DATES_FROM": "past",
            "RETURN_TIME_AS_PERIOD": True,
            "TIMEZONE": "UTC",
            "RETURN_AS_TIMEZONE_AWARE": False,
        }
        try:
            spans = search_dates(text, languages=["en"], settings=settings) or []
        except (ValueError, OverflowError):  # a date out of range ("year 99999")
            return []
        windows: list[TimeWindow] = []
        for span, moment in spans:
            if not _LATIN.search(span) or moment == base or not _a_month_here(text, span, skip):
                continue
            try:
                period = periods(span)
            except (ValueError, OverflowError):
                continue
            start = _floor(moment, period)
            if start is None:  # narrower than a day: kept as its day where it names one
                words = set(_WORD.findall(span.lower()))
                if not (_AGO_EN & words or _names_a_day(span, words, day_words)):
                    continue
                start = _floor(moment, "day")
            assert start is not None
            try:
                end = _step(start, period)
            except (ValueError, OverflowError):  # ends past the year 9999: starts after now, so dropped anyway
                continue
            windows.append(TimeWindow(_utc(start), _utc(end), span.strip(), "dateparser"))
        return windows

    def _load_dateparser(self) -> _Dateparser:
        if self._dateparser is None:
            from dateparser.date import DateDataParser
            from dateparser.languages.loader import default_loader
            from dateparser.search import search_dates

            info = default_loader.get_locale("en").info
            skip = frozenset(word for word in [*info["skip"], *info["in"]] if _WORD.fullmatch(word))
            # A span's period (day, week, month, year) does not depend on "now": one parser
            # serves every call, and the spans people say again ("last week") are remembered.
            parser = DateDataParser(languages=["en"], settings={"RETURN_TIME_AS_PERIOD": True})
            periods = functools.lru_cache(maxsize=PERIODS_KEPT)(lambda span: parser.get_date_data(span).period)
            self._dateparser = _Dateparser(search_dates, periods, skip, _vocabulary(info, skip), _day_words(info))
        loaded: _Dateparser = self._dateparser
        return loaded

    # --- Chinese ---------------------------------------------------------------------

    def _chinese(self, text: str, base: datetime) -> list[TimeWindow]:
        extract = self._load_jionlp()
        found: list[dict[str, Any]] = []
        with self._lock:
            try:
                for run in extract.extract_time_candidates(text)[:MAX_RUNS]:
                    start, end = run["offset"]
                    # The run (cut to MAX_RUN) and the two characters after it, which JioNLP
                    # reads to tell a year from an amount ("2033元").
                    cut = min(end, start + MAX_RUN)
                    piece = text[start:cut] + text[end : end + 2]
                    items = extract(piece, time_base=base, with_parsing=True)
                    # The piece's span of the text as it is (a cut run's is its first part).
                    reach = cut if cut < end else min(end + 2, len(text))
                    found += _with_months(text, start, reach, items, base)
            except (ValueError, TypeError, KeyError, IndexError, OverflowError):
                return []
        windows: list[TimeWindow] = []
        for item in found:
            detail = item.get("detail") or {}
            times = detail.get("time")
            if detail.get("type") not in ("time_point", "time_span") or not isinstance(times, list) or len(times) != 2:
                continue
            said = str(item.get("text", ""))
            try:
                start = datetime.fromisoformat(times[0])
                end = datetime.fromisoformat(times[1]) + timedelta(seconds=1)  # inclusive -> half-open
                if end - start < DAY:  # kept as its day where said as a time ago, or where it names a day
                    if _AGO_ZH not in said and not _DAY_ZH.search(said):
                        continue
                    start = start.replace(hour=0, minute=0, second=0, microsecond=0)
                    end = start + DAY
                if said.endswith("周末") and end - start == DAY and start.weekday() == 6:
                    start -= DAY  # JioNLP's weekend is its Sunday: the Saturday is the weekend too
            except (TypeError, ValueError, OverflowError):  # not a time, or one past the year 9999
                continue
            windows.append(TimeWindow(_utc(start), _utc(end), said, str(item.get("parser", "jionlp"))))
        return windows

    def _load_jionlp(self) -> Any:
        """JioNLP's time extractor, loaded and prepared (its patterns are built on first call)."""
        with self._lock:
            if self._jionlp is None:
                root = logging.getLogger()
                if _JIONLP_FILTER not in root.filters:  # once per process, however many services
                    root.addFilter(_JIONLP_FILTER)
                with contextlib.redirect_stdout(io.StringIO()):
                    import jionlp

                extract = jionlp.ner.extract_time
                extract("", with_parsing=True)
                self._jionlp = extract
            return self._jionlp


def _with_months(
    text: str, start: int, reach: int, items: list[dict[str, Any]], base: datetime
) -> list[dict[str, Any]]:
    """JioNLP's ``items`` for the piece of ``text`` it read from ``start`` (offsets in the
    piece), and the months said alone in ``text[start:reach]`` that it did not read
    (``_MONTH_ZH``), in its form. They are found in the whole text, so that the words
    around a month are seen where they lie outside the piece ("登上月球": JioNLP's run is
    "上月"). A month JioNLP read as something wider ("五月初", "去年五月份", "上个月底") is
    its; what it read inside one ("十一" in "十一月", "三月" as a length) gives way to the
    month."""
    months: list[dict[str, Any]] = []
    for match in _MONTH_ZH.finditer(text, start):
        if match.end() > reach:
            break
        at, to = match.start() - start, match.end() - start
        inside: list[dict[str, Any]] = []
        for item in items:
            first, last = item.get("offset") or (0, 0)
            if first >= to or last <= at:
                continue
            wider = first < at or last > to
            if wider or ((first, last) == (at, to) and (item.get("detail") or {}).get("type") != "time_delta"):
                break  # JioNLP read it
            inside.append(item)
        else:
            month = _month_named(match, base)
            if month is None:
                continue
            end = _step(month, "month") - timedelta(seconds=1)  # inclusive, as JioNLP's
            times = [month.isoformat(" "), end.isoformat(" ")]
            said = {"text": match.group(), "offset": [at, to], "parser": "glue"}
            months.append(said | {"detail": {"type": "time_span", "time": times}})
            items = [item for item in items if not any(item is other for other in inside)]
    return items + months


def _month_named(match: re.Match[str], base: datetime) -> datetime | None:
    """The first moment of the month ``match`` (of ``_MONTH_ZH``) names: the latest one
    begun by ``base`` for a month said by its name or number."""
    this = base.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if match.group("this") is not None:
        return this
    if (back := match.group("back")) is not None:
        year, month = divmod(this.year * 12 + this.month - 1 - len(back), 12)
        return this.replace(year=year, month=month + 1)
    said = match.group("month")
    month = int(said) if said.isdigit() else _MONTH_NUMBERS[said]
    if not 1 <= month <= 12:
        return None
    return this.replace(month=month, year=this.year if month <= this.month else this.year - 1)


class _ReadWhenAsked:
    """``engine.ports.TimesReading`` that reads when its answer is asked for (once)."""

    __slots__ = ("_now", "_reader", "_text", "_windows")

    def __init__(self, reader: LibraryTimeExpressions, text: str, now: datetime) -> None:
        self._reader, self._text, self._now = reader, text, now
        self._windows: tuple[TimeWindow, ...] | None = None

    def ready(self, wait: float) -> bool:
        return True

    def __call__(self) -> tuple[TimeWindow, ...]:
        if self._windows is None:
            self._windows = self._reader.windows(self._text, self._now)
        return self._windows


class _Dateparser(NamedTuple):
    """dateparser, loaded, and what the glue reads of its English locale."""

    search_dates: Any
    periods: Any  # span -> its period ("day", "week", …), remembered
    skip: frozenset[str]  # the locale's words that are no part of a date ("and", "at", …)
    vocabulary: frozenset[str]  # ``_vocabulary``
    day_words: frozenset[str]  # ``_day_words``


def _day_words(info: dict[str, Any]) -> frozenset[str]:
    """The weekdays and the locale's relative days ("today", "yesterday") in full: a span
    narrower than a day that holds one names that day ("yesterday afternoon", "last
    Friday evening"). Abbreviations are left out: "wed", "sat" and "sun" are words too."""
    relative = info.get("relative-type", {})
    phrases = [phrase for key, said in relative.items() if key.endswith(" day ago") for phrase in said]
    words = {word for phrase in phrases for word in _WORD.findall(phrase.lower())} - {"day", "before", "till", "date"}
    return frozenset(words | set(_WEEKDAYS))


def _names_a_day(span: str, words: set[str], day_words: frozenset[str]) -> bool:
    """Whether ``span`` (its ``words``) names a day (see ``_NUMERIC_DATE``)."""
    if words & day_words or _NUMERIC_DATE.search(span):
        return True
    return bool(words & _MONTHS) and bool(_DAY_OF_MONTH.search(span))


def _vocabulary(info: dict[str, Any], skip: frozenset[str]) -> frozenset[str]:
    """The words of the locale's own date vocabulary (months, weekdays, units, "yesterday",
    "ago", …) without the connectives that make a date only beside one of those ("last",
    "this", "in") and without words of one or two letters ("h", "am", "we": they count only
    beside a digit, and a two-letter span is no time here)."""
    words: set[str] = set()
    for key, value in info.items():
        if key in _NOT_DATE_WORDS:
            continue
        phrases = [*value.values()] if isinstance(value, dict) else [value] if isinstance(value, list) else []
        for phrase in phrases:
            for item in phrase if isinstance(phrase, list) else [phrase]:
                words.update(_WORD.findall(str(item).lower()))
    return frozenset(word for word in words if len(word) > 2 and word not in skip and word not in _CONNECTIVES)


def _a_month_here(text: str, span: str, skip: frozenset[str]) -> bool:
    """False for a span whose only date word is "may" or "march" without a word before
    it that introduces a month ("in May", "since March")."""
    words = [word for word in _WORD.findall(span.lower()) if word not in skip]
    if any(c.isdigit() for c in span):
        return True  # a day or a year with it: a date ("3 May 2023")
    if len(words) == 1 and len(words[0]) < 3:
        return False  # a two-letter word read as a weekday ("we")
    if len(words) != 1 or words[0] not in _AMBIGUOUS_MONTHS:
        return True
    at = text.find(span)
    before = _WORD.findall((text[:at] if at >= 0 else "").lower() + " " + span.lower())
    position = len(before) - 1 - before[::-1].index(words[0])
    return position > 0 and before[position - 1] in _BEFORE_A_MONTH


def _floor(moment: datetime, period: str) -> datetime | None:
    """The start of the day, week (Monday), month or year that holds ``moment``; None
    for a period shorter than a day."""
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day
    if period == "week":
        return day - timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    if period == "year":
        return day.replace(month=1, day=1)
    return None


def _step(start: datetime, period: str) -> datetime:
    """The end of the period that starts at ``start``."""
    if period == "week":
        return start + timedelta(days=7)
    if period == "month":
        if start.month == 12:
            return start.replace(year=start.year + 1, month=1)
        return start.replace(month=start.month + 1)
    if period == "year":
        return start.replace(year=start.year + 1)
    return start + DAY


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC)
