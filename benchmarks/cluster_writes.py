"""The write path's cost of the vector clusters: ingest into a fitted collection, assigning or not.

    .venv/bin/python -m benchmarks.cluster_writes [--cache DIR] [--docs 50] [--rounds 6]
        [--vector-type vector]

Needs the collection ``benchmarks.acl --keep`` leaves, fitted by ``Store.optimize`` (K = 512). Each round
ingests ``--docs`` new documents of 10 chunks (SciFact passages recombined as benchmarks.acl does, real
vectors, one grant each) twice, in a seeded order: once through the library's write path (the fit's id read
in the write transaction, each chunk's nearest centroid in numpy, the cluster in the COPY) and once with the
assignment patched out (``vector_clusters.assign`` returning no fit: what a collection without clusters
pays). Chunks/s of each, and the assignment alone. The documents written are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks import acl, scale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cluster_writes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--data", default=str(scale.DEFAULT_DATA))
    parser.add_argument("--cache", help="where benchmarks.acl cached the passage vectors")
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--docs", type=int, default=50, help="documents per ingest (10 chunks each)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--vector-type", default="vector")
    args = parser.parse_args(argv)

    from agentrag.store import vector_clusters
    from agentrag.store.ingest import ingest_texts
    from benchmarks._db import bench_store

    passages, _ = scale.scifact(Path(args.data))
    passages = passages[: args.passages]
    base = scale.real_vectors(passages, scale.cache_dir(args.cache), f"{Path(args.data).name}-passages")
    embedder = scale.PrecomputedVectors({})
    store = bench_store(embedder)
    name = acl.collection_name(args.chunks, args.groups, args.vector_type)
    original = vector_clusters.assign
    timed: list[float] = []

    def assign(conn, collection_id, vectors):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return original(conn, collection_id, vectors)
        finally:
            timed.append(time.perf_counter() - t)

    per_round = args.docs * acl.CHUNKS_PER_DOC
    texts, vectors = scale.synthesize(2 * args.rounds * per_round, passages, base, seed=39)
    rates: dict[str, list[float]] = {"assigned": [], "not assigned": []}
    sources: list[str] = []
    at = 0
    print(f"benchmarks.cluster_writes: load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    rng = random.Random(39)
    try:
        for r in range(args.rounds):
            for system in rng.sample(list(rates), 2):
                part, vecs = texts[at : at + per_round], vectors[at : at + per_round]
                docs = []
                for d in range(args.docs):
                    source = f"cw-{r:02d}-{system[:3]}-{d:04d}.txt"
                    sources.append(source)
                    body = "\n\n".join(part[d * acl.CHUNKS_PER_DOC : (d + 1) * acl.CHUNKS_PER_DOC])
                    docs.append((source, body, {"grants": [f"group:g{d % args.groups:04d}"]}))
                embedder.expect(part, vecs)
                vector_clusters.assign = (
                    assign if system == "assigned" else (lambda conn, cid, v: [None] * len(v))  # type: ignore[assignment]
                )
                t = time.perf_counter()
                report = ingest_texts(store, docs, collection=name, chunk_size=1000, chunk_overlap=0)
                seconds = time.perf_counter() - t
                vector_clusters.assign = original
                if report.chunks_written != per_round:
                    raise SystemExit(f"the ingest failed: {report!r}")
                rates[system].append(per_round / seconds)
                at += per_round
    finally:
        vector_clusters.assign = original
        from sqlalchemy import text

        with store.engine.begin() as conn:
            conn.execute(
                text(
                    "DELETE FROM agentrag.documents d USING agentrag.collections k"
                    " WHERE k.id = d.collection_id AND k.name = :n AND d.source = ANY(:s)"
                ),
                {"n": name, "s": sources},
            )
    load = os.getloadavg()[0]
    print(f"\n{args.rounds} rounds of {per_round} chunks each way into {name} (K=512), load {load:.1f}\n")
    print("| write path | chunks/s p50 | min | max |\n|---|---:|---:|---:|")
    for system, values in rates.items():
        print(f"| {system} | {statistics.median(values):.0f} | {min(values):.0f} | {max(values):.0f} |")
    per_chunk = np.sum(timed) / max(1, args.rounds * per_round) * 1e6
    print(f"\nThe assignment alone (fit id read, centroids cached, numpy): {per_chunk:.1f} µs a chunk")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
