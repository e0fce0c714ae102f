-- Where each chunk is in its file, beyond its character offsets: page / page_end, slide (+ title),
-- sheet + rows, section (the heading path), record, chapter, message, attachment, ocr
-- (agentrag.readers.chunking). NULL for chunks written before, and for chunks with nothing to add.
ALTER TABLE agentrag.chunks ADD COLUMN locator jsonb;
