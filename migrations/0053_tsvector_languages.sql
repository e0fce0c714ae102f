-- lexical_sql in every language (issue #40). The stored tsvectors were computed as English for every
-- chunk; a chunk is now analysed in its language (its collection's declared one, else its document's;
-- NULL: English), by PostgreSQL's configuration of that language or by agentrag's analyser into
-- 'simple' (agentrag/retrieval/text_search.py). tsv_languages: the languages of a collection's
-- tsvectors (NULL: not recorded yet; the next sync reads them from every chunk), in which a search
-- analyses the question.
ALTER TABLE agentrag.collections ADD COLUMN tsv_languages text[];
-- Tsvectors of chunks in another language than English were analysed as English: they go, and their
-- collections sync again on their next lexical_sql search (English rows stay as they are).
DELETE FROM agentrag.chunk_tsv t
USING agentrag.chunks c, agentrag.documents d, agentrag.collections col
WHERE t.chunk_id = c.id AND d.id = c.document_id AND col.id = c.collection_id
  AND COALESCE(col.language, d.language, 'en') <> 'en';
UPDATE agentrag.collections SET tsv_version = NULL WHERE tsv_version IS NOT NULL;
