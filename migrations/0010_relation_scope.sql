-- Knowledge-graph triples carry a tenant-rooted scope (issue #14), like documents and the query
-- log: a tenant's triples are read only inside a scope naming that tenant (or Scope.every()).
-- NULL means unscoped. The same triple may exist once per (collection, tenant, workspace, session);
-- COALESCE makes NULLs compare equal, so an unscoped repeat is still a no-op.
ALTER TABLE agentrag.relations
    ADD COLUMN tenant_id text,
    ADD COLUMN workspace_id text,
    ADD COLUMN session_id text;
ALTER TABLE agentrag.relations DROP CONSTRAINT IF EXISTS relations_collection_id_subject_relation_object_key;
CREATE UNIQUE INDEX relations_unique ON agentrag.relations
    (collection_id, coalesce(tenant_id, ''), coalesce(workspace_id, ''), coalesce(session_id, ''),
     subject, relation, object);
DROP INDEX IF EXISTS agentrag.relations_subject;
DROP INDEX IF EXISTS agentrag.relations_object;
CREATE INDEX relations_subject ON agentrag.relations (collection_id, lower(subject), tenant_id);
CREATE INDEX relations_object ON agentrag.relations (collection_id, lower(object), tenant_id);
