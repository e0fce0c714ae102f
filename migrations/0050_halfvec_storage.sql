-- Half-precision vector storage per collection (issue #39): a collection records how its chunk
-- vectors are stored, 'vector' (float32, 4 bytes per dimension, as every collection so far) or
-- 'halfvec' (pgvector's float16, 2 bytes per dimension). A halfvec collection's vectors live in
-- their own column, embedding_half, with embedding NULL; a vector collection's in embedding, with
-- embedding_half NULL. Exactly one of the two is set on every row. Existing collections and their
-- rows stay as they are ('vector'); `agentrag reembed NAME --vector-type halfvec` converts one.
-- Adding a nullable column and dropping NOT NULL rewrite nothing; the CHECK reads the table once.
-- halfvec needs pgvector 0.7 or later (the embedded server ships 0.8): an older extension gets a clear error.
DO $$
DECLARE
    installed text := (SELECT extversion FROM pg_extension WHERE extname = 'vector');
BEGIN
    IF string_to_array(installed, '.')::int[] < ARRAY[0, 7] THEN
        RAISE EXCEPTION USING MESSAGE = 'pgvector 0.7 or later is needed (halfvec storage); installed: '
            || installed || '. Run ALTER EXTENSION vector UPDATE, then agentrag db upgrade';
    END IF;
END
$$;
ALTER TABLE agentrag.collections
    ADD COLUMN vector_type text NOT NULL DEFAULT 'vector' CHECK (vector_type IN ('vector', 'halfvec'));
ALTER TABLE agentrag.chunks
    ADD COLUMN embedding_half halfvec,
    ALTER COLUMN embedding DROP NOT NULL;
-- in the row, as the float32 vectors are (migration 0015)
ALTER TABLE agentrag.chunks ALTER COLUMN embedding_half SET STORAGE MAIN;
ALTER TABLE agentrag.chunks
    ADD CONSTRAINT chunks_one_embedding CHECK (num_nonnulls(embedding, embedding_half) = 1);
