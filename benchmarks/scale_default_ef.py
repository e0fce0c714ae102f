"""The library's vector mode at its default ef_search on a kept scale collection, beside the raw SQL.

    .venv/bin/python -m benchmarks.scale --chunks 1000000 --keep ...   # once, to build the collection
    .venv/bin/python -m benchmarks.scale_default_ef --chunks 1000000 [--queries 30]

Prints the ``hnsw.ef_search`` the library chose (``search.default_ef_search``: it grows with the
collection's index), p50/p99 of ``store.search(mode="vector")`` beside the raw HNSW SQL at the same
ef_search (interleaved, order alternated per query), and recall@10 of both against the exact scan.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.scale import (
    DEFAULT_DATA,
    DIMS,
    TOP_K,
    PrecomputedVectors,
    _pct,
    _raw,
    cache_dir,
    collection_name,
    real_vectors,
    scifact,
)


def main(argv: Sequence[str] | None = None) -> int:
    from agentrag.retrieval.search import _ef_search, _load_collections
    from benchmarks._db import bench_store

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--cache", default=None)
    args = parser.parse_args(argv)
    _passages, all_queries = scifact(Path(args.data))
    qvecs = real_vectors(all_queries, cache_dir(args.cache), f"{Path(args.data).name}-queries")
    store = bench_store(PrecomputedVectors(dict(zip(all_queries, qvecs, strict=True))))
    name = collection_name(args.chunks)
    with store.engine.connect() as conn:
        (coll,) = _load_collections(conn, (name,))
    ef = _ef_search(None, coll, 100)
    raw = _raw(store)
    raw.autocommit = True
    raw.execute(f"SET hnsw.ef_search = {ef}")
    expr = f"c.embedding::vector({DIMS}) <=> %s::vector({DIMS})"
    sql = (
        f"SELECT c.id FROM agentrag.chunks c WHERE c.collection_id = {int(coll.id)} ORDER BY {expr} LIMIT %s"
    )
    ours: list[float] = []
    floor: list[float] = []
    recall_ours: list[float] = []
    recall_raw: list[float] = []
    queries = all_queries[: args.queries]
    for qi, query in enumerate([queries[0], *queries]):
        vec = store.embedder.embed([query])[0]
        runs = ["ours", "raw"] if qi % 2 else ["raw", "ours"]
        for who in runs:
            t = time.perf_counter()
            if who == "ours":
                hits = [
                    h.chunk_id for h in store.search(query, collections=name, mode="vector", top_k=TOP_K).hits
                ]
            else:
                got = [r[0] for r in raw.execute(sql, (vec, 100)).fetchall()][:TOP_K]
            ms = (time.perf_counter() - t) * 1000
            if qi:
                (ours if who == "ours" else floor).append(ms)
        if not qi:
            continue
        exact = [
            r[0] for r in raw.execute(sql.replace(f"ORDER BY {expr}", f"ORDER BY ({expr}) + 0"), (vec, TOP_K))
        ]
        recall_ours.append(len(set(hits) & set(exact)) / TOP_K)
        recall_raw.append(len(set(got) & set(exact)) / TOP_K)
        print(f"  {qi}/{len(queries)}", file=sys.stderr, flush=True)
    print(f"\n{name}: {coll.indexed_rows:,.0f} indexed rows -> default ef_search {ef}\n")
    print("| what | p50 ms | p99 ms | recall@10 mean | min |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| agentrag vector mode (default ef_search {ef}) | {statistics.median(ours):.1f} | "
        f"{_pct(ours, 0.99):.1f} | "
        f"{statistics.mean(recall_ours):.4f} | {min(recall_ours):.2f} |"
    )
    print(
        f"| floor: raw HNSW SQL, ef_search {ef}, LIMIT 100 | {statistics.median(floor):.1f} | "
        f"{_pct(floor, 0.99):.1f} | {statistics.mean(recall_raw):.4f} | {min(recall_raw):.2f} |"
    )
    raw.close()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
