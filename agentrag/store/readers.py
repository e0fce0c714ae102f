"""Reading files lives in :mod:`agentrag.readers` (one module per format family); this module
keeps the store's older entry points: :func:`read_file` (text, metadata, PDF page starts)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrag.readers import DEFAULT_CHUNK_SIZE, layout, parse_front_matter, read, supported_suffixes

__all__ = ["SUPPORTED_SUFFIXES", "SourceText", "parse_front_matter", "read_file"]


class _SupportedSuffixes:
    """The extensions some reader claims, asked of the registry at each use: a reader registered
    after import (``agentrag.readers.register``) is picked up by folder ingests and syncs too."""

    def __contains__(self, suffix: object) -> bool:
        return suffix in supported_suffixes()

    def __iter__(self) -> Iterator[str]:
        return iter(supported_suffixes())

    def __repr__(self) -> str:
        return repr(supported_suffixes())


SUPPORTED_SUFFIXES = _SupportedSuffixes()


@dataclass(frozen=True, slots=True)
class SourceText:
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    page_starts: tuple[int, ...] | None = None  # offset where page i+1 begins


def read_file(path: Path) -> SourceText:
    """A file's text and metadata as ingest stores them (at the default chunk size)."""
    extracted = read(path)
    text, _chunks = layout(extracted, size=DEFAULT_CHUNK_SIZE, overlap=0)
    starts = next((b.page_starts for b in extracted.blocks if b.page_starts), None)
    return SourceText(text, extracted.metadata, starts)
