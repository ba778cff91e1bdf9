// Vectors: one (:Embedding) per (memory, model), and the re-embedding lease.
// The uniqueness constraint replaces 0002's plain index on the same properties (a
// constraint cannot be created beside an index on the same schema). Copies that
// writers racing before this step left behind are dropped first, keeping one each.
// Vectors stored as lists of floats by earlier versions stay readable as they are;
// each is written as float32 bytes the next time it is stored.
DROP INDEX embedding_memory IF EXISTS;

MATCH (e:Embedding)
WITH e.memory_id AS memory_id, e.model AS model, collect(e) AS copies
WHERE size(copies) > 1
UNWIND copies[1..] AS extra
DETACH DELETE extra;

CREATE CONSTRAINT embedding_memory_model_unique IF NOT EXISTS
FOR (e:Embedding) REQUIRE (e.memory_id, e.model) IS UNIQUE;

CREATE CONSTRAINT lease_name_unique IF NOT EXISTS
FOR (l:Lease) REQUIRE l.name IS UNIQUE;

MERGE (l:Lease {name: 'reembed'});
