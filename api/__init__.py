"""twinmem's HTTP API (Litestar), its command line and its Python client."""
