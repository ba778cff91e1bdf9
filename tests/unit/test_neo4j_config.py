"""The [neo4j] table selects and reaches the server-mode store."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.adapters import new_store
from engine.adapters.neo4j_store import Neo4jStore
from engine.adapters.sqlite_store import SqliteStore
from engine.config import DEFAULT_NEO4J_URI, load_config
from engine.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "twinmem.example.toml"


def test_defaults_point_at_a_local_server() -> None:
    config = load_config(env={})
    assert config.store == "sqlite"
    assert (config.neo4j.uri, config.neo4j.user, config.neo4j.database) == (DEFAULT_NEO4J_URI, "neo4j", "")


def test_file_and_environment_fill_the_table(tmp_path: Path) -> None:
    path = tmp_path / "twinmem.toml"
    path.write_text('store = "neo4j"\n[neo4j]\nuri = "neo4j://graph.internal:7687"\ndatabase = "memories"\n')
    config = load_config(path, env={"TWINMEM_NEO4J__PASSWORD": "s3cret", "TWINMEM_NEO4J__USER": "twinmem"})
    assert config.store == "neo4j"
    assert config.neo4j.uri == "neo4j://graph.internal:7687"
    assert (config.neo4j.user, config.neo4j.password, config.neo4j.database) == ("twinmem", "s3cret", "memories")


def test_the_example_file_shows_the_table() -> None:
    config = load_config(EXAMPLE, env={})
    assert config.neo4j.uri == DEFAULT_NEO4J_URI
    assert config.neo4j.migrations == "apply"


def test_check_mode_reaches_the_store(tmp_path: Path) -> None:
    config = load_config(env={"TWINMEM_NEO4J__MIGRATIONS": "check"}, data_dir=tmp_path, store="neo4j")
    graph = new_store(config)
    assert isinstance(graph, Neo4jStore)
    assert graph._migrations == "check"


@pytest.mark.parametrize(
    "overrides",
    [
        {"neo4j": {"url": "bolt://x"}},
        {"store": "neo4j", "neo4j": {"uri": ""}},
        {"neo4j": {"password": ["x"]}},
        {"neo4j": {"migrations": "skip"}},
    ],
)
def test_a_bad_table_is_refused(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        load_config(env={}, **overrides)


@pytest.mark.parametrize("uri", ["http://127.0.0.1:7474", "https://graph.example:7473", "127.0.0.1:7687"])
def test_a_uri_that_is_not_bolt_is_refused_naming_what_is(uri: str) -> None:
    """Neo4j's HTTP port (7474) is the one a browser shows. Given it, the driver took it for
    its preview HTTP API and start-up failed deep in the lifespan on ``No module named
    'aiohttp'``."""
    with pytest.raises(ConfigError, match=r"bolt://.*neo4j://"):
        load_config(env={}, store="neo4j", neo4j={"uri": uri})


@pytest.mark.parametrize(
    "uri",
    [
        "bolt://127.0.0.1",
        "neo4j+s://abc123.databases.neo4j.io",
        "neo4j+ssc://graph.example:7687",
        "bolt+s://graph.example",
        "bolt+ssc://[::1]:7687",
        "neo4j://[fe80::1]:7687",
        "NEO4J+S://abc123.databases.neo4j.io",
        "Bolt://127.0.0.1:7687",
        " bolt://127.0.0.1:7687",
    ],
)
def test_every_uri_the_driver_takes_for_bolt_is_accepted(uri: str) -> None:
    """The driver reads the scheme as ``urlparse`` does, in any case and after leading
    blanks (an environment variable's, say); refusing those stopped a working deployment."""
    assert load_config(env={}, store="neo4j", neo4j={"uri": uri}).neo4j.uri == uri


def test_the_store_follows_the_config(tmp_path: Path) -> None:
    assert isinstance(new_store(load_config(env={}, data_dir=tmp_path)), SqliteStore)
    graph = new_store(load_config(env={}, data_dir=tmp_path, store="neo4j", neo4j={"uri": "bolt://127.0.0.1:1"}))
    assert isinstance(graph, Neo4jStore)
