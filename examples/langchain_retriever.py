"""twinmem as a LangChain retriever. Start the service first (scripts/serve.sh), run
examples/langgraph_memory.py, then: .venv/bin/python examples/langchain_retriever.py
"""

from twinmem_client.langchain import TwinmemRetriever

retriever = TwinmemRetriever(namespace="user:xiaoming", top_k=3)
for doc in retriever.invoke("cool-toned colour suggestions"):
    print(round(doc.metadata["score"], 3), doc.page_content, doc.metadata["memory_id"])
retriever.close()
