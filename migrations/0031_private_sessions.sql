-- Private session uploads (issue #26). A document ingested into a session is private: only a
-- scope naming that session (or Scope.every()) reads it, until Store.share promotes it. Documents
-- linked to a session before this migration were ingested that way: they become private.
-- collections.private_documents is set (never unset) by the first private write, in the same
-- transaction, so a search of a collection without any skips the documents join; a search reads
-- the flag and the rows in one snapshot (REPEATABLE READ), so it never misses a fresh upload.
ALTER TABLE agentrag.documents ADD COLUMN private boolean NOT NULL DEFAULT false;
ALTER TABLE agentrag.collections ADD COLUMN private_documents boolean NOT NULL DEFAULT false;
UPDATE agentrag.documents d SET private = true
    WHERE EXISTS (SELECT 1 FROM agentrag.document_sessions s WHERE s.document_id = d.id);
UPDATE agentrag.collections c SET private_documents = true
    WHERE EXISTS (SELECT 1 FROM agentrag.documents d WHERE d.collection_id = c.id AND d.private);
