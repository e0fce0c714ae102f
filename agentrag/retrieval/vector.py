"""The vector leg: pgvector HNSW nearest neighbours of the query embedding, scopes and filters in SQL.

Each collection has its own HNSW index, a *partial expression* index made by
:meth:`agentrag.store.store.Store.ensure_vector_index`::

    CREATE INDEX chunks_hnsw_<ID> ON agentrag.chunks
        USING hnsw ((embedding::vector(<DIMS>)) <opclass>) WHERE collection_id = <ID>

(a ``halfvec`` collection's: ``(embedding_half::halfvec(<DIMS>)) halfvec_<...>_ops``, see
:data:`agentrag.retrieval.catalog.VECTOR_TYPES`). The planner only uses it when the query repeats
the indexed expression (``c.embedding::vector(DIMS)``), orders by the collection's distance
operator and states the partial-index predicate with the same literal (``c.collection_id = ID``).
``ID`` and ``DIMS`` are integers read from ``agentrag.collections`` and formatted with ``int()``,
the operator comes from :data:`agentrag.retrieval.catalog.DISTANCES`: no caller string is ever
formatted into SQL.

Search settings are transaction-local (``set_config(..., true)``):

* ``hnsw.ef_search``: the candidate list size (the search's, else the collection's, else
  ``max(100, depth)`` raised by 100 per 250,000 indexed rows past the first 250,000; at most 1000).
* ``hnsw.iterative_scan = relaxed_order`` when a scope or filter narrows the rows (or
  ``ef_search < depth``), so the index keeps scanning until ``depth`` rows pass the WHERE
  clause. Relaxed order may return rows slightly out of order, so the rows are re-sorted by
  distance outside a ``MATERIALIZED`` CTE, as the pgvector documentation recommends.

An iterative scan still stops after ``hnsw.max_scan_tuples`` (pgvector default 20,000) visited
tuples, and a walk's candidates may be crowded by the dead versions of replaced chunks until
autovacuum runs; when a scan comes back with fewer rows than the search needs, the leg re-runs
the query exactly (ordered by ``distance + 0``, which the index cannot serve), so a filtered
query returns ``k`` results whenever ``k`` exist.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrag.errors import InvalidInputError
from agentrag.retrieval.catalog import DISTANCES, vector_expr

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection

__all__ = [
    "DEFAULT_EF_SEARCH",
    "DEFAULT_HNSW_EF_CONSTRUCTION",
    "DEFAULT_HNSW_M",
    "MAX_EF_SEARCH",
    "ROWS_PER_EF_STEP",
    "configure_hnsw",
    "exact_vector_leg",
    "hnsw_parameters",
    "joined_ids",
    "vector_leg",
    "vector_sql",
]

DEFAULT_EF_SEARCH = 100
#: the default ef_search grows by DEFAULT_EF_SEARCH per this many indexed rows (400 at 1M; see
#: agentrag.retrieval.legs.default_ef_search)
ROWS_PER_EF_STEP = 250_000
MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search
#: pgvector's own defaults for an HNSW build: links per node, and the candidate list while building
DEFAULT_HNSW_M = 16
DEFAULT_HNSW_EF_CONSTRUCTION = 64


def _bounded(name: str, value: object, low: int, high: int) -> int:
    if type(value) is not int:  # True / 1.0 / "16" are refused, not coerced
        raise InvalidInputError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    if not low <= value <= high:
        raise InvalidInputError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def hnsw_parameters(m: object, ef_construction: object, ef_search: object) -> tuple[int, int, int | None]:
    """Validated ``(m, ef_construction, ef_search)`` within pgvector's bounds (InvalidInputError).

    ``m`` 2..100, ``ef_construction`` 4..1000 and at least ``2 * m`` (pgvector refuses less),
    ``ef_search`` 1..1000 or None.
    """
    m_ = _bounded("hnsw_m", m, 2, 100)
    ef_c = _bounded("hnsw_ef_construction", ef_construction, 4, 1000)
    if ef_c < 2 * m_:
        raise InvalidInputError(f"hnsw_ef_construction must be at least 2 * hnsw_m ({2 * m_}), got {ef_c}")
    ef_s = None if ef_search is None else _bounded("ef_search", ef_search, 1, MAX_EF_SEARCH)
    return m_, ef_c, ef_s


def joined_ids(documents: tuple[str, ...] | None) -> str:
    """``:v_docs`` of an exact scan by document ids (:func:`vector_sql`): the ids joined by commas.
    A list bound there instead would be read as one '{a,b}' string and lose its first and last id."""
    return ",".join(documents or ())


def vector_sql(
    collection_id: int,
    dimensions: int,
    distance: str,
    where: str = "TRUE",
    *,
    exact: bool = False,
    by_documents: bool = False,
    tenant: bool = False,
    vector_type: str = "vector",
) -> str:
    """The vector leg's SQL for one collection (parameters ``:qvec`` and ``:depth`` plus ``where``'s).

    ``where`` is a boolean expression over the documents alias ``d`` made by
    :func:`~agentrag.retrieval.filters.compile_filters` / :func:`~agentrag.retrieval.scope_sql.compile_scope`
    (our own text only). Returns rows ``(id, distance, score)`` nearest first, ``score`` being the
    similarity (see ``DISTANCES``). With ``exact``, the ORDER BY cannot use the index (exact scan: the
    rows' distances behind an ``OFFSET 0`` fence, ordered by ``distance + 0``).
    With ``by_documents``, ``where`` is replaced by the scope's document ids (``:v_docs``, read
    under it by the scope planner in the same snapshot): no documents join, one hashed array test
    per row (an iterative HNSW walk under a 16 % tenant: 43 ms instead of 90). With ``tenant``, the
    rows also state ``c.tenant_id = :t_tenant``: the walk of a tenant's own partial index
    (:mod:`agentrag.retrieval.tenant_walk`), with ``where`` TRUE when the scope is the tenant alone.
    ``vector_type``: the collection's storage (``halfvec``: its float16 column, the query cast to it).
    """
    _opclass, op, similarity = DISTANCES[distance]
    cid, dims = int(collection_id), int(dimensions)
    stored = vector_expr(dims, vector_type, "c.")
    expr = f"{stored} {op} CAST(:qvec AS {vector_type}({dims}))"
    order = expr
    # an exact scan states the documents' collection (it is the chunk's): the planner reaches a scope's
    # documents through their (collection_id, tenant_id, ...) index instead of scanning every
    # collection's; a walk does not (it made the planner leave the HNSW walk for a sort under grants)
    same = f" AND d.collection_id = {cid}" if exact else ""
    join = (
        ""
        if where.strip() == "TRUE" or by_documents
        else f"\n    JOIN agentrag.documents d ON d.id = c.document_id{same}"
    )
    if by_documents:
        # an exact scan finds its rows through chunks_document_c (migration 0047): byte comparisons
        # instead of the database collation's for each of the scope's ids (a 10 % principal of 100k
        # chunks, 1,000 ids: 1 ms of 11 less), and takes the ids as one comma-joined string
        # (document ids are "doc_" + hex, store.writes.document_id): psycopg quotes a list element by
        # element (1,000 ids: 0.9 ms). A walk tests the ids as a hashed array, as before.
        if exact:
            where = "c.document_id COLLATE \"C\" = ANY(string_to_array(:v_docs, ','))"
        else:
            where = "c.document_id = ANY(CAST(:v_docs AS text[]))"
    own = " AND c.tenant_id = :t_tenant" if tenant else ""
    # an exact scan by document ids needs no collection: the ids were read under it and a chunk is in
    # its document's collection; stated, PostgreSQL ANDs the chunks_document bitmap with one of the
    # collection's every chunk (a 10 % principal of 100k chunks: 0.5 ms less in 87 of 150 paired runs)
    within = "" if exact and by_documents else f"c.collection_id = {cid}{own} AND "
    rows = f"SELECT c.id, {expr} AS distance\n    FROM agentrag.chunks c{join}\n    WHERE {within}({where})"
    if exact:
        # each row's distance computed once: ``ORDER BY (expr) + 0`` beside ``expr AS distance``
        # computes it twice; behind the OFFSET 0 fence the sort key is the computed column
        # (a 10 % principal's 10,000 rows: 0.5 ms less in 113 of 150 paired runs)
        rows = f"SELECT id, distance FROM (\n    {rows}\n    OFFSET 0) s\n    ORDER BY distance + 0"
    else:
        rows += f"\n    ORDER BY {order}"
    return (
        "WITH hits AS MATERIALIZED (\n"
        f"    {rows}\n"
        "    LIMIT :depth\n"
        ")\n"
        f"SELECT id, distance, {similarity.format(d='distance')} AS score\n"
        'FROM hits ORDER BY distance, id COLLATE "C"'
    )


def configure_hnsw(conn: Connection, *, ef_search: int, iterative: bool) -> None:
    """Set ``hnsw.ef_search`` (and the relaxed iterative scan) for the current transaction only."""
    from sqlalchemy import text

    conn.execute(
        text(
            "SELECT set_config('hnsw.ef_search', :ef, true), set_config('hnsw.iterative_scan', :scan, true)"
        ),
        {"ef": str(int(ef_search)), "scan": "relaxed_order" if iterative else "off"},
    )


def vector_leg(
    conn: Connection,
    *,
    collection_id: int,
    dimensions: int,
    distance: str,
    query_vector: np.ndarray,
    where: str,
    params: dict[str, Any],
    depth: int,
    need: int,
    documents: tuple[str, ...] | None = None,
    tenant: str | None = None,
    tenant_only: bool = False,
    vector_type: str = "vector",
) -> list[tuple[str, float]]:
    """``[(chunk_id, similarity), ...]`` nearest first, at most ``depth``, for one collection.

    ``need`` is how many rows the caller must have when that many exist: a filtered HNSW scan
    returning fewer is re-run exactly. ``documents``: the scope's document ids, read under
    ``where`` in this transaction's snapshot, tested instead of ``where`` (see :func:`vector_sql`).
    ``tenant``: walk that tenant's own index (``where`` holds its equality; ``tenant_only``: and
    nothing else, so the walk tests nothing more). ``vector_type``: the collection's storage.
    """
    from sqlalchemy import text

    by_documents = documents is not None
    bound = {**params, "qvec": query_vector, "depth": int(depth)}
    if by_documents:
        bound = {"qvec": query_vector, "depth": int(depth), "v_docs": list(documents or ())}
    if tenant is None:
        sql = vector_sql(
            collection_id, dimensions, distance, where, by_documents=by_documents, vector_type=vector_type
        )
    else:
        walk_where = "TRUE" if tenant_only else where
        walk_by_documents = by_documents and not tenant_only
        sql = vector_sql(
            collection_id,
            dimensions,
            distance,
            walk_where,
            by_documents=walk_by_documents,
            tenant=True,
            vector_type=vector_type,
        )
        bound = {**bound, "t_tenant": tenant}
    rows = conn.execute(text(sql), bound).all()
    # short, scoped or not: a filter left too few of the walk's rows, or the walk met the dead versions
    # of replaced chunks (before autovacuum) in its candidates; an exact scan returns what exists
    if len(rows) < min(need, depth):
        return exact_vector_leg(
            conn,
            collection_id=collection_id,
            dimensions=dimensions,
            distance=distance,
            query_vector=query_vector,
            where=where,
            params=params,
            depth=depth,
            documents=documents,
            vector_type=vector_type,
        )
    return [(row.id, float(row.score)) for row in rows]


def exact_vector_leg(
    conn: Connection,
    *,
    collection_id: int,
    dimensions: int,
    distance: str,
    query_vector: np.ndarray,
    where: str,
    params: dict[str, Any],
    depth: int,
    documents: tuple[str, ...] | None = None,
    vector_type: str = "vector",
) -> list[tuple[str, float]]:
    """The vector leg as an exact scan of the scope's rows: ``[(chunk_id, similarity), ...]``.

    ``documents``: the scope's document ids as the plan read them under ``where`` (this transaction's
    snapshot): the chunks are read by ``document_id`` with no documents join and the predicate is not
    evaluated again (a principal seeing 10 % of 100k chunks: 15 ms either way when quiet; at load 7 the
    join's plan 69 ms, the ids' 37).
    """
    from sqlalchemy import text

    by_documents = documents is not None
    sql = vector_sql(
        collection_id,
        dimensions,
        distance,
        where,
        exact=True,
        by_documents=by_documents,
        vector_type=vector_type,
    )
    bound = {"qvec": query_vector, "depth": int(depth)}
    bound = {**bound, "v_docs": joined_ids(documents)} if by_documents else {**params, **bound}
    rows = conn.execute(text(sql), bound).all()
    return [(row.id, float(row.score)) for row in rows]
