-- The serving API under faults (issue #28): refusals and request outcomes are audited too, and
-- audit rows are purged after a retention period (by created_at).
-- Types: RETRIEVAL_EXECUTED, GENERATION_EXECUTED, REQUEST_REFUSED (a 4xx answered without work:
-- status and route, never a body or a token), REQUEST_OUTCOME (how a streamed answer ended:
-- completed, client_disconnected or failed). The check allows any upper-case name so that other
-- event types can be added without dropping it again.
ALTER TABLE agentrag.audit_events DROP CONSTRAINT IF EXISTS audit_events_type_check;
ALTER TABLE agentrag.audit_events ADD CONSTRAINT audit_events_type_check CHECK (type ~ '^[A-Z][A-Z_]{0,63}$');
CREATE INDEX IF NOT EXISTS audit_events_created_at ON agentrag.audit_events (created_at);
