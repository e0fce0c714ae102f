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
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agentrag.errors import IngestError, InvalidInputError, StoreError
from agentrag.store.collections import (
    WRITE_LOCK_SQL,
    Collection,
    check_embedder,
    check_recorded_model,
    write_lock_params,
)
from agentrag.store.prepare import (
    Executor,
    LocalExecutor,
    PreparedDocument,
    canonical_metadata,
    chunk_options,
    document_columns,
    estimated_length,
    json_default,
)
from agentrag.store.readers import SUPPORTED_SUFFIXES

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection

    from agentrag.store.store import Store

__all__ = [
    "IngestProgress",
    "IngestReport",
    "PreparedDocument",
    "WriteOutcome",
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
# The embedding goes in pre-encoded (vector's binary wire format, see _encode_vectors): declared
# bytea so psycopg passes the bytes through; the server reads them with vector's receive function.
_COPY_TYPES = ["text", "text", "int8", "int4", "text", "int4", "int4", "int4", "text", "text", "bytea"]
_COPY_SQL = (
    "COPY agentrag.chunks (id, document_id, collection_id, chunk_index, text, start_char, end_char,"
    " page, section, sha256, embedding) FROM STDIN WITH (FORMAT BINARY)"
)


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """One event per document: ``status`` is added, replaced, unchanged or failed; before those,
    ``writing`` events come from inside a write transaction, just before its commit (one per
    document of the batch; again for each document written alone after its batch failed)."""

    done: int
    total: int
    source: str
    status: str


@dataclass(frozen=True)
class IngestReport:
    collection: str
    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    chunks_written: int = 0
    document_ids: dict[str, str] = field(default_factory=dict)
    #: what happened to the collection's HNSW index: "unchanged" (nothing written), "maintained"
    #: (updated row by row), "built" (created after the load), "rebuilt" (dropped before a bulk
    #: load and built after it)
    vector_index: str = "unchanged"
    index_seconds: float = 0.0  # building the index after the load (0 when not built)
    retried_alone: int = 0  # documents written in a transaction of their own after their batch failed
    #: the local backend that embedded this ingest's chunks (``LocalEmbedder.document_backend``, e.g.
    #: "torch-bf16" by default on a CPU with native bfloat16, "onnx" elsewhere); None when nothing was
    #: embedded or the embedder has no document backend (hosted models, fakes)
    document_backend: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def changed(self) -> bool:
        return bool(self.added or self.replaced)

    def __str__(self) -> str:
        line = (
            f"{self.collection}: {len(self.added)} added, {len(self.replaced)} replaced, "
            f"{len(self.unchanged)} unchanged, {len(self.failed)} failed "
            f"({self.chunks_written} chunks written"
            + (f" with {self.document_backend}" if self.document_backend else "")
            + (
                f"; vector index {self.vector_index} in {self.index_seconds:.1f}s"
                if self.index_seconds
                else ""
            )
            + ")"
        )
        return "\n".join([line] + [f"  failed: {why}" for _source, why in self.failed])

    def __repr__(self) -> str:
        failed = ""
        if self.failed:
            shown = "; ".join(why for _source, why in self.failed[:3])
            more = f"; ... {len(self.failed) - 3} more" if len(self.failed) > 3 else ""
            failed = f", FAILED: {shown}{more}"
        backend = f", document_backend={self.document_backend!r}" if self.document_backend else ""
        return (
            f"IngestReport({self.collection!r}: {len(self.added)} added, {len(self.replaced)} replaced, "
            f"{len(self.unchanged)} unchanged, {len(self.failed)} failed{backend}{failed})"
        )

    def raise_for_failures(self) -> IngestReport:
        """Raise :class:`~agentrag.errors.IngestError` (carrying this report as ``.report``) if a
        source failed; return the report otherwise. The documents that did not fail stay ingested
        (each document is its own transaction)."""
        if self.failed:
            from agentrag.errors import IngestError

            done = len(self.added) + len(self.replaced) + len(self.unchanged)
            reasons = "; ".join(why for _source, why in self.failed[:5])
            error = IngestError(
                f"{len(self.failed)} of {done + len(self.failed)} sources failed to ingest into "
                f"{self.collection!r} (the other {done} are ingested): {reasons}",
                source=self.failed[0][0],
            )
            error.report = self  # type: ignore[attr-defined]
            raise error
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "added": list(self.added),
            "replaced": list(self.replaced),
            "unchanged": list(self.unchanged),
            "failed": [{"source": s, "error": e} for s, e in self.failed],
            "chunks_written": self.chunks_written,
            "document_ids": dict(self.document_ids),
            "vector_index": self.vector_index,
            "index_seconds": round(self.index_seconds, 3),
            "retried_alone": self.retried_alone,
            "document_backend": self.document_backend,
        }


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What :func:`write_documents` did with one document."""

    source: str
    status: str  # added / replaced / unchanged / failed
    document_id: str | None = None
    chunks_written: int = 0
    error: str | None = None
    alone: bool = False  # its batch failed: written (or failed) in a transaction of its own


def iter_files(sources: str | Path | Iterable[str | Path]) -> Iterator[tuple[Path, str]]:
    """``(file, key)`` pairs to ingest: files as given, directories walked recursively
    (hidden entries skipped).

    The key identifies the document inside its collection and scope: a file inside a
    directory argument is keyed by its path relative to that directory (``guides/setup.md``),
    a file argument by its name. So the same folder ingested from another checkout or
    machine updates the same documents instead of adding copies.
    """
    if isinstance(sources, str | Path):
        sources = [sources]
    for source in sources:
        path = Path(source)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                rel = child.relative_to(path)
                hidden = any(part.startswith(".") for part in rel.parts)
                if child.is_file() and child.suffix.lower() in SUPPORTED_SUFFIXES and not hidden:
                    yield child, rel.as_posix()
        else:
            yield path, path.name


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
    items = [
        PreparedDocument(key, "", dict(metadata or {}), path=str(path)) for path, key in iter_files(sources)
    ]
    return _ingest(store, items, collection=collection, on_progress=on_progress, **options)


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
    return _ingest(store, items, collection=collection, on_progress=on_progress, **options)


def _doc_columns(item: PreparedDocument) -> tuple[str | None, date | None]:
    return document_columns(item.metadata, item.source)


_canonical = canonical_metadata
_json_default = json_default


@dataclass(slots=True)
class _Tally:
    """What an ingest has done so far, document by document, and the progress callback."""

    collection: str
    total: int
    on_progress: Callable[[IngestProgress], None] | None
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)
    written: int = 0
    retried: int = 0
    done: int = 0

    def progress(self, source: str, status: str) -> None:
        if self.on_progress is not None:
            self.on_progress(IngestProgress(self.done, self.total, source, status))

    def finished(self, source: str, status: str, *, document_id: str | None = None, error: str = "") -> None:
        """One document is done: ``status`` is added, replaced, unchanged or failed."""
        self.done += 1
        if status == "failed":
            self.failed.append((source, error or "failed"))
        else:
            assert document_id is not None
            self.ids[source] = document_id
            {"added": self.added, "replaced": self.replaced, "unchanged": self.unchanged}[status].append(
                source
            )
        self.progress(source, status)

    def report(self, vector_index: str, index_seconds: float, document_backend: str | None) -> IngestReport:
        return IngestReport(
            self.collection,
            tuple(self.added),
            tuple(self.replaced),
            tuple(self.unchanged),
            tuple(self.failed),
            self.written,
            self.ids,
            vector_index=vector_index,
            index_seconds=index_seconds,
            retried_alone=self.retried,
            document_backend=document_backend if self.written else None,
        )


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
    store: Store, coll: Collection, items: list[PreparedDocument], tenant: str | None, workspace: str | None
) -> dict[str, str]:
    """``{source: id of its stored version}``; each stored item learns its stored hash, so the
    prepare stage skips a document stored unchanged before chunking or embedding it."""
    stored: dict[str, str] = {}
    for start in range(0, len(items), _LOOKUP_SLICE):
        batch = items[start : start + _LOOKUP_SLICE]
        existing = _retrying(
            "reading existing documents",
            functools.partial(_existing, store, coll, [i.source for i in batch], tenant, workspace),
        )
        for item in batch:
            old = existing.get(item.source)
            if old is not None:
                stored[item.source] = old[0]
                item.known = (old[1], _canonical(old[2], item.source))
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
) -> IngestReport:
    executor = _check_ingest_options(
        executor, {"tenant": tenant, "workspace": workspace, "session": session}, bulk
    )
    coll = store.collection(collection)
    embedder = store.embedder
    check_embedder(coll, embedder)  # before anything is read, embedded or written
    size, overlap = chunk_options(chunk_size, chunk_overlap)
    tally = _Tally(collection, len(items), on_progress)
    # 1. The stored versions.
    stored = _mark_stored(store, coll, items, tenant, workspace)

    def with_copy_rows(documents: Iterable[PreparedDocument]) -> Iterator[PreparedDocument]:
        for item in documents:  # the COPY rows, built before the write transaction
            if item.needs_write:
                doc_id = _document_id(coll, item, tenant, workspace)
                item.copy_rows = (doc_id, _chunk_rows(coll.id, doc_id, item))
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
                outcome.source, outcome.status, document_id=outcome.document_id, error=outcome.error or ""
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
                        tally.finished(item.source, "failed", error=item.error)
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
            _build_index(store, coll, bulk_load=True)
        raise
    index_seconds = 0.0
    if index_state is not None and (tally.written or index_state == "rebuilt"):
        t0 = time.perf_counter()
        if _build_index(store, coll, bulk_load=index_state != "maintained"):
            index_seconds = time.perf_counter() - t0
            if index_state == "maintained":  # dropped by someone else meanwhile
                index_state = "built"
    else:
        index_state = "unchanged"
    # read after the embedding: an automatic choice that fell back while embedding says so
    return tally.report(index_state, index_seconds, getattr(embedder, "document_backend", None))


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
        return "maintained" if _index_exists(store, coll) else "built"
    if not _index_exists(store, coll):
        return "built"
    if bulk is None:
        estimate = sum(estimated_length(item) // max(step, 1) + 1 for item in todo)
        if estimate < AUTO_BULK_MIN_CHUNKS:
            return "maintained"
        if estimate < _count_chunks(store, coll):
            return "maintained"

    def drop() -> None:
        with store.engine.begin() as conn:
            conn.execute(text(f"DROP INDEX IF EXISTS agentrag.{coll.hnsw_index}"))

    _retrying("dropping the vector index for a bulk load", drop)
    return "rebuilt"


def _scalar(store: Store, sql: str, params: dict[str, Any]) -> Any:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        return conn.execute(text(sql), params).scalar()


def _count_chunks(store: Store, coll: Collection) -> int:
    sql = "SELECT count(*) FROM agentrag.chunks WHERE collection_id = :c"
    return int(_retrying("counting chunks", functools.partial(_scalar, store, sql, {"c": coll.id})) or 0)


def _index_exists(store: Store, coll: Collection) -> bool:
    found = _retrying(
        "looking up the vector index",
        functools.partial(
            _scalar, store, "SELECT to_regclass(:name) IS NOT NULL", {"name": f"agentrag.{coll.hnsw_index}"}
        ),
    )
    return bool(found)


def _build_index(store: Store, coll: Collection, *, bulk_load: bool) -> bool:
    """Build the collection's HNSW index if missing; True when this call built it."""
    if _index_exists(store, coll):
        return False
    options: dict[str, Any] = {}
    if bulk_load:
        options = {
            "maintenance_work_mem": _graph_memory(_count_chunks(store, coll), coll.dimensions, coll.hnsw_m)
        }
    try:
        _retrying("building the vector index", functools.partial(store.ensure_vector_index, coll, **options))
    except StoreError as exc:  # a concurrent ingest may be building the same index (23505)
        if getattr(exc, "sqlstate", None) not in ("23505", "42P07"):
            raise
        return False
    return True


def _graph_memory(rows: int, dimensions: int, m: int = 16) -> str:
    """maintenance_work_mem for an HNSW build of ``rows`` vectors: the whole graph in memory
    (about the vector plus 0.5 kB of neighbour lists per row at m=16, in proportion to m),
    between 1 GB and 4 GB."""
    need = rows * (4 * dimensions + 32 * m) * 5 // 4
    return f"{min(max(need // 2**20 + 1, 1024), 4096)}MB"


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
                results = _write_batch(store, coll, batch, tenant, workspace, session, before_commit)
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
        doc_id, status = _retrying(
            f"writing {doc.source}",
            functools.partial(
                _write_batch,
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
        return WriteOutcome(doc.source, "failed", error=f"{exc} (rolled back: nothing of it was written)")
    except IngestError as exc:  # its metadata (checked before anything is written)
        return WriteOutcome(doc.source, "failed", error=str(exc))
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


def _existing(
    store: Store, coll: Collection, sources: list[str], tenant: str | None, workspace: str | None
) -> dict[str, tuple[str, str, dict[str, Any]]]:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT source, id, sha256, metadata FROM agentrag.documents"
                " WHERE collection_id = :cid AND source = ANY(:sources)"
                " AND coalesce(tenant_id, '') = :tenant AND coalesce(workspace_id, '') = :workspace"
            ),
            {"cid": coll.id, "sources": sources, "tenant": tenant or "", "workspace": workspace or ""},
        )
        return {row.source: (row.id, row.sha256, row.metadata) for row in rows}


# One statement takes every key's lock, in hash order: two batches sharing keys never deadlock
# (a single-document write holds one key only). Counting forces every row to be evaluated.
_LOCK_SQL = (
    "SELECT count(pg_advisory_xact_lock(h)) FROM (SELECT DISTINCT hashtextextended(k, 0) AS h"
    " FROM unnest(CAST(:keys AS text[])) AS k ORDER BY h) AS keys"
)


def _write_batch(
    store: Store,
    coll: Collection,
    docs: Sequence[PreparedDocument],
    tenant: str | None,
    workspace: str | None,
    session: str | None,
    before_commit: Callable[[], Any],
) -> list[tuple[str, str]]:
    """Write documents with distinct keys in one transaction; (document id, added / replaced /
    unchanged) for each, in order.

    Idempotent, so safe to retry: under the keys' locks, a stored document with the same content
    and metadata (written by a concurrent ingest, or by a first attempt whose commit was not
    acknowledged) is left as it is and reported unchanged. Driver errors propagate raw, for
    :func:`_retrying` to retry or type.
    """
    from sqlalchemy import text

    doc_ids = [_document_id(coll, d, tenant, workspace) for d in docs]
    with store.engine.begin() as conn:
        # Shared with other writers, exclusive against a re-embedding of the collection; the
        # vectors prepared must still be of the model and version the collection records.
        conn.execute(text(WRITE_LOCK_SQL), write_lock_params(coll.id))
        check_recorded_model(conn, coll)
        # Lock the keys so two writers of the same document serialise.
        conn.execute(
            text(_LOCK_SQL), {"keys": [json.dumps([coll.id, d.source, tenant, workspace]) for d in docs]}
        )
        current = {
            row.source: row
            for row in conn.execute(
                text(
                    "SELECT source, id, metadata FROM agentrag.documents WHERE collection_id = :cid"
                    " AND source = ANY(:sources)"
                    " AND coalesce(tenant_id, '') = :tenant AND coalesce(workspace_id, '') = :workspace"
                ),
                {
                    "cid": coll.id,
                    "sources": [d.source for d in docs],
                    "tenant": tenant or "",
                    "workspace": workspace or "",
                },
            )
        }
        results: list[tuple[str, str]] = []
        replaced_ids: list[str] = []
        rows: list[dict[str, Any]] = []
        new: list[tuple[str, PreparedDocument]] = []
        for doc, doc_id in zip(docs, doc_ids, strict=True):
            old = current.get(doc.source)
            if (
                old is not None
                and old.id == doc_id
                and _canonical(old.metadata or {}, doc.source) == _canonical(doc.metadata, doc.source)
            ):
                results.append((doc_id, "unchanged"))
                continue
            if old is not None:
                replaced_ids.append(old.id)
            results.append((doc_id, "added" if old is None else "replaced"))
            classification, doc_date = _doc_columns(doc)
            new.append((doc_id, doc))
            rows.append(
                {
                    "id": doc_id,
                    "cid": coll.id,
                    "source": doc.source,
                    "filename": doc.original_filename,
                    "sha": doc.sha256,
                    "text": doc.text,
                    "meta": json.dumps(doc.metadata, default=_json_default),
                    "cls": classification,
                    "date": doc_date,
                    "tenant": tenant,
                    "workspace": workspace,
                    "count": len(doc.chunks),
                }
            )
        if replaced_ids:  # their chunks, session links and tsvectors go with them (ON DELETE CASCADE)
            conn.execute(text("DELETE FROM agentrag.documents WHERE id = ANY(:ids)"), {"ids": replaced_ids})
        if rows:
            conn.execute(
                text(
                    "INSERT INTO agentrag.documents"
                    " (id, collection_id, source, original_filename, sha256, text,"
                    " metadata, classification, doc_date, tenant_id, workspace_id, chunk_count)"
                    " VALUES (:id, :cid, :source, :filename, :sha, :text, CAST(:meta AS jsonb), :cls, :date,"
                    " :tenant, :workspace, :count)"
                ),
                rows,
            )
            _copy_chunks(conn, coll.id, new)
        if session is not None:
            conn.execute(
                text(
                    "INSERT INTO agentrag.document_sessions (session_id, document_id)"
                    " SELECT :s, d FROM unnest(CAST(:ids AS text[])) AS d ON CONFLICT DO NOTHING"
                ),
                {"s": session, "ids": doc_ids},
            )
        if rows:
            conn.execute(
                text("UPDATE agentrag.collections SET version = version + 1 WHERE id = :id"), {"id": coll.id}
            )
        before_commit()
    return results


def _retrying(action: str, call: Callable[[], T]) -> T:
    """``call()``, repeated once on a fresh connection after a transient driver error.

    Only for work that is safe to repeat (a read, one idempotent document write). A driver
    error that remains becomes a typed StoreError (class name and SQLSTATE, never SQL text).
    """
    from agentrag.retrieval.dberrors import database_error, is_driver_error, is_transient

    for attempt in (0, 1):
        try:
            return call()
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            if attempt == 0 and is_transient(exc):
                continue
            raise database_error(exc, action) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def _encode_vectors(vectors: np.ndarray) -> list[bytes]:
    """pgvector's binary wire format for each row: dimensions and a zero (int16, big-endian),
    then the float32 values big-endian; converted for the whole array at once."""
    import numpy as np

    array = np.ascontiguousarray(vectors, dtype=">f4")
    header = np.array([array.shape[1], 0], dtype=">i2").tobytes()
    return [header + row.tobytes() for row in array]


def _document_id(coll: Collection, doc: PreparedDocument, tenant: str | None, workspace: str | None) -> str:
    # Content-addressed ids: the same content under the same key always gets the same ids,
    # so citations stay stable across rebuilds. A changed text gets new ids.
    return "doc_" + _digest(coll.name, doc.source, tenant or "", workspace or "", doc.sha256)


def _chunk_rows(collection_id: int, doc_id: str, doc: PreparedDocument) -> list[tuple[Any, ...]]:
    """The COPY rows of a document's chunks (ids, hashes, encoded vectors)."""
    if not doc.chunks:
        return []
    sha256 = hashlib.sha256
    return [
        (
            "chk_" + _digest(doc_id, str(chunk.index)),
            doc_id,
            collection_id,
            chunk.index,
            chunk.text,
            chunk.start_char,
            chunk.end_char,
            chunk.page,
            chunk.section,
            sha256(chunk.text.encode("utf-8")).hexdigest(),
            vector,
        )
        for chunk, vector in zip(doc.chunks, _encode_vectors(doc.vectors), strict=True)
    ]


def _copy_chunks(conn: Connection, collection_id: int, documents: list[tuple[str, PreparedDocument]]) -> None:
    """One binary COPY of the chunks of ``(document id, document)`` pairs."""
    raw = conn.connection.driver_connection
    assert raw is not None
    with raw.cursor() as cur, cur.copy(_COPY_SQL) as copy:
        copy.set_types(_COPY_TYPES)
        for doc_id, doc in documents:
            ready = doc.copy_rows is not None and doc.copy_rows[0] == doc_id
            for row in doc.copy_rows[1] if ready else _chunk_rows(collection_id, doc_id, doc):  # type: ignore[index]
                copy.write_row(row)
