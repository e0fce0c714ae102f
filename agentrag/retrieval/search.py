"""``search``: hybrid retrieval over one or more collections (pgvector + BM25, fused).

Modes
    ``"hybrid"`` (default): the vector leg and the BM25 leg each find ``depth`` candidates,
    fused by their min-max normalised scores weighted ``vector_weight`` / ``1 - vector_weight``
    (``fusion="relative_score"``, the default, weight 0.5; ``Hit.score`` is the fused score in
    [0, 1]) or, with ``fusion="rrf"``, by Reciprocal Rank Fusion (``rrf_k``, default 60;
    ``Hit.score`` is the RRF score). See :mod:`agentrag.retrieval.fusion` for why.
    ``"vector"``: pgvector HNSW only; ``Hit.score`` is the similarity (cosine: ``1 - distance``).
    ``"lexical"``: in-memory BM25 only; ``Hit.score`` is the BM25 score.
    ``"lexical_sql"``: PostgreSQL full text (``to_tsvector`` expression index, OR query,
    ``ts_rank(..., 1)``), for collections too large for an in-memory index; ``Hit.score`` is
    the ``ts_rank`` score.

Scopes and filters are compiled to bound parameters and enforced inside the SQL of every leg
(:mod:`agentrag.retrieval.scope_sql`, :mod:`agentrag.retrieval.filters`): a ranked result is
never filtered in Python, so ``top_k`` results come back whenever that many match. A collection
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

Degradation
    When the embedder fails (:class:`~agentrag.errors.EmbeddingError`: the model cannot load,
    the provider is down), a hybrid search runs its lexical leg alone, returns
    ``used_mode="lexical"`` with ``degraded`` set and a warning, and logs a warning (without the
    query text). A vector search raises the error. An embedder whose model or dimensions differ
    from a collection's raises :class:`~agentrag.errors.EmbeddingMismatchError` (vector, hybrid);
    a different model *version* only sets ``model_version_match=False`` with a warning.

``min_score`` applies to the final score of the mode that ran (``used_mode``), before the cut
at ``top_k``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import math
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agentrag.errors import (
    CollectionNotFoundError,
    EmbeddingError,
    EmbeddingMismatchError,
    EmptyQueryError,
    InvalidInputError,
)
from agentrag.hits import Hit
from agentrag.retrieval.catalog import validate_name
from agentrag.retrieval.dberrors import guarded
from agentrag.retrieval.empty import empty_reason
from agentrag.retrieval.filters import Filters, compile_filters
from agentrag.retrieval.fusion import (
    DEFAULT_RRF_K,
    DEFAULT_VECTOR_WEIGHT,
    check_fusion,
    check_rrf_k,
    check_vector_weight,
    merge_by_score,
    relative_score,
    rrf,
)
from agentrag.retrieval.lexical import (
    BM25Cache,
    OverBudget,
    bm25_index,
    cached_bm25,
    lexical_leg,
    lexical_sql_leg,
    over_budget,
)
from agentrag.retrieval.result import SearchResult
from agentrag.retrieval.scope_sql import check_scope, compile_scope
from agentrag.retrieval.vector import (
    DEFAULT_EF_SEARCH,
    MAX_EF_SEARCH,
    ROWS_PER_EF_STEP,
    configure_hnsw,
    vector_leg,
)
from agentrag.scope import Scope

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection, Engine

    from agentrag.embedders import Embedder

__all__ = ["MAX_DEPTH", "MAX_QUERY_CHARS", "MODES", "SearchSource", "asearch", "preprocess_query", "search"]

MODES: tuple[str, ...] = ("hybrid", "vector", "lexical", "lexical_sql")
MAX_QUERY_CHARS = 10_000
MAX_DEPTH = 10_000

_log = logging.getLogger("agentrag.retrieval")


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

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def ensure_text_index(self, collection_id: int, version: int | None = None) -> None: ...

    def text_index_version(self, collection_id: int) -> int | None: ...


@dataclass(frozen=True, slots=True)
class _Collection:
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


def preprocess_query(query: str) -> tuple[str, tuple[str, ...]]:
    """Strip, collapse whitespace, drop NUL bytes and lone surrogates, truncate to 10,000 characters.

    Returns the query and the warnings it caused. Raises EmptyQueryError when nothing is left.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, got {type(query).__name__}")
    text = query.replace("\x00", " ")
    if not text.isascii():
        text = text.encode("utf-8", "ignore").decode("utf-8")  # lone surrogates cannot be sent anywhere
    text = " ".join(text.split())
    if not text:
        raise EmptyQueryError("the query is empty")
    warnings: tuple[str, ...] = ()
    if len(text) > MAX_QUERY_CHARS:
        original = len(text)
        text = text[:MAX_QUERY_CHARS].rstrip()
        warnings = (f"query truncated from {original} to {len(text)} characters (limit {MAX_QUERY_CHARS})",)
        _log.warning("search query truncated from %d to %d characters", original, len(text))
    return text, warnings


def _int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InvalidInputError(f"{name} must be {bounds}, got {value}")
    return value


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


def _ef_search(asked: int | None, collection: _Collection, leg_depth: int) -> int:
    """``hnsw.ef_search`` for one collection's vector leg: the search's, else the collection's,
    else :func:`default_ef_search` (a smaller ef_search than depth turns the iterative scan on)."""
    if asked is not None:
        return asked
    if collection.hnsw_ef_search is not None:
        return collection.hnsw_ef_search
    return default_ef_search(leg_depth, collection.indexed_rows)


def _names(collections: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(collections, str):
        collections = [collections]
    if not isinstance(collections, Sequence):
        raise TypeError(f"collections must be a str or a sequence of str, got {type(collections).__name__}")
    names: dict[str, None] = {}
    for name in collections:
        if not isinstance(name, str):
            raise TypeError(f"collection names must be str, got {type(name).__name__}")
        names[validate_name(name)] = None
    if not names:
        raise InvalidInputError("collections is empty: name at least one collection")
    return tuple(names)


def _load_collections(conn: Connection, names: tuple[str, ...]) -> list[_Collection]:
    from sqlalchemy import text

    rows = conn.execute(
        text(
            "SELECT id, name, embed_model, embed_version, dimensions, distance, scoped, version,"
            " hnsw_ef_search, COALESCE((SELECT i.reltuples FROM pg_class i"
            " WHERE i.oid = to_regclass('agentrag.chunks_hnsw_' || id)), -1) AS indexed_rows"
            " FROM agentrag.collections WHERE name = ANY(CAST(:names AS text[]))"
        ),
        {"names": list(names)},
    ).all()
    found = {row.name: _Collection(*row) for row in rows}
    missing = [name for name in names if name not in found]
    if missing:
        raise CollectionNotFoundError(f"no collection named {', '.join(repr(n) for n in missing)}")
    return [found[name] for name in names]


def _check_embedder(store: SearchSource, collections: list[_Collection]) -> list[str]:
    """Check the store embedder against every collection; return the model-version warnings.

    Raises EmbeddingMismatchError (model or dimensions differ), InvalidInputError (the collections
    use different distance metrics) or EmbeddingError (the embedder cannot even say its dimensions).
    """
    embedder = store.embedder
    model_id, dimensions, version = embedder.model_id, int(embedder.dimensions), embedder.version
    warnings: list[str] = []
    for c in collections:
        if model_id != c.embed_model or dimensions != c.dimensions:
            raise EmbeddingMismatchError(
                f"collection {c.name!r} was embedded with {c.embed_model!r} ({c.dimensions}d); the store "
                f"embedder is {model_id!r} ({dimensions}d): search it with a Store using that model"
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


def _embed(store: SearchSource, query: str) -> tuple[np.ndarray, float]:
    """The query vector (through the store's query cache) and how long it took (ms).

    EmbeddingError for an unusable vector.
    """
    import numpy as np

    started = time.perf_counter()
    embedder = store.embedder
    dimensions = int(embedder.dimensions)
    vectors = np.asarray(store.embed_queries([query]), dtype=np.float32)
    if vectors.shape != (1, dimensions) or not np.isfinite(vectors).all():
        raise EmbeddingError(
            f"embedder {embedder.model_id!r} returned an unusable query vector (shape {vectors.shape}, "
            f"expected (1, {dimensions}), finite values)"
        )
    return vectors[0], (time.perf_counter() - started) * 1000


def _fusion_settings(fusion: str, rrf_k: float | None, vector_weight: float | None) -> tuple[float, float]:
    """Check the fusion options; return ``(rrf_k, vector_weight)``, the other fusion's at its default."""
    check_fusion(fusion)
    if fusion == "rrf":
        if vector_weight is not None:
            raise InvalidInputError('vector_weight applies to fusion="relative_score", not to "rrf"')
        return check_rrf_k(DEFAULT_RRF_K if rrf_k is None else rrf_k), DEFAULT_VECTOR_WEIGHT
    if rrf_k is not None:
        check_rrf_k(rrf_k)
        raise InvalidInputError('rrf_k applies to fusion="rrf", not to "relative_score" (the default)')
    return DEFAULT_RRF_K, check_vector_weight(
        DEFAULT_VECTOR_WEIGHT if vector_weight is None else vector_weight
    )


class _CachesStale(Exception):
    """The lexical caches are older than the collections just read (raised before any leg runs)."""

    def __init__(self, collections: list[_Collection]) -> None:
        super().__init__("lexical caches are stale")
        self.collections = collections


def _over_budget(store: SearchSource, colls: list[_Collection], mode: str, *, current: bool) -> list[str]:
    """Why the BM25 leg of this search runs lexical_sql: one reason per collection over the budget.

    ``current``: only marks at the collections' versions count (a changed collection is estimated
    again); otherwise any mark does (the caches were prepared for this search).
    """
    if mode == "lexical_sql":
        return []
    cache = store.bm25_cache
    marks = [(c, over_budget(cache, c.id, c.version if current else None)) for c in colls]
    return [mark.reason(c.name) for c, mark in marks if mark is not None]


def _lexical_stale(store: SearchSource, colls: list[_Collection], mode: str) -> bool:
    if mode == "lexical_sql" or _over_budget(store, colls, mode, current=True):
        return any((store.text_index_version(c.id) or -1) < c.version for c in colls)
    cache = store.bm25_cache
    return any(
        cached_bm25(cache, c.id, c.version) is None and over_budget(cache, c.id, c.version) is None
        for c in colls
    )


def _prepare_lexical(store: SearchSource, colls: list[_Collection], mode: str) -> None:
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


def _lexical(
    conn: Connection,
    store: SearchSource,
    colls: list[_Collection],
    mode: str,
    query: str,
    where: str,
    params: dict[str, Any],
    depth: int,
) -> list[tuple[str, float]]:
    """The lexical leg over every collection (BM25, or SQL full text for ``lexical_sql``), merged.

    Runs on ``conn`` only: the caches were brought up to date before the connection was taken
    (a write since then is seen by the next search, as if this one ran a moment earlier).
    """
    per_collection: list[list[tuple[str, float]]] = []
    if mode == "lexical_sql" or _over_budget(store, colls, mode, current=False):
        per_collection = [
            lexical_sql_leg(conn, collection_id=c.id, query=query, where=where, params=params, depth=depth)
            for c in colls
        ]
    else:
        for c in colls:
            cached = cached_bm25(store.bm25_cache, c.id, None)
            if cached is None:  # the collection was deleted meanwhile: nothing of it to find
                per_collection.append([])
                continue
            per_collection.append(
                lexical_leg(
                    conn, cached, collection_id=c.id, query=query, where=where, params=params, depth=depth
                )
            )
    return merge_by_score(per_collection, depth)


_FETCH_SQL = """
SELECT c.id, c.document_id, c.text, c.start_char, c.end_char, c.chunk_index, c.page, c.section,
       c.sha256 AS chunk_sha256, d.source, d.original_filename, d.sha256 AS source_sha256,
       d.classification, d.metadata,
       k.name AS collection, k.embed_model, k.embed_version
FROM agentrag.chunks c
JOIN agentrag.documents d ON d.id = c.document_id
JOIN agentrag.collections k ON k.id = c.collection_id
WHERE c.id = ANY(CAST(:ids AS text[]))
"""


@dataclass(frozen=True, slots=True)
class _Plan:
    """A search's options, validated: everything a caller can get wrong has failed by now."""

    query: str
    names: tuple[str, ...]
    mode: str
    top_k: int
    leg_depth: int  # candidates per leg and collection: max(depth, top_k)
    fusion: str
    rrf_k: float
    vector_weight: float
    ef_search: int | None
    min_score: float | None
    scope: Scope | None
    filter_sql: str
    scope_sql: str
    where: str  # filter AND scope, "TRUE" when nothing restricts
    params: dict[str, Any]
    warnings: tuple[str, ...]

    @property
    def restricted(self) -> bool:
        return self.where != "TRUE"


@dataclass(slots=True)
class _Ranked:
    """What the transaction found: the legs' rankings, the fused cut and the hits' rows."""

    used_mode: str
    vector: list[tuple[str, float]]
    lexical: list[tuple[str, float]]
    final: list[tuple[str, float]]
    rows: dict[str, Any]
    version_warnings: list[str]
    lexical_fallback: str | None
    empty_reason: str | None


def _plan(
    query: str,
    collections: str | Sequence[str],
    *,
    mode: str,
    top_k: int,
    max_top_k: int,
    depth: int,
    fusion: str,
    rrf_k: float | None,
    vector_weight: float | None,
    min_score: float | None,
    filters: Filters | Mapping[str, Any] | None,
    scope: Scope | None,
    ef_search: int | None,
) -> _Plan:
    if mode not in MODES:
        raise InvalidInputError(f"unknown search mode {mode!r}; valid modes are {', '.join(MODES)}")
    max_top_k = _int("max_top_k", max_top_k, 1)
    top_k = _int("top_k", top_k, 1, max_top_k)
    depth = _int("depth", depth, 1, MAX_DEPTH)
    k, weight = _fusion_settings(fusion, rrf_k, vector_weight)
    if ef_search is not None:
        ef_search = _int("ef_search", ef_search, 1, MAX_EF_SEARCH)
    if min_score is not None:
        if isinstance(min_score, bool) or not isinstance(min_score, int | float):
            raise TypeError(f"min_score must be a number or None, got {type(min_score).__name__}")
        if not math.isfinite(min_score):
            raise InvalidInputError(f"min_score must be finite, got {min_score!r}")
    names = _names(collections)
    filter_sql, filter_params = compile_filters(filters)
    scope_sql, scope_params = compile_scope(scope)
    query_text, query_warnings = preprocess_query(query)
    restricted = [part for part in (filter_sql, scope_sql) if part != "TRUE"]
    return _Plan(
        query=query_text,
        names=names,
        mode=mode,
        top_k=top_k,
        leg_depth=max(depth, top_k),
        fusion=fusion,
        rrf_k=k,
        vector_weight=weight,
        ef_search=ef_search,
        min_score=min_score,
        scope=scope,
        filter_sql=filter_sql,
        scope_sql=scope_sql,
        where=" AND ".join(f"({part})" for part in restricted) if restricted else "TRUE",
        params={**filter_params, **scope_params},
        warnings=query_warnings,
    )


def _query_vector(
    store: SearchSource, plan: _Plan, timings: dict[str, float]
) -> tuple[np.ndarray | None, str | None]:
    """The query vector (None for a lexical search) and, when a hybrid search lost its vector
    leg to a failing embedder, why (the error's type only: a provider's message may echo the
    query). A vector search raises the EmbeddingError."""
    if plan.mode not in ("vector", "hybrid"):
        return None, None
    try:
        vector, timings["embed"] = _embed(store, plan.query)
    except EmbeddingError as exc:
        if plan.mode == "vector":
            raise
        _log.warning("hybrid search degraded to lexical only: the embedder failed (%s)", type(exc).__name__)
        return None, (
            f"vector leg unavailable, results are lexical (BM25) only: embedder failed ({type(exc).__name__})"
        )
    return vector, None


def _vector_ranked(
    conn: Connection, plan: _Plan, colls: list[_Collection], query_vector: np.ndarray
) -> list[tuple[str, float]]:
    per_collection = []
    for c in colls:
        ef = _ef_search(plan.ef_search, c, plan.leg_depth)
        configure_hnsw(conn, ef_search=ef, iterative=plan.restricted or ef < plan.leg_depth)
        per_collection.append(
            vector_leg(
                conn,
                collection_id=c.id,
                dimensions=c.dimensions,
                distance=c.distance,
                query_vector=query_vector,
                where=plan.where,
                params=plan.params,
                depth=plan.leg_depth,
                need=plan.top_k,
            )
        )
    return merge_by_score(per_collection, plan.leg_depth)


def _fuse(
    plan: _Plan, used_mode: str, vector: list[tuple[str, float]], lexical: list[tuple[str, float]]
) -> list[tuple[str, float]]:
    """The mode's ranking, before ``min_score`` and the cut at ``top_k``."""
    if used_mode == "hybrid" and plan.fusion == "relative_score":
        return relative_score(vector, lexical, vector_weight=plan.vector_weight)
    if used_mode == "hybrid":
        return rrf([[i for i, _ in vector], [i for i, _ in lexical]], k=plan.rrf_k)
    return vector if used_mode == "vector" else lexical


def _rank(
    conn: Connection,
    store: SearchSource,
    plan: _Plan,
    used_mode: str,
    query_vector: np.ndarray | None,
    *,
    caches_ready: bool,
    degraded: str | None,
    timings: dict[str, float],
) -> _Ranked:
    """Everything a search does in its one transaction on ``conn``.

    Raises _CachesStale, before any leg runs, when a lexical cache must be built first (and
    ``caches_ready`` is false).
    """
    colls = _load_collections(conn, plan.names)
    check_scope(plan.scope, [c.name for c in colls if c.scoped])
    if not caches_ready and used_mode != "vector" and _lexical_stale(store, colls, plan.mode):
        raise _CachesStale(colls)
    version_warnings: list[str] = []
    if plan.mode in ("vector", "hybrid"):
        try:
            version_warnings = _check_embedder(store, colls)  # EmbeddingMismatchError
        except EmbeddingMismatchError:
            raise
        except EmbeddingError:  # it cannot say its dimensions: the search already degraded
            pass

    vector: list[tuple[str, float]] = []
    if query_vector is not None:
        t = time.perf_counter()
        vector = _vector_ranked(conn, plan, colls, query_vector)
        timings["vector"] = (time.perf_counter() - t) * 1000

    lexical: list[tuple[str, float]] = []
    lexical_fallback: str | None = None
    if used_mode in ("lexical", "hybrid", "lexical_sql"):
        # A collection over the BM25 memory budget: the leg is SQL full text, on record.
        lexical_fallback = "; ".join(_over_budget(store, colls, plan.mode, current=False)) or None
        if lexical_fallback is not None and used_mode == "lexical":
            used_mode = "lexical_sql"
        t = time.perf_counter()
        lexical = _lexical(conn, store, colls, plan.mode, plan.query, plan.where, plan.params, plan.leg_depth)
        timings["lexical"] = (time.perf_counter() - t) * 1000

    t = time.perf_counter()
    candidates = _fuse(plan, used_mode, vector, lexical)
    final = candidates
    if plan.min_score is not None:
        final = [(i, s) for i, s in final if s >= plan.min_score]
    final = final[: plan.top_k]
    timings["fuse"] = (time.perf_counter() - t) * 1000

    t = time.perf_counter()
    rows = _fetch(conn, [i for i, _ in final])
    timings["fetch"] = (time.perf_counter() - t) * 1000
    why: str | None = None
    if not rows:  # only an empty result pays for the counts that explain it
        why = empty_reason(
            conn,
            collections=[(c.id, c.name) for c in colls],
            scope_sql=plan.scope_sql,
            filter_sql=plan.filter_sql,
            params=plan.params,
            scope=plan.scope,
            used_mode=used_mode,
            degraded=degraded,
            lexical_candidates=len(lexical),
            min_score=plan.min_score,
            candidates=candidates,
        )
    return _Ranked(used_mode, vector, lexical, final, rows, version_warnings, lexical_fallback, why)


def _fetch(conn: Connection, ids: list[str]) -> dict[str, Any]:
    """The hits' text and provenance by chunk id (a chunk deleted since ranking is missing)."""
    if not ids:
        return {}
    from sqlalchemy import text

    return {row.id: row for row in conn.execute(text(_FETCH_SQL), {"ids": ids}).all()}


def _hits(ranked: _Ranked) -> tuple[Hit, ...]:
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
                chunk_sha256=row.chunk_sha256,
                classification=row.classification,
                embed_model=row.embed_model,
                embed_version=row.embed_version,
                vector_rank=v_rank,
                vector_score=v_score,
                lexical_rank=l_rank,
                lexical_score=l_score,
                metadata=dict(row.metadata or {}),
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
    searches across every scope).

    Raises InvalidInputError (bad mode, top_k, depth ...), EmptyQueryError, FilterError,
    ScopeError, CollectionNotFoundError, EmbeddingMismatchError, EmbeddingError (vector mode).
    """
    started = time.perf_counter()
    timings = {"embed": 0.0, "vector": 0.0, "lexical": 0.0, "fuse": 0.0, "fetch": 0.0}
    plan = _plan(
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
    # Before any connection is taken: no connection waits on a model or provider call.
    query_vector, degraded = _query_vector(store, plan, timings)
    used_mode = "lexical" if degraded else mode

    # One transaction: the hnsw.* settings stay local to it. A cold lexical cache (BM25 index,
    # tsvectors) is never built while the connection is held: the transaction stops, the caches
    # are built with no connection held, and the transaction runs again once.
    rank = functools.partial(
        _rank,
        store=store,
        plan=plan,
        used_mode=used_mode,
        query_vector=query_vector,
        degraded=degraded,
        timings=timings,
    )
    try:
        with store.engine.connect() as conn, conn.begin():
            ranked = rank(conn, caches_ready=False)
    except _CachesStale as stale:
        _prepare_lexical(store, stale.collections, mode)
        with store.engine.connect() as conn, conn.begin():
            ranked = rank(conn, caches_ready=True)

    warnings = [*plan.warnings, *([degraded] if degraded else []), *ranked.version_warnings]
    if ranked.lexical_fallback is not None:
        warnings.append(ranked.lexical_fallback)
        _log.warning("lexical leg ran lexical_sql: a collection's BM25 index is over the memory budget")
    hits = _hits(ranked)
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
        timings_ms={key: round(value, 3) for key, value in timings.items()},
    )


def asearch(store: SearchSource, query: str, /, **options: Any) -> Coroutine[Any, Any, SearchResult]:
    """:func:`search` in a worker thread (``asyncio.to_thread``), for async applications.

    The options are checked against :func:`search` now, so an unknown one raises ``TypeError``
    at the call, before anything is awaited.
    """
    inspect.signature(search).bind(store, query, **options)
    return asyncio.to_thread(search, store, query, **options)
