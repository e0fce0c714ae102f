-- Full text search leaves the ingest hot path. A generated tsvector column plus its GIN
-- index cut binary COPY from ~30k to ~4k chunks/s (benchmarks/RESULTS.md). The SQL lexical
-- mode now uses a per-collection expression index, built the first time that mode searches
-- a collection: USING gin (to_tsvector('english', text)) WHERE collection_id = <id>.
DROP INDEX IF EXISTS agentrag.chunks_tsv;
ALTER TABLE agentrag.chunks DROP COLUMN IF EXISTS tsv;
