"""A LangGraph graph whose long-term memory is twinmem. Start the service first
(scripts/serve.sh), then: .venv/bin/python examples/langgraph_memory.py

The node recalls what is relevant to what the user says, then keeps what was said;
a real agent would hand the recalled items to its model.
"""

import uuid
from typing import TypedDict

from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph

from twinmem_client.langgraph import TwinmemStore


class Turn(TypedDict):
    user_id: str
    message: str
    recalled: list[str]


def remember_and_recall(state: Turn) -> Turn:
    store, namespace = get_store(), ("user", state["user_id"])
    hits = store.search(namespace, query=state["message"], limit=3)  # what it knew before this turn
    store.put(namespace, uuid.uuid4().hex, {"content": state["message"]})
    return {**state, "recalled": [hit.value["content"] for hit in hits]}


builder = StateGraph(Turn)
builder.add_node("memory", remember_and_recall)
builder.add_edge(START, "memory")
builder.add_edge("memory", END)
graph = builder.compile(store=TwinmemStore())  # TWINMEM_URL / TWINMEM_TOKEN, or base_url=, token=

for message in ["My name is Xiao Ming", "I like blue", "Any cool-toned colour suggestions?"]:
    print(message, "->", graph.invoke({"user_id": "xiaoming", "message": message, "recalled": []})["recalled"])
