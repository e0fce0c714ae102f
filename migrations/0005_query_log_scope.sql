-- Query-log rows carry the scope their question was asked in (tenant-rooted, issue #14), so a
-- multi-tenant application can show a tenant its own log: Store.query_logs(scope=Scope(tenant=...)).
ALTER TABLE agentrag.query_logs
    ADD COLUMN tenant_id text,
    ADD COLUMN workspace_id text,
    ADD COLUMN session_id text;
CREATE INDEX query_logs_tenant ON agentrag.query_logs (tenant_id, created_at DESC);
