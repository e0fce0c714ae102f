"""agentrag: agentic RAG over PostgreSQL + pgvector."""
