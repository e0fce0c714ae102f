"""Ingestion: files or strings -> chunks -> embeddings -> one transaction per document.

* Content-addressed: a document whose text and metadata are unchanged is skipped; a
  changed one replaces the old version inside one transaction.
* Never a partial document: the document row, its chunks (binary COPY) and its session
  link commit together or not at all.
* Embedding runs before the transaction opens, batched across documents.
* A file that cannot be read is reported by name; the others still go in.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agentrag.errors import IngestError, InvalidInputError, StoreError
from agentrag.store.chunking import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, Chunk, chunk_text
from agentrag.store.collections import Collection, check_embedder
from agentrag.store.readers import SUPPORTED_SUFFIXES, read_file

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection

    from agentrag.store.store import Store

__all__ = ["IngestProgress", "IngestReport", "ingest_paths", "ingest_texts", "iter_files"]

T = TypeVar("T")
EMBED_BATCH_DOCUMENTS = 64
_COPY_TYPES = ["text", "text", "int8", "int4", "text", "int4", "int4", "int4", "text", "text", "vector"]
_COPY_SQL = (
    "COPY agentrag.chunks (id, document_id, collection_id, chunk_index, text, start_char, end_char,"
    " page, section, sha256, embedding) FROM STDIN WITH (FORMAT BINARY)"
)


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """One event per document: ``status`` is writing, added, replaced, unchanged or failed."""

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
            f"({self.chunks_written} chunks written)"
        )
        return "\n".join([line] + [f"  failed: {why}" for _source, why in self.failed])

    def __repr__(self) -> str:
        failed = ""
        if self.failed:
            shown = "; ".join(why for _source, why in self.failed[:3])
            more = f"; ... {len(self.failed) - 3} more" if len(self.failed) > 3 else ""
            failed = f", FAILED: {shown}{more}"
        return (
            f"IngestReport({self.collection!r}: {len(self.added)} added, {len(self.replaced)} replaced, "
            f"{len(self.unchanged)} unchanged, {len(self.failed)} failed{failed})"
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
        }


@dataclass(slots=True)
class _Item:
    source: str
    text: str
    metadata: dict[str, Any]
    original_filename: str | None = None
    page_starts: tuple[int, ...] | None = None
    chunks: list[Chunk] = field(default_factory=list)
    sha256: str = ""


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
    items: list[_Item] = []
    failed: list[tuple[str, str]] = []
    for path, key in iter_files(sources):
        try:
            if not path.exists():
                raise IngestError(f"{path}: no such file or directory", source=key)
            read = read_file(path)
        except IngestError as exc:
            failed.append((key, str(exc)))
            continue
        meta = {**read.metadata, **(metadata or {})}
        items.append(_Item(key, read.text, meta, path.name, read.page_starts))
    report = _ingest(store, items, collection=collection, on_progress=on_progress, **options)
    if failed:
        report = IngestReport(
            report.collection,
            report.added,
            report.replaced,
            report.unchanged,
            tuple(failed) + report.failed,
            report.chunks_written,
            report.document_ids,
        )
    return report


def ingest_texts(
    store: Store,
    texts: Sequence[tuple[str, str, dict[str, Any]]],
    *,
    collection: str,
    on_progress: Callable[[IngestProgress], None] | None = None,
    **options: Any,
) -> IngestReport:
    """Ingest ``(source, text, metadata)`` triples."""
    items = [_Item(source, text, dict(meta)) for source, text, meta in texts]
    return _ingest(store, items, collection=collection, on_progress=on_progress, **options)


def _doc_columns(item: _Item) -> tuple[str | None, date | None]:
    classification = item.metadata.get("classification")
    if classification is not None and not isinstance(classification, str):
        raise IngestError(f"{item.source}: metadata 'classification' must be a string", source=item.source)
    raw_date = item.metadata.get("date")
    doc_date = None
    if raw_date is not None:
        try:
            doc_date = raw_date if isinstance(raw_date, date) else date.fromisoformat(str(raw_date))
        except ValueError as exc:
            raise IngestError(
                f"{item.source}: metadata 'date' must be an ISO date (YYYY-MM-DD), got {raw_date!r}",
                source=item.source,
            ) from exc
    return classification, doc_date


def _canonical(metadata: dict[str, Any], source: str) -> str:
    try:
        return json.dumps(metadata, sort_keys=True, default=_json_default)
    except TypeError as exc:
        raise IngestError(f"{source}: metadata is not JSON-serialisable ({exc})", source=source) from exc


def _json_default(value: Any) -> Any:
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _ingest(
    store: Store,
    items: list[_Item],
    *,
    collection: str,
    tenant: str | None = None,
    workspace: str | None = None,
    session: str | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    on_progress: Callable[[IngestProgress], None] | None = None,
) -> IngestReport:
    from agentrag.embedders import embed_batched

    for name, value in (("tenant", tenant), ("workspace", workspace), ("session", session)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidInputError(f"{name} must be a non-empty string, got {value!r}")
    coll = store.collection(collection)
    embedder = store.embedder
    check_embedder(coll, embedder)  # before anything is read, embedded or written
    size = chunk_size or DEFAULT_CHUNK_SIZE
    overlap = DEFAULT_CHUNK_OVERLAP if chunk_overlap is None else chunk_overlap
    if overlap >= size:
        overlap = size // 5

    added: list[str] = []
    replaced: list[str] = []
    unchanged: list[str] = []
    failed: list[tuple[str, str]] = []
    ids: dict[str, str] = {}
    written = 0
    total = len(items)
    done = 0

    def progress(source: str, status: str) -> None:
        if on_progress is not None:
            on_progress(IngestProgress(done, total, source, status))

    for start in range(0, len(items), EMBED_BATCH_DOCUMENTS):
        batch = items[start : start + EMBED_BATCH_DOCUMENTS]
        existing = _retrying(
            "reading existing documents",
            functools.partial(_existing, store, coll, [i.source for i in batch], tenant, workspace),
        )
        todo: list[_Item] = []
        for item in batch:
            try:
                item.sha256 = hashlib.sha256(item.text.encode("utf-8")).hexdigest()
                meta_json = _canonical(item.metadata, item.source)
                _doc_columns(item)
                if "\x00" in item.text:
                    raise IngestError(
                        f"{item.source}: the text contains NUL bytes (binary file?)", source=item.source
                    )
                if not item.text.strip():
                    raise IngestError(f"{item.source}: the document has no text", source=item.source)
            except IngestError as exc:
                done += 1
                failed.append((item.source, str(exc)))
                progress(item.source, "failed")
                continue
            old = existing.get(item.source)
            if old is not None and old[1] == item.sha256 and _canonical(old[2], item.source) == meta_json:
                if session is not None:
                    store.link_session(old[0], session)
                done += 1
                unchanged.append(item.source)
                ids[item.source] = old[0]
                progress(item.source, "unchanged")
                continue
            item.chunks = chunk_text(item.text, size=size, overlap=overlap, page_starts=item.page_starts)
            todo.append(item)
        if not todo:
            continue
        vectors = embed_batched(embedder, [c.text for item in todo for c in item.chunks])
        offset = 0
        for item in todo:
            item_vectors = vectors[offset : offset + len(item.chunks)]
            offset += len(item.chunks)
            try:
                doc_id, status = _retrying(
                    f"writing {item.source}",
                    functools.partial(
                        _write_document,
                        store,
                        coll,
                        item,
                        item_vectors,
                        tenant,
                        workspace,
                        session,
                        functools.partial(progress, item.source, "writing"),
                    ),
                )
            except StoreError as exc:  # rolled back, retried once if transient: the others still go in
                done += 1
                failed.append((item.source, f"{exc} (rolled back: nothing of it was written)"))
                progress(item.source, "failed")
                continue
            done += 1
            ids[item.source] = doc_id
            if status == "unchanged":  # a concurrent ingest wrote the same content first
                unchanged.append(item.source)
            else:
                written += len(item.chunks)
                (replaced if status == "replaced" else added).append(item.source)
            progress(item.source, status)
    if written:
        try:
            _retrying("building the vector index", functools.partial(store.ensure_vector_index, coll))
        except StoreError as exc:  # a concurrent ingest may be building the same index (23505)
            if getattr(exc, "sqlstate", None) not in ("23505", "42P07"):
                raise
    return IngestReport(
        collection, tuple(added), tuple(replaced), tuple(unchanged), tuple(failed), written, ids
    )


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


def _write_document(
    store: Store,
    coll: Collection,
    item: _Item,
    vectors: np.ndarray,
    tenant: str | None,
    workspace: str | None,
    session: str | None,
    before_commit: Callable[[], None],
) -> tuple[str, str]:
    """Write one document in one transaction; return (document id, added / replaced / unchanged).

    Idempotent, so safe to retry: under the key's lock, a stored document with the same content
    and metadata (written by a concurrent ingest, or by a first attempt whose commit was not
    acknowledged) is left as it is and reported unchanged. Driver errors propagate raw, for
    :func:`_retrying` to retry or type.
    """
    from sqlalchemy import text

    classification, doc_date = _doc_columns(item)
    # Content-addressed ids: the same content under the same key always gets the same ids,
    # so citations stay stable across rebuilds. A changed text gets new ids.
    doc_id = "doc_" + _digest(coll.name, item.source, tenant or "", workspace or "", item.sha256)
    key = {"cid": coll.id, "source": item.source, "tenant": tenant or "", "workspace": workspace or ""}
    with store.engine.begin() as conn:
        # Lock the key so two writers of the same document serialise.
        conn.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": json.dumps([coll.id, item.source, tenant, workspace])},
        )
        current = conn.execute(
            text(
                "SELECT id, metadata FROM agentrag.documents WHERE collection_id = :cid AND source = :source"
                " AND coalesce(tenant_id, '') = :tenant AND coalesce(workspace_id, '') = :workspace"
            ),
            key,
        ).first()
        if (
            current is not None
            and current.id == doc_id
            and _canonical(current.metadata or {}, item.source) == _canonical(item.metadata, item.source)
        ):
            if session is not None:
                conn.execute(
                    text(
                        "INSERT INTO agentrag.document_sessions (session_id, document_id) VALUES (:s, :d)"
                        " ON CONFLICT DO NOTHING"
                    ),
                    {"s": session, "d": doc_id},
                )
            return doc_id, "unchanged"
        if current is not None:
            conn.execute(text("DELETE FROM agentrag.documents WHERE id = :id"), {"id": current.id})
        conn.execute(
            text(
                "INSERT INTO agentrag.documents"
                " (id, collection_id, source, original_filename, sha256, text,"
                " metadata, classification, doc_date, tenant_id, workspace_id, chunk_count)"
                " VALUES (:id, :cid, :source, :filename, :sha, :text, CAST(:meta AS jsonb), :cls, :date,"
                " :tenant, :workspace, :count)"
            ),
            {
                "id": doc_id,
                "cid": coll.id,
                "source": item.source,
                "filename": item.original_filename,
                "sha": item.sha256,
                "text": item.text,
                "meta": json.dumps(item.metadata, default=_json_default),
                "cls": classification,
                "date": doc_date,
                "tenant": tenant,
                "workspace": workspace,
                "count": len(item.chunks),
            },
        )
        _copy_chunks(conn, coll.id, doc_id, item.chunks, vectors)
        if session is not None:
            conn.execute(
                text("INSERT INTO agentrag.document_sessions (session_id, document_id) VALUES (:s, :d)"),
                {"s": session, "d": doc_id},
            )
        conn.execute(
            text("UPDATE agentrag.collections SET version = version + 1 WHERE id = :id"), {"id": coll.id}
        )
        before_commit()
    return doc_id, "added" if current is None else "replaced"


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


def _copy_chunks(
    conn: Connection, collection_id: int, doc_id: str, chunks: list[Chunk], vectors: np.ndarray
) -> None:
    raw = conn.connection.driver_connection
    assert raw is not None
    with raw.cursor() as cur, cur.copy(_COPY_SQL) as copy:
        copy.set_types(_COPY_TYPES)
        for chunk, vector in zip(chunks, vectors, strict=True):
            copy.write_row(
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
                    hashlib.sha256(chunk.text.encode("utf-8")).hexdigest(),
                    vector,
                )
            )
