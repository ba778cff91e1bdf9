"""One contract suite over every SessionStore: the embedded SQLite file and a real Redis.

Time is frozen: every call gets ``now`` from the test's clock, so expiry is exact.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.adapters.session_redis import RedisSessionStore
from engine.adapters.session_sqlite import _SCHEMA, SqliteSessionStore
from engine.ports import SessionStore
from engine.session_records import Candidate, Message, Role, SessionInfo, SessionRef, SessionState
from tests.conftest import EPOCH
from tests.redis_server import RedisServer

REF = SessionRef("user:1", "planner", "chat-1")
DEFAULT_MAX_TOKENS, DEFAULT_TTL = 4096, 3600.0


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    made: SessionStore
    if request.param == "sqlite":
        made = SqliteSessionStore(tmp_path / "sessions.sqlite3")
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        made = RedisSessionStore(server.url, prefix=f"t{uuid.uuid4().hex[:6]}", keep_seconds=86400)
    made.open()
    yield made
    made.close()


def msg(text: str, tokens: int, at: datetime = EPOCH, role: Role = Role.USER) -> Message:
    return Message(role, text, at, tokens, metadata={"n": text})


def append(
    store: SessionStore,
    messages: list[Message],
    *,
    now: datetime = EPOCH,
    ref: SessionRef = REF,
    ttl: float | None = 60,
    max_tokens: int | None = 100,
    candidates: tuple[Candidate, ...] = (),
) -> str:
    return append_info(
        store, messages, now=now, ref=ref, ttl=ttl, max_tokens=max_tokens, candidates=candidates
    ).generation


def append_info(
    store: SessionStore,
    messages: list[Message],
    *,
    now: datetime = EPOCH,
    ref: SessionRef = REF,
    ttl: float | None = 60,
    max_tokens: int | None = 100,
    candidates: tuple[Candidate, ...] = (),
) -> SessionInfo:
    return store.append(
        ref,
        messages,
        candidates,
        now=now,
        expire_after_seconds=ttl,
        max_tokens=max_tokens,
        default_expire_after_seconds=DEFAULT_TTL,
        default_max_tokens=DEFAULT_MAX_TOKENS,
        reach="member",
        visibility="shared",
        new_generation=uuid.uuid4().hex,
    )


def test_health_is_ok_while_the_backend_answers_and_says_when_closed(store: SessionStore) -> None:
    assert store.health() == "ok"
    store.close()
    assert store.health() == "closed"
    store.open()
    assert store.health() == "ok"


def test_append_then_read_the_window_in_order(store: SessionStore) -> None:
    gen = append(store, [msg("a", 3), msg("b", 4)])
    again = append(store, [msg("c", 5, role=Role.ASSISTANT)], now=EPOCH + timedelta(seconds=1))
    assert again == gen
    found = store.window(REF, EPOCH + timedelta(seconds=2))
    assert found is not None
    info, messages = found
    assert [m.content for m in messages] == ["a", "b", "c"]
    assert messages[2].role is Role.ASSISTANT and messages[0].metadata == {"n": "a"}
    assert (info.tokens, info.messages, info.appended, info.state) == (12, 3, 3, SessionState.OPEN)
    assert info.ref == REF and info.reach == "member" and info.visibility == "shared"


def test_the_oldest_messages_roll_out_past_the_token_budget(store: SessionStore) -> None:
    append(store, [msg(str(n), 30) for n in range(5)], max_tokens=100)
    found = store.window(REF, EPOCH)
    assert found is not None
    assert [m.content for m in found[1]] == ["2", "3", "4"]
    assert found[0].tokens == 90 and found[0].appended == 5


def test_one_message_over_the_budget_stays_alone(store: SessionStore) -> None:
    append(store, [msg("small", 10), msg("huge", 500)], max_tokens=100)
    found = store.window(REF, EPOCH)
    assert found is not None and [m.content for m in found[1]] == ["huge"]


def test_settings_not_given_are_the_sessions_own_and_the_defaults_only_for_a_new_one(store: SessionStore) -> None:
    # Decided inside the append's atomic step: a first append without settings racing one
    # with them (the one with them first) must not reset the session to the defaults.
    first = append_info(store, [msg("a", 30)], ttl=777, max_tokens=50)
    later = append_info(store, [msg("b", 30)], now=EPOCH + timedelta(seconds=10), ttl=None, max_tokens=None)
    assert later.generation == first.generation
    assert (later.max_tokens, later.expire_after_seconds) == (50, 777)
    assert later.expires_at == EPOCH + timedelta(seconds=787)  # its own time to live, refreshed
    assert later.messages == 1 and later.tokens == 30  # its own budget: "a" rolled out
    found = store.window(REF, EPOCH + timedelta(seconds=10))
    assert found is not None and (found[0].max_tokens, found[0].expire_after_seconds) == (50, 777)
    # Given settings replace the session's own; a new generation without any takes the defaults.
    changed = append_info(store, [msg("c", 1)], now=EPOCH + timedelta(seconds=20), ttl=None, max_tokens=200)
    assert (changed.max_tokens, changed.expire_after_seconds) == (200, 777)
    fresh = append_info(store, [msg("d", 1)], now=EPOCH + timedelta(hours=1), ttl=None, max_tokens=None)
    assert fresh.generation != first.generation
    assert (fresh.max_tokens, fresh.expire_after_seconds) == (DEFAULT_MAX_TOKENS, DEFAULT_TTL)
    other = append_info(store, [msg("e", 1)], ref=SessionRef("user:1", "planner", "chat-2"), ttl=None, max_tokens=None)
    assert (other.max_tokens, other.expire_after_seconds) == (DEFAULT_MAX_TOKENS, DEFAULT_TTL)


def test_expiry_with_frozen_time_and_ttl_refreshed_on_write(store: SessionStore) -> None:
    gen = append(store, [msg("a", 1)], ttl=60)
    assert store.window(REF, EPOCH + timedelta(seconds=59)) is not None
    append(store, [msg("b", 1)], now=EPOCH + timedelta(seconds=50), ttl=60)  # refreshed: now due at 110 s
    assert store.window(REF, EPOCH + timedelta(seconds=100)) is not None
    assert store.due(EPOCH + timedelta(seconds=100), 10) == []
    assert store.window(REF, EPOCH + timedelta(seconds=110)) is None
    assert store.sessions(REF.namespace, None, EPOCH + timedelta(seconds=110)) == []
    assert store.due(EPOCH + timedelta(seconds=110), 10) == [gen]


def test_an_append_after_expiry_starts_a_new_generation_and_keeps_the_old_for_promotion(store: SessionStore) -> None:
    cand = Candidate("I live in Lyon", "fact", "self", EPOCH)
    old = append(store, [msg("old", 1)], ttl=10, candidates=(cand,))
    later = EPOCH + timedelta(seconds=20)
    new = append(store, [msg("new", 1)], now=later, ttl=10)
    assert new != old
    found = store.window(REF, later)
    assert found is not None and [m.content for m in found[1]] == ["new"]
    assert store.due(later, 10) == [old]
    claimed = store.claim(old, later, 300)
    assert claimed is not None and claimed.candidates == (cand,)


def test_close_claims_it_at_once_and_the_next_append_opens_another(store: SessionStore) -> None:
    cands = (Candidate("a", "fact", "self", EPOCH),)
    gen = append(store, [msg("a", 1)], candidates=cands)
    claimed = store.close_session(REF, EPOCH, 300)
    assert claimed is not None and claimed.info.generation == gen and claimed.candidates == cands
    assert claimed.info.state is SessionState.PROMOTING
    assert store.window(REF, EPOCH) is None
    assert store.close_session(REF, EPOCH, 300) is None
    assert store.due(EPOCH, 10) == [] and store.claim(gen, EPOCH, 300) is None  # the closer holds it, no sweep
    assert store.due(EPOCH + timedelta(seconds=300), 10) == [gen]  # a closer that died: swept once stale
    # The sweep that takes it knows it was closed, not expired: its entry said "expired".
    assert claimed.info.closed_at == EPOCH
    again = store.claim(gen, EPOCH + timedelta(seconds=300), 300)
    assert again is not None and again.info.closed_at == EPOCH
    assert append(store, [msg("b", 1)]) != gen


def test_a_redis_append_answers_from_its_own_script_while_another_process_closes_the_session(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_server.flush()
    prefix = f"t{uuid.uuid4().hex[:6]}"
    mine, other = (RedisSessionStore(redis_server.url, prefix=prefix, keep_seconds=86400) for _ in range(2))
    mine.open()
    other.open()
    run = mine._run

    def closed_and_promoted_elsewhere_after(script: str, *args: Any) -> Any:
        found = run(script, *args)
        if script == "append":  # another process closes the session and finishes its promotion now
            claimed = other.close_session(REF, EPOCH, 300)
            assert claimed is not None
            other.finish(claimed.info.generation)
        return found

    monkeypatch.setattr(mine, "_run", closed_and_promoted_elsewhere_after)
    try:
        info = mine.append(
            REF,
            [msg("a", 1), msg("b", 2)],
            (),
            now=EPOCH,
            expire_after_seconds=60,
            max_tokens=100,
            default_expire_after_seconds=DEFAULT_TTL,
            default_max_tokens=DEFAULT_MAX_TOKENS,
            reach="member",
            visibility="shared",
            new_generation="g-1",
        )
        # The answer is what the append wrote, though the generation is gone by now.
        assert (info.generation, info.messages, info.tokens, info.state) == ("g-1", 2, 3, SessionState.OPEN)
        assert mine.sessions(REF.namespace, None, EPOCH) == []
    finally:
        mine.close()
        other.close()


def test_claim_is_taken_once_goes_stale_and_finish_forgets(store: SessionStore) -> None:
    cands = (
        Candidate("a", "fact", "self", EPOCH),
        Candidate("b", "task", "commitment", EPOCH, said="remember b", visibility="private", speaker="Ana"),
    )
    gen = append(store, [msg("x", 1), msg("y", 1)], candidates=cands, ttl=10)
    assert store.claim(gen, EPOCH, 300) is None  # not due yet
    at = EPOCH + timedelta(seconds=10)
    claimed = store.claim(gen, at, 300)
    assert claimed is not None and claimed.info.closed_at is None  # expired, not closed
    assert claimed.candidates == cands and claimed.info.appended == 2 and claimed.info.state is SessionState.PROMOTING
    assert store.claim(gen, at, 300) is None  # someone holds it
    assert store.due(at + timedelta(seconds=299), 10) == []
    stale = at + timedelta(seconds=300)
    assert store.due(stale, 10) == [gen]
    assert store.claim(gen, stale, 300) is not None  # the first promoter died: taken again
    store.finish(gen)
    assert store.due(stale + timedelta(days=1), 10) == []
    assert store.claim(gen, stale + timedelta(days=1), 300) is None


def test_a_claim_found_on_opening_the_embedded_file_is_due_at_once(store: SessionStore) -> None:
    if isinstance(store, RedisSessionStore):
        pytest.skip("Redis is shared by live processes: a claim found on opening may be a live one's")
    cands = (Candidate("a", "fact", "self", EPOCH),)
    gen = append(store, [msg("a", 1)], candidates=cands)
    assert store.close_session(REF, EPOCH, 300) is not None  # and the closing process dies
    assert store.due(EPOCH + timedelta(seconds=1), 10) == []
    store.close()
    store.open()  # the next process to hold the data directory
    assert store.due(EPOCH + timedelta(seconds=1), 10) == [gen]
    again = store.claim(gen, EPOCH + timedelta(seconds=1), 300)
    assert again is not None and again.candidates == cands
    store.close()
    store.open()
    assert store.claim(gen, EPOCH + timedelta(seconds=2), 300) is not None  # taken again: it never finished


def test_an_embedded_file_of_a_release_before_closes_were_recorded_opens_and_records_them(tmp_path: Path) -> None:
    # Its generations table has no closed_ms column: opened, it gets one; what it holds
    # reads as not closed, and a close now is recorded.
    path = tmp_path / "sessions.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(_SCHEMA.replace(",\n    closed_ms INTEGER", ""))
    db.close()
    store = SqliteSessionStore(path)
    store.open()
    try:
        gen = append(store, [msg("a", 1)])
        claimed = store.close_session(REF, EPOCH, 300)
        assert claimed is not None and claimed.info.generation == gen and claimed.info.closed_at == EPOCH
    finally:
        store.close()
    store.open()  # and again, with the column there
    store.close()


def test_sessions_are_per_agent_and_listed_per_namespace(store: SessionStore) -> None:
    mine = SessionRef("user:1", "planner", "s")
    theirs = SessionRef("user:1", "critic", "s")
    elsewhere = SessionRef("user:2", "planner", "s")
    append(store, [msg("planner's", 1)], ref=mine)
    append(store, [msg("critic's", 1)], ref=theirs, now=EPOCH + timedelta(seconds=1))
    append(store, [msg("other ns", 1)], ref=elsewhere)
    found = store.window(theirs, EPOCH + timedelta(seconds=1))
    assert found is not None and [m.content for m in found[1]] == ["critic's"]
    now = EPOCH + timedelta(seconds=2)
    assert [i.ref.agent for i in store.sessions("user:1", None, now)] == ["planner", "critic"]
    assert [i.ref for i in store.sessions("user:1", "critic", now)] == [theirs]
    assert [i.ref for i in store.sessions("user:2", None, now)] == [elsewhere]


def test_sessions_are_listed_a_page_at_a_time_after_where_the_last_page_ended(store: SessionStore) -> None:
    # Two at each of three moments (ties broken by generation id), one of another agent,
    # one expired: a page of 2 at a time walks every open one once, in order.
    for n in range(6):
        agent = "critic" if n == 3 else "planner"
        ttl = 1 if n == 4 else 600
        append(
            store,
            [msg(f"m{n}", 1)],
            ref=SessionRef("user:1", agent, f"s{n}"),
            now=EPOCH + timedelta(seconds=n // 2),
            ttl=ttl,
        )
    now = EPOCH + timedelta(seconds=10)
    every = store.sessions("user:1", None, now)
    assert sorted(i.ref.session_id for i in every) == ["s0", "s1", "s2", "s3", "s5"]
    assert [(i.created_at, i.generation) for i in every] == sorted((i.created_at, i.generation) for i in every)
    walked: list[SessionInfo] = []
    after = None
    while True:
        page = store.sessions("user:1", None, now, limit=2, after=after)
        assert len(page) <= 2
        walked += page
        if len(page) < 2:
            break
        after = (page[-1].created_at, page[-1].generation)
    assert walked == every
    assert store.sessions("user:1", None, now, limit=10, after=(every[-1].created_at, every[-1].generation)) == []
    assert store.sessions("user:1", None, now, limit=1) == every[:1]
    # The agent filter and the position together.
    mine = store.sessions("user:1", "planner", now)
    assert [i.ref.session_id for i in mine] == [i.ref.session_id for i in every if i.ref.agent == "planner"]
    rest = store.sessions("user:1", "planner", now, limit=10, after=(mine[0].created_at, mine[0].generation))
    assert rest == mine[1:]


def test_unicode_content_and_ids_round_trip(store: SessionStore) -> None:
    ref = SessionRef("用户:1", "代理", "会话-1")
    append(store, [msg("我叫小明，我喜欢蓝色。", 11)], ref=ref)
    found = store.window(ref, EPOCH)
    assert found is not None and found[1][0].content == "我叫小明，我喜欢蓝色。" and found[0].ref == ref
