"""An AutoGen memory on twinmem: ``AssistantAgent(..., memory=[TwinmemMemory(namespace="user:42")])``
recalls what any framework saved for that user before each reply. ``pip install 'twinmem[autogen]'``.

``autogen_core.memory.Memory`` (autogen-core 0.7):

* ``add``: saves the content (text; a dict is saved as JSON) as one memory. Its metadata
  becomes the memory's; a ``category`` string in it sets the category.
* ``query``: twinmem's recall (a query past the service's 4,000 characters is cut to
  its start, at a sentence or word boundary); each result is a ``MemoryContent`` whose metadata holds
  ``memory_id``, ``score``, ``category``, ``created_at`` and the memory's own metadata.
* ``update_context``: recalls with the newest message of the model context as the query,
  and adds what it found as one ``SystemMessage`` (most relevant first), as
  ``ListMemory`` does with its list.
* ``clear``: deletes every memory of the namespace the caller sees, whatever its status
  (superseded, archived, quarantined) and expired ones too (soft: histories stay).
  ``close``: the client.
"""

from __future__ import annotations

import json
from typing import Any, Self

from autogen_core import CancellationToken, Component
from autogen_core.memory import Memory, MemoryContent, MemoryMimeType, MemoryQueryResult, UpdateContextResult
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import SystemMessage
from pydantic import BaseModel, SecretStr

from twinmem_client.async_client import AsyncTwinmemClient
from twinmem_client.limits import fit_query, is_blank
from twinmem_client.models import Hit

DEFAULT_TOP_K = 5
# Every status but deleted: what clear deletes.
LEFT_BY_CLEAR = ["active", "superseded", "archived", "quarantined"]


class TwinmemMemoryConfig(BaseModel):
    """What ``dump_component`` writes and ``load_component`` reads back."""

    base_url: str | None = None
    namespace: str = "default"
    token: SecretStr | None = None
    top_k: int = DEFAULT_TOP_K
    category: str = "fact"
    source: str = "user_input"
    name: str | None = None


def _text(content: MemoryContent) -> str:
    if isinstance(content.content, str):
        return content.content
    if isinstance(content.content, dict):
        return json.dumps(content.content, ensure_ascii=False, sort_keys=True)
    raise ValueError(f"twinmem keeps text: cannot save {type(content.content).__name__} content")


def _content(hit: Hit) -> MemoryContent:
    memory = hit.memory
    metadata = {
        **memory.metadata,
        "memory_id": memory.memory_id,
        "score": hit.score,
        "category": memory.category,
        "created_at": memory.created_at.isoformat(),
    }
    return MemoryContent(content=memory.content, mime_type=MemoryMimeType.TEXT, metadata=metadata)


class TwinmemMemory(Memory, Component[TwinmemMemoryConfig]):
    """One twinmem namespace as an AutoGen memory."""

    component_type = "memory"
    component_provider_override = "twinmem_client.autogen.TwinmemMemory"
    component_config_schema = TwinmemMemoryConfig

    def __init__(
        self,
        base_url: str | None = None,
        *,
        namespace: str = "default",
        token: str | None = None,
        top_k: int = DEFAULT_TOP_K,
        category: str = "fact",
        source: str = "user_input",
        name: str | None = None,
        client: AsyncTwinmemClient | None = None,
    ) -> None:
        self.client = client or AsyncTwinmemClient(base_url, namespace=namespace, token=token)
        # What dump_component writes: the token given, or the given client's (not $TWINMEM_TOKEN).
        self._token = token if client is None else client.token
        self.namespace = namespace
        self.top_k = top_k
        self.category = category
        self.source = source
        self.name = name or f"twinmem:{namespace}"

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        metadata = dict(content.metadata or {})
        category = metadata.pop("category", None)
        mime = content.mime_type.value if isinstance(content.mime_type, MemoryMimeType) else content.mime_type
        await self.client.save(
            _text(content),
            namespace=self.namespace,
            category=category if isinstance(category, str) else self.category,
            source=self.source,
            metadata={**metadata, "mime_type": mime},
        )

    async def query(
        self, query: str | MemoryContent, cancellation_token: CancellationToken | None = None, **kwargs: Any
    ) -> MemoryQueryResult:
        text = query if isinstance(query, str) else _text(query)
        if is_blank(text):  # the service refuses a blank query
            return MemoryQueryResult(results=[])
        top_k = int(kwargs.get("top_k", self.top_k))
        hits = await self.client.recall(fit_query(text), namespace=self.namespace, top_k=top_k)
        return MemoryQueryResult(results=[_content(hit) for hit in hits])

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        messages = await model_context.get_messages()
        last = messages[-1].content if messages else ""
        query = last if isinstance(last, str) else " ".join(part for part in last if isinstance(part, str))
        found = await self.query(query)
        if found.results:
            lines = [f"{i}. {_text(item)}" for i, item in enumerate(found.results, 1)]
            text = "\nRelevant memory content (most relevant first):\n" + "\n".join(lines) + "\n"
            await model_context.add_message(SystemMessage(content=text))
        return UpdateContextResult(memories=found)

    async def clear(self) -> None:
        every = {"status": LEFT_BY_CLEAR, "include_expired": True}
        listed = self.client.iter_memories(namespace=self.namespace, page_size=500, **every)
        for memory_id in [memory.memory_id async for memory in listed]:  # listed first: deleting moves the pages
            await self.client.delete(memory_id, namespace=self.namespace)

    async def close(self) -> None:
        await self.client.aclose()

    def _to_config(self) -> TwinmemMemoryConfig:
        return TwinmemMemoryConfig(
            base_url=self.client.base_url,
            namespace=self.namespace,
            token=SecretStr(self._token) if self._token else None,
            top_k=self.top_k,
            category=self.category,
            source=self.source,
            name=self.name,
        )

    @classmethod
    def _from_config(cls, config: TwinmemMemoryConfig) -> Self:
        return cls(
            config.base_url,
            namespace=config.namespace,
            token=config.token.get_secret_value() if config.token else None,
            top_k=config.top_k,
            category=config.category,
            source=config.source,
            name=config.name,
        )
