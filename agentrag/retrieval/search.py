"""``search``: hybrid retrieval over one or more collections (pgvector + BM25, fused).

Modes
    ``"hybrid"`` (default): the vector leg and the BM25 leg each find ``depth`` candidates,
    fused by their min-max normalised scores weighted ``vector_weight`` / ``1 - vector_weight``
    (``fusion="relative_score"``, the default, weight 0.5; ``Hit.score`` is the fused score in
    [0, 1], shown against the legs' natural floor: 1 for the best of both legs, the weakest
    candidates what they are worth against the best of the legs that found them)
    or, with ``fusion="rrf"``, by Reciprocal Rank Fusion (``rrf_k``, default 60; ``Hit.score``
    is the RRF score). See :mod:`agentrag.retrieval.fusion` for why.
    ``"vector"``: pgvector HNSW only; ``Hit.score`` is the similarity (cosine: ``1 - distance``).
    ``"lexical"``: in-memory BM25 only; ``Hit.score`` is the BM25 score.
    ``"lexical_sql"``: PostgreSQL full text (``to_tsvector`` expression index, OR query,
    ``ts_rank(..., 1)``), for collections too large for an in-memory index; ``Hit.score`` is
    the ``ts_rank`` score.

Scopes, grants and filters are compiled to one predicate of bound parameters and enforced inside
the SQL of every leg (:mod:`agentrag.retrieval.predicate`): a ranked result is never filtered in
Python, so ``top_k`` results come back whenever that many match. A collection created with
``acl=True`` returns only documents granted to the scope's principal (ScopeError without one). A collection
created with ``scoped=True`` refuses a search without a scope (ScopeError) unless the caller
passes ``Scope.every()``; a scope given for an unscoped collection is applied all the same
(documents ingested without a tenant simply do not match a tenant scope).

The query is embedded first, before a connection is taken (no connection waits on a model or
provider call); then the collections are read, and the legs and the fetch of the hits run, in
one transaction on one pooled connection, so the ``hnsw.*`` settings stay local to it.
Embedding the query while the lexical leg runs was measured and dropped: on two cores torch's
forward pass and the BM25 scoring slow each other down more than the overlap saves.

Several collections
    Each collection is searched by each leg on its own (its own HNSW partial index, its own BM25
    index), then, per leg, the per-collection lists are merged by score: vector similarities are
    comparable because every collection must use the store embedder's model (and, in one search,
    the same distance metric); BM25 scores are merged as they are, as multi-index BM25 engines
    do (each collection's own term statistics), and ts_rank scores need no statistics at all.
    In hybrid mode the two merged legs are then fused. Ties anywhere go to the smaller
    chunk id, so results are deterministic.

BM25 memory budget
    A collection whose in-memory BM25 index would exceed the store's ``bm25_memory_budget`` (default
    4 GiB) has no BM25 index: the lexical leg of a ``"lexical"`` or ``"hybrid"`` search over it runs
    ``lexical_sql`` instead, for every collection of that search (see
    :mod:`agentrag.retrieval.lexical`). ``lexical_fallback`` says so (and a warning repeats it); a
    ``"lexical"`` search reports ``used_mode="lexical_sql"``.

Time budget
    Under a run's deadline (``Budget(max_seconds=...)``, :mod:`agentrag.llm.deadline`) the
    transaction starts with ``set_config('statement_timeout', <ms left>, true)`` (``SET LOCAL``,
    the milliseconds a bound parameter), set again before each statement to the time left at its
    start (:mod:`agentrag.retrieval.statement_budget`): PostgreSQL cancels a statement still
    running when the time is up (a lock wait included), and the cancel is raised as
    :class:`~agentrag.errors.BudgetExceededError` (the service answers 504); a deadline already
    past raises before any SQL. A ``statement_timeout`` of the connection's own (its role's, its
    database's, its URL's ``options``) is never raised: when it is the shorter and fires, the error
    is :class:`~agentrag.errors.StatementTimeoutError`, which names the setting to raise. The building
    of a cold in-memory BM25 index runs outside that transaction and is not bounded (a search's last
    snapshot's own build, under :func:`~agentrag.retrieval.legs.snapshot_indexes`, is).

Degradation
    When the embedder fails (:class:`~agentrag.errors.EmbeddingError`: the model cannot load,
    the provider is down), a hybrid search runs its lexical leg alone, returns
    ``used_mode="lexical"`` with ``degraded`` set and a warning, and logs a warning (without the
    query text). A vector search raises the error. An embedder whose model or dimensions differ
    from a collection's raises :class:`~agentrag.errors.EmbeddingMismatchError` (vector, hybrid);
    a different model *version* only sets ``model_version_match=False`` with a warning.

``min_score`` applies to the final score of the mode that ran (``used_mode``), before the cut
at ``top_k``: for hybrid, the score shown (relative score fusion's mapped value, which is at
least min-max fusion's, so a threshold keeps the same hits as with the 0-based values or more).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from agentrag.errors import EmbeddingError, EmbeddingMismatchError, InvalidInputError
from agentrag.hits import Hit
from agentrag.llm.deadline import budget_exceeded
from agentrag.retrieval import overlap
from agentrag.retrieval.dberrors import guarded
from agentrag.retrieval.empty import empty_reason
from agentrag.retrieval.legs import (
    CachesStale,
    default_ef_search,
    fuse_legs,
    lexical_needs_sql,
    lexical_ranked,
    lexical_stale,
    over_budget_reasons,
    plan_legs,
    plan_query_vectors,
    prepare_lexical,
    snapshot_indexes,
    vector_ranked,
    where_for,
)
from agentrag.retrieval.plan import MAX_DEPTH, MAX_QUERY_CHARS, MODES, SearchPlan, make_plan, preprocess_query
from agentrag.retrieval.predicate import check_owners, check_principal, grant_of
from agentrag.retrieval.result import SearchResult
from agentrag.retrieval.scope_sql import check_scope
from agentrag.retrieval.scoped import LegPlan
from agentrag.retrieval.sources import (
    CollectionInfo,
    SearchSource,
    check_embedder,
    load_collections,
    mixed_models,
    vector_key,
)
from agentrag.retrieval.statement_budget import StatementTimeout, bounded, cancelled_by
from agentrag.scope import Scope

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection

    from agentrag.embedders import Embedder
    from agentrag.retrieval.filters import Filters  # pydantic: imported by a search with filters only
    from agentrag.retrieval.lexical import CachedBM25

__all__ = [
    "MAX_DEPTH",
    "MAX_QUERY_CHARS",
    "MODES",
    "SearchSource",
    "asearch",
    "default_ef_search",
    "preprocess_query",
    "search",
]

_log = logging.getLogger("agentrag.retrieval")


_FETCH_SQL = """
SELECT c.id, c.document_id, c.text, c.start_char, c.end_char, c.chunk_index, c.page, c.section,
       c.locator, c.sha256 AS chunk_sha256, d.source, d.original_filename, d.sha256 AS source_sha256,
       d.classification, d.metadata, d.grants,
       (SELECT r.revision FROM agentrag.document_revisions r
        WHERE r.document_id = d.id AND r.valid_to IS NULL) AS revision,
       k.name AS collection, k.embed_model, k.embed_version
FROM agentrag.chunks c
JOIN agentrag.documents d ON d.id = c.document_id
JOIN agentrag.collections k ON k.id = c.collection_id
WHERE c.id = ANY(CAST(:ids AS text[]))
"""


@dataclass(slots=True)
class _Ranked:
    """What the transaction found: the legs' rankings, the fused cut and the hits' rows."""

    used_mode: str
    vector: list[tuple[str, float]]
    lexical: list[tuple[str, float]]
    final: list[tuple[str, float]]
    rows: dict[str, Any]
    version_warnings: list[str]
    mixed_models: str | None
    lexical_fallback: str | None
    empty_reason: str | None
    leg_plans: list[LegPlan]
    left_out: str | None = None  # hits the fetch's re-test of the predicate refused (never expected)


class VectorsStale(Exception):
    """The query was not embedded with the embedder of every collection (a collection this store had
    not seen, or one re-embedded since): embed it with ``embedders`` and search again."""

    def __init__(self, embedders: dict[str, Embedder]) -> None:
        super().__init__("query vectors of other embedders are needed")
        self.embedders = embedders


def _rank(
    conn: Connection,
    store: SearchSource,
    plan: SearchPlan,
    used_mode: str,
    query_vectors: dict[tuple[str, str], np.ndarray] | None,
    *,
    caches_ready: bool,
    degraded: str | None,
    timings: dict[str, float],
) -> _Ranked:
    """Everything a search does in its one transaction on ``conn``.

    Raises CachesStale, before any leg runs, when a lexical cache must be built first (and
    ``caches_ready`` is false); VectorsStale when a collection needs a query vector of an embedder
    the query was not embedded with.
    """
    colls = load_collections(conn, plan.names)
    check_scope(plan.scope, [c.name for c in colls if c.scoped])
    check_owners(plan.scope, [(c.name, c.tenant) for c in colls])
    check_principal(plan.scope, [c.name for c in colls if c.acl])
    indexes = None  # BM25 indexes built in this snapshot (its last: writes raced every one before)
    if used_mode != "vector":
        if not caches_ready and lexical_stale(store, colls, plan.mode):
            raise CachesStale(colls)
        if caches_ready and used_mode != "lexical_sql":
            indexes = snapshot_indexes(conn, store, colls, plan.mode)
    version_warnings: list[str] = []
    by_collection: dict[int, np.ndarray] | None = None
    mixed: str | None = None
    if plan.mode in ("vector", "hybrid"):
        embedders = store.query_embedders(plan.names, colls)  # each collection's own
        if query_vectors is not None and any(vector_key(e) not in query_vectors for e in embedders.values()):
            raise VectorsStale(embedders)
        try:
            version_warnings = check_embedder(embedders, colls)  # EmbeddingMismatchError
        except EmbeddingMismatchError:
            raise
        except EmbeddingError:  # it cannot say its dimensions: the search already degraded
            pass
        if query_vectors is not None:
            by_collection = {c.id: query_vectors[vector_key(embedders[c.name])] for c in colls}
            mixed = mixed_models(embedders, colls)

    bm25 = used_mode in ("lexical", "hybrid")  # (an over-budget collection's leg runs lexical_sql)
    leg_plans = plan_legs(conn, plan, colls, count=by_collection is not None or bm25, cache=store.scope_cache)
    lexical_fallback: str | None = None
    if used_mode in ("lexical", "hybrid", "lexical_sql"):
        # A collection over the BM25 memory budget: the leg is SQL full text, on record.
        lexical_fallback = "; ".join(over_budget_reasons(store, colls, plan.mode, current=False)) or None
        if lexical_fallback is not None and used_mode == "lexical":
            used_mode = "lexical_sql"
    vector, lexical = _run_legs(
        conn, store, plan, colls, used_mode, by_collection, leg_plans, timings, indexes
    )

    t = time.perf_counter()
    candidates = fuse_legs(plan, used_mode, vector, lexical)
    final = candidates
    if plan.min_score is not None:
        final = [(i, s) for i, s in final if s >= plan.min_score]
    final = final[: plan.top_k]
    timings["fuse"] = (time.perf_counter() - t) * 1000

    t = time.perf_counter()
    retest = _retest(plan, colls, leg_plans)
    rows = _fetch(conn, [i for i, _ in final], retest, plan.params)
    left_out = _refused(store, rows) if retest else None
    timings["fetch"] = (time.perf_counter() - t) * 1000
    why: str | None = None
    if not rows:  # only an empty result pays for the counts that explain it
        why = empty_reason(
            conn,
            collections=colls,
            predicate=plan.predicate,
            used_mode=used_mode,
            degraded=degraded,
            lexical_candidates=len(lexical),
            min_score=plan.min_score,
            candidates=candidates,
        )
    sql = used_mode == "lexical_sql" or lexical_fallback is not None
    lexical_ran = ("sql" if sql else "bm25") if used_mode != "vector" else None
    legs = [p.ran(vector=by_collection is not None, lexical=lexical_ran) for p in leg_plans.values()]
    return _Ranked(
        used_mode,
        vector,
        lexical,
        final,
        rows,
        version_warnings,
        mixed,
        lexical_fallback,
        why,
        legs,
        left_out,
    )


def _run_legs(
    conn: Connection,
    store: SearchSource,
    plan: SearchPlan,
    colls: list[CollectionInfo],
    used_mode: str,
    query_vectors: dict[int, np.ndarray] | None,
    leg_plans: dict[int, LegPlan],
    timings: dict[str, float],
    indexes: dict[int, CachedBM25] | None = None,
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """The vector and lexical rankings. A hybrid search whose BM25 leg needs no SQL ranks it on
    another thread while the vector statement runs (:mod:`agentrag.retrieval.overlap`), started
    just before that statement is sent, unless the process is busy; each leg's timing is its own,
    so the two overlap."""

    def lexical_leg(on: Connection) -> list[tuple[str, float]]:
        return lexical_ranked(
            on, store, colls, plan.mode, plan.query, plan.predicate, plan.leg_depth, leg_plans, indexes
        )

    lexical_runs = used_mode in ("lexical", "hybrid", "lexical_sql")
    jobs: list[overlap.LexicalJob] = []
    start_lexical = None
    vector: list[tuple[str, float]] = []
    lexical: list[tuple[str, float]] = []
    if (
        overlap.beside()
        and lexical_runs
        and query_vectors is not None
        and not lexical_needs_sql(store, colls, plan.mode, plan.predicate, leg_plans)
    ):
        off_thread = functools.partial(lexical_leg, cast("Connection", overlap.NoConnection()))

        def start_lexical() -> None:
            jobs.append(overlap.LexicalJob(off_thread))

    if query_vectors is not None:
        t = time.perf_counter()
        vector = vector_ranked(conn, plan, colls, query_vectors, leg_plans, before_statement=start_lexical)
        timings["vector"] = (time.perf_counter() - t) * 1000
    if jobs:
        lexical, timings["lexical"] = jobs[0].result()
    elif lexical_runs:
        t = time.perf_counter()
        lexical = lexical_leg(conn)
        timings["lexical"] = (time.perf_counter() - t) * 1000
    return vector, lexical


_SNAPSHOT_ATTEMPTS = 4  # snapshots a search takes at most while writes move its lexical caches


def _retest(plan: SearchPlan, colls: list[CollectionInfo], leg_plans: dict[int, LegPlan]) -> str | None:
    """The predicate of each collection whose legs ran on a cached scope (``LegPlan.cached``), for the
    fetch to test again on the hits' documents (None: no leg did): a row the scope may not read is
    never returned, even from a cache entry gone wrong."""
    parts = [
        f"(c.collection_id <> {int(c.id)} OR ({where_for(plan.predicate, c)}))"
        for c in colls
        if (leg := leg_plans.get(c.id)) is not None and leg.cached
    ]
    return " AND ".join(parts) if parts else None


def _fetch(
    conn: Connection, ids: list[str], retest: str | None = None, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The hits' text and provenance by chunk id (a chunk deleted since ranking is missing); with
    ``retest`` (:func:`_retest`), each row's ``visible``: whether its document passes the predicate."""
    if not ids:
        return {}
    from sqlalchemy import text

    sql, bound = _FETCH_SQL, {"ids": ids}
    if retest is not None:
        sql = sql.replace("\nFROM agentrag.chunks c", f", ({retest}) AS visible\nFROM agentrag.chunks c", 1)
        bound = {**(params or {}), **bound}
    return {row.id: row for row in conn.execute(text(sql), bound).all()}


def _refused(store: SearchSource, rows: dict[str, Any]) -> str | None:
    """Drop the rows the fetch's re-test refused (a cached scope out of date: never expected, since every
    writer bumps the collection's counters), forget the store's cached scopes, and say so."""
    refused = [chunk_id for chunk_id, row in rows.items() if not row.visible]
    if not refused:
        return None
    for chunk_id in refused:
        del rows[chunk_id]
    store.scope_cache.clear()
    _log.warning("%d hit(s) failed the scope's predicate on fetch: cached scopes dropped", len(refused))
    return f"{len(refused)} hit(s) left out: outside the scope (a cached scope count was out of date)"


def _hits(ranked: _Ranked, scope: Scope | None) -> tuple[Hit, ...]:
    vector_at = {chunk_id: (rank, score) for rank, (chunk_id, score) in enumerate(ranked.vector, start=1)}
    lexical_at = {chunk_id: (rank, score) for rank, (chunk_id, score) in enumerate(ranked.lexical, start=1)}
    hits: list[Hit] = []
    for chunk_id, score in ranked.final:
        row = ranked.rows.get(chunk_id)
        if row is None:  # deleted between ranking and fetching
            continue
        v_rank, v_score = vector_at.get(chunk_id, (None, None))
        l_rank, l_score = lexical_at.get(chunk_id, (None, None))
        hits.append(
            Hit(
                chunk_id=row.id,
                document_id=row.document_id,
                collection=row.collection,
                text=row.text,
                score=float(score),
                rank=len(hits) + 1,
                start_char=row.start_char,
                end_char=row.end_char,
                chunk_index=row.chunk_index,
                page=row.page,
                section=row.section,
                source=row.source,
                original_filename=row.original_filename,
                source_sha256=row.source_sha256,
                revision=row.revision,
                chunk_sha256=row.chunk_sha256,
                classification=row.classification,
                embed_model=row.embed_model,
                embed_version=row.embed_version,
                vector_rank=v_rank,
                vector_score=v_score,
                lexical_rank=l_rank,
                lexical_score=l_score,
                metadata=dict(row.metadata or {}),
                locator=dict(row.locator) if row.locator else None,
                grant=grant_of(row.grants, scope.principal if scope is not None else None),
            )
        )
    return tuple(hits)


@guarded("searching")
def search(
    store: SearchSource,
    query: str,
    *,
    collections: str | Sequence[str],
    mode: str = "hybrid",
    top_k: int = 5,
    max_top_k: int = 50,
    depth: int = 100,
    fusion: str = "relative_score",
    rrf_k: float | None = None,
    vector_weight: float | None = None,
    min_score: float | None = None,
    filters: Filters | Mapping[str, Any] | None = None,
    scope: Scope | None = None,
    ef_search: int | None = None,
    explain: bool = False,
) -> SearchResult:
    """Search ``collections`` for ``query``; see the module docstring.

    ``top_k`` (1..``max_top_k``) hits are returned; each leg fetches ``max(depth, top_k)``
    candidates per collection. ``fusion`` (hybrid mode) is ``"relative_score"`` (the default,
    with ``vector_weight``, default 0.5) or ``"rrf"`` (with ``rrf_k``, default 60); giving the other fusion's
    parameter is an error. ``ef_search`` sets pgvector's ``hnsw.ef_search`` (1..1000; default:
    the collection's own ``ef_search`` when it has one, else :func:`default_ef_search`:
    ``max(100, depth)``, raised by 100 per 250,000 indexed chunks past the first 250,000).
    ``filters`` is a :class:`Filters` or a dict of the same shape; ``scope`` a
    :class:`~agentrag.scope.Scope` (required on ``scoped=True`` collections: ``Scope.every()``
    searches across every scope). How each collection's legs ran (an exact scan of a small scope,
    the HNSW index ...; :mod:`agentrag.retrieval.scoped`) is on ``SearchResult.plan``; ``explain=True``
    adds the numbers behind the choice (``SearchResult.explain``).

    Raises InvalidInputError (bad mode, top_k, depth ...), EmptyQueryError, FilterError,
    ScopeError, CollectionNotFoundError, EmbeddingMismatchError, EmbeddingError (vector mode).
    """
    if type(explain) is not bool:
        raise InvalidInputError(f"explain must be True or False, got {explain!r}")
    started = time.perf_counter()
    timings = {"embed": 0.0, "vector": 0.0, "lexical": 0.0, "fuse": 0.0, "fetch": 0.0}
    plan = make_plan(
        query,
        collections,
        mode=mode,
        top_k=top_k,
        max_top_k=max_top_k,
        depth=depth,
        fusion=fusion,
        rrf_k=rrf_k,
        vector_weight=vector_weight,
        min_score=min_score,
        filters=filters,
        scope=scope,
        ef_search=ef_search,
    )
    # Before any connection is taken: no connection waits on a model or provider call. The query is
    # embedded once per distinct embedder of the collections (agentrag.store.embedders).
    vectors: dict[tuple[str, str], np.ndarray] | None = None
    degraded: str | None = None
    if plan.mode in ("vector", "hybrid"):
        vectors, degraded = plan_query_vectors(store, plan, store.query_embedders(plan.names), timings)

    # One transaction: the hnsw.* settings stay local to it. A cold lexical cache (BM25 index,
    # tsvectors) is never built while the connection is held: the transaction stops, the caches
    # are built with no connection held, and the transaction runs again once; so does a query
    # that needs the vector of another embedder (VectorsStale).
    def rank(conn: Connection, caches_ready: bool) -> _Ranked:
        used_mode = "lexical" if degraded else mode
        return _rank(
            conn,
            store,
            plan,
            used_mode,
            vectors,
            caches_ready=caches_ready,
            degraded=degraded,
            timings=timings,
        )

    # One snapshot for the legs and the fetch (REPEATABLE READ): a document replaced meanwhile
    # (store.sync, ingest) is seen as one revision, never both, never neither; and the collections'
    # flags (private uploads, read first) hold for every row the legs read.
    snapshot = {"isolation_level": "REPEATABLE READ"}
    bound: StatementTimeout | None = None  # under a deadline: the timeout of each statement
    try:
        with overlap.searching():  # how busy the process is decides whether the legs overlap
            # a stale cache (older than the snapshot, or newer: built since by another thread) is
            # brought up to date and the search takes a new snapshot; the last attempt builds the
            # BM25 indexes it lacks in its own snapshot (writes raced every attempt before it)
            for attempt in range(_SNAPSHOT_ATTEMPTS):
                try:
                    with (
                        store.engine.connect().execution_options(**snapshot) as conn,
                        conn.begin(),
                        bounded(conn) as bound,
                    ):
                        ranked = rank(conn, caches_ready=attempt == _SNAPSHOT_ATTEMPTS - 1)
                    break
                except CachesStale as stale:
                    prepare_lexical(store, stale.collections, mode)
                except VectorsStale as stale:
                    if attempt == _SNAPSHOT_ATTEMPTS - 1:
                        raise EmbeddingMismatchError(
                            "the collections were re-embedded while this search ran: search again"
                        ) from None
                    vectors, degraded = plan_query_vectors(store, plan, stale.embedders, timings, vectors)
    except Exception as exc:
        if cancelled_by(exc, bound) == "deadline":
            raise budget_exceeded("search") from None
        raise  # the connection's own statement_timeout: guarded raises StatementTimeoutError

    warnings = [*plan.warnings, *([degraded] if degraded else []), *ranked.version_warnings]
    if ranked.left_out is not None:
        warnings.append(ranked.left_out)
    if ranked.mixed_models is not None:
        warnings.append(ranked.mixed_models)
    if ranked.lexical_fallback is not None:
        warnings.append(ranked.lexical_fallback)
        _log.warning("lexical leg ran lexical_sql: a collection's BM25 index is over the memory budget")
    hits = _hits(ranked, plan.scope)
    timings["total"] = (time.perf_counter() - started) * 1000
    return SearchResult(
        query=plan.query,
        collections=plan.names,
        mode=mode,
        used_mode=ranked.used_mode,
        hits=hits,
        degraded=degraded,
        warnings=tuple(warnings),
        model_version_match=not ranked.version_warnings,
        fusion=fusion if ranked.used_mode == "hybrid" else None,
        empty_reason=ranked.empty_reason if not hits else None,
        lexical_fallback=ranked.lexical_fallback,
        plan=tuple(p.describe() for p in ranked.leg_plans),
        explain=tuple(p.as_dict() for p in ranked.leg_plans) if explain else None,
        timings_ms={key: round(value, 3) for key, value in timings.items()},
    )


def asearch(store: SearchSource, query: str, /, **options: Any) -> Coroutine[Any, Any, SearchResult]:
    """:func:`search` in a worker thread (``asyncio.to_thread``), for async applications.

    The options are checked against :func:`search` now, so an unknown one raises ``TypeError``
    at the call, before anything is awaited.
    """
    inspect.signature(search).bind(store, query, **options)
    return asyncio.to_thread(search, store, query, **options)
