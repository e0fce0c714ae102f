-- Scoped search (issue #29): a large tenant gets its own partial HNSW index (Store.optimize), whose
-- predicate must name a column of chunks (an index predicate cannot read documents). Every chunk
-- written from now on carries its document's tenant (the ingest's COPY, the sync's renames); a
-- document's tenant never changes (share() moves a document between workspaces, not tenants). Chunks
-- written before keep NULL until Store.optimize indexes their tenant: it fills that tenant's chunks
-- first, and a search uses `c.tenant_id` only through a tenant's index, so NULLs are never misread.
-- Adding a nullable column without a default is a catalogue change only (no table rewrite). It is
-- also the Citus plan's distribution column on chunks (ARCHITECTURE.md "Citus").
ALTER TABLE agentrag.chunks ADD COLUMN IF NOT EXISTS tenant_id text;
