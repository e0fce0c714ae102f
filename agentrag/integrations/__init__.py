"""Integrations with other frameworks, each behind its own extra (``pip install 'agentrag[langgraph]'``).

* :mod:`agentrag.integrations.langgraph`: a compiled RAG subgraph for LangGraph chat graphs.
"""
