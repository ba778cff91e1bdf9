"""Tokens, grants and the hash-chained audit log, on a real SQLite file.

Tampering is done the way an attacker with the file would: by editing the SQLite
database directly, then running ``twinmem audit verify`` on it.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from api.cli import main
from engine.adapters import open_security
from engine.adapters.security_store import ARCHIVE_DIR, SECURITY_FILE, SqliteSecurityStore
from engine.adapters.session_sqlite import SqliteSessionStore
from engine.adapters.sqlite_store import SqliteStore
from engine.config import load_config
from engine.errors import ConfigError, InvalidInput, StoreError
from engine.security import (
    AuditEvent,
    AuditQuery,
    Block,
    BlockKind,
    Permission,
    TokenRecord,
    chain_hash,
    check_bind,
    hash_token,
    parse_grant,
    verify_chain,
)

AT = datetime(2025, 1, 1, tzinfo=UTC)


def test_grants_match_exact_names_and_prefixes_and_admin_implies_read_and_write() -> None:
    users = parse_grant("user:*:rw")
    assert users.covers("user:42") and not users.covers("team:1") and not users.covers("user")
    exact = parse_grant("team:blue:r")
    assert exact.pattern == "team:blue" and exact.covers("team:blue") and not exact.covers("team:blue2")
    assert exact.allows(Permission.READ) and not exact.allows(Permission.WRITE)
    admin = parse_grant("*:a")
    assert admin.covers("anything") and admin.allows(Permission.WRITE) and admin.allows(Permission.READ)
    for bad in ("user", "user:", ":rw", "user:rx", "us*er:r"):
        with pytest.raises(InvalidInput):
            parse_grant(bad)


def test_local_mode_refuses_a_non_loopback_address() -> None:
    check_bind("local", "127.0.0.1")
    check_bind("local", "::1")
    check_bind("tokens", "0.0.0.0")
    with pytest.raises(ConfigError, match="loopback"):
        check_bind("local", "0.0.0.0")


def test_serve_refuses_local_mode_on_a_public_address(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)]) == 2
    assert "loopback" in capsys.readouterr().err


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteSecurityStore]:
    security = SqliteSecurityStore(tmp_path / SECURITY_FILE)
    security.open()
    yield security
    security.close()


def _event(n: int, actor: str = "alice", action: str = "save", namespace: str = "user:1") -> AuditEvent:
    return AuditEvent(actor, action, "ok", AT.replace(minute=n), f"req-{n}", (namespace,), (f"m{n}",), "ab" * 32)


def test_audit_entries_chain_and_filter(store: SqliteSecurityStore) -> None:
    rows = [store.append_audit(_event(n, actor="alice" if n % 2 else "bob")) for n in range(1, 6)]
    assert [row.seq for row in rows] == [1, 2, 3, 4, 5]
    assert all(later.prev_hash == earlier.hash for earlier, later in itertools.pairwise(rows))
    report = verify_chain(store.audit_rows())
    assert report.ok and report.entries == 5 and report.head == rows[-1].hash
    assert [row.seq for row in store.audit(AuditQuery(actor="bob"))] == [4, 2]
    assert [row.seq for row in store.audit(AuditQuery(since=AT.replace(minute=4)))] == [5, 4]
    assert [row.seq for row in store.audit(AuditQuery(namespace="user:1", limit=2))] == [5, 4]
    assert store.audit(AuditQuery(namespace="user:2")) == []


@pytest.fixture
def logged(tmp_path: Path) -> Path:
    """A data directory whose audit log holds five entries, and a verify that passes."""
    config = load_config(env={}, data_dir=str(tmp_path))
    security = open_security(config)
    for n in range(1, 6):
        security.append_audit(_event(n))
    security.close()
    assert main(["audit", "verify", "--data-dir", str(tmp_path)]) == 0
    return tmp_path / SECURITY_FILE


def _tamper(path: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    with sqlite3.connect(path) as db:
        for sql, params in statements:
            db.execute(sql, params)


def _verify(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["audit", "verify", "--data-dir", str(path.parent)]) == 1
    return capsys.readouterr().err


def test_verify_detects_an_edited_entry(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with sqlite3.connect(logged) as db:
        entry = json.loads(db.execute("SELECT entry FROM audit WHERE seq = 3").fetchone()[0])
    entry["actor"] = "mallory"
    _tamper(logged, ("UPDATE audit SET entry = ? WHERE seq = 3", (json.dumps(entry),)))
    err = _verify(logged, capsys)
    assert "entry 3" in err and "edited" in err


def test_verify_detects_an_edit_whose_own_hash_was_recomputed(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with sqlite3.connect(logged) as db:
        entry_text, prev = db.execute("SELECT entry, prev_hash FROM audit WHERE seq = 2").fetchone()
    entry = json.loads(entry_text)
    entry["outcome"] = "denied"
    _tamper(
        logged,
        ("UPDATE audit SET entry = ?, hash = ? WHERE seq = 2", (json.dumps(entry), chain_hash(prev, entry))),
    )
    assert "entry 3" in _verify(logged, capsys)


def test_verify_detects_a_removed_entry(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tamper(
        logged,
        ("DELETE FROM audit_namespaces WHERE seq = 2", ()),
        ("DELETE FROM audit WHERE seq = 2", ()),
    )
    assert "entry 3" in _verify(logged, capsys)


def test_verify_detects_reordered_entries(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Swap rows 2 and 4 whole (entry and hashes), as moving them would.
    _tamper(
        logged,
        ("PRAGMA foreign_keys = OFF", ()),
        ("UPDATE audit SET seq = -2 WHERE seq = 2", ()),
        ("UPDATE audit SET seq = 2 WHERE seq = 4", ()),
        ("UPDATE audit SET seq = 4 WHERE seq = -2", ()),
    )
    assert "entry 2" in _verify(logged, capsys)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit SET actor = 'nobody' WHERE seq = 2",
        "UPDATE audit SET action = 'read' WHERE seq = 2",
        "UPDATE audit SET at = '2020-01-01T00:00:00+00:00' WHERE seq = 2",
        "DELETE FROM audit_namespaces WHERE seq = 2",
        "UPDATE audit_namespaces SET namespace = 'user:9' WHERE seq = 2",
    ],
)
def test_verify_detects_an_edit_of_the_columns_the_audit_api_filters_on(
    logged: Path, capsys: pytest.CaptureFixture[str], statement: str
) -> None:
    """``GET /v1/admin/audit?actor=&action=&namespace=&since=`` filters on columns kept beside
    each hashed entry; one edited there hides the entry from such a listing, so verification
    checks them against the entry too."""
    _tamper(logged, (statement, ()))
    assert "entry 2" in _verify(logged, capsys)


def test_a_cut_off_tail_shows_against_a_noted_head(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    main(["audit", "verify", "--data-dir", str(logged.parent)])
    head = capsys.readouterr().out.split("head ")[1].strip()
    _tamper(logged, ("DELETE FROM audit_namespaces WHERE seq = 5", ()), ("DELETE FROM audit WHERE seq = 5", ()))
    # The chain alone still holds: what remains is a valid, shorter log ...
    assert main(["audit", "verify", "--data-dir", str(logged.parent)]) == 0
    # ... but not the one whose head was noted.
    assert main(["audit", "verify", "--data-dir", str(logged.parent), "--expect-head", head]) == 1


def test_a_noted_head_still_verifies_once_the_log_has_grown(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A head is noted to be checked later, when a running service has logged more since:
    the check is that the noted entry is still in the chain, not that it is still the last."""
    capsys.readouterr()
    main(["audit", "verify", "--data-dir", str(logged.parent)])
    head = capsys.readouterr().out.split("head ")[1].strip()
    security = open_security(load_config(env={}, data_dir=str(logged.parent)))
    for n in range(6, 9):
        security.append_audit(_event(n))
    security.close()
    assert main(["audit", "verify", "--data-dir", str(logged.parent), "--expect-head", head]) == 0
    assert "8 entries" in capsys.readouterr().out
    # Cut back to before the noted entry and grown again: the noted head is gone.
    _tamper(logged, ("DELETE FROM audit_namespaces WHERE seq >= 5", ()), ("DELETE FROM audit WHERE seq >= 5", ()))
    security = open_security(load_config(env={}, data_dir=str(logged.parent)))
    for n in range(5, 9):
        security.append_audit(_event(n + 10))
    security.close()
    assert main(["audit", "verify", "--data-dir", str(logged.parent)]) == 0
    capsys.readouterr()
    assert main(["audit", "verify", "--data-dir", str(logged.parent), "--expect-head", head]) == 1
    assert f"the noted head {head} is not in the audit log" in capsys.readouterr().err


@pytest.mark.parametrize("noted", ["garbage", "0" * 63, "g" * 64, " " + "0" * 64])
def test_a_noted_head_that_is_no_hash_is_refused_not_read_as_a_cut(
    logged: Path, capsys: pytest.CaptureFixture[str], noted: str
) -> None:
    """A mistyped or half-copied head never matched, and was reported as "entries were cut
    off": a tampering alarm for a typo."""
    capsys.readouterr()
    assert main(["audit", "verify", "--data-dir", str(logged.parent), "--expect-head", noted]) == 2
    err = capsys.readouterr().err
    assert "is not a head hash" in err and "cut off" not in err


def test_a_noted_head_in_capitals_is_the_same_head(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    main(["audit", "verify", "--data-dir", str(logged.parent)])
    head = capsys.readouterr().out.split("head ")[1].strip()
    assert main(["audit", "verify", "--data-dir", str(logged.parent), "--expect-head", head.upper()]) == 0


def test_the_head_of_an_empty_log_noted_verifies_as_the_log_grows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Verified before anything was logged, the log prints the genesis hash as its head; noted
    and passed back, it is in every chain (nothing before it can be cut off), empty or grown."""
    config = load_config(env={}, data_dir=str(tmp_path))
    open_security(config).close()
    capsys.readouterr()
    assert main(["audit", "verify", "--data-dir", str(tmp_path)]) == 0
    head = capsys.readouterr().out.split("head ")[1].strip()
    assert main(["audit", "verify", "--data-dir", str(tmp_path), "--expect-head", head]) == 0
    security = open_security(config)
    security.append_audit(_event(1))
    security.close()
    assert main(["audit", "verify", "--data-dir", str(tmp_path), "--expect-head", head]) == 0


def test_cli_token_create_refuses_an_expiry_past_the_year_9999_in_utc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: an OverflowError traceback from ``twinmem token create``."""
    args = ["token", "create", "--agent", "planner", "--grant", "user:*:rw", "--data-dir", str(tmp_path)]
    assert main([*args, "--expires-at", "9999-12-31T23:00:00-05:00"]) != 0
    err = capsys.readouterr().err
    assert "expires_at: 9999-12-31T23:00:00-05:00 is out of range once converted to UTC" in err
    assert main([*args, "--expires-at", "9999-12-31T23:00:00+00:00"]) == 0  # the last moment there is


def test_cli_creates_lists_and_revokes_tokens_and_audits_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = str(tmp_path)
    assert main(["token", "create", "--agent", "planner", "--grant", "user:*:rw", "--data-dir", data]) == 0
    token = capsys.readouterr().out.strip()
    assert len(token) >= 40
    security = open_security(load_config(env={}, data_dir=data))
    try:
        principal = security.principal_for(hash_token(token))
        assert principal is not None and principal.agent == "planner"
        assert principal.may("user:7", Permission.WRITE) and not principal.may("team:1", Permission.READ)
    finally:
        security.close()
    # Only the hash is stored.
    with sqlite3.connect(tmp_path / SECURITY_FILE) as db:
        assert token not in json.dumps(db.execute("SELECT * FROM tokens").fetchall())
    assert main(["token", "list", "--data-dir", data]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(t["agent"], t["grants"], t["revoked_at"]) for t in listed] == [("planner", ["user:*:rw"], None)]
    assert main(["token", "revoke", listed[0]["token_id"], "--data-dir", data]) == 0
    assert main(["token", "revoke", listed[0]["token_id"], "--data-dir", data]) == 1
    security = open_security(load_config(env={}, data_dir=data))
    try:
        assert security.principal_for(hash_token(token)) is None
        actions = [row.entry["detail"] for row in security.audit(AuditQuery(actor="cli"))]
        assert actions == ["token revoke", "token create"]
    finally:
        security.close()
    assert main(["audit", "verify", "--data-dir", data]) == 0


def test_config_tokens_are_stored_at_start_and_a_revocation_survives_a_restart(tmp_path: Path) -> None:
    secret = "s3cret-token-for-the-tests"
    config = load_config(
        env={},
        data_dir=str(tmp_path),
        auth={"mode": "tokens", "tokens": [{"agent": "ops", "token": secret, "grants": ["ops:*:a"]}]},
    )
    security = open_security(config)
    principal = security.principal_for(hash_token(secret))
    assert principal is not None and principal.agent == "ops" and principal.may("ops:x", Permission.ADMIN)
    assert principal.token_id is not None and security.revoke(principal.token_id, AT)
    security.close()
    security = open_security(config)
    try:
        assert security.principal_for(hash_token(secret)) is None
    finally:
        security.close()


def test_an_expired_config_token_still_starts_and_is_named_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A config valid yesterday must restart today, so a token whose ``expires_at`` has
    passed is stored as before (and refused as expired), but the start was silent about it:
    one warning now names the token's agent and expiry. A live token says nothing."""
    tokens = [
        {
            "agent": "ops",
            "token": "expired-token-for-the-tests",
            "grants": ["*:a"],
            "expires_at": "2020-01-01T00:00:00Z",
        },
        {
            "agent": "kim",
            "token": "later-token-for-the-tests!",
            "grants": ["kim:rw"],
            "expires_at": "2999-01-01T00:00:00Z",
        },
        {"agent": "ida", "token": "never-expiring-token-here", "grants": ["ida:rw"]},
    ]
    config = load_config(env={}, data_dir=str(tmp_path), auth={"mode": "tokens", "tokens": tokens})
    with caplog.at_level("WARNING", logger="engine.adapters"):
        security = open_security(config)
    try:
        expired = security.principal_for(hash_token("expired-token-for-the-tests"))
        assert expired is not None and expired.agent == "ops" and expired.expired(datetime.now(UTC))
    finally:
        security.close()
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and r.name == "engine.adapters"]
    assert len(warnings) == 1, caplog.text
    said = warnings[0].getMessage()
    assert "\n" not in said
    assert "agent 'ops'" in said and "expired at 2020-01-01T00:00:00" in said, said


def test_config_token_entries_are_checked() -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        load_config(env={}, auth={"tokens": [{"agent": "a", "grants": ["x:r"]}]})
    with pytest.raises(ConfigError, match="token-hash"):
        load_config(env={}, auth={"tokens": [{"agent": "a", "token-hash": "nothex", "grants": ["x:r"]}]})
    with pytest.raises(ConfigError, match="mode"):
        load_config(env={}, auth={"mode": "open"})


def test_blocks_are_recorded_listed_and_lifted(store: SqliteSecurityStore) -> None:
    assert store.blocks() == [] and not store.is_blocked("mallory", "s-1")
    assert not store.is_blocked(None, None)
    mallory = Block(BlockKind.AGENT, "mallory", "root", AT, "planted instructions")
    session = Block(BlockKind.SESSION, "s-1", "root", AT.replace(minute=5))
    assert store.block(mallory) and store.block(session)
    # Blocking again changes nothing: the first block (its time, author, reason) stands.
    assert not store.block(Block(BlockKind.AGENT, "mallory", "ops", AT.replace(hour=3), "again"))
    assert store.blocks() == [mallory, session]
    assert store.is_blocked("mallory", None) and store.is_blocked(None, "s-1")
    assert store.is_blocked("alice", "s-1") and store.is_blocked("mallory", "s-2")
    assert not store.is_blocked("alice", "s-2")
    # A kind names only its own: an agent called like a blocked session is not blocked.
    assert not store.is_blocked("s-1", None) and not store.is_blocked(None, "mallory")
    assert store.unblock(BlockKind.AGENT, "mallory")
    assert not store.unblock(BlockKind.AGENT, "mallory")
    assert not store.unblock(BlockKind.SESSION, "never-blocked")
    assert not store.is_blocked("mallory", None)
    assert store.blocks() == [session]


def test_a_block_is_seen_at_once_by_another_store_on_the_same_file(tmp_path: Path) -> None:
    """The server and the CLI each open the file: a block made by one counts for the other
    from its commit on (no cache), and so does its lifting."""
    first, second = SqliteSecurityStore(tmp_path / SECURITY_FILE), SqliteSecurityStore(tmp_path / SECURITY_FILE)
    first.open()
    second.open()
    try:
        assert not second.is_blocked("mallory", None)
        assert first.block(Block(BlockKind.AGENT, "mallory", "root", AT))
        assert second.is_blocked("mallory", None)
        assert [b.value for b in second.blocks()] == ["mallory"]
        assert not second.block(Block(BlockKind.AGENT, "mallory", "cli", AT))
        assert second.unblock(BlockKind.AGENT, "mallory")
        assert not first.is_blocked("mallory", None)
    finally:
        first.close()
        second.close()


def test_the_blocks_table_is_added_to_an_existing_security_file(tmp_path: Path) -> None:
    """A security file made before blocks existed (schema version 1) gains the table on open,
    keeping its tokens and audit log."""
    path = tmp_path / SECURITY_FILE
    store = SqliteSecurityStore(path)
    store.open()
    store.append_audit(_event(1))
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE blocks")
        db.execute("ALTER TABLE tokens DROP COLUMN expires_at")  # added by version 3
        db.execute("PRAGMA user_version = 1")
    store = SqliteSecurityStore(path)
    store.open()
    try:
        assert store.block(Block(BlockKind.SESSION, "s-1", "root", AT))
        assert store.is_blocked(None, "s-1")
        assert verify_chain(store.audit_rows()).entries == 1
    finally:
        store.close()


def test_a_security_file_of_a_newer_twinmem_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    """An older twinmem read a newer file as its own: the version-2 code, given a version-3
    file, failed on every token with 'too many values to unpack', and one that read the
    tokens by name would have accepted expired tokens. A newer schema is now refused on open."""
    path = tmp_path / SECURITY_FILE
    store = SqliteSecurityStore(path)
    store.open()
    store.close()
    with sqlite3.connect(path) as db:
        current = db.execute("PRAGMA user_version").fetchone()[0]
        db.execute(f"PRAGMA user_version = {current + 1}")
    store = SqliteSecurityStore(path)
    with pytest.raises(StoreError, match=rf"schema version {current + 1}, newer than this twinmem knows \({current}\)"):
        store.open()
    store.close()


def test_tokens_stored_before_expiry_existed_keep_working_and_never_expire(tmp_path: Path) -> None:
    """A security file of schema version 2 (no ``expires_at``) gains the column on open; its
    tokens work as before, with no expiry; a token stored after may carry one."""
    path = tmp_path / SECURITY_FILE
    store = SqliteSecurityStore(path)
    store.open()
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE tokens DROP COLUMN expires_at")
        db.execute("PRAGMA user_version = 2")
        db.execute(
            "INSERT INTO tokens (token_id, token_hash, agent, grants, created_at) VALUES (?, ?, ?, ?, ?)",
            ("tok-old", "a" * 64, "old", '["old:rw"]', "2026-01-01T00:00:00.000000Z"),
        )
    store = SqliteSecurityStore(path)
    store.open()
    try:
        principal = store.principal_for("a" * 64)
        assert principal is not None and principal.agent == "old" and principal.expires_at is None
        later = AT + timedelta(days=30)
        store.add_token(TokenRecord("tok-new", "new", (parse_grant("new:rw"),), AT, expires_at=later), "b" * 64)
        fresh = store.principal_for("b" * 64)
        assert fresh is not None and fresh.expires_at == later and fresh.expired(later)
        assert not fresh.expired(later - timedelta(seconds=1))
        assert {t.token_id: t.expires_at for t in store.tokens()} == {"tok-old": None, "tok-new": later}
    finally:
        store.close()


def test_a_bounded_audit_log_moves_old_entries_to_an_archive_and_the_chain_still_verifies(tmp_path: Path) -> None:
    config = load_config(env={}, data_dir=str(tmp_path), audit={"max_entries": 10})
    security = open_security(config)
    rows = [security.append_audit(_event(n % 60)) for n in range(1, 51)]
    with sqlite3.connect(tmp_path / SECURITY_FILE) as db:
        kept = db.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM audit").fetchone()
    assert kept[0] <= 11 and kept[2] == 50  # the bound plus a tenth
    archives = sorted((tmp_path / ARCHIVE_DIR).glob("audit-*.jsonl"))
    assert archives and sum(len(path.read_text().splitlines()) for path in archives) == kept[1] - 1
    report = verify_chain(security.audit_rows())
    assert report.ok and report.entries == 50 and report.head == rows[-1].hash
    assert [row.seq for row in security.audit(AuditQuery(limit=3))] == [50, 49, 48]
    security.close()
    assert main(["audit", "verify", "--data-dir", str(tmp_path), "--expect-head", rows[-1].hash]) == 0

    # An archived entry edited is found like one edited in the store.
    lines = archives[0].read_text().splitlines()
    edited = json.loads(lines[1])
    edited["entry"] = edited["entry"].replace('"save"', '"read"')
    archives[0].write_text("\n".join([lines[0], json.dumps(edited), *lines[2:]]) + "\n")
    assert main(["audit", "verify", "--data-dir", str(tmp_path)]) == 1


def test_an_archived_entry_found_twice_passes_only_when_both_copies_are_the_same(tmp_path: Path) -> None:
    """A rotation whose transaction failed after its file was written leaves the same rows in
    two archive files, which verification reads once. A second, different copy of an entry
    is no such thing: it is reported, not skipped, so no forged line hides beside a real one."""
    config = load_config(env={}, data_dir=str(tmp_path), audit={"max_entries": 10})
    security = open_security(config)
    for n in range(1, 51):
        security.append_audit(_event(n % 60))
    security.close()
    first, second, *_ = sorted((tmp_path / ARCHIVE_DIR).glob("audit-*.jsonl"))
    lines, next_line = first.read_text().splitlines(), second.read_text().splitlines()[0]
    start, end = (int(part) for part in first.stem.split("-")[1:])
    retried = first.with_name(f"audit-{start:012d}-{end + 1:012d}.jsonl")  # the same rows and one more
    retried.write_text("\n".join([*lines, next_line]) + "\n")
    assert main(["audit", "verify", "--data-dir", str(tmp_path)]) == 0

    forged = json.loads(lines[1])
    entry = json.loads(forged["entry"])
    forged["entry"] = json.dumps({**entry, "actor": "mallory", "action": "delete"})
    forged["hash"] = chain_hash(forged["prev_hash"], json.loads(forged["entry"]))
    first.write_text("\n".join([*lines[:2], json.dumps(forged), *lines[2:]]) + "\n")
    assert main(["audit", "verify", "--data-dir", str(tmp_path)]) == 1


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_a_new_data_directory_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """With tokens, namespaces and grants keep agents apart; a data directory any local user
    could open would let them read every memory, session and audit entry straight from the
    files. One twinmem makes is its owner's alone (0700), as PostgreSQL's is."""
    for name in ("security", "sessions", "store"):
        data = tmp_path / name / "twinmem-data"
        config = load_config(env={}, data_dir=str(data))
        if name == "security":
            open_security(config).close()
        elif name == "sessions":
            sessions = SqliteSessionStore(data / "sessions.sqlite3")
            sessions.open()
            sessions.close()
        else:
            store = SqliteStore(data / "twinmem.sqlite3")
            store.open()
            store.close()
        assert stat.S_IMODE(data.stat().st_mode) & 0o077 == 0, name


def test_verify_names_the_archive_file_that_holds_an_unreadable_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_config(env={}, data_dir=str(tmp_path), audit={"max_entries": 10})
    security = open_security(config)
    for n in range(1, 31):
        security.append_audit(_event(n))
    security.close()
    first = sorted((tmp_path / ARCHIVE_DIR).glob("audit-*.jsonl"))[0]
    lines = first.read_text().splitlines()
    first.write_text("\n".join([lines[0], lines[1][:40], *lines[2:]]) + "\n")
    capsys.readouterr()
    assert main(["audit", "verify", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"entry 2: an unreadable line (line 2 of {ARCHIVE_DIR}/{first.name})" in err, err


def test_an_archived_entry_found_in_three_files_after_two_failed_rotations_reads_once(tmp_path: Path) -> None:
    """Two rotations whose transactions failed after their files were written (the first
    bound changed between the restarts) leave three files that start at the same entry:
    each copy is the same row, so the chain still reads as intact."""
    config = load_config(env={}, data_dir=str(tmp_path), audit={"max_entries": 10})
    security = open_security(config)
    for n in range(1, 51):
        security.append_audit(_event(n % 60))
    security.close()
    archives = sorted((tmp_path / ARCHIVE_DIR).glob("audit-*.jsonl"))
    lines = [line for path in archives for line in path.read_text().splitlines()]
    for path in archives:
        path.unlink()
    assert len(lines) >= 6
    for count in (3, 5, len(lines)):  # two failed tries, then the one that committed
        (tmp_path / ARCHIVE_DIR / f"audit-{1:012d}-{count:012d}.jsonl").write_text("\n".join(lines[:count]) + "\n")
    assert main(["audit", "verify", "--data-dir", str(tmp_path)]) == 0


def test_verifying_while_entries_are_appended_and_archived_finds_the_chain_intact(tmp_path: Path) -> None:
    """``audit verify`` beside a running server: a rotation that moves the table's oldest rows
    to a new archive file after the files were listed, before the table is read. Those rows
    were in neither (the chain read as broken, "out of sequence", in 3 of 9 runs beside a
    server with ``max_entries = 200`` and 20 writers)."""
    config = load_config(env={}, data_dir=str(tmp_path), audit={"max_entries": 10})
    security = open_security(config)
    for n in range(1, 51):
        security.append_audit(_event(n % 60))
    rows = security.audit_rows()
    first = next(rows)  # the archive files are listed; the table is not read yet
    for n in range(51, 71):  # the server appends meanwhile: two more rotations
        security.append_audit(_event(n % 60))
    report = verify_chain(itertools.chain([first], rows))
    security.close()
    assert report.ok, report.problems
    assert report.entries == 70
