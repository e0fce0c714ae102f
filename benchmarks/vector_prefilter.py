"""A binary-quantized first pass before the exact scan of a 10 % principal (issue #39): measured, not kept.

    .venv/bin/python -m benchmarks.vector_prefilter [--candidates 300,500,1000,2000] [--queries 40]
        [--cache DIR]

Needs the collection ``benchmarks.acl --keep`` leaves (100,000 chunks, 1,000 groups, the same
``--passages`` / ``--cache``). A principal in 100 of the 1,000 groups sees 10 % of it: 1,000
documents, 10,000 chunks, which the scope planner scans exactly (``vector=exact``). Two measurements:

* **SQL, interleaved per query** (a seeded shuffle): the library's exact statement
  (:func:`agentrag.retrieval.vector.vector_sql`, by document ids) beside a two-pass statement: the
  ``C`` chunks nearest by Hamming distance over ``binary_quantize(embedding)``, read from a covering
  index ``(document_id COLLATE "C") INCLUDE (id, bits)`` (an index-only scan: the heap is not read
  for the first pass), then the exact cosine distance of those ``C`` rows only, re-ranked. The bits
  are a generated column added to this benchmark database's ``agentrag.chunks`` for the run (adding
  it rewrites the table and its indexes: ~2 minutes for 100,000 chunks) and dropped at the end.
  Recall@10 / @100 of each against the exact statement's rows.
* **Recall in numpy**, the same 10,000 vectors: the exact top 10 / 100 within the ``C`` nearest by
  Hamming distance of sign bits, and of bits centered on the collection's mean vector (a quantizer
  the library would have to compute at ingest; a generated column cannot).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks import acl, scale

GROUPS_SEEN = 100  # of 1,000: the 10 % principal
DEPTH = acl.DEPTH

ADD_BITS = (
    "ALTER TABLE agentrag.chunks ADD COLUMN IF NOT EXISTS bench_bits bit varying GENERATED ALWAYS AS"
    " (CASE WHEN embedding IS NOT NULL THEN binary_quantize(embedding)"
    " ELSE binary_quantize(embedding_half) END) STORED"
)
ADD_INDEX = (
    "CREATE INDEX IF NOT EXISTS bench_chunks_bits ON agentrag.chunks"
    ' (document_id COLLATE "C") INCLUDE (id, bench_bits)'
)
DROP = (
    "DROP INDEX IF EXISTS agentrag.bench_chunks_bits",
    "ALTER TABLE agentrag.chunks DROP COLUMN IF EXISTS bench_bits",
)


def two_pass_sql(candidates: int) -> str:
    """The first pass over the covering index, then the exact distance of its ``candidates`` rows."""
    return (
        "WITH cand AS MATERIALIZED (SELECT c.id FROM agentrag.chunks c"
        " WHERE c.document_id COLLATE \"C\" = ANY(string_to_array(:v_docs, ','))"
        f" ORDER BY c.bench_bits <~> binary_quantize(CAST(:qvec AS vector(384))) LIMIT {int(candidates)}),"
        " hits AS MATERIALIZED (SELECT id, distance FROM (SELECT c.id,"
        " c.embedding::vector(384) <=> CAST(:qvec AS vector(384)) AS distance FROM agentrag.chunks c"
        " WHERE c.id = ANY(ARRAY(SELECT id FROM cand)) OFFSET 0) s ORDER BY distance + 0 LIMIT :depth)"
        ' SELECT id, distance FROM hits ORDER BY distance, id COLLATE "C"'
    )


def sql_side(engine: object, cid: int, docs: list[str], qvecs: np.ndarray, sizes: list[int]) -> None:
    from sqlalchemy import text

    from agentrag.retrieval.vector import joined_ids, vector_sql

    sides = {"exact (the library)": vector_sql(cid, 384, "cosine", exact=True, by_documents=True)}
    sides.update({f"bits, C={n}": two_pass_sql(n) for n in sizes})
    times: dict[str, list[float]] = {k: [] for k in sides}
    r10: dict[str, list[float]] = {k: [] for k in sides}
    r100: dict[str, list[float]] = {k: [] for k in sides}
    v_docs = joined_ids(tuple(docs))
    rng = random.Random(39)
    with engine.connect() as conn:  # type: ignore[attr-defined]
        for _round in range(3):
            for vec in qvecs:
                got: dict[str, list[str]] = {}
                for name in rng.sample(list(sides), len(sides)):
                    started = _now()
                    rows = conn.execute(
                        text(sides[name]), {"qvec": vec, "depth": DEPTH, "v_docs": v_docs}
                    ).all()
                    times[name].append(_now() - started)
                    got[name] = [r.id for r in rows]
                exact = got["exact (the library)"]
                for name, ids in got.items():
                    r10[name].append(len(set(ids[:10]) & set(exact[:10])) / 10)
                    r100[name].append(len(set(ids) & set(exact)) / max(1, len(exact)))
    print(f"\nSQL, {len(qvecs)} queries x 3, interleaved; load average {os.getloadavg()[0]:.1f}")
    print("| statement | p50 ms | recall@10 (lowest) | recall@100 |\n|---|---:|---|---:|")
    for name in sides:
        print(
            f"| {name} | {statistics.median(times[name]):.2f} | {np.mean(r10[name]):.4f}"
            f" ({min(r10[name]):.1f}) | {np.mean(r100[name]):.4f} |"
        )


def numpy_side(vectors: np.ndarray, sample: np.ndarray, qvecs: np.ndarray, sizes: list[int]) -> None:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    exact = np.argsort(-(qvecs / np.linalg.norm(qvecs, axis=1, keepdims=True)) @ unit.T, axis=1)
    print("\nRecall in numpy (the exact top k within the C nearest by Hamming distance)")
    print("| bits | C | recall@10 (lowest) | recall@100 |\n|---|---:|---|---:|")
    for label, center in (("sign", np.zeros(vectors.shape[1], np.float32)), ("centered", sample.mean(0))):
        hamming = ((vectors - center) > 0)[None, :, :] != ((qvecs - center) > 0)[:, None, :]
        distance = hamming.sum(2)
        for size in sizes:
            cand = np.argsort(distance, axis=1, kind="stable")[:, :size]
            at10 = [len(set(exact[i, :10]) & set(cand[i])) / 10 for i in range(len(qvecs))]
            at100 = [len(set(exact[i, :100]) & set(cand[i])) / 100 for i in range(len(qvecs))]
            print(f"| {label} | {size} | {np.mean(at10):.4f} ({min(at10):.1f}) | {np.mean(at100):.4f} |")


def _now() -> float:
    import time

    return time.perf_counter() * 1000


def _vectors(conn: object, sql: str, params: dict[str, object]) -> np.ndarray:
    from sqlalchemy import text

    rows = conn.execute(text(sql), params).all()  # type: ignore[attr-defined]
    return np.array([np.asarray(r[0].to_numpy(), dtype=np.float32) for r in rows])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.vector_prefilter", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--candidates", default="300,500,1000,2000")
    parser.add_argument("--data", default=str(scale.DEFAULT_DATA))
    parser.add_argument("--cache", help="where benchmarks.acl cached the query vectors")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.candidates.split(",")]

    from sqlalchemy import text

    from benchmarks._db import bench_store

    store = bench_store()
    name = acl.collection_name(args.chunks, args.groups)
    if name not in {c.name for c in store.collections()}:
        raise SystemExit(f"no collection {name}: run benchmarks.acl --keep first")
    _, queries = scale.scifact(Path(args.data))
    qvecs = scale.real_vectors(queries, scale.cache_dir(args.cache), f"{Path(args.data).name}-queries")
    qvecs = np.asarray(qvecs[: args.queries], dtype=np.float32)
    cid = store.collection(name).id
    tokens = "{" + ",".join(f"g:g{g:04d}" for g in range(GROUPS_SEEN)) + "}"
    engine = store.engine
    with engine.connect() as conn:
        docs = [
            r[0]
            for r in conn.execute(
                text(
                    "SELECT id FROM agentrag.documents"
                    " WHERE collection_id = :c AND grants && CAST(:t AS text[])"
                ),
                {"c": cid, "t": tokens},
            )
        ]
        scope = "SELECT c.embedding FROM agentrag.chunks c WHERE c.document_id = ANY(CAST(:d AS text[]))"
        vectors = _vectors(conn, scope, {"d": docs})
        sample = _vectors(
            conn,
            "SELECT embedding FROM agentrag.chunks WHERE collection_id = :c AND random() < 0.05",
            {"c": cid},
        )
    print(f"10 % principal: {len(docs):,} documents, {len(vectors):,} chunks; depth {DEPTH}")
    numpy_side(vectors, sample, qvecs, sizes)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(ADD_BITS))
        conn.execute(text(ADD_INDEX))
        conn.execute(text("VACUUM ANALYZE agentrag.chunks"))  # the visibility map: index-only scans
    try:
        sql_side(engine, cid, docs, qvecs, sizes)
    finally:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for statement in DROP:
                conn.execute(text(statement))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
