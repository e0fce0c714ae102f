-- Scoped search (issue #29): a selective metadata filter is found through an index instead of a
-- scan of every document's metadata. The filter compiler adds `d.metadata @> {key: value}` beside
-- each equality (implied by it, so the rows are the same); jsonb_path_ops serves `@>` only, and is
-- the smaller of the two GIN operator classes. The planner's count of the scope and its exact
-- vector and BM25 legs read the matching documents from it.
CREATE INDEX IF NOT EXISTS documents_metadata ON agentrag.documents USING gin (metadata jsonb_path_ops);
