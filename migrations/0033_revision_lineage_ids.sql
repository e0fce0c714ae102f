-- A new lineage is named after its first revision's document id, unless a lineage of that name
-- already exists: a.md synced, renamed to b.md (b.md continues a.md's lineage), then a new a.md
-- written has a.md's old id, and starting lineage (id, 1) again violated document_revisions' key
-- (a sync failed with a UniqueViolation). Such a lineage gets the id with a random suffix. The
-- function is migration 0020's otherwise unchanged (the triggers call it by name).
CREATE OR REPLACE FUNCTION agentrag.document_revisions_open() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agentrag.document_revisions
        (lineage, revision, document_id, collection_id, source, original_filename, tenant_id, workspace_id,
         sha256, metadata, chunk_count)
    SELECT coalesce(prev.lineage, CASE WHEN EXISTS (SELECT 1 FROM agentrag.document_revisions t
                                                    WHERE t.lineage = n.id)
                                       THEN n.id || '.' || left(md5(gen_random_uuid()::text), 12)
                                       ELSE n.id END),
           coalesce(prev.revision, 0) + 1, n.id, n.collection_id, n.source,
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
