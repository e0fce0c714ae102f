"""Ingestion speed at 100k chunks, beside its floor (raw binary COPY of the same rows).

    .venv/bin/python -m benchmarks.ingest [--chunks 100000] [--embed-sample 2000]

* agentrag, embedding excluded: ``Store.ingest_texts`` end to end (chunking, hashing, one
  transaction per document, binary COPY) with an embedder that returns ready vectors.
* floor: one binary COPY of the same rows into the same table, no agentrag code.
* HNSW index build for the collection, reported separately (built once after a bulk load).
* embedding included: the real all-MiniLM-L6-v2 on a sample, extrapolated (on 2 CPU
  cores embedding dominates by orders of magnitude).
"""

from __future__ import annotations

import argparse
import hashlib
import time
import uuid

import numpy as np

from agentrag.store.ingest import ingest_texts
from benchmarks._db import bench_store

DIMS = 384
CHUNKS_PER_DOC = 100


class ReadyVectors:
    """An embedder whose vectors cost nothing: isolates agentrag's write path."""

    model_id = "bench/ready-vectors"
    version = "1"
    dimensions = DIMS

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)
        # clustered like real embeddings (uniform random vectors are HNSW's worst case)
        self._centroids = self._rng.standard_normal((500, DIMS), dtype=np.float32)

    def embed(self, texts):  # type: ignore[no-untyped-def]
        picks = self._rng.integers(0, len(self._centroids), size=len(texts))
        noise = self._rng.standard_normal((len(texts), DIMS), dtype=np.float32)
        return self._centroids[picks] + 0.3 * noise


def make_documents(n_chunks: int) -> list[tuple[str, str, dict]]:
    rng = np.random.default_rng(42)
    vocab = [f"w{i}" for i in range(5000)]
    docs = []
    n_docs = max(1, n_chunks // CHUNKS_PER_DOC)
    for d in range(n_docs):
        paragraphs = []
        for _ in range(CHUNKS_PER_DOC):
            words = rng.choice(vocab, size=140)
            paragraphs.append(" ".join(words) + ".")
        docs.append((f"doc-{d}.md", "\n\n".join(paragraphs), {"n": d}))
    return docs


def _copy(store, sql: str, rows: list) -> float:  # type: ignore[no-untyped-def]
    raw = store.engine.raw_connection()
    try:
        driver = raw.driver_connection
        t = time.perf_counter()
        with driver.cursor() as cur, cur.copy(sql) as copy:
            copy.set_types(
                ["text", "text", "int8", "int4", "text", "int4", "int4", "int4", "text", "text", "vector"]
            )
            for row in rows:
                copy.write_row(row)
        driver.commit()
        return time.perf_counter() - t
    finally:
        raw.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--embed-sample", type=int, default=2000)
    args = parser.parse_args()

    docs = make_documents(args.chunks)
    store = bench_store(ReadyVectors())
    name = f"bench_ingest_{uuid.uuid4().hex[:6]}"
    store.create_collection(name)

    index_build: list[float] = []
    build = store.ensure_vector_index

    def timed_build(*a, **k):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        build(*a, **k)
        index_build.append(time.perf_counter() - t0)

    store.ensure_vector_index = timed_build  # type: ignore[method-assign]
    t = time.perf_counter()
    report = ingest_texts(store, docs, collection=name, chunk_size=1000, chunk_overlap=0)
    index_s = sum(index_build)  # the one HNSW build at the end of the bulk load
    ours = time.perf_counter() - t - index_s
    chunks = report.chunks_written
    coll = store.collection(name)

    # floor: the same rows, one raw binary COPY, no agentrag code
    from agentrag.store.chunking import chunk_text

    rows = []
    doc_ids = []
    with store.engine.begin() as conn:
        for source, text, _meta in docs:
            doc_id = "doc_" + uuid.uuid4().hex[:16]
            doc_ids.append(doc_id)
            conn.exec_driver_sql(
                "INSERT INTO agentrag.documents (id, collection_id, source, sha256, text, chunk_count)"
                " VALUES (%(id)s, %(c)s, %(s)s, '', %(t)s, 0)",
                {"id": doc_id, "c": coll.id, "s": "floor-" + source, "t": text},
            )
            for ch in chunk_text(text, size=1000, overlap=0):
                rows.append((doc_id, ch))
    vectors = ReadyVectors().embed([""] * len(rows))
    prepared = [
        (
            "chk_" + uuid.uuid4().hex[:16],
            doc_id,
            coll.id,
            ch.index,
            ch.text,
            ch.start_char,
            ch.end_char,
            None,
            None,
            hashlib.sha256(ch.text.encode()).hexdigest(),
            vectors[i],
        )
        for i, (doc_id, ch) in enumerate(rows)
    ]
    with store.engine.begin() as conn:  # same conditions as our run: no HNSW index yet
        conn.exec_driver_sql(f"DROP INDEX agentrag.{coll.hnsw_index}")
    copy_sql = (
        "COPY {table} (id, document_id, collection_id, chunk_index, text, start_char, end_char,"
        " page, section, sha256, embedding) FROM STDIN WITH (FORMAT BINARY)"
    )
    floor = _copy(store, copy_sql.format(table="agentrag.chunks"), prepared)
    # the physical floor: a bare table, no generated tsvector, no indexes, no foreign keys
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS bench_bare_chunks")
        conn.exec_driver_sql(
            "CREATE UNLOGGED TABLE bench_bare_chunks (id text, document_id text, collection_id bigint,"
            " chunk_index int, text text, start_char int, end_char int, page int, section text, sha256 text,"
            " embedding vector)"
        )
    bare = _copy(store, copy_sql.format(table="bench_bare_chunks"), prepared)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE bench_bare_chunks")

    # embedding included: the real model on a sample
    from agentrag.embedders import LocalEmbedder, embed_batched

    sample = [ch.text for _doc, ch in rows[: args.embed_sample]]
    embedder = LocalEmbedder()
    embed_batched(embedder, sample[:64])  # load the model outside the timing
    t = time.perf_counter()
    embed_batched(embedder, sample)
    embed_s = time.perf_counter() - t
    embed_rate = len(sample) / embed_s
    per_chunk_with_embedding = 1 / embed_rate + ours / chunks

    store.delete_collection(name)
    print("| what | chunks | seconds | chunks/s |")
    print("|---|---:|---:|---:|")
    print(f"| agentrag ingest, embedding excluded | {chunks:,} | {ours:.2f} | {chunks / ours:,.0f} |")
    print(
        f"| floor: raw binary COPY of the same rows into agentrag.chunks | {len(prepared):,} | {floor:.2f} | "
        f"{len(prepared) / floor:,.0f} |"
    )
    print(
        f"| physical floor: binary COPY into a bare unlogged table | {len(prepared):,} | {bare:.2f} | "
        f"{len(prepared) / bare:,.0f} |"
    )
    print(
        f"| HNSW index build after the load (m=16, ef_construction=64, 384d) | {chunks:,} | {index_s:.2f} | "
        f"{chunks / index_s:,.0f} |"
    )
    print(
        f"| all-MiniLM-L6-v2 embedding alone (sample) | {len(sample):,} | {embed_s:.2f} | {embed_rate:,.0f} |"
    )
    print(
        f"| agentrag ingest, embedding included (extrapolated) | {chunks:,} | "
        f"{chunks * per_chunk_with_embedding:.0f} | {1 / per_chunk_with_embedding:,.0f} |"
    )
    print(f"\nratio agentrag / floor: {(chunks / ours) / (len(prepared) / floor):.2f}")


if __name__ == "__main__":
    main()
