"""The first query on cold pages at scale: float32 beside halfvec (issue #39).

    .venv/bin/python -m benchmarks.scale_cold --chunks 1000000 --rounds 8

Needs the two collections ``benchmarks.scale --keep --phase load`` leaves behind
(``bench_scale_N`` and ``bench_scale_N_halfvec``) and root (it writes
``/proc/sys/vm/drop_caches``). Each round, for each storage type in an order rotated per round,
and for the library's ``vector`` mode and its floor (the raw HNSW statement over psycopg, the
same ORDER BY, LIMIT and ef_search): the operating system's page cache is dropped, one query runs
(cold), and the same query runs again (warm). Every cell gets its own SciFact test query, so a
query never finds the pages an earlier cell read for the same query. PostgreSQL's own buffer pool
(``shared_buffers``, printed) is not emptied: this build has no ``pg_buffercache_evict``, so the
upper layers of a graph that an earlier round walked may still be there; a restart of the server
would empty it, at the cost of every other user of the server.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.scale import (
    DEFAULT_DATA,
    DEPTH,
    DIMS,
    TOP_K,
    PrecomputedVectors,
    _raw,
    cache_dir,
    collection_name,
    real_vectors,
    scifact,
)

TYPES = ("vector", "halfvec")


def drop_page_cache() -> None:
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as exc:
        raise SystemExit(
            f"cannot drop the page cache ({exc}): run as root, or measure warm figures with benchmarks.scale"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=8, help="cold queries per storage type and system")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--cache", default=None, help="where the real vectors are cached (.npy)")
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 50:
        parser.error("--rounds must be in [1, 50]")

    from agentrag import CollectionNotFoundError
    from agentrag.retrieval.catalog import vector_expr
    from agentrag.retrieval.legs import ef_search_for
    from agentrag.retrieval.sources import load_collections
    from benchmarks._db import bench_store

    _passages, queries = scifact(Path(args.data))
    qvecs = real_vectors(queries, cache_dir(args.cache), f"{Path(args.data).name}-queries")
    if len(queries) < 4 * args.rounds:
        parser.error(f"--rounds needs {4 * args.rounds} test queries; the data has {len(queries)}")
    by_text = dict(zip(queries, qvecs, strict=True))
    # the library embeds a query with its whitespace collapsed ("is  linked" -> "is linked")
    by_text.update({" ".join(text.split()): vec for text, vec in zip(queries, qvecs, strict=True)})
    store = bench_store(PrecomputedVectors(by_text))
    names = {t: collection_name(args.chunks, t) for t in TYPES}
    raw = _raw(store)
    raw.autocommit = True
    statements: dict[str, str] = {}
    sizes: dict[str, tuple[int, int]] = {}
    for t, name in names.items():
        try:
            coll = store.collection(name)
        except CollectionNotFoundError:
            raise SystemExit(
                f"no collection {name!r}: load it first with `python -m benchmarks.scale --chunks "
                f"{args.chunks} --keep --phase load --vector-type {t}`"
            ) from None
        with store.engine.connect() as conn:
            ef = ef_search_for(None, load_collections(conn, (name,))[0], DEPTH)
        statements[t] = (
            f"SELECT c.id FROM agentrag.chunks c WHERE c.collection_id = {int(coll.id)} ORDER BY "
            f"{vector_expr(DIMS, t, 'c.')} <=> %s::vector({DIMS})::{t}({DIMS}) LIMIT {DEPTH}"
        )
        raw.execute(f"SET hnsw.ef_search = {int(ef)}")
        sizes[t] = (
            raw.execute(
                "SELECT pg_relation_size(to_regclass('agentrag.' || %s))", (coll.hnsw_index,)
            ).fetchone()[0],
            coll.chunk_count,
        )
    shared_buffers = raw.execute("SHOW shared_buffers").fetchone()[0]
    # connections, catalogue and imports warm before the first cold query
    for t in TYPES:
        store.search(queries[-1], collections=names[t], mode="vector", top_k=TOP_K)
        raw.execute(statements[t], (qvecs[-1],)).fetchall()

    def library(t: str, q: int) -> None:
        store.search(queries[q], collections=names[t], mode="vector", top_k=TOP_K)

    def floor(t: str, q: int) -> None:
        raw.execute(statements[t], (qvecs[q],)).fetchall()

    systems = {"agentrag vector mode": library, "floor: raw HNSW SQL": floor}
    cells = [(t, s) for t in TYPES for s in systems]
    cold: dict[tuple[str, str], list[float]] = {c: [] for c in cells}
    warm: dict[tuple[str, str], list[float]] = {c: [] for c in cells}
    load = [os.getloadavg()[0]]
    q = 0
    for r in range(args.rounds):
        turn = r % len(cells)
        for t, s in cells[turn:] + cells[:turn]:
            drop_page_cache()
            t0 = time.perf_counter()
            systems[s](t, q)
            cold[(t, s)].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            systems[s](t, q)
            warm[(t, s)].append((time.perf_counter() - t0) * 1000)
            q += 1
        load.append(os.getloadavg()[0])
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    print(
        f"\n### The first query on cold pages, {args.chunks:,} chunks ({args.rounds} rounds; OS page cache "
        f"dropped before each query; shared_buffers {shared_buffers}, not emptied; load "
        f"{min(load):.1f}-{max(load):.1f})\n"
    )
    print("| storage | system | HNSW index | cold p50 ms | cold max ms | warm p50 ms | cold / warm |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for t, s in cells:
        c, w = statistics.median(cold[(t, s)]), statistics.median(warm[(t, s)])
        index_mb = sizes[t][0] / 1e6
        print(
            f"| {t} | {s} | {index_mb:,.0f} MB | {c:.1f} | {max(cold[(t, s)]):.1f} | {w:.1f} | {c / w:.1f}x |"
        )
    for s in systems:
        ratio = statistics.median(cold[("halfvec", s)]) / statistics.median(cold[("vector", s)])
        print(f"\nhalfvec / float32, cold p50, {s}: {ratio:.2f}x")
    raw.close()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
