// requires: neo4j
// Neo4j's full-text (Lucene) index over memory content, for the lexical recall channel.
// ArcadeDB's Cypher accepts only standard, RANGE and TEXT indexes, so on ArcadeDB this
// file is recorded as skipped.
CREATE FULLTEXT INDEX memory_content IF NOT EXISTS
FOR (m:Memory) ON EACH [m.content];
