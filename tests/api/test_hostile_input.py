"""Hostile input over real HTTP: every request that once answered 500 now answers 4xx with a
message saying what was wrong, and leaves what is stored as it was. A real server on a real
SQLite file and on the Bolt tier; the deterministic embedder (the input, not the model, is
under test)."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import LiveServer, start_server, store_overrides
from tests.conftest import HashingEmbedder

pytestmark = pytest.mark.slow

DEEP_JSON = "[" * 10_000 + "]" * 10_000
# Offsets that carry a valid local time outside the years 1..9999 once converted to UTC.
PAST_THE_END = "9999-12-31T23:59:59-23:59"
BEFORE_THE_START = "0001-01-01T00:00:00+23:59"


class ExplodingEmbedder(HashingEmbedder):
    """Fails like a bug would (a plain RuntimeError) when asked to embed the query "explode"."""

    def embed_query(self, text: str) -> Any:
        if text == "explode":
            raise RuntimeError("the embedder exploded")
        return super().embed_query(text)


@pytest.fixture(scope="module", params=["sqlite", "arcadedb"])
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server per store: SQLite, and the Bolt tier (ArcadeDB)."""
    config = store_overrides(request, request.param)
    server = start_server(tmp_path_factory.mktemp("hostile") / "data", ExplodingEmbedder(), **config)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def kept(http: httpx.Client) -> str:
    """A memory saved before any hostile request: it must come through every one of them."""
    saved = http.post("/v1/memory/save", json={"content": "The user keeps bees", "metadata": {"n": 1}})
    assert saved.status_code == 201, saved.text
    memory_id: str = saved.json()["memory_id"]
    return memory_id


def _still_there(http: httpx.Client, memory_id: str) -> None:
    got = http.get(f"/v1/memory/{memory_id}")
    assert got.status_code == 200, got.text
    assert got.json()["content"] == "The user keeps bees"
    assert got.json()["version"] == 1


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def _refused(response: httpx.Response, status: int, *words: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert all(word in body["detail"] for word in words), body["detail"]
    return body


# --- A: JSON nested too deeply to decode --------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/memory/save"),
        ("POST", "/v1/memory/save_batch"),
        ("POST", "/v1/memory/recall"),
        ("PATCH", "/v1/memory/00000000-0000-0000-0000-000000000000"),
        ("POST", "/v1/memory/rollback"),
    ],
)
def test_json_nested_ten_thousand_levels_is_a_400(http: httpx.Client, kept: str, method: str, path: str) -> None:
    response = http.request(method, path, content=DEEP_JSON, headers={"content-type": "application/json"})
    _refused(response, 400, "nested too deeply")
    _still_there(http, kept)


def test_an_import_line_nested_too_deeply_is_reported_on_its_line(http: httpx.Client, kept: str) -> None:
    lines = [json.dumps({"content": "fine"}), DEEP_JSON]
    response = http.post("/v1/import", params={"format": "jsonl"}, content="\n".join(lines).encode())
    report = _refused(response, 422, "nothing was imported")["report"]
    assert [(e["line"], e["error"]) for e in report["errors"]] == [(2, "JSON nested too deeply to read")]
    _still_there(http, kept)


# --- B: metadata nested too deeply --------------------------------------------------------


def test_metadata_nested_five_hundred_levels_is_a_422(http: httpx.Client, kept: str) -> None:
    body = {"content": "Deep thoughts", "metadata": _nested(500)}
    _refused(http.post("/v1/memory/save", json=body), 422, "metadata nests deeper than 32")
    patch = {"metadata": _nested(500)}
    _refused(http.patch(f"/v1/memory/{kept}", json=patch), 422, "metadata nests deeper than 32")
    _still_there(http, kept)


def test_metadata_within_the_depth_limit_is_kept(http: httpx.Client) -> None:
    saved = http.post("/v1/memory/save", json={"content": "Shallow enough", "metadata": _nested(31)})
    assert saved.status_code == 201, saved.text
    assert saved.json()["memory"]["metadata"] == _nested(31)


def test_the_metadata_depth_limit_is_configurable(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", HashingEmbedder(), limits={"max_metadata_depth": 2})
    try:
        ok = httpx.post(server.url + "/v1/memory/save", json={"content": "two", "metadata": {"a": {"b": 1}}})
        assert ok.status_code == 201, ok.text
        deep = httpx.post(server.url + "/v1/memory/save", json={"content": "three", "metadata": _nested(3)})
        _refused(deep, 422, "deeper than 2")
    finally:
        server.stop()


# --- C: a time without a zone in a query parameter ---------------------------------------


@pytest.mark.parametrize("name", ["created_after", "created_before"])
def test_a_naive_time_in_the_list_query_is_a_422(http: httpx.Client, name: str) -> None:
    body = _refused(http.get("/v1/memories", params={name: "2026-01-01T00:00:00"}), 422, "timezone")
    assert body["field"] == name


# --- D: offsets that overflow when converted to UTC ---------------------------------------


@pytest.mark.parametrize("moment", [PAST_THE_END, BEFORE_THE_START])
def test_a_time_out_of_range_in_utc_is_a_422_everywhere(http: httpx.Client, kept: str, moment: str) -> None:
    cases = [
        http.post("/v1/memory/save", json={"content": "Expires never", "expire_at": moment}),
        http.post("/v1/memory/save", json={"content": "Happened once", "created_at": moment}),
        http.post("/v1/memory/save_batch", json={"memories": [{"content": "Batch", "expire_at": moment}]}),
        http.patch(f"/v1/memory/{kept}", json={"expire_at": moment}),
        http.post("/v1/memory/recall", json={"query": "bees", "filter": {"created_after": moment}}),
        http.get("/v1/memories", params={"created_before": moment}),
        http.post("/v1/memory/rollback", json={"namespace": "default", "as_of": moment}),
        http.get("/v1/admin/audit", params={"since": moment}),
    ]
    for response in cases:
        _refused(response, 422, "out of range")
    _still_there(http, kept)


# --- E: a metadata filter value the stores cannot hold -----------------------------------


def test_a_metadata_filter_above_int64_is_a_422(http: httpx.Client) -> None:
    for value in (2**63, -(2**63) - 1, 10**30):
        body = {"query": "bees", "filter": {"metadata": {"n": value}}}
        _refused(http.post("/v1/memory/recall", json=body), 422, "64 bits")
    fine = http.post("/v1/memory/recall", json={"query": "bees", "filter": {"metadata": {"n": 2**63 - 1}}})
    assert fine.status_code == 200, fine.text


# --- F: imports with out-of-range times ---------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "data"),
    [
        ("jsonl", '{"content": "a", "created_at": 1e300}'),
        ("jsonl", '{"content": "a", "created_at": 1e18}'),
        ("jsonl", '{"content": "a", "created_at": Infinity}'),
        ("jsonl", '{"content": "a", "created_at": NaN}'),
        ("jsonl", f'{{"content": "a", "expire_at": "{PAST_THE_END}"}}'),
        ("csv", "content,created_at\na,12345678901234567890\n"),
        ("mem0", '{"results": [{"id": "m1", "memory": "a", "created_at": "0001-01-01T00:00:00+23:59"}]}'),
        ("mem0", '{"results": [{"id": "m1", "memory": "a", "created_at": 1e300}]}'),
    ],
)
def test_an_import_time_out_of_range_is_reported_per_line(http: httpx.Client, kept: str, fmt: str, data: str) -> None:
    response = http.post("/v1/import", params={"format": fmt, "namespace": "imports"}, content=data.encode())
    report = _refused(response, 422, "nothing was imported")["report"]
    assert len(report["errors"]) == 1 and report["errors"][0]["line"] in (1, 2), report
    assert "time" in report["errors"][0]["error"] or "range" in report["errors"][0]["error"], report
    assert http.get("/v1/memories", params={"namespace": "imports"}).json()["memories"] == []
    _still_there(http, kept)


def test_a_twinmem_export_with_a_time_out_of_range_is_reported_on_its_line(http: httpx.Client, kept: str) -> None:
    exported = http.get("/v1/export", params={"namespace": "default"}).content.splitlines()
    memory = json.loads(exported[1])
    memory["memory"]["created_at"] = BEFORE_THE_START
    lines = [exported[0], json.dumps(memory).encode(), *exported[2:]]
    response = http.post("/v1/import", params={"namespace": "copy"}, content=b"\n".join(lines))
    report = _refused(response, 422, "nothing was imported")["report"]
    assert [e["line"] for e in report["errors"]] == [2]
    assert "out of range" in report["errors"][0]["error"]
    _still_there(http, kept)


# --- G: a CSV that is not UTF-8 ------------------------------------------------------------


def test_a_csv_that_is_not_utf8_is_a_422_naming_the_line(http: httpx.Client, kept: str) -> None:
    data = b"content\nfine\n" + "caf\u00e9 in Latin-1\n".encode("latin-1")
    response = http.post("/v1/import", params={"format": "csv", "namespace": "imports"}, content=data)
    body = _refused(response, 422, "line 3", "UTF-8")
    assert body["field"] == "body"
    _still_there(http, kept)


# --- an unexpected failure -----------------------------------------------------------------


def test_an_unexpected_error_is_a_500_with_a_request_id_that_the_log_names(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="api.errors"):
        response = http.post("/v1/memory/recall", json={"query": "explode"})
    assert response.status_code == 500
    request_id = response.headers["x-request-id"]
    body = response.json()
    assert body["request_id"] == request_id and request_id in body["detail"]
    assert "exploded" not in body["detail"]  # the cause is for the log, not the caller
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert "the embedder exploded" in str(logged[0].exc_info[1])


# --- wire types are strict -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/memory/save", {"content": "x", "base_score": True}, "base_score"),
        ("/v1/memory/save", {"content": "x", "importance": "0.5"}, "importance"),
        ("/v1/memory/save", {"content": 5}, "content"),
        ("/v1/memory/save", {"content": "x", "entities": [1]}, "entities"),
        ("/v1/memory/recall", {"query": "bees", "top_k": True}, "top_k"),
        ("/v1/memory/recall", {"query": "bees", "top_k": "3"}, "top_k"),
        ("/v1/memory/recall", {"query": "bees", "explain": "yes"}, "explain"),
        ("/v1/memory/recall", {"query": "bees", "filter": {"include_expired": 1}}, "include_expired"),
    ],
)
def test_wire_types_are_not_coerced(http: httpx.Client, path: str, body: dict[str, Any], field: str) -> None:
    _refused(http.post(path, json=body), 422, field)


@pytest.mark.parametrize("number", [86400, 12345.5, "86400", "-12345.5", "8.64e4", "1.0E+5"])
def test_a_time_sent_as_a_number_is_a_422_and_changes_nothing(
    http: httpx.Client, kept: str, number: float | str
) -> None:
    """A number was read as Unix seconds: ``expire_at: 86400`` (meant as a day to live) hid the
    memory from recall at once (1970-01-02), and a rollback ``as_of: 12345`` soft-deleted
    every memory of the namespace; so did the number in quotes, ``"12345"``."""
    cases = [
        (http.post("/v1/memory/save", json={"content": "Dentist is Dr Weber", "expire_at": number}), "expire_at"),
        (http.post("/v1/memory/save", json={"content": "Dentist is Dr Weber", "created_at": number}), "created_at"),
        (http.post("/v1/memory/save_batch", json={"memories": [{"content": "B", "expire_at": number}]}), "expire_at"),
        (http.patch(f"/v1/memory/{kept}", json={"expire_at": number}), "expire_at"),
        (http.post("/v1/memory/recall", json={"query": "bees", "filter": {"created_after": number}}), "created_after"),
        (http.post("/v1/memory/rollback", json={"namespace": "default", "as_of": number}), "as_of"),
        (
            http.post(
                "/v1/sessions/s-number/messages",
                json={"messages": [{"role": "user", "content": "Hello there", "at": number}]},
            ),
            "at",
        ),
    ]
    for response, field in cases:
        body = _refused(response, 422, field, "ISO 8601", "not a number")
        assert body["field"].split(".")[-1] == field
    _still_there(http, kept)
    listed = http.get("/v1/memories", params={"namespace": "default", "status": "active", "limit": 100}).json()
    assert "Dentist is Dr Weber" not in {memory["content"] for memory in listed["memories"]}


@pytest.mark.parametrize("number", ["86400", "-12345.5", ".5", "8.64e4", "1.0E+5", "-0"])
def test_a_time_sent_as_a_number_in_a_query_string_is_a_422(http: httpx.Client, kept: str, number: str) -> None:
    """A query parameter was read as Litestar reads a ``datetime``, a number as Unix seconds:
    ``GET /v1/memories?created_after=86400`` (meant as "the last day") listed from 1970-01-02,
    and ``created_before=86400`` listed nothing, without a word."""
    cases = [
        (http.get("/v1/memories", params={"created_after": number}), "created_after"),
        (http.get("/v1/memories", params={"created_before": number}), "created_before"),
        (http.get("/v1/admin/audit", params={"since": number}), "since"),
    ]
    for response, field in cases:
        body = _refused(response, 422, field, "ISO 8601", "not a number")
        assert body["field"] == field
    _still_there(http, kept)


def test_query_string_times_still_read_iso_8601(http: httpx.Client, kept: str) -> None:
    listed = http.get("/v1/memories", params={"created_after": "2000-01-01T00:00:00Z"})
    assert listed.status_code == 200, listed.text
    assert kept in {memory["memory_id"] for memory in listed.json()["memories"]}
    before = http.get("/v1/memories", params={"created_before": "2000-01-01T00:00:00+02:00"})
    assert before.status_code == 200, before.text
    assert before.json()["memories"] == []
    # The audit log reads a time without a timezone as UTC, as it always did.
    audit = http.get("/v1/admin/audit", params={"since": "2000-01-01T00:00:00"})
    assert audit.status_code == 200, audit.text
    assert audit.json()["entries"]
    _refused(http.get("/v1/memories", params={"created_after": "yesterday"}), 422, "created_after", "ISO 8601")


@pytest.mark.parametrize(
    "written", ["2000-01-01T08:00:00+08:00", "2000-01-01 08:00:00.250+08:00", "2000-01-01T08:00+0800"]
)
def test_an_offset_whose_plus_was_not_url_encoded_is_read_as_plus(http: httpx.Client, kept: str, written: str) -> None:
    """``curl '...?created_after=2026-01-31T09:00:00+08:00'`` sends the ``+`` as it is, and a
    query string reads ``+`` as a space: the time arrived as ``...09:00:00 08:00`` and was a
    422 that named no cause. A space is never anything else before an offset's hours, so it
    is read as the ``+`` it was."""
    listed = http.get(f"/v1/memories?created_after={written}")
    assert listed.status_code == 200, listed.text
    assert kept in {memory["memory_id"] for memory in listed.json()["memories"]}
    before = http.get(f"/v1/memories?created_before={written}")
    assert before.status_code == 200, before.text
    assert before.json()["memories"] == []
    audit = http.get(f"/v1/admin/audit?since={written}")
    assert audit.status_code == 200, audit.text
    assert audit.json()["entries"]
    # What is not an offset after the space is still refused.
    _refused(http.get("/v1/memories?created_after=2000-01-01T08:00:00+later"), 422, "created_after", "ISO 8601")


def test_strict_types_still_read_times_and_names(http: httpx.Client) -> None:
    body = {
        "content": "The user met Ada in Paris",
        "source": "inference",
        "visibility": "private",
        "base_score": 1,
        "created_at": "2026-01-01T09:00:00+02:00",
    }
    saved = http.post("/v1/memory/save", json=body)
    assert saved.status_code == 201, saved.text
    memory = saved.json()["memory"]
    assert (memory["source"], memory["visibility"], memory["base_score"]) == ("inference", "private", 1.0)
    assert memory["created_at"] == "2026-01-01T07:00:00.000000+00:00"


def test_an_import_entities_object_is_refused_in_the_report(http: httpx.Client) -> None:
    data = json.dumps({"content": "a", "entities": {"a": 1}}).encode()
    response = http.post("/v1/import", params={"format": "jsonl", "namespace": "imports"}, content=data)
    report = _refused(response, 422, "nothing was imported")["report"]
    assert [e["line"] for e in report["errors"]] == [1] and "entities" in report["errors"][0]["error"]


# --- found by a hostile probe: each of these answered 500 ----------------------------------


@pytest.mark.parametrize("query", ["my PIN ends in 9999", "what happened on 9999-12-31", "in December 9999"])
def test_a_query_naming_the_year_9999_is_recalled_everywhere(http: httpx.Client, kept: str, query: str) -> None:
    # Its time's period would end past the last date Python holds; it names no window.
    recalled = http.post("/v1/memory/recall", json={"query": query, "explain": True})
    assert recalled.status_code == 200, recalled.text
    searched = http.post("/mem0/search", json={"query": query, "user_id": "probe"})
    assert searched.status_code == 200, searched.text
    said = http.post("/v1/sessions/s9999/messages", json={"messages": [{"role": "user", "content": query}]})
    assert said.status_code in (200, 201), said.text
    context = http.post("/v1/sessions/s9999/context", json={})
    assert context.status_code == 200, context.text
    _still_there(http, kept)


@pytest.mark.parametrize("path", ["/v1/memory/save", "/v1/memory/recall", "/v1/memory/save_batch"])
def test_a_json_body_with_bytes_that_are_not_utf8_is_a_400(http: httpx.Client, kept: str, path: str) -> None:
    body = b'{"content": "caf\xe9 au lait", "query": "caf\xe9", "memories": [{"content": "caf\xe9"}]}'
    response = http.post(path, content=body, headers={"content-type": "application/json"})
    _refused(response, 400, "not valid UTF-8", "0xe9")
    _still_there(http, kept)


def test_a_list_cursor_nested_too_deeply_is_a_422(http: httpx.Client, kept: str) -> None:
    for payload in [b"[" * 1000, b'{"a": 1, "b": 2}', b'["2026-01-01T00:00:00+00:00", 7]']:
        cursor = base64.urlsafe_b64encode(payload).decode()
        response = http.get("/v1/memories", params={"namespace": "default", "cursor": cursor})
        _refused(response, 422, "is not one this service issued")
    _still_there(http, kept)


@pytest.mark.parametrize(
    ("split", "status", "words"),
    [
        ('{"window": 1e308, "memories": 1e308, "procedures": 0}', 422, "their sum must be a finite"),
        ('{"window": 1, "memories": 0, "procedures": 1e999}', 400, "Number out of range"),  # the decoder's
        ('{"window": 1e308, "memories": 0, "procedures": 0}', 200, ""),  # shares of a whole a float holds
    ],
)
def test_context_shares_past_what_a_number_holds_are_refused(
    http: httpx.Client, split: str, status: int, words: str
) -> None:
    said = http.post("/v1/sessions/shares/messages", json={"messages": [{"role": "user", "content": "hi"}]})
    assert said.status_code in (200, 201), said.text
    body = f'{{"split": {split}}}'.encode()
    response = http.post("/v1/sessions/shares/context", content=body, headers={"content-type": "application/json"})
    if status == 200:
        assert response.status_code == 200, response.text
        assert response.json()["sections"]["window"]["budget"] == response.json()["budget"]
    else:
        _refused(response, status, words)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("access_count", 2**63, "access_count must be an integer within 0..9007199254740991"),
        ("access_count", 10**30, "access_count must be an integer within"),
        ("version", 2**53, "version must be an integer within 1..9007199254740991"),
        ("key", "k" * 201, "key holds 1-200 characters"),
        ("entities", ["e" * 201], "a name holds at most 200 characters"),
    ],
)
def test_a_twinmem_export_past_the_record_limits_is_reported_on_its_line(
    http: httpx.Client, kept: str, field: str, value: Any, words: str
) -> None:
    exported = http.get("/v1/export", params={"namespace": "default"}).content.splitlines()
    memory = json.loads(exported[1])
    memory["memory"][field] = value
    lines = [exported[0], json.dumps(memory).encode(), *exported[2:]]
    response = http.post("/v1/import", params={"namespace": "limits"}, content=b"\n".join(lines))
    report = _refused(response, 422, "nothing was imported")["report"]
    assert [e["line"] for e in report["errors"]] == [2]
    assert words in report["errors"][0]["error"], report
    _still_there(http, kept)


def test_the_largest_counters_an_import_takes_round_trip_after_a_recall(http: httpx.Client) -> None:
    saved = http.post("/v1/memory/save", json={"namespace": "counters", "content": "The user counts sheep"})
    assert saved.status_code == 201, saved.text
    exported = http.get("/v1/export", params={"namespace": "counters"}).content.splitlines()
    memory = json.loads(exported[1])
    memory["memory"]["access_count"] = 2**53 - 1
    lines = [exported[0], json.dumps(memory).encode(), *exported[2:]]
    imported = http.post("/v1/import", params={"namespace": "counted"}, content=b"\n".join(lines))
    assert imported.status_code == 200, imported.text
    for _ in range(2):  # reinforced twice past the largest count: it stays there
        recalled = http.post("/v1/memory/recall", json={"namespace": "counted", "query": "sheep"})
        assert recalled.status_code == 200 and recalled.json()["memories"], recalled.text
    memory_id = recalled.json()["memories"][0]["memory_id"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the recalls' reinforcement is written in the background
        got = http.get(f"/v1/memory/{memory_id}", params={"namespace": "counted"}).json()
        if got["last_accessed_at"] != memory["memory"]["last_accessed_at"]:
            break
        time.sleep(0.05)
    assert got["access_count"] == 2**53 - 1 and isinstance(got["access_count"], int), got
    again = http.get("/v1/export", params={"namespace": "counted"})
    back = http.post("/v1/import", params={"namespace": "counted-again"}, content=again.content)
    assert back.status_code == 200, back.text


def test_a_twinmem_export_line_that_is_not_utf8_is_reported_on_its_line(http: httpx.Client, kept: str) -> None:
    exported = http.get("/v1/export", params={"namespace": "default"}).content.splitlines()
    (at,) = [n for n, line in enumerate(exported) if b"The user keeps bees" in line]
    exported[at] = exported[at].replace(b"The user keeps bees", b"The user keeps b\xe9es")
    response = http.post("/v1/import", params={"namespace": "latin"}, content=b"\n".join(exported))
    report = _refused(response, 422, "nothing was imported")["report"]
    assert [e["line"] for e in report["errors"]] == [at + 1]
    assert report["errors"][0]["error"].startswith("not valid UTF-8 (byte 0xe9 at offset "), report
    assert http.get("/v1/memories", params={"namespace": "latin"}).json()["memories"] == []
    _still_there(http, kept)


def test_a_namespace_beside_namespaces_must_be_one_of_them(http: httpx.Client) -> None:
    _refused(http.post("/v1/memory/recall", json={"query": "bees", "namespace": "a", "namespaces": ["b"]}), 422, "'a'")
    _refused(http.post("/v1/memory/recall", json={"query": "bees", "namespaces": []}), 422, "at least one")
    both = http.post("/v1/memory/recall", json={"query": "bees", "namespace": "default", "namespaces": ["default"]})
    assert both.status_code == 200 and both.json()["memories"], both.text


@pytest.mark.parametrize("path", ["/v1/memory/save", "/v1/memory/recall", "/v1/memory/save_batch"])
def test_a_request_without_its_body_says_so(http: httpx.Client, path: str) -> None:
    _refused(http.post(path, headers={"content-type": "application/json"}), 422, "the request has no body")


@pytest.mark.parametrize("key", ["", "k" * 201])
def test_a_key_holds_1_to_200_characters_on_save_batch_and_patch(http: httpx.Client, kept: str, key: str) -> None:
    # An empty key tied unrelated memories together (the second superseded the first), and
    # a long one set by PATCH made the namespace's export fail to import.
    _refused(http.post("/v1/memory/save", json={"content": "The office wifi rotates", "key": key}), 422, "key")
    batch = {"memories": [{"content": "Bob likes cats", "key": key}]}
    _refused(http.post("/v1/memory/save_batch", json=batch), 422, "key")
    _refused(http.patch(f"/v1/memory/{kept}", json={"key": key}), 422, "key")
    _still_there(http, kept)


# --- H: a CSV field longer than the csv module reads ----------------------------------------


@pytest.mark.parametrize("column", ["content", "note"])
def test_a_csv_field_over_the_readers_limit_is_a_422_on_its_line(http: httpx.Client, kept: str, column: str) -> None:
    """Python's csv reader refuses a field over 131,072 characters with ``csv.Error``,
    which came out as a 500 and named no line."""
    huge = "y" * 200_000
    row = f"{huge},x" if column == "content" else f"fine,{huge}"
    data = f"content,note\nfirst,ok\n{row}\n".encode()
    response = http.post("/v1/import", params={"format": "csv", "namespace": "imports"}, content=data)
    report = _refused(response, 422, "nothing was imported")["report"]
    assert [e["line"] for e in report["errors"]] == [3], report
    assert "CSV" in report["errors"][0]["error"], report
    assert http.get("/v1/memories", params={"namespace": "imports"}).json()["memories"] == []
    _still_there(http, kept)
