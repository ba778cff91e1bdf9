// A memory by its explicit key in a namespace (the key rule of the conflict check, and
// find_by_key): without it the lookup walks the namespace's memories.
CREATE INDEX memory_namespace_key IF NOT EXISTS
FOR (m:Memory) ON (m.namespace, m.key);
