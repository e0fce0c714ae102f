-- Collections belong to tenants (issue #26). A collection with a tenant_id is that tenant's own:
-- a request scoped to another tenant neither lists nor searches it (it is "not found"), and only
-- its tenant's documents are ingested into it. NULL: shared with every tenant, as every collection
-- was before this migration.
ALTER TABLE agentrag.collections ADD COLUMN tenant_id text
    CHECK (tenant_id IS NULL OR tenant_id <> '');
CREATE INDEX collections_tenant ON agentrag.collections (tenant_id);
