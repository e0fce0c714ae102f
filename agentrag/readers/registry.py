"""The reader registry: which reader reads a file, by its extension and its sniffed content,
unless the caller names one.

* ``read(path)`` picks by extension, then checks the first bytes: a file whose content is
  another known format (a PDF named ``.docx``, a workbook named ``.dat``) is read by that
  format's reader, noted on the result; a file no reader claims is an
  :class:`~agentrag.errors.UnsupportedFormatError`.
* ``read(path, reader="html")`` / ``reader=JSONReader(text_field="body")`` /
  ``reader={".txt": "markdown"}`` override the choice.
* :func:`register` adds or replaces a reader (your own class following :class:`Reader`).

Every failure is an :class:`~agentrag.errors.IngestError` subclass naming the file; nothing of a
reader's library is imported until a file of its kind is read.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Union

from agentrag.errors import (
    AgentragError,
    EncryptedFileError,
    FileTooLargeError,
    InvalidInputError,
    UnreadableFileError,
    UnsupportedFormatError,
)
from agentrag.readers.base import LIMITS, Extracted, Reader, Source, file_failure
from agentrag.readers.epub import EpubReader
from agentrag.readers.jsondoc import JSONReader
from agentrag.readers.mail import EmailReader, MboxReader
from agentrag.readers.pdf import PDFReader
from agentrag.readers.sheets import CSVReader, XlsxReader
from agentrag.readers.slides import PptxReader
from agentrag.readers.text import MarkdownReader, TextReader
from agentrag.readers.web import HTMLReader
from agentrag.readers.word import DocxReader

__all__ = ["READERS", "ReaderChoice", "read", "reader_for", "register", "sniff", "supported_suffixes"]

ReaderChoice = Union[str, Reader, Mapping[str, Union[str, Reader]], None]  # noqa: UP007

READERS: dict[str, Reader] = {}
_BY_SUFFIX: dict[str, str] = {}
_OOXML = {"word/document.xml": "docx", "ppt/presentation.xml": "pptx", "xl/workbook.xml": "xlsx"}
_LEGACY = (".doc", ".xls", ".ppt")


def register(reader: Reader, *, suffixes: tuple[str, ...] | None = None) -> None:
    """Add ``reader`` under its ``name`` for its ``suffixes`` (or the ones given)."""
    if not isinstance(reader, Reader):
        raise InvalidInputError(
            f"a reader needs name, suffixes, extra and read(source): got {type(reader).__name__}"
        )
    READERS[reader.name] = reader
    for suffix in suffixes or reader.suffixes:
        _BY_SUFFIX[suffix.lower()] = reader.name


for _reader in (
    TextReader(), MarkdownReader(), PDFReader(), DocxReader(), PptxReader(), XlsxReader(), CSVReader(),
    HTMLReader(), EmailReader(), MboxReader(), EpubReader(), JSONReader(),
):  # fmt: skip
    register(_reader)


def supported_suffixes() -> tuple[str, ...]:
    """The extensions some reader claims (what a folder ingest picks up)."""
    return tuple(sorted(_BY_SUFFIX))


def sniff(source: Source) -> str | None:
    """The reader the content asks for, from its first bytes (None: nothing definite)."""
    head = source.head(4096)
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"\xd0\xcf\x11\xe0"):  # OLE2: an encrypted OOXML file or a legacy one
        if source.suffix in _LEGACY:
            raise UnsupportedFormatError(
                f"{source.name}: legacy binary Office files are not read: save it as {source.suffix}x",
                source=source.name,
            )
        raise EncryptedFileError(
            f"{source.name}: the file is password-protected (an encrypted Office container);"
            " save it without a password",
            source=source.name,
        )
    if head.startswith(b"PK\x03\x04"):
        try:
            with source.open() as f, zipfile.ZipFile(f) as archive:
                names = set(archive.namelist())
                if "mimetype" in names and archive.read("mimetype").strip() == b"application/epub+zip":
                    return "epub"
        except (zipfile.BadZipFile, EOFError, ValueError):
            return None  # truncated: the extension's reader says so
        return next((kind for part, kind in _OOXML.items() if part in names), None)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html")):
        return "html"
    return None


def reader_for(source: Source, choice: ReaderChoice = None) -> tuple[Reader, str]:
    """The reader for ``source`` and a note when the content overruled the extension ("" if not)."""
    if isinstance(choice, Mapping):
        choice = choice.get(source.suffix)
    if isinstance(choice, str):
        if choice not in READERS:
            raise InvalidInputError(f"unknown reader {choice!r}: choose one of {', '.join(sorted(READERS))}")
        return READERS[choice], ""
    if choice is not None:
        if not isinstance(choice, Reader):
            raise InvalidInputError(f"reader must be a reader name or a Reader, got {type(choice).__name__}")
        return choice, ""
    by_name = _BY_SUFFIX.get(source.suffix)
    sniffed = sniff(source)
    if sniffed is not None and sniffed != by_name:
        said = f"its name says {source.suffix}" if source.suffix else "it has no extension"
        return READERS[sniffed], f"read as {sniffed}: its content is {sniffed}, {said}"
    if by_name is None:
        raise UnsupportedFormatError(
            f"{source.name}: unsupported file type {source.suffix or '(none)'}"
            f" (readers: {', '.join(supported_suffixes())}; or name a reader: reader=NAME, --reader NAME)",
            source=source.name,
        )
    return READERS[by_name], ""


def read(
    value: str | Path | bytes | Source, *, name: str | None = None, reader: ReaderChoice = None
) -> Extracted:
    """Read a file (a path, bytes with a ``name``, or a :class:`Source`) into blocks."""
    source = value if isinstance(value, Source) else Source.of(value, name)
    try:
        size = source.size()
    except OSError as exc:
        raise UnreadableFileError(
            f"{source.name}: cannot be read ({exc.strerror or exc})", source=source.name
        ) from exc
    if size > LIMITS.max_file_bytes:
        raise FileTooLargeError(
            f"{source.name}: {size:,} bytes is over the {LIMITS.max_file_bytes:,}-byte limit"
            " (agentrag.readers.LIMITS.max_file_bytes)",
            source=source.name,
        )
    try:
        chosen, note = reader_for(source, reader)  # sniffs the first bytes: opens the file
    except OSError as exc:
        raise file_failure(source.name, exc) from exc
    try:
        extracted = chosen.read(source)
    except AgentragError:  # raised on purpose: typed already
        raise
    except Exception as exc:  # a library's failure on a hostile file (RecursionError, MemoryError too)
        raise file_failure(source.name, exc, f"reading it as {chosen.name}") from exc
    extracted.reader = extracted.reader or chosen.name
    if note:
        extracted.notes.insert(0, note)
    return extracted
