"""``python -m tests.crash.serve DATA_DIR PORT``: the real app on a real SQLite file, with
the deterministic embedder so that a restart takes a second, for the crash-safety tests
(which SIGKILL it). Production defaults otherwise: fsync on every commit."""

from __future__ import annotations

import sys

import uvicorn

from api.app import create_app
from engine.adapters import open_service
from engine.config import load_config
from tests.conftest import HashingEmbedder


def main(data_dir: str, port: int) -> None:
    config = load_config(env={}, data_dir=data_dir, server={"port": port})
    app = create_app(config, open_engine=lambda cfg: open_service(cfg, embedder=HashingEmbedder()))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
