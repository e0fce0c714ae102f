"""Readers: files into text with structure and locators, and chunking that respects it.

One module per family, one :class:`Reader` protocol, a registry that picks the reader by
extension and sniffed content (overridable by the caller):

=========================  ===========================  ===========================================
format                     reader (module)              library (extra)
=========================  ===========================  ===========================================
.txt .md                   text                         none
.pdf                       pdf (+ ocr for scanned)      pypdf (``pdf``); pytesseract (``ocr``)
.docx                      word                         python-docx (``readers``)
.pptx                      slides                       python-pptx (``readers``)
.xlsx .csv .tsv            sheets                       openpyxl (``readers``); csv: none
.html .htm                 web                          trafilatura (``readers``)
.eml .mbox                 mail                         none (attachments: their own reader)
.epub                      epub                         ebooklib (``readers``)
.json .jsonl               jsondoc                      none
=========================  ===========================  ===========================================

``read(path)`` returns :class:`Extracted` blocks; :func:`layout` turns them into the document
text and its :class:`Chunk` s (tables by rows under their header, slides whole, a heading path
and a locator per chunk). Nothing here imports a reader's library until a file of its kind is read.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    **dict.fromkeys(("LIMITS", "Block", "Extracted", "Limits", "Reader", "Source"), "agentrag.readers.base"),
    **dict.fromkeys(
        ("DEFAULT_CHUNK_OVERLAP", "DEFAULT_CHUNK_SIZE", "Chunk", "chunk_text", "layout"),
        "agentrag.readers.chunking",
    ),
    **dict.fromkeys(
        ("READERS", "ReaderChoice", "read", "reader_for", "register", "sniff", "supported_suffixes"),
        "agentrag.readers.registry",
    ),
    "JSONReader": "agentrag.readers.jsondoc",
    "PDFReader": "agentrag.readers.pdf",
    "format_locator": "agentrag.readers.locators",
    "parse_front_matter": "agentrag.readers.text",
}

__all__ = [
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "LIMITS",
    "READERS",
    "Block",
    "Chunk",
    "Extracted",
    "JSONReader",
    "Limits",
    "PDFReader",
    "Reader",
    "ReaderChoice",
    "Source",
    "chunk_text",
    "format_locator",
    "layout",
    "parse_front_matter",
    "read",
    "reader_for",
    "register",
    "sniff",
    "supported_suffixes",
]


def __getattr__(name: str) -> Any:  # the registry (and every reader module) loads on first use
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrag.readers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from agentrag.readers.base import LIMITS, Block, Extracted, Limits, Reader, Source
    from agentrag.readers.chunking import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, Chunk, chunk_text, layout
    from agentrag.readers.jsondoc import JSONReader
    from agentrag.readers.locators import format_locator
    from agentrag.readers.pdf import PDFReader
    from agentrag.readers.registry import (
        READERS,
        ReaderChoice,
        read,
        reader_for,
        register,
        sniff,
        supported_suffixes,
    )
    from agentrag.readers.text import parse_front_matter
