// Server mode keeps tokens, blocked sources and the audit chain in the graph, beside the
// memories, so that every replica enforces the same tokens and blocks and appends to one
// audit chain (engine/adapters/neo4j_security_store.py).
CREATE CONSTRAINT token_id_unique IF NOT EXISTS
FOR (t:Token) REQUIRE t.token_id IS UNIQUE;

CREATE CONSTRAINT token_hash_unique IF NOT EXISTS
FOR (t:Token) REQUIRE t.token_hash IS UNIQUE;

CREATE CONSTRAINT block_source_unique IF NOT EXISTS
FOR (b:Block) REQUIRE (b.kind, b.value) IS UNIQUE;

CREATE CONSTRAINT audit_seq_unique IF NOT EXISTS
FOR (a:AuditEntry) REQUIRE a.seq IS UNIQUE;

CREATE INDEX audit_actor IF NOT EXISTS
FOR (a:AuditEntry) ON (a.actor);

CREATE INDEX audit_action IF NOT EXISTS
FOR (a:AuditEntry) ON (a.action);

CREATE INDEX audit_at IF NOT EXISTS
FOR (a:AuditEntry) ON (a.at);

// The head of the audit chain: an appender locks it, takes the next seq and the last
// hash from it, and moves it on, all in one transaction, so the chain has one order.
MERGE (h:Counter {name: 'audit'})
ON CREATE SET h.seq = 0, h.hash = '0000000000000000000000000000000000000000000000000000000000000000';
