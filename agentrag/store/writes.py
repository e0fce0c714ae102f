"""The write transactions of an ingest: one batch of prepared documents, its rows and ONE binary
COPY of its chunks (see :func:`write_batch`), and the content-addressed ids they get."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentrag.languages import detect
from agentrag.retrieval.catalog import VECTOR_TYPES
from agentrag.store.acl import document_grants, enforced
from agentrag.store.collections import WRITE_LOCK_SQL, Collection, check_recorded_model, write_lock_params
from agentrag.store.prepare import PreparedDocument, canonical_metadata, document_columns, json_default

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection

    from agentrag.store.store import Store

__all__ = [
    "chunk_rows",
    "copy_chunks",
    "document_id",
    "encode_vectors",
    "existing_documents",
    "key_digest",
    "layout_params",
    "write_batch",
]

# The embedding goes in pre-encoded (vector's or halfvec's binary wire format, see encode_vectors):
# declared bytea so psycopg passes the bytes through; the server reads them with the column type's
# receive function (a halfvec collection's go to embedding_half, migration 0050).
# The locator (jsonb) goes in through psycopg's binary jsonb dumper.
_COPY_TYPES = [
    "text", "text", "int8", "int4", "text", "int4", "int4", "int4", "text", "text", "bytea", "jsonb", "text",
    "int2",
]  # fmt: skip
_COPY_SQL = (
    "COPY agentrag.chunks (id, document_id, collection_id, chunk_index, text, start_char, end_char,"
    " page, section, sha256, {column}, locator, tenant_id, cluster) FROM STDIN WITH (FORMAT BINARY)"
)


def existing_documents(
    store: Store, coll: Collection, sources: list[str], tenant: str | None, workspace: str | None
) -> dict[str, tuple[str, str, dict[str, Any], list[str] | None]]:
    """``{source: (id, sha256, metadata, the source's grant tokens)}`` of the stored documents under
    ``sources`` (the grants set by hand, ``granted`` / ``revoked``, are carried by :func:`write_batch`)."""
    from sqlalchemy import text

    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT source, id, sha256, metadata, source_grants AS grants FROM agentrag.documents"
                " WHERE collection_id = :cid AND source = ANY(:sources)"
                " AND coalesce(tenant_id, '') = :tenant AND coalesce(workspace_id, '') = :workspace"
            ),
            {"cid": coll.id, "sources": sources, "tenant": tenant or "", "workspace": workspace or ""},
        )
        return {row.source: (row.id, row.sha256, row.metadata, row.grants) for row in rows}


# One statement takes every key's lock, in hash order: two batches sharing keys never deadlock
# (a single-document write holds one key only). Counting forces every row to be evaluated.
_LOCK_SQL = (
    "SELECT count(pg_advisory_xact_lock(h)) FROM (SELECT DISTINCT hashtextextended(k, 0) AS h"
    " FROM unnest(CAST(:keys AS text[])) AS k ORDER BY h) AS keys"
)


def write_batch(
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
    :func:`retrying` to retry or type.
    """
    from sqlalchemy import text

    doc_ids = [document_id(coll, d, tenant, workspace) for d in docs]
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
                    "SELECT source, id, metadata, granted, revoked FROM agentrag.documents"
                    " WHERE collection_id = :cid"
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
                and canonical_metadata(old.metadata or {}, doc.source)
                == canonical_metadata(doc.metadata, doc.source)
            ):
                results.append((doc_id, "unchanged"))
                continue
            if old is not None:
                replaced_ids.append(old.id)
            results.append((doc_id, "added" if old is None else "replaced"))
            classification, doc_date = document_columns(doc.metadata, doc.source)
            new.append((doc_id, doc))
            rows.append(
                {
                    "id": doc_id,
                    "cid": coll.id,
                    "source": doc.source,
                    "filename": doc.original_filename,
                    "sha": doc.sha256,
                    "text": doc.text,
                    "meta": json.dumps(doc.metadata, default=json_default),
                    "cls": classification,
                    "date": doc_date,
                    "tenant": tenant,
                    "workspace": workspace,
                    "count": len(doc.chunks),
                    **_grants(document_grants(coll, doc.metadata, doc.source), old),
                    "private": session is not None,
                    "language": coll.language or detect(doc.text),
                    **layout_params(doc.layout),
                }
            )
        if replaced_ids:  # their chunks, session links and tsvectors go with them (ON DELETE CASCADE)
            conn.execute(text("DELETE FROM agentrag.documents WHERE id = ANY(:ids)"), {"ids": replaced_ids})
        if rows:
            conn.execute(
                text(
                    "INSERT INTO agentrag.documents"
                    " (id, collection_id, source, original_filename, sha256, text,"
                    " metadata, classification, doc_date, tenant_id, workspace_id, chunk_count,"
                    " grants, source_grants, granted, revoked, private, language, chunk_size, chunk_overlap,"
                    " chunker_version)"
                    " VALUES (:id, :cid, :source, :filename, :sha, :text, CAST(:meta AS jsonb), :cls, :date,"
                    " :tenant, :workspace, :count, CAST(:grants AS text[]), CAST(:source_grants AS text[]),"
                    " CAST(:granted AS text[]), CAST(:revoked AS text[]), :private, :language,"
                    " :chunk_size, :chunk_overlap, :chunker_version)"
                ),
                rows,
            )
            copy_chunks(conn, coll, tenant, new)
        if session is not None:
            conn.execute(
                text(
                    "INSERT INTO agentrag.document_sessions (session_id, document_id)"
                    " SELECT :s, d FROM unnest(CAST(:ids AS text[])) AS d ON CONFLICT DO NOTHING"
                ),
                {"s": session, "ids": doc_ids},
            )
        if rows:  # a private upload flags the collection in the same transaction (migration 0031)
            conn.execute(
                text(
                    "UPDATE agentrag.collections SET version = version + 1,"
                    " private_documents = private_documents OR :private WHERE id = :id"
                ),
                {"id": coll.id, "private": session is not None},
            )
        before_commit()
    return results


def _grants(source: list[str] | None, old: Any) -> dict[str, list[str] | None]:
    """A new row's grant columns: the source's, and what the row it replaces (``old``: None for a new
    document) had granted / revoked by hand, which it keeps (migration 0055)."""
    granted = list(old.granted) if old is not None else []
    revoked = list(old.revoked) if old is not None else []
    return {
        "grants": enforced(source, granted, revoked),
        "source_grants": source,
        "granted": granted,
        "revoked": revoked,
    }


def layout_params(layout: tuple[int, int, int] | None) -> dict[str, int | None]:
    """The layout columns of a document row (migration 0054; None: unknown)."""
    size, overlap, version = layout if layout is not None else (None, None, None)
    return {"chunk_size": size, "chunk_overlap": overlap, "chunker_version": version}


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def encode_vectors(vectors: np.ndarray, vector_type: str = "vector") -> list[bytes]:
    """pgvector's binary wire format for each row: dimensions and a zero (int16, big-endian),
    then the values big-endian, float32 (``vector``) or float16 (``halfvec``, rounded to nearest as
    pgvector's own cast does); converted for the whole array at once."""
    import numpy as np

    array = np.ascontiguousarray(vectors, dtype=">f2" if vector_type == "halfvec" else ">f4")
    header = np.array([array.shape[1], 0], dtype=">i2").tobytes()
    return [header + row.tobytes() for row in array]


def key_digest(*parts: str) -> str:
    """An unambiguous digest of ``parts``: joined by ``\x1f`` as ids always were when no part holds
    that character (so existing ids stay), else ``\x1e`` + their JSON array, which holds no raw
    ``\x1f`` at all: the two forms never meet, and each is injective (issue #26: a tenant or
    source holding ``\x1f`` could give two different documents one id)."""
    if any("\x1f" in part for part in parts):
        encoded = "\x1e" + json.dumps(list(parts), ensure_ascii=False)
        return hashlib.sha256(encoded.encode("utf-8")).hexdigest()[:16]
    return _digest(*parts)


def document_id(coll: Collection, doc: PreparedDocument, tenant: str | None, workspace: str | None) -> str:
    # Content-addressed ids: the same content under the same key always gets the same ids,
    # so citations stay stable across rebuilds. A changed text gets new ids. "doc_" + hex: searches
    # send a scope's ids joined by commas (retrieval.scoped.count_scope, retrieval.vector.vector_sql).
    return "doc_" + key_digest(coll.name, doc.source, tenant or "", workspace or "", doc.sha256)


def chunk_rows(
    collection_id: int, doc_id: str, doc: PreparedDocument, vector_type: str = "vector"
) -> list[tuple[Any, ...]]:
    """The COPY rows of a document's chunks (ids, hashes, vectors encoded as ``vector_type``)."""
    if not doc.chunks:
        return []
    from psycopg.types.json import Jsonb

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
            Jsonb(chunk.locator) if chunk.locator else None,
        )
        for chunk, vector in zip(doc.chunks, encode_vectors(doc.vectors, vector_type), strict=True)
    ]


def copy_chunks(
    conn: Connection, coll: Collection, tenant: str | None, documents: list[tuple[str, PreparedDocument]]
) -> None:
    """One binary COPY of the chunks of ``(document id, document)`` pairs, each carrying the
    documents' ``tenant`` (migration 0046: a large tenant's partial HNSW index reads it) and its
    nearest centroid when the collection has clusters (migration 0056,
    :func:`agentrag.store.vector_clusters.assign`; NULL otherwise, which every search reads)."""
    from agentrag.store.vector_clusters import assign

    raw = conn.connection.driver_connection
    assert raw is not None
    clusters = assign(conn, coll.id, [doc.vectors for _doc_id, doc in documents])
    sql = _COPY_SQL.format(column=VECTOR_TYPES[coll.vector_type])
    with raw.cursor() as cur, cur.copy(sql) as copy:
        copy.set_types(_COPY_TYPES)
        for (doc_id, doc), assigned in zip(documents, clusters, strict=True):
            ready = doc.copy_rows is not None and doc.copy_rows[0] == doc_id
            rows = doc.copy_rows[1] if ready else chunk_rows(coll.id, doc_id, doc, coll.vector_type)  # type: ignore[index]
            ids: list[int | None] = [None] * len(rows)
            if assigned is not None and len(assigned) == len(rows):
                ids = list(assigned)
            for row, cluster in zip(rows, ids, strict=True):
                copy.write_row((*row, tenant, cluster))
