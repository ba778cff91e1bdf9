"""The ``SecurityStore`` contract, for every adapter: the SQLite file of a data directory,
the graph on ArcadeDB's Bolt endpoint, and a real Neo4j when one is reachable.

The shared-state tests open two stores on the same backing data, as two processes
(the CLI and a server, or two replicas) do: what one writes, the other enforces.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.adapters.neo4j_security_store import Neo4jSecurityStore
from engine.adapters.security_store import SECURITY_FILE, SqliteSecurityStore
from engine.errors import InvalidInput
from engine.ports import SecurityStore
from engine.security import (
    AuditEvent,
    AuditQuery,
    Block,
    BlockKind,
    Permission,
    TokenRecord,
    hash_token,
    parse_grant,
    verify_chain,
)
from tests.bolt import BoltTarget

AT = datetime(2025, 1, 1, tzinfo=UTC)

SecurityFactory = Callable[[], SecurityStore]


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> SecurityFactory:
    return lambda: SqliteSecurityStore(tmp_path / SECURITY_FILE)


def _bolt(fixture: str) -> Callable[[pytest.FixtureRequest, Path], SecurityFactory]:
    """Neo4jSecurityStore on a fresh database of a Bolt server fixture (which skips when it
    cannot run); no answer is remembered (cache 0), so a change is seen on the next call."""

    def factory(request: pytest.FixtureRequest, tmp_path: Path) -> SecurityFactory:
        target: BoltTarget = request.getfixturevalue(fixture)
        database = target.new_database()
        return lambda: Neo4jSecurityStore(
            target.uri, user=target.user, password=target.password, database=database, cache_seconds=0
        )

    return factory


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], SecurityFactory]] = {
    "sqlite": _sqlite,
    "arcadedb": _bolt("arcadedb"),
    "neo4j": _bolt("neo4j_server"),
}


@pytest.fixture(params=sorted(BACKENDS))
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SecurityFactory]:
    """Opens a store over this test's backing data (one file, one database) on every call."""
    new = BACKENDS[request.param](request, tmp_path)
    opened: list[SecurityStore] = []

    def make() -> SecurityStore:
        store = new()
        store.open()
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def security(factory: SecurityFactory) -> SecurityStore:
    return factory()


def _token(token_id: str, agent: str, *grants: str, at: datetime = AT) -> TokenRecord:
    return TokenRecord(token_id, agent, tuple(parse_grant(g) for g in grants), at)


def _event(n: int, actor: str = "alice", action: str = "save", namespace: str = "user:1") -> AuditEvent:
    return AuditEvent(actor, action, "ok", AT + timedelta(minutes=n), f"req-{n}", (namespace,), (f"m{n}",), "ab" * 32)


# --- tokens ------------------------------------------------------------------------------


def test_a_live_token_names_its_agent_and_grants(security: SecurityStore) -> None:
    security.add_token(_token("t1", "alice", "user:*:rw", "team:blue:r"), hash_token("secret-1"))
    principal = security.principal_for(hash_token("secret-1"))
    assert principal is not None
    assert (principal.agent, principal.token_id) == ("alice", "t1")
    assert principal.may("user:42", Permission.WRITE) and principal.may("team:blue", Permission.READ)
    assert not principal.may("team:blue", Permission.WRITE) and not principal.may("team:red", Permission.READ)
    assert security.principal_for(hash_token("another")) is None


def test_a_token_stored_with_a_grant_no_namespace_could_match_keeps_its_other_grants(security: SecurityStore) -> None:
    # Such grants are refused when a token is made now (``parse_grant(new=True)``); one
    # stored before that rule must not lock its token, or the token list, out.
    with pytest.raises(InvalidInput):
        parse_grant("team a:r", new=True)
    security.add_token(_token("t1", "alice", "notes:r", "team a:r"), hash_token("secret-1"))
    principal = security.principal_for(hash_token("secret-1"))
    assert principal is not None and principal.may("notes", Permission.READ)
    assert not principal.may("team", Permission.READ)
    assert [record.token_id for record in security.tokens()] == ["t1"]


def test_tokens_are_listed_oldest_first_revoked_ones_included(security: SecurityStore) -> None:
    security.add_token(_token("t2", "bob", "*:r", at=AT + timedelta(seconds=1)), hash_token("b"))
    security.add_token(_token("t1", "alice", "*:a"), hash_token("a"))
    assert security.revoke("t2", AT + timedelta(minutes=1))
    listed = security.tokens()
    assert [(t.token_id, t.agent) for t in listed] == [("t1", "alice"), ("t2", "bob")]
    assert listed[0].revoked_at is None and listed[1].revoked_at == AT + timedelta(minutes=1)
    assert [str(g) for g in listed[0].grants] == ["*:a"]


def test_a_revoked_token_is_refused_and_revoking_twice_says_so(security: SecurityStore) -> None:
    security.add_token(_token("t1", "alice", "*:rw"), hash_token("a"))
    assert security.revoke("t1", AT)
    assert security.principal_for(hash_token("a")) is None
    assert not security.revoke("t1", AT)
    assert not security.revoke("no-such-token", AT)


def test_storing_a_token_again_updates_its_grants_but_never_unrevokes_it(security: SecurityStore) -> None:
    security.add_token(_token("cfg-1", "alice", "user:1:r"), hash_token("a"))
    security.add_token(_token("cfg-1", "alice2", "user:*:rw"), hash_token("a"))
    principal = security.principal_for(hash_token("a"))
    assert principal is not None and principal.agent == "alice2" and principal.may("user:9", Permission.WRITE)
    assert len(security.tokens()) == 1
    assert security.revoke("cfg-1", AT)
    security.add_token(_token("cfg-1", "alice2", "user:*:rw"), hash_token("a"))
    assert security.principal_for(hash_token("a")) is None


# --- blocked sources ---------------------------------------------------------------------


def test_blocks_are_recorded_enforced_listed_and_lifted(security: SecurityStore) -> None:
    assert not security.is_blocked("mallory", None)
    assert security.block(Block(BlockKind.AGENT, "mallory", "root", AT, "planted instructions"))
    assert not security.block(Block(BlockKind.AGENT, "mallory", "root", AT + timedelta(minutes=1)))
    assert security.block(Block(BlockKind.SESSION, "s-9", "root", AT + timedelta(minutes=2)))
    assert security.is_blocked("mallory", None) and security.is_blocked(None, "s-9")
    assert security.is_blocked("alice", "s-9") and security.is_blocked("mallory", "s-1")
    assert not security.is_blocked("alice", "s-1") and not security.is_blocked(None, None)
    # An agent and a session of the same name are different sources.
    assert not security.is_blocked(None, "mallory") and not security.is_blocked("s-9", None)
    assert [(b.kind, b.value, b.blocked_by, b.reason) for b in security.blocks()] == [
        (BlockKind.AGENT, "mallory", "root", "planted instructions"),
        (BlockKind.SESSION, "s-9", "root", None),
    ]
    assert security.unblock(BlockKind.AGENT, "mallory")
    assert not security.unblock(BlockKind.AGENT, "mallory")
    assert not security.is_blocked("mallory", None)
    assert [b.value for b in security.blocks()] == ["s-9"]


# --- the audit chain ---------------------------------------------------------------------


def test_audit_entries_chain_verify_and_filter(security: SecurityStore) -> None:
    rows = [security.append_audit(_event(n, actor="alice" if n % 2 else "bob")) for n in range(1, 6)]
    assert [row.seq for row in rows] == [1, 2, 3, 4, 5]
    assert all(later.prev_hash == earlier.hash for earlier, later in itertools.pairwise(rows))
    report = verify_chain(security.audit_rows())
    assert report.ok and report.entries == 5 and report.head == rows[-1].hash
    assert list(security.audit_rows()) == rows
    assert [row.seq for row in security.audit(AuditQuery(actor="bob"))] == [4, 2]
    assert [row.seq for row in security.audit(AuditQuery(action="save", limit=2))] == [5, 4]
    assert [row.seq for row in security.audit(AuditQuery(since=AT + timedelta(minutes=4)))] == [5, 4]
    assert [row.seq for row in security.audit(AuditQuery(namespace="user:1", limit=2))] == [5, 4]
    assert security.audit(AuditQuery(namespace="user:2")) == []
    assert security.audit(AuditQuery(actor="carol")) == []
    first = security.audit(AuditQuery(actor="alice"))[-1]
    assert first.entry == {"seq": 1, **_event(1).as_dict()}


def test_audit_entries_after_a_position_oldest_first_with_the_head(security: SecurityStore) -> None:
    empty = security.audit_after(AuditQuery(), 0)
    assert empty.rows == [] and empty.head == 0
    rows = [security.append_audit(_event(n, actor="alice" if n % 2 else "bob")) for n in range(1, 6)]
    page = security.audit_after(AuditQuery(limit=2), 0)
    assert page.rows == rows[:2] and page.head == 5
    assert [row.seq for row in security.audit_after(AuditQuery(limit=2), 2).rows] == [3, 4]
    bobs = security.audit_after(AuditQuery(actor="bob"), 2)
    assert [row.seq for row in bobs.rows] == [4] and bobs.head == 5
    assert security.audit_after(AuditQuery(), 5).rows == []
    assert [row.seq for row in security.audit_after(AuditQuery(since=AT + timedelta(minutes=4)), 0).rows] == [4, 5]
    assert [row.seq for row in security.audit_after(AuditQuery(namespace="user:1"), 3).rows] == [4, 5]
    assert security.audit_after(AuditQuery(), 0).first_kept in (None, 1)


def test_an_empty_audit_log_verifies(security: SecurityStore) -> None:
    report = verify_chain(security.audit_rows())
    assert report.ok and report.entries == 0


# --- two processes over one store ----------------------------------------------------------


def test_what_one_store_changes_the_other_enforces(factory: SecurityFactory) -> None:
    one, two = factory(), factory()
    one.add_token(_token("t1", "alice", "*:rw"), hash_token("a"))
    assert two.principal_for(hash_token("a")) is not None
    assert two.revoke("t1", AT)
    assert one.principal_for(hash_token("a")) is None
    assert one.block(Block(BlockKind.AGENT, "mallory", "root", AT))
    assert two.is_blocked("mallory", None)
    assert two.unblock(BlockKind.AGENT, "mallory")
    assert not one.is_blocked("mallory", None)


def test_appenders_on_two_stores_make_one_chain(factory: SecurityFactory) -> None:
    one, two = factory(), factory()

    def append(n: int) -> int:
        return (one if n % 2 else two).append_audit(_event(n)).seq

    with ThreadPoolExecutor(max_workers=4) as pool:
        seqs = sorted(pool.map(append, range(1, 41)))
    assert seqs == list(range(1, 41))
    for store in (one, two):
        report = verify_chain(store.audit_rows())
        assert report.ok, report.problems
        assert report.entries == 40


def test_stores_racing_to_store_one_token_or_block_one_source_agree(factory: SecurityFactory) -> None:
    stores = [factory() for _ in range(4)]
    seed = _token("cfg-1", "ops", "*:a")

    def start_up(store: SecurityStore) -> bool:
        # What each replica does at start-up (the config's tokens), then an admin's block.
        store.add_token(seed, hash_token("ops-token"))
        return store.block(Block(BlockKind.AGENT, "mallory", "ops", AT))

    with ThreadPoolExecutor(max_workers=4) as pool:
        created = list(pool.map(start_up, stores))
    assert sorted(created) == [False, False, False, True]
    assert [t.token_id for t in stores[0].tokens()] == ["cfg-1"]
    assert all(store.principal_for(hash_token("ops-token")) is not None for store in stores)
    assert [b.value for b in stores[1].blocks()] == ["mallory"]
