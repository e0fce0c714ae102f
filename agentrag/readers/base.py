"""What every reader shares: the :class:`Source` it reads, the :class:`Extracted` blocks it
returns, the :class:`Reader` protocol, and the limits that keep a hostile file from taking the
machine (file size, unpacked size of a ZIP container, extracted text).

A reader turns a file into *blocks*, in reading order, each with a locator a person can follow
(``{"page": 3}``, ``{"slide": 2, "title": ...}``, ``{"sheet": "Q3"}``, ``{"section": [...]}``).
Text blocks carry prose (Markdown headings inside them are sections), table blocks carry a header
and numbered rows, so the chunker (:mod:`agentrag.readers.chunking`) can keep a table's header
with every piece of it and never cut a row or a slide in two.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from agentrag.errors import FileTooLargeError, IngestError, ReaderUnavailableError, UnreadableFileError

__all__ = [
    "LIMITS",
    "Block",
    "Extracted",
    "Limits",
    "Reader",
    "Source",
    "check_zip",
    "file_failure",
    "import_extra",
    "table_line",
]


@dataclass(slots=True)
class Limits:
    """Reader limits, checked before (file, ZIP directory) and while (text) a file is read.

    ``max_file_bytes``: a bigger file is refused unread. ``max_unpacked_bytes`` and
    ``max_ratio``: a ZIP container (DOCX, PPTX, XLSX, EPUB) whose members would unpack to more,
    or compress better than a document can (a zip bomb), is refused before anything is unpacked.
    ``max_text_chars``: a reader stops (and fails the file) once it has extracted this much text,
    so a huge sheet streams row by row into a bounded amount of memory. ``max_json_depth``: a
    JSON document (or JSON Lines record) nested deeper than this is refused before it is parsed
    (parsing it would exhaust the interpreter's stack).
    """

    max_file_bytes: int = 100 * 2**20
    max_unpacked_bytes: int = 512 * 2**20
    max_ratio: int = 200
    max_text_chars: int = 20_000_000
    max_json_depth: int = 128


LIMITS = Limits()  # module-wide; tests and services may lower them


@dataclass(frozen=True, slots=True)
class Source:
    """A file to read: on disk (``path``) or in memory (``data``, e.g. an e-mail attachment)."""

    name: str
    path: Path | None = None
    data: bytes | None = None

    @classmethod
    def of(cls, value: str | Path | bytes, name: str | None = None) -> Source:
        if isinstance(value, bytes):
            return cls(name or "data", data=value)
        path = Path(value)
        return cls(name or path.name, path=path)

    @property
    def suffix(self) -> str:
        return Path(self.name).suffix.lower()

    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        assert self.path is not None
        return self.path.stat().st_size

    def open(self) -> IO[bytes]:
        if self.data is not None:
            return io.BytesIO(self.data)
        assert self.path is not None
        return self.path.open("rb")

    def head(self, n: int = 4096) -> bytes:
        with self.open() as f:
            return f.read(n)

    def read_bytes(self) -> bytes:
        with self.open() as f:
            return f.read()

    def read_text(self) -> str:
        """The file as UTF-8 text (a BOM dropped, CRLF made LF); anything else is unreadable."""
        try:
            return self.read_bytes().decode("utf-8-sig").replace("\r\n", "\n")
        except UnicodeDecodeError as exc:
            raise UnreadableFileError(
                f"{self.name}: not valid UTF-8 text ({exc.reason} at byte {exc.start})", source=self.name
            ) from exc


@dataclass(frozen=True, slots=True)
class Block:
    """One unit of a document, in reading order.

    ``kind`` is ``text`` (prose: ``markdown=True`` when headings in it are Markdown ``#`` lines,
    ``page_starts`` when it spans pages: the offset in ``text`` where page ``page + i`` begins),
    ``table`` (``header``: its header line(s); ``rows``: ``(row number, line)`` pairs) or
    ``slide`` (kept whole in one chunk when it fits). ``locator`` is where it is in the file.
    """

    kind: str
    text: str = ""
    locator: dict[str, Any] = field(default_factory=dict)
    header: str = ""
    rows: tuple[tuple[int, str], ...] = ()
    markdown: bool = False
    page_starts: tuple[int, ...] | None = None


@dataclass(slots=True)
class Extracted:
    """What a reader returns: blocks in reading order, metadata for the document, the reader's
    name, and per-page notes (``ocr_pages``: pages read by OCR; ``notes``: what was skipped)."""

    blocks: list[Block]
    metadata: dict[str, Any] = field(default_factory=dict)
    reader: str = ""
    ocr_pages: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def text_chars(self) -> int:
        return sum(len(b.text) + len(b.header) + sum(len(r) for _, r in b.rows) for b in self.blocks)


@runtime_checkable
class Reader(Protocol):
    """Reads one kind of file. ``name`` is how callers pick it (``ingest(..., reader="html")``);
    ``suffixes`` are the extensions it claims; ``extra`` is the pip extra its library comes in."""

    name: str
    suffixes: tuple[str, ...]
    extra: str | None

    def read(self, source: Source) -> Extracted: ...


def import_extra(module: str, extra: str, what: str, source: Source) -> Any:
    """Import a reader's library, or fail the file with the extra that provides it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ReaderUnavailableError(
            f"{source.name}: reading {what} needs {module}: pip install 'agentrag[{extra}]'",
            source=source.name,
        ) from exc


def check_zip(source: Source, what: str, limits: Limits | None = None) -> None:
    """Refuse a ZIP container that is not one, or that would unpack past the limits."""
    limits = limits or LIMITS
    try:
        with source.open() as f, zipfile.ZipFile(f) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise UnreadableFileError(
            f"{source.name}: not a readable {what} file (its ZIP container is truncated or corrupt: {exc})",
            source=source.name,
        ) from exc
    unpacked = sum(i.file_size for i in infos)
    packed = max(sum(i.compress_size for i in infos), 1)
    if unpacked > limits.max_unpacked_bytes or unpacked > limits.max_ratio * packed + 2**20:
        raise FileTooLargeError(
            f"{source.name}: refused unread: its {len(infos)} parts would unpack to {unpacked:,} bytes"
            f" from {packed:,} (limits: {limits.max_unpacked_bytes:,} bytes, ratio {limits.max_ratio})",
            source=source.name,
        )


def check_text(source: Source, chars: int, limits: Limits | None = None) -> None:
    """Fail the file once its extracted text passes the limit (called while reading)."""
    limits = limits or LIMITS
    if chars > limits.max_text_chars:
        raise FileTooLargeError(
            f"{source.name}: more than {limits.max_text_chars:,} characters of text: split it or raise"
            " agentrag.readers.LIMITS.max_text_chars",
            source=source.name,
        )


def file_failure(name: str, exc: BaseException, what: str = "reading it") -> IngestError:
    """What a per-file failure that no reader anticipated becomes: a typed error naming the file
    (an :class:`~agentrag.errors.IngestError` raised on purpose is returned as it is). Nesting
    that exhausts the stack and running out of memory are limits (FileTooLargeError); anything
    else (a library's own exception on a malformed file, an OS error) is UnreadableFileError with
    the exception's class. The file fails alone: ingest and sync go on with the others."""
    if isinstance(exc, IngestError):
        return exc
    if isinstance(exc, RecursionError):
        return FileTooLargeError(
            f"{name}: nested too deeply to read (RecursionError while {what})", source=name
        )
    if isinstance(exc, MemoryError):
        return FileTooLargeError(f"{name}: ran out of memory while {what} (MemoryError)", source=name)
    if isinstance(exc, OSError):
        return UnreadableFileError(
            f"{name}: cannot be read ({exc.strerror or type(exc).__name__})", source=name
        )
    detail = str(exc)[:200]
    return UnreadableFileError(
        f"{name}: failed while {what} ({type(exc).__name__}{': ' + detail if detail else ''})", source=name
    )


def table_line(cells: list[str]) -> str:
    """One Markdown table row: cells stripped, inner newlines and pipes escaped."""
    return "| " + " | ".join(c.strip().replace("\n", " ").replace("|", "\\|") for c in cells) + " |"


def table_header(cells: list[str]) -> str:
    """A Markdown table's header line and its separator."""
    return table_line(cells) + "\n|" + "---|" * len(cells)
