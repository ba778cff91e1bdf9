// Uniqueness constraints; each also gives an index on its key.
CREATE CONSTRAINT memory_id_unique IF NOT EXISTS
FOR (m:Memory) REQUIRE m.memory_id IS UNIQUE;

CREATE CONSTRAINT entity_key_unique IF NOT EXISTS
FOR (e:Entity) REQUIRE (e.namespace, e.key) IS UNIQUE;

CREATE CONSTRAINT memory_version_unique IF NOT EXISTS
FOR (v:MemoryVersion) REQUIRE (v.memory_id, v.version) IS UNIQUE;

CREATE CONSTRAINT change_seq_unique IF NOT EXISTS
FOR (c:Change) REQUIRE c.seq IS UNIQUE;

CREATE CONSTRAINT counter_name_unique IF NOT EXISTS
FOR (c:Counter) REQUIRE c.name IS UNIQUE;

CREATE CONSTRAINT schema_migration_unique IF NOT EXISTS
FOR (s:SchemaMigration) REQUIRE s.number IS UNIQUE;
