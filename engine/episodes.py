"""Episodes: the memories of one session, linked ``NEXT`` in the order they were written.

Every write that stores memories carrying a ``session_id`` (a save, a batch in batch
order, an import, a session's promotion) links each new memory ``NEXT`` from the one
written before it in the same (namespace, session): the last of the batch before it,
or, for the first, the end of the session's chain as the fast network holds it
(``FastNetwork.session_place``); new memories created before some stored ones of the
session (a window promoted after a later one) go before those, where nothing older links
into them. The edges go into the same store transaction as the
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

# (namespace, session id, the newest new memory's created_at) -> the id the new memories
# follow, and the id that follows them (``FastNetwork.session_place``).
Place = Callable[[str, str, datetime], tuple[str | None, str | None]]


def chain_edges(memories: Sequence[Memory], place: Place, now: datetime) -> list[Edge]:
    """``NEXT`` edges for new ``memories`` (in the order written): each one with a session
    follows the previous new one of its (namespace, session); the first follows where
    ``place`` puts them, and the last is followed by the memory ``place`` names after them
    (one of the session created later, promoted first), so the chain reads as said."""
    by_episode: dict[tuple[str, str], list[Memory]] = {}
    for memory in memories:
        if memory.session_id is not None:
            by_episode.setdefault((memory.namespace, memory.session_id), []).append(memory)
    edges: list[Edge] = []
    for (namespace, session_id), members in by_episode.items():
        previous, after = place(namespace, session_id, max(memory.created_at for memory in members))
        for memory in members:
            if previous is not None and previous != memory.memory_id:
                edges.append(Edge(namespace, previous, memory.memory_id, NEXT, now))
            previous = memory.memory_id
        if after is not None and previous is not None and after != previous:
            edges.append(Edge(namespace, previous, after, NEXT, now))
    return edges
