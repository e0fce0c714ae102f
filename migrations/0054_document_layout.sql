-- The layout a document's chunks were made with: the chunk size and overlap in effect and the
-- chunker's version (agentrag.readers.chunking.CHUNKER_VERSION). store.sync re-chunks an unchanged
-- file whose recorded layout differs from the run's (agentrag/store/sync_layout.py). NULL: written
-- before this migration (layout unknown): the next sync reads the file once and compares its chunks
-- with the stored ones: equal, the layout is recorded and nothing is written; else it is re-chunked.
ALTER TABLE agentrag.documents
    ADD COLUMN chunk_size integer,
    ADD COLUMN chunk_overlap integer,
    ADD COLUMN chunker_version integer;
