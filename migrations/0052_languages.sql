-- Every language (issue #40). A collection's declared language (NULL: each document's language is
-- detected at ingest) and each document's language, declared or detected (NULL: written before
-- languages existed, or a text without letters; analysed as English, as everything was before).
-- The lexical leg analyses a chunk in its document's language (agentrag/languages.py).
ALTER TABLE agentrag.collections ADD COLUMN language text;
ALTER TABLE agentrag.documents ADD COLUMN language text;
