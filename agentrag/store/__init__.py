"""The PostgreSQL + pgvector store: server, migrations, collections, documents, ingestion."""
