-- A coarse cluster per chunk for scoped exact vector scans (issue #39): Store.optimize fits K
-- spherical k-means centroids over a large collection's vectors (agentrag.store.vector_clusters)
-- and records each chunk's nearest in chunks.cluster; every write after it assigns new chunks to
-- the same centroids. A scope the planner scans exactly then reads only its rows in the P clusters
-- nearest the query (agentrag.retrieval.clusters), through chunks_cluster_c. Rows with no cluster
-- (written before a fit, or by a writer that did not assign one) are always read, so correctness
-- never depends on an assignment: NULL everywhere (this migration) is the plain exact scan.
-- Adding a nullable column without a default is a catalogue change only (no table rewrite).
ALTER TABLE agentrag.chunks ADD COLUMN IF NOT EXISTS cluster smallint;
CREATE INDEX IF NOT EXISTS chunks_cluster_c ON agentrag.chunks (cluster, document_id COLLATE "C");

-- One fit per collection: the centroids (k x dimensions float32, little-endian, unit length) of the
-- collection's vectors at the fit. fit: a random id, new at every fit, that searches and writers key
-- their cached centroids on. A re-embedding deletes the row in its swap (the vectors changed).
CREATE TABLE IF NOT EXISTS agentrag.vector_clusters (
    collection_id bigint PRIMARY KEY REFERENCES agentrag.collections (id) ON DELETE CASCADE,
    fit           bigint NOT NULL,
    k             integer NOT NULL CHECK (k BETWEEN 2 AND 32767),
    dimensions    integer NOT NULL,
    vector_type   text NOT NULL,
    centroids     bytea NOT NULL,
    chunks        bigint NOT NULL,  -- the collection's chunks at the fit
    fitted_at     timestamptz NOT NULL DEFAULT now()
);
