-- Document revisions (issue #24). Every document row is one revision of a document; a document
-- keeps its identity (its lineage: the id of its first revision) across replacements of its text
-- or metadata and across renames by `store.sync`. A revision's row is written when its documents
-- row is inserted (by triggers, so ingest, sync and delete all record it) and closed, with the
-- text it had, when that row is deleted: a current revision's text lives in agentrag.documents
-- only (text IS NULL here while valid_to IS NULL), so ingest does not write the text twice.
-- Searches read agentrag.chunks, which hold the current revisions' chunks only.
CREATE TABLE agentrag.document_revisions (
    lineage           text NOT NULL,      -- the document across revisions: the id of its first revision
    revision          integer NOT NULL CHECK (revision >= 1),
    document_id       text NOT NULL,      -- the (content-addressed) documents row of this revision
    collection_id     bigint NOT NULL REFERENCES agentrag.collections (id) ON DELETE CASCADE,
    source            text NOT NULL,
    original_filename text,
    tenant_id         text,
    workspace_id      text,
    sha256            text NOT NULL,      -- of the revision's text
    metadata          jsonb NOT NULL DEFAULT '{}'::jsonb,
    chunk_count       integer NOT NULL,
    text              text,               -- NULL while current; the text it had once it ended
    valid_from        timestamptz NOT NULL DEFAULT now(),
    valid_to          timestamptz,        -- NULL: the current revision
    PRIMARY KEY (lineage, revision)
);
ALTER TABLE agentrag.document_revisions ALTER COLUMN text SET STORAGE EXTERNAL;
CREATE INDEX document_revisions_document ON agentrag.document_revisions (document_id);
CREATE UNIQUE INDEX document_revisions_current ON agentrag.document_revisions (document_id)
    WHERE valid_to IS NULL;
CREATE INDEX document_revisions_key ON agentrag.document_revisions
    (collection_id, source, coalesce(tenant_id, ''), coalesce(workspace_id, ''));

-- The documents that exist now are revision 1 of themselves.
INSERT INTO agentrag.document_revisions
    (lineage, revision, document_id, collection_id, source, original_filename, tenant_id, workspace_id,
     sha256, metadata, chunk_count, valid_from)
SELECT id, 1, id, collection_id, source, original_filename, tenant_id, workspace_id, sha256, metadata,
       chunk_count, created_at
FROM agentrag.documents;

-- A new documents row continues the lineage last seen under the same key (collection, source,
-- tenant, workspace) when that lineage has no current revision (its row was replaced or deleted);
-- otherwise it starts a lineage of its own. Statement-level with transition tables: one INSERT per
-- write batch, whatever its size.
CREATE FUNCTION agentrag.document_revisions_open() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agentrag.document_revisions
        (lineage, revision, document_id, collection_id, source, original_filename, tenant_id, workspace_id,
         sha256, metadata, chunk_count)
    SELECT coalesce(prev.lineage, n.id), coalesce(prev.revision, 0) + 1, n.id, n.collection_id, n.source,
           n.original_filename, n.tenant_id, n.workspace_id, n.sha256, n.metadata, n.chunk_count
    FROM new_documents n
    LEFT JOIN LATERAL (
        SELECT r.lineage, r.revision
        FROM agentrag.document_revisions r
        WHERE r.collection_id = n.collection_id AND r.source = n.source
          AND coalesce(r.tenant_id, '') = coalesce(n.tenant_id, '')
          AND coalesce(r.workspace_id, '') = coalesce(n.workspace_id, '')
          AND r.valid_to IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM agentrag.document_revisions later
                          WHERE later.lineage = r.lineage AND later.revision > r.revision)
        ORDER BY r.valid_to DESC, r.revision DESC
        LIMIT 1
    ) prev ON true;
    RETURN NULL;
END
$$;

CREATE FUNCTION agentrag.document_revisions_close() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE agentrag.document_revisions r
    SET valid_to = now(), text = o.text
    FROM old_documents o
    WHERE r.document_id = o.id AND r.valid_to IS NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER documents_revision_open AFTER INSERT ON agentrag.documents
    REFERENCING NEW TABLE AS new_documents FOR EACH STATEMENT
    EXECUTE FUNCTION agentrag.document_revisions_open();
CREATE TRIGGER documents_revision_close AFTER DELETE ON agentrag.documents
    REFERENCING OLD TABLE AS old_documents FOR EACH STATEMENT
    EXECUTE FUNCTION agentrag.document_revisions_close();
