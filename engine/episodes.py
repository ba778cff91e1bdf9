"""Episodes: the memories of one session, linked ``NEXT`` in the order they were written.

Every write that stores memories carrying a ``session_id`` (a save, a batch in batch
order, an import, a session's promotion) links each new memory ``NEXT`` from the one
written before it in the same (namespace, session): the last of the batch before it,
or, for the first, the end of the session's chain as the fast network holds it
(``FastNetwork.session_tail``). The edges go into the same store transaction as the
memories, so they land with them in the change sequence and every replica's fast
network picks them up. A repeat folded into an existing memory stores nothing new,
so it adds no link: the chain goes on from its end, and no memory follows itself.

Recall reads the chain back as the context channel (``engine.recall``): a memory next
to a strong hit of the same episode is brought along with a bounded boost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from engine.ports import Edge
from engine.records import Memory

NEXT = "NEXT"

Tail = Callable[[str, str], str | None]  # (namespace, session id) -> the id the next memory follows


def chain_edges(memories: Sequence[Memory], tail: Tail, now: datetime) -> list[Edge]:
    """``NEXT`` edges for new ``memories`` (in the order written): each one with a session
    follows the previous new one of its (namespace, session), the first follows ``tail``."""
    last: dict[tuple[str, str], str | None] = {}
    edges: list[Edge] = []
    for memory in memories:
        if memory.session_id is None:
            continue
        episode = (memory.namespace, memory.session_id)
        previous = last[episode] if episode in last else tail(*episode)
        if previous is not None and previous != memory.memory_id:
            edges.append(Edge(memory.namespace, previous, memory.memory_id, NEXT, now))
        last[episode] = memory.memory_id
    return edges
