"""How the adapters keep an agent's text within the service's bounds: a query cut to its
start, a long message split into parts that keep every word, in order."""

from __future__ import annotations

import json

import pytest

from engine import text
from engine.config import LimitsConfig, ServerConfig
from twinmem_client.limits import (
    MAX_BATCH,
    MAX_BODY_BYTES,
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    batches,
    fit_query,
    is_blank,
    split_content,
)

ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u200e"


def test_the_bounds_are_the_services_defaults() -> None:
    limits = LimitsConfig()
    assert (MAX_QUERY_CHARS, MAX_CONTENT_CHARS) == (limits.max_query_chars, limits.max_content_chars)
    assert (MAX_BATCH, MAX_BODY_BYTES) == (limits.max_batch, ServerConfig().max_body_bytes)


def test_blank_is_what_the_service_calls_blank() -> None:
    samples = ["", " ", "\n\t", ZERO_WIDTH, "\x00\x07", " \u00a0\u3000", "a", ZERO_WIDTH + "a", "字", "\u00ad", "·"]
    assert [is_blank(s) for s in samples] == [text.is_blank(s) for s in samples]
    every = "".join(chr(c) for c in range(0x3000)) + "\U000e0001\U0001f600"
    assert [c for c in every if is_blank(c)] == [c for c in every if text.is_blank(c)]


def test_a_query_behind_a_long_blank_run_keeps_its_words() -> None:
    for lead in (" " * 5000, "\n" * 4001, ZERO_WIDTH * 1000):
        assert fit_query(lead + "What colour do I like?  ") == "What colour do I like?"  # before: blank, a 422
    assert fit_query(" " * 5000) == ""


def test_a_query_is_cut_to_its_start_at_a_boundary() -> None:
    assert fit_query("What colour do I like?") == "What colour do I like?"
    text = "Summarise this ticket. " + "The printer on floor 3 is jammed again. " * 200
    cut = fit_query(text)
    assert len(cut) <= MAX_QUERY_CHARS and text.startswith(cut) and cut.endswith("again.")
    assert fit_query("x" * 5000) == "x" * MAX_QUERY_CHARS  # no boundary: cut at the limit


def test_a_long_text_is_split_at_boundaries_keeping_every_word() -> None:
    assert split_content("I have a cat called Miso") == ["I have a cat called Miso"]
    log = "Please summarise this log:\n" + "".join(f"2026-01-01 INFO request {i} served in 12 ms\n" for i in range(400))
    parts = split_content(log)
    assert len(parts) > 1 and all(0 < len(p) <= MAX_CONTENT_CHARS for p in parts)
    assert " ".join(parts).split() == log.split()  # nothing lost, nothing reordered
    assert all(p.endswith("ms") for p in parts)  # each ends at a line's end, not inside a word
    prose = " ".join(f"Sentence number {i} is here." for i in range(1500))
    assert all(p.endswith("is here.") for p in split_content(prose))
    unbroken = "字" * 20000
    assert "".join(split_content(unbroken)) == unbroken


def test_a_text_past_the_limit_only_by_its_whitespace_is_one_part() -> None:
    prose = " ".join(f"Sentence number {i} is here." for i in range(400))[:MAX_CONTENT_CHARS]
    assert split_content(prose + "\n") == [prose]
    assert split_content("\n\n  " + prose + "  \n") == [prose]
    assert split_content(" " * (MAX_CONTENT_CHARS + 1)) == []


def test_a_part_the_service_calls_blank_is_left_out() -> None:
    assert split_content(ZERO_WIDTH) == []
    parts = split_content("I like tea.\n\n" + ZERO_WIDTH * 4000 + "\n\nI like coffee.")
    assert parts == ["I like tea.", "I like coffee."]  # before: a part of zero-width marks only, a 422


def test_batches_fit_the_services_bounds_on_a_request() -> None:
    memories = [{"content": f"{i} " + "é" * 7990, "metadata": {"part": i}} for i in range(300)]
    sent = list(batches(memories))
    assert [m for batch in sent for m in batch] == memories  # all of them, in order
    sizes = [len(json.dumps({"namespace": "n" * 200, "memories": b}, ensure_ascii=False).encode()) for b in sent]
    assert len(sent) > 1 and max(sizes) <= MAX_BODY_BYTES  # 300 × 16 kB: two or more bodies of at most 2 MiB
    small = [{"content": f"word {i}"} for i in range(1200)]
    assert [len(b) for b in batches(small)] == [MAX_BATCH, MAX_BATCH, 200]


def test_a_long_text_is_never_cut_between_the_digit_groups_of_a_number() -> None:
    # Each part is guarded on its own: a card number cut in two was two halves that no
    # redaction rule reads as a card, stored in clear.
    card = "4111 1111 1111 1111"
    for lead in range(MAX_CONTENT_CHARS - 30, MAX_CONTENT_CHARS + 1):
        message = "a" * lead + " " + card + " is my card " + "b" * 50
        for split in (split_content(message), text.parts(message, MAX_CONTENT_CHARS)):
            assert any(card in part for part in split), lead
            assert "".join(split).replace(" ", "") == message.replace(" ", "")
    phone = "call me at +1 415 555 0132 tomorrow"
    spaced = "x" * (MAX_CONTENT_CHARS - 14) + " " + phone
    assert any("+1 415 555 0132" in part for part in split_content(spaced))


@pytest.mark.parametrize("gap", ["  ", " \t", "\t\t", "   "])
def test_a_number_whose_groups_are_set_apart_by_more_than_one_space_is_not_cut_either(gap: str) -> None:
    # A match may start inside a run of spaces: the space before it is no digit, so a card
    # number written with two spaces between its groups was cut in two all the same.
    card = gap.join(["4111", "1111", "1111", "1111"])
    for lead in range(MAX_CONTENT_CHARS - 30, MAX_CONTENT_CHARS + 1):
        message = "a" * lead + " " + card + " is my card " + "b" * 50
        for split in (split_content(message), text.parts(message, MAX_CONTENT_CHARS)):
            assert any(card in part for part in split), (lead, split)
