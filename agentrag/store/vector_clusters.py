"""``Store.optimize``'s coarse clusters: centroids for a large collection and each chunk's nearest one.

A scope the planner scans exactly reads only its rows in the clusters nearest the query
(:mod:`agentrag.retrieval.clusters`, migration 0056). This module writes what that reads:

* :func:`fit_clusters` (from ``Store.optimize``): for a cosine collection of at least
  :data:`agentrag.retrieval.clusters.MIN_FIT_CHUNKS` chunks with no fit, or one that has grown or
  shrunk by half since its fit,
  ``K`` (:func:`clusters_for`) spherical k-means centroids of a sample of its vectors (numpy), then
  every chunk's nearest centroid. The collection's HNSW index is dropped first in its own short
  transaction and built again after (rewriting every row under a live graph maintains it row by row:
  134 s for 100k chunks in the prototype); meanwhile its searches scan exactly, as during a
  ``reembed``. The centroids and the rows' clusters change in ONE transaction under the collection's
  exclusive write lock: a search sees the old fit with its clusters or the new one with its own.
  Chunks written between the read of the vectors and that transaction get no cluster (NULL: always
  read) until the next fit.
* :func:`assign` (every write: the ingest's COPY, Ray's, sync's layout rewrites; sync's renames copy
  the cluster with the vector): the nearest centroid of each new vector under the fit this write
  transaction sees (its id read under the shared write lock; the centroids cached per fit).
* ``reembed`` deletes the fit and empties the clusters in its swap (new vectors); ``optimize``
  fits again. ``Store.optimize(name, clusters=False)`` deletes a fit: its scopes are scanned whole.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrag.retrieval import clusters
from agentrag.retrieval.catalog import VECTOR_TYPES

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Connection

    from agentrag.store.collections import Collection
    from agentrag.store.store import Store

__all__ = [
    "ClusterFit",
    "assign",
    "clusters_for",
    "drop_clusters",
    "fit_clusters",
    "kmeans",
]

#: chunks per cluster on average (K = chunks / this, a power of two, 16..4096): 512 at 100k, where the
#: prototype measured K = 128, 256 and 512 (512 the only one at recall@10 >= 0.95)
CHUNKS_PER_CLUSTER = 200
SAMPLE = 30_000  # k-means runs on a sample of this many vectors
ROUNDS = 12
REFIT_CHANGE = 0.5  # a fit is redone when the collection's chunks changed by this share since
SMALL_BATCH = 256  # rows assigned one by one (see nearest)

_lock = threading.Lock()
_cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()


@dataclass(frozen=True, slots=True)
class ClusterFit:
    """What :func:`fit_clusters` did: ``action`` "fitted" | "kept" | "dropped" | "none" (and why); with
    ``dry_run``, what it would do: "would fit" | "would drop" (or "kept" | "none", done by doing nothing)."""

    action: str
    k: int = 0
    chunks: int = 0
    seconds: float = 0.0
    reason: str = ""
    #: of ``seconds``: reading the vectors, k-means and the assignment, the rows' rewrite, the HNSW build
    parts: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    def __str__(self) -> str:
        if self.action == "fitted":
            read, fit, rewrite, index = self.parts
            return (
                f"clusters fitted: K={self.k} over {self.chunks} chunks in {self.seconds:.1f} s"
                f" (read {read:.1f}, k-means {fit:.1f}, rows {rewrite:.1f}, HNSW index {index:.1f})"
            )
        if self.action == "would fit":
            return f"clusters would be fitted: K={self.k} over {self.chunks} chunks ({self.reason})"
        if self.action == "would drop":
            return f"clusters would be dropped: {self.reason}"
        return f"clusters {self.action}: {self.reason}"


def clusters_for(chunks: int) -> int:
    """K for a collection of ``chunks`` chunks (see CHUNKS_PER_CLUSTER)."""
    k = 16
    while k < clusters.MAX_K and k * 2 * CHUNKS_PER_CLUSTER <= chunks * 1.5:
        k *= 2
    return k


def kmeans(unit: np.ndarray, k: int, *, seed: int = 39, rounds: int = ROUNDS) -> np.ndarray:
    """Spherical k-means: ``k`` unit centroids (float32) of the unit rows (a SAMPLE-row sample)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sample = unit[rng.choice(len(unit), size=min(len(unit), SAMPLE), replace=False)]
    centroids = sample[rng.choice(len(sample), size=k, replace=False)].copy()
    for _ in range(rounds):
        nearest = np.argmax(sample @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, nearest, sample)
        norms = np.linalg.norm(sums, axis=1)
        filled = norms > 0  # an empty cluster keeps its centroid
        centroids[filled] = sums[filled] / norms[filled, None]
    return centroids.astype(np.float32)


def nearest(centroids: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Each row's nearest centroid (cosine), in slices of 20,000 rows. A few rows go one by one (a
    matrix-vector product each): a small matrix product wakes BLAS's threads, which on a loaded 2-core
    machine cost 25 ms a call for 10 rows (0.5 ms single-threaded, 30 us a row as here)."""
    import numpy as np

    v = np.asarray(vectors, dtype=np.float32)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    if len(v) <= SMALL_BATCH:
        return np.array([int(np.argmax(centroids @ row)) for row in v], dtype=np.int64)
    return np.concatenate(
        [np.argmax(v[s : s + 20_000] @ centroids.T, axis=1) for s in range(0, len(v), 20_000)]
    )


def _centroids(conn: Connection, collection_id: int) -> tuple[int, np.ndarray] | None:
    """The fit this transaction sees: (fit id, centroids), the centroids cached per fit."""
    import numpy as np
    from sqlalchemy import text

    fit = conn.execute(
        text("SELECT fit FROM agentrag.vector_clusters WHERE collection_id = :c"), {"c": int(collection_id)}
    ).scalar()
    if fit is None:
        return None
    key = (int(collection_id), int(fit))
    with _lock:
        found = _cache.get(key)
    if found is None:
        row = conn.execute(
            text("SELECT k, dimensions, centroids FROM agentrag.vector_clusters WHERE collection_id = :c"),
            {"c": int(collection_id)},
        ).one()
        found = np.frombuffer(bytes(row.centroids), dtype="<f4").reshape(int(row.k), int(row.dimensions))
        with _lock:
            _cache[key] = found
            while len(_cache) > 64:
                _cache.popitem(last=False)
    return int(fit), found


def assign(conn: Connection, collection_id: int, vectors: list[np.ndarray | None]) -> list[list[int] | None]:
    """For each document's vectors (None: none), its chunks' clusters under the fit ``conn``'s
    transaction sees, all documents in one product; None for every document when the collection
    has no fit."""
    import numpy as np

    fit = _centroids(conn, collection_id)
    if fit is None:
        return [None] * len(vectors)
    _fit, centroids = fit
    dims = centroids.shape[1]
    usable = [
        v is not None and getattr(v, "ndim", 0) == 2 and len(v) > 0 and v.shape[1] == dims for v in vectors
    ]
    rows = [v for v, ok in zip(vectors, usable, strict=True) if ok]
    if not rows:
        return [None] * len(vectors)
    flat = [int(j) for j in nearest(centroids, np.vstack(rows))]  # type: ignore[arg-type]
    out: list[list[int] | None] = []
    at = 0
    for v, ok in zip(vectors, usable, strict=True):
        if ok:
            n = len(v)  # type: ignore[arg-type]
            out.append(flat[at : at + n])
            at += n
        else:
            out.append(None)
    return out


def drop_clusters(conn: Connection, collection_id: int) -> bool:
    """Delete the collection's fit in ``conn``'s transaction (its chunks' clusters are then unread,
    and rewritten by the next fit); whether there was one."""
    from sqlalchemy import text

    return bool(
        conn.execute(
            text("DELETE FROM agentrag.vector_clusters WHERE collection_id = :c"), {"c": int(collection_id)}
        ).rowcount
    )


def _read_vectors(conn: Connection, coll: Collection) -> tuple[list[str], np.ndarray]:
    import numpy as np
    from sqlalchemy import text

    column = VECTOR_TYPES[coll.vector_type]
    ids: list[str] = []
    rows: list[np.ndarray] = []
    result = conn.execution_options(stream_results=True, max_row_buffer=5000).execute(
        text(f"SELECT id, {column}::vector AS v FROM agentrag.chunks WHERE collection_id = :c"),
        {"c": int(coll.id)},
    )
    for chunk_id, vector in result:
        ids.append(chunk_id)
        rows.append(np.asarray(vector.to_numpy() if hasattr(vector, "to_numpy") else vector, np.float32))
    return ids, (np.vstack(rows) if rows else np.zeros((0, coll.dimensions), np.float32))


def fit_clusters(
    store: Store, coll: Collection, *, enabled: bool = True, dry_run: bool = False
) -> ClusterFit:
    """Fit, keep or drop the collection's clusters (see the module); what was done (``dry_run``: what
    would be, nothing written)."""
    from sqlalchemy import text

    from agentrag.store.collections import EXCLUSIVE_WRITE_LOCK_SQL, write_lock_params

    with store.engine.connect() as conn:
        chunks = int(
            conn.execute(
                text("SELECT count(*) FROM agentrag.chunks WHERE collection_id = :c"), {"c": int(coll.id)}
            ).scalar_one()
        )
        fitted = conn.execute(
            text("SELECT chunks, k FROM agentrag.vector_clusters WHERE collection_id = :c"),
            {"c": int(coll.id)},
        ).first()
        conn.rollback()
    if not enabled or coll.distance != "cosine" or chunks < clusters.MIN_FIT_CHUNKS:
        why = (
            "clusters=False"
            if not enabled
            else f"{coll.distance} distance (cosine only)"
            if coll.distance != "cosine"
            else f"{chunks} chunks (< {clusters.MIN_FIT_CHUNKS}): exact scans"
        )
        if fitted is not None and dry_run:
            return ClusterFit("would drop", reason=why)
        if fitted is not None:
            with store.engine.begin() as conn:
                drop_clusters(conn, coll.id)
            return ClusterFit("dropped", reason=why)
        return ClusterFit("none", reason=why)
    if fitted is not None and abs(chunks - int(fitted.chunks)) < REFIT_CHANGE * int(fitted.chunks):
        return ClusterFit("kept", int(fitted.k), chunks, reason=f"fitted over {int(fitted.chunks)} chunks")
    if dry_run:
        why = (
            "no fit"
            if fitted is None
            else f"fitted over {int(fitted.chunks)} chunks: changed by half or more"
        )
        return ClusterFit("would fit", clusters_for(chunks), chunks, reason=why)
    started = time.perf_counter()
    with store.engine.connect() as conn:
        ids, vectors = _read_vectors(conn, coll)
        conn.rollback()
    read = time.perf_counter() - started
    if len(ids) < clusters.MIN_FIT_CHUNKS:
        return ClusterFit("none", reason=f"{len(ids)} chunks read (< {clusters.MIN_FIT_CHUNKS})")
    import numpy as np

    k = clusters_for(len(ids))
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    centroids = kmeans(unit, k)
    assigned = nearest(centroids, unit)
    del unit, vectors
    fitted_at = time.perf_counter()
    rewrite, index = _rewrite(
        store, coll, ids, assigned, centroids, EXCLUSIVE_WRITE_LOCK_SQL, write_lock_params
    )
    parts = (read, fitted_at - started - read, rewrite, index)
    return ClusterFit("fitted", k, len(ids), time.perf_counter() - started, parts=parts)


def _rewrite(store, coll, ids, assigned, centroids, lock_sql, lock_params) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """The HNSW index dropped, the fit and every row's cluster in one transaction, the index built;
    (seconds of the rows' rewrite, of the index build)."""
    import functools

    from sqlalchemy import text

    from agentrag.store.connection import retrying
    from agentrag.store.reembed import drop_vector_indexes
    from agentrag.store.vector_index import build_index, index_exists

    started = time.perf_counter()
    dropped = index_exists(store, coll)
    retrying("dropping the vector index to fit clusters", functools.partial(drop_vector_indexes, store, coll))
    try:
        with store.engine.begin() as conn:
            conn.execute(text(lock_sql), lock_params(coll.id))
            conn.execute(
                text(
                    "CREATE TEMPORARY TABLE agentrag_clusters (id text PRIMARY KEY, cluster smallint)"
                    " ON COMMIT DROP"
                )
            )
            raw = conn.connection.driver_connection
            assert raw is not None
            with raw.cursor() as cur, cur.copy("COPY agentrag_clusters (id, cluster) FROM STDIN") as copy:
                for chunk_id, j in zip(ids, assigned.tolist(), strict=True):
                    copy.write_row((chunk_id, j))
            # rows written since the read get no cluster (always read) until the next fit
            conn.execute(
                text(
                    "UPDATE agentrag.chunks c SET cluster = a.cluster FROM (SELECT x.id, s.cluster"
                    " FROM agentrag.chunks x LEFT JOIN agentrag_clusters s ON s.id = x.id"
                    " WHERE x.collection_id = :c) a"
                    " WHERE c.id = a.id AND c.cluster IS DISTINCT FROM a.cluster"
                ),
                {"c": int(coll.id)},
            )
            conn.execute(
                text(
                    "INSERT INTO agentrag.vector_clusters"
                    " (collection_id, fit, k, dimensions, vector_type, centroids, chunks)"
                    " VALUES (:c, :fit, :k, :dims, :vt, :centroids, :chunks)"
                    " ON CONFLICT (collection_id) DO UPDATE SET fit = EXCLUDED.fit, k = EXCLUDED.k,"
                    " dimensions = EXCLUDED.dimensions, vector_type = EXCLUDED.vector_type,"
                    " centroids = EXCLUDED.centroids, chunks = EXCLUDED.chunks, fitted_at = now()"
                ),
                {
                    "c": int(coll.id),
                    "fit": secrets.randbits(62),
                    "k": int(centroids.shape[0]),
                    "dims": int(centroids.shape[1]),
                    "vt": coll.vector_type,
                    "centroids": centroids.astype("<f4").tobytes(),
                    "chunks": len(ids),
                },
            )
    finally:
        rewritten = time.perf_counter()
        if dropped:
            build_index(store, coll, bulk_load=True)
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("ANALYZE agentrag.chunks"))
    return rewritten - started, time.perf_counter() - rewritten
