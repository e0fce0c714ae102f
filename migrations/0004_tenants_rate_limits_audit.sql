-- The serving API (agentrag serve): tenants, their shared rate-limit state, persisted audit events.
CREATE TABLE agentrag.tenants (
    id                   text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$'),
    state                text NOT NULL DEFAULT 'ACTIVE' CHECK (state IN ('ACTIVE', 'SUSPENDED')),
    retrieval_top_k_max  integer NOT NULL DEFAULT 50 CHECK (retrieval_top_k_max BETWEEN 1 AND 50),
    rate_limit           integer NOT NULL DEFAULT 1000 CHECK (rate_limit >= 1),       -- requests per period
    rate_limit_period_s  double precision NOT NULL DEFAULT 60 CHECK (rate_limit_period_s > 0),
    generation_enabled   boolean NOT NULL DEFAULT true,
    suppress_ungrounded  boolean NOT NULL DEFAULT false,
    config               jsonb NOT NULL DEFAULT '{}'::jsonb,                            -- free-form extras
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);

-- GCRA state, one row per tenant: tat is the theoretical arrival time of the next request.
-- Every server process updates it with one atomic statement per request.
CREATE TABLE agentrag.rate_limits (
    tenant_id  text PRIMARY KEY REFERENCES agentrag.tenants (id) ON DELETE CASCADE,
    tat        timestamptz NOT NULL,
    allowed    boolean NOT NULL DEFAULT true   -- whether the last request took a slot
);

-- RETRIEVAL_EXECUTED / GENERATION_EXECUTED: ids and counts only, never query, chunk or answer text.
CREATE TABLE agentrag.audit_events (
    id            bigserial PRIMARY KEY,
    type          text NOT NULL CHECK (type IN ('RETRIEVAL_EXECUTED', 'GENERATION_EXECUTED')),
    query_id      text NOT NULL,
    tenant_id     text,
    workspace_id  text,
    session_id    text,
    latency_ms    double precision,
    details       jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_events_tenant ON agentrag.audit_events (tenant_id, created_at DESC);
CREATE INDEX audit_events_query ON agentrag.audit_events (query_id);
