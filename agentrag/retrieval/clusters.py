"""A scoped exact vector scan that reads only the scope's rows in the clusters nearest the query.

A collection fitted by ``Store.optimize`` (:mod:`agentrag.store.vector_clusters`, migration 0056) has
``K`` unit centroids (spherical k-means of its vectors) and each chunk the id of its nearest one in
``chunks.cluster``. When the scope planner scans a scope exactly (:mod:`agentrag.retrieval.scoped`:
a principal seeing 10 % of a 100k-chunk collection, 10,000 rows) and the scope holds at least
:data:`MIN_SCOPE_ROWS` chunks, the vector leg reads only the scope's rows in the ``P`` clusters whose
centroids are nearest the query (``P`` from the scope's share, :func:`probes`), through the index on
``(cluster, document_id)``, and ranks them exactly: about ``P / K`` of the scope's rows instead of
all of them. Rows with no cluster (written before the fit, or by a writer that did not assign one)
are always read: correctness never depends on an assignment. A result short of ``depth`` rows is
re-run as the plain exact scan, as a short HNSW walk is.

The ranking is approximate, as the HNSW walk's is: recall@10 against the exact scan 0.95 or more on
held-out queries and principals (benchmarks/RESULTS.md, Permissions). The plan says so
(``vector=clusters probes=19/512``). Ways to keep the plain exact scan: ``Store.optimize(name,
clusters=False)`` drops a collection's centroids; :data:`ENABLED` False turns the plan off for the
process.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from agentrag.retrieval.catalog import DISTANCES, vector_expr

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection

__all__ = [
    "ENABLED",
    "MIN_SCOPE_ROWS",
    "cached_centroids",
    "cluster_sql",
    "cluster_vector_leg",
    "nearest_clusters",
    "probes",
]

#: False: scopes planned exact are scanned whole even in a fitted collection (the measurement's
#: "before" in benchmarks/acl.py, and an escape hatch).
ENABLED = True
#: A collection of fewer chunks is not fitted (``Store.optimize``, agentrag.store.vector_clusters): a
#: scope large enough for the clusters to pay (MIN_SCOPE_ROWS) is planned exact only in a collection of
#: at least ``rows**2 / (EXACT_WALK_COST * depth)`` = 5,300 chunks at depth 100; below 20,000 such
#: scopes are a large share, whose scan reads most of the rows anyway.
MIN_FIT_CHUNKS = 20_000
#: The most centroids a fit takes (agentrag.store.vector_clusters.clusters_for).
MAX_K = 4096
#: A scope of fewer chunks is scanned whole: its exact scan is cheap already, and a cluster read
#: would return fewer than ``depth`` rows and be re-run.
MIN_SCOPE_ROWS = 4_000
#: ``P = ceil(K * PROBE_SHARE * share ** -PROBE_POWER)``, at least ``MIN_PROBES``: the least P
#: reaching recall@10 >= 0.96 within other principals' scopes (2-20 % of a 100k-chunk collection)
#: for other queries than the ones reported (benchmarks/cluster_probes.py). Within a smaller scope
#: the ten nearest are farther and spread over more clusters, so P grows as the share shrinks.
PROBE_SHARE = 0.0185
PROBE_POWER = 0.4
MIN_PROBES = 4
#: The most of the scope's rows a cluster read may expect to read (P / K): above it, the whole scan.
MAX_PROBE_SHARE = 0.5
_CACHE_SIZE = 64

_lock = threading.Lock()
_cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()


def probes(k: int, share: float) -> int:
    """How many of ``k`` clusters a scope of ``share`` of the collection reads (see PROBE_SHARE)."""
    share = min(max(share, 1e-6), 1.0)
    return min(k, max(MIN_PROBES, math.ceil(k * PROBE_SHARE * share**-PROBE_POWER)))


def worth_it(k: int, p: int, rows: int, depth: int) -> bool:
    """Whether a cluster read of ``p`` of ``k`` clusters suits a scope of ``rows`` chunks: enough rows
    expected back (twice ``depth``) and markedly fewer than the whole scope."""
    return rows >= MIN_SCOPE_ROWS and p <= MAX_PROBE_SHARE * k and rows * p / k >= 2 * depth


def cached_centroids(conn: Connection, collection_id: int, fit: int) -> np.ndarray | None:
    """The unit centroids (``K x dims`` float32) of the collection's fit ``fit``, read on ``conn``
    once per process and fit; None when the collection holds another fit in this snapshot."""
    import numpy as np
    from sqlalchemy import text

    key = (int(collection_id), int(fit))
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    row = conn.execute(
        text("SELECT fit, k, dimensions, centroids FROM agentrag.vector_clusters WHERE collection_id = :c"),
        {"c": int(collection_id)},
    ).first()
    if row is None or int(row.fit) != int(fit):
        return None
    centroids = np.frombuffer(bytes(row.centroids), dtype="<f4").reshape(int(row.k), int(row.dimensions))
    with _lock:
        _cache[key] = centroids
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return centroids


def nearest_clusters(centroids: np.ndarray, query_vector: np.ndarray, p: int) -> list[int]:
    """The ``p`` clusters whose centroids are nearest the query (cosine), nearest first."""
    import numpy as np

    q = np.asarray(query_vector, dtype=np.float32)
    sims = centroids @ (q / max(float(np.linalg.norm(q)), 1e-12))
    top = np.argpartition(-sims, p - 1)[:p] if p < len(sims) else np.arange(len(sims))
    return [int(j) for j in top[np.argsort(-sims[top])]]


def cluster_sql(dimensions: int, distance: str, vector_type: str = "vector") -> str:
    """The exact scan's statement (:func:`agentrag.retrieval.vector.vector_sql`, exact, by document
    ids) over the scope's rows in the probed clusters (``:probes``) and its rows with no cluster:
    two branches, each through ``chunks_cluster_c`` (migration 0056). PostgreSQL may run them as a
    parallel append; the same rows as one ORed bitmap took 0.35-0.43x the whole scan's time against
    0.26-0.38x for this form (benchmarks.acl, three runs and six)."""
    _opclass, op, similarity = DISTANCES[distance]
    dims = int(dimensions)
    expr = f"{vector_expr(dims, vector_type, 'c.')} {op} CAST(:qvec AS {vector_type}({dims}))"
    docs = "c.document_id COLLATE \"C\" = ANY(string_to_array(:v_docs, ','))"
    return (
        "WITH hits AS MATERIALIZED (\n"
        "    SELECT id, distance FROM (\n"
        f"    SELECT c.id, {expr} AS distance FROM agentrag.chunks c\n"
        f"    WHERE c.cluster = ANY(CAST(:probes AS smallint[])) AND {docs}\n"
        "    UNION ALL\n"
        f"    SELECT c.id, {expr} AS distance FROM agentrag.chunks c\n"
        f"    WHERE c.cluster IS NULL AND {docs}\n"
        "    OFFSET 0) s\n"
        "    ORDER BY distance + 0\n"
        "    LIMIT :depth\n"
        ")\n"
        f"SELECT id, distance, {similarity.format(d='distance')} AS score\n"
        'FROM hits ORDER BY distance, id COLLATE "C"'
    )


def cluster_vector_leg(
    conn: Connection,
    *,
    collection_id: int,
    dimensions: int,
    distance: str,
    query_vector: np.ndarray,
    depth: int,
    documents: tuple[str, ...],
    vector_type: str,
    fit: int,
    p: int,
    exact: Any,
) -> tuple[list[tuple[str, float]], bool]:
    """``([(chunk_id, similarity), ...], fell_back)``: the scope's rows (``documents``, read by the plan
    in this snapshot) in the ``p`` clusters nearest the query, ranked exactly; ``exact()`` (the whole
    scan) instead when the centroids are gone from this snapshot or fewer than ``depth`` rows came."""
    from sqlalchemy import text

    from agentrag.retrieval.vector import joined_ids

    centroids = cached_centroids(conn, collection_id, fit)
    if centroids is None:
        return exact(), True
    bound = {
        "qvec": query_vector,
        "depth": int(depth),
        "v_docs": joined_ids(documents),
        "probes": nearest_clusters(centroids, query_vector, p),
    }
    rows = conn.execute(text(cluster_sql(dimensions, distance, vector_type)), bound).all()
    if len(rows) < int(depth):
        return exact(), True
    return [(row.id, float(row.score)) for row in rows], False
