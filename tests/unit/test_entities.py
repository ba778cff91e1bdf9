"""The built-in entity extractor and how entity names link (engine/entities.py)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from engine.entities import MAX_EXTRACTED, canonical_key, entities_for, extract_entities, misspelt_openers
from engine.records import entity_keys


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I live in Berlin", {"berlin"}),
        ("Alice works at Acme Corp in New York", {"alice", "acme corp", "new york"}),
        ("I switched to dark mode in VS Code on my iPhone", {"dark mode", "vs code", "iphone"}),
        ("Remember that GPT-4 writes the summaries", {"gpt-4"}),
        ("The user drinks coffee every morning", {"coffee"}),
        ("小明在阿里巴巴工作，住在杭州", {"小明", "阿里巴巴", "hangzhou"}),
        ("我喜欢蓝色", {"blue"}),
        ("把主题改成黑色", {"主题", "black"}),
        ("用户偏好极简风格，下单前喜欢询问退换货规则", {"minimalist style", "退换货"}),
    ],
)
def test_extractor_finds_names_places_products_and_topics(text: str, expected: set[str]) -> None:
    found = entity_keys(extract_entities(text))
    assert expected <= found, found


@pytest.mark.parametrize(
    "text",
    ["I think so too.", "The user said yes", "用户觉得这个时候不太好", "Please remember this"],
)
def test_extractor_finds_nothing_in_text_without_a_subject(text: str) -> None:
    assert extract_entities(text) == ()


def test_extractor_skips_generic_subjects_and_sentence_openers() -> None:
    found = entity_keys(extract_entities("User prefers tea. The user also likes Paris. I am in Lisbon"))
    assert found == {"tea", "paris", "lisbon"}


def test_one_character_chinese_concepts_count_only_as_whole_words() -> None:
    assert entity_keys(extract_entities("用户每天喝一杯茶")) == {"tea"}
    assert "red" not in entity_keys(extract_entities("我喜欢红烧肉"))


def test_extractor_keeps_the_first_spelling_once_per_key_in_order() -> None:
    assert extract_entities("Blue is nice, blue is calm, 蓝色 is mine") == ("Blue",)


def test_extractor_caps_how_many_it_returns() -> None:
    text = " ".join(f"Visited City{n}x." for n in range(40))
    assert len(extract_entities(text)) == MAX_EXTRACTED


@pytest.mark.parametrize(
    ("names", "key"),
    [
        (["Blue", "blue", "BLUE", "蓝色", " 蓝色 "], "blue"),
        (["dark mode", "Dark Theme", "深色模式", "暗色模式"], "dark mode"),
        (["Acme Corp", "acme  corp", "ＡＣＭＥ Corp"], "acme corp"),
        (["The Beatles", "the beatles"], "beatles"),
    ],
)
def test_names_of_one_thing_share_a_key(names: list[str], key: str) -> None:
    assert {canonical_key(name) for name in names} == {key}
    assert entity_keys(names) == frozenset({key})


def test_names_outside_the_alias_table_keep_their_folded_form() -> None:
    assert canonical_key("阿里巴巴") != canonical_key("Alibaba")
    assert canonical_key("Zürich") == "zürich"


def test_client_entities_win_over_extraction() -> None:
    assert entities_for(["Project X"], "I live in Berlin") == ("Project X",)
    assert entities_for([], "I live in Berlin") == ("Berlin",)


def test_english_text_never_loads_the_chinese_tagger() -> None:
    """jieba's tagging model costs half a second and its memory: English alone never loads it."""
    script = (
        "import sys\n"
        "from engine.entities import extract_entities\n"
        "assert extract_entities('Bob Silva moved to Berlin') == ('Bob Silva', 'Berlin')\n"
        "assert 'jieba.posseg' not in sys.modules\n"
        "assert extract_entities('我喜欢北京的烤鸭')\n"
        "assert 'jieba.posseg' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)


def test_chinese_characters_no_word_holds_are_tagged_in_bounded_time() -> None:
    """jieba's HMM tags a stretch of characters its dictionary makes no word of at a cost
    that grows with the square of the tags each may take (any of 256 for a rare one):
    2,000 rare characters, a comma every 20, took about 15 s to tag, and 8,000 without one
    made a save take 76 s."""
    rare = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(2000))
    text = "，".join(rare[i : i + 20] for i in range(0, len(rare), 20))
    extract_entities("王小明住在杭州。")  # jieba's dictionary and tagging model, loaded once
    start = time.perf_counter()
    extract_entities(text)
    assert time.perf_counter() - start < 4


def test_names_jieba_finds_by_its_hmm_are_still_found() -> None:
    text = "我的朋友欧阳娜娜住在杭州西湖边。昨天她和司马光明一起去了乌鲁木齐。王小明和李华去找张伟教授。"
    assert {"欧阳", "娜娜", "杭州", "西湖", "乌鲁木齐", "王小明", "李华", "张伟"} <= set(extract_entities(text))


@pytest.mark.parametrize(
    ("text", "other", "typos"),
    [
        ("Teh meeting is at 5", "The meeting is at 5", ("Teh",)),
        ("We meet at 5. Thier room is 4.", "We meet at 5. Their room is 4.", ("Thier",)),
        # A name in the place of a word: not a typo of it.
        ("Sarah meeting is at 5", "The meeting is at 5", ()),
        ("Teh meeting is at 5", "The meeting with Bob is at 5", ()),  # another sentence after it
        ("The meeting is at 5", "Teh meeting is at 5", ()),  # the word itself is no name
        ("teh meeting is at 5", "The meeting is at 5", ()),  # not read as a name
    ],
)
def test_a_misspelt_first_word_is_told_from_a_name(text: str, other: str, typos: tuple[str, ...]) -> None:
    assert misspelt_openers(text, other) == typos
