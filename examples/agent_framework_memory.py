"""A Microsoft Agent Framework agent with twinmem as a context provider. Start the
service first (scripts/serve.sh), then: .venv/bin/python examples/agent_framework_memory.py

The chat client here only echoes the instructions it was given, so the example runs
without an LLM and shows what the provider recalled; use any Agent Framework chat client.
"""

import asyncio
from typing import Any

from agent_framework import Agent, BaseChatClient, ChatResponse, Message

from twinmem_client.agent_framework import TwinmemContextProvider


class ShowInstructions(BaseChatClient):
    async def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> ChatResponse:
        return ChatResponse(messages=[Message(role="assistant", contents=[str(options.get("instructions", ""))])])


async def main() -> None:
    memory = TwinmemContextProvider(namespace="user:xiaoming")
    agent = Agent(client=ShowInstructions(), context_providers=[memory])
    await agent.run("I have a cat called Miso")  # saved after the run
    print((await agent.run("Recommend some pet supplies")).text)  # recalled before it
    await memory.aclose()


asyncio.run(main())
