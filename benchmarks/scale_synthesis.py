"""Does the scale benchmark's vector synthesis, not the index, decide its recall@10? (evidence)

    .venv/bin/python -m benchmarks.scale_synthesis gap
    .venv/bin/python -m benchmarks.scale_synthesis recall --chunks 100000 [--sources 1000] 2:0.45 3:0.05

``gap``: for 300 SciFact test queries, the median relative distance gap between the 10th and 11th
and between the 10th and 20th nearest neighbours (cosine), in the real SciFact passages and in
synthetic corpora of the same size: ``2:NOISE`` is benchmarks/scale.py's synthesis (a passage and
one of its 10 nearest, weight 0.55..0.9, isotropic noise of length NOISE); ``3:NOISE`` mixes 2 or 3
passages (Dirichlet weights, the primary heaviest) before the noise. ``recall``: each synthesis at
``--chunks``, optionally from ``--sources`` random passages only (more chunks per passage), into a
bare table with pgvector's default HNSW index (m=16, ef_construction=64); recall@10 of 100 test
queries against the exact ranking (numpy) at ef_search 40/100/200/400. Results: RESULTS.md "Scale".
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.scale import DEFAULT_DATA, DIMS, NEIGHBOURS, cache_dir, real_vectors, scifact


def synth(base: np.ndarray, n: int, noise: float, parts: int, seed: int = 0) -> np.ndarray:
    """``n`` unit vectors: mixtures of ``parts`` (2, or 2-3 for 3) neighbouring ``base`` rows plus noise."""
    rng = np.random.default_rng(seed)
    sims = base @ base.T
    np.fill_diagonal(sims, -np.inf)
    nbrs = np.argpartition(-sims, NEIGHBOURS, axis=1)[:, :NEIGHBOURS]
    primary = rng.integers(0, len(base), n)
    if parts == 2:
        w = rng.uniform(0.55, 0.9, n)[:, None]
        v = w * base[primary] + (1 - w) * base[nbrs[primary, rng.integers(0, NEIGHBOURS, n)]]
    else:
        k = rng.integers(2, 4, n)
        ws = rng.dirichlet([4, 1.5, 1.5], n)
        ws[k == 2, 2] = 0
        ws /= ws.sum(1, keepdims=True)
        pick = rng.permuted(np.tile(np.arange(NEIGHBOURS), (n, 1)), axis=1)[:, :2]
        v = (
            ws[:, :1] * base[primary]
            + ws[:, 1:2] * base[nbrs[primary, pick[:, 0]]]
            + ws[:, 2:3] * base[nbrs[primary, pick[:, 1]]]
        )
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    v = v + rng.standard_normal(v.shape) * (noise / np.sqrt(DIMS))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def gaps(queries: np.ndarray, corpus: np.ndarray) -> tuple[float, float, float]:
    """Medians of (d11 - d10) / d10, (d20 - d10) / d10 and d10 (cosine distances)."""
    d = 1 - queries @ corpus.T
    d = np.sort(np.partition(d, 20, axis=1)[:, :21], axis=1)
    return (
        float(np.median((d[:, 10] - d[:, 9]) / d[:, 9])),
        float(np.median((d[:, 19] - d[:, 9]) / d[:, 9])),
        float(np.median(d[:, 9])),
    )


def recall(base: np.ndarray, queries: np.ndarray, n: int, parts: int, noise: float) -> str:
    import psycopg
    from pgvector.psycopg import register_vector
    from sqlalchemy.engine import make_url

    from benchmarks._db import bench_url

    v = synth(base, n, noise, parts)
    g = gaps(queries[:300], v)
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
        conn.execute("SET maintenance_work_mem = '1GB'")
        t = time.perf_counter()
        conn.execute("CREATE INDEX ON bench_synthesis USING hnsw (e vector_cosine_ops)")
        build = time.perf_counter() - t
        q = queries[:100]
        exact = np.argsort(-(q @ v.T), axis=1)[:, :10]
        cells = []
        for ef in (40, 100, 200, 400):
            conn.execute(f"SET hnsw.ef_search = {ef}")
            found = []
            for i, vec in enumerate(q):
                rows = conn.execute(
                    "SELECT id FROM bench_synthesis ORDER BY e <=> %s LIMIT 10", (vec,)
                ).fetchall()
                found.append(len({r[0] for r in rows} & set(exact[i].tolist())) / 10)
            cells.append(f"{np.mean(found):.3f}")
        conn.execute("DROP TABLE bench_synthesis")
    return (
        f"| {n:,} | {len(base):,} ({n // len(base)}/passage) | {parts} passages, noise {noise} | "
        f"{g[0]:.4f} | {g[1]:.4f} | {' | '.join(cells)} | {build:.0f} s |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("gap", "recall"))
    parser.add_argument("configs", nargs="*", default=["2:0.45", "3:0.05"], help="PARTS:NOISE, PARTS 2 or 3")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--sources", type=int, default=None, help="use this many random passages only")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--cache", default=None)
    args = parser.parse_args(argv)
    configs = [(int(p), float(x)) for p, x in (c.split(":") for c in args.configs)]
    cache = cache_dir(args.cache)
    passages, texts = scifact(Path(args.data))
    label = Path(args.data).name
    base = real_vectors(passages, cache, f"{label}-passages")
    queries = real_vectors(texts, cache, f"{label}-queries")
    if args.sources:
        base = base[np.random.default_rng(1).permutation(len(base))[: args.sources]]
    if args.what == "gap":
        print(
            f"| corpus ({len(base):,} vectors) | gap 10th-11th | gap 10th-20th | d10 |\n|---|---:|---:|---:|"
        )
        print("| real SciFact passages | {:.4f} | {:.4f} | {:.3f} |".format(*gaps(queries[:300], base)))
        for parts, noise in configs:
            g = gaps(queries[:300], synth(base, len(base), noise, parts))
            print(f"| {parts} passages, noise {noise} | {g[0]:.4f} | {g[1]:.4f} | {g[2]:.3f} |")
        return 0
    print(
        "| chunks | source passages | synthesis | gap 10th-11th | gap 10th-20th | "
        "ef 40 | ef 100 | ef 200 | ef 400 | HNSW build |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    for parts, noise in configs:
        print(recall(base, queries, args.chunks, parts, noise), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
