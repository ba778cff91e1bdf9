"""Record helpers: the dedup digest, entity names, and the JSON codec."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from engine.codec import from_iso, memory_from_dict, memory_to_dict, to_iso
from engine.records import (
    Memory,
    MemoryPatch,
    Source,
    Status,
    Visibility,
    content_digest,
    entity_keys,
    new_memory_id,
    normalize_entities,
)

T0 = datetime(2025, 1, 1, 8, 30, 15, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    "variant",
    [
        "User likes blue",
        "user likes blue",
        "USER LIKES BLUE",
        "  user   likes\tblue\n",
        "user\u3000likes blue",  # ideographic space
        "ｕｓｅｒ ｌｉｋｅｓ ｂｌｕｅ",  # fullwidth letters, NFKC
    ],
)
def test_content_digest_ignores_case_whitespace_and_compatibility_forms(variant: str) -> None:
    assert content_digest(variant) == content_digest("user likes blue")


def test_content_digest_tells_different_content_apart() -> None:
    assert content_digest("user likes blue") != content_digest("user likes green")
    assert content_digest("userlikes blue") != content_digest("user likes blue")


def test_content_digest_is_a_sha256_hex_string() -> None:
    digest = content_digest("喜欢蓝色")
    assert len(digest) == 64
    int(digest, 16)


def test_ligatures_and_german_sharp_s_fold_to_their_plain_forms() -> None:
    assert content_digest("ﬁle") == content_digest("file")
    assert content_digest("STRASSE") == content_digest("straße")


def test_memory_digest_is_the_digest_of_its_content() -> None:
    m = _memory(content="  Coffee  ")
    assert m.digest == content_digest("coffee")


def test_normalize_entities_trims_collapses_drops_empty_and_dedups_in_order() -> None:
    names = ["  Alice ", "Bob\t Smith", "", "   ", "Alice", "Bob Smith", "Carol"]
    assert normalize_entities(names) == ("Alice", "Bob Smith", "Carol")


def test_normalize_entities_keeps_case_variants_but_entity_keys_compare_them_equal() -> None:
    names = normalize_entities(["Alice", "alice", "ＡＬＩＣＥ"])
    assert names == ("Alice", "alice", "ＡＬＩＣＥ")
    assert entity_keys(names) == frozenset({"alice"})


def test_patch_is_empty_only_when_it_changes_nothing() -> None:
    assert MemoryPatch().is_empty()
    assert not MemoryPatch(content="x").is_empty()
    assert not MemoryPatch(metadata={}).is_empty()
    assert not MemoryPatch(clear_expire_at=True).is_empty()


# --- codec ------------------------------------------------------------------------


def _memory(**fields: object) -> Memory:
    values: dict[str, object] = {
        "memory_id": "0b6b3a8e-5f6e-4a8a-9f55-7f1d2c3b4a5e",
        "namespace": "user:42",
        "content": '喜欢蓝色 and likes "quotes"',
        "category": "preference",
        "base_score": 0.6,
        "importance": 0.7,
        "source": Source.INFERENCE,
        "created_at": T0,
        "updated_at": T0 + timedelta(hours=1),
        "last_accessed_at": T0 + timedelta(days=2),
        "entities": ("蓝色", "Alice"),
        "actor": "agent-7",
        "session_id": "s-1",
        "visibility": Visibility.PRIVATE,
        "access_count": 3,
        "expire_at": T0 + timedelta(days=30),
        "status": Status.SUPERSEDED,
        "embedding_model": "fake-bow",
        "embedding_version": "1",
        "version": 4,
        "key": "favourite-colour",
        "metadata": {"n": 1, "f": 2.5, "flag": True, "none": None, "nested": {"list": [1, "two"]}},
    }
    values.update(fields)
    return Memory(**values)  # type: ignore[arg-type]


def test_codec_round_trips_every_field() -> None:
    original = _memory()
    assert memory_from_dict(memory_to_dict(original)) == original


def test_codec_output_is_plain_json() -> None:
    original = _memory()
    data = json.loads(json.dumps(memory_to_dict(original)))
    assert data["source"] == "inference"
    assert data["status"] == "superseded"
    assert data["visibility"] == "private"
    assert data["entities"] == ["蓝色", "Alice"]
    assert data["created_at"] == "2025-01-01T08:30:15.123456+00:00"
    assert memory_from_dict(data) == original


def test_codec_round_trips_a_memory_without_optional_fields() -> None:
    original = _memory(expire_at=None, actor=None, session_id=None, key=None, metadata={}, entities=())
    data = memory_to_dict(original)
    assert data["expire_at"] is None
    assert memory_from_dict(data) == original


def test_codec_reads_a_minimal_record_with_defaults() -> None:
    data = {
        "memory_id": "m",
        "namespace": "ns",
        "content": "c",
        "category": "fact",
        "importance": 0.5,
        "base_score": 0.5,
        "source": "user_input",
        "created_at": "2025-01-01T00:00:00+00:00",
        "updated_at": "2025-01-01T00:00:00+00:00",
        "last_accessed_at": "2025-01-01T00:00:00+00:00",
    }
    m = memory_from_dict(data)
    assert m.status is Status.ACTIVE
    assert m.visibility is Visibility.SHARED
    assert m.version == 1
    assert m.access_count == 0
    assert m.entities == ()
    assert m.metadata == {}


def test_timestamps_are_written_in_utc_and_sort_in_time_order() -> None:
    tokyo = timezone(timedelta(hours=9))
    local = datetime(2025, 1, 1, 9, 0, tzinfo=tokyo)
    assert to_iso(local) == "2025-01-01T00:00:00.000000+00:00"
    assert from_iso(to_iso(local)) == local
    earlier, later = to_iso(datetime(2025, 1, 1, 23, 59, tzinfo=UTC)), to_iso(datetime(2025, 1, 2, 0, 0, 0, 1, UTC))
    assert earlier < later


def test_naive_timestamps_are_refused_on_write_and_read_as_utc() -> None:
    with pytest.raises(ValueError, match="naive"):
        to_iso(datetime(2025, 1, 1))
    assert from_iso("2025-01-01T00:00:00") == datetime(2025, 1, 1, tzinfo=UTC)


def test_memory_ids_are_version_7_uuids_in_the_order_they_were_made() -> None:
    made = []
    for _ in range(3):
        made += [new_memory_id() for _ in range(200)]
        time.sleep(0.002)  # the next ones fall in a later millisecond
    assert len(set(made)) == len(made)
    parsed = [uuid.UUID(memory_id) for memory_id in made]
    assert all(str(u) == memory_id for u, memory_id in zip(parsed, made, strict=True))
    assert {u.version for u in parsed} == {7} and {u.variant for u in parsed} == {uuid.RFC_4122}
    # The first 48 bits are the millisecond: within a few seconds of now, never going back.
    stamps = [u.int >> 80 for u in parsed]
    assert abs(stamps[-1] - time.time_ns() // 1_000_000) < 5_000 and stamps == sorted(stamps)
    # As strings too: each millisecond's ids sort after every earlier one's.
    assert max(made[:200]) < min(made[200:400]) and max(made[200:400]) < min(made[400:])
