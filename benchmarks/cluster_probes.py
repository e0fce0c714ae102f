"""Fit the probe rule of the library's vector clusters (``agentrag.retrieval.clusters.probes``) on fit data.

    .venv/bin/python -m benchmarks.cluster_probes [--cache DIR] [--target 0.96] [--vector-type vector]

Needs the collection ``benchmarks.acl --keep`` leaves (100,000 chunks, 1,000 groups), fitted by
``Store.optimize`` (its centroids and chunks' clusters are read from the database, as the library
wrote them). For principals that ``benchmarks.acl`` never reports (groups 500 and up: 2, 5, 10 and
20 % of the collection) and SciFact test queries it never sends (100-199), the least ``P`` whose
recall@10 against the exact scan of the principal's rows reaches ``--target``, in numpy; then the rule
``P = ceil(K * a * share ** -b)``: ``b`` by least squares over the shares in log space, ``a`` the least
that gives every share at least its own ``P``. The figures reported (benchmarks.acl: 1/10/50 %, groups
0..; queries 0-49) are never read here.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks import acl, scale

SHARES = (0.02, 0.05, 0.10, 0.20)
FIRST_GROUP = 500  # the fit principals' groups: 500.. (benchmarks.acl reports groups 0..)
FIT_QUERIES = range(100, 200)


def least_probes(
    unit: np.ndarray, assign: np.ndarray, centroids: np.ndarray, queries: np.ndarray, target: float
) -> tuple[int, float]:
    """The least P reaching mean recall@10 >= target over ``queries`` within the rows ``unit``."""
    truth = np.argsort(-(queries @ unit.T), axis=1)[:, : acl.TOP_K]
    order = np.argsort(-(queries @ centroids.T), axis=1)
    rank = np.empty_like(order)
    rows = np.arange(len(queries))[:, None]
    rank[rows, order] = np.arange(order.shape[1])[None, :]
    # a true neighbour is found when its cluster's rank among the query's clusters is below P
    need = rank[rows, assign[truth]]
    for p in range(1, len(centroids) + 1):
        recall = float(np.mean(need < p))
        if recall >= target:
            return p, recall
    return len(centroids), 1.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cluster_probes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--data", default=str(scale.DEFAULT_DATA))
    parser.add_argument("--cache", help="where benchmarks.acl cached the query vectors")
    parser.add_argument("--target", type=float, default=0.96)
    parser.add_argument("--vector-type", default="vector")
    args = parser.parse_args(argv)

    from sqlalchemy import text

    from benchmarks._db import bench_store

    _, queries = scale.scifact(Path(args.data))
    qvecs = np.asarray(
        scale.real_vectors(queries, scale.cache_dir(args.cache), f"{Path(args.data).name}-queries"),
        np.float32,
    )[list(FIT_QUERIES)]
    unitq = qvecs / np.linalg.norm(qvecs, axis=1, keepdims=True)
    store = bench_store()
    cid = int(store.collection(acl.collection_name(args.chunks, args.groups, args.vector_type)).id)
    with store.engine.connect() as conn:
        fit = conn.execute(
            text("SELECT k, dimensions, centroids FROM agentrag.vector_clusters WHERE collection_id = :c"),
            {"c": cid},
        ).one()
        rows = conn.execute(
            text(
                "SELECT c.embedding_half::vector AS h, c.embedding AS v, c.cluster, d.grants[1]"
                " FROM agentrag.chunks c JOIN agentrag.documents d ON d.id = c.document_id"
                " WHERE c.collection_id = :c"
            ),
            {"c": cid},
        ).all()
    centroids = np.frombuffer(bytes(fit.centroids), dtype="<f4").reshape(int(fit.k), int(fit.dimensions))
    vectors = np.array([np.asarray((r.v if r.v is not None else r.h).to_numpy(), np.float32) for r in rows])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assign = np.array([-1 if r.cluster is None else int(r.cluster) for r in rows])
    group = np.array([int(r.grants.rsplit("g", 1)[1]) for r in rows])
    if (assign < 0).any():
        raise SystemExit(f"{int((assign < 0).sum())} chunks without a cluster: run Store.optimize first")
    k = int(fit.k)
    found = []
    print(f"K = {k}; fit queries {FIT_QUERIES.start}-{FIT_QUERIES.stop - 1}; target recall@10 {args.target}")
    print("\n| share (groups) | rows | least P | recall@10 |\n|---|---:|---:|---:|")
    for share in SHARES:
        g = round(share * args.groups)
        inside = (group >= FIRST_GROUP) & (group < FIRST_GROUP + g)
        p, recall = least_probes(unit[inside], assign[inside], centroids, unitq, args.target)
        found.append((share, p))
        span = f"{FIRST_GROUP}-{FIRST_GROUP + g - 1}"
        print(f"| {share:.0%} ({span}) | {int(inside.sum())} | {p} | {recall:.3f} |")
    x = np.log([s for s, _ in found])
    y = np.log([p / k for _, p in found])
    b = -float(np.polyfit(x, y, 1)[0])
    a = max(p / (k * s**-b) for s, p in found)
    print(f"\nrule: P = ceil(K * {a:.4f} * share ** -{b:.3f})")
    for s, p in found:
        print(f"  share {s:.0%}: rule {math.ceil(k * a * s**-b)}, least {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
