"""The graph schema: numbered Cypher migrations (``NNNN_name.cypher``), shipped with the
package so that an installed twinmem finds them (``engine.adapters.neo4j_migrations``)."""
