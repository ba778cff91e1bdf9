"""``python -m tests.crash.serve DATA_DIR PORT [OVERRIDES_JSON]``: the real app on a real
SQLite file (or the graph store the JSON config overrides name), with the deterministic
embedder so that a restart takes a second, for the crash-safety tests (which SIGKILL it).
Production defaults otherwise: fsync on every commit.

With ``CRASH_SAVE_LOOP=1`` in its environment, a thread saves the index and the fast
network over and over (``IndexKeeper.save``, as shutdown does), so that a kill can be
aimed at the moment their files are being written."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

import uvicorn

from api.app import create_app
from engine.adapters import open_service
from engine.config import Config, load_config
from engine.errors import TwinmemError
from engine.service import MemoryService
from tests.conftest import HashingEmbedder

SAVE_LOOP = "CRASH_SAVE_LOOP"
SAVE_PAUSE_S = 0.02  # lets writers take the keeper's lock between saves


def _save_over_and_over(service: MemoryService) -> None:
    while True:
        try:
            service.keeper.save()
        except TwinmemError:
            return  # the service closed under it
        time.sleep(SAVE_PAUSE_S)


def _open(config: Config) -> MemoryService:
    service = open_service(config, embedder=HashingEmbedder())
    if os.environ.get(SAVE_LOOP) == "1":
        threading.Thread(target=_save_over_and_over, args=(service,), daemon=True).start()
    return service


def main(data_dir: str, port: int, overrides: dict[str, Any]) -> None:
    config = load_config(env={}, data_dir=data_dir, server={"port": port}, **overrides)
    uvicorn.run(create_app(config, open_engine=_open), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]) if len(sys.argv) > 3 else {})
