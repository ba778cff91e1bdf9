"""Keeps the store's change log bounded.

The change log (``Store.changes_since``) is what every replica's fast network and
vector index catch up from. Left alone it grows with every write for ever, so the
serving process prunes it to its newest ``[lifecycle] change_log_keep`` changes
every ``change_log_prune_seconds``, a small batch per transaction so that writers
never wait long. Pruning raises the store's low-water mark
(``Store.low_water_seq``); a replica whose position is below it rebuilds from the
store instead of catching up (``engine.index_keeper``). Several replicas may prune
at once: each batch is idempotent.
"""

from __future__ import annotations

import logging

from engine.ports import Store

log = logging.getLogger(__name__)

# Changes forgotten per transaction.
PRUNE_BATCH = 1000


def prune(store: Store, keep: int, *, batch: int = PRUNE_BATCH) -> int:
    """Prune the log to its newest ``keep`` changes, ``batch`` per transaction; return how many went."""
    pruned = 0
    while True:
        went = store.prune_changes(keep, batch)
        pruned += went
        if went < batch:
            break
    if pruned:
        log.info("change log pruned: %d changes, low-water mark now %d", pruned, store.low_water_seq())
    return pruned
