"""How each collection's legs run under a scope or filter: the planner's choice, per search.

A scope (a tenant, a workspace, a session) or a filter narrows the rows a leg may return. The
predicate itself is compiled elsewhere (:mod:`agentrag.retrieval.scope_sql`,
:mod:`agentrag.retrieval.filters`: one WHERE clause over the documents alias ``d``, bound
parameters only); this module decides *how* each leg enforces it, from the size of the scope:

The two legs decide separately, from one statement over ``documents`` (:func:`count_scope`):

* **Vector leg.** A scope of at most :data:`EXACT_MAX_ROWS` chunks (a long-tail tenant, a 1 %
  filter of a mid-sized collection) whose share of the collection is small enough
  (``rows * share <= EXACT_WALK_COST * depth``, :func:`exact_wins`) is scanned exactly (``ORDER BY
  distance + 0``, which no index serves: the planner goes through the documents' scope index and the
  chunks' ``document_id`` index), exactly right and cheaper than an HNSW walk that must visit about
  ``depth / share`` tuples to find ``depth`` inside a 0.05 % scope. A larger one walks the HNSW index
  with pgvector's iterative scan (``relaxed_order``), ``hnsw.max_scan_tuples`` raised so that the
  walk can visit the ``depth / selectivity`` tuples it needs (at least pgvector's 20,000); a short
  result is still re-run exactly (:func:`agentrag.retrieval.vector.vector_leg`).
  In a collection fitted by ``Store.optimize``, a large exact scope reads only its rows in the
  clusters nearest the query (``vector=clusters``, :mod:`agentrag.retrieval.clusters`, decided after
  this plan by :func:`agentrag.retrieval.legs.with_clusters`).
* **Lexical leg.** A scope of at most :data:`SCOPE_MAX_DOCS` documents is ranked over its own
  chunks (``bm25-scope``): the count's statement also returns the documents' ids, and the BM25
  index, which knows each position's document, keeps the chunks of those documents (a mask, at C
  speed whatever the scope's size: no chunk id crosses the wire). A larger one sends the global
  BM25 ranking to SQL in slices until ``depth`` pass (``bm25-slices``,
  :func:`agentrag.retrieval.lexical.lexical_leg`), cheap when the scope is a large share of the
  collection.
* **No restriction**: the HNSW index (``hnsw``) and the BM25 index's own top ``depth`` (``bm25-top``),
  as before; nothing is counted, so unscoped searches run exactly the statements they ran. A counted
  scope of at least :data:`WHOLE_MIN_SHARE` of the index's rows that holds every document of the
  collection (:func:`holds_every_document`, same snapshot) runs the same way (``LegPlan.whole``): the
  only tenant of a scoped collection, a principal granted everything.

The scope's size comes from ``documents.chunk_count`` under the same WHERE clause (the documents' scope
index for a tenant, the GIN indexes for a metadata filter or grants: the grant test reads the tokens
through a subquery, :func:`~agentrag.retrieval.predicate.grants_by_index`, so that every plan takes the
GIN index), reading at most ``max(EXACT_MAX_ROWS, SCOPE_MAX_DOCS) + 1`` documents. One count is not
bounded by that: the GIN overlap of a principal's grant tokens costs per token and per match (5,000
documents for a principal in 500 groups: 17-25 ms), so a predicate of more than :data:`COUNT_MAX_TOKENS`
tokens is first estimated from PostgreSQL's statistics (:func:`estimate_share`, one ``EXPLAIN``, 0.8
ms), and not counted when the estimated share is at least :data:`UNCOUNTED_MIN_SHARE`: the walk filters
in the same statement and BM25's ranking goes in slices, both cheap for a large share (``share~39%`` on
the plan).
A principal's next search in the same state of the collection reads the count's answer from the store's
:class:`~agentrag.retrieval.scope_cache.ScopeCache` instead (keyed by the collection's ``version`` and
``acl_version`` as its snapshot reads them: ``LegPlan.cached``).
Scope, filter and grant predicates are one WHERE clause and go through the same plan. Every choice
returns the same rows (exactly ``min(k, matches)``, the same order but for ties and the HNSW walk's
approximation on large scopes); only the cost differs. The choice is on
``SearchResult.plan`` (``collection: vector=exact lexical=bm25-scope rows=412``), on the ``search``
step's span (``agentrag.search.plan``) and, with the numbers behind it, on ``SearchResult.explain``
(``search(explain=True)``). Measured in benchmarks/scale.py (``--tenants``); the thresholds are
recorded in ARCHITECTURE.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from agentrag.retrieval import scope_cache
from agentrag.retrieval.bm25 import first_ranked
from agentrag.retrieval.predicate import TextArray, grants_by_index

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from agentrag.retrieval.lexical import CachedBM25
    from agentrag.retrieval.scope_cache import ScopeCache

__all__ = [
    "COUNT_MAX_TOKENS",
    "ENABLED",
    "EXACT_MAX_ROWS",
    "EXACT_WALK_COST",
    "MIN_MAX_SCAN_TUPLES",
    "SCOPE_MAX_DOCS",
    "UNCOUNTED_MIN_SHARE",
    "LegPlan",
    "ScopeCount",
    "count_scope",
    "count_sql",
    "estimate_share",
    "exact_wins",
    "plan_collection",
    "restore_sort",
    "scope_bm25_leg",
    "scope_rows",
    "set_max_scan_tuples",
]

#: False: no planning, every restricted search walks HNSW (pgvector's max_scan_tuples) and sends the BM25
#: ranking in slices, as before the planner (benchmarks/scale_tenants.py's "planner off" column).
ENABLED = True
#: A scope of at most this many chunks may be searched exactly by the vector leg (measured at 200k chunks,
#: loaded: 8,900 chunks exact 37-40 ms, the walk 49; 13,350: 48-53 against 43; 31,840: 69 against 38-43);
#: the count reads at most this many (documents), so it also bounds the plan's own cost.
EXACT_MAX_ROWS = 20_000
#: ... and only when ``rows * share <= EXACT_WALK_COST * depth`` (``share``: the scope's rows over the
#: HNSW index's): the exact scan reads ``rows`` rows, the walk visits about ``depth / share`` tuples, each
#: (a heap fetch and the neighbours' distances) about this many exact rows' worth. Measured through the
#: library (benchmarks/acl.py's collection, 100k chunks, vector p50, quiet: load 1.6): 5,000 visible
#: chunks exact 12 ms, the walk 49; 10,000: 16 against 32; 15,000: 22 against 27; 20,000: the walk 19.
#: A large share of a small collection walks; a few percent of a large one is scanned.
EXACT_WALK_COST = 30
#: A predicate that tests more grant tokens than this (``d.grants && :p_tokens``) is not counted when the
#: statistics put its share at UNCOUNTED_MIN_SHARE or more: the GIN overlap costs per token and per match
#: (a principal in 500 of 1,000 groups: 17-25 ms to count 5,000 documents; in 100: 1.7 ms), and a large
#: share is served well without the count (the walk filtering in the same statement, BM25 in slices).
COUNT_MAX_TOKENS = 200
UNCOUNTED_MIN_SHARE = 0.2
#: the grant tokens' parameter in the predicate's WHERE clause (agentrag.retrieval.predicate)
TOKENS_PARAM = "p_tokens"
#: A scope of at most this many documents is ranked by BM25 over its own chunks (bm25-scope): the plan
#: reads their ids with its count, in the same statement.
SCOPE_MAX_DOCS = 5_000
#: A counted scope of at least this share of the HNSW index's (estimated) rows is checked for holding
#: every document of the collection (:func:`holds_every_document`); if it does, it is searched
#: unrestricted. Below it, no search pays for the check.
WHOLE_MIN_SHARE = 0.9
#: pgvector's default hnsw.max_scan_tuples; a restricted walk may visit more, never fewer.
MIN_MAX_SCAN_TUPLES = 20_000
MAX_MAX_SCAN_TUPLES = 2_000_000
SCAN_MARGIN = 4  # visit up to 4x the tuples a uniformly spread scope needs for depth rows


@dataclass(frozen=True, slots=True)
class LegPlan:
    """How one collection's legs run in one search (see the module docstring)."""

    collection: str
    vector: str  # "hnsw" | "hnsw-iterative" | "exact" | "clusters" | "scan" (no index yet) | "hnsw-tenant"
    lexical: str  # "bm25-top" | "bm25-scope" | "bm25-slices"
    scope_rows: int | None = None  # chunks in the scope (None: unrestricted); EXACT_MAX_ROWS + 1: more
    indexed_rows: int = -1  # the HNSW index's reltuples (-1: unknown or no index)
    ef_search: int | None = None
    max_scan_tuples: int | None = None
    reason: str = ""
    #: the scope's share of the indexed chunks (None: unrestricted or unknown); estimated from the
    #: statistics, not counted, when ``scope_rows`` is None under a restriction
    share: float | None = None
    #: the scope's document ids as the plan read them (bm25-scope); not shown, not compared
    documents: tuple[str, ...] | None = field(default=None, repr=False, compare=False)
    #: the scope holds every document of the collection (counted in this snapshot): the legs run
    #: unrestricted, as they would with no scope at all
    whole: bool = False
    #: vector="clusters" (agentrag.retrieval.clusters): the clusters read of the collection's K, the
    #: fit's K and id
    probes: int | None = None
    clusters: int | None = None
    fit: int | None = field(default=None, repr=False, compare=False)
    #: the scope's count (and document ids) came from the store's ScopeCache: this collection's state
    #: is the one it was read in (agentrag.retrieval.scope_cache)
    cached: bool = False

    @property
    def exact(self) -> bool:
        return self.vector == "exact"

    @property
    def counted(self) -> bool:
        """Whether the plan counted its scope (False: unrestricted, or a share estimated instead)."""
        return self.scope_rows is not None

    def describe(self) -> str:
        rows = "" if self.scope_rows is None else f" rows={self.rows_text()}"
        if self.scope_rows is None and self.share is not None:
            rows = f" share~{self.share:.0%}"
        vector = self.vector
        if vector == "clusters":
            vector += f" probes={self.probes}/{self.clusters}"
        return f"{self.collection}: vector={vector} lexical={self.lexical}{rows}"

    def rows_text(self) -> str:
        if self.scope_rows is None:
            return "all"
        return f">{EXACT_MAX_ROWS}" if self.scope_rows > EXACT_MAX_ROWS else str(self.scope_rows)

    def ran(self, *, vector: bool, lexical: str | None) -> LegPlan:
        """This plan as the legs ran: ``"none"`` for a leg that did not run, ``"sql"`` for a lexical
        leg that ran SQL full text (``lexical_sql``, or a BM25 index over the memory budget)."""
        return replace(
            self,
            vector=self.vector if vector else "none",
            lexical="none" if lexical is None else ("sql" if lexical == "sql" else self.lexical),
        )

    def as_dict(self) -> dict[str, Any]:
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("documents", "fit")}
        return {
            **shown,
            "exact_max_rows": EXACT_MAX_ROWS,
            "exact_walk_cost": EXACT_WALK_COST,
            "scope_max_docs": SCOPE_MAX_DOCS,
        }


@dataclass(frozen=True, slots=True)
class ScopeCount:
    """What the plan read of a scope, in one statement: its chunks (counted up to
    :data:`EXACT_MAX_ROWS` + 1), its documents, and their ids when at most :data:`SCOPE_MAX_DOCS`."""

    rows: int
    documents: int
    ids: tuple[str, ...] | None
    chunks: int | None = None  # the scope's chunks, uncapped (None: more than the cap's documents)


def count_sql(collection_id: int, where: str) -> str:
    """:func:`count_scope`'s statement: the grant test in it reads the GIN index
    (:func:`~agentrag.retrieval.predicate.grants_by_index`), planned alike for every principal."""
    cap = max(EXACT_MAX_ROWS, SCOPE_MAX_DOCS, 0) + 1
    return (
        "SELECT count(*) AS docs, coalesce(sum(n), 0) AS chunks,"
        f" CASE WHEN count(*) <= {int(SCOPE_MAX_DOCS)} THEN coalesce(string_agg(id, ','), '')"
        " END AS ids FROM ("
        "SELECT d.id, d.chunk_count AS n FROM agentrag.documents d"
        f" WHERE d.collection_id = {int(collection_id)} AND ({grants_by_index(where)}) LIMIT {cap}) s"
    )


def count_scope(conn: Connection, collection_id: int, where: str, params: dict[str, Any]) -> ScopeCount:
    """The scope of ``collection_id`` under ``where``, from ``documents`` only (``chunk_count``):
    reads at most ``max(EXACT_MAX_ROWS, SCOPE_MAX_DOCS) + 1`` documents, whatever the scope, and
    sends their ids only when there are at most ``SCOPE_MAX_DOCS`` of them."""
    from sqlalchemy import text

    cap = max(EXACT_MAX_ROWS, SCOPE_MAX_DOCS, 0) + 1
    row = conn.execute(text(count_sql(collection_id, where)), params).one()
    rows = EXACT_MAX_ROWS + 1 if row.docs >= cap else min(int(row.chunks), EXACT_MAX_ROWS + 1)
    # the ids joined by commas (document ids are "doc_" + hex): psycopg parses a text[] of thousands
    # of elements one by one
    ids = None if row.ids is None else tuple(row.ids.split(",")) if row.ids else ()
    return ScopeCount(rows, int(row.docs), ids, None if row.docs >= cap else int(row.chunks))


def holds_every_document(conn: Connection, collection_id: int, documents: int) -> bool:
    """Whether the collection has exactly ``documents`` documents (this transaction's snapshot, as the
    scope's count): reads at most one more entry of its ``collection_id`` index."""
    from sqlalchemy import text

    sql = (
        "SELECT count(*) FROM (SELECT 1 FROM agentrag.documents a"
        f" WHERE a.collection_id = {int(collection_id)} LIMIT {int(documents) + 1}) t"
    )
    return bool(documents > 0 and conn.execute(text(sql)).scalar_one() == documents)


def estimate_share(conn: Connection, collection_id: int, where: str, params: dict[str, Any]) -> float:
    """The share of ``collection_id``'s documents passing ``where``, from PostgreSQL's statistics: one
    ``EXPLAIN`` (the predicate's estimated rows over the whole table beside the collection's own), read
    nothing (0.8 ms for 502 grant tokens). Over the whole table, since the estimate under the
    collection assumes the two independent (grants and tenants are not); an over-estimate (the
    predicate's documents are in other collections too) costs time, never rows: the walk comes back
    short and re-runs exactly. 0.0 when the plan is not the expected two scans."""
    from sqlalchemy import text

    sql = (
        f"EXPLAIN (FORMAT JSON) SELECT 1 FROM agentrag.documents d WHERE ({where})"
        f" UNION ALL SELECT 1 FROM agentrag.documents d WHERE d.collection_id = {int(collection_id)}"
    )
    plan = conn.execute(text(sql), params).scalar()
    try:
        matching, total = (float(p["Plan Rows"]) for p in plan[0]["Plan"]["Plans"])  # type: ignore[index]
    except (KeyError, IndexError, TypeError, ValueError):
        return 0.0
    return min(1.0, matching / max(total, 1.0))


def exact_wins(rows: int, indexed: int, depth: int) -> bool:
    """Whether the vector leg scans a counted scope of ``rows`` chunks exactly (see EXACT_WALK_COST)."""
    if rows > EXACT_MAX_ROWS:
        return False
    if indexed <= 0:  # no index (a scan either way) or no statistics yet: the absolute bound only
        return True
    return rows * rows <= EXACT_WALK_COST * depth * max(indexed, rows)


def grant_tokens(where: str, params: dict[str, Any]) -> int:
    """How many grant tokens ``where`` tests (0: no grants in it)."""
    tokens = params.get(TOKENS_PARAM)
    return len(tokens.items) if f":{TOKENS_PARAM}" in where and isinstance(tokens, TextArray) else 0


def scope_rows(conn: Connection, collection_id: int, where: str, params: dict[str, Any]) -> int:
    """The chunks of ``collection_id`` passing ``where``, counted up to ``EXACT_MAX_ROWS + 1``."""
    return count_scope(conn, collection_id, where, params).rows


def plan_collection(
    conn: Connection,
    *,
    name: str,
    collection_id: int,
    indexed_rows: float,
    where: str,
    params: dict[str, Any],
    depth: int,
    ef_search: int,
    count: bool,
    cache: ScopeCache | None = None,
    versions: tuple[int, int] | None = None,
) -> LegPlan:
    """The legs' plan for one collection (``count``: whether a leg needs the scope's size). With
    ``cache`` and the collection's ``(version, acl_version)`` as this snapshot reads them, the scope's
    count is read from the cache when it holds it for that state (:mod:`agentrag.retrieval.scope_cache`)."""
    indexed = int(indexed_rows)
    if where.strip() == "TRUE" or not count:
        vector = "hnsw" if indexed >= 0 else "scan"
        return LegPlan(name, vector, "bm25-top", None, indexed, ef_search, None, "no scope or filter")
    if not ENABLED:
        return LegPlan(name, "hnsw-iterative", "bm25-slices", None, indexed, ef_search, None, "planner off")
    key = None
    if cache is not None and versions is not None and scope_cache.ENABLED:
        key = scope_cache.scope_key(collection_id, *versions, count_sql(collection_id, where), params)
    found = cache.get(key) if cache is not None and key is not None else None
    tokens = grant_tokens(where, params)
    counted = found.count if found is not None else None
    if counted is None and tokens > COUNT_MAX_TOKENS:
        estimate = found.estimate if found is not None else None
        estimated = estimate_share(conn, collection_id, where, params) if estimate is None else estimate
        if estimated >= UNCOUNTED_MIN_SHARE:
            if estimate is None and cache is not None and key is not None:
                cache.put(key, scope_cache.CachedScope(None, None, estimated))  # plans only: see CachedScope
            known = estimate is not None
            return uncounted_plan(name, indexed, ef_search, depth, estimated, tokens, cached=known)
    scope = counted
    if scope is None:
        scope = count_scope(conn, collection_id, where, params)
    rows = scope.rows
    near_all = indexed > 0 and scope.chunks is not None and scope.chunks >= WHOLE_MIN_SHARE * indexed
    cached = counted is not None
    whole = found.whole if found is not None and cached else None
    if near_all and whole is None:
        whole = holds_every_document(conn, collection_id, scope.documents)
    if cache is not None and key is not None and not cached:
        cache.put(key, scope_cache.CachedScope(scope, whole))
    if near_all and whole:
        # e.g. the only tenant of a scoped collection: nothing to test per row (near_all: an index)
        why = f"the scope holds all {scope.documents} documents of the collection: searched unrestricted"
        return LegPlan(
            name, "hnsw", "bm25-top", rows, indexed, ef_search, None, why, 1.0, whole=True, cached=cached
        )
    share = rows / max(indexed, rows, 1) if indexed > 0 else None
    lexical = "bm25-scope" if scope.ids is not None else "bm25-slices"
    lexical_why = (
        f"BM25 over the chunks of its {scope.documents} documents"
        if scope.ids is not None
        else f"more than {SCOPE_MAX_DOCS} documents: BM25 ranking sent in slices"
    )
    if cached:
        lexical_why += "; the scope's count cached (the collection unchanged since)"
    if exact_wins(rows, indexed, depth):
        why = f"scope of {rows} chunks: exact vector scan; {lexical_why}"
        return LegPlan(
            name, "exact", lexical, rows, indexed, None, None, why, share, scope.ids, cached=cached
        )
    if indexed < 0:
        why = f"no HNSW index yet: the vector leg scans; {lexical_why}"
        return LegPlan(
            name, "scan", lexical, rows, indexed, ef_search, None, why, share, scope.ids, cached=cached
        )
    tuples = scan_tuples(depth, rows / max(indexed, rows, 1))
    size = f"more than {EXACT_MAX_ROWS}" if rows > EXACT_MAX_ROWS else f"{rows}"
    why = f"scope of {size} chunks ({rows / max(indexed, rows, 1):.1%}): iterative HNSW scan; {lexical_why}"
    walk = LegPlan(name, "hnsw-iterative", lexical, rows, indexed, ef_search, tuples, why, share, scope.ids)
    return replace(walk, cached=cached)


def scan_tuples(depth: int, share: float) -> int:
    """``hnsw.max_scan_tuples`` for a walk under a scope of ``share``: a uniformly spread scope needs
    about ``depth / share`` tuples visited, with a margin; at least pgvector's default."""
    need = int(SCAN_MARGIN * depth / max(share, 1e-9))
    return max(MIN_MAX_SCAN_TUPLES, min(MAX_MAX_SCAN_TUPLES, need))


def uncounted_plan(
    name: str, indexed: int, ef_search: int, depth: int, share: float, tokens: int, *, cached: bool = False
) -> LegPlan:
    """A large share, estimated, not counted: the walk tests the predicate in the same statement (it
    stops early and re-runs exactly when the estimate was too high), BM25's ranking in slices.
    ``cached``: the estimate is the store's, of this state of the collection (the plan only)."""
    why = (
        f"{tokens} grant tokens (> {COUNT_MAX_TOKENS}) and an estimated share of {share:.0%}"
        f" (>= {UNCOUNTED_MIN_SHARE:.0%}{', cached' if cached else ''}): not counted; "
    )
    if indexed < 0:
        return LegPlan(
            name, "scan", "bm25-slices", None, indexed, ef_search, None, why + "no HNSW index yet", share
        )
    # a share >= UNCOUNTED_MIN_SHARE needs at most depth / share tuples visited: pgvector's default
    # max_scan_tuples serves it, and the walk runs as the planner-off one does (no settings changed)
    tuples = scan_tuples(depth, share)
    why += "iterative HNSW scan, BM25 ranking sent in slices"
    return LegPlan(
        name,
        "hnsw-iterative",
        "bm25-slices",
        None,
        indexed,
        ef_search,
        None if tuples <= MIN_MAX_SCAN_TUPLES else tuples,
        why,
        share,
    )


def set_max_scan_tuples(conn: Connection, tuples: int) -> None:
    """``hnsw.max_scan_tuples`` for the current transaction only, and the HNSW walk preferred.

    Under a scope the PostgreSQL planner may prefer the scope's own index and a sort of every row
    it holds (an exact scan of tens of thousands of rows: 200 ms for 32k chunks): ``enable_sort``
    off for the vector leg makes it take the index's ordered walk; :func:`restore_sort` turns it
    back on before the next statement.
    """
    from sqlalchemy import text

    conn.execute(
        text("SELECT set_config('hnsw.max_scan_tuples', :n, true), set_config('enable_sort', 'off', true)"),
        {"n": str(int(tuples))},
    )


def restore_sort(conn: Connection) -> None:
    from sqlalchemy import text

    conn.execute(text("SELECT set_config('enable_sort', 'on', true)"))


def scope_bm25_leg(
    conn: Connection,
    cached: CachedBM25,
    *,
    collection_id: int,
    query: str,
    where: str,
    params: dict[str, Any],
    depth: int,
    documents: tuple[str, ...] | None = None,
) -> list[tuple[str, float]]:
    """BM25 ranked over the scope's chunks only: ``[(chunk_id, bm25_score), ...]`` best first.

    The scope is its documents' ids, read from SQL under ``where`` (so the scope is enforced in
    SQL): ``documents`` when the plan read them in this transaction, else read here. The index
    knows each position's document, so the chunks of those documents are a mask over the index
    (C speed, whatever the scope's size); of the matching chunks inside it, the first ``depth``
    in BM25 order (score descending, ties by chunk id): the same rows the slices of
    :func:`lexical_leg` find.
    """
    import numpy as np
    from sqlalchemy import text

    if documents is None:
        sql = (
            "SELECT d.id FROM agentrag.documents d"
            f" WHERE d.collection_id = {int(collection_id)} AND ({grants_by_index(where)})"
        )
        documents = tuple(conn.execute(text(sql), params).scalars())
    positions, scores = cached.index.match(query)
    if not documents or len(positions) == 0:
        return []
    keys, document_of = cached.document_keys, cached.document_of
    if keys is None or document_of is None or len(keys) == 0:
        return []
    wanted = np.array([d.encode("utf-8") for d in documents], dtype=bytes)
    at = np.searchsorted(keys, wanted)
    inside = at < len(keys)
    at = at[inside]
    at = at[keys[at] == wanted[inside]]  # a document written after the index was built has no chunks in it
    in_scope = np.zeros(len(keys), dtype=bool)
    in_scope[at] = True
    keep = in_scope[document_of[positions]]
    ranked, ranked_scores = first_ranked(positions[keep], scores[keep], depth)
    return [(str(i), float(s)) for i, s in zip(cached.chunk_ids[ranked], ranked_scores, strict=True)]
