"""twinmem's engine: the memory record, scoring, retrieval and lifecycle, behind narrow ports."""
