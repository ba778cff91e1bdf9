#!/usr/bin/env bash
# Create .venv in the checkout's root and install twinmem with everything it needs.
# torch comes first, pinned: 2.13.0 is a CPU build; an unpinned torch pulls a multi-GB CUDA build.
# Re-running is cheap: nothing is reinstalled until pyproject.toml or this script changes.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "twinmem needs Python 3.11 or newer (set PYTHON=...)" >&2
    exit 1
fi
# Redis holds short-term sessions in server mode, and the tests start their own redis-server.
if ! command -v redis-server >/dev/null 2>&1; then
    echo "installing redis-server (Debian package)..." >&2
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
fi
# A venv made without ensurepip (Debian's python3 without python3-venv) has no pip: made again.
if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    rm -rf .venv
    if ! "$python" -m venv .venv; then
        rm -rf .venv
        echo "could not create .venv: on Debian or Ubuntu, install python3-venv (apt-get install python3-venv) and run this again" >&2
        exit 1
    fi
fi
stamp=.venv/.twinmem-installed
want=$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "installing twinmem into .venv (first run takes a few minutes)..." >&2
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet torch==2.13.0
    .venv/bin/python -m pip install --quiet -e ".[test]"
    echo "$want" > "$stamp"
fi
