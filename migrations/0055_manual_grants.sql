-- Grants set by hand kept apart from the source's (a manual store.grant was replaced by the next
-- change of the document's grants sidecar or front matter). documents.grants stays what a search
-- enforces (the predicate and its GIN index are unchanged); every writer now derives it from:
--   source_grants  what the source says (ingest(grants=...), metadata / front matter, sidecar);
--                  NULL in a collection without acl
--   granted        tokens store.grant added by hand: enforced whatever the source says
--   revoked        tokens store.revoke took away by hand: refused whatever the source says,
--                  until granted by hand again
-- grants = (source_grants + granted) - revoked, sorted, distinct (agentrag.store.acl.enforced /
-- enforced_sql; no trigger: Citus runs none on distributed tables). Sync and ingest replace
-- source_grants only; a replaced or renamed document carries its granted / revoked along.
ALTER TABLE agentrag.documents
    ADD COLUMN source_grants text[],
    ADD COLUMN granted text[] NOT NULL DEFAULT '{}',
    ADD COLUMN revoked text[] NOT NULL DEFAULT '{}';

-- Existing rows: the source is the metadata's grants (what the last write took from the source);
-- a token in grants but not there was granted by hand, one there but not in grants revoked by hand.
-- (source + granted) - revoked is then exactly the grants each row had: nothing is lost.
UPDATE agentrag.documents d SET
    source_grants = s.tokens,
    granted = ARRAY(SELECT t FROM unnest(d.grants) t WHERE t <> ALL(s.tokens) ORDER BY t COLLATE "C"),
    revoked = ARRAY(SELECT t FROM unnest(s.tokens) t WHERE t <> ALL(d.grants) ORDER BY t COLLATE "C")
FROM (
    SELECT x.id, ARRAY(
        SELECT CASE
            WHEN btrim(g) = 'everyone' THEN '*'
            WHEN left(g, 5) = 'user:' THEN 'u:' || substr(g, 6)
            WHEN left(g, 6) = 'group:' THEN 'g:' || substr(g, 7)
            ELSE g END
        FROM jsonb_array_elements_text(
            CASE jsonb_typeof(x.metadata -> 'grants') WHEN 'array' THEN x.metadata -> 'grants' ELSE '[]' END
        ) AS g
        GROUP BY 1
    ) AS tokens
    FROM agentrag.documents x WHERE x.grants IS NOT NULL
) AS s
WHERE d.id = s.id;
