"""How realistic is the scale benchmark's synthesis, and what recall does pgvector's HNSW get on it?

    .venv/bin/python -m benchmarks.scale_synthesis realism [--chunks 1000000]
    .venv/bin/python -m benchmarks.scale_synthesis recall --chunks 200000 [--m 16] \
        [--ef-construction 64] [old|new ...]

``realism``: for the real SciFact passages (5,183 all-MiniLM-L6-v2 vectors) and for synthetic
corpora of the same size and of ``--chunks`` chunks (``new``: benchmarks/scale.py's synthesis;
``old``: the previous one, a passage and one neighbour, weight 0.55..0.9, isotropic noise 0.45),
the distribution of each vector's cosine distance to its nearest other vector (p10 / p50 / p90,
600 sampled vectors), the local intrinsic dimensionality (LID, the Levina-Bickel maximum
likelihood estimate from the 20 nearest neighbours, median) and, for 300 SciFact test queries, the
median distance to their 1st and 10th nearest chunk. A real corpus ``N`` times larger than SciFact
would have its nearest-neighbour distances shrink by about ``N ** (1 / LID)`` (Euclidean): the row
"real, extrapolated" is that prediction from SciFact's own LID.

``recall``: each synthesis at ``--chunks`` into a bare unlogged table with an HNSW index
(``--m``, ``--ef-construction``; timed), recall@10 of ``--queries`` test queries against the exact
ranking (numpy) at several ``hnsw.ef_search``, and the raw query's p50 at each. Results: RESULTS.md
"Scale".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.scale import DEFAULT_DATA, DIMS, cache_dir, mixtures, real_vectors, scifact

EF_SEARCHES = (40, 100, 200, 400)


def old_synthesis(base: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """The previous synthesis: a passage, one of its 10 nearest (weight 0.55..0.9), isotropic noise 0.45."""
    from benchmarks.scale import topic_neighbours

    rng = np.random.default_rng(seed)
    nbrs = topic_neighbours(base)
    primary = rng.integers(0, len(base), n)
    partner = nbrs[primary, rng.integers(0, nbrs.shape[1], n)]
    w = rng.uniform(0.55, 0.9, n).astype(np.float32)[:, None]
    v = w * base[primary] + (1 - w) * base[partner]
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    v += rng.standard_normal(v.shape, dtype=np.float32) * np.float32(0.45 / np.sqrt(DIMS))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def corpus(kind: str, base: np.ndarray, n: int, noise: float) -> np.ndarray:
    return old_synthesis(base, n) if kind == "old" else mixtures(n, base, noise=noise)[2]


def neighbour_distances(points: np.ndarray, corpus: np.ndarray, k: int, skip_self: bool) -> np.ndarray:
    """Sorted cosine distances of each point to its ``k`` nearest corpus vectors (itself left out)."""
    out = []
    take = k + 1 if skip_self else k
    for lo in range(0, len(points), 256):
        sims = points[lo : lo + 256] @ corpus.T
        top = -np.partition(-sims, take, axis=1)[:, :take]
        out.append(np.sort(1 - top, axis=1))
    d = np.concatenate(out)
    return d[:, 1:] if skip_self else d


def lid(distances: np.ndarray) -> float:
    """Median Levina-Bickel LID from sorted cosine distances (as Euclidean distances of unit vectors)."""
    e = np.sqrt(np.maximum(2 * distances, 1e-12))
    return float(np.median(-1 / np.mean(np.log(e[:, :-1] / e[:, -1:]), axis=1)))


def realism_row(label: str, vectors: np.ndarray, queries: np.ndarray) -> tuple[str, float, float]:
    rng = np.random.default_rng(5)
    sample = vectors[rng.choice(len(vectors), min(len(vectors), 600), replace=False)]
    d = neighbour_distances(sample, vectors, 20, skip_self=True)
    dq = neighbour_distances(queries, vectors, 20, skip_self=False)
    p10, p50, p90 = np.percentile(d[:, 0], [10, 50, 90])
    estimate = lid(d)
    row = (
        f"| {label} | {len(vectors):,} | {p10:.3f} / {p50:.3f} / {p90:.3f} | {estimate:.1f} | "
        f"{np.median(dq[:, 0]):.3f} / {np.median(dq[:, 9]):.3f} |"
    )
    return row, float(p50), estimate


def realism(base: np.ndarray, queries: np.ndarray, n: int, noise: float) -> None:
    print(
        "| corpus | vectors | distance to nearest other vector p10 / p50 / p90 | LID (k=20) | "
        "query: 1st / 10th nearest |\n|---|---:|---|---:|---|"
    )
    row, p50, real_lid = realism_row("real SciFact passages", base, queries)
    print(row, flush=True)
    for size in sorted({len(base), n}):
        if size != len(base):
            euclid = np.sqrt(2 * p50) / (size / len(base)) ** (1 / real_lid)
            print(
                f"| real, extrapolated from SciFact's LID | {size:,} | - / {euclid**2 / 2:.3f} / - | - | - |"
            )
        for kind in ("new", "old"):
            label = f"{kind} synthesis" + (
                f" (noise {noise})" if kind == "new" else " (isotropic noise 0.45)"
            )
            print(realism_row(label, corpus(kind, base, size, noise), queries)[0], flush=True)


def recall(
    kind: str, base: np.ndarray, queries: np.ndarray, n: int, noise: float, m: int, ef_construction: int
) -> str:
    import psycopg
    from pgvector.psycopg import register_vector
    from sqlalchemy.engine import make_url

    from benchmarks._db import bench_url

    v = corpus(kind, base, n, noise)
    exact = np.argsort(-(queries @ v.T), axis=1)[:, :10]
    url = make_url(bench_url()).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS bench_synthesis")
        conn.execute(f"CREATE UNLOGGED TABLE bench_synthesis (id int, e vector({DIMS}))")
        with conn.cursor().copy("COPY bench_synthesis (id, e) FROM STDIN WITH (FORMAT BINARY)") as cp:
            cp.set_types(["int4", "vector"])
            for i in range(n):
                cp.write_row((i, v[i]))
        conn.execute("SET maintenance_work_mem = '2GB'")
        t = time.perf_counter()
        conn.execute(
            "CREATE INDEX ON bench_synthesis USING hnsw (e vector_cosine_ops)"
            f" WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
        )
        build = time.perf_counter() - t
        cells = []
        for ef in EF_SEARCHES:
            conn.execute(f"SET hnsw.ef_search = {ef}")
            found, ms = [], []
            for i, vec in enumerate(queries):
                t = time.perf_counter()
                rows = conn.execute(
                    "SELECT id FROM bench_synthesis ORDER BY e <=> %s LIMIT 10", (vec,)
                ).fetchall()
                ms.append((time.perf_counter() - t) * 1000)
                found.append(len({r[0] for r in rows} & set(exact[i].tolist())) / 10)
            cells.append(f"{np.mean(found):.3f} ({statistics.median(ms):.1f} ms)")
        conn.execute("DROP TABLE bench_synthesis")
    return (
        f"| {n:,} | {kind} | m={m}, ef_construction={ef_construction} | {' | '.join(cells)} | {build:.0f} s |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.scale import NOISE

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("realism", "recall"))
    parser.add_argument("kinds", nargs="*", default=["new"], help="new (the default) and/or old")
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--noise", type=float, default=NOISE)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--cache", default=None)
    args = parser.parse_args(argv)
    cache = cache_dir(args.cache)
    passages, texts = scifact(Path(args.data))
    label = Path(args.data).name
    base = real_vectors(passages, cache, f"{label}-passages")
    queries = real_vectors(texts, cache, f"{label}-queries")
    if args.what == "realism":
        realism(base, queries[:300], args.chunks, args.noise)
        return 0
    print(
        "| chunks | synthesis | HNSW | "
        + " | ".join(f"ef_search {ef}: recall@10 (p50)" for ef in EF_SEARCHES)
        + " | HNSW build |\n|---:|---|---|"
        + "---:|" * (len(EF_SEARCHES) + 1)
    )
    for kind in args.kinds:
        print(
            recall(
                kind, base, queries[: args.queries], args.chunks, args.noise, args.m, args.ef_construction
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
