"""What a search reads before its legs run: the source it runs on, the collections, the query vector.

:class:`SearchSource` is what retrieval asks of a store (a :class:`~agentrag.store.store.Store` is
one; retrieval never imports the store). :func:`load_collections` reads the collections' settings
on the search's connection, :func:`check_embedder` checks each collection's embedder against it, and
:func:`embed_query` embeds the query through the store's query cache, once per distinct embedder
(``SearchSource.query_embedders``: each collection's own, see :mod:`agentrag.store.embedders`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agentrag.errors import EmbeddingError, EmbeddingMismatchError, InvalidInputError
from agentrag.retrieval.lexical import BM25Cache
from agentrag.retrieval.scope_cache import ScopeCache

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection, Engine

    from agentrag.embedders import Embedder

__all__ = [
    "CollectionInfo",
    "SearchSource",
    "check_embedder",
    "embed_query",
    "load_collections",
    "mixed_models",
    "vector_key",
]


class SearchSource(Protocol):
    """What a search runs on: a :class:`~agentrag.store.store.Store` is one.

    Retrieval never imports the store: the store hands itself in (``Store.search`` is
    :func:`search`), and retrieval runs its SQL on a connection taken from ``engine``.
    """

    @property
    def engine(self) -> Engine: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def bm25_cache(self) -> BM25Cache: ...

    def embed_queries(self, texts: Sequence[str], embedder: Embedder | None = None) -> np.ndarray: ...

    def query_embedders(
        self, names: Sequence[str], records: Iterable[CollectionInfo] | None = None
    ) -> dict[str, Embedder]: ...

    def ensure_text_index(self, collection_id: int, version: int | None = None) -> None: ...

    @property
    def scope_cache(self) -> ScopeCache: ...


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    id: int
    name: str
    embed_model: str
    embed_version: str
    dimensions: int
    distance: str
    scoped: bool
    version: int
    hnsw_ef_search: int | None = None  # the collection's own hnsw.ef_search (None: the size rule)
    indexed_rows: float = -1.0  # pg_class.reltuples of its HNSW index (-1: unknown or no index)
    acl: bool = False  # enforces document grants
    private_documents: bool = False  # holds private session uploads
    tenant: str | None = None  # the tenant that owns it (None: shared with every tenant)
    tsv_version: int | None = None  # the version its tsvectors were synced to, as this snapshot sees it
    vector_type: str = "vector"  # how its vectors are stored: "vector" (float32) or "halfvec" (float16)
    clusters_fit: int | None = None  # its centroids' fit id (Store.optimize, migration 0056; None: none)
    clusters_k: int | None = None  # how many centroids
    clusters_chunks: int | None = None  # the collection's chunks at the fit
    acl_version: int = 0  # bumped by every change of who may see its documents but a write (migration 0057)


def load_collections(conn: Connection, names: tuple[str, ...]) -> list[CollectionInfo]:
    from sqlalchemy import text

    rows = conn.execute(
        text(
            "SELECT id, name, embed_model, embed_version, dimensions, distance, scoped, version,"
            " hnsw_ef_search, COALESCE((SELECT i.reltuples FROM pg_class i"
            " WHERE i.oid = to_regclass('agentrag.chunks_hnsw_' || id)), -1) AS indexed_rows,"
            " acl, private_documents, tenant_id, tsv_version, vector_type,"
            " (SELECT v.fit FROM agentrag.vector_clusters v WHERE v.collection_id = collections.id),"
            " (SELECT v.k FROM agentrag.vector_clusters v WHERE v.collection_id = collections.id),"
            " (SELECT v.chunks FROM agentrag.vector_clusters v WHERE v.collection_id = collections.id),"
            " acl_version FROM agentrag.collections WHERE name = ANY(CAST(:names AS text[]))"
        ),
        {"names": list(names)},
    ).all()
    found = {row.name: CollectionInfo(*row) for row in rows}
    missing = [name for name in names if name not in found]
    if missing:
        from agentrag.retrieval.missing import missing_collections_error

        raise missing_collections_error(conn, missing)
    return [found[name] for name in names]


def vector_key(embedder: Embedder) -> tuple[str, str]:
    """What tells two embedders' query vectors apart: model and version."""
    return str(embedder.model_id), str(embedder.version)


def check_embedder(embedders: Mapping[str, Embedder], collections: list[CollectionInfo]) -> list[str]:
    """Check each collection's embedder (``embedders``, by name) against it; return the model-version
    warnings.

    Raises EmbeddingMismatchError (model or dimensions differ), InvalidInputError (the collections
    use different distance metrics) or EmbeddingError (an embedder cannot even say its dimensions).
    """
    warnings: list[str] = []
    for c in collections:
        embedder = embedders[c.name]
        model_id, dimensions, version = embedder.model_id, int(embedder.dimensions), embedder.version
        if model_id != c.embed_model or dimensions != c.dimensions:
            from agentrag.embedders.registry import embedder_names

            raise EmbeddingMismatchError(
                f"collection {c.name!r} was embedded with {c.embed_model!r} ({c.dimensions}d); the store "
                f"embedder is {model_id!r} ({dimensions}d) and no registered embedder is of that model "
                f"(registered: {', '.join(embedder_names())}): search it with a Store using that model, "
                "register one (agentrag.embedders.registry.register_embedder), or re-embed it "
                f"(`agentrag reembed {c.name} --embedder NAME`)"
            )
        if version != c.embed_version:
            warnings.append(
                f"collection {c.name!r} was embedded with {c.embed_model} version {c.embed_version!r}; the "
                f"query embedder is version {version!r}: vector scores may be slightly off. "
                f"Re-embed it: `agentrag reembed {c.name}` (store.reembed)"
            )
    distances = {c.distance for c in collections}
    if len(distances) > 1:
        raise InvalidInputError(
            f"collections use different distance metrics ({', '.join(sorted(distances))}); their vector "
            "scores do not compare: search them separately"
        )
    return warnings


def mixed_models(embedders: Mapping[str, Embedder], collections: list[CollectionInfo]) -> str | None:
    """The warning of a search over collections of different models (None when they share one)."""
    models = sorted({str(embedders[c.name].model_id) for c in collections})
    if len(models) < 2:
        return None
    return (
        f"the collections are embedded with different models ({', '.join(models)}): each was searched "
        "with its own, and their vector similarities, which do not compare, were merged as they are"
    )


def embed_query(store: SearchSource, query: str, embedder: Embedder) -> tuple[np.ndarray, float]:
    """The query vector of ``embedder`` (through the store's query cache) and how long it took (ms).

    EmbeddingError for an unusable vector.
    """
    import numpy as np

    started = time.perf_counter()
    dimensions = int(embedder.dimensions)
    vectors = np.asarray(store.embed_queries([query], embedder), dtype=np.float32)
    if vectors.shape != (1, dimensions) or not np.isfinite(vectors).all():
        raise EmbeddingError(
            f"embedder {embedder.model_id!r} returned an unusable query vector (shape {vectors.shape}, "
            f"expected (1, {dimensions}), finite values)"
        )
    return vectors[0], (time.perf_counter() - started) * 1000
