"""The server-mode system of record: Neo4j 5 (or any Bolt + Cypher server) via the official driver.

The graph::

    (:Memory {memory_id, namespace, content, digest, category, entities, ..., metadata})
        -[:MENTIONS]->        (:Entity {namespace, key, name})
        -[:EMBEDDED_AS]->     (:Embedding {memory_id, model, dim, vector})
        -[:SUPERSEDES | CONTRADICTS | MERGED_INTO | RELATED_TO | NEXT {kind, namespace, created_at}]-> (:Memory)
    (:MemoryVersion {memory_id, version, namespace, record, changed_at, changed_by, reason})
        -[:VERSION_OF]->      (:Memory)
    (:Counter {name: 'changes', seq, low_water})  the change sequence's high- and low-water marks
    (:Change {seq, memory_id, namespace, op, at})
    (:SchemaMigration {number, name, applied_at, applied, note})
    (:Lease {name, holder, expires_at})     one background job at a time across replicas

Choices, and why:

* Every field of the record is a property of its ``(:Memory)`` node, under the
  record's own name, so a user can read memories in Neo4j Browser as they are.
  Timestamps are UTC ISO 8601 strings of fixed width (``engine.codec.to_iso``):
  they sort in time order, compare with ``<``, and round-trip to the microsecond
  on every Bolt server. ``metadata`` is a JSON string (a property cannot hold a
  map); absent optional fields are absent properties.
* Versions are ``(:MemoryVersion)`` nodes, one per version, holding the record
  as JSON (exactly what ``Store.versions`` returns) plus who, when and why, and
  linked ``[:VERSION_OF]`` to their memory: the history can be walked in the
  Browser, and a JSON snapshot keeps every field of every version whatever the
  record grows into.
* Vectors are ``(:Embedding)`` nodes, one per (memory, model) (a uniqueness
  constraint, migration 0006), holding the float32 values as little-endian bytes:
  4 bytes a dimension instead of a list of 64-bit floats, and one Bolt byte
  string to decode instead of a value per float. Neo4j and ArcadeDB both store
  byte arrays as properties. Lists written by earlier versions are still read.
* Re-embedding (``put_vectors`` with an ``embedding_version``) logs a change per
  memory, so every replica's index keeper picks up the new vectors; a
  ``(:Lease)`` node lets one replica's re-embedder run at a time
  (``take_lease``).
* Typed links are relationships of their own type (``SUPERSEDES`` ...); a kind
  outside the known five travels as ``[:LINKED {kind}]``. Each keeps ``kind``,
  ``namespace`` and ``created_at``, and ``MERGE`` keeps a (src, dst, kind) once.
* The change sequence: every write transaction locks ``(:Counter)``, takes the
  next numbers and creates ``(:Change)`` nodes. The counter's write lock
  (Neo4j) or its optimistic version check (ArcadeDB) makes seq order the commit
  order, so a replica catching up never skips a change that commits late.

Every logical write is one ``session.execute_write`` transaction function: the
driver retries it whole on transient errors (deadlocks, leader switches,
ArcadeDB's concurrent-modification conflicts), and ``_write`` retries it whole when
a record it reached was deleted by a transaction that committed meanwhile
(ArcadeDB's ``EntityNotFound``), so the function holds no state between tries.
Read-modify-write (``reinforce``, ``update``) first takes the node's write lock
with ``SET m._lock = true``, so concurrent calls serialise instead of losing an
increment. Cypher is literal text with ``$parameters``
only; where a filter is optional, the clause is written ``($p IS NULL OR ...)``.
Driver errors become ``Conflict`` (constraint violations) or ``StoreError`` at
this boundary.

No write works from a stale record: an update (and ``put_vectors``) takes the
memory's lock and writes over the node's current values the fields it changes,
keeping use and vectors that landed since its record was read, perhaps from
another process (``Memory.over``). Locks are taken in one order, memories by id
and then the change counter, so concurrent writers do not deadlock.

Metadata equality filters are checked in Python on the decoded JSON, with the
SQLite store's semantics (JSON types distinguished: ``1`` is not ``true``); the
other filters run in Cypher. The lexical channel lives in the fast network
(``engine.fast_network``), not here. (On Neo4j itself, migration 0003 builds the
full-text index ``memory_content``, for users' own queries.) Schema migrations (``graph_schema/*.cypher``) run
in ``open()``; see ``engine.adapters.neo4j_migrations``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, LiteralString, TypeVar, cast

import neo4j
import numpy as np
from neo4j.exceptions import (
    ConstraintError,
    DriverError,
    IncompleteCommit,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
)

from engine import limits
from engine.adapters import neo4j_migrations
from engine.adapters.round_trips import RoundTrips
from engine.codec import decode_cursor, encode_cursor, from_iso, memory_from_dict, memory_to_dict, to_iso
from engine.errors import Conflict, InvalidInput, MemoryNotFound, SaveOvertaken, StaleWrite, StoreError, expect_version
from engine.ports import Edge, ImportedRecord, Matrix, Reinforcement, Rescore, Vector
from engine.records import (
    Change,
    Memory,
    MemoryFilter,
    Page,
    Scope,
    Status,
    Version,
    entity_keys,
    metadata_key_problem,
    overtaking,
    utcnow,
)

T = TypeVar("T")
log = logging.getLogger(__name__)
# The first pause before a one-statement read that failed retryably is tried again (doubling).
_FIRST_RETRY_DELAY_S = 0.1
# What ArcadeDB reports when a statement reaches a record another transaction deleted.
_VANISHED = "Neo.ClientError.Statement.EntityNotFound"
# What ArcadeDB reports when two transactions that read the change counter at once both
# create the next (:Change): the unique seq index refuses the later one before its counter
# check would have (Neo4j's counter lock makes the second writer wait instead).
_SEQ_TAKEN = "index 'Change[seq]'"
# The same race on the other keys a write takes as it finds them, where Neo4j's node locks
# would have made the later writer wait: the next version of a memory another replica
# edited meanwhile (tried again, the write reads the newer version and is refused as a
# ``StaleWrite``, which the service decides anew or answers 412), and an entity another
# replica created meanwhile (tried again, the MERGE finds it).
_KEYS_TAKEN = (_SEQ_TAKEN, "index 'MemoryVersion[memory_id,version]'", "index 'Entity[namespace,key]'")
# Stored vectors: float32, little-endian, whatever the machine.
_VECTOR_BYTES = np.dtype("<f4")

EDGE_KINDS: frozenset[str] = frozenset({"SUPERSEDES", "CONTRADICTS", "MERGED_INTO", "RELATED_TO", "NEXT"})
# Tries of a MERGE that a racing writer's node made fail on a uniqueness constraint.
_MERGE_TRIES = 5
# Rows fetched per round trip when metadata filters are checked in Python.
_SCAN_CHUNK = 500
# Sorts after every created_at (fixed-width ISO 8601 strings): the cursor of a first page.
_NEWEST = "9999-99-99"

# --- Cypher ---------------------------------------------------------------------------

# What a Scope sees (engine.records.Scope): every memory of a namespace in full reach;
# shared, public and the caller's own private ones in member reach; public ones in
# public reach. `m.actor = $agent` is null when there is no agent, which WHERE treats
# as false.
_SIGHT: LiteralString = """
(m.namespace IN $full
 OR (m.namespace IN $member AND (m.visibility <> 'private' OR m.actor = $agent))
 OR (m.namespace IN $public AND m.visibility = 'public')
 OR (m.namespace IN $own AND m.actor = $agent))
"""

_EXISTING_IDS: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
RETURN m.memory_id AS memory_id
LIMIT 1
"""

_CREATE_MEMORIES: LiteralString = """
UNWIND $rows AS props
CREATE (m:Memory)
SET m = props
"""

_CREATE_VERSIONS: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {memory_id: row.memory_id})
CREATE (v:MemoryVersion {memory_id: row.memory_id, version: row.version, namespace: row.namespace,
                         record: row.record, changed_at: row.changed_at, reason: row.reason})
SET v.changed_by = row.changed_by
CREATE (v)-[:VERSION_OF]->(m)
"""

_LINK_ENTITIES: LiteralString = """
UNWIND $links AS link
MATCH (m:Memory {memory_id: link.memory_id})
MERGE (e:Entity {namespace: link.namespace, key: link.key})
ON CREATE SET e.name = link.name
MERGE (m)-[:MENTIONS]->(e)
"""

_UNLINK_ENTITIES: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})-[r:MENTIONS]->(e:Entity)
DELETE r
RETURN DISTINCT e.namespace AS namespace, e.key AS key
"""

_DROP_ORPHAN_ENTITIES: LiteralString = """
UNWIND $entities AS ent
MATCH (e:Entity {namespace: ent.namespace, key: ent.key})
WHERE NOT EXISTS { (e)<-[:MENTIONS]-() }
DELETE e
"""

# Take the change counter's write lock first, then read it.
_LOG_CHANGES: LiteralString = """
MATCH (c:Counter {name: 'changes'})
SET c._lock = true
WITH c
SET c.seq = c.seq + size($changes)
REMOVE c._lock
WITH c.seq - size($changes) AS base
UNWIND range(0, size($changes) - 1) AS i
WITH base + i + 1 AS seq, $changes[i] AS change
CREATE (:Change {seq: seq, memory_id: change.memory_id, namespace: change.namespace, op: change.op, at: change.at})
RETURN max(seq) AS seq
"""

# $ids sorted: concurrent writers lock shared memories in one order. Each is returned
# as it is now, which an update writes over (``Memory.over``).
_LOCK_MEMORIES: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
SET m._lock = true
RETURN properties(m) AS m
"""

# The memories other writers inserted between the change a save was judged at and its own
# (``Store.insert_linked``'s ``seen_seq``), in the save's namespaces.
# Every change in the range, with its memory where it is an insert or a purge in one of the
# save's namespaces (a purged one is gone; any other is there once its commit is whole).
_INSERTED_BETWEEN: LiteralString = """
MATCH (c:Change)
WHERE c.seq > $after AND c.seq <= $upto
OPTIONAL MATCH (m:Memory {memory_id: c.memory_id})
WHERE c.op IN ['insert', 'purge'] AND c.namespace IN $namespaces
RETURN c.seq AS seq, c.op AS op, c.namespace IN $namespaces AS here, c.memory_id AS changed,
       m.memory_id AS memory_id, m.namespace AS namespace, m.session_id AS session_id, m.digest AS digest
"""

_LOCK_FOR_VECTORS: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
SET m._lock = true
RETURN m.memory_id AS memory_id, m.namespace AS namespace,
       m.embedding_model = $model AND EXISTS { (m)-[:EMBEDDED_AS]->(:Embedding {model: $model}) } AS has_vector
"""

_UNLOCK_MEMORIES: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
REMOVE m._lock
"""

# Replacing every property also drops the lock flag.
_REPLACE_MEMORIES: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {memory_id: row.memory_id})
SET m = row.props
"""

_DROP_EMBEDDINGS: LiteralString = """
MATCH (e:Embedding {memory_id: $memory_id})
DETACH DELETE e
"""

_PUT_EMBEDDINGS: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {memory_id: row.memory_id})
CREATE (e:Embedding {memory_id: row.memory_id, model: row.model, dim: row.dim, vector: row.vector})
CREATE (m)-[:EMBEDDED_AS]->(e)
"""

# MERGE on the (memory_id, model) constraint: a vector is replaced, never doubled.
_MERGE_EMBEDDINGS: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {memory_id: row.memory_id})
MERGE (e:Embedding {memory_id: row.memory_id, model: row.model})
SET e.dim = row.dim, e.vector = row.vector
MERGE (m)-[:EMBEDDED_AS]->(e)
"""

_MARK_MODEL: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
SET m.embedding_model = $model, m.embedding_version = $embedding_version
"""

# The lease node is made by migration 0006; MERGE keeps a lease of another name working.
_LOCK_LEASE: LiteralString = """
MERGE (l:Lease {name: $name})
SET l._lock = true
RETURN l.holder AS holder, l.expires_at AS expires_at
"""

_SET_LEASE: LiteralString = """
MATCH (l:Lease {name: $name})
SET l.holder = $holder, l.expires_at = $expires_at
REMOVE l._lock
"""

_UNLOCK_LEASE: LiteralString = """
MATCH (l:Lease {name: $name})
REMOVE l._lock
"""

_RELEASE_LEASE: LiteralString = """
MATCH (l:Lease {name: $name})
WHERE l.holder = $holder
SET l.holder = null, l.expires_at = null
"""

_ID_NAMESPACES: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
RETURN m.memory_id AS memory_id, m.namespace AS namespace
"""

_CREATE_IMPORTED_VERSIONS: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {memory_id: row.memory_id})
CREATE (v:MemoryVersion {memory_id: row.memory_id, version: row.version, namespace: row.namespace,
                         record: row.record, changed_at: row.changed_at, reason: row.reason})
SET v.changed_by = row.changed_by
CREATE (v)-[:VERSION_OF]->(m)
"""

_LOCK_FOR_REINFORCE: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
SET m._lock = true
RETURN properties(m) AS m
"""

_APPLY_REINFORCE: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {memory_id: row.memory_id})
SET m.base_score = row.base_score, m.access_count = row.access_count, m.last_accessed_at = row.last_accessed_at
REMOVE m._lock
"""

_LOCK_FOR_PURGE: LiteralString = """
MATCH (m:Memory {memory_id: $memory_id, namespace: $namespace})
SET m._lock = true
RETURN properties(m) AS m
"""

_PURGE_VERSIONS: LiteralString = """
MATCH (v:MemoryVersion {memory_id: $memory_id})
DETACH DELETE v
"""

_PURGE_MEMORY: LiteralString = """
MATCH (m:Memory {memory_id: $memory_id})
DETACH DELETE m
"""

_EDGE_PREFIX: LiteralString = """
UNWIND $edges AS edge
MATCH (a:Memory {memory_id: edge.src}), (b:Memory {memory_id: edge.dst})
"""
_EDGE_SET: LiteralString = """
ON CREATE SET r.kind = edge.kind, r.namespace = edge.namespace, r.created_at = edge.created_at
"""
# One statement per relationship type: a type cannot be a parameter.
_MERGE_EDGE: Mapping[str, LiteralString] = {
    "SUPERSEDES": _EDGE_PREFIX + "MERGE (a)-[r:SUPERSEDES]->(b)" + _EDGE_SET,
    "CONTRADICTS": _EDGE_PREFIX + "MERGE (a)-[r:CONTRADICTS]->(b)" + _EDGE_SET,
    "MERGED_INTO": _EDGE_PREFIX + "MERGE (a)-[r:MERGED_INTO]->(b)" + _EDGE_SET,
    "RELATED_TO": _EDGE_PREFIX + "MERGE (a)-[r:RELATED_TO]->(b)" + _EDGE_SET,
    "NEXT": _EDGE_PREFIX + "MERGE (a)-[r:NEXT]->(b)" + _EDGE_SET,
}
_MERGE_OTHER_EDGE: LiteralString = _EDGE_PREFIX + "MERGE (a)-[r:LINKED {kind: edge.kind}]->(b)" + _EDGE_SET

_NAMESPACES: LiteralString = """
MATCH (m:Memory)
RETURN DISTINCT m.namespace AS namespace
ORDER BY namespace
"""

# Keyset pages: each namespace's first $limit after the cursor, in index order (a
# (namespace, memory_id) index gives it), then the first $limit of those; no page
# sorts a whole namespace.
_SCAN: LiteralString = (
    """
UNWIND $namespaces AS namespace
CALL {
  WITH namespace
  MATCH (m:Memory {namespace: namespace})
  WHERE m.memory_id > $after AND """
    + _SIGHT
    + """
  RETURN m ORDER BY m.memory_id LIMIT $limit
}
WITH m ORDER BY m.memory_id LIMIT $limit
RETURN properties(m) AS m
"""
)

_MISSING_VECTORS: LiteralString = """
MATCH (m:Memory)
WHERE m.status <> 'deleted' AND m.memory_id > $after
  AND (m.embedding_model <> $model OR NOT EXISTS { (m)-[:EMBEDDED_AS]->(:Embedding {model: $model}) })
WITH m ORDER BY m.memory_id LIMIT $limit
RETURN m.memory_id AS memory_id
"""

_MISSING_VECTOR_MODELS: LiteralString = """
MATCH (m:Memory)
WHERE m.status <> 'deleted'
  AND (m.embedding_model <> $model OR NOT EXISTS { (m)-[:EMBEDDED_AS]->(:Embedding {model: $model}) })
RETURN m.embedding_model AS model, count(m) AS n
"""

_GET: LiteralString = (
    """
MATCH (m:Memory {memory_id: $memory_id})
WHERE m.namespace IN $namespaces AND """
    + _SIGHT
    + """
RETURN properties(m) AS m
"""
)

_SEEN: LiteralString = (
    """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
WHERE m.namespace IN $namespaces AND """
    + _SIGHT
    + """
RETURN m.memory_id AS memory_id
"""
)

# The hard filters of MemoryFilter except metadata; a null parameter means "any".
# Queries that scan a scope start with UNWIND $namespaces ... MATCH (m:Memory {namespace: ...}):
# ArcadeDB uses the namespace index for that form and scans for `m.namespace IN $namespaces`
# (5 ms against 35 ms over 1,000 memories); Neo4j plans both alike.
_FILTER: LiteralString = (
    """
m.namespace IN $namespaces AND """
    + _SIGHT
    + """
AND ($statuses IS NULL OR m.status IN $statuses)
AND ($categories IS NULL OR m.category IN $categories)
AND ($sources IS NULL OR m.source IN $sources)
AND ($created_after IS NULL OR m.created_at >= $created_after)
AND ($created_before IS NULL OR m.created_at < $created_before)
AND ($session_id IS NULL OR m.session_id = $session_id)
AND ($now IS NULL OR m.expire_at IS NULL OR m.expire_at > $now)
"""
)

_CURSOR: LiteralString = """
AND (m.created_at < $cursor_at OR (m.created_at = $cursor_at AND m.memory_id < $cursor_id))
WITH DISTINCT m ORDER BY m.created_at DESC, m.memory_id DESC LIMIT $limit
RETURN properties(m) AS m
"""

_BY_IDS: LiteralString = (
    """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
WHERE """
    + _FILTER
)

_GET_MANY: LiteralString = (
    _BY_IDS
    + """
RETURN properties(m) AS m
"""
)

# The records first and the counter after them, so the seq is no older than any change
# the records show; one row even for no ids (collect over none is the empty list).
_GET_MANY_AND_SEQ: LiteralString = (
    _BY_IDS
    + """
WITH collect(properties(m)) AS found
MATCH (c:Counter {name: 'changes'})
RETURN found, c.seq AS seq
"""
)

_FIND_BY_DIGEST: LiteralString = (
    """
UNWIND $namespaces AS namespace
MATCH (m:Memory {namespace: namespace, digest: $digest})
WHERE m.status = 'active' AND """
    + _SIGHT
    + """
WITH m ORDER BY m.created_at, m.memory_id
RETURN properties(m) AS m
"""
)

# Newest first, a keyset page per namespace from the (namespace, created_at) index (the
# range on created_at is sargable: no null test on the cursor), then the newest of those.
_LIST: LiteralString = (
    """
UNWIND $namespaces AS namespace
CALL {
  WITH namespace
  MATCH (m:Memory {namespace: namespace})
  WHERE m.created_at <= $cursor_at AND (m.created_at < $cursor_at OR m.memory_id < $cursor_id) AND """
    + _FILTER
    + """
  RETURN m ORDER BY m.created_at DESC, m.memory_id DESC LIMIT $limit
}
WITH m ORDER BY m.created_at DESC, m.memory_id DESC LIMIT $limit
RETURN properties(m) AS m
"""
)

_BY_ENTITY: LiteralString = (
    """
UNWIND $namespaces AS namespace
MATCH (e:Entity {namespace: namespace, key: $entity_key})
MATCH (e)<-[:MENTIONS]-(m:Memory)
WHERE """
    + _FILTER
    + _CURSOR
)

_FIND_BY_KEY: LiteralString = (
    """
UNWIND $namespaces AS namespace
MATCH (m:Memory {namespace: namespace, key: $key})
WHERE m.status = 'active' AND """
    + _SIGHT
    + """
WITH m ORDER BY m.created_at DESC, m.memory_id DESC
RETURN properties(m) AS m
"""
)

_FILTERED_IDS: LiteralString = (
    """
UNWIND $namespaces AS namespace
MATCH (m:Memory {namespace: namespace})
WHERE """
    + _FILTER
    + """
RETURN m.memory_id AS memory_id LIMIT $limit
"""
)

_VERSIONS: LiteralString = """
MATCH (v:MemoryVersion {memory_id: $memory_id})
RETURN v.version AS version, v.record AS record, v.changed_at AS changed_at,
       v.changed_by AS changed_by, v.reason AS reason
ORDER BY version
"""

# Undirected from the indexed end: ArcadeDB plans this far better than an
# incoming match with a property on the target (0.5 ms against 15 ms for a UNION).
_EDGES: LiteralString = """
MATCH (m:Memory {memory_id: $memory_id})
MATCH (m)-[r]-(:Memory)
WHERE r.kind IS NOT NULL AND r.namespace IN $namespaces
RETURN r.namespace AS namespace, startNode(r).memory_id AS src, endNode(r).memory_id AS dst,
       r.kind AS kind, r.created_at AS created_at
"""

_VERSIONS_OF: LiteralString = """
UNWIND $ids AS id
MATCH (v:MemoryVersion {memory_id: id})
RETURN v.memory_id AS memory_id, v.version AS version, v.record AS record, v.changed_at AS changed_at,
       v.changed_by AS changed_by, v.reason AS reason
"""

# _EDGES for many memories: a link between two of them comes back once from each end.
_EDGES_OF: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
MATCH (m)-[r]-(:Memory)
WHERE r.kind IS NOT NULL AND r.namespace IN $namespaces
RETURN r.namespace AS namespace, startNode(r).memory_id AS src, endNode(r).memory_id AS dst,
       r.kind AS kind, r.created_at AS created_at
"""

_VECTORS: LiteralString = """
UNWIND $ids AS id
MATCH (e:Embedding {memory_id: id, model: $model})
RETURN e.memory_id AS memory_id, e.vector AS vector
"""

_NO_COUNTER = "the change counter is missing: the graph schema migrations did not run"

_LAST_SEQ: LiteralString = """
MATCH (c:Counter {name: 'changes'})
RETURN c.seq AS seq
"""

_CHANGES_SINCE: LiteralString = """
MATCH (c:Change)
WHERE c.seq > $seq
WITH c ORDER BY c.seq LIMIT $limit
RETURN c.seq AS seq, c.memory_id AS memory_id, c.namespace AS namespace, c.op AS op
"""

_LOW_WATER: LiteralString = """
MATCH (c:Counter {name: 'changes'})
RETURN coalesce(c.low_water, 0) AS seq
"""

# Under the counter's write lock, like every write that logs a change.
_PRUNE_BOUNDS: LiteralString = """
MATCH (c:Counter {name: 'changes'})
SET c._lock = true
REMOVE c._lock
RETURN c.seq AS newest, coalesce(c.low_water, 0) AS low
"""

_PRUNE_CHANGES: LiteralString = """
MATCH (x:Change)
WHERE x.seq > $low AND x.seq <= $mark
DETACH DELETE x
"""

_RAISE_LOW_WATER: LiteralString = """
MATCH (c:Counter {name: 'changes'})
SET c.low_water = $mark
"""

_INDEX_STATUS: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
RETURN m.memory_id AS memory_id, m.status AS status
"""

_LINKS: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})-[r]-(:Memory)
WHERE r.kind IS NOT NULL
RETURN DISTINCT r.namespace AS namespace, startNode(r).memory_id AS src, endNode(r).memory_id AS dst,
       r.kind AS kind, r.created_at AS created_at
"""

_INDEXABLE_PAGE: LiteralString = """
MATCH (m:Memory)
WHERE m.status <> 'deleted' AND m.memory_id > $after
WITH m ORDER BY m.memory_id LIMIT $batch
OPTIONAL MATCH (e:Embedding {memory_id: m.memory_id, model: $model})
RETURN m.memory_id AS memory_id, e.vector AS vector
ORDER BY memory_id
"""

_COUNT_INDEXABLE: LiteralString = """
MATCH (m:Memory)
WHERE m.status <> 'deleted'
RETURN count(m) AS n
"""

_CONTENTS: LiteralString = """
UNWIND $ids AS id
MATCH (m:Memory {memory_id: id})
RETURN m.memory_id AS memory_id, m.content AS content
"""


def connect(
    uri: str,
    auth: tuple[str, str],
    *,
    database: str | None,
    pool_size: int,
    retry_time: float,
    migrations: str,
) -> tuple[neo4j.Driver, list[neo4j_migrations.Applied]]:
    """A driver to the server, connected, with the schema migrated (or, ``migrations =
    "check"``, verified); what the migrations did. Shared by the graph's adapters."""
    with _translate("open"):
        driver = neo4j.GraphDatabase.driver(
            uri, auth=auth, max_connection_pool_size=pool_size, max_transaction_retry_time=retry_time
        )
        try:
            driver.verify_connectivity()
            applied = neo4j_migrations.migrate(driver, database, mode=migrations)
        except BaseException:
            driver.close()
            raise
    return driver, applied


class Neo4jStore:
    """``Store`` over a Bolt server (see ``engine.ports.Store`` for the contract)."""

    def __init__(
        self,
        uri: str,
        *,
        user: str = "neo4j",
        password: str = "",
        database: str | None = None,
        max_connection_pool_size: int = 50,
        max_transaction_retry_time: float = 30.0,
        migrations: str = "apply",
    ) -> None:
        self._uri = uri
        self._migrations = migrations
        self._auth = (user, password)
        self._database = database or None
        self._pool_size = max_connection_pool_size
        self._retry_time = max_transaction_retry_time
        self._driver: neo4j.Driver | None = None
        self._server = reachability(uri)
        # One bookmark manager for every session of this store: each read sees at least
        # everything this process wrote or read before (causal consistency on a cluster,
        # where a read may otherwise go to a member that has not caught up).
        self._bookmarks = neo4j.GraphDatabase.bookmark_manager()
        self.migrations: list[neo4j_migrations.Applied] = []
        self.round_trips = RoundTrips()

    # --- lifecycle --------------------------------------------------------------

    def open(self) -> None:
        self._driver, self.migrations = connect(
            self._uri,
            self._auth,
            database=self._database,
            pool_size=self._pool_size,
            retry_time=self._retry_time,
            migrations=self._migrations,
        )

    def integrity(self) -> str:
        # The graph database checks its own pages; Bolt offers no portable way to ask.
        return "unchecked"

    def close(self) -> None:
        if self._driver is not None:
            driver, self._driver = self._driver, None
            with _translate("close"):
                driver.close()

    @property
    def driver(self) -> neo4j.Driver:
        if self._driver is None:
            raise StoreError("store is not open")
        return self._driver

    def _session(self, access_mode: str = neo4j.WRITE_ACCESS) -> neo4j.Session:
        return self.driver.session(
            database=self._database, bookmark_manager=self._bookmarks, default_access_mode=access_mode
        )

    def _write(self, what: str, work: Callable[[neo4j.ManagedTransaction], T]) -> T:
        """``work`` as one managed write transaction, retried whole by the driver on a
        transient error. A record that a transaction committed since this one matched
        it is a conflict too: ArcadeDB's optimistic transactions report it as
        ``EntityNotFound`` when a statement reaches it, and a change seq, a memory's next
        version or an entity another writer created first as a duplicate key on
        its unique index (``_KEYS_TAKEN``), client errors the driver does not retry, where
        Neo4j's locks would have made the writer wait. Those are tried
        again here in the same way, with a doubling pause until
        ``max_transaction_retry_time``; every transaction function can be run again."""
        deadline = time.monotonic() + self._retry_time
        delay = _FIRST_RETRY_DELAY_S
        with _translate(what, self._server, self._retry_time):
            self._server.check(self.driver)
            while True:
                try:
                    with self._session() as session:
                        return session.execute_write(self._counted(work))
                except (Neo4jError, _Unsettled) as exc:
                    lost_race = isinstance(exc, _Unsettled) or (
                        exc.code == _VANISHED
                        or (isinstance(exc, ConstraintError) and any(key in (exc.message or "") for key in _KEYS_TAKEN))
                    )
                    if not lost_race or time.monotonic() + delay > deadline:
                        if isinstance(exc, _Unsettled):
                            raise StoreError(f"{what}: {exc}") from exc
                        raise
                    log.info("%s: %s; trying again in %.2f s", what, exc, delay)
                    time.sleep(delay)
                    delay *= 2

    def _read(self, what: str, work: Callable[[neo4j.ManagedTransaction], T]) -> T:
        with _translate(what, self._server, self._retry_time):
            self._server.check(self.driver)
            with self._session() as session:
                return session.execute_read(self._counted(work))

    def _counted(self, work: Callable[[neo4j.ManagedTransaction], T]) -> Callable[[neo4j.ManagedTransaction], T]:
        """``work`` with every try and every statement it runs counted in ``round_trips``."""

        def counted(tx: neo4j.ManagedTransaction) -> T:
            self.round_trips.transaction()
            return work(cast(neo4j.ManagedTransaction, _CountingTransaction(tx, self.round_trips)))

        return counted

    def _rows(self, what: str, query: LiteralString, **params: Any) -> list[dict[str, Any]]:
        """The rows of a one-statement read, each value as the driver decoded it. Every
        statement here returns scalars, bytes, lists and ``properties(…)`` maps, never a
        node, so ``Record.data()`` would only copy them again, item by item: a Python call
        per list item and map entry, and per byte of a vector (2.9 ms a 384-dimension
        vector, against 0.1 ms for this)."""
        return self._one_read(what, query, params)

    def _one_read(self, what: str, query: LiteralString, params: dict[str, Any]) -> list[dict[str, Any]]:
        """A read of one statement, as an auto-commit transaction: one round trip (RUN and
        PULL go together), where a managed one adds BEGIN and COMMIT (about 1 ms a read on
        the Bolt test tier; a recall makes two). The bookmarks go with it as with any
        transaction of the session. A read can be repeated, so what the driver
        calls retryable (a leader change, a lost connection) is tried again, as a managed
        transaction would be, with a doubling pause from 0.1 s, until
        ``max_transaction_retry_time``."""
        deadline = time.monotonic() + self._retry_time
        delay = _FIRST_RETRY_DELAY_S
        with _translate(what, self._server, self._retry_time):
            self._server.check(self.driver)
            while True:
                try:
                    with self._session(neo4j.READ_ACCESS) as session:
                        self.round_trips.statement()
                        return [
                            dict(zip(record.keys(), record.values(), strict=True))
                            for record in session.run(query, params)
                        ]
                except (Neo4jError, DriverError) as exc:
                    if not exc.is_retryable() or time.monotonic() + delay > deadline:
                        raise
                    log.info("%s: %s; trying again in %.2f s", what, exc, delay)
                    time.sleep(delay)
                    delay *= 2

    # --- writes -----------------------------------------------------------------

    def insert(
        self,
        memories: Sequence[Memory],
        vectors: Sequence[Vector],
        *,
        changed_by: str | None,
        reason: str = "created",
    ) -> int:
        if len(memories) != len(vectors):
            raise ValueError("insert needs one vector per memory")
        if not memories:
            return self.last_seq()

        def work(tx: neo4j.ManagedTransaction) -> int:
            return _insert(tx, memories, vectors, changed_by, reason)

        return self._write("insert", work)

    def update(
        self,
        memory: Memory,
        vector: Vector | None,
        *,
        changed_by: str | None,
        reason: str,
        sets_base_score: bool = False,
        also: Sequence[tuple[Memory, str]] = (),
    ) -> int:
        def work(tx: neo4j.ManagedTransaction) -> int:
            if also:  # every memory by id before the counter (which _update takes): the lock order
                tx.run(_LOCK_MEMORIES, ids=sorted({memory.memory_id, *(r.memory_id for r, _ in also)})).consume()
            seq = _update(tx, memory, vector, changed_by, reason, sets_base_score)
            if also:
                _apply_updates(tx, also, changed_by)
                seq = _log(tx, [_change(record, "update") for record, _ in also])
            return seq

        return self._write("update", work)

    def insert_linked(
        self,
        memories: Sequence[Memory],
        vectors: Sequence[Vector],
        *,
        updates: Sequence[tuple[Memory, str]],
        edges: Sequence[Edge],
        changed_by: str | None,
        reason: str = "created",
        seen_seq: int | None = None,
    ) -> int:
        if len(memories) != len(vectors):
            raise ValueError("insert_linked needs one vector per memory")

        def work(tx: neo4j.ManagedTransaction) -> int:
            # Memories by id before the counter (which _insert takes): the lock order of every write.
            tx.run(_LOCK_MEMORIES, ids=sorted({record.memory_id for record, _ in updates})).consume()
            seq = _insert(tx, memories, vectors, changed_by, reason) if memories else None
            if seq is not None and seen_seq is not None and seq - len(memories) > seen_seq:
                # Read after the counter's lock (Neo4j), or tried again after the seq the
                # other writer took (ArcadeDB): its memory is committed and found here.
                base = seq - len(memories)
                rows = tx.run(
                    _INSERTED_BETWEEN,
                    after=seen_seq,
                    upto=base,
                    namespaces=sorted({memory.namespace for memory in memories}),
                ).data()
                purged = {row["changed"] for row in rows if row["op"] == "purge"}
                if base not in {row["seq"] for row in rows} or any(
                    row["op"] == "insert" and row["here"] and row["memory_id"] is None and row["changed"] not in purged
                    for row in rows
                ):
                    # ArcadeDB shows another writer's commit a part at a time: its counter
                    # and change before its memory (a probe's same-text races read the
                    # change without the memory in 7 of 20 and kept the text twice). Tried
                    # again once that commit is whole.
                    raise _Unsettled(f"the changes up to {base} are counted but not all readable yet")
                first = overtaking(
                    memories,
                    ((r["memory_id"], r["namespace"], r["session_id"], r["digest"]) for r in rows if r["memory_id"]),
                )
                if first is not None:
                    raise SaveOvertaken(first)
            if updates:
                _apply_updates(tx, updates, changed_by)
                seq = _log(tx, [_change(record, "update") for record, _ in updates])
            _merge_edges(tx, edges)
            if seq is None:
                counter = tx.run(_LAST_SEQ).single()
                seq = int(counter["seq"]) if counter else 0
            return seq

        return self._write("insert_linked", work)

    def reinforce(self, events: Sequence[Reinforcement], rescore: Rescore) -> None:
        if not events:
            return
        # Sorted, so that two transactions lock shared nodes in the same order.
        ids = sorted({memory_id for memory_id, _, _ in events})

        def work(tx: neo4j.ManagedTransaction) -> None:
            current = {
                memory.memory_id: memory
                for memory in (_memory(record["m"]) for record in tx.run(_LOCK_FOR_REINFORCE, ids=ids))
            }
            for memory_id, bonus, at in events:
                memory = current.get(memory_id)
                if memory is None:
                    continue
                current[memory_id] = memory.evolve(
                    base_score=rescore(memory, bonus, at),
                    access_count=min(memory.access_count + 1, limits.MAX_COUNTER),
                    last_accessed_at=max(memory.last_accessed_at, at),
                )
            rows = [
                {
                    "memory_id": m.memory_id,
                    "base_score": m.base_score,
                    "access_count": m.access_count,
                    "last_accessed_at": to_iso(m.last_accessed_at),
                }
                for m in current.values()
            ]
            tx.run(_APPLY_REINFORCE, rows=rows).consume()

        self._write("reinforce", work)

    def put_vectors(self, vectors: Mapping[str, Vector], model: str, *, embedding_version: str | None = None) -> None:
        if not vectors:
            return
        ids = sorted(vectors)
        rows = [_embedding_row(memory_id, model, vectors[memory_id]) for memory_id in ids]

        def work(tx: neo4j.ManagedTransaction) -> None:
            # Locked, then merged: two writers of one memory's vector take turns and leave one
            # node. Ids purged meanwhile match no memory and get no vector.
            held = tx.run(_LOCK_FOR_VECTORS, ids=ids, model=model).data()
            if embedding_version is not None:
                # A re-embedding: a vector of this model stored since the caller looked (an
                # edit's, on another replica, for its new text) is newer than this one.
                held = [row for row in held if not row["has_vector"]]
            wanted = {row["memory_id"] for row in held}
            tx.run(_MERGE_EMBEDDINGS, rows=[row for row in rows if row["memory_id"] in wanted]).consume()
            tx.run(_UNLOCK_MEMORIES, ids=ids).consume()
            if embedding_version is not None and held:
                tx.run(_MARK_MODEL, ids=sorted(wanted), model=model, embedding_version=embedding_version).consume()
                # The record now says which vector is in use: other replicas' index keepers
                # catch up from these changes and index the new vectors.
                at = to_iso(utcnow())
                changes = [
                    {"memory_id": row["memory_id"], "namespace": row["namespace"], "op": "reembed", "at": at}
                    for row in held
                ]
                _log(tx, changes)

        for attempt in range(_MERGE_TRIES):
            try:
                self._write("put_vectors", work)
                return
            except Conflict:
                # Where the lock does not make writers wait (ArcadeDB's optimistic
                # transactions), a racing writer may create the same (memory, model) node
                # first and the constraint refuses ours at commit: the next try merges onto it.
                if attempt == _MERGE_TRIES - 1:
                    raise

    def take_lease(self, name: str, holder: str, now: datetime, ttl: timedelta) -> bool:
        def work(tx: neo4j.ManagedTransaction) -> bool:
            lease = tx.run(_LOCK_LEASE, name=name).single()
            if not _lease_free(lease, holder, now):
                tx.run(_UNLOCK_LEASE, name=name).consume()
                return False
            tx.run(_SET_LEASE, name=name, holder=holder, expires_at=to_iso(now + ttl)).consume()
            return True

        return self._write("take_lease", work)

    def release_lease(self, name: str, holder: str) -> None:
        def work(tx: neo4j.ManagedTransaction) -> None:
            tx.run(_RELEASE_LEASE, name=name, holder=holder).consume()

        self._write("release_lease", work)

    def purge(self, namespace: str, memory_id: str, *, version: int | None = None) -> int:
        def work(tx: neo4j.ManagedTransaction) -> int:
            row = tx.run(_LOCK_FOR_PURGE, memory_id=memory_id, namespace=namespace).single()
            if row is None:
                raise MemoryNotFound(memory_id, namespace)
            memory = _memory(row["m"])
            expect_version(memory_id, memory.version, version)
            unlinked = tx.run(_UNLINK_ENTITIES, ids=[memory_id]).data()
            tx.run(_PURGE_VERSIONS, memory_id=memory_id).consume()
            tx.run(_DROP_EMBEDDINGS, memory_id=memory_id).consume()
            tx.run(_PURGE_MEMORY, memory_id=memory_id).consume()
            tx.run(_DROP_ORPHAN_ENTITIES, entities=unlinked).consume()
            return _log(tx, [_change(memory, "purge")])

        return self._write("purge", work)

    def add_edges(self, edges: Sequence[Edge]) -> None:
        if not edges:
            return

        def work(tx: neo4j.ManagedTransaction) -> None:
            _merge_edges(tx, edges)

        self._write("add_edges", work)

    def import_records(self, records: Sequence[ImportedRecord], *, changed_by: str | None) -> list[str]:
        if not records:
            return []
        ids = [record.memory.memory_id for record in records]
        onward = sorted({record.memory.memory_id for record in records if record.forward_from is not None})

        def work(tx: neo4j.ManagedTransaction) -> list[str]:
            # Memories brought forward are locked first, before the counter (which _log takes).
            locked = {
                memory.memory_id: memory for memory in (_memory(row["m"]) for row in tx.run(_LOCK_MEMORIES, ids=onward))
            }
            held = {row["memory_id"]: row["namespace"] for row in tx.run(_ID_NAMESPACES, ids=ids)}
            fresh: dict[str, ImportedRecord] = {}
            later: dict[str, tuple[ImportedRecord, Memory]] = {}
            for record in records:
                memory = record.memory
                if memory.memory_id in held and held[memory.memory_id] != memory.namespace:
                    raise Conflict(
                        f"memory id {memory.memory_id} is taken by another namespace", memory_id=memory.memory_id
                    )
                there = locked.get(memory.memory_id)
                if memory.memory_id not in held:
                    fresh.setdefault(memory.memory_id, record)
                elif there is not None and there.version == record.forward_from:
                    later.setdefault(memory.memory_id, (record, there))
            if not fresh and not later:
                return []
            news = list(fresh.values())
            memories = [record.memory for record in news]
            tx.run(_CREATE_MEMORIES, rows=[_props(m) for m in memories]).consume()
            embeddings = [
                _embedding_row(r.memory.memory_id, r.memory.embedding_model, r.vector)
                for r in news
                if r.vector is not None
            ]
            tx.run(_PUT_EMBEDDINGS, rows=embeddings).consume()
            versions = [
                {
                    **_version_row(v.record, v.changed_by, v.reason),
                    "changed_at": to_iso(v.changed_at),
                    "namespace": r.memory.namespace,
                }
                for r in news
                for v in r.versions
            ] + [_version_row(r.memory, changed_by, "imported") for r in news if not r.versions]
            tx.run(_CREATE_IMPORTED_VERSIONS, rows=versions).consume()
            tx.run(_LINK_ENTITIES, links=[link for m in memories for link in _entity_links(m)]).consume()
            _merge_edges(tx, [edge for r in news for edge in r.edges])
            # After the new records: a link from a memory brought forward may point to one.
            onward_written = _bring_forward(tx, list(later.values()))
            _log(tx, [_change(m, "import") for m in (*memories, *onward_written)])
            stored = {m.memory_id for m in (*memories, *onward_written)}
            return [memory_id for memory_id in dict.fromkeys(ids) if memory_id in stored]

        return self._write("import_records", work)

    # --- scoped reads -----------------------------------------------------------

    def get(self, scope: Scope, memory_id: str) -> Memory | None:
        if not scope.namespaces:
            return None
        rows = self._rows("get", _GET, memory_id=memory_id, **_scope_params(scope))
        return _memory(rows[0]["m"]) if rows else None

    def get_many(
        self,
        scope: Scope,
        ids: Sequence[str],
        flt: MemoryFilter,
        now: datetime,
    ) -> list[Memory]:
        wanted = _metadata_filter(flt)
        if not ids or not scope.namespaces:
            return []
        rows = self._rows("get_many", _GET_MANY, ids=list(ids), **_filter_params(scope, flt, now))
        return [m for m in (_memory(row["m"]) for row in rows) if _metadata_matches(m, wanted)]

    def get_many_and_seq(
        self,
        scope: Scope,
        ids: Sequence[str],
        flt: MemoryFilter,
        now: datetime,
    ) -> tuple[list[Memory], int]:
        wanted = _metadata_filter(flt)
        asked = list(ids) if scope.namespaces else []
        rows = self._rows("get_many_and_seq", _GET_MANY_AND_SEQ, ids=asked, **_filter_params(scope, flt, now))
        if not rows:
            raise StoreError(_NO_COUNTER)
        found = (_memory(record) for record in rows[0]["found"])
        return [m for m in found if _metadata_matches(m, wanted)], int(rows[0]["seq"])

    def find_by_digest(self, scope: Scope, digest: str) -> list[Memory]:
        if not scope.namespaces:
            return []
        rows = self._rows("find_by_digest", _FIND_BY_DIGEST, digest=digest, **_scope_params(scope))
        return [_memory(row["m"]) for row in rows]

    def list_page(
        self,
        scope: Scope,
        flt: MemoryFilter,
        now: datetime,
        *,
        limit: int,
        cursor: str | None = None,
    ) -> Page:
        wanted = _metadata_filter(flt)
        after = decode_cursor(cursor) if cursor is not None else None
        if not scope.namespaces:
            return Page((), None)
        params = _filter_params(scope, flt, now)
        found = list(self._scan("list", _LIST, params, wanted, limit + 1, after))
        items = tuple(found[:limit])
        next_cursor = None
        if len(found) > limit:
            last = items[-1]
            next_cursor = encode_cursor(to_iso(last.created_at), last.memory_id)
        return Page(items, next_cursor)

    def filtered_ids(self, scope: Scope, flt: MemoryFilter, now: datetime, limit: int) -> list[str]:
        wanted = _metadata_filter(flt)
        if not scope.namespaces:
            return []
        params = _filter_params(scope, flt, now)
        if wanted:
            return [m.memory_id for m in self._scan("filtered_ids", _LIST, params, wanted, limit, None)]
        rows = self._rows("filtered_ids", _FILTERED_IDS, limit=limit, **params)
        return [row["memory_id"] for row in rows]

    def _scan(
        self,
        what: str,
        query: LiteralString,
        params: dict[str, Any],
        wanted: dict[str, Any],
        count: int,
        after: tuple[str, str] | None,
    ) -> Iterator[Memory]:
        """Up to ``count`` memories of a newest-first ``query`` (one with ``_CURSOR``)
        after ``after``, metadata checked here, fetched a chunk at a time."""
        if count <= 0:
            return
        chunk = count if not wanted else max(count, _SCAN_CHUNK)
        found = 0
        while found < count:
            cursor_at, cursor_id = after if after else (_NEWEST, "")
            rows = self._rows(what, query, limit=chunk, cursor_at=cursor_at, cursor_id=cursor_id, **params)
            for row in rows:
                memory = _memory(row["m"])
                after = (to_iso(memory.created_at), memory.memory_id)
                if _metadata_matches(memory, wanted):
                    yield memory
                    found += 1
                    if found == count:
                        return
            if len(rows) < chunk:
                return

    def versions(self, scope: Scope, memory_id: str) -> list[Version]:
        if self.get(scope, memory_id) is None:  # no history of a memory out of sight
            return []
        rows = self._rows("versions", _VERSIONS, memory_id=memory_id)
        kept = [
            Version(
                memory_id,
                row["version"],
                memory_from_dict(json.loads(row["record"])),
                from_iso(row["changed_at"]),
                row["changed_by"],
                row["reason"],
            )
            for row in rows
        ]
        return [version for version in kept if scope.sees(version.record)]

    def edges(self, scope: Scope, memory_id: str) -> list[Edge]:
        if not scope.namespaces:
            return []
        params = _scope_params(scope)
        rows = self._rows("edges", _EDGES, memory_id=memory_id, namespaces=params["namespaces"])
        # Both ends must be in sight: a link must not reveal a memory the caller cannot read.
        ends = list({end for row in rows for end in (row["src"], row["dst"])} | {memory_id})
        seen = {row["memory_id"] for row in self._rows("edges", _SEEN, ids=ends, **params)}
        if memory_id not in seen:
            return []
        # A link from the memory to itself matches in both directions: keep it once.
        found = {
            (row["src"], row["dst"], row["kind"]): Edge(
                row["namespace"], row["src"], row["dst"], row["kind"], from_iso(row["created_at"])
            )
            for row in rows
            if row["src"] in seen and row["dst"] in seen
        }
        return sorted(found.values(), key=lambda edge: edge.created_at)

    def versions_of(self, scope: Scope, ids: Sequence[str]) -> dict[str, list[Version]]:
        found: dict[str, list[Version]] = {memory_id: [] for memory_id in ids}
        if not found or not scope.namespaces:
            return found
        # No history of a memory out of sight.
        seen = [row["memory_id"] for row in self._rows("versions_of", _SEEN, ids=list(found), **_scope_params(scope))]
        rows = self._rows("versions_of", _VERSIONS_OF, ids=seen) if seen else []
        for row in sorted(rows, key=lambda row: (row["memory_id"], row["version"])):
            version = Version(
                row["memory_id"],
                row["version"],
                memory_from_dict(json.loads(row["record"])),
                from_iso(row["changed_at"]),
                row["changed_by"],
                row["reason"],
            )
            if scope.sees(version.record):
                found[version.memory_id].append(version)
        return found

    def edges_of(self, scope: Scope, ids: Sequence[str]) -> dict[str, list[Edge]]:
        found: dict[str, list[Edge]] = {memory_id: [] for memory_id in ids}
        if not found or not scope.namespaces:
            return found
        params = _scope_params(scope)
        rows = self._rows("edges_of", _EDGES_OF, ids=list(found), namespaces=params["namespaces"])
        # Both ends must be in sight: a link must not reveal a memory the caller cannot read.
        ends = list({end for row in rows for end in (row["src"], row["dst"])} | set(found))
        seen = {row["memory_id"] for row in self._rows("edges_of", _SEEN, ids=ends, **params)}
        # A link comes back from each end of it in ``ids``: keep it once.
        links = {
            (row["src"], row["dst"], row["kind"]): Edge(
                row["namespace"], row["src"], row["dst"], row["kind"], from_iso(row["created_at"])
            )
            for row in rows
            if row["src"] in seen and row["dst"] in seen
        }
        for edge in sorted(links.values(), key=lambda edge: (edge.created_at, edge.src, edge.dst, edge.kind)):
            for end in {edge.src, edge.dst} & found.keys():
                found[end].append(edge)
        return found

    def find_by_key(self, scope: Scope, key: str) -> list[Memory]:
        if not scope.namespaces:
            return []
        rows = self._rows("find_by_key", _FIND_BY_KEY, key=key, **_scope_params(scope))
        return [_memory(row["m"]) for row in rows]

    def memories_by_entity(
        self,
        scope: Scope,
        entity_key: str,
        flt: MemoryFilter,
        now: datetime,
        limit: int,
    ) -> list[Memory]:
        wanted = _metadata_filter(flt)
        if not scope.namespaces:
            return []
        params = {**_filter_params(scope, flt, now), "entity_key": entity_key}
        return list(self._scan("memories_by_entity", _BY_ENTITY, params, wanted, limit, None))

    def vectors(self, ids: Sequence[str], model: str) -> dict[str, Vector]:
        if not ids:
            return {}
        rows = self._rows("vectors", _VECTORS, ids=list(ids), model=model)
        return {row["memory_id"]: _vector(row["vector"]) for row in rows}

    # --- change sequence ----------------------------------------------------------

    def last_seq(self) -> int:
        rows = self._rows("last_seq", _LAST_SEQ)
        if not rows:
            raise StoreError(_NO_COUNTER)
        return int(rows[0]["seq"])

    def changes_since(self, seq: int, limit: int) -> list[Change]:
        rows = self._rows("changes_since", _CHANGES_SINCE, seq=seq, limit=limit)
        return [Change(row["seq"], row["memory_id"], row["namespace"], row["op"]) for row in rows]

    def low_water_seq(self) -> int:
        rows = self._rows("low_water_seq", _LOW_WATER)
        if not rows:
            raise StoreError(_NO_COUNTER)
        return int(rows[0]["seq"])

    def prune_changes(self, keep: int, limit: int) -> int:
        if keep < 1:
            raise ValueError("the change log keeps at least its newest change")

        def work(tx: neo4j.ManagedTransaction) -> int:
            bounds = tx.run(_PRUNE_BOUNDS).single()
            if bounds is None:
                raise StoreError(_NO_COUNTER)
            low = int(bounds["low"])
            mark = min(int(bounds["newest"]) - keep, low + limit)
            if mark <= low:
                return 0
            # Seqs are consecutive, so the range holds mark - low changes.
            tx.run(_PRUNE_CHANGES, low=low, mark=mark).consume()
            tx.run(_RAISE_LOW_WATER, mark=mark).consume()
            return mark - low

        return self._write("prune_changes", work)

    def index_status(self, ids: Sequence[str]) -> dict[str, Status]:
        if not ids:
            return {}
        rows = self._rows("index_status", _INDEX_STATUS, ids=list(ids))
        return {row["memory_id"]: Status(row["status"]) for row in rows}

    def links(self, ids: Sequence[str]) -> list[Edge]:
        if not ids:
            return []
        rows = self._rows("links", _LINKS, ids=list(ids))
        found = {
            (row["src"], row["dst"], row["kind"]): Edge(
                row["namespace"], row["src"], row["dst"], row["kind"], from_iso(row["created_at"])
            )
            for row in rows
        }
        return list(found.values())

    def iter_indexable(self, model: str, batch: int) -> Iterator[tuple[list[str], Matrix, list[str]]]:
        after = ""
        while True:
            rows = self._rows("iter_indexable", _INDEXABLE_PAGE, after=after, batch=batch, model=model)
            if not rows:
                return
            after = rows[-1]["memory_id"]
            have = [(row["memory_id"], row["vector"]) for row in rows if row["vector"] is not None]
            missing = [row["memory_id"] for row in rows if row["vector"] is None]
            yield [memory_id for memory_id, _ in have], _matrix([values for _, values in have]), missing

    def namespaces(self) -> list[str]:
        return [row["namespace"] for row in self._rows("namespaces", _NAMESPACES)]

    def scan(self, scope: Scope, after: str, limit: int) -> list[Memory]:
        if not scope.namespaces:
            return []
        rows = self._rows("scan", _SCAN, after=after, limit=limit, **_scope_params(scope))
        return [_memory(row["m"]) for row in rows]

    def missing_vectors(self, model: str, after: str, limit: int) -> list[str]:
        rows = self._rows("missing_vectors", _MISSING_VECTORS, model=model, after=after, limit=limit)
        return [row["memory_id"] for row in rows]

    def missing_vector_models(self, model: str) -> dict[str, int]:
        rows = self._rows("missing_vector_models", _MISSING_VECTOR_MODELS, model=model)
        return {row["model"]: int(row["n"]) for row in rows}

    def count_indexable(self) -> int:
        return int(self._rows("count_indexable", _COUNT_INDEXABLE)[0]["n"])

    def contents(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        rows = self._rows("contents", _CONTENTS, ids=list(ids))
        return {row["memory_id"]: row["content"] for row in rows}


class _CountingTransaction:
    """A managed transaction that counts the statements run through it."""

    def __init__(self, tx: neo4j.ManagedTransaction, counts: RoundTrips) -> None:
        self._tx = tx
        self._counts = counts

    def run(self, query: LiteralString, parameters: dict[str, Any] | None = None, **kwargs: Any) -> neo4j.Result:
        self._counts.statement()
        return self._tx.run(query, parameters, **kwargs)


# --- error translation ------------------------------------------------------------------


class Reachability:
    """Whether the Bolt server at one address answered the last call that needed it.

    A call that gave up on a server it could not reach (``ServiceUnavailable`` or
    ``SessionExpired`` once its retries were spent: after at least half its retry window,
    where a one-statement read's doubling pause makes it stop) marks it away. One error
    raised at once does not: a commit whose connection dropped (``IncompleteCommit``,
    never retried) or one dropped connection says nothing about the server being down,
    and marked away on it, every request answered 503 at once for the rest of a restart
    that they used to wait out (13 s), a committed save's audit entry among them. Until a call gets
    through again, each call first checks the connection once (``verify_connectivity``,
    refused at once by a server that is down) and fails with that, instead of waiting out
    ``max_transaction_retry_time`` again: otherwise every store call of a request waited
    that long on its own, a recall 2 x 30 s at the defaults (its read, then its audit
    entry), past twinmem_client's 30 s time-out, request after request. Shared by every
    adapter on one address (``reachability``), so the memory store and the security
    store learn it from each other.
    """

    def __init__(self) -> None:
        self._away = False

    def away(self) -> None:
        self._away = True

    def failed(self, exc: DriverError, waited: float, retry_time: float) -> None:
        """Marks the server away if ``exc``, after ``waited`` seconds of a call that retries
        for ``retry_time``, shows it unreachable (see the class)."""
        unreachable = isinstance(exc, ServiceUnavailable | SessionExpired) and not isinstance(exc, IncompleteCommit)
        if unreachable and waited >= retry_time / 2:
            self.away()

    def check(self, driver: neo4j.Driver) -> None:
        """Raises the driver's error at once while the server is marked away and still is."""
        if self._away:
            driver.verify_connectivity()
            self._away = False


_SERVERS: dict[str, Reachability] = {}
_SERVERS_LOCK = threading.Lock()


def reachability(uri: str) -> Reachability:
    """The one ``Reachability`` of the server at ``uri`` in this process."""
    with _SERVERS_LOCK:
        return _SERVERS.setdefault(uri, Reachability())


@contextmanager
def _translate(what: str, server: Reachability | None = None, retry_time: float = 0.0) -> Iterator[None]:
    """Driver errors become engine errors here; nothing above sees ``neo4j.exceptions``.
    A server that a call retrying for ``retry_time`` could not reach is marked away on
    ``server`` (``Reachability.failed``)."""
    started = time.monotonic()
    try:
        yield
    except ConstraintError as exc:
        raise Conflict(f"{what}: {exc.message or exc}") from exc
    except Neo4jError as exc:
        raise StoreError(f"{what} failed in the graph store: {exc.code}: {exc.message}") from exc
    except DriverError as exc:
        if server is not None:
            server.failed(exc, time.monotonic() - started, retry_time)
        raise StoreError(f"{what} failed in the graph store driver: {exc}") from exc
    except ValueError as exc:
        # The driver refuses a malformed URI or configuration with ValueError.
        if what == "open":
            raise StoreError(f"cannot open the graph store: {exc}") from exc
        raise


# --- record mapping -------------------------------------------------------------------------


def _props(memory: Memory) -> dict[str, Any]:
    """The node's properties: the record's fields, metadata as JSON, plus the digest."""
    props = memory_to_dict(memory)
    props["metadata"] = json.dumps(props["metadata"], ensure_ascii=False, sort_keys=True)
    props["digest"] = memory.digest
    # A property cannot be null: an absent optional field is an absent property.
    return {key: value for key, value in props.items() if value is not None}


def _memory(props: Mapping[str, Any]) -> Memory:
    data = dict(props)
    data["metadata"] = json.loads(data.get("metadata") or "{}")
    return memory_from_dict(data)


def _embedding_row(memory_id: str, model: str, vector: Vector) -> dict[str, Any]:
    data = np.ascontiguousarray(vector, dtype=np.float32)
    return {
        "memory_id": memory_id,
        "model": model,
        "dim": int(data.shape[0]),
        "vector": data.astype(_VECTOR_BYTES).tobytes(),
    }


def _vector(stored: bytes | Sequence[float]) -> Vector:
    """A stored vector: float32 bytes, or a list of floats as versions before 0006 wrote them."""
    if isinstance(stored, bytes | bytearray):
        return np.frombuffer(stored, dtype=_VECTOR_BYTES).astype(np.float32)
    return np.asarray(stored, dtype=np.float32)


def _matrix(stored: Sequence[bytes | Sequence[float]]) -> Matrix:
    """Stored vectors as rows; a page of byte strings of one length is one buffer read."""
    if not stored:
        return np.zeros((0, 0), dtype=np.float32)
    first = stored[0]
    if all(isinstance(v, bytes) and len(v) == len(first) for v in stored):
        flat = np.frombuffer(b"".join(stored), dtype=_VECTOR_BYTES)  # type: ignore[arg-type]
        return flat.reshape(len(stored), -1).astype(np.float32)
    return np.vstack([_vector(v) for v in stored])


def _lease_free(lease: neo4j.Record | None, holder: str, now: datetime) -> bool:
    """Whether ``holder`` may take the lease: free, its own, or expired."""
    if lease is None or lease["holder"] is None or lease["holder"] == holder:
        return True
    return lease["expires_at"] is None or from_iso(lease["expires_at"]) <= now


def _version_row(memory: Memory, changed_by: str | None, reason: str) -> dict[str, Any]:
    return {
        "memory_id": memory.memory_id,
        "version": memory.version,
        "namespace": memory.namespace,
        "record": json.dumps(memory_to_dict(memory), ensure_ascii=False),
        "changed_at": to_iso(memory.updated_at),
        "changed_by": changed_by,
        "reason": reason,
    }


def _entity_links(memory: Memory) -> list[dict[str, str]]:
    links: dict[str, str] = {}
    for name in memory.entities:
        links.setdefault(next(iter(entity_keys([name]))), name)
    return [
        {"memory_id": memory.memory_id, "namespace": memory.namespace, "key": key, "name": name}
        for key, name in links.items()
    ]


class _Unsettled(Exception):
    """Another writer's commit is only partly readable yet: the transaction is tried again
    (``_write``), as after a lost race."""


def _insert(
    tx: neo4j.ManagedTransaction,
    memories: Sequence[Memory],
    vectors: Sequence[Vector],
    changed_by: str | None,
    reason: str,
) -> int:
    ids = [m.memory_id for m in memories]
    existing = tx.run(_EXISTING_IDS, ids=ids).single()
    if existing is not None:
        memory_id = existing["memory_id"]
        raise Conflict(f"memory {memory_id} already exists", memory_id=memory_id)
    embeddings = [_embedding_row(m.memory_id, m.embedding_model, v) for m, v in zip(memories, vectors, strict=True)]
    tx.run(_CREATE_MEMORIES, rows=[_props(m) for m in memories]).consume()
    tx.run(_PUT_EMBEDDINGS, rows=embeddings).consume()
    tx.run(_CREATE_VERSIONS, rows=[_version_row(m, changed_by, reason) for m in memories]).consume()
    tx.run(_LINK_ENTITIES, links=[link for m in memories for link in _entity_links(m)]).consume()
    return _log(tx, [_change(m, "insert") for m in memories])


def _update(
    tx: neo4j.ManagedTransaction,
    memory: Memory,
    vector: Vector | None,
    changed_by: str | None,
    reason: str,
    sets_base_score: bool = False,
) -> int:
    memory = _apply_updates(
        tx, [(memory, reason)], changed_by, revectored=vector is not None, sets_base_score=sets_base_score
    )[0]
    if vector is not None:
        tx.run(_DROP_EMBEDDINGS, memory_id=memory.memory_id).consume()
        tx.run(_PUT_EMBEDDINGS, rows=[_embedding_row(memory.memory_id, memory.embedding_model, vector)]).consume()
    return _log(tx, [_change(memory, "update")])


def _apply_updates(
    tx: neo4j.ManagedTransaction,
    updates: Sequence[tuple[Memory, str]],
    changed_by: str | None,
    *,
    revectored: bool = False,
    sets_base_score: bool = False,
) -> list[Memory]:
    """Write each (record, why) as ``Store.update`` would, in order, in six statements
    whatever their number (several of one id carry consecutive versions): each over the
    locked node's current values (``Memory.over``: accesses only accumulate, the base
    score is the edit's only when ``sets_base_score``, the vector fields only when
    ``revectored``). Returns the records as written; the caller logs the changes."""
    held = {
        stored.memory_id: stored
        for stored in (
            _memory(row["m"]) for row in tx.run(_LOCK_MEMORIES, ids=sorted({m.memory_id for m, _ in updates}))
        )
    }
    versions = {memory_id: stored.version for memory_id, stored in held.items()}
    written: list[Memory] = []
    for memory, _ in updates:
        stored = held.get(memory.memory_id)
        if stored is None or stored.namespace != memory.namespace:
            raise MemoryNotFound(memory.memory_id, memory.namespace)
        if memory.version != versions[memory.memory_id] + 1:  # another writer came first
            raise StaleWrite(memory.memory_id, replaces=memory.version - 1, current=versions[memory.memory_id])
        versions[memory.memory_id] = memory.version
        written.append(memory.over(stored, revectored=revectored, sets_base_score=sets_base_score))
    latest = {memory.memory_id: memory for memory in written}
    tx.run(_REPLACE_MEMORIES, rows=[{"memory_id": i, "props": _props(m)} for i, m in latest.items()]).consume()
    unlinked = tx.run(_UNLINK_ENTITIES, ids=list(latest)).data()
    tx.run(_LINK_ENTITIES, links=[link for m in latest.values() for link in _entity_links(m)]).consume()
    tx.run(_DROP_ORPHAN_ENTITIES, entities=unlinked).consume()
    rows = [_version_row(m, changed_by, why) for m, (_, why) in zip(written, updates, strict=True)]
    tx.run(_CREATE_VERSIONS, rows=rows).consume()
    return written


def _bring_forward(tx: neo4j.ManagedTransaction, later: Sequence[tuple[ImportedRecord, Memory]]) -> list[Memory]:
    """Each imported record written over its locked stored record (at the record's
    ``forward_from``; ``Store.import_records``): the versions after it, its links, and
    its vector when it brings one. Returns the records as written; the caller logs them."""
    if not later:
        return []
    written = [
        record.memory.over(there, revectored=record.vector is not None, sets_base_score=True) for record, there in later
    ]
    tx.run(_REPLACE_MEMORIES, rows=[{"memory_id": m.memory_id, "props": _props(m)} for m in written]).consume()
    ids = [m.memory_id for m in written]
    unlinked = tx.run(_UNLINK_ENTITIES, ids=ids).data()
    tx.run(_LINK_ENTITIES, links=[link for m in written for link in _entity_links(m)]).consume()
    tx.run(_DROP_ORPHAN_ENTITIES, entities=unlinked).consume()
    revectored = [
        (m, record.vector) for m, (record, _) in zip(written, later, strict=True) if record.vector is not None
    ]
    for memory, _ in revectored:
        tx.run(_DROP_EMBEDDINGS, memory_id=memory.memory_id).consume()
    tx.run(_PUT_EMBEDDINGS, rows=[_embedding_row(m.memory_id, m.embedding_model, v) for m, v in revectored]).consume()
    versions = [
        {
            **_version_row(v.record, v.changed_by, v.reason),
            "changed_at": to_iso(v.changed_at),
            "namespace": memory.namespace,
        }
        for memory, (record, there) in zip(written, later, strict=True)
        for v in record.versions
        if v.version > there.version
    ]
    tx.run(_CREATE_IMPORTED_VERSIONS, rows=versions).consume()
    _merge_edges(tx, [edge for record, _ in later for edge in record.edges])
    return written


def _merge_edges(tx: neo4j.ManagedTransaction, edges: Sequence[Edge]) -> None:
    """MERGE each link once per (src, dst, kind); links whose ends do not both exist are dropped."""
    by_query: dict[LiteralString, list[dict[str, str]]] = {}
    for edge in edges:
        by_query.setdefault(_MERGE_EDGE.get(edge.kind, _MERGE_OTHER_EDGE), []).append(
            {
                "src": edge.src,
                "dst": edge.dst,
                "kind": edge.kind,
                "namespace": edge.namespace,
                "created_at": to_iso(edge.created_at),
            }
        )
    for query, rows in by_query.items():
        tx.run(query, edges=rows).consume()


def _change(memory: Memory, op: str) -> dict[str, str]:
    return {"memory_id": memory.memory_id, "namespace": memory.namespace, "op": op, "at": to_iso(memory.updated_at)}


def _log(tx: neo4j.ManagedTransaction, changes: list[dict[str, str]]) -> int:
    record = tx.run(_LOG_CHANGES, changes=changes).single()
    if record is None or record["seq"] is None:
        raise StoreError(_NO_COUNTER)
    return int(record["seq"])


# --- filters --------------------------------------------------------------------------------


def _scope_params(scope: Scope) -> dict[str, Any]:
    return {
        "namespaces": list(scope.namespaces),
        "full": list(scope.full),
        "member": list(scope.member),
        "public": list(scope.public),
        "own": list(scope.own),
        "agent": scope.agent,
    }


def _filter_params(scope: Scope, flt: MemoryFilter, now: datetime) -> dict[str, Any]:
    return {
        **_scope_params(scope),
        "statuses": [s.value for s in flt.statuses] or None,
        "categories": list(flt.categories) or None,
        "sources": [s.value for s in flt.sources] or None,
        "created_after": to_iso(flt.created_after) if flt.created_after else None,
        "created_before": to_iso(flt.created_before) if flt.created_before else None,
        "session_id": flt.session_id,
        "now": None if flt.include_expired else to_iso(now),
    }


def _metadata_filter(flt: MemoryFilter) -> dict[str, Any]:
    """The metadata equalities, keys checked the way the SQLite store checks them."""
    for key in flt.metadata:
        problem = metadata_key_problem(key)
        if problem:
            raise InvalidInput(problem, field="filter.metadata")
    return dict(flt.metadata)


_MISSING = object()


def _metadata_matches(memory: Memory, wanted: Mapping[str, Any]) -> bool:
    return _metadata_matches_dict(memory.metadata, wanted)


def _metadata_matches_dict(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """JSON equality per dotted path: types must agree (``1`` is not ``true``, ``"null"`` is not null)."""
    for key, value in wanted.items():
        node: Any = metadata
        for part in key.split("."):
            node = node.get(part, _MISSING) if isinstance(node, Mapping) else _MISSING
        if value is None:
            ok = node is None
        elif isinstance(value, bool):
            ok = isinstance(node, bool) and node == value
        elif isinstance(value, str):
            ok = isinstance(node, str) and node == value
        else:
            ok = isinstance(node, int | float) and not isinstance(node, bool) and node == value
        if not ok:
            return False
    return True


def _metadata_matches_json(metadata: str | None, wanted: Mapping[str, Any]) -> bool:
    return _metadata_matches_dict(json.loads(metadata or "{}"), wanted)
