-- lexical_sql ranks stored tsvectors instead of recomputing to_tsvector for every matching row
-- (BEIR SciFact: about 450 ms p50 with 0002's expression index). They live in a side table,
-- filled the first time that mode searches a collection and topped up after each change (see
-- Store.ensure_text_index), so ingestion still never computes a tsvector. A chunk's row goes
-- with the chunk (ON DELETE CASCADE). collections.tsv_version is the collection version the side
-- table was last brought up to.
CREATE TABLE agentrag.chunk_tsv (
    chunk_id       text PRIMARY KEY REFERENCES agentrag.chunks (id) ON DELETE CASCADE,
    collection_id  bigint NOT NULL,
    tsv            tsvector NOT NULL
);
ALTER TABLE agentrag.collections ADD COLUMN tsv_version bigint;

-- 0002's per-collection expression indexes are no longer used.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT indexname FROM pg_indexes
             WHERE schemaname = 'agentrag' AND starts_with(indexname, 'chunks_fts_')
    LOOP
        EXECUTE 'DROP INDEX agentrag.' || quote_ident(r.indexname);
    END LOOP;
END
$$;
