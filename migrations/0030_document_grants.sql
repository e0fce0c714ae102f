-- Document permissions (issue #26). A collection created with acl=True enforces grants: each of
-- its documents carries the grant tokens that may read it ('u:<user>', 'g:<group>', '*' for
-- everyone in its tenant); an empty array is readable by an admin principal only. Documents of
-- other collections hold NULL. The search's predicate is `d.grants && <the principal's tokens>`
-- (agentrag/retrieval/predicate.py), in the SQL of every leg; a grant or revoke is one UPDATE of
-- the document row, seen by the next query (no cache holds grants, nothing is re-embedded).
ALTER TABLE agentrag.collections ADD COLUMN acl boolean NOT NULL DEFAULT false;
ALTER TABLE agentrag.documents ADD COLUMN grants text[];
ALTER TABLE agentrag.documents ADD CONSTRAINT documents_grants_tokens
    CHECK (grants IS NULL OR array_position(grants, NULL) IS NULL);
CREATE INDEX documents_grants ON agentrag.documents USING gin (grants) WHERE grants IS NOT NULL;
