"""Chunking lives in :mod:`agentrag.readers.chunking`; re-exported here for the store's callers."""

from __future__ import annotations

from agentrag.readers.chunking import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, Chunk, chunk_text

__all__ = ["DEFAULT_CHUNK_OVERLAP", "DEFAULT_CHUNK_SIZE", "Chunk", "chunk_text"]
