-- Each collection records the build parameters of its HNSW index (pgvector's m and
-- ef_construction) and, optionally, its own default hnsw.ef_search for searches that do not
-- set one (NULL: max(100, depth)). Existing collections were built with pgvector's defaults,
-- m=16 and ef_construction=64, which is what they record. Bounds are pgvector's own
-- (m 2..100, ef_construction 4..1000 and at least 2 * m, ef_search 1..1000);
-- Store.create_collection / Store.tune_vector_index check them first, with a typed error.
ALTER TABLE agentrag.collections
    ADD COLUMN hnsw_m integer NOT NULL DEFAULT 16 CHECK (hnsw_m BETWEEN 2 AND 100),
    ADD COLUMN hnsw_ef_construction integer NOT NULL DEFAULT 64
        CHECK (hnsw_ef_construction BETWEEN 4 AND 1000),
    ADD COLUMN hnsw_ef_search integer CHECK (hnsw_ef_search BETWEEN 1 AND 1000),
    ADD CONSTRAINT collections_hnsw_ef_construction_2m CHECK (hnsw_ef_construction >= 2 * hnsw_m);
