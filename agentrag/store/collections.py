"""Collections: named sets of documents sharing one embedding model and distance metric."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentrag.errors import EmbeddingMismatchError
from agentrag.retrieval.catalog import DISTANCES, validate_name, validate_vector_type
from agentrag.retrieval.vector import DEFAULT_HNSW_EF_CONSTRUCTION, DEFAULT_HNSW_M

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from agentrag.embedders import Embedder

__all__ = [
    "COLLECTION_SQL",
    "DISTANCES",
    "Collection",
    "check_collection_options",
    "check_embedder",
    "describe_collections",
    "drop_collection",
    "find_collection",
    "insert_collection",
    "list_collections",
    "read_collection",
    "reembed_hint",
    "update_hnsw_parameters",
    "validate_name",
    "validate_vector_type",
]


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
    #: enforces document grants (``create_collection(acl=True)``); holds private session uploads
    acl: bool = False
    private_documents: bool = False
    #: the tenant that owns it (None: shared with every tenant); see docs/how-to/permissions.md
    tenant: str | None = None
    #: how its chunk vectors are stored: "vector" (float32) or "halfvec" (float16; migration 0050)
    vector_type: str = "vector"
    #: its declared language (None: each document's is detected at ingest); see agentrag.languages
    language: str | None = None

    def __repr__(self) -> str:
        counts = (
            ""
            if self.document_count is None
            else f"{self.document_count} documents, {self.chunk_count} chunks, "
        )
        return (
            f"Collection({self.name!r}, {counts}"
            f"{self.embed_model} [{self.dimensions}d {self.distance}"
            f"{' halfvec' if self.vector_type == 'halfvec' else ''}]{', scoped' if self.scoped else ''}"
            f"{', acl' if self.acl else ''}{', ' + self.language if self.language else ''})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "embed_model": self.embed_model,
            "embed_version": self.embed_version,
            "dimensions": self.dimensions,
            "distance": self.distance,
            "vector_type": self.vector_type,
            "scoped": self.scoped,
            "acl": self.acl,
            "tenant": self.tenant,
            "language": self.language,
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
            + (registry_hint(collection.embed_model) if embedder.model_id != collection.embed_model else "")
        )


def registry_hint(model: str) -> str:
    """What to do when no embedder of ``model`` is at hand: register one."""
    from agentrag.embedders.registry import embedder_names

    return (
        f"; a Store embeds a collection with the registered embedder of its model when its own is of "
        f"another (registered: {', '.join(embedder_names())}; "
        "agentrag.embedders.registry.register_embedder adds one)"
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
        text(
            "SELECT embed_model, embed_version, dimensions, vector_type FROM agentrag.collections"
            " WHERE id = :cid"
        ),
        {"cid": collection.id},
    ).first()
    if row is None:
        return  # deleted meanwhile: the insert's foreign key says so
    recorded = (row.embed_model, row.embed_version, int(row.dimensions), row.vector_type)
    prepared = (
        collection.embed_model,
        collection.embed_version,
        collection.dimensions,
        collection.vector_type,
    )
    if recorded != prepared:
        raise EmbeddingMismatchError(
            f"collection {collection.name!r} was re-embedded with {row.embed_model!r} "
            f"({row.dimensions}d, {row.embed_version}, {row.vector_type}) while this write was prepared "
            f"with {collection.embed_version!r} ({collection.vector_type}): nothing of this batch was "
            "written. Ingest again (with an embedder of the new version)"
        )


# ---- the collections table (the SQL of Store.create_collection, collection, describe, ...) ------
COLLECTION_SQL = """
SELECT c.id, c.name, c.description, c.embed_model, c.embed_version, c.dimensions, c.distance,
       c.scoped, c.version, c.created_at, c.hnsw_m, c.hnsw_ef_construction, c.hnsw_ef_search,
       c.acl, c.private_documents, c.tenant_id AS tenant, c.vector_type, c.language,
       (SELECT count(*) FROM agentrag.documents d WHERE d.collection_id = c.id) AS document_count,
       (SELECT count(*) FROM agentrag.chunks k WHERE k.collection_id = c.id) AS chunk_count
FROM agentrag.collections c
"""


def check_collection_options(name: str, distance: str, vector_type: str, language: str | None) -> str | None:
    """Raise the typed error for a bad name, distance, vector type or language; the language's code."""
    from agentrag.errors import InvalidInputError

    validate_name(name)
    if distance not in DISTANCES:
        raise InvalidInputError(f"unknown distance {distance!r}; use one of {sorted(DISTANCES)}")
    validate_vector_type(vector_type)
    if language is None:
        return None
    from agentrag.languages import check_language

    return check_language(language)


def insert_collection(
    engine: Engine,
    name: str,
    *,
    description: str,
    embedder: Embedder,
    distance: str,
    scoped: bool,
    acl: bool,
    tenant: str | None,
    hnsw_m: int,
    hnsw_ef_construction: int,
    ef_search: int | None,
    vector_type: str = "vector",
    language: str | None = None,
) -> None:
    """Insert the collection's row (IntegrityError when the name is taken)."""
    from sqlalchemy import text

    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO agentrag.collections (name, description, embed_model, embed_version,"
                " dimensions, distance, scoped, acl, tenant_id, hnsw_m, hnsw_ef_construction, hnsw_ef_search,"
                " vector_type, language)"
                " VALUES (:name, :description, :model, :version, :dims, :distance, :scoped, :acl, :tenant,"
                " :m, :ef_construction, :ef_search, :vector_type, :language)"
            ),
            {
                "name": name,
                "description": description,
                "model": embedder.model_id,
                "version": embedder.version,
                "dims": int(embedder.dimensions),
                "distance": distance,
                "scoped": scoped,
                "acl": acl,
                "tenant": tenant,
                "m": hnsw_m,
                "ef_construction": hnsw_ef_construction,
                "ef_search": ef_search,
                "vector_type": vector_type,
                "language": language,
            },
        )


def read_collection(engine: Engine, name: str) -> Collection:
    """One collection with its counts; CollectionNotFoundError when there is none."""
    from sqlalchemy import text

    with engine.connect() as conn:
        row = conn.execute(text(COLLECTION_SQL + " WHERE c.name = :name"), {"name": name}).mappings().first()
    if row is None:
        from agentrag.retrieval.missing import missing_collections_error

        raise missing_collections_error(engine, [name])
    return Collection(**row)


def find_collection(engine: Engine, name: str) -> Collection:
    """One collection without its counts (ingest and sync need none, and counting a large
    collection's chunks takes longer than a small write); CollectionNotFoundError when there is none."""
    found = describe_collections(engine, [name]).get(name)
    return found if found is not None else read_collection(engine, name)  # (raises the error)


def list_collections(engine: Engine) -> list[Collection]:
    """Every collection with its counts, by name."""
    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(text(COLLECTION_SQL + " ORDER BY c.name")).mappings().all()
    return [Collection(**row) for row in rows]


def describe_collections(engine: Engine, names: Sequence[str]) -> dict[str, Collection]:
    """The collections of ``names`` that exist, by name, in one query without their counts."""
    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT id, name, description, embed_model, embed_version, dimensions, distance, scoped,"
                " version, created_at, hnsw_m, hnsw_ef_construction, hnsw_ef_search, acl, private_documents,"
                " tenant_id AS tenant, vector_type, language"
                " FROM agentrag.collections WHERE name = ANY(CAST(:names AS text[]))"
            ),
            {"names": list(names)},
        ).mappings()
        return {row["name"]: Collection(**row) for row in rows}


def drop_collection(engine: Engine, collection: Collection) -> None:
    """Delete the collection (its documents, chunks, relations cascade) and its two indexes."""
    from sqlalchemy import text

    from agentrag.store.tenant_indexes import drop_tenant_indexes

    with engine.begin() as conn:
        conn.execute(text(f"DROP INDEX IF EXISTS agentrag.{collection.hnsw_index}"))
        drop_tenant_indexes(conn, collection.id)
        conn.execute(text(f"DROP INDEX IF EXISTS agentrag.chunk_tsv_gin_{int(collection.id)}"))
        conn.execute(text("DELETE FROM agentrag.collections WHERE id = :id"), {"id": collection.id})


def update_hnsw_parameters(
    engine: Engine, collection: Collection, m: int, ef_c: int, ef_s: int | None
) -> None:
    """Record new HNSW parameters; drop the index (and its tenants', see ``Store.optimize``) when
    ``m`` or ``ef_construction`` changed."""
    from sqlalchemy import text

    from agentrag.store.tenant_indexes import drop_tenant_indexes

    rebuild = (m, ef_c) != (collection.hnsw_m, collection.hnsw_ef_construction)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE agentrag.collections SET hnsw_m = :m, hnsw_ef_construction = :ef_c,"
                " hnsw_ef_search = :ef_s WHERE id = :id"
            ),
            {"m": m, "ef_c": ef_c, "ef_s": ef_s, "id": collection.id},
        )
        if rebuild:
            conn.execute(text(f"DROP INDEX IF EXISTS agentrag.{collection.hnsw_index}"))
            drop_tenant_indexes(conn, collection.id)
