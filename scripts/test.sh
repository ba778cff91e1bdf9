#!/usr/bin/env bash
# Install (first run), lint, and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
.venv/bin/ruff check .
.venv/bin/mypy
# Two workers, a test file to each at a time (module fixtures are not made twice).
exec .venv/bin/python -m pytest -n "${TWINMEM_TEST_WORKERS:-2}" --dist loadfile "$@"
