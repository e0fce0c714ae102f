"""Re-embed every chunk of a collection with another embedder, atomically (``Store.reembed``).

A collection records the model, version and dimensions of its vectors; an embedder of another
numeric variant (``LocalEmbedder(backend="onnx-int8")`` against a collection embedded in
float32) cannot ingest into it and its searches report ``model_version_match=False``. This
converts the collection:

1. **Embed, invisibly.** The chunks are read page by page (``page_size`` chunks, in id order)
   and embedded with the new embedder; the vectors go into a temporary table of this session
   (nothing in the collection changes; searches and ingests go on against the old vectors).
2. **Drop the HNSW index** (its own short transaction, as a bulk ingest does): rewriting every
   vector under a live HNSW index would maintain it row by row, several times slower than a
   rebuild. Meanwhile vector searches of this collection scan exactly: same results, slower.
3. **Swap, in one transaction**, holding the collection's write lock exclusive (ingests and
   document deletions of this collection hold it shared, so they wait): the chunks written or
   changed since step 1 are embedded too, every chunk's vector is replaced, and the collection's
   recorded model, version and dimensions are updated. Searches see either the old vectors
   under the old record or the new vectors under the new one, never a mix; an ingest prepared
   with the old embedder that reaches its write after the swap is refused
   (:class:`~agentrag.errors.EmbeddingMismatchError`), nothing of it written.
4. **Build the HNSW index** again.

The swap also empties the chunks' coarse clusters and deletes the collection's fit (migration 0056,
:mod:`agentrag.store.vector_clusters`): they were of the old vectors. Its scopes are scanned whole until
the next ``Store.optimize`` fits them again.

``vector_type`` converts the storage in the same swap (migration 0050): the staged float32 vectors
go to ``embedding`` (``"vector"``) or, cast by pgvector, to ``embedding_half`` (``"halfvec"``), the
other column emptied, and the collection records the new type with its model.

A failure anywhere leaves the collection as it was (the temporary table goes with the session;
the index is rebuilt if step 2 dropped it) and raises. The BM25 and tsvector caches are kept:
the text did not change.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrag.errors import EmbeddingError, InvalidInputError, StoreError
from agentrag.store.collections import (
    EXCLUSIVE_WRITE_LOCK_SQL,
    Collection,
    validate_vector_type,
    write_lock_params,
)
from agentrag.store.vector_clusters import drop_clusters

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection

    from agentrag.embedders import Embedder
    from agentrag.store.store import Store

__all__ = ["DEFAULT_PAGE_SIZE", "ReembedReport", "reembed"]

DEFAULT_PAGE_SIZE = 1024  # chunks per read and embed call (LocalEmbedder sorts each call by length)

_STAGING = "agentrag_reembed_vectors"  # a temporary table: this session only
_STAGE_COPY = f"COPY {_STAGING} (id, sha256, embedding) FROM STDIN WITH (FORMAT BINARY)"
# the swap's SET, by the vector type the collection is stored as afterwards (one column set, the other NULL)
_NEW_VECTORS = {
    "vector": "embedding = s.embedding, embedding_half = NULL, cluster = NULL",
    "halfvec": "embedding = NULL, embedding_half = s.embedding::halfvec, cluster = NULL",
}  # the clusters of the old vectors go with them, and the fit in the same swap (migration 0056)


@dataclass(frozen=True, slots=True)
class ReembedReport:
    """What ``Store.reembed`` did: the chunks re-embedded and the record before and after."""

    collection: str
    chunks: int
    embed_model: str
    embed_version: str
    dimensions: int
    previous_model: str
    previous_version: str
    previous_dimensions: int
    late_chunks: int  # written or changed while the first pass ran, embedded in the swap
    embed_seconds: float
    swap_seconds: float
    index_seconds: float
    vector_type: str = "vector"
    previous_vector_type: str = "vector"

    def __repr__(self) -> str:
        return (
            f"ReembedReport({self.collection!r}: {self.chunks} chunks, "
            f"{self.previous_model} {self.previous_version} -> {self.embed_model} {self.embed_version})"
        )

    def __str__(self) -> str:
        return (
            f"re-embedded {self.chunks} chunks of {self.collection!r}: {self.previous_model} "
            f"({self.previous_dimensions}d, {self.previous_version}) -> {self.embed_model} "
            f"({self.dimensions}d, {self.embed_version}){self._conversion()}; "
            f"embed {self.embed_seconds:.1f} s, "
            f"swap {self.swap_seconds:.1f} s, index {self.index_seconds:.1f} s"
        )

    def _conversion(self) -> str:
        if self.vector_type == self.previous_vector_type:
            return ""
        return f", stored as {self.previous_vector_type} -> {self.vector_type}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "chunks": self.chunks,
            "embed_model": self.embed_model,
            "embed_version": self.embed_version,
            "dimensions": self.dimensions,
            "vector_type": self.vector_type,
            "previous": {
                "embed_model": self.previous_model,
                "embed_version": self.previous_version,
                "dimensions": self.previous_dimensions,
                "vector_type": self.previous_vector_type,
            },
            "late_chunks": self.late_chunks,
            "seconds": {
                "embed": round(self.embed_seconds, 3),
                "swap": round(self.swap_seconds, 3),
                "index": round(self.index_seconds, 3),
            },
        }


def reembed(
    store: Store,
    collection: str,
    *,
    embedder: Embedder | str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    on_progress: Callable[[int, int], None] | None = None,
    vector_type: str | None = None,
) -> ReembedReport:
    """Re-embed every chunk of ``collection`` with ``embedder`` (an Embedder or a registered name;
    default: the store's when it was given one, else the collection's own model's), stored as
    ``vector_type`` (None: as it is); see the module."""
    from agentrag.store.connection import retrying
    from agentrag.store.vector_index import build_index, index_exists

    if type(page_size) is not int or page_size < 1:
        raise InvalidInputError(f"page_size must be an integer >= 1, got {page_size!r}")
    if vector_type is not None:
        validate_vector_type(vector_type)
    if isinstance(embedder, str):
        from agentrag.store.embedders import resolve_embedder

        embedder = resolve_embedder(embedder)  # UnknownEmbedderError, before anything is read
    for attribute in ("model_id", "version", "dimensions", "embed"):
        if embedder is not None and not hasattr(embedder, attribute):
            raise InvalidInputError(
                f"embedder must have model_id, version, dimensions and embed(texts), got "
                f"{type(embedder).__name__} without {attribute!r}"
            )
    old = store.collection(collection)  # CollectionNotFoundError
    if embedder is None:  # the store's own when it was given one, else the collection's own model's
        embedder = store.embedder if store.embedder_given else store.embedder_for(old)
    dimensions = int(embedder.dimensions)  # EmbeddingError if the model cannot load
    new = Collection(
        id=old.id,
        name=old.name,
        description=old.description,
        embed_model=str(embedder.model_id),
        embed_version=str(embedder.version),
        dimensions=dimensions,
        distance=old.distance,
        scoped=old.scoped,
        version=old.version,
        created_at=old.created_at,
        vector_type=old.vector_type if vector_type is None else vector_type,
    )
    embed = functools.partial(_embed, embedder, dimensions)
    started = time.perf_counter()
    dropped = False
    with store.engine.connect() as conn:
        try:
            conn.exec_driver_sql(
                f"CREATE TEMPORARY TABLE {_STAGING} (id text PRIMARY KEY, sha256 text NOT NULL,"
                " embedding vector NOT NULL) ON COMMIT PRESERVE ROWS"
            )
            conn.commit()
            # 1. every chunk, page by page, into the staging table
            total = _count(conn, old.id)
            done = 0
            after = ""
            while True:
                page = _page(conn, old.id, after, page_size)
                conn.commit()
                if not page:
                    break
                _stage(conn, page, embed([row[2] for row in page]))
                conn.commit()
                after = page[-1][0]
                done += len(page)
                if on_progress is not None:
                    on_progress(done, max(total, done))
            embed_seconds = time.perf_counter() - started

            # 2. the HNSW index goes (rebuilt in 4, or below on failure)
            dropped = index_exists(store, old)  # the tenants' indexes go either way (drop_vector_indexes)
            drop = functools.partial(drop_vector_indexes, store, old)
            retrying("dropping the vector index to re-embed", drop)

            # 3. the swap, under the collection's write lock
            swap_started = time.perf_counter()
            chunks, late = _swap(conn, old, new, embed)
            swap_seconds = time.perf_counter() - swap_started
        except BaseException:
            conn.rollback()
            if dropped:
                build_index(store, old, bulk_load=True)
            raise
        finally:
            try:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {_STAGING}")
                conn.commit()
            except Exception:  # the connection broke: the table went with its session
                conn.invalidate()
    store.forget_described(old.name)
    store.forget_record(old.name)
    # 4. the index, for the new vectors (and dimensions)
    index_started = time.perf_counter()
    build_index(store, new, bulk_load=True)
    return ReembedReport(
        collection=old.name,
        chunks=chunks,
        embed_model=new.embed_model,
        embed_version=new.embed_version,
        dimensions=dimensions,
        previous_model=old.embed_model,
        previous_version=old.embed_version,
        previous_dimensions=old.dimensions,
        late_chunks=late,
        embed_seconds=embed_seconds,
        swap_seconds=swap_seconds,
        index_seconds=time.perf_counter() - index_started,
        vector_type=new.vector_type,
        previous_vector_type=old.vector_type,
    )


def _embed(embedder: Embedder, dimensions: int, texts: Sequence[str]) -> np.ndarray:
    import numpy as np

    from agentrag.embedders import document_embed

    if not texts:
        return np.zeros((0, dimensions), dtype=np.float32)
    # the chunks are documents: embed_documents when the embedder has it (LocalEmbedder's document_backend)
    vectors = np.asarray(document_embed(embedder)(list(texts)), dtype=np.float32)
    if vectors.shape != (len(texts), dimensions) or not np.isfinite(vectors).all():
        raise EmbeddingError(
            f"embedder {embedder.model_id!r} returned unusable vectors (shape {vectors.shape}, expected "
            f"({len(texts)}, {dimensions}), finite values): nothing was re-embedded"
        )
    return vectors


def _count(conn: Connection, collection_id: int) -> int:
    from sqlalchemy import text

    sql = "SELECT count(*) FROM agentrag.chunks WHERE collection_id = :cid"
    return int(conn.execute(text(sql), {"cid": collection_id}).scalar() or 0)


def _page(conn: Connection, collection_id: int, after: str, size: int) -> list[Any]:
    from sqlalchemy import text

    return list(
        conn.execute(
            text(
                "SELECT id, sha256, text FROM agentrag.chunks WHERE collection_id = :cid AND id > :after"
                " ORDER BY id LIMIT :n"
            ),
            {"cid": collection_id, "after": after, "n": size},
        ).all()
    )


def _stage(conn: Connection, rows: Sequence[Any], vectors: np.ndarray) -> None:
    """One binary COPY of ``(id, sha256)`` rows and their vectors into the staging table (an id
    staged before, whose text changed since, is replaced)."""
    from sqlalchemy import text

    from agentrag.store.writes import encode_vectors

    ids = [row[0] for row in rows]
    conn.execute(text(f"DELETE FROM {_STAGING} WHERE id = ANY(:ids)"), {"ids": ids})
    raw = conn.connection.driver_connection
    assert raw is not None
    with raw.cursor() as cur, cur.copy(_STAGE_COPY) as copy:
        copy.set_types(["text", "text", "bytea"])
        for row, vector in zip(rows, encode_vectors(vectors), strict=True):
            copy.write_row((row[0], row[1], vector))


def drop_vector_indexes(store: Store, coll: Collection) -> None:
    """The collection's HNSW index and its tenants' (their expression casts to the old dimensions;
    the next ``Store.optimize`` builds them again)."""
    from sqlalchemy import text

    from agentrag.store.tenant_indexes import drop_tenant_indexes

    with store.engine.begin() as conn:
        conn.execute(text(f"DROP INDEX IF EXISTS agentrag.{coll.hnsw_index}"))
        drop_tenant_indexes(conn, coll.id)


def _swap(
    conn: Connection, old: Collection, new: Collection, embed: Callable[[Sequence[str]], np.ndarray]
) -> tuple[int, int]:
    """Step 3 of the module docstring; (chunks re-embedded, of which embedded in the swap)."""
    from sqlalchemy import text

    with conn.begin():
        conn.execute(text(EXCLUSIVE_WRITE_LOCK_SQL), write_lock_params(old.id))
        recorded = conn.execute(
            text(
                "SELECT embed_model, embed_version, dimensions, vector_type FROM agentrag.collections"
                " WHERE id = :cid FOR UPDATE"
            ),
            {"cid": old.id},
        ).first()
        if recorded is None:
            raise StoreError(f"collection {old.name!r} was deleted while it was re-embedded")
        if tuple(recorded) != (old.embed_model, old.embed_version, old.dimensions, old.vector_type):
            raise StoreError(
                f"collection {old.name!r} was re-embedded by someone else meanwhile "
                f"(now {recorded.embed_model} {recorded.embed_version}): nothing was changed"
            )
        late = conn.execute(
            text(
                f"SELECT c.id, c.sha256, c.text FROM agentrag.chunks c LEFT JOIN {_STAGING} s"
                " ON s.id = c.id AND s.sha256 = c.sha256"
                " WHERE c.collection_id = :cid AND s.id IS NULL ORDER BY c.id"
            ),
            {"cid": old.id},
        ).all()
        if late:
            _stage(conn, late, embed([row[2] for row in late]))
        updated = conn.execute(
            text(
                f"UPDATE agentrag.chunks c SET {_NEW_VECTORS[new.vector_type]} FROM {_STAGING} s"
                " WHERE c.collection_id = :cid AND c.id = s.id AND c.sha256 = s.sha256"
            ),
            {"cid": old.id},
        ).rowcount
        total = _count(conn, old.id)
        if updated != total:  # cannot happen under the lock; never record a half-converted collection
            raise StoreError(
                f"re-embedding {old.name!r}: {updated} of {total} chunks matched their staged vectors; "
                "nothing was changed"
            )
        drop_clusters(conn, old.id)  # the new vectors' clusters: the next Store.optimize fits them
        conn.execute(
            text(
                "UPDATE agentrag.collections SET embed_model = :model, embed_version = :version,"
                " dimensions = :dims, vector_type = :vector_type WHERE id = :cid"
            ),
            {
                "model": new.embed_model,
                "version": new.embed_version,
                "dims": new.dimensions,
                "vector_type": new.vector_type,
                "cid": old.id,
            },
        )
    return int(updated), len(late)
