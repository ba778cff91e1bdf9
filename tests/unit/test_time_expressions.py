"""The glue around the time-expression libraries (engine/adapters/time_expressions.py):
what English and Chinese queries name as windows, and ordinary queries that name none.

The libraries are the real ones (dateparser, JioNLP); ``now`` is frozen.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.adapters.time_expressions import LibraryTimeExpressions
from engine.ports import TimeExpressions
from engine.records import TimeWindow

NOW = datetime(2024, 6, 12, 15, 0, tzinfo=UTC)  # a Wednesday


def day(month: int, dom: int, year: int = 2024) -> datetime:
    return datetime(year, month, dom, tzinfo=UTC)


@pytest.fixture(scope="module")
def times() -> LibraryTimeExpressions:
    return LibraryTimeExpressions()


def test_it_is_a_time_expressions_port(times: LibraryTimeExpressions) -> None:
    assert isinstance(times, TimeExpressions)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did I say last week", day(6, 3), day(6, 10)),  # Monday to Monday
        ("what did I say yesterday about the dog", day(6, 11), day(6, 12)),
        ("what did I buy 10 days ago", day(6, 2), day(6, 3)),
        ("what did we talk about in May?", day(5, 1), day(6, 1)),
        ("what did I say two days ago", day(6, 10), day(6, 11)),
        ("a month ago", day(5, 1), day(6, 1)),
        ("what happened in 2022", day(1, 1, 2022), day(1, 1, 2023)),
        ("on 3 May 2023", day(5, 3, 2023), day(5, 4, 2023)),
        ("I mentioned an investment four weeks ago", day(5, 13), day(5, 20)),
        ("what did I say 2 hours ago", day(6, 12), day(6, 13)),  # said as a time ago: that day
        ("上周我说了什么", day(6, 3), day(6, 10)),
        ("我上个星期去了哪里", day(6, 3), day(6, 10)),
        ("三天前", day(6, 9), day(6, 10)),
        ("昨天我吃了什么", day(6, 11), day(6, 12)),
        ("去年我去了哪里旅游", day(1, 1, 2023), day(1, 1, 2024)),
        ("三月三日我去了哪里", day(3, 3), day(3, 4)),
        ("十天前我买了什么", day(6, 2), day(6, 3)),
        ("三小时前我说了什么", day(6, 12), day(6, 13)),
        # A time of day said with its day: that day.
        ("what did I do yesterday afternoon", day(6, 11), day(6, 12)),
        ("what happened on July 11, 2023 at 3pm", day(7, 11, 2023), day(7, 12, 2023)),
        ("what did we decide on 2024-05-03 14:00", day(5, 3), day(5, 4)),
        ("what did we do last Friday evening", day(6, 7), day(6, 8)),
        ("昨天下午我们去了哪里", day(6, 11), day(6, 12)),
        ("2023年12月31日下午我在哪里", day(12, 31, 2023), day(1, 1, 2024)),
        ("今天早上我吃了什么", day(6, 12), day(6, 13)),
    ],
)
def test_a_time_named_becomes_one_window(
    times: LibraryTimeExpressions, query: str, start: datetime, end: datetime
) -> None:
    (window,) = times.windows(query, NOW)
    assert (window.start, window.end) == (start, end)
    assert window.text and window.text in query
    assert window.parser in ("dateparser", "jionlp", "glue")


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # Common relative times, as windows (NOW is Wednesday 12 June 2024).
        ("上个月我去了哪里", day(5, 1), day(6, 1)),
        ("我上个月去了哪里", day(5, 1), day(6, 1)),
        ("我上月买了什么", day(5, 1), day(6, 1)),
        ("上上个月", day(4, 1), day(5, 1)),
        ("上周", day(6, 3), day(6, 10)),
        ("上星期我说了什么", day(6, 3), day(6, 10)),
        ("上周末我们去了哪里", day(6, 8), day(6, 10)),  # Saturday and Sunday
        ("上个周末", day(6, 8), day(6, 10)),
        ("去年", day(1, 1, 2023), day(1, 1, 2024)),
        ("前天我说了什么", day(6, 10), day(6, 11)),
        ("昨天", day(6, 11), day(6, 12)),
        ("三天前我们聊了什么", day(6, 9), day(6, 10)),
        ("两周前", day(5, 27), day(6, 3)),  # the week that holds that day, as "two weeks ago"
        ("上个星期三我说了什么", day(6, 5), day(6, 6)),
        ("这个月我花了多少钱", day(6, 1), day(7, 1)),
        ("本月的计划", day(6, 1), day(7, 1)),
        ("今年我读了几本书", day(1, 1), day(1, 1, 2025)),
        ("五月我去了哪里", day(5, 1), day(6, 1)),
        ("5月我去了哪里", day(5, 1), day(6, 1)),
        ("五月份的会议", day(5, 1), day(6, 1)),
        ("我们三月去了北京", day(3, 1), day(4, 1)),  # March, not JioNLP's three months' length
        ("十一月发生了什么", day(11, 1, 2023), day(12, 1, 2023)),  # not 十一, 1 October
        ("十二月我去了哪", day(12, 1, 2023), day(1, 1, 2024)),  # later in the year: last year's
        ("5月3日我说了什么", day(5, 3), day(5, 4)),
        ("昨天上午我们去了哪里", day(6, 11), day(6, 12)),
        ("5月3日下午我在哪里", day(5, 3), day(5, 4)),
        ("上周三下午的会议", day(6, 5), day(6, 6)),
        # A month JioNLP reads as something wider stays its reading.
        ("上个月底", day(5, 25), day(6, 1)),
        ("去年五月份我在哪", day(5, 1, 2023), day(6, 1, 2023)),
        ("五月初", day(5, 1), day(5, 6)),
    ],
)
def test_a_chinese_time_named_becomes_its_window(
    times: LibraryTimeExpressions, query: str, start: datetime, end: datetime
) -> None:
    (window,) = times.windows(query, NOW)
    assert (window.start, window.end) == (start, end)
    assert window.text and window.text in query


def test_last_month_in_january_is_last_years_december(times: LibraryTimeExpressions) -> None:
    january = datetime(2025, 1, 10, 9, 0, tzinfo=UTC)
    (window,) = times.windows("上个月我去了哪里", january)
    assert (window.start, window.end) == (day(12, 1), day(1, 1, 2025))
    (window,) = times.windows("上上个月", january)
    assert (window.start, window.end) == (day(11, 1), day(12, 1))


def test_two_months_are_two_windows(times: LibraryTimeExpressions) -> None:
    found = times.windows("which airline did I fly with in March and April", NOW)
    assert [(w.start, w.end) for w in found] == [(day(3, 1), day(4, 1)), (day(4, 1), day(5, 1))]


def test_a_mixed_query_is_read_by_both_parsers(times: LibraryTimeExpressions) -> None:
    found = times.windows("昨天 I told 小明 about the trip I took last week", NOW)
    assert {(w.start, w.end, w.parser) for w in found} == {
        (day(6, 3), day(6, 10), "dateparser"),
        (day(6, 11), day(6, 12), "jionlp"),
    }


def test_a_month_later_in_the_year_is_last_years(times: LibraryTimeExpressions) -> None:
    (window,) = times.windows("what did I do in September", NOW)
    assert (window.start, window.end) == (day(9, 1, 2023), day(10, 1, 2023))


ORDINARY_ENGLISH = [
    "May I ask what my dog's name is?",
    "may I have the recipe again",
    "what is the second item on my list",
    "what should I do now",
    "I have 3 cats",
    "tell me about the 5 books I liked",
    "give me a second",
    "can you wait a minute",
    "I need an hour to cook dinner",
    "remind me about the march on Washington",
    "top 10 restaurants in Paris",
    "my 2 kids and 1 dog",
    "what's my favourite colour",
    "how many times did I go to the gym",
    "when did I buy the car",
    "any suggestions for cool-toned colours?",
    "what did we decide",
    "what is my sister's phone number",
    "we should meet at the usual place",
    "recommend some pet supplies",
    # A time of day without its day, ranges and durations name no day.
    "I wake up at 7am",
    "I go to bed around 10-10:30 PM",
    "I read for 20-30 minutes before bed",
    "I've had this laptop for about 2 years now",
]

ORDINARY_CHINESE = [
    "我有一点累",
    "给我三点建议",
    "我喜欢蓝色",
    "有什么偏冷的色调建议",
    "我的猫叫什么名字",
    "第二个是什么",
    "我一天喝三杯咖啡",
    "你现在能帮我吗",
    "我每周去两次健身房",
    "周末有什么推荐",
    "早上好",
    "我五点下班",
    "一会儿再说",
    "请分三步做",
    "我家有两只猫和一条狗",
    "先说第一点",
    "我们上次聊到哪了",
    "刚才说的那个",
    "下午三点开会",
    # Words that hold a month's characters, and lengths of months.
    "五月天的歌",
    "晚上月亮很圆",
    "我有三个月没去了",
    "我每月交房租",
    "下个月有什么安排",
]


@pytest.mark.parametrize("query", ORDINARY_ENGLISH + ORDINARY_CHINESE)
def test_an_ordinary_query_names_no_time(times: LibraryTimeExpressions, query: str) -> None:
    assert times.windows(query, NOW) == ()


def test_a_time_of_day_alone_skips_the_parser_and_a_date_beside_it_does_not() -> None:
    times = LibraryTimeExpressions()
    times.windows("yesterday", NOW)  # loads dateparser
    loaded = times._dateparser
    calls: list[str] = []
    search = loaded.search_dates
    times._dateparser = loaded._replace(search_dates=lambda text, **kw: calls.append(text) or search(text, **kw))
    for query in ["what do I drink in the morning", "late night snacks", "an hour or two", "what now"]:
        assert times.windows(query, NOW) == ()
    assert calls == []
    assert [w.start for w in times.windows("what did I do last week in the evenings", NOW)] == [day(6, 3)]
    assert [w.start for w in times.windows("what did I say three hours ago", NOW)] == [day(6, 12)]
    assert len(calls) == 2


@pytest.mark.parametrize("query", ["", "   ", "?!", "0" * 5000, "May " * 400, "上周" * 800, "\x00\ud7ff"])
def test_odd_text_is_no_error(times: LibraryTimeExpressions, query: str) -> None:
    found = times.windows(query, NOW)
    assert all(isinstance(window, TimeWindow) and window.end > window.start for window in found)


@pytest.mark.parametrize(
    "query",
    [
        "my PIN ends in 9999",
        "what did I do after 9999 steps",
        "in December 9999",
        "what happened on 9999-12-31",
        "on 12/31/9999",
        "9999年12月31日",
        "9999年",
    ],
)
def test_a_time_in_the_last_year_a_date_can_hold_names_no_window(times: LibraryTimeExpressions, query: str) -> None:
    # Its period would end past 9999-12-31 (a date's last year); it starts after now anyway.
    assert times.windows(query, NOW) == ()


def test_every_window_is_at_least_a_day_and_starts_by_now(times: LibraryTimeExpressions) -> None:
    queries = [
        "what did I say today",
        "今天我说了什么",
        "what do I have tomorrow",
        "明天有什么安排",
        "this year",
        "今年",
    ]
    for query in queries:
        for window in times.windows(query, NOW):
            assert window.end - window.start >= timedelta(days=1)
            assert window.start <= NOW
    assert times.windows("what do I have tomorrow", NOW) == ()  # it starts after now
    assert times.windows("明天有什么安排", NOW) == ()


def test_the_window_follows_now(times: LibraryTimeExpressions) -> None:
    later = NOW + timedelta(days=30)
    (window,) = times.windows("what did I say yesterday", later)
    assert (window.start, window.end) == (day(7, 11), day(7, 12))


def test_load_loads_dateparser_and_jionlp_unless_told_chinese_is_not_needed() -> None:
    english = LibraryTimeExpressions()
    english.load(chinese=False)
    assert english._dateparser is not None and english._jionlp is None
    both = LibraryTimeExpressions()
    both.load()
    assert both._dateparser is not None and both._jionlp is not None
    # and they read as before
    assert [w.start for w in both.windows("what did I say last week", NOW)] == [day(6, 3)]
    assert [w.start for w in both.windows("上周我说了什么", NOW)] == [day(6, 3)]


def test_dateparser_reads_the_sentences_that_name_a_date_one_at_a_time(times: LibraryTimeExpressions) -> None:
    # A prompt context's query: several user turns joined. Read whole, dateparser took
    # "one we" for a date too (a LongMemEval turn); read a sentence at a time, only July is.
    turns = (
        "That sounds great! I'll check out those parks and see which one we like best. "
        "By the way, I was thinking of asking my siblings to come over in July."
    )
    (window,) = times.windows(turns, NOW)
    assert (window.start, window.end, window.text) == (day(7, 1, 2023), day(8, 1, 2023), "in July")
    # What ends no sentence keeps a date whole: a dotted date, a decimal before a date.
    (window,) = times.windows("What did I buy on 2023.05.03? Tell me.", NOW)
    assert (window.start, window.end) == (day(5, 3, 2023), day(5, 4, 2023))
    (window,) = times.windows("I ran 3.5 km on 3 May 2023. Nice.", NOW)
    assert (window.start, window.end) == (day(5, 3, 2023), day(5, 4, 2023))


@pytest.mark.parametrize(
    "query",
    [
        "what did I do in May at 5pm",
        "what happened in July 2023 at 3pm",
        "what did we do in 2019 at night",
        "what did I do in March in the morning",
        "on 2023-05 at 3pm",
        "They got wed at 4pm",
        "5月下午",
    ],
)
def test_a_month_or_a_year_with_a_time_of_day_names_no_single_day(times: LibraryTimeExpressions, query: str) -> None:
    # The parsers fill in today's day of the month: no such day was named.
    assert all(window.end - window.start != timedelta(days=1) for window in times.windows(query, NOW))


SAID = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)  # a Sunday


@pytest.mark.parametrize(
    "query",
    [
        # 上 ending a word before a word beginning with 月: no "last month".
        "登上月球",
        "阿姆斯特朗登上月球",
        "爬上月台",
        "走上月台等车",
        "送上月饼",
        "加上月租一共多少",
        "算上月薪",
        "楼上月租三千",
        "网上月卡",
        "路上月色很好",
        "看上月亮",
        "高一上月考",
        # 这个 or 本 before a word beginning with 月, or 本 ending a word: no "this month".
        "我在这个月台等你",
        "火车停在这个月台",
        "这个月亮好大",
        "这个月饼很好吃",
        "这个月季花很漂亮",
        "这个月嫂很好",
        "这个月球车",
        "本月饼店",
        "日本月薪多少",
        # A length, and idioms.
        "我都一月没吃肉了",
        "十月怀胎",
        "三月不知肉味",
    ],
)
def test_a_word_that_holds_a_months_characters_names_no_month(times: LibraryTimeExpressions, query: str) -> None:
    assert times.windows(query, SAID) == ()


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("上个月我去了北京", day(11, 1, 2026), day(12, 1, 2026)),
        ("这个月很忙", day(12, 1, 2026), day(1, 1, 2027)),
        ("本月的账单", day(12, 1, 2026), day(1, 1, 2027)),
        ("五月我在上海", day(5, 1, 2026), day(6, 1, 2026)),
        ("一月份的时候", day(1, 1, 2026), day(2, 1, 2026)),
        ("一月的时候", day(1, 1, 2026), day(2, 1, 2026)),
        ("今年一月", day(1, 1, 2026), day(2, 1, 2026)),
        ("我一月去了日本", day(1, 1, 2026), day(2, 1, 2026)),
        # Beside the words above, the month is still read where it is meant.
        ("查看上月账单", day(11, 1, 2026), day(12, 1, 2026)),
        ("计算上月的开支", day(11, 1, 2026), day(12, 1, 2026)),
        ("比上月增长了多少", day(11, 1, 2026), day(12, 1, 2026)),
        ("我上月租了一套房", day(11, 1, 2026), day(12, 1, 2026)),
        ("这个月薪水还没发", day(12, 1, 2026), day(1, 1, 2027)),
        ("这个月台风很多", day(12, 1, 2026), day(1, 1, 2027)),
        ("本月亮点", day(12, 1, 2026), day(1, 1, 2027)),
        ("我有一月份的账单", day(1, 1, 2026), day(2, 1, 2026)),
    ],
)
def test_a_month_said_beside_such_words_is_read(
    times: LibraryTimeExpressions, query: str, start: datetime, end: datetime
) -> None:
    (window,) = times.windows(query, SAID)
    assert (window.start, window.end) == (start, end)
    assert window.text and window.text in query
