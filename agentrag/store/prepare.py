"""Ingest's prepare stage: read, validate, chunk, embed -> documents ready to write.

The write stage (``agentrag.store.ingest``) runs in the process that holds the database
connection; the prepare stage can run anywhere. An :class:`Executor` decides where:
:class:`LocalExecutor` (the default) prepares batch by batch in this process,
``agentrag.executors.ray.RayExecutor`` on Ray workers. Both call the same two functions,
:func:`prepare_documents` and :func:`embed_documents`, so their results are identical.

A :class:`PreparedDocument` is plain, picklable data (no connection, no model): it crosses
process boundaries as it is. A problem with one document is recorded on that document
(``.error``) and never raised, so the others still go in; an embedding outage (the embedder
fails for every document of a batch) raises :class:`~agentrag.errors.EmbeddingError`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentrag.errors import EmbeddingError, IngestError, UnreadableFileError
from agentrag.readers.base import Source, file_failure
from agentrag.readers.chunking import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, Chunk, chunk_text
from agentrag.readers.ingest import read_document
from agentrag.store.acl import GRANTS_KEY, SIDECAR_SUFFIX, parse_sidecar, read_sidecar
from agentrag.store.safe_read import OutsideFolderError, read_inside

if TYPE_CHECKING:
    import numpy as np

    from agentrag.embedders import Embedder

__all__ = [
    "EMBED_BATCH_CHUNKS",
    "EMBED_BATCH_DOCUMENTS",
    "Executor",
    "LocalExecutor",
    "PreparedDocument",
    "embed_documents",
    "prepare_documents",
]

EMBED_BATCH_DOCUMENTS = 256  # documents read, chunked and embedded together ...
EMBED_BATCH_CHUNKS = 4096  # ... or about this many chunks (estimated from the text length)


@dataclass(slots=True)
class PreparedDocument:
    """One document on its way in: what to read (``path``) or its ``text``, then its chunks and vectors.

    ``known`` is the stored version under the same key (sha256 of its text, canonical JSON of its
    metadata), filled in by the driver so a worker can skip an unchanged document without
    chunking or embedding it (``unchanged``). ``error`` says why the document failed.
    """

    source: str
    text: str
    metadata: dict[str, Any]
    original_filename: str | None = None
    page_starts: tuple[int, ...] | None = None
    chunks: list[Chunk] = field(default_factory=list)
    sha256: str = ""
    path: str | None = None
    known: tuple[str, str] | None = None
    unchanged: bool = False
    error: str | None = None
    error_type: str | None = None  # the IngestError subclass of ``error`` (UnreadableFileError, ...)
    # the stored version's grants (as written: "group:hr"), kept when the document brings none of
    # its own (ingest's rule; sync mirrors its source's grants instead and leaves this None)
    kept_grants: list[str] | None = None
    reader: Any = None  # the caller's reader choice (agentrag.readers.ReaderChoice); None: by extension
    vectors: Any = None  # np.ndarray (len(chunks), dimensions) float32: row i for chunks[i]
    # (document id, its chunks' COPY rows): built by the write stage ahead of the write
    copy_rows: tuple[str, list[tuple[Any, ...]]] | None = field(default=None, repr=False)
    folder: str | None = None  # the folder ``path`` was found in (a folder walk): it must resolve inside it
    # (chunk size, overlap, CHUNKER_VERSION) its chunks are made with: recorded on its row (migration 0054)
    layout: tuple[int, int, int] | None = None

    @property
    def needs_write(self) -> bool:
        return self.error is None and not self.unchanged


@runtime_checkable
class Executor(Protocol):
    """Where ingest prepares documents: ``run`` yields every document it was given, prepared
    (read, validated, chunked, embedded, or marked unchanged / failed), in the order given.

    ``embedder`` must be usable where the work runs: an executor that ships it to other
    processes pickles it, and agentrag's embedders pickle as their configuration (model name
    and backend, API settings), never a loaded model or a connection.
    """

    def run(
        self,
        documents: Iterable[PreparedDocument],
        *,
        embedder: Embedder,
        chunk_size: int,
        chunk_overlap: int,
    ) -> Iterator[PreparedDocument]: ...


class LocalExecutor:
    """Prepare in this process (the default executor): ``batch_documents`` documents, or about
    ``batch_chunks`` chunks (estimated from the text or file length), read, chunked and embedded
    together; at least one document per batch.

    Reading and chunking run in the thread iterating ``run`` (ingest's producer thread, while
    the caller's thread writes); the embedding of a batch runs in a worker thread meanwhile
    (models and HTTP calls release the GIL), so reading and chunking the next batch overlaps it.
    The worker runs in a copy of the caller's context, so telemetry spans carry over."""

    def __init__(
        self, *, batch_documents: int = EMBED_BATCH_DOCUMENTS, batch_chunks: int = EMBED_BATCH_CHUNKS
    ) -> None:
        from agentrag.errors import InvalidInputError

        for name, value in (("batch_documents", batch_documents), ("batch_chunks", batch_chunks)):
            if type(value) is not int or value < 1:
                raise InvalidInputError(f"{name} must be an integer >= 1, got {value!r}")
        self.batch_documents = batch_documents
        self.batch_chunks = batch_chunks

    def __repr__(self) -> str:
        return f"LocalExecutor(batch_documents={self.batch_documents}, batch_chunks={self.batch_chunks})"

    def run(
        self,
        documents: Iterable[PreparedDocument],
        *,
        embedder: Embedder,
        chunk_size: int,
        chunk_overlap: int,
    ) -> Iterator[PreparedDocument]:
        import contextvars
        from concurrent.futures import Future, ThreadPoolExecutor

        with ThreadPoolExecutor(1, thread_name_prefix="agentrag-embed") as pool:
            ahead: tuple[list[PreparedDocument], Future[list[PreparedDocument]]] | None = None
            for batch in self._batches(documents, max(chunk_size - chunk_overlap, 1)):
                prepare_documents(batch, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
                embedding = pool.submit(contextvars.copy_context().run, embed_documents, batch, embedder)
                if ahead is not None:  # the previous batch, embedded meanwhile: written while this one embeds
                    yield from ahead[1].result()
                ahead = (batch, embedding)
            if ahead is not None:
                yield from ahead[1].result()

    def _batches(self, documents: Iterable[PreparedDocument], step: int) -> Iterator[list[PreparedDocument]]:
        batch: list[PreparedDocument] = []
        chunks = 0
        for document in documents:
            estimate = estimated_length(document) // step + 1
            if batch and (len(batch) >= self.batch_documents or chunks + estimate > self.batch_chunks):
                yield batch
                batch, chunks = [], 0
            batch.append(document)
            chunks += estimate
        if batch:
            yield batch


def estimated_length(document: PreparedDocument) -> int:
    """The length of a document's text, or of its file while it is not read (its size in bytes)."""
    if document.path is not None:
        try:
            return Path(document.path).stat().st_size
        except OSError:
            return 0
    return len(document.text)


def chunk_options(chunk_size: int | None, chunk_overlap: int | None) -> tuple[int, int]:
    """The chunk size and overlap ingest uses for the given options (None: the defaults)."""
    size = chunk_size or DEFAULT_CHUNK_SIZE
    overlap = DEFAULT_CHUNK_OVERLAP if chunk_overlap is None else chunk_overlap
    if overlap >= size:
        overlap = size // 5
    return size, overlap


def prepare_documents(
    documents: Sequence[PreparedDocument], *, chunk_size: int | None = None, chunk_overlap: int | None = None
) -> list[PreparedDocument]:
    """Read (documents with a ``path``), validate, hash and chunk each document, in place.

    A document that cannot be read or is invalid (no text, NUL bytes, metadata that is not
    JSON or has a bad ``date`` / ``classification``) gets ``.error``; one whose text and metadata
    equal its ``known`` stored version is marked ``unchanged`` and not chunked.
    """
    size, overlap = chunk_options(chunk_size, chunk_overlap)
    for document in documents:
        try:
            _read(document, size, overlap)
            if document.kept_grants is not None and GRANTS_KEY not in document.metadata:
                document.metadata[GRANTS_KEY] = list(document.kept_grants)
            document.sha256 = hashlib.sha256(document.text.encode("utf-8")).hexdigest()
            meta_json = canonical_metadata(document.metadata, document.source)
            document_columns(document.metadata, document.source)
            if "\x00" in document.text:
                raise IngestError(
                    f"{document.source}: the text contains NUL bytes (binary file?)", source=document.source
                )
            if not document.text.strip():
                raise IngestError(f"{document.source}: the document has no text", source=document.source)
        except (IngestError, RecursionError, MemoryError, OSError, UnicodeError) as exc:
            failure = file_failure(document.source, exc)  # one file's failure, typed: the others go on
            document.error, document.error_type = str(failure), type(failure).__name__
            document.chunks = []
            continue
        if document.known is not None and document.known == (document.sha256, meta_json):
            document.unchanged = True
            document.chunks = []
            continue
        if not document.chunks:  # a file's reader laid out its chunks with its text
            document.chunks = chunk_text(
                document.text, size=size, overlap=overlap, page_starts=document.page_starts
            )
        # Between documents, hand the GIL to a thread waiting for it (ingest writes in another
        # thread while this runs): it waits at most one document's chunking, not a 5 ms switch.
        time.sleep(0)
    return list(documents)


def _read(document: PreparedDocument, size: int, overlap: int) -> None:
    if document.path is None:
        return
    path = Path(document.path)
    if not path.exists():
        raise IngestError(f"{path}: no such file or directory", source=document.source)
    source: Path | Source = path
    if document.folder is not None:  # as sync reads it: through the descriptor checked inside the folder
        source = Source(path.name, data=_read_in_folder(path, document.folder, document.source))
    text, metadata, chunks = read_document(source, reader=document.reader, size=size, overlap=overlap)
    document.text, document.chunks = text, chunks
    # <file>.grants: between the front matter and ingest's own; in a folder, read as the file is
    sidecar = read_sidecar(path) if document.folder is None else _sidecar_in_folder(path, document.folder)
    document.metadata = {**metadata, **({GRANTS_KEY: sidecar} if sidecar else {}), **document.metadata}
    document.original_filename = path.name
    document.path = None  # read: what crosses back to the driver is the text


def _sidecar_in_folder(path: Path, folder: str) -> list[str] | None:
    """The grants sidecar of a file found in ``folder``; one that links out of the folder fails
    the file (its grants would be unknown: never ingested without them)."""
    sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
    if not os.path.lexists(sidecar):
        return None
    return parse_sidecar(_read_in_folder(sidecar, folder, sidecar.name).decode("utf-8"))


def _read_in_folder(path: Path, folder: str, name: str) -> bytes:
    """The bytes of a file found in ``folder``; a link out of it is refused, never followed, also
    when the file or a folder on its path is swapped for one after the listing (:func:`read_inside`)."""
    try:
        return read_inside(os.path.realpath(folder), str(path), name=name)
    except FileNotFoundError:
        raise IngestError(f"{name}: no such file or directory", source=name) from None
    except OutsideFolderError as exc:
        raise UnreadableFileError(str(exc), source=name) from None


def embed_documents(documents: Sequence[PreparedDocument], embedder: Embedder) -> list[PreparedDocument]:
    """Embed the chunks of every document that needs writing (one batched call), in place.

    When the batch fails, each document is embedded on its own: the ones that fail get
    ``.error`` and the others their vectors. If every one fails, that is an outage, not a bad
    document: the :class:`~agentrag.errors.EmbeddingError` is raised.
    """
    from agentrag.embedders import embed_batched

    todo = [d for d in documents if d.needs_write]
    if not todo:
        return list(documents)
    try:
        _assign(todo, embed_batched(embedder, [c.text for d in todo for c in d.chunks]))
    except EmbeddingError as batch_error:
        if len(todo) == 1:
            raise
        errors: list[EmbeddingError] = []
        for document in todo:
            try:
                _assign([document], embed_batched(embedder, [c.text for c in document.chunks]))
            except EmbeddingError as exc:
                errors.append(exc)
                document.error = f"{document.source}: {exc}"
        if len(errors) == len(todo):
            for document in todo:
                document.error = None
            raise batch_error from None
    return list(documents)


def _assign(documents: list[PreparedDocument], vectors: np.ndarray) -> None:
    offset = 0
    for document in documents:
        document.vectors = vectors[offset : offset + len(document.chunks)]
        offset += len(document.chunks)


def document_columns(metadata: dict[str, Any], source: str) -> tuple[str | None, date | None]:
    """The ``classification`` and ``date`` columns a document's metadata sets (validated)."""
    classification = metadata.get("classification")
    if classification is not None and not isinstance(classification, str):
        raise IngestError(f"{source}: metadata 'classification' must be a string", source=source)
    raw_date = metadata.get("date")
    doc_date = None
    if raw_date is not None:
        try:
            doc_date = raw_date if isinstance(raw_date, date) else date.fromisoformat(str(raw_date))
        except ValueError as exc:
            raise IngestError(
                f"{source}: metadata 'date' must be an ISO date (YYYY-MM-DD), got {raw_date!r}",
                source=source,
            ) from exc
    return classification, doc_date


def canonical_metadata(metadata: dict[str, Any], source: str) -> str:
    """Metadata as canonical JSON (sorted keys, dates as ISO strings): what "unchanged" compares."""
    try:
        return json.dumps(metadata, sort_keys=True, default=json_default)
    except TypeError as exc:
        raise IngestError(f"{source}: metadata is not JSON-serialisable ({exc})", source=source) from exc


def json_default(value: Any) -> Any:
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")
