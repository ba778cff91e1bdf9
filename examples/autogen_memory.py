"""An AutoGen AssistantAgent with twinmem as its memory. Start the service first
(scripts/serve.sh), run examples/langgraph_memory.py (it saves what Xiao Ming said),
then: .venv/bin/python examples/autogen_memory.py

The model is AutoGen's replay client so that the example runs without an LLM; give the
agent any model client instead. The MemoryQueryEvent shows what the agent recalled.
"""

import asyncio

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import MemoryQueryEvent
from autogen_ext.models.replay import ReplayChatCompletionClient

from twinmem_client.autogen import TwinmemMemory


async def main() -> None:
    memory = TwinmemMemory(namespace="user:xiaoming")
    model = ReplayChatCompletionClient(["(a model answers here)"])
    agent = AssistantAgent("assistant", model_client=model, memory=[memory])
    result = await agent.run(task="What do you know about me?")
    for message in result.messages:
        if isinstance(message, MemoryQueryEvent):
            print("recalled:", [item.content for item in message.content])
    await memory.close()


asyncio.run(main())
