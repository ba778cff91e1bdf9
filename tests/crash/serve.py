"""``python -m tests.crash.serve DATA_DIR PORT [OVERRIDES_JSON]``: the real app on a real
SQLite file (or the graph store the JSON config overrides name), with the deterministic
embedder so that a restart takes a second, for the crash-safety tests (which SIGKILL it).
Production defaults otherwise: fsync on every commit."""

from __future__ import annotations

import json
import sys
from typing import Any

import uvicorn

from api.app import create_app
from engine.adapters import open_service
from engine.config import load_config
from tests.conftest import HashingEmbedder


def main(data_dir: str, port: int, overrides: dict[str, Any]) -> None:
    config = load_config(env={}, data_dir=data_dir, server={"port": port}, **overrides)
    app = create_app(config, open_engine=lambda cfg: open_service(cfg, embedder=HashingEmbedder()))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]) if len(sys.argv) > 3 else {})
