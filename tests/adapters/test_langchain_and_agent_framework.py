"""TwinmemRetriever (LangChain) and TwinmemContextProvider (Microsoft Agent Framework)
against a real service. The Agent Framework agent talks to a scripted chat client that
answers one line and keeps what it was sent (no LLM)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from agent_framework import Agent, BaseChatClient, ChatResponse, Message

from tests.api.conftest import ROOT_TOKEN, LiveServer
from twinmem_client import TwinmemClient
from twinmem_client.agent_framework import TwinmemContextProvider
from twinmem_client.langchain import TwinmemRetriever
from twinmem_client.limits import split_content

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


def test_a_query_longer_than_the_service_takes_is_cut(live: LiveServer, tag: str) -> None:
    with TwinmemClient(live.url, namespace=f"user:{tag}") as client:
        jam = client.save("The printer on floor 3 jams often", category="fact")
    query = "What do we know about this ticket? " + "The printer on floor 3 is jammed again. " * 110
    retriever = TwinmemRetriever(base_url=live.url, namespace=f"user:{tag}")
    assert [d.id for d in retriever.invoke(query)] == [jam.memory_id]

    async def asynchronously() -> None:
        assert [d.id for d in await retriever.ainvoke(query)] == [jam.memory_id]
        await retriever.aclose()

    assert len(query) > 4000
    asyncio.run(asynchronously())
    retriever.close()


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


def test_a_blank_query_finds_nothing_and_fails_nothing(live: LiveServer, tag: str) -> None:
    retriever = TwinmemRetriever(base_url=live.url, namespace=f"user:{tag}")
    assert retriever.invoke("") == [] and retriever.invoke(" \u200b ") == []  # the service would answer 422
    assert asyncio.run(retriever.ainvoke("\u200b")) == []


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


def test_a_message_longer_than_a_memory_is_saved_in_parts(live: LiveServer, tag: str) -> None:
    lines = [f"2026-01-0{1 + i % 9} INFO request {i} served in {i % 50} ms" for i in range(300)]
    message = "Please summarise this log:\n" + "\n".join(lines)

    async def scenario() -> None:
        provider = TwinmemContextProvider(live.url, namespace=f"user:{tag}", store_responses=True)
        model = ScriptedClient("The log shows 300 requests served.")
        agent = Agent(client=model, context_providers=[provider])
        result = await agent.run(message)  # before: 422 from the save, after the model answered
        assert result.text == "The log shows 300 requests served."
        await provider.aclose()

    assert len(message) > 8000
    asyncio.run(scenario())
    with TwinmemClient(live.url, namespace=f"user:{tag}") as client:
        saved = list(client.iter_memories(source="user_input"))
    parts = sorted(saved, key=lambda m: m.metadata["part"])
    assert len(parts) == parts[0].metadata["parts"] > 1
    assert " ".join(m.content for m in parts).split() == message.split()  # every word, in order
    assert len({m.session_id for m in parts}) == 1 and parts[0].session_id is not None


def test_the_parts_of_one_message_do_not_replace_each_other(live: LiveServer, tag: str) -> None:
    filler = "".join(f"Note {i}: we talked about the weather and the garden for a while. " for i in range(110))
    message = "I live in Paris. " + filler + "\n\nI live in Berlin now. " + filler

    async def scenario() -> None:
        provider = TwinmemContextProvider(live.url, namespace=f"user:{tag}")
        await Agent(client=ScriptedClient("Noted."), context_providers=[provider]).run(message)
        await provider.aclose()

    asyncio.run(scenario())
    with TwinmemClient(live.url, namespace=f"user:{tag}") as client:
        saved = sorted(client.iter_memories(source="user_input"), key=lambda m: m.metadata["part"])
    # Before: the Berlin part superseded the Paris part, 7 kB of what was said left recall.
    assert [m.content[:22] for m in saved] == ["I live in Paris. Note ", "I live in Berlin now. "]
    assert [m.status for m in saved] == ["active", "active"]


def test_a_message_past_the_limit_only_by_its_whitespace_is_saved_as_one(live: LiveServer, tag: str) -> None:
    body = " ".join(f"Line {i} of the report." for i in range(700))[:8000].rstrip()
    body += "x" * (8000 - len(body))
    messages = [body + "\n", "\n\n  " + body + "  \n"]

    async def scenario() -> None:
        provider = TwinmemContextProvider(live.url, namespace=f"user:{tag}")
        agent = Agent(client=ScriptedClient("Noted."), context_providers=[provider])
        for message in messages:
            await agent.run(message)  # before: the service's 422 (8,001 characters), the run failed
        await provider.aclose()

    assert len(body) == 8000 and all(len(m) > 8000 for m in messages)
    asyncio.run(scenario())
    with TwinmemClient(live.url, namespace=f"user:{tag}") as client:
        saved = list(client.iter_memories(source="user_input"))
    assert [m.content for m in saved] == [body]  # the second is the same text: folded into the first
    assert "part" not in saved[0].metadata


def test_no_message_fails_the_run_for_what_it_holds(live: LiveServer, tag: str) -> None:
    zero_width = "\u200b\u200d\u2060\ufeff"
    wide = "".join(f"Part {i}.\n" + "\U0001f600" * 7900 + "\n\n" for i in range(70))  # 4 bytes each: 2.2 MB
    messages = {
        "blank part": "I like tea.\n\n" + zero_width * 5000 + "\n\nI like coffee.",  # before: 422, blank part
        "blank": zero_width * 10,  # before: 422, blank content
        "query behind blanks": " " * 5000 + "What do I like?",  # before: 422, a blank query
        "past 2 MiB": wide,  # before: 413, one batch past the service's body limit
        "past 500 parts": "".join(f"word{i}" + " " * 7999 for i in range(600)),  # before: 422, past max_batch
    }

    async def scenario() -> None:
        for name, message in messages.items():
            provider = TwinmemContextProvider(live.url, namespace=f"user:{tag}:{name.replace(' ', '-')}")
            result = await Agent(client=ScriptedClient("Noted."), context_providers=[provider]).run(message)
            assert result.text == "Noted.", name
            await provider.aclose()

    asyncio.run(scenario())
    with TwinmemClient(live.url) as client:
        kept = {
            name: [m.content for m in client.iter_memories(namespace=f"user:{tag}:{name.replace(' ', '-')}")]
            for name in messages
        }
    assert sorted(kept["blank part"]) == ["I like coffee.", "I like tea."] and kept["blank"] == []
    assert kept["query behind blanks"] == ["What do I like?"]
    assert sorted(kept["past 2 MiB"]) == sorted(split_content(wide)) and len(kept["past 2 MiB"]) == 70
    assert sorted(kept["past 500 parts"]) == sorted(f"word{i}" for i in range(600))


def test_the_retriever_and_the_provider_serve_several_event_loops(live: LiveServer, tag: str) -> None:
    with TwinmemClient(live.url, namespace=f"user:{tag}") as client:
        cat = client.save("The user has a cat called Miso")
    retriever = TwinmemRetriever(base_url=live.url, namespace=f"user:{tag}")
    provider = TwinmemContextProvider(live.url, namespace=f"user:{tag}", store_inputs=False)
    model = ScriptedClient("Noted.")
    agent = Agent(client=model, context_providers=[provider])
    for _ in range(2):  # each asyncio.run is a new loop; before: RuntimeError "Event loop is closed"
        assert [d.id for d in asyncio.run(retriever.ainvoke("pets"))] == [cat.memory_id]
        asyncio.run(agent.run("Recommend some pet supplies"))
        assert "cat called Miso" in model.seen[-1]
    asyncio.run(retriever.aclose())
    asyncio.run(provider.aclose())
    retriever.close()


def test_the_retrievers_token_stays_out_of_its_dumps(secured: LiveServer, tag: str) -> None:
    with TwinmemClient(secured.url, token=ROOT_TOKEN, namespace=f"user:{tag}") as client:
        client.save("The user prefers window seats")
    retriever = TwinmemRetriever(base_url=secured.url, token=ROOT_TOKEN, namespace=f"user:{tag}")
    for dumped in (str(retriever.model_dump()), retriever.model_dump_json(), repr(retriever)):
        assert ROOT_TOKEN not in dumped  # before: the token in plain text in both dumps
    assert [d.page_content for d in retriever.invoke("seats")] == ["The user prefers window seats"]
    retriever.close()
