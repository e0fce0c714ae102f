"""Ingestion speed beside its floor (a raw binary COPY of the same rows into the same table).

    .venv/bin/python -m benchmarks.ingest [--chunks 100000] [--maintained-chunks 20000] [--embed-sample 500]
        [--repeats 3]

Embedding is excluded from the write-path rows: the embedder hands out vectors computed before
the clock starts, so what is timed is agentrag's own work (chunking, hashing, validation, locks,
document rows, one binary COPY per write batch, commits).

* first load (no HNSW index yet): ``ingest_texts`` into a fresh collection, beside the floor: one
  binary COPY of the same chunk rows into ``agentrag.chunks`` (their document rows inserted
  beforehand, untimed; the floor the target is judged against), a second floor that writes the
  document rows too (one transaction: a binary COPY of the document rows, text included, into
  ``agentrag.documents``, then the chunks' COPY), and the physical floor (the same COPY into a
  bare unlogged table). The HNSW build after the load is reported separately. Beside the wall
  time, the CPU seconds of the database's processes and of this process (embedded server only),
  steadier than wall time on a shared machine. Before each timed write (untimed): VACUUM of the
  rows deleted before and a CHECKPOINT, so no measurement pays for another's cleanup.
* HNSW maintained row by row: ``bulk=False`` into a collection whose index exists, beside the
  same raw COPY with the floor collection's index present.
* bulk: ``bulk=True`` into a collection whose index exists: the write (index dropped) and the
  rebuild, each reported.
* embedding included: the default ``LocalEmbedder`` on a sample, extrapolated.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import statistics
import time
import uuid
from typing import Any

import numpy as np

from agentrag.store.chunking import chunk_text
from agentrag.store.ingest import ingest_texts
from agentrag.store.writes import encode_vectors
from benchmarks._db import bench_store

DIMS = 384
CHUNKS_PER_DOC = 100
COPY_SQL = (
    "COPY {table} (id, document_id, collection_id, chunk_index, text, start_char, end_char,"
    " page, section, sha256, embedding) FROM STDIN WITH (FORMAT BINARY)"
)


class ReadyVectors:
    """An embedder whose vectors are computed before the clock starts: isolates the write path.

    Vectors cluster like real embeddings (uniform random vectors are HNSW's worst case)."""

    model_id = "bench/ready-vectors"
    version = "1"
    dimensions = DIMS

    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(0)
        centroids = rng.standard_normal((500, DIMS), dtype=np.float32)
        picks = rng.integers(0, len(centroids), size=n)
        self.pool = centroids[picks] + 0.3 * rng.standard_normal((n, DIMS), dtype=np.float32)
        self._next = 0

    def embed(self, texts):  # type: ignore[no-untyped-def]
        start = self._next % len(self.pool)
        out = self.pool[start : start + len(texts)]
        if len(out) < len(texts):
            out = np.concatenate([out, self.pool[: len(texts) - len(out)]])
        self._next += len(texts)
        return out


def make_documents(n_chunks: int, prefix: str = "doc") -> list[tuple[str, str, dict]]:
    rng = np.random.default_rng(42)
    vocab = [f"w{i}" for i in range(5000)]
    docs = []
    n_docs = max(1, n_chunks // CHUNKS_PER_DOC)
    for d in range(n_docs):
        paragraphs = []
        for _ in range(CHUNKS_PER_DOC):
            words = rng.choice(vocab, size=140)
            paragraphs.append(" ".join(words) + ".")
        docs.append((f"{prefix}-{d}.md", "\n\n".join(paragraphs), {"n": d}))
    return docs


def _copy(store: Any, table: str, rows: list, types: list[str]) -> float:
    raw = store.engine.raw_connection()
    try:
        driver = raw.driver_connection
        t = time.perf_counter()
        with driver.cursor() as cur, cur.copy(COPY_SQL.format(table=table)) as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)
        driver.commit()
        return time.perf_counter() - t
    finally:
        raw.close()


DOC_COPY_SQL = (
    "COPY agentrag.documents (id, collection_id, source, sha256, text, metadata, chunk_count)"
    " FROM STDIN WITH (FORMAT BINARY)"
)
DOC_TYPES = ["text", "int8", "text", "text", "text", "jsonb", "int4"]


def document_rows(store: Any, collection: str, docs: list) -> list[tuple]:
    """The document rows of ``docs`` for a raw COPY (ids, hashes, text, metadata, chunk counts)."""
    from psycopg.types.json import Jsonb

    coll = store.collection(collection)
    return [
        (
            "doc_" + uuid.uuid4().hex[:16],
            coll.id,
            source,
            hashlib.sha256(text.encode()).hexdigest(),
            text,
            Jsonb(meta),
            len(chunk_text(text, size=1000, overlap=0)),
        )
        for source, text, meta in docs
    ]


def floor_rows(
    store: Any, collection: str, docs: list, vectors: np.ndarray, encoded: bool, doc_rows: list | None = None
) -> list[tuple]:
    """The chunk rows of ``docs`` for a raw COPY. Their document rows are inserted here (untimed)
    unless ``doc_rows`` (from :func:`document_rows`) is given: then the caller writes those."""
    coll = store.collection(collection)
    rows = []
    with store.engine.begin() as conn:
        for i, (source, text, _meta) in enumerate(docs):
            if doc_rows is not None:
                doc_id = doc_rows[i][0]
            else:
                doc_id = "doc_" + uuid.uuid4().hex[:16]
                conn.exec_driver_sql(
                    "INSERT INTO agentrag.documents (id, collection_id, source, sha256, text, chunk_count)"
                    " VALUES (%(id)s, %(c)s, %(s)s, '', %(t)s, 0)",
                    {"id": doc_id, "c": coll.id, "s": source, "t": text},
                )
            rows.extend((doc_id, ch) for ch in chunk_text(text, size=1000, overlap=0))
    vecs: Any = encode_vectors(vectors[: len(rows)]) if encoded else vectors[: len(rows)]
    return [
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
            vecs[i],
        )
        for i, (doc_id, ch) in enumerate(rows)
    ]


TYPES = ["text", "text", "int8", "int4", "text", "int4", "int4", "int4", "text", "text"]


def _copy_documents_and_chunks(store: Any, doc_rows: list, rows: list) -> float:
    """The second floor: one transaction, a binary COPY of the document rows then of the chunks."""
    raw = store.engine.raw_connection()
    try:
        driver = raw.driver_connection
        t = time.perf_counter()
        with driver.cursor() as cur:
            with cur.copy(DOC_COPY_SQL) as copy:
                copy.set_types(DOC_TYPES)
                for row in doc_rows:
                    copy.write_row(row)
            with cur.copy(COPY_SQL.format(table="agentrag.chunks")) as copy:
                copy.set_types([*TYPES, "bytea"])
                for row in rows:
                    copy.write_row(row)
        driver.commit()
        return time.perf_counter() - t
    finally:
        raw.close()


def _server_cpu(store: Any) -> float | None:
    """CPU seconds used so far by the embedded server's processes (None: not readable here)."""
    import os

    try:
        with store.engine.connect() as conn:
            data = conn.exec_driver_sql("SHOW data_directory").scalar()
        with open(os.path.join(data, "postmaster.pid")) as f:
            postmaster = int(f.readline())

        def fields(pid: int | str) -> list[str]:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()

        mine = fields(postmaster)
        ticks = sum(int(x) for x in mine[11:15])  # its own and its exited children's
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    theirs = fields(pid)
                except OSError:
                    continue
                if int(theirs[1]) == postmaster:
                    ticks += int(theirs[11]) + int(theirs[12])
        return ticks / os.sysconf("SC_CLK_TCK")
    except Exception:
        return None


def settle(store: Any) -> None:
    """Untimed, between measurements: VACUUM the deleted rows away (otherwise autovacuum does it
    during whichever measurement comes next, and ours comes first) and CHECKPOINT, so every timed
    write starts from the same state (no checkpoint of the step before landing in it)."""
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM agentrag.chunks, agentrag.documents")
        with contextlib.suppress(Exception):  # not allowed for this role: skipped
            conn.exec_driver_sql("CHECKPOINT")


class _Cpu:
    """Server and client CPU seconds spent inside a ``with`` block."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.server: float | None = None
        self.client = 0.0
        self._stopped = False

    def __enter__(self) -> _Cpu:
        self._s, self._c = _server_cpu(self.store), time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Take the reading now (the first call only)."""
        if self._stopped:
            return
        self._stopped = True
        self.client = time.process_time() - self._c
        end = _server_cpu(self.store)
        self.server = None if end is None or self._s is None else end - self._s

    def __str__(self) -> str:
        server = "?" if self.server is None else f"{self.server:.2f}"
        return f"{server}+{self.client:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--maintained-chunks", type=int, default=20_000)
    parser.add_argument("--embed-sample", type=int, default=500)
    parser.add_argument(
        "--repeats", type=int, default=3, help="first-load runs of ours and the floor, alternating"
    )
    args = parser.parse_args()

    n, m = args.chunks, args.maintained_chunks
    docs = make_documents(n)
    embedder = ReadyVectors(n)
    store = bench_store(embedder)
    tag = uuid.uuid4().hex[:6]
    names: list[str] = []

    def collection(label: str, *, index: bool = False) -> str:
        name = f"bench_ingest_{label}_{tag}"
        store.create_collection(name)
        names.append(name)
        if index:
            store.ensure_vector_index(store.collection(name))
        return name

    out: list[tuple[str, int, float]] = []
    try:
        # 1. first load: no index yet, built after the load. Ours and the floor alternate, each
        #    into a fresh collection, ``--repeats`` times; the medians are reported.
        ours_runs, floor_runs, floor_doc_runs, index_runs = [], [], [], []
        cpu: dict[str, list[str]] = {"ours": [], "floor": [], "floor with documents": []}
        for r in range(args.repeats):
            name = collection(f"first{r}")
            settle(store)
            used = _Cpu(store)

            def written(event: Any, used: _Cpu = used) -> None:
                if event.done == event.total and event.status != "writing":
                    used.stop()  # the last document committed: before the HNSW build

            with used:
                t = time.perf_counter()
                report = ingest_texts(
                    store, docs, collection=name, chunk_size=1000, chunk_overlap=0, on_progress=written
                )
                ours_runs.append(time.perf_counter() - t - report.index_seconds)
            cpu["ours"].append(str(used))
            index_runs.append(report.index_seconds)
            assert report.chunks_written == n and report.vector_index == "built", report
            rows = floor_rows(store, collection(f"floor{r}"), docs, embedder.pool, encoded=True)
            settle(store)
            with _Cpu(store) as used:
                floor_runs.append(_copy(store, "agentrag.chunks", rows, [*TYPES, "bytea"]))
            cpu["floor"].append(str(used))
            both = collection(f"floordocs{r}")
            doc_rows = document_rows(store, both, docs)
            rows = floor_rows(store, both, docs, embedder.pool, encoded=True, doc_rows=doc_rows)
            settle(store)
            with _Cpu(store) as used:
                floor_doc_runs.append(_copy_documents_and_chunks(store, doc_rows, rows))
            cpu["floor with documents"].append(str(used))
            del rows, doc_rows
            for name in names[-3:]:
                store.delete_collection(name)
            del names[-3:]
            settle(store)  # no autovacuum of these deletions inside the next repeat's timings
        ours, floor = statistics.median(ours_runs), statistics.median(floor_runs)
        floor_docs = statistics.median(floor_doc_runs)
        print(
            "runs (s): ours",
            [round(x, 2) for x in ours_runs],
            "floor",
            [round(x, 2) for x in floor_runs],
            "floor with documents",
            [round(x, 2) for x in floor_doc_runs],
        )
        print(
            "paired ratios (floor / ours):",
            [round(f / o, 2) for f, o in zip(floor_runs, ours_runs, strict=True)],
        )
        print(
            "paired ratios (floor with documents / ours):",
            [round(f / o, 2) for f, o in zip(floor_doc_runs, ours_runs, strict=True)],
        )
        print("CPU s (database processes + this process), per run:", cpu)
        out.append(("agentrag ingest, first load (no HNSW index yet), embedding excluded", n, ours))
        out.append(("floor: one raw binary COPY of the same rows into agentrag.chunks", n, floor))
        out.append(
            (
                "floor with documents: binary COPY of the document rows, then of the chunks, one transaction",
                n,
                floor_docs,
            )
        )
        rows = floor_rows(store, collection("floorvec"), docs, embedder.pool, encoded=False)
        floor_vec = _copy(store, "agentrag.chunks", rows, [*TYPES, "vector"])
        out.append(("same COPY, vectors through pgvector's binary dumper per row", n, floor_vec))
        with store.engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS bench_bare_chunks")
            conn.exec_driver_sql(
                "CREATE UNLOGGED TABLE bench_bare_chunks (id text, document_id text, collection_id bigint,"
                " chunk_index int, text text, start_char int, end_char int, page int, section text,"
                " sha256 text, embedding vector)"
            )
        bare = _copy(store, "bench_bare_chunks", rows, [*TYPES, "vector"])
        with store.engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE bench_bare_chunks")
        out.append(("physical floor: the same COPY into a bare unlogged table", n, bare))
        out.append(("HNSW build after the first load (m=16, ef_construction=64)", n, report.index_seconds))
        first_ratio = floor / ours

        # 2. HNSW maintained row by row (index present) vs bulk (dropped, rebuilt)
        mdocs = docs[: max(1, m // CHUNKS_PER_DOC)]
        name = collection("maintained", index=True)
        t = time.perf_counter()
        report = ingest_texts(store, mdocs, collection=name, chunk_size=1000, chunk_overlap=0, bulk=False)
        maintained = time.perf_counter() - t
        assert report.vector_index == "maintained", report
        mn = report.chunks_written
        out.append(("agentrag ingest, HNSW index maintained row by row (bulk=False)", mn, maintained))
        rows = floor_rows(store, collection("floormaint", index=True), mdocs, embedder.pool, encoded=True)
        floor_maint = _copy(store, "agentrag.chunks", rows, [*TYPES, "bytea"])
        out.append(("floor: the same raw COPY with the collection's HNSW index present", mn, floor_maint))

        name = collection("bulk", index=True)
        t = time.perf_counter()
        report = ingest_texts(store, mdocs, collection=name, chunk_size=1000, chunk_overlap=0, bulk=True)
        bulk_total = time.perf_counter() - t
        assert report.vector_index == "rebuilt", report
        out.append(
            ("agentrag ingest bulk=True: the write (index dropped)", mn, bulk_total - report.index_seconds)
        )
        out.append(("agentrag ingest bulk=True: the index rebuild after it", mn, report.index_seconds))
        out.append(("agentrag ingest bulk=True: write + rebuild", mn, bulk_total))
    finally:
        for name in names:
            store.delete_collection(name)

    # embedding included: the real model on a sample
    from agentrag.embedders import LocalEmbedder, embed_batched

    sample = [ch.text for _s, text, _m in docs[:20] for ch in chunk_text(text, size=1000, overlap=0)]
    sample = sample[: args.embed_sample]
    local = LocalEmbedder()
    embed_batched(local, sample[:64])  # load the model outside the timing
    t = time.perf_counter()
    embed_batched(local, sample)
    embed_s = time.perf_counter() - t
    out.append((f"LocalEmbedder ({local.backend}) embedding alone (sample)", len(sample), embed_s))
    per_chunk = embed_s / len(sample) + ours / n
    out.append(("agentrag ingest, embedding included (extrapolated)", n, n * per_chunk))

    print("| what | chunks | seconds | chunks/s |")
    print("|---|---:|---:|---:|")
    for what, count, seconds in out:
        print(f"| {what} | {count:,} | {seconds:.2f} | {count / seconds:,.0f} |")
    print(f"\nratio agentrag / floor, first load: {first_ratio:.2f}")
    print(f"ratio agentrag / floor with documents, first load: {floor_docs / ours:.2f}")
    print(f"ratio agentrag / floor, HNSW maintained: {floor_maint / maintained:.2f}")
    print(f"bulk=True (write + rebuild) vs maintained row by row: {maintained / bulk_total:.2f}x faster")


if __name__ == "__main__":
    main()
