"""Neo4jSecurityStore beyond the shared contract: how stale a replica's answers may be.

Two stores over one ArcadeDB database stand for two replicas. Time is a counter the
test moves (the stores' monotonic clock), so the bound is checked exactly, not raced.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from engine.adapters import neo4j_security_store
from engine.adapters.neo4j_security_store import Neo4jSecurityStore, Recent
from engine.security import AuditEvent, Block, BlockKind, TokenRecord, hash_token, parse_grant, verify_chain
from tests.bolt import BoltTarget

AT = datetime(2025, 1, 1, tzinfo=UTC)
CACHE_S = 5.0


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def replicas(arcadedb: BoltTarget) -> Iterator[tuple[Neo4jSecurityStore, Neo4jSecurityStore, Ticks]]:
    database = arcadedb.new_database()
    ticks = Ticks()
    pair = [
        Neo4jSecurityStore(
            arcadedb.uri,
            user=arcadedb.user,
            password=arcadedb.password,
            database=database,
            cache_seconds=CACHE_S,
            monotonic=ticks,
        )
        for _ in range(2)
    ]
    for store in pair:
        store.open()
    yield pair[0], pair[1], ticks
    for store in pair:
        store.close()


def test_a_revoke_on_one_replica_is_refused_on_the_other_within_the_cache_bound(
    replicas: tuple[Neo4jSecurityStore, Neo4jSecurityStore, Ticks],
) -> None:
    one, two, ticks = replicas
    one.add_token(TokenRecord("t1", "alice", (parse_grant("*:rw"),), AT), hash_token("a"))
    assert two.principal_for(hash_token("a")) is not None  # remembered by two from now
    assert one.revoke("t1", AT)
    assert one.principal_for(hash_token("a")) is None  # at once where it was revoked
    ticks.now += CACHE_S - 0.01
    assert two.principal_for(hash_token("a")) is not None  # two may still answer from memory...
    ticks.now += 0.01
    assert two.principal_for(hash_token("a")) is None  # ...but never past the bound


def test_a_token_created_on_one_replica_works_on_the_other_at_once(
    replicas: tuple[Neo4jSecurityStore, Neo4jSecurityStore, Ticks],
) -> None:
    one, two, _ = replicas
    assert two.principal_for(hash_token("a")) is None  # an unknown token is never remembered
    one.add_token(TokenRecord("t1", "alice", (parse_grant("*:rw"),), AT), hash_token("a"))
    assert two.principal_for(hash_token("a")) is not None


def test_a_block_on_one_replica_holds_on_the_other_within_the_cache_bound(
    replicas: tuple[Neo4jSecurityStore, Neo4jSecurityStore, Ticks],
) -> None:
    one, two, ticks = replicas
    assert not two.is_blocked("mallory", "s-1")
    assert one.block(Block(BlockKind.AGENT, "mallory", "root", AT))
    assert one.is_blocked("mallory", "s-1")
    ticks.now += CACHE_S
    assert two.is_blocked("mallory", "s-1")
    assert two.unblock(BlockKind.AGENT, "mallory")
    assert not two.is_blocked("mallory", "s-1")  # lifted at once where it was lifted
    ticks.now += CACHE_S
    assert not one.is_blocked("mallory", "s-1")


def test_an_answer_read_before_a_change_here_is_not_remembered_after_it() -> None:
    ticks = Ticks()
    recent: Recent[str, bool] = Recent(CACHE_S, ticks)
    stamp = recent.stamp()  # a check begins reading...
    recent.clear()  # ...a revoke through this store lands meanwhile...
    recent.put("key", True, stamp)  # ...and the check's answer, read before it, is dropped
    assert recent.get("key") == (False, None)
    recent.put("key", True, recent.stamp())
    assert recent.get("key") == (True, True)
    ticks.now += CACHE_S
    assert recent.get("key") == (False, None)


def test_zero_seconds_remembers_nothing() -> None:
    recent: Recent[str, bool] = Recent(0, Ticks())
    recent.put("key", True, recent.stamp())
    assert recent.get("key") == (False, None)


def test_verification_walks_the_chain_page_by_page(
    replicas: tuple[Neo4jSecurityStore, Neo4jSecurityStore, Ticks], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two, _ = replicas
    monkeypatch.setattr(neo4j_security_store, "_AUDIT_PAGE", 3)
    for n in range(7):
        (one if n % 2 else two).append_audit(AuditEvent("alice", "save", "ok", AT, f"req-{n}", ("user:1",)))
    rows = list(one.audit_rows())
    assert [row.seq for row in rows] == list(range(1, 8))
    report = verify_chain(rows)
    assert report.ok and report.entries == 7
