"""Collections: named sets of documents sharing one embedding model and distance metric."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentrag.errors import EmbeddingMismatchError
from agentrag.retrieval.catalog import DISTANCES, validate_name
from agentrag.retrieval.vector import DEFAULT_HNSW_EF_CONSTRUCTION, DEFAULT_HNSW_M

if TYPE_CHECKING:
    from agentrag.embedders import Embedder

__all__ = ["DISTANCES", "Collection", "check_embedder", "reembed_hint", "validate_name"]


@dataclass(frozen=True, slots=True)
class Collection:
    id: int
    name: str
    description: str
    embed_model: str
    embed_version: str
    dimensions: int
    distance: str
    scoped: bool
    version: int
    created_at: datetime
    document_count: int | None = None  # None when not counted (see Store.describe)
    chunk_count: int | None = None
    #: its HNSW index's build parameters (pgvector ``m``, ``ef_construction``) and its default
    #: ``hnsw.ef_search`` (None: ``max(100, depth)``); see :meth:`Store.tune_vector_index`
    hnsw_m: int = DEFAULT_HNSW_M
    hnsw_ef_construction: int = DEFAULT_HNSW_EF_CONSTRUCTION
    hnsw_ef_search: int | None = None

    def __repr__(self) -> str:
        counts = (
            ""
            if self.document_count is None
            else f"{self.document_count} documents, {self.chunk_count} chunks, "
        )
        return (
            f"Collection({self.name!r}, {counts}"
            f"{self.embed_model} [{self.dimensions}d {self.distance}]{', scoped' if self.scoped else ''})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "embed_model": self.embed_model,
            "embed_version": self.embed_version,
            "dimensions": self.dimensions,
            "distance": self.distance,
            "scoped": self.scoped,
            "version": self.version,
            "documents": self.document_count,
            "chunks": self.chunk_count,
            "hnsw": {
                "m": self.hnsw_m,
                "ef_construction": self.hnsw_ef_construction,
                "ef_search": self.hnsw_ef_search,
            },
            "created_at": self.created_at.isoformat(),
        }

    @property
    def hnsw_index(self) -> str:
        return f"chunks_hnsw_{int(self.id)}"


def check_embedder(collection: Collection, embedder: Embedder, *, strict_version: bool = True) -> None:
    """Refuse an embedder whose model, dimensions (or version) differ from the collection's."""
    problems = []
    if embedder.model_id != collection.embed_model:
        problems.append(f"model {embedder.model_id!r} != {collection.embed_model!r}")
    if embedder.dimensions != collection.dimensions:
        problems.append(f"dimensions {embedder.dimensions} != {collection.dimensions}")
    if strict_version and embedder.version != collection.embed_version:
        problems.append(f"version {embedder.version!r} != {collection.embed_version!r}")
    if problems:
        raise EmbeddingMismatchError(
            f"collection {collection.name!r} was built with {collection.embed_model!r} "
            f"({collection.dimensions}d, {collection.embed_version}); this embedder differs: "
            + "; ".join(problems)
            + ". "
            + reembed_hint(collection.name)
        )


def reembed_hint(name: str) -> str:
    """How to resolve a model / version mismatch, named in every mismatch error and warning."""
    return (
        f"Re-embed the collection with this embedder (`agentrag reembed {name}`, or "
        f"store.reembed({name!r})), or use the embedder it was built with (e.g. "
        "LocalEmbedder(backend='onnx-int8') for a collection embedded while int8 was the default)"
    )


# A collection's chunk writers (ingest, document deletion) hold this advisory lock shared for
# their transaction; a re-embedding holds it exclusive while it swaps the vectors, so it sees
# every committed chunk and no writer adds old-model vectors under the new record. The
# two-integer form keeps it apart from the ingest's single-key document locks.
_WRITE_LOCK_SPACE = 0x61677277  # "agrw"
WRITE_LOCK_SQL = "SELECT pg_advisory_xact_lock_shared(:space, CAST(:cid % 2147483647 AS integer))"
EXCLUSIVE_WRITE_LOCK_SQL = "SELECT pg_advisory_xact_lock(:space, CAST(:cid % 2147483647 AS integer))"


def write_lock_params(collection_id: int) -> dict[str, int]:
    return {"space": _WRITE_LOCK_SPACE, "cid": int(collection_id)}


def check_recorded_model(conn: Any, collection: Collection) -> None:
    """Inside a write transaction, after :data:`WRITE_LOCK_SQL`: refuse to write vectors when the
    collection's recorded model, version or dimensions changed since ``collection`` was read
    (re-embedded meanwhile)."""
    from sqlalchemy import text

    row = conn.execute(
        text("SELECT embed_model, embed_version, dimensions FROM agentrag.collections WHERE id = :cid"),
        {"cid": collection.id},
    ).first()
    if row is None:
        return  # deleted meanwhile: the insert's foreign key says so
    recorded = (row.embed_model, row.embed_version, int(row.dimensions))
    if recorded != (collection.embed_model, collection.embed_version, collection.dimensions):
        raise EmbeddingMismatchError(
            f"collection {collection.name!r} was re-embedded with {row.embed_model!r} "
            f"({row.dimensions}d, {row.embed_version}) while this write was prepared with "
            f"{collection.embed_version!r}: nothing of this batch was written. Ingest again with an "
            "embedder of the new version"
        )
