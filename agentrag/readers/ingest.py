"""The one call ingest's prepare stage makes: a file into its stored text, metadata and chunks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrag.readers.base import Source
from agentrag.readers.chunking import Chunk, layout
from agentrag.readers.registry import ReaderChoice, read

__all__ = ["read_document"]


def read_document(
    path: Path | Source, *, reader: ReaderChoice = None, size: int, overlap: int
) -> tuple[str, dict[str, Any], list[Chunk]]:
    """Read ``path`` (a file, or a :class:`Source` already read; the reader by extension and
    content, or ``reader``) and lay it out.

    The metadata is the reader's (title, author, e-mail headers, sheets, ...) plus, when there
    is something to say, ``reader_notes`` (what was skipped or read another way) and
    ``ocr_pages`` / ``unread_pages`` for PDFs.
    """
    extracted = read(path, reader=reader)
    text, chunks = layout(extracted, size=size, overlap=overlap)
    metadata = dict(extracted.metadata)
    if extracted.notes:
        metadata["reader_notes"] = list(extracted.notes)
    return text, metadata, chunks
