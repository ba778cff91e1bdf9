"""TwinmemRetriever (LangChain) and TwinmemContextProvider (Microsoft Agent Framework)
against a real service. The Agent Framework agent talks to a scripted chat client that
answers one line and keeps what it was sent (no LLM)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from agent_framework import Agent, BaseChatClient, ChatResponse, Message

from tests.api.conftest import LiveServer
from twinmem_client import TwinmemClient
from twinmem_client.agent_framework import TwinmemContextProvider
from twinmem_client.langchain import TwinmemRetriever

pytestmark = pytest.mark.slow


def test_retriever_gives_documents_with_score_and_metadata(live: LiveServer, tag: str) -> None:
    with TwinmemClient(live.url, namespace=f"user:{tag}") as client:
        blue = client.save("User's favourite colour is blue", category="preference", metadata={"via": "chat"})
        client.save("The user is allergic to peanuts", category="fact")
    retriever = TwinmemRetriever(base_url=live.url, namespace=f"user:{tag}", top_k=2)
    docs = retriever.invoke("any suggestions for cool-toned colours?")
    assert docs[0].page_content == "User's favourite colour is blue" and docs[0].id == blue.memory_id
    assert docs[0].metadata["score"] > docs[1].metadata["score"]
    assert docs[0].metadata["category"] == "preference" and docs[0].metadata["via"] == "chat"
    only = TwinmemRetriever(base_url=live.url, namespace=f"user:{tag}", filter={"category": "fact"})
    assert [d.page_content for d in only.invoke("colour")] == ["The user is allergic to peanuts"]

    async def asynchronously() -> None:
        adocs = await retriever.ainvoke("cool-toned colours")
        assert adocs[0].id == blue.memory_id
        await retriever.aclose()

    asyncio.run(asynchronously())
    retriever.close()
    only.close()


class ScriptedClient(BaseChatClient):
    """Answers every request with ``reply`` and keeps the messages and instructions it got."""

    def __init__(self, reply: str) -> None:
        super().__init__()
        self.reply = reply
        self.seen: list[str] = []

    async def _inner_get_response(  # type: ignore[override]
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kwargs: Any
    ) -> ChatResponse:
        self.seen.append("\n".join(m.text for m in messages) + "\n" + str(options.get("instructions", "")))
        return ChatResponse(messages=[Message(role="assistant", contents=[self.reply])], response_id="scripted")


def test_context_provider_recalls_before_and_saves_after(live: LiveServer, tag: str) -> None:
    async def scenario() -> None:
        provider = TwinmemContextProvider(live.url, namespace=f"user:{tag}", store_responses=True)
        model = ScriptedClient("Noted.")
        agent = Agent(client=model, context_providers=[provider])
        await agent.run("I have a cat called Miso")
        await agent.run("Recommend some pet supplies")
        assert "cat called Miso" in model.seen[-1]  # recalled into the second run's prompt
        await provider.aclose()

    asyncio.run(scenario())
    with TwinmemClient(live.url, namespace=f"user:{tag}") as client:
        saved = {(m.content, m.source) for m in client.iter_memories()}
    assert ("I have a cat called Miso", "user_input") in saved
    assert ("Recommend some pet supplies", "user_input") in saved
    assert ("Noted.", "inference") in saved
