"""Ingestion: files or strings -> chunks -> embeddings -> many documents per transaction.

* Content-addressed: a document whose text and metadata are unchanged is skipped; a
  changed one replaces the old version inside the transaction that writes the new one.
* Never a partial document: a write batch (up to ``WRITE_BATCH_DOCUMENTS`` documents or
  ``WRITE_BATCH_CHUNKS`` chunks) commits its document rows, all their chunks (one binary COPY)
  and their session links together or not at all. A batch that fails for any reason is rolled
  back and written again document by document (one transaction each, retried once when the
  error is transient), so one bad document fails alone and the others still go in.
* Embedding runs before the transaction opens, batched across documents.
* The collection's HNSW index: built after the first load; ``bulk=True`` (or automatically,
  when a load adds at least ``AUTO_BULK_MIN_CHUNKS`` chunks and at least as many as the
  collection holds) drops it before the load and rebuilds it after, instead of maintaining
  it row by row.
* A file that cannot be read is reported by name; the others still go in.
* Two stages: prepare (read, validate, chunk, embed: ``agentrag.store.prepare``, run by an
  executor, in this process or on Ray workers) and write (:func:`write_documents`, here, in the
  process holding the connection): prepared documents in, one :class:`WriteOutcome` per
  document out.
* The two overlap: the prepare stage (and the COPY rows) runs in a producer thread
  (:func:`run_ahead`), one write batch ahead, while the caller's thread writes; the database
  backend, a process of its own, is then never idle waiting for Python. A failure there is
  raised in the caller's thread, with its own type, after the batches before it are written.

This module runs the pipeline and groups the documents into write batches; one batch's
transaction is :func:`agentrag.store.writes.write_batch`, the HNSW index's checks and build are
in :mod:`agentrag.store.vector_index`, the report and its tally in :mod:`agentrag.store.ingest_report`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agentrag.errors import IngestError, InvalidInputError, StoreError
from agentrag.readers.chunking import CHUNKER_VERSION
from agentrag.readers.options import check_reader
from agentrag.store.acl import check_owner
from agentrag.store.collections import Collection, check_embedder, find_collection
from agentrag.store.connection import retrying
from agentrag.store.ingest_report import IngestProgress, IngestReport, IngestTally, WriteOutcome
from agentrag.store.prepare import (
    Executor,
    LocalExecutor,
    PreparedDocument,
    canonical_metadata,
    chunk_options,
    estimated_length,
)
from agentrag.store.readers import SUPPORTED_SUFFIXES
from agentrag.store.vector_index import build_index, count_chunks, index_exists
from agentrag.store.writes import chunk_rows, document_id, existing_documents, write_batch

if TYPE_CHECKING:
    from agentrag.store.store import Store

__all__ = [
    "IngestProgress",
    "IngestReport",
    "PreparedDocument",
    "WriteOutcome",
    "ingest_documents",
    "ingest_paths",
    "ingest_texts",
    "iter_files",
    "write_documents",
]

T = TypeVar("T")
PREPARE_BATCH_DOCUMENTS = 256  # documents chunked and embedded together (bounds memory) ...
WRITE_BATCH_DOCUMENTS = 256  # documents per write transaction (one advisory lock each)
WRITE_BATCH_CHUNKS = 4096  # chunks per write transaction (one document may exceed it alone) ...
# ... and, estimated from the text length, per prepare batch
PREPARE_AHEAD_BATCHES = 1  # write batches prepared and queued ahead of the one being written
AUTO_BULK_MIN_CHUNKS = 10_000  # bulk=None: defer the HNSW index past this many new chunks ...
# ... and when the load brings at least as many chunks as the collection already has
_LOOKUP_SLICE = 2000  # sources per "which of these exist" query


def iter_files(sources: str | Path | Iterable[str | Path]) -> Iterator[tuple[Path, str]]:
    """``(file, key)`` pairs to ingest: files as given, directories walked recursively
    (hidden entries skipped).

    The key identifies the document inside its collection and scope: a file inside a
    directory argument is keyed by its path relative to that directory (``guides/setup.md``),
    a file argument by its name. So the same folder ingested from another checkout or
    machine updates the same documents instead of adding copies.
    """
    for path, key, _folder in walk_files(sources):
        yield path, key


def walk_files(sources: str | Path | Iterable[str | Path]) -> Iterator[tuple[Path, str, Path | None]]:
    """:func:`iter_files`' pairs with the folder argument each file was found in (None for a
    file argument): a file found in a folder must resolve inside it (a link out is refused when read)."""
    if isinstance(sources, str | Path):
        sources = [sources]
    for source in sources:
        path = Path(source)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                rel = child.relative_to(path)
                hidden = any(part.startswith(".") for part in rel.parts)
                if child.is_file() and child.suffix.lower() in SUPPORTED_SUFFIXES and not hidden:
                    yield child, rel.as_posix(), path
        else:
            yield path, path.name, None


def ingest_paths(
    store: Store,
    sources: str | Path | Iterable[str | Path],
    *,
    collection: str,
    metadata: dict[str, Any] | None = None,
    on_progress: Callable[[IngestProgress], None] | None = None,
    **options: Any,
) -> IngestReport:
    # read on the prepare stage (by the executor: here or on a worker), not here
    reader = check_reader(options.pop("reader", None))
    items = [
        PreparedDocument(
            key,
            "",
            dict(metadata or {}),
            path=str(path),
            reader=reader,
            folder=str(folder) if folder else None,
        )
        for path, key, folder in walk_files(sources)
    ]
    return _ingest(store, items, collection=collection, on_progress=on_progress, keep_grants=True, **options)


def ingest_texts(
    store: Store,
    texts: Sequence[tuple[str, str, dict[str, Any]]],
    *,
    collection: str,
    on_progress: Callable[[IngestProgress], None] | None = None,
    **options: Any,
) -> IngestReport:
    """Ingest ``(source, text, metadata)`` triples."""
    items = [PreparedDocument(source, text, dict(meta)) for source, text, meta in texts]
    return _ingest(store, items, collection=collection, on_progress=on_progress, keep_grants=True, **options)


def ingest_documents(
    store: Store,
    items: Sequence[PreparedDocument],
    *,
    collection: str,
    on_progress: Callable[[IngestProgress], None] | None = None,
    **options: Any,
) -> IngestReport:
    """Ingest documents described already (``text`` read, or a ``path`` to read): ``store.sync``'s way in."""
    return _ingest(store, list(items), collection=collection, on_progress=on_progress, **options)


def _check_ingest_options(
    executor: Executor | None, scopes: dict[str, str | None], bulk: bool | None
) -> Executor:
    if executor is None:  # the batch sizes read at call time (tests and benchmarks set them)
        executor = LocalExecutor(batch_documents=PREPARE_BATCH_DOCUMENTS, batch_chunks=WRITE_BATCH_CHUNKS)
    elif not isinstance(executor, Executor):
        raise InvalidInputError(
            "executor must have a run(documents, *, embedder, chunk_size, chunk_overlap) method"
            f" (agentrag.LocalExecutor, agentrag.executors.ray.RayExecutor), got {type(executor).__name__}"
        )
    for name, value in scopes.items():
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidInputError(f"{name} must be a non-empty string, got {value!r}")
    if bulk is not None and not isinstance(bulk, bool):
        raise InvalidInputError(f"bulk must be True, False or None (automatic), got {bulk!r}")
    return executor


def _mark_stored(
    store: Store,
    coll: Collection,
    items: list[PreparedDocument],
    tenant: str | None,
    workspace: str | None,
    keep_grants: bool,
) -> dict[str, str]:
    """``{source: id of its stored version}``; each stored item learns its stored hash, so the
    prepare stage skips a document stored unchanged before chunking or embedding it.

    ``keep_grants`` (ingest, not sync): a stored document of an ``acl=True`` collection that has
    grants keeps them when its new version brings none (no ``grants=``, front matter or sidecar):
    the item carries them (``kept_grants``), and its stored version is compared with them, so a
    re-ingest of the same file is unchanged whether its grants came with it or from ``grant``."""
    from agentrag.scope import grant_text
    from agentrag.store.acl import GRANTS_KEY

    stored: dict[str, str] = {}
    for start in range(0, len(items), _LOOKUP_SLICE):
        batch = items[start : start + _LOOKUP_SLICE]
        existing = retrying(
            "reading existing documents",
            functools.partial(existing_documents, store, coll, [i.source for i in batch], tenant, workspace),
        )
        for item in batch:
            old = existing.get(item.source)
            if old is not None:
                stored[item.source] = old[0]
                metadata = old[2]
                if keep_grants and coll.acl and old[3]:
                    item.kept_grants = [grant_text(token) for token in old[3]]
                    metadata = {**metadata, GRANTS_KEY: item.kept_grants}
                item.known = (old[1], canonical_metadata(metadata, item.source))
    return stored


def _ingest(
    store: Store,
    items: list[PreparedDocument],
    *,
    collection: str,
    tenant: str | None = None,
    workspace: str | None = None,
    session: str | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    bulk: bool | None = None,
    on_progress: Callable[[IngestProgress], None] | None = None,
    executor: Executor | None = None,
    keep_grants: bool = False,
) -> IngestReport:
    executor = _check_ingest_options(
        executor, {"tenant": tenant, "workspace": workspace, "session": session}, bulk
    )
    coll = retrying("reading the collection", functools.partial(find_collection, store.engine, collection))
    check_owner(coll, tenant)  # a tenant's collection holds its own documents only
    embedder = store.embedder_for(coll)  # the collection's own (agentrag.store.embedders)
    check_embedder(coll, embedder)  # before anything is read, embedded or written
    size, overlap = chunk_options(chunk_size, chunk_overlap)
    for item in items:  # recorded on each row written (store.sync compares it: agentrag.store.sync_layout)
        item.layout = (size, overlap, CHUNKER_VERSION)
    tally = IngestTally(collection, len(items), on_progress)
    # 1. The stored versions.
    stored = _mark_stored(store, coll, items, tenant, workspace, keep_grants)

    def with_copy_rows(documents: Iterable[PreparedDocument]) -> Iterator[PreparedDocument]:
        for item in documents:  # the COPY rows, built before the write transaction
            if item.needs_write:
                doc_id = document_id(coll, item, tenant, workspace)
                item.copy_rows = (doc_id, chunk_rows(coll.id, doc_id, item, coll.vector_type))
            time.sleep(0)  # let the writer thread have the GIL now, not at the next 5 ms switch
            yield item

    def prepared_groups() -> Iterator[list[PreparedDocument]]:
        return _write_groups(
            with_copy_rows(executor.run(items, embedder=embedder, chunk_size=size, chunk_overlap=overlap))
        )

    def write(pending: list[PreparedDocument]) -> None:
        for outcome in write_documents(
            store,
            coll,
            pending,
            tenant=tenant,
            workspace=workspace,
            session=session,
            on_writing=lambda item: tally.progress(item.source, "writing"),
        ):
            tally.retried += outcome.alone
            tally.written += outcome.chunks_written if outcome.status != "failed" else 0
            tally.finished(
                outcome.source,
                outcome.status,
                document_id=outcome.document_id,
                error=outcome.error or "",
                error_type=outcome.error_type or "",
            )
        for item in pending:  # written: let the memory go
            item.chunks, item.vectors, item.copy_rows = [], None, None

    # 2. Prepare (read, validate, chunk, embed, build the COPY rows) in a producer thread, one
    #    write batch ahead, and 3. write here, one batch per transaction, while the producer
    #    prepares the next one (the database works in its own process: both cores are busy).
    #    The HNSW plan is made when the first document to write arrives (its estimate: the new keys).
    index_state: str | None = None
    try:
        # closed on the way out, an exception included: the producer stopped and joined
        with closing(run_ahead(prepared_groups, PREPARE_AHEAD_BATCHES)) as groups:
            for group in groups:
                pending: list[PreparedDocument] = []
                for item in group:
                    if item.error is not None:
                        tally.finished(
                            item.source, "failed", error=item.error, error_type=item.error_type or ""
                        )
                    elif item.unchanged:
                        if session is not None:
                            store.link_session(stored[item.source], session)
                        tally.finished(item.source, "unchanged", document_id=stored[item.source])
                    else:
                        if index_state is None:
                            new = [i for i in items if i.source not in stored]
                            index_state = _index_plan(store, coll, new, size - overlap, bulk)
                        pending.append(item)
                write(pending)
    except BaseException:
        if index_state == "rebuilt":  # never leave the collection without the index it had
            build_index(store, coll, bulk_load=True)
        raise
    index_seconds = 0.0
    if index_state is not None and (tally.written or index_state == "rebuilt"):
        t0 = time.perf_counter()
        if build_index(store, coll, bulk_load=index_state != "maintained"):
            index_seconds = time.perf_counter() - t0
            if index_state == "maintained":  # dropped by someone else meanwhile
                index_state = "built"
    else:
        index_state = "unchanged"
    # read after the embedding: an automatic choice that fell back while embedding says so
    backend = getattr(embedder, "last_document_backend", None) or getattr(embedder, "document_backend", None)
    return tally.report(index_state, index_seconds, backend)


def _index_plan(
    store: Store, coll: Collection, todo: list[PreparedDocument], step: int, bulk: bool | None
) -> str:
    """Decide what happens to the collection's HNSW index during this load; drop it for a bulk load.

    Returns "maintained" (it exists and stays), "built" (it does not exist: built after the
    load) or "rebuilt" (dropped here, built after the load). ``bulk=None`` drops it when the
    load brings at least ``AUTO_BULK_MIN_CHUNKS`` chunks (estimated from the text lengths) and
    at least as many as the collection holds: rebuilding is then cheaper than row-by-row
    maintenance. While it is missing, vector searches of the collection scan exactly (slower).
    """
    from sqlalchemy import text

    if bulk is False:
        return "maintained" if index_exists(store, coll) else "built"
    if not index_exists(store, coll):
        return "built"
    if bulk is None:
        estimate = sum(estimated_length(item) // max(step, 1) + 1 for item in todo)
        if estimate < AUTO_BULK_MIN_CHUNKS:
            return "maintained"
        if estimate < count_chunks(store, coll):
            return "maintained"

    def drop() -> None:
        with store.engine.begin() as conn:
            conn.execute(text(f"DROP INDEX IF EXISTS agentrag.{coll.hnsw_index}"))

    retrying("dropping the vector index for a bulk load", drop)
    return "rebuilt"


def write_documents(
    store: Store,
    coll: Collection,
    documents: Sequence[PreparedDocument],
    *,
    tenant: str | None = None,
    workspace: str | None = None,
    session: str | None = None,
    on_writing: Callable[[PreparedDocument], None] | None = None,
) -> Iterator[WriteOutcome]:
    """Write prepared documents (chunks and vectors set), many per transaction; yield one outcome
    each, in order, as soon as it is committed (a generator: nothing is written until iterated).

    Documents are grouped into write batches (``WRITE_BATCH_DOCUMENTS`` documents,
    ``WRITE_BATCH_CHUNKS`` chunks, never the same key twice). A batch is one transaction: the
    keys' advisory locks (in a fixed order, so concurrent writers never deadlock), one read of
    the stored versions, one DELETE of those replaced, the document rows, ONE binary COPY of all
    the batch's chunks, the session links and one collection version bump. If it fails for any
    reason, it is rolled back and each of its documents is written in a transaction of its own
    (retried once when the error is transient); a document that still fails is reported
    ``failed`` and nothing of it is stored. Idempotent: under the locks, a document stored with
    the same content and metadata is left as it is and reported ``unchanged``.

    ``on_writing(document)`` is called inside the transaction, just before its commit, for each
    document in it. A document whose ``sha256`` is empty gets it computed here; one whose metadata
    the document columns refuse (``classification``, ``date``) is reported failed.
    """
    for doc in documents:
        if not doc.sha256:
            doc.sha256 = hashlib.sha256(doc.text.encode("utf-8")).hexdigest()
    for batch in _write_batches(documents):
        results: list[tuple[str, str]] | None = None
        if len(batch) > 1:

            def before_commit(batch: list[PreparedDocument] = batch) -> None:
                for doc in batch:
                    if on_writing is not None:
                        on_writing(doc)

            try:
                results = write_batch(store, coll, batch, tenant, workspace, session, before_commit)
            except Exception:  # rolled back: written again one by one below
                results = None
        if results is not None:
            for doc, (doc_id, status) in zip(batch, results, strict=True):
                chunks = 0 if status == "unchanged" else len(doc.chunks)
                yield WriteOutcome(doc.source, status, doc_id, chunks)
            continue
        for doc in batch:
            outcome = _write_one(store, coll, doc, tenant, workspace, session, on_writing)
            yield dataclasses.replace(outcome, alone=True) if len(batch) > 1 else outcome


def _write_one(
    store: Store,
    coll: Collection,
    doc: PreparedDocument,
    tenant: str | None,
    workspace: str | None,
    session: str | None,
    on_writing: Callable[[PreparedDocument], None] | None,
) -> WriteOutcome:
    try:
        doc_id, status = retrying(
            f"writing {doc.source}",
            functools.partial(
                write_batch,
                store,
                coll,
                [doc],
                tenant,
                workspace,
                session,
                (lambda: on_writing(doc)) if on_writing else (lambda: None),
            ),
        )[0]
    except StoreError as exc:  # rolled back, retried once if transient: the others still go in
        why = f"{exc} (rolled back: nothing of it was written)"
        return WriteOutcome(doc.source, "failed", error=why, error_type=type(exc).__name__)
    except IngestError as exc:  # its metadata (checked before anything is written)
        return WriteOutcome(doc.source, "failed", error=str(exc), error_type=type(exc).__name__)
    return WriteOutcome(doc.source, status, doc_id, 0 if status == "unchanged" else len(doc.chunks))


def _write_batches(documents: Sequence[PreparedDocument]) -> Iterator[list[PreparedDocument]]:
    batch: list[PreparedDocument] = []
    keys: set[str] = set()
    chunks = 0
    for doc in documents:
        if batch and (
            len(batch) >= WRITE_BATCH_DOCUMENTS
            or chunks + len(doc.chunks) > WRITE_BATCH_CHUNKS
            or doc.source in keys
        ):
            yield batch
            batch, keys, chunks = [], set(), 0
        batch.append(doc)
        keys.add(doc.source)
        chunks += len(doc.chunks)
    if batch:
        yield batch


def _write_groups(documents: Iterable[PreparedDocument]) -> Iterator[list[PreparedDocument]]:
    """Prepared documents in groups of at most one write batch each (the rule of
    :func:`_write_batches`; a document failed or unchanged travels with its neighbours)."""
    group: list[PreparedDocument] = []
    keys: set[str] = set()
    chunks = 0
    for doc in documents:
        if doc.needs_write and keys and (chunks + len(doc.chunks) > WRITE_BATCH_CHUNKS or doc.source in keys):
            yield group
            group, keys, chunks = [], set(), 0
        group.append(doc)
        if doc.needs_write:
            keys.add(doc.source)
            chunks += len(doc.chunks)
        if len(group) >= WRITE_BATCH_DOCUMENTS or chunks >= WRITE_BATCH_CHUNKS:  # full: hand it over now
            yield group
            group, keys, chunks = [], set(), 0
    if group:
        yield group


def run_ahead(produce: Callable[[], Iterable[T]], depth: int) -> Generator[T, None, None]:
    """Iterate ``produce()`` in a producer thread, at most ``depth`` items ahead of the caller.

    The items come out in order. An exception raised by the producer is raised here, at the
    point of the stream where it happened (after every item before it), with its own type. When
    the caller stops early (an exception, ``close()``), the producer is told to stop, its
    iterator closed, and its thread joined before this returns. The producer runs in a copy of
    the caller's context (telemetry spans carry over)."""
    import contextvars
    import queue
    import threading

    box: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=max(depth, 1))
    stop = threading.Event()

    def put(entry: tuple[int, Any]) -> bool:
        while not stop.is_set():
            try:
                box.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            iterator = iter(produce())
            try:
                for item in iterator:
                    if not put((0, item)):
                        return
            finally:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
        except BaseException as exc:  # handed to the consumer, raised there
            put((2, exc))
            return
        put((1, None))

    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(work,), name="agentrag-prepare", daemon=True
    )
    thread.start()
    try:
        while True:
            kind, value = box.get()
            if kind == 0:
                yield value
            elif kind == 1:
                return
            else:
                raise value
    finally:
        stop.set()
        thread.join()
