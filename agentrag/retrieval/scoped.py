"""How each collection's legs run under a scope or filter: the planner's choice, per search.

A scope (a tenant, a workspace, a session) or a filter narrows the rows a leg may return. The
predicate itself is compiled elsewhere (:mod:`agentrag.retrieval.scope_sql`,
:mod:`agentrag.retrieval.filters`: one WHERE clause over the documents alias ``d``, bound
parameters only); this module decides *how* each leg enforces it, from the size of the scope:

* **Small scope** (at most :data:`EXACT_MAX_ROWS` chunks; a long-tail tenant, a 1 % filter of a
  mid-sized collection): both legs read the scope's own rows. The vector leg is an exact scan
  (``ORDER BY distance + 0``, which no index serves: the planner goes through the documents'
  scope index and the chunks' ``document_id`` index), exactly right and cheaper than an HNSW walk
  that must visit about ``depth / selectivity`` tuples to find ``depth`` inside a 0.05 % scope. The
  lexical leg reads the scope's chunk ids once and ranks BM25 over those positions only
  (``bm25-scope``), instead of sending the global ranking to SQL in slices until ``depth`` pass.
* **Large scope** (more than that): the HNSW index with pgvector's iterative scan
  (``relaxed_order``), ``hnsw.max_scan_tuples`` raised so that the walk can visit the ``depth /
  selectivity`` tuples it needs (at least pgvector's 20,000); a short result is still re-run exactly
  (:func:`agentrag.retrieval.vector.vector_leg`). The lexical leg sends the BM25 ranking in slices
  (``bm25-slices``, :func:`agentrag.retrieval.lexical.lexical_leg`).
* **No restriction**: the HNSW index (``hnsw``) and the BM25 index's own top ``depth`` (``bm25-top``),
  as before; nothing is counted, so unscoped searches run exactly the statements they ran.

The scope's size comes from ``documents.chunk_count`` under the same WHERE clause (the documents'
scope index for a tenant), reading at most ``EXACT_MAX_ROWS + 1`` documents: bounded whatever the
scope. Every choice returns the same rows (exactly ``min(k, matches)``, the same order but for ties
and the HNSW walk's approximation on large scopes); only the cost differs. The choice is on
``SearchResult.plan`` (``collection: vector=exact lexical=bm25-scope rows=412``), on the ``search``
step's span (``agentrag.search.plan``) and, with the numbers behind it, on ``SearchResult.explain``
(``search(explain=True)``). Measured in benchmarks/scale.py (``--tenants``); the threshold is
recorded in ARCHITECTURE.md.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from agentrag.retrieval.bm25 import first_ranked
from agentrag.retrieval.vector import vector_sql

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection

    from agentrag.retrieval.lexical import CachedBM25

__all__ = [
    "ENABLED",
    "EXACT_MAX_ROWS",
    "MIN_MAX_SCAN_TUPLES",
    "LegPlan",
    "exact_vector_leg",
    "plan_collection",
    "restore_sort",
    "scope_bm25_leg",
    "scope_rows",
    "set_max_scan_tuples",
    "sorted_byte_ids",
]

#: False: no planning, every restricted search walks HNSW (pgvector's max_scan_tuples) and sends the BM25
#: ranking in slices, as before the planner (benchmarks/scale_tenants.py's "planner off" column).
ENABLED = True
#: A scope of at most this many chunks is searched exactly (vector) and over its own postings (BM25).
EXACT_MAX_ROWS = 10_000
#: pgvector's default hnsw.max_scan_tuples; a restricted walk may visit more, never fewer.
MIN_MAX_SCAN_TUPLES = 20_000
MAX_MAX_SCAN_TUPLES = 2_000_000
SCAN_MARGIN = 4  # visit up to 4x the tuples a uniformly spread scope needs for depth rows


@dataclass(frozen=True, slots=True)
class LegPlan:
    """How one collection's legs run in one search (see the module docstring)."""

    collection: str
    vector: str  # "hnsw" | "hnsw-iterative" | "exact" | "scan" (no index yet)
    lexical: str  # "bm25-top" | "bm25-scope" | "bm25-slices"
    scope_rows: int | None = None  # chunks in the scope (None: unrestricted); EXACT_MAX_ROWS + 1: more
    indexed_rows: int = -1  # the HNSW index's reltuples (-1: unknown or no index)
    ef_search: int | None = None
    max_scan_tuples: int | None = None
    reason: str = ""

    @property
    def exact(self) -> bool:
        return self.vector == "exact"

    def describe(self) -> str:
        rows = "" if self.scope_rows is None else f" rows={self.rows_text()}"
        return f"{self.collection}: vector={self.vector} lexical={self.lexical}{rows}"

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
        return {**asdict(self), "exact_max_rows": EXACT_MAX_ROWS}


def scope_rows(conn: Connection, collection_id: int, where: str, params: dict[str, Any]) -> int:
    """The chunks of ``collection_id`` passing ``where`` (from ``documents.chunk_count``), counted up
    to ``EXACT_MAX_ROWS + 1``: reads at most that many documents."""
    from sqlalchemy import text

    cap = EXACT_MAX_ROWS + 1
    sql = (
        "SELECT count(*) AS docs, coalesce(sum(n), 0) AS chunks FROM ("
        f"SELECT d.chunk_count AS n FROM agentrag.documents d WHERE d.collection_id = {int(collection_id)}"
        f" AND ({where}) LIMIT {cap}) s"
    )
    row = conn.execute(text(sql), params).one()
    return cap if row.docs >= cap else min(int(row.chunks), cap)


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
) -> LegPlan:
    """The legs' plan for one collection (``count``: whether a leg needs the scope's size)."""
    indexed = int(indexed_rows)
    if where.strip() == "TRUE" or not count:
        vector = "hnsw" if indexed >= 0 else "scan"
        return LegPlan(name, vector, "bm25-top", None, indexed, ef_search, None, "no scope or filter")
    if not ENABLED:
        return LegPlan(name, "hnsw-iterative", "bm25-slices", None, indexed, ef_search, None, "planner off")
    rows = scope_rows(conn, collection_id, where, params)
    if rows <= EXACT_MAX_ROWS:
        why = f"scope of {rows} chunks <= {EXACT_MAX_ROWS}: exact vector scan, BM25 over the scope's postings"
        return LegPlan(name, "exact", "bm25-scope", rows, indexed, None, None, why)
    if indexed < 0:
        why = "no HNSW index yet: the vector leg scans"
        return LegPlan(name, "scan", "bm25-slices", rows, indexed, ef_search, None, why)
    # a uniformly spread scope of `rows` in `indexed` needs depth * indexed / rows tuples visited
    need = SCAN_MARGIN * depth * max(indexed, rows) // max(rows, 1)
    tuples = max(MIN_MAX_SCAN_TUPLES, min(MAX_MAX_SCAN_TUPLES, need))
    why = f"scope of more than {EXACT_MAX_ROWS} chunks: iterative HNSW scan, BM25 ranking sent in slices"
    return LegPlan(name, "hnsw-iterative", "bm25-slices", rows, indexed, ef_search, tuples, why)


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
) -> list[tuple[str, float]]:
    """The vector leg as an exact scan of the scope's rows: ``[(chunk_id, similarity), ...]``."""
    from sqlalchemy import text

    sql = vector_sql(collection_id, dimensions, distance, where, exact=True)
    rows = conn.execute(text(sql), {**params, "qvec": query_vector, "depth": int(depth)}).all()
    return [(row.id, float(row.score)) for row in rows]


_SORTED_IDS: OrderedDict[tuple[int, int, int], np.ndarray] = OrderedDict()
_SORTED_IDS_LOCK = threading.Lock()
_SORTED_IDS_KEPT = 8


def sorted_byte_ids(cached: CachedBM25) -> np.ndarray:
    """The index's chunk ids as a fixed-width bytes array (sorted, as the positions are): a
    C-speed ``searchsorted``. Kept for the last few indexes searched with a scope."""
    import numpy as np

    key = (cached.collection_id, cached.version, len(cached.chunk_ids))
    with _SORTED_IDS_LOCK:
        found = _SORTED_IDS.get(key)
        if found is not None:
            _SORTED_IDS.move_to_end(key)
            return found
    ids = np.array([i.encode("utf-8") for i in cached.chunk_ids.tolist()], dtype=bytes)
    with _SORTED_IDS_LOCK:
        _SORTED_IDS[key] = ids
        while len(_SORTED_IDS) > _SORTED_IDS_KEPT:
            _SORTED_IDS.popitem(last=False)
    return ids


def scope_bm25_leg(
    conn: Connection,
    cached: CachedBM25,
    *,
    collection_id: int,
    query: str,
    where: str,
    params: dict[str, Any],
    depth: int,
) -> list[tuple[str, float]]:
    """BM25 ranked over the scope's chunks only: ``[(chunk_id, bm25_score), ...]`` best first.

    The scope's chunk ids come from SQL under ``where`` (so the scope is enforced in SQL); their
    positions in the index keep the matching chunks, then the first ``depth`` in BM25 order
    (score descending, ties by chunk id): the same rows the slices of :func:`lexical_leg` find.
    """
    import numpy as np
    from sqlalchemy import text

    sql = (
        "SELECT c.id FROM agentrag.chunks c JOIN agentrag.documents d ON d.id = c.document_id"
        f" WHERE c.collection_id = {int(collection_id)} AND ({where})"
    )
    scope = [str(i).encode("utf-8") for i in conn.execute(text(sql), params).scalars()]
    positions, scores = cached.index.match(query)
    if not scope or len(positions) == 0:
        return []
    ids = sorted_byte_ids(cached)
    wanted = np.array(scope, dtype=bytes)
    at = np.searchsorted(ids, wanted)
    inside = at < len(ids)
    at = at[inside]
    at = at[ids[at] == wanted[inside]]  # a chunk written after the index was built has no position
    keep = np.isin(positions, at)
    ranked, ranked_scores = first_ranked(positions[keep], scores[keep], depth)
    return [(str(i), float(s)) for i, s in zip(cached.chunk_ids[ranked], ranked_scores, strict=True)]
