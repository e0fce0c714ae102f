-- agentrag schema, version 1: collections, documents, session links, chunks, relations, query logs.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE agentrag.collections (
    id              bigserial PRIMARY KEY,
    name            text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$'),
    description     text NOT NULL DEFAULT '',
    embed_model     text NOT NULL,
    embed_version   text NOT NULL,
    dimensions      integer NOT NULL CHECK (dimensions BETWEEN 1 AND 16000),
    distance        text NOT NULL DEFAULT 'cosine' CHECK (distance IN ('cosine', 'l2', 'inner_product')),
    scoped          boolean NOT NULL DEFAULT false,
    version         bigint NOT NULL DEFAULT 0,   -- bumped by every write: the BM25 cache key
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agentrag.documents (
    id                text PRIMARY KEY,
    collection_id     bigint NOT NULL REFERENCES agentrag.collections (id) ON DELETE CASCADE,
    source            text NOT NULL,          -- the document's key inside its collection and scope
    original_filename text,
    sha256            text NOT NULL,          -- of the document text
    text              text NOT NULL,          -- chunks' offsets point into this
    metadata          jsonb NOT NULL DEFAULT '{}'::jsonb,
    classification    text,
    doc_date          date,
    tenant_id         text,
    workspace_id      text,
    chunk_count       integer NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX documents_key ON agentrag.documents
    (collection_id, source, coalesce(tenant_id, ''), coalesce(workspace_id, ''));
CREATE INDEX documents_scope ON agentrag.documents (collection_id, tenant_id, workspace_id);

CREATE TABLE agentrag.document_sessions (
    session_id   text NOT NULL,
    document_id  text NOT NULL REFERENCES agentrag.documents (id) ON DELETE CASCADE,
    linked_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, document_id)
);
CREATE INDEX document_sessions_document ON agentrag.document_sessions (document_id);

CREATE TABLE agentrag.chunks (
    id             text PRIMARY KEY,
    document_id    text NOT NULL REFERENCES agentrag.documents (id) ON DELETE CASCADE,
    collection_id  bigint NOT NULL,
    chunk_index    integer NOT NULL,
    text           text NOT NULL,
    start_char     integer NOT NULL CHECK (start_char >= 0),
    end_char       integer NOT NULL CHECK (end_char >= start_char),
    page           integer,
    section        text,
    sha256         text NOT NULL,
    embedding      vector NOT NULL,
    tsv            tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
);
CREATE INDEX chunks_collection ON agentrag.chunks (collection_id);
CREATE INDEX chunks_document ON agentrag.chunks (document_id);
CREATE INDEX chunks_tsv ON agentrag.chunks USING gin (tsv);
-- HNSW indexes are partial expression indexes, one per collection, made by the store
-- (embedding::vector(dims) with the collection's operator class, WHERE collection_id = id).

CREATE TABLE agentrag.relations (
    id             bigserial PRIMARY KEY,
    collection_id  bigint NOT NULL REFERENCES agentrag.collections (id) ON DELETE CASCADE,
    subject        text NOT NULL,
    relation       text NOT NULL,
    object         text NOT NULL,
    source         text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (collection_id, subject, relation, object)
);
CREATE INDEX relations_subject ON agentrag.relations (collection_id, lower(subject));
CREATE INDEX relations_object ON agentrag.relations (collection_id, lower(object));

CREATE TABLE agentrag.query_logs (
    id             text PRIMARY KEY,
    created_at     timestamptz NOT NULL DEFAULT now(),
    question       text,
    collections    text[] NOT NULL DEFAULT '{}',
    chunk_ids      jsonb NOT NULL DEFAULT '[]'::jsonb,
    answer         text,
    mode           text,
    grounded       boolean,
    latency_ms     jsonb NOT NULL DEFAULT '{}'::jsonb,
    model          text,
    input_tokens   integer,
    output_tokens  integer
);
