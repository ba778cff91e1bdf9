"""A LangChain retriever on twinmem: recalled memories as ``Document``s, for any chain or
agent that takes a ``BaseRetriever``. ``pip install 'twinmem[langchain]'``.

    retriever = TwinmemRetriever(namespace="user:42", top_k=5)
    docs = retriever.invoke("any suggestions for cool-toned colours?")
    docs[0].page_content, docs[0].metadata["score"]

Each document's ``page_content`` is the memory's content, its ``id`` the memory id, and
its ``metadata`` the memory's own metadata plus ``memory_id``, ``score``, ``namespace``,
``category``, ``created_at`` and ``entities``. (LangChain's chat-history classes are
deprecated in langchain-core 1.x; for long-term memory in LangGraph agents use
``twinmem_client.langgraph.TwinmemStore``.)
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, SecretStr

from twinmem_client.async_client import AsyncTwinmemClient
from twinmem_client.client import TwinmemClient
from twinmem_client.limits import fit_query, is_blank
from twinmem_client.models import Hit


def document(hit: Hit) -> Document:
    memory = hit.memory
    metadata: dict[str, Any] = {
        **memory.metadata,
        "memory_id": memory.memory_id,
        "score": hit.score,
        "namespace": memory.namespace,
        "category": memory.category,
        "created_at": memory.created_at.isoformat(),
        "entities": list(memory.entities),
    }
    return Document(page_content=memory.content, metadata=metadata, id=memory.memory_id)


class TwinmemRetriever(BaseRetriever):
    """Recall from one or more twinmem namespaces (``namespaces``, when given, instead of
    ``namespace``). ``filter`` is recall's filter
    (``{"category": "preference"}``, ``{"metadata": {...}}``, times, ...). A query past the
    service's 4,000 characters is cut to its start, at a sentence or word boundary.
    ``token`` is kept as a ``SecretStr``: ``model_dump`` and ``model_dump_json`` mask it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    base_url: str | None = None
    token: SecretStr | None = Field(default=None, repr=False)  # a str given is kept as a SecretStr
    namespace: str = "default"
    namespaces: list[str] | None = None
    top_k: int = 5
    filter: dict[str, Any] | None = None
    _client: TwinmemClient | None = PrivateAttr(default=None)
    _aclient: AsyncTwinmemClient | None = PrivateAttr(default=None)

    def _token(self) -> str | None:
        return self.token.get_secret_value() if self.token is not None else None

    def _scope(self) -> dict[str, Any]:
        where = {"namespace": self.namespace} if self.namespaces is None else {"namespaces": self.namespaces}
        return {**where, "top_k": self.top_k, "filter": self.filter}

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if is_blank(query):
            return []  # nothing to search for
        if self._client is None:
            self._client = TwinmemClient(self.base_url, token=self._token())
        return [document(hit) for hit in self._client.recall(fit_query(query), **self._scope())]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if is_blank(query):
            return []
        if self._aclient is None:
            self._aclient = AsyncTwinmemClient(self.base_url, token=self._token())
        return [document(hit) for hit in await self._aclient.recall(fit_query(query), **self._scope())]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        if self._aclient is not None:
            await self._aclient.aclose()
