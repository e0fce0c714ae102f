-- Document text is stored out of line without compression. PostgreSQL's built-in pglz (lz4 is a
-- build option the embedded server lacks) cost more than the binary COPY of all the document's
-- chunks: writing 300 documents of ~85 kB took 2.4 s compressed, 0.17 s uncompressed
-- (benchmarks/RESULTS.md, "Ingestion"). The price is disk: document text takes about twice the
-- space (the chunks hold a second copy of it either way). Rows written before keep their
-- compressed values; PostgreSQL reads both. The chunks' columns are unchanged.
ALTER TABLE agentrag.documents ALTER COLUMN text SET STORAGE EXTERNAL;
