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

__all__ = ["DISTANCES", "Collection", "check_embedder", "validate_name"]


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
        )
