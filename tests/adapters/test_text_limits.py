"""How the adapters keep an agent's text within the service's bounds: a query cut to its
start, a long message split into parts that keep every word, in order."""

from __future__ import annotations

from engine.config import LimitsConfig
from twinmem_client.limits import MAX_CONTENT_CHARS, MAX_QUERY_CHARS, fit_query, split_content


def test_the_bounds_are_the_services_defaults() -> None:
    assert (MAX_QUERY_CHARS, MAX_CONTENT_CHARS) == (LimitsConfig().max_query_chars, LimitsConfig().max_content_chars)


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
