"""float32 ``vector`` beside float16 ``halfvec`` storage on SciFact, in the same run (issue #39).

    .venv/bin/python -m benchmarks.halfvec [--data ../shared/data/beir/scifact] [--builds 2] [--corpus N]

* Two collections of the SciFact corpus, one document per BEIR document as ``agentrag eval beir``
  indexes it (:func:`agentrag.eval.ingest_beir`): ``hv_scifact`` (float32) and ``hv_scifact_halfvec``
  (``vector_type="halfvec"``), ``hv_scifact_N`` and ``hv_scifact_N_halfvec`` with ``--corpus N`` (their
  own names: pruned to the corpus, never the ``scifact`` collection of the other benchmarks). The
  2026-12-02 run in RESULTS.md named them ``scifact`` and ``scifact_halfvec``. The halfvec one is
  ingested through the same write path with the float32 collection's own vectors (read back by chunk
  text), so the two differ only by the float16 rounding of the same vectors.
* ``--corpus N``: the first ``N`` documents of the corpus (file order) plus every document judged for
  a test query, instead of all of them (a smaller corpus is an easier task: compare the two storage
  types with each other, not with the full corpus's figures).
* Quality: nDCG@10, recall@100 and MRR@10 of the 300 test queries in every mode (``--compare
  hybrid,hybrid:rrf,vector,lexical,lexical_sql --top-k 100``, depth 100), one collection then the
  other per mode; the vector-mode p50 (embedding included) from the same evaluation.
* Size on disk: the collection's vector bytes (``pg_column_size`` summed), its chunk rows'
  bytes and its HNSW index (``pg_relation_size``).
* Index build: each collection's HNSW index dropped and built again by ``Store.ensure_vector_index``
  (its defaults: m 16, ef_construction 64, parallel workers), ``--builds`` rounds, the two types
  alternating which goes first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._paths import scifact_path

FLOAT32 = "hv_scifact"  # the collections; main() appends the --corpus size to both
HALF = "hv_scifact_halfvec"
MODES = (
    ("hybrid", "relative_score"),
    ("hybrid", "rrf"),
    ("vector", None),
    ("lexical", None),
    ("lexical_sql", None),
)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class StoredVectors:
    """The store's embedder for queries; for documents, the vectors a collection already holds (by text)."""

    def __init__(self, inner: Any, vectors: dict[str, np.ndarray]) -> None:
        self.inner, self.vectors = inner, vectors

    model_id = property(lambda self: self.inner.model_id)
    version = property(lambda self: self.inner.version)
    dimensions = property(lambda self: self.inner.dimensions)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.inner.embed(texts), dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self.vectors]
        if missing:
            raise RuntimeError(f"{len(missing)} chunk texts have no stored vector")
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


def _stored_vectors(store: Any, collection: str) -> dict[str, np.ndarray]:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT c.text, c.embedding::real[] FROM agentrag.chunks c"
                " JOIN agentrag.collections k ON k.id = c.collection_id WHERE k.name = :n"
            ),
            {"n": collection},
        ).all()
    return {row[0]: np.asarray(row[1], dtype=np.float32) for row in rows}


def build_twins(store: Any, dataset: Any) -> None:
    from agentrag.eval import ingest_beir
    from agentrag.store.store import Store

    t = time.perf_counter()
    report = ingest_beir(store, dataset, FLOAT32, prune=True)
    _log(
        f"{FLOAT32}: {len(report.added)} added, {len(report.unchanged)} unchanged"
        f" ({time.perf_counter() - t:.0f} s)"
    )
    if not any(c.name == HALF for c in store.collections()):
        store.create_collection(HALF, description="benchmarks/halfvec.py", vector_type="halfvec")
    stored = StoredVectors(store.embedder, _stored_vectors(store, FLOAT32))
    cached = Store(engine=store.engine, embedder=stored, migrate=False)
    report = ingest_beir(cached, dataset, HALF, prune=True)
    _log(f"{HALF}: {len(report.added)} added, {len(report.unchanged)} unchanged")
    for name in (FLOAT32, HALF):
        store.ensure_vector_index(store.collection(name))


def sizes(store: Any, name: str) -> dict[str, float]:
    from sqlalchemy import text

    coll = store.collection(name)
    with store.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT count(*), sum(pg_column_size(c.embedding)) AS f32,"
                " sum(pg_column_size(c.embedding_half)) AS f16, sum(pg_column_size(c.*)) AS rowbytes,"
                " pg_relation_size(to_regclass(:idx)) AS idx"
                " FROM agentrag.chunks c WHERE c.collection_id = :cid"
            ),
            {"cid": coll.id, "idx": f"agentrag.{coll.hnsw_index}"},
        ).one()
    vectors = float(row.f32 or 0) + float(row.f16 or 0)
    return {"chunks": float(row[0]), "vectors": vectors, "rows": float(row.rowbytes), "index": float(row.idx)}


def build_times(store: Any, rounds: int) -> dict[str, list[float]]:
    from sqlalchemy import text

    out: dict[str, list[float]] = {FLOAT32: [], HALF: []}
    for r in range(rounds):
        for name in (FLOAT32, HALF) if r % 2 == 0 else (HALF, FLOAT32):
            coll = store.collection(name)
            with store.engine.begin() as conn:
                conn.execute(text(f"DROP INDEX IF EXISTS agentrag.{coll.hnsw_index}"))
            t = time.perf_counter()
            store.ensure_vector_index(coll)
            out[name].append(time.perf_counter() - t)
            _log(f"  build {name}: {out[name][-1]:.1f} s")
    return out


def quality(store: Any, dataset: Any) -> dict[tuple[str, str], dict[str, float]]:
    from agentrag.eval import evaluate

    out: dict[tuple[str, str], dict[str, float]] = {}
    for mode, fusion in MODES:
        label = mode if fusion is None else f"{mode}:{fusion}"
        for name in (FLOAT32, HALF):
            options: dict[str, Any] = {"mode": mode, "top_k": 100, "depth": 100}
            if fusion is not None:
                options["fusion"] = fusion
            out[(label, name)] = evaluate(store, dataset, name, **options).summary()
            _log(f"  {label} {name}: nDCG@10 {out[(label, name)]['ndcg@10']:.4f}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.halfvec", description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(scifact_path()))
    parser.add_argument("--builds", type=int, default=2, help="index builds per collection (alternating)")
    parser.add_argument(
        "--corpus", type=int, help="the first N documents plus the judged ones (default: all)"
    )
    args = parser.parse_args(argv)

    from agentrag.embedders import LocalEmbedder
    from agentrag.eval import load_beir
    from benchmarks._db import bench_store

    print(
        f"benchmarks.halfvec: load average {os.getloadavg()[0]:.1f} at the start (shared machine)", flush=True
    )
    dataset = load_beir(Path(args.data), "test")
    global FLOAT32, HALF
    if args.corpus is not None:
        FLOAT32, HALF = f"hv_scifact_{args.corpus}", f"hv_scifact_{args.corpus}_halfvec"
        from dataclasses import replace

        judged = {doc for docs in dataset.qrels.values() for doc in docs}
        first = set(list(dataset.corpus)[: args.corpus])
        corpus = {k: v for k, v in dataset.corpus.items() if k in first or k in judged}
        dataset = replace(dataset, corpus=corpus)
        _log(f"corpus: the first {args.corpus} documents and the judged ones: {len(corpus)} documents")
    store = bench_store(LocalEmbedder())
    build_twins(store, dataset)
    builds = build_times(store, args.builds)
    size = {name: sizes(store, name) for name in (FLOAT32, HALF)}
    scores = quality(store, dataset)

    print(f"\n### float32 beside halfvec: SciFact ({int(size[FLOAT32]['chunks']):,} chunks, 384 d)\n")
    print(
        "| mode | nDCG@10 float32 | nDCG@10 halfvec | halfvec - float32 | recall@100 f32 / half"
        " | MRR@10 f32 / half |"
    )
    print("|---|---:|---:|---:|---|---|")
    for mode, fusion in MODES:
        label = mode if fusion is None else f"{mode}:{fusion}"
        a, b = scores[(label, FLOAT32)], scores[(label, HALF)]
        print(
            f"| {label} | {a['ndcg@10']:.4f} | {b['ndcg@10']:.4f} | {b['ndcg@10'] - a['ndcg@10']:+.4f} | "
            f"{a['recall@100']:.4f} / {b['recall@100']:.4f} | {a['mrr@10']:.4f} / {b['mrr@10']:.4f} |"
        )
    vec = (scores[("vector", FLOAT32)]["p50_ms"], scores[("vector", HALF)]["p50_ms"])
    print(
        f"\nvector mode p50 (top_k 100, embedding included): float32 {vec[0]:.2f} ms, halfvec {vec[1]:.2f} ms"
    )
    print("\n| storage | vector bytes | chunk rows bytes | HNSW index bytes | index build s (median) |")
    print("|---|---:|---:|---:|---:|")
    for name, label in ((FLOAT32, "vector (float32)"), (HALF, "halfvec")):
        s = size[name]
        print(
            f"| {label} | {s['vectors'] / 2**20:.2f} MiB | {s['rows'] / 2**20:.2f} MiB"
            f" | {s['index'] / 2**20:.2f} MiB"
            f" | {statistics.median(builds[name]):.2f} ({', '.join(f'{b:.2f}' for b in builds[name])}) |"
        )
    ratio = {k: size[HALF][k] / size[FLOAT32][k] for k in ("vectors", "rows", "index")}
    print(
        f"\nhalfvec / float32: vectors {ratio['vectors']:.3f}, rows {ratio['rows']:.3f},"
        f" index {ratio['index']:.3f}; "
        f"build {statistics.median(builds[HALF]) / statistics.median(builds[FLOAT32]):.2f}x"
    )
    print(f"Load average {os.getloadavg()[0]:.1f} at the end.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
