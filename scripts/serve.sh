#!/usr/bin/env bash
# Install (first run) and start twinmem on the embedded default: http://127.0.0.1:8420
# Extra arguments go to `twinmem serve` (--host, --port, --data-dir, --config).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/twinmem serve "$@"
