-- Sync state (issue #24): what `store.sync` saw of each source, per (collection, tenant,
-- workspace, source URI). A file's row is a cache for the cheap pre-check (size + mtime, or the
-- object store's ETag): when they match and the stored document still has the recorded sha256,
-- the file is not read again. The documents table stays the truth: a row written before a write
-- that was then killed only costs one read on the next run. A row with sha256 NULL is pending: its
-- key may have a document (the write was under way), so deletions still consider it.
CREATE TABLE agentrag.sync_sources (
    id               bigserial PRIMARY KEY,
    collection_id    bigint NOT NULL REFERENCES agentrag.collections (id) ON DELETE CASCADE,
    tenant_id        text,
    workspace_id     text,
    uri              text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_started_at  timestamptz,
    last_finished_at timestamptz,
    last_report      jsonb
);
CREATE UNIQUE INDEX sync_sources_key ON agentrag.sync_sources
    (collection_id, coalesce(tenant_id, ''), coalesce(workspace_id, ''), uri);

CREATE TABLE agentrag.sync_files (
    source_id    bigint NOT NULL REFERENCES agentrag.sync_sources (id) ON DELETE CASCADE,
    key          text NOT NULL,
    size         bigint,
    mtime_ns     bigint,
    etag         text,
    sha256       text,           -- of the document text; NULL while a write is pending
    document_id  text,
    metadata_sha256 text,        -- of the sync's own metadata (the pre-check needs it unchanged)
    listed_ns    bigint NOT NULL, -- when the listing that recorded the row started (ns since the epoch)
    seen_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, key)
);
