"""The legs of a search: vector (pgvector HNSW) and lexical (BM25, or SQL full text), and their fusion.

The legs run on the search's connection and only read caches; :func:`lexical_stale` says when a
lexical cache must be built first, and :func:`prepare_lexical` builds it with no connection held.
A search that found the caches stale on every snapshot it took builds the BM25 indexes it lacks in
its last snapshot (:func:`snapshot_indexes`), so its lexical leg never reads an index of another
version than its snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from agentrag.errors import EmbeddingError
from agentrag.retrieval import clusters
from agentrag.retrieval.fusion import merge_by_score, relative_score, rrf
from agentrag.retrieval.lexical import (
    OverBudget,
    bm25_index,
    cached_bm25,
    lexical_leg,
    lexical_sql_leg,
    over_budget,
    snapshot_bm25,
)
from agentrag.retrieval.plan import SearchPlan
from agentrag.retrieval.predicate import Predicate
from agentrag.retrieval.scoped import (
    LegPlan,
    plan_collection,
    restore_sort,
    scope_bm25_leg,
    set_max_scan_tuples,
)
from agentrag.retrieval.sources import CollectionInfo, SearchSource, embed_query, vector_key
from agentrag.retrieval.tenant_walk import prepare_tenant_walk, tenant_leg, tenant_only
from agentrag.retrieval.vector import (
    DEFAULT_EF_SEARCH,
    MAX_EF_SEARCH,
    ROWS_PER_EF_STEP,
    configure_hnsw,
    exact_vector_leg,
    vector_leg,
)

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection

    from agentrag.embedders import Embedder
    from agentrag.retrieval.lexical import CachedBM25
    from agentrag.retrieval.scope_cache import ScopeCache

__all__ = [
    "CachesStale",
    "default_ef_search",
    "ef_search_for",
    "fuse_legs",
    "lexical_needs_sql",
    "lexical_ranked",
    "lexical_stale",
    "over_budget_reasons",
    "plan_legs",
    "plan_query_vectors",
    "prepare_lexical",
    "snapshot_indexes",
    "vector_ranked",
    "where_for",
]

_log = logging.getLogger("agentrag.retrieval")


def default_ef_search(leg_depth: int, indexed_rows: float) -> int:
    """The default ``hnsw.ef_search``: ``max(100, depth)``, and 100 more per 250,000 indexed rows
    past the first 250,000 (400 at 1M), at most 1000.

    Measured (benchmarks/RESULTS.md "Scale"): recall@10 against the exact scan 0.97 at 200k chunks
    with ef_search 100, and 0.968 at 1M with ef_search 400 (0.858 with 100); sizes in between are
    interpolated. ``indexed_rows`` is the index's ``pg_class.reltuples`` (set by the build and by
    ANALYZE / VACUUM; -1 when unknown, which counts as small).
    """
    by_size = -(-int(max(indexed_rows, 0)) // ROWS_PER_EF_STEP) * DEFAULT_EF_SEARCH
    return min(MAX_EF_SEARCH, max(DEFAULT_EF_SEARCH, leg_depth, by_size))


def ef_search_for(asked: int | None, collection: CollectionInfo, leg_depth: int) -> int:
    """``hnsw.ef_search`` for one collection's vector leg: the search's, else the collection's,
    else :func:`default_ef_search` (a smaller ef_search than depth turns the iterative scan on)."""
    if asked is not None:
        return asked
    if collection.hnsw_ef_search is not None:
        return collection.hnsw_ef_search
    return default_ef_search(leg_depth, collection.indexed_rows)


def where_for(predicate: Predicate, collection: CollectionInfo, leg: LegPlan | None = None) -> str:
    """The predicate's WHERE fragment for one collection (its grants, its private uploads); TRUE when
    the plan counted every document of the collection in the scope (``leg.whole``)."""
    if leg is not None and leg.whole:
        return "TRUE"
    return predicate.where(acl=collection.acl, private_documents=collection.private_documents)


class CachesStale(Exception):
    """The lexical caches are older than the collections just read (raised before any leg runs)."""

    def __init__(self, collections: list[CollectionInfo]) -> None:
        super().__init__("lexical caches are stale")
        self.collections = collections


def over_budget_reasons(
    store: SearchSource, colls: list[CollectionInfo], mode: str, *, current: bool
) -> list[str]:
    """Why the BM25 leg of this search runs lexical_sql: one reason per collection over the budget.

    ``current``: only marks at the collections' versions count (a changed collection is estimated
    again); otherwise any mark does (the caches were prepared for this search).
    """
    if mode == "lexical_sql":
        return []
    cache = store.bm25_cache
    marks = [(c, over_budget(cache, c.id, c.version if current else None)) for c in colls]
    return [mark.reason(c.name) for c, mark in marks if mark is not None]


def lexical_stale(store: SearchSource, colls: list[CollectionInfo], mode: str) -> bool:
    if mode == "lexical_sql" or over_budget_reasons(store, colls, mode, current=True):
        # read in the search's own snapshot, not from what this process synced: a search whose
        # snapshot began before another thread's first fill committed must not rank without it
        # (it found nothing: 1 of 200 simultaneous first queries in a fresh-clone CI)
        return any((c.tsv_version if c.tsv_version is not None else -1) < c.version for c in colls)
    cache = store.bm25_cache

    def stale(c: CollectionInfo) -> bool:
        if over_budget(cache, c.id, c.version) is not None:
            return False  # SQL full text: read in this snapshot
        entry = cached_bm25(cache, c.id, c.version)
        # the index must be of this snapshot's version: one built since by another thread holds
        # chunk ids this snapshot cannot see (a replaced document vanished from the leg)
        return entry is None or entry.version != c.version

    return any(stale(c) for c in colls)


def prepare_lexical(store: SearchSource, colls: list[CollectionInfo], mode: str) -> None:
    """Build the lexical caches of ``colls``; the caller holds no pooled connection.

    A collection whose BM25 index is over the memory budget makes the whole lexical leg SQL full
    text: every collection of the search then needs its tsvectors.
    """
    sql = mode == "lexical_sql"
    if not sql:
        for c in colls:
            if isinstance(bm25_index(store.bm25_cache, store.engine, c.id, c.version), OverBudget):
                sql = True
    if sql:
        for c in colls:
            store.ensure_text_index(c.id, c.version)


def snapshot_indexes(
    conn: Connection, store: SearchSource, colls: list[CollectionInfo], mode: str
) -> dict[int, CachedBM25]:
    """The BM25 index of each collection at the version ``conn``'s snapshot reads: the cached one
    when it is of that version, else built on ``conn`` (:func:`~agentrag.retrieval.lexical.snapshot_bm25`).

    Empty when the leg runs SQL full text (``lexical_sql``, or a collection over the memory budget,
    which a build here may find): SQL reads the snapshot itself.
    """
    if mode == "lexical_sql" or over_budget_reasons(store, colls, mode, current=False):
        return {}
    indexes: dict[int, CachedBM25] = {}
    for c in colls:
        built = snapshot_bm25(store.bm25_cache, conn, c.id, c.version)
        if isinstance(built, OverBudget):
            return {}
        indexes[c.id] = built
    return indexes


def lexical_needs_sql(
    store: SearchSource,
    colls: list[CollectionInfo],
    mode: str,
    predicate: Predicate,
    leg_plans: dict[int, LegPlan] | None,
) -> bool:
    """Whether :func:`lexical_ranked` would run SQL for this search: SQL full text (``lexical_sql``,
    or a collection over the BM25 budget), or a restricted collection whose scope's documents the
    plan did not read. Otherwise the leg is in-process arithmetic over the cached indexes."""
    if mode == "lexical_sql" or over_budget_reasons(store, colls, mode, current=False):
        return True
    for c in colls:
        leg = plan_of(leg_plans, c)
        if leg is not None and leg.lexical == "bm25-scope" and leg.documents is not None:
            continue
        if where_for(predicate, c, leg).strip() != "TRUE":
            return True
    return False


def lexical_ranked(
    conn: Connection,
    store: SearchSource,
    colls: list[CollectionInfo],
    mode: str,
    query: str,
    predicate: Predicate,
    depth: int,
    leg_plans: dict[int, LegPlan] | None = None,
    indexes: Mapping[int, CachedBM25] | None = None,
) -> list[tuple[str, float]]:
    """The lexical leg over every collection (BM25, or SQL full text for ``lexical_sql``), merged;
    each collection's candidates restricted by the predicate's fragment for it.

    Runs on ``conn`` only: the caches were brought up to date before the connection was taken
    (a write since then is seen by the next search, as if this one ran a moment earlier), or
    ``indexes`` were built in its snapshot (:func:`snapshot_indexes`).
    """
    per_collection: list[list[tuple[str, float]]] = []
    params = predicate.params
    if mode == "lexical_sql" or over_budget_reasons(store, colls, mode, current=False):
        per_collection = [
            lexical_sql_leg(
                conn,
                collection_id=c.id,
                query=query,
                where=where_for(predicate, c, plan_of(leg_plans, c)),
                params=params,
                depth=depth,
            )
            for c in colls
        ]
    else:
        for c in colls:
            cached = indexes.get(c.id) if indexes else cached_bm25(store.bm25_cache, c.id, None)
            if cached is None:  # the collection was deleted meanwhile: nothing of it to find
                per_collection.append([])
                continue
            leg = plan_of(leg_plans, c)
            where = where_for(predicate, c, leg)
            if leg is not None and leg.lexical == "bm25-scope":
                ranked = scope_bm25_leg(
                    conn,
                    cached,
                    collection_id=c.id,
                    query=query,
                    where=where,
                    params=params,
                    depth=depth,
                    documents=leg.documents,
                )
            else:
                ranked = lexical_leg(
                    conn, cached, collection_id=c.id, query=query, where=where, params=params, depth=depth
                )
            per_collection.append(ranked)
    return merge_by_score(per_collection, depth)


def plan_query_vectors(
    store: SearchSource,
    plan: SearchPlan,
    embedders: Mapping[str, Embedder],
    timings: dict[str, float],
    have: Mapping[tuple[str, str], np.ndarray] | None = None,
) -> tuple[dict[tuple[str, str], np.ndarray] | None, str | None]:
    """The query's vectors, one per distinct embedder of ``embedders`` (by :func:`vector_key`; those
    in ``have`` are kept), None for a lexical search; and, when a hybrid search lost its vector leg
    to a failing embedder, why (the error's type only: a provider's message may echo the query). A
    vector search raises the EmbeddingError."""
    if plan.mode not in ("vector", "hybrid"):
        return None, None
    vectors = dict(have or {})
    try:
        for embedder in embedders.values():
            key = vector_key(embedder)
            if key not in vectors:
                vectors[key], took = embed_query(store, plan.query, embedder)
                timings["embed"] = timings.get("embed", 0.0) + took
    except EmbeddingError as exc:
        if plan.mode == "vector":
            raise
        _log.warning("hybrid search degraded to lexical only: the embedder failed (%s)", type(exc).__name__)
        return None, (
            f"vector leg unavailable, results are lexical (BM25) only: embedder failed ({type(exc).__name__})"
        )
    return vectors, None


def plan_of(leg_plans: dict[int, LegPlan] | None, c: CollectionInfo) -> LegPlan | None:
    return None if leg_plans is None else leg_plans.get(c.id)


def plan_legs(
    conn: Connection,
    plan: SearchPlan,
    colls: list[CollectionInfo],
    *,
    count: bool,
    cache: ScopeCache | None = None,
) -> dict[int, LegPlan]:
    """Each collection's :class:`~agentrag.retrieval.scoped.LegPlan` (``count``: a vector or BM25 leg
    will run, so a scope's size matters; ``cache``: the store's counts of scopes by collection state);
    a large tenant's own HNSW index replaces the collection's
    (:func:`~agentrag.retrieval.tenant_walk.tenant_leg`)."""
    planned = {
        c.id: plan_collection(
            conn,
            name=c.name,
            collection_id=c.id,
            indexed_rows=c.indexed_rows,
            where=where_for(plan.predicate, c),
            params=plan.params,
            depth=plan.leg_depth,
            ef_search=ef_search_for(plan.ef_search, c, plan.leg_depth),
            count=count,
            cache=cache,
            versions=(c.version, c.acl_version),
        )
        for c in colls
    }
    by_id = {c.id: c for c in colls}
    return {
        cid: with_clusters(tenant_leg(conn, leg, plan.predicate.scope, cid, plan.leg_depth), by_id[cid], plan)
        for cid, leg in planned.items()
    }


def with_clusters(leg: LegPlan, c: CollectionInfo, plan: SearchPlan) -> LegPlan:
    """An exact scan of a fitted collection's scope as a read of its nearest clusters
    (:mod:`agentrag.retrieval.clusters`) when the scope is large enough for it to pay. A large exact
    scan of a collection ``Store.optimize`` would fit but has not says so in its reason (``explain``)."""
    if not clusters.ENABLED or leg.vector != "exact" or leg.documents is None or leg.scope_rows is None:
        return leg
    if c.clusters_fit is None or not c.clusters_k:
        return _with_optimize_hint(leg, leg.scope_rows, c, plan)
    k = int(c.clusters_k)
    # the share of the HNSW index's rows, else (no index yet) of the chunks at the fit
    share = (
        leg.share
        if leg.share is not None
        else leg.scope_rows / max(c.clusters_chunks or 0, leg.scope_rows, 1)
    )
    p = clusters.probes(k, share)
    if not clusters.worth_it(k, p, leg.scope_rows, plan.leg_depth):
        return leg
    why = f"{leg.reason}; the {p} of {k} clusters nearest the query read (the collection's fit)"
    return replace(leg, vector="clusters", probes=p, clusters=k, fit=c.clusters_fit, reason=why)


def _with_optimize_hint(leg: LegPlan, rows: int, c: CollectionInfo, plan: SearchPlan) -> LegPlan:
    """``leg`` (an exact scan of ``rows`` chunks in an unfitted collection), its reason naming
    ``Store.optimize`` when a fit of ``c`` would read this scope's nearest clusters instead (a cosine
    collection large enough by its index). Judged at the largest K a fit takes: the fewest probes
    for a share, where a cluster read pays least; a fit of any size that pays there pays too."""
    if c.distance != "cosine" or c.indexed_rows < clusters.MIN_FIT_CHUNKS:
        return leg
    k = clusters.MAX_K
    share = leg.share if leg.share is not None else rows / c.indexed_rows
    if not clusters.worth_it(k, clusters.probes(k, share), rows, plan.leg_depth):
        return leg
    hint = f"Store.optimize({c.name!r}) would read only the scope's rows in the clusters nearest the query"
    return replace(leg, reason=f"{leg.reason}; {hint}")


def vector_ranked(
    conn: Connection,
    plan: SearchPlan,
    colls: list[CollectionInfo],
    query_vectors: Mapping[int, np.ndarray],
    leg_plans: dict[int, LegPlan] | None = None,
    before_statement: Callable[[], None] | None = None,
) -> list[tuple[str, float]]:
    """The vector leg over every collection (each with its embedder's query vector, ``query_vectors``
    by collection id), merged. ``before_statement`` is called once, just before
    the first collection's ranking statement is sent (the HNSW settings already are): a hybrid
    search starts its BM25 leg there, so that leg's Python does not hold the GIL while this thread
    still prepares the statement."""
    per_collection = []
    for c in colls:
        leg = plan_of(leg_plans, c)
        if leg is not None and (leg.exact or leg.vector == "clusters"):
            if before_statement is not None:
                before_statement()
                before_statement = None
            exact = partial(
                exact_vector_leg,
                conn,
                collection_id=c.id,
                dimensions=c.dimensions,
                distance=c.distance,
                query_vector=query_vectors[c.id],
                where=where_for(plan.predicate, c, leg),
                params=plan.params,
                depth=plan.leg_depth,
                documents=leg.documents,
                vector_type=c.vector_type,
            )
            if leg.exact or leg_plans is None:
                per_collection.append(exact())
                continue
            rows, fell_back = clusters.cluster_vector_leg(
                conn,
                collection_id=c.id,
                dimensions=c.dimensions,
                distance=c.distance,
                query_vector=query_vectors[c.id],
                depth=plan.leg_depth,
                documents=leg.documents or (),
                vector_type=c.vector_type,
                fit=int(leg.fit or 0),
                p=int(leg.probes or 0),
                exact=exact,
            )
            if fell_back:  # on the plan: the clusters came back short (or went), the scope was scanned whole
                why = f"{leg.reason}; the clusters read came back short: re-run exactly"
                leg_plans[c.id] = replace(leg, vector="exact", reason=why)
            per_collection.append(rows)
            continue
        ef = ef_search_for(plan.ef_search, c, plan.leg_depth)
        where = where_for(plan.predicate, c, leg)
        configure_hnsw(conn, ef_search=ef, iterative=where != "TRUE" or ef < plan.leg_depth)
        own_index = leg is not None and leg.vector == "hnsw-tenant"
        if leg is not None and leg.max_scan_tuples is not None:
            if own_index:
                prepare_tenant_walk(conn, leg.max_scan_tuples)
            else:
                set_max_scan_tuples(conn, leg.max_scan_tuples)
        if before_statement is not None:
            before_statement()
            before_statement = None
        per_collection.append(
            vector_leg(
                conn,
                collection_id=c.id,
                dimensions=c.dimensions,
                distance=c.distance,
                query_vector=query_vectors[c.id],
                where=where,
                params=plan.params,
                depth=plan.leg_depth,
                need=plan.top_k,
                documents=leg.documents
                if leg is not None and leg.vector in ("hnsw-iterative", "hnsw-tenant")
                else None,
                tenant=plan.predicate.scope.tenant if own_index and plan.predicate.scope else None,
                tenant_only=tenant_only(where),
                vector_type=c.vector_type,
            )
        )
        if leg is not None and leg.max_scan_tuples is not None:
            restore_sort(conn)
    return merge_by_score(per_collection, plan.leg_depth)


def fuse_legs(
    plan: SearchPlan, used_mode: str, vector: list[tuple[str, float]], lexical: list[tuple[str, float]]
) -> list[tuple[str, float]]:
    """The mode's ranking, before ``min_score`` and the cut at ``top_k``."""
    if used_mode == "hybrid" and plan.fusion == "relative_score":
        return relative_score(vector, lexical, vector_weight=plan.vector_weight)
    if used_mode == "hybrid":
        return rrf([[i for i, _ in vector], [i for i, _ in lexical]], k=plan.rrf_k)
    return vector if used_mode == "vector" else lexical
