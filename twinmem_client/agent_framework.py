"""A Microsoft Agent Framework context provider on twinmem:
``Agent(client=..., context_providers=[TwinmemContextProvider(namespace="user:42")])``.
``pip install 'twinmem[agent-framework]'`` (agent-framework-core 1.x).

``agent_framework.ContextProvider``:

* ``before_run``: recalls with the text of the run's input messages (its first 4,000
  characters, the service's bound on a query, cut at a sentence or word boundary) and
  adds what it found to the run's instructions, most relevant first.
* ``after_run``: saves each input message of the user as a memory (source ``user_input``,
  the session's id as ``session_id``); with ``store_responses=True`` the agent's answer
  too (source ``inference``, which starts at a lower score and never counts as the user's word).
  A message longer than a memory may be (8,000 characters) is saved as several, split at
  paragraph, sentence or word boundaries, in order, each with ``part`` and ``parts`` in
  its metadata, in one batch (one transaction) where they fit one request (500 memories,
  2 MiB), else in several. The parts are saved with conflicts ``off``: they neither
  replace nor contradict each other, nor older memories. Deduplication still runs: a part
  that repeats (or nearly repeats) one already kept is folded into it, so a message may
  leave fewer memories than its ``parts``. A blank message (whitespace, control characters,
  zero-width marks only: what the service calls blank) is not saved, nor is a blank part,
  and a blank input is not recalled with.
"""

from __future__ import annotations

from typing import Any

from agent_framework import AgentSession, ContextProvider, SessionContext, SupportsAgentRun

from twinmem_client.async_client import AsyncTwinmemClient
from twinmem_client.limits import batches, fit_query, is_blank, split_content

DEFAULT_TOP_K = 5
INSTRUCTIONS = "Relevant memories about the user (most relevant first):"


class TwinmemContextProvider(ContextProvider):
    """One twinmem namespace as an Agent Framework context provider."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        namespace: str = "default",
        token: str | None = None,
        top_k: int = DEFAULT_TOP_K,
        category: str = "fact",
        store_inputs: bool = True,
        store_responses: bool = False,
        source_id: str = "twinmem",
        client: AsyncTwinmemClient | None = None,
    ) -> None:
        super().__init__(source_id)
        self.client = client or AsyncTwinmemClient(base_url, namespace=namespace, token=token)
        self.namespace = namespace
        self.top_k = top_k
        self.category = category
        self.store_inputs = store_inputs
        self.store_responses = store_responses

    async def before_run(
        self, *, agent: SupportsAgentRun, session: AgentSession, context: SessionContext, state: dict[str, Any]
    ) -> None:
        query = "\n".join(m.text for m in context.input_messages if m.text).strip()
        if is_blank(query):  # the service refuses a blank query
            return
        hits = await self.client.recall(fit_query(query), namespace=self.namespace, top_k=self.top_k)
        if hits:
            lines = [f"{i}. {hit.content}" for i, hit in enumerate(hits, 1)]
            context.extend_instructions(self.source_id, "\n".join([INSTRUCTIONS, *lines]))

    async def after_run(
        self, *, agent: SupportsAgentRun, session: AgentSession, context: SessionContext, state: dict[str, Any]
    ) -> None:
        session_id = context.session_id or session.session_id
        if self.store_inputs:
            for message in context.input_messages:
                if str(message.role) == "user" and not is_blank(message.text):
                    await self._save(message.text, "user_input", session_id)
        if self.store_responses and context.response is not None and not is_blank(context.response.text):
            await self._save(context.response.text, "inference", session_id)

    async def _save(self, text: str, source: str, session_id: str | None) -> None:
        parts = split_content(text)
        if not parts:
            return
        if len(parts) == 1:  # the part, not the text: one past the limit only by its whitespace is cut to it
            await self.client.save(
                parts[0], namespace=self.namespace, category=self.category, source=source, session_id=session_id
            )
            return
        # Too long for one memory: its parts, in order, in as few batches (one transaction
        # each) as fit the service's bounds on a request. Without conflict rules: one
        # message's parts do not replace or contradict each other ("I live in Paris. …" is
        # not superseded by "… I live in Berlin now." further on).
        fields = {"category": self.category, "source": source, "session_id": session_id}
        memories = [
            {"content": part, **fields, "metadata": {"part": n, "parts": len(parts)}} for n, part in enumerate(parts, 1)
        ]
        for batch in batches(memories):
            await self.client.save_batch(batch, namespace=self.namespace, conflicts="off")

    async def aclose(self) -> None:
        await self.client.aclose()
