"""``store.sync`` and the layout of a document's chunks (migration 0054).

Every document row records the layout its chunks were made with: ``(chunk size, overlap,
CHUNKER_VERSION)``. A file whose text and metadata are unchanged but whose stored layout is not
the run's (another ``chunk_size`` / ``chunk_overlap``, a newer chunker, or NULL: written before the
layout was recorded) is read, and its new chunks compared with the stored ones (offsets, page,
section, locator, text hash):

* the same chunks: only the layout is recorded (:func:`adopt_layout`): nothing re-embedded, the
  file reported unchanged. This is what a NULL row gets when it was chunked as this run would
  chunk it, so an upgrade costs one read of each file, never a re-embedding of the corpus;
* other chunks: the document is **re-chunked** (:func:`rechunk`): its chunks replaced and its
  row's chunk count and layout set in place, one transaction per batch of documents, under the
  keys' locks (as a modification). Its row is kept (same id, grants, metadata, revision: the text
  did not change), and a new chunk whose text a stored chunk of the document had reuses that
  chunk's vector (read back exactly); the others are embedded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentrag.readers.chunking import CHUNKER_VERSION, Chunk
from agentrag.retrieval.catalog import VECTOR_TYPES
from agentrag.store.collections import Collection, check_recorded_model
from agentrag.store.vector_index import build_index, count_chunks, index_exists
from agentrag.store.writes import copy_chunks, layout_params

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection, Engine

    from agentrag.store.prepare import PreparedDocument
    from agentrag.store.store import Store

__all__ = ["RECHUNK_BATCH_DOCUMENTS", "adopt_layout", "changed_layouts", "rechunk", "run_layout"]

RECHUNK_BATCH_DOCUMENTS = 64  # documents embedded, then written, together (bounds memory)

Layout = tuple[int, int, int]


def run_layout(size: int, overlap: int) -> Layout:
    """The layout a run with this chunk size and overlap gives (with the current chunker)."""
    return (size, overlap, CHUNKER_VERSION)


def _shape(chunk: Chunk) -> tuple[Any, ...]:
    locator = json.loads(json.dumps(chunk.locator)) if chunk.locator else None  # as jsonb returns it
    digest = hashlib.sha256(chunk.text.encode("utf-8")).hexdigest()
    return (chunk.index, chunk.start_char, chunk.end_char, chunk.page, chunk.section, digest, locator)


def changed_layouts(engine: Engine, items: dict[str, PreparedDocument], layout: Layout) -> dict[str, bool]:
    """``{key: whether its new chunks are not the stored ones}`` for ``{document id: its file read
    again with layout}`` (each item's ``layout`` set to it: what a write records)."""
    from sqlalchemy import text

    if not items:
        return {}
    stored: dict[str, list[tuple[Any, ...]]] = {doc_id: [] for doc_id in items}
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT document_id, chunk_index, start_char, end_char, page, section, sha256, locator"
                " FROM agentrag.chunks WHERE document_id = ANY(:ids) ORDER BY document_id, chunk_index"
            ),
            {"ids": list(items)},
        ).all()
    for doc_id, *shape in rows:
        stored[doc_id].append(tuple(shape))
    for item in items.values():
        item.layout = layout
    return {item.source: stored[doc_id] != [_shape(c) for c in item.chunks] for doc_id, item in items.items()}


def intact_moves(
    engine: Engine,
    pairs: list[tuple[str, str]],
    layouts: dict[str, Layout | None],
    layout: Layout,
    stored: dict[str, tuple[str, str]],
    read: dict[str, PreparedDocument],
) -> tuple[list[tuple[str, str]], dict[str, bool]]:
    """Of the renames ``pairs`` (old key, new key), those a move may carry: the old document's layout is
    ``layout``, or its stored chunks are what the new file gives under it. Also ``{new key: whether its
    chunks changed}`` for the pairs made with another layout (a moved one gets ``layout`` recorded). A
    pair left out is an add of the new key, chunked afresh, and a deletion of the old one."""
    stale = {stored[old][0]: read[new] for old, new in pairs if layouts.get(old) != layout}
    relaid = changed_layouts(engine, stale, layout)
    return [(old, new) for old, new in pairs if not relaid.get(new)], relaid


def adopt_layout(engine: Engine, ids: Sequence[str], layout: Layout) -> None:
    """Record ``layout`` on the rows ``ids`` (their chunks are already laid out so)."""
    from sqlalchemy import text

    if ids:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE agentrag.documents SET chunk_size = :chunk_size,"
                    " chunk_overlap = :chunk_overlap, chunker_version = :chunker_version"
                    " WHERE id = ANY(:ids)"
                ),
                {"ids": list(ids), **layout_params(layout)},
            )


def rechunk(
    store: Store,
    coll: Collection,
    tenant: str | None,
    items: list[tuple[str, PreparedDocument]],
    lock: Callable[[Connection, list[str]], None],
    bulk: bool | None = None,
) -> tuple[list[str], int]:
    """Replace the chunks of ``(document id, document read again)`` pairs with the documents'
    new ones (``item.layout`` recorded); ``lock(conn, keys)`` takes the keys' locks. Returns the
    keys done (a document replaced or deleted meanwhile is left out) and the chunks embedded.
    The HNSW index is dropped and built after as ingest's ``bulk`` decides (:func:`_bulk`)."""
    embedder = store.embedder_for(coll)
    done: list[str] = []
    embedded = 0
    rebuild = _bulk(store, coll, items, bulk)
    try:
        for start in range(0, len(items), RECHUNK_BATCH_DOCUMENTS):
            batch = items[start : start + RECHUNK_BATCH_DOCUMENTS]
            embedded += _vectors(store.engine, coll, embedder, batch)  # before the transaction
            with store.engine.begin() as conn:
                lock(conn, [item.source for _id, item in batch])
                check_recorded_model(conn, coll)  # the vectors are still the collection's model's
                done += _replace_chunks(conn, coll, tenant, batch)
            for _id, item in batch:  # written: let the memory go
                item.vectors, item.chunks = None, []
    finally:  # never leave the collection without the index it had
        if rebuild:
            build_index(store, coll, bulk_load=True)
    return done, embedded


def _bulk(
    store: Store, coll: Collection, items: list[tuple[str, PreparedDocument]], bulk: bool | None
) -> bool:
    """Drop the collection's HNSW index for this rechunk (True: build it after): ``bulk=True``, or
    ``None`` and the new chunks at least as many as the chunks that stay (a layout change usually
    rechunks the whole collection). Unlike ingest, no minimum count: rebuilding the index of a
    collection of 6,500 chunks cost 2.9 s against 8.7 s row by row (benchmarks/sync_layout.py,
    the hashing embedder), and the exact scans meanwhile are fast at that size."""
    from sqlalchemy import text

    if bulk is False or not index_exists(store, coll):
        return False
    if bulk is None:
        new = sum(len(item.chunks) for _id, item in items)
        with store.engine.connect() as conn:
            replaced = conn.execute(
                text("SELECT count(*) FROM agentrag.chunks WHERE document_id = ANY(:ids)"),
                {"ids": [doc_id for doc_id, _item in items]},
            ).scalar_one()
        if new < count_chunks(store, coll) - replaced:
            return False
    with store.engine.begin() as conn:
        conn.execute(text(f"DROP INDEX IF EXISTS agentrag.{coll.hnsw_index}"))  # a name from the catalog
    return True


def _replace_chunks(
    conn: Connection, coll: Collection, tenant: str | None, batch: list[tuple[str, PreparedDocument]]
) -> list[str]:
    from sqlalchemy import text

    ids = [doc_id for doc_id, _item in batch]
    present = set(
        conn.execute(text("SELECT id FROM agentrag.documents WHERE id = ANY(:ids)"), {"ids": ids}).scalars()
    )  # an id is the key and the text's hash: present, the document is the one read
    todo = [(doc_id, item) for doc_id, item in batch if doc_id in present]
    if not todo:
        return []
    todo_ids = [doc_id for doc_id, _item in todo]
    conn.execute(text("DELETE FROM agentrag.chunks WHERE document_id = ANY(:ids)"), {"ids": todo_ids})
    copy_chunks(conn, coll, tenant, todo)
    counts = [len(item.chunks) for _id, item in todo]
    layouts = [layout_params(item.layout) for _id, item in todo]
    conn.execute(
        text(
            "UPDATE agentrag.documents d SET chunk_count = m.n, chunk_size = m.size,"
            " chunk_overlap = m.overlap, chunker_version = m.version"
            " FROM unnest(CAST(:ids AS text[]), CAST(:counts AS int[]), CAST(:sizes AS int[]),"
            " CAST(:overlaps AS int[]), CAST(:versions AS int[])) AS m(id, n, size, overlap, version)"
            " WHERE d.id = m.id"
        ),
        {
            "ids": todo_ids,
            "counts": counts,
            "sizes": [p["chunk_size"] for p in layouts],
            "overlaps": [p["chunk_overlap"] for p in layouts],
            "versions": [p["chunker_version"] for p in layouts],
        },
    )
    conn.execute(  # the current revision's chunk count (its text and number stay)
        text(
            "UPDATE agentrag.document_revisions r SET chunk_count = m.n"
            " FROM unnest(CAST(:ids AS text[]), CAST(:counts AS int[])) AS m(id, n)"
            " WHERE r.document_id = m.id AND r.valid_to IS NULL"
        ),
        {"ids": todo_ids, "counts": counts},
    )
    conn.execute(
        text("UPDATE agentrag.collections SET version = version + 1 WHERE id = :cid"), {"cid": coll.id}
    )
    return [item.source for _id, item in todo]


def _vectors(
    engine: Engine, coll: Collection, embedder: Any, batch: list[tuple[str, PreparedDocument]]
) -> int:
    """Set each document's ``vectors``: a stored chunk's vector for a chunk text the document had
    (pgvector prints the shortest decimal that reads back as the same float: exact), the others
    embedded in one call. Returns the number embedded."""
    import numpy as np
    from sqlalchemy import text

    from agentrag.embedders import embed_batched

    column = VECTOR_TYPES[coll.vector_type]  # a column name from the allow-list
    known: dict[tuple[str, str], str] = {}
    with engine.connect() as conn:
        for doc_id, sha, vector in conn.execute(
            text(
                f"SELECT document_id, sha256, {column}::text FROM agentrag.chunks"
                " WHERE document_id = ANY(:ids)"
            ),
            {"ids": [doc_id for doc_id, _item in batch]},
        ):
            known[(doc_id, sha)] = vector
    digests = {
        doc_id: [hashlib.sha256(c.text.encode("utf-8")).hexdigest() for c in item.chunks]
        for doc_id, item in batch
    }
    new = [
        chunk.text
        for doc_id, item in batch
        for chunk, sha in zip(item.chunks, digests[doc_id], strict=True)
        if (doc_id, sha) not in known
    ]
    fresh = iter(embed_batched(embedder, new))
    for doc_id, item in batch:
        rows: list[np.ndarray] = [
            np.asarray(json.loads(known[(doc_id, sha)]), dtype=np.float32)
            if (doc_id, sha) in known
            else next(fresh)
            for sha in digests[doc_id]
        ]
        item.vectors = np.vstack(rows) if rows else np.zeros((0, embedder.dimensions), dtype=np.float32)
    return len(new)
