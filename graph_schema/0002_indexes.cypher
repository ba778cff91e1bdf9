// Indexes for the scoped reads: by namespace (and time), status, content digest.
CREATE INDEX memory_namespace IF NOT EXISTS
FOR (m:Memory) ON (m.namespace);

CREATE INDEX memory_namespace_created IF NOT EXISTS
FOR (m:Memory) ON (m.namespace, m.created_at);

CREATE INDEX memory_status IF NOT EXISTS
FOR (m:Memory) ON (m.status);

CREATE INDEX memory_digest IF NOT EXISTS
FOR (m:Memory) ON (m.namespace, m.digest);

CREATE INDEX memory_version_memory IF NOT EXISTS
FOR (v:MemoryVersion) ON (v.memory_id);

CREATE INDEX embedding_memory IF NOT EXISTS
FOR (e:Embedding) ON (e.memory_id, e.model);

CREATE INDEX entity_name IF NOT EXISTS
FOR (e:Entity) ON (e.name);
