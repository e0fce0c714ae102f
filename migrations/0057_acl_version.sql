-- A second counter per collection for the scope planner's cache (agentrag.retrieval.scope_cache).
-- collections.version is bumped in the same transaction by every write of a collection's documents
-- or chunks (ingest, sync, deletion, re-embedding, a new chunk layout); acl_version by every other
-- change of who may see its documents: store.grant / revoke / reset_grants / share, a sync that
-- changes grants only, link_session (agentrag.store.acl.bump_acl_version). A search reads both with
-- the collection's settings, in its snapshot: the same two values, the same documents rows for any
-- predicate, so a scope's cached count (and document ids) is exactly what the count would read.
-- No trigger: Citus runs none on distributed tables (0055). A constant default: no table rewrite.
ALTER TABLE agentrag.collections ADD COLUMN IF NOT EXISTS acl_version bigint NOT NULL DEFAULT 0;
