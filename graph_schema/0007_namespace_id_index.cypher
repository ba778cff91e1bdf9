// A namespace's memories by id: the paged scan (``Store.scan``) walks a namespace in id
// order a page at a time; without it each page reads the whole namespace.
CREATE INDEX memory_namespace_id IF NOT EXISTS
FOR (m:Memory) ON (m.namespace, m.memory_id);
