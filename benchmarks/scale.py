"""Scale: one collection of N chunks (default 100k; the issue's figure is 1M) on one machine.

    .venv/bin/python -m benchmarks.scale [--chunks 100000] [--queries 100] [--keep]
    .venv/bin/python -m benchmarks.scale --chunks 1000000 --keep        # the RESULTS.md run

Every speed is printed beside its floor, measured in the same run.

* Data: SciFact passages (``$AGENTRAG_BEIR_PATH``, else ``../shared/data/beir/scifact``)
  recombined. Each synthetic chunk takes a passage and 1 or 2 of its 10 nearest passages (its
  topic, by real all-MiniLM-L6-v2 vectors), weighted ``Dirichlet(1, 1, 1)`` (each share at least
  0.1), sentences of each in proportion to its weight (520..980 characters in all), and the
  vector ``normalise(normalise(sum w_i v_i) + noise)``, the noise Gaussian with the real
  passages' own covariance, scale 0.6 (``--noise``): the vector mixes the vectors of exactly the
  passages whose sentences make the text. The retired ``benchmarks/scale_synthesis.py realism``
  compared it with the real corpus (benchmarks/HISTORY.md, "Scale"): at SciFact's size its
  nearest-neighbour distances and local intrinsic dimensionality
  are close to the real passages'; at 1M its median nearest-neighbour distance is close to what
  the real corpus's LID predicts for a corpus 193x larger. (The previous synthesis, a passage
  plus one neighbour at weight 0.55..0.9 and isotropic noise, made ~190 near-copies of every
  passage at 1M: islands HNSW could not navigate.) The passages' and the test queries' real
  vectors are computed once with ``LocalEmbedder`` and cached as ``.npy`` files
  (``--cache``, default ``$AGENTRAG_DATA_DIR/bench-cache``). 100 chunks per document; each
  document has ``metadata.topic`` in 0..99 (``{"metadata": {"topic": t}}`` is a 1 %-selective
  filter) and one of 20 tenants (a tenant scope holds 5 %).
* Load (a child process, so the parent's resident memory is the search side's alone): the
  library's write path, ``ingest_texts`` per tenant with precomputed vectors (an embedder that
  returns the vectors of the exact chunk texts it is given, refusing any other text), the
  HNSW index built once after the last tenant's load (``bulk=True`` when the library has it;
  each per-tenant call's own build is held back to the end, which is what bulk does for one
  load). Floors: one raw binary COPY of the same chunk rows into ``agentrag.chunks`` (timed to
  the end of the COPY, then rolled back), and a bare unlogged table. The HNSW build is the raw
  ``CREATE INDEX`` statement (the library adds ``maintenance_work_mem``) followed by an
  ``ANALYZE``: the build is its own floor, and the ANALYZE is timed again alone.
* Memory: resident set size (``/proc/self/status``) before and after the BM25 index is built
  through the library (``bm25_index``, what the first lexical search does) and the index's own
  bytes (``CachedBM25.nbytes``): BM25 bytes per chunk.
* Latency, top_k=10, for ``vector``, ``lexical``, ``lexical_sql`` and ``hybrid``: unfiltered,
  with the 1 % filter and with a tenant scope, each query's systems interleaved (shared machine),
  in an order rotated per query (the first to run a query pays for reading its index pages).
  Query vectors are precomputed (the model's own query time is printed apart). Floors: the raw
  HNSW SQL (psycopg, same ORDER BY / LIMIT depth / ef_search, iterative scan when restricted),
  the raw BM25 call on the same in-memory index (``top`` unrestricted, ``scores`` restricted:
  the restriction is SQL's work), the raw tsquery SQL, and raw HNSW SQL + raw BM25 for hybrid.
  Every result is checked: exactly ``min(top_k, matches)`` hits.
* Recall@10 of the ``vector`` mode against the exact scan (the same SQL ordered by
  ``distance + 0``, which no index serves), and of the raw HNSW SQL at several ``ef_search``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._paths import scifact_path

DEFAULT_DATA = scifact_path()
DIMS = 384
CHUNKS_PER_DOC = 100
TENANTS = 20
TOPICS = 100
NEIGHBOURS = 10
MIN_WEIGHT = 0.1  # a source passage's least share of a chunk (before normalising)
NOISE = 0.6  # default scale of the corpus-shaped noise added to a unit-length mixture (--noise)
MIN_CHARS, MAX_CHARS = 520, 980  # with chunk_size=1000, chunk_overlap=0 each one is its own chunk
TOP_K = 10
DEPTH = 100  # the library's default depth per leg
MODES = ("vector", "lexical", "lexical_sql", "hybrid")
CONDITIONS = ("unfiltered", "filter 1%", "tenant scope")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def rss_bytes() -> int:
    """This process's resident set size (VmRSS)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0  # pragma: no cover - not Linux


def _mb(n: float) -> str:
    return f"{n / 2**20:,.0f} MB"


# ---- the data -----------------------------------------------------------------------------
def cache_dir(path: str | None) -> Path:
    from agentrag.store.server import data_dir

    out = Path(path) if path else data_dir() / "bench-cache"
    out.mkdir(parents=True, exist_ok=True)
    return out


def real_vectors(texts: Sequence[str], cache: Path, label: str) -> np.ndarray:
    """all-MiniLM-L6-v2 vectors of ``texts`` through ``LocalEmbedder``, cached by model and content."""
    from agentrag.embedders import LocalEmbedder, embed_batched

    embedder = LocalEmbedder()
    digest = hashlib.sha256(
        "\x1f".join([embedder.model_id, embedder.version, *texts]).encode("utf-8")
    ).hexdigest()[:16]
    path = cache / f"{label}-{digest}.npy"
    if path.exists():
        return np.load(path)
    _log(f"embedding {len(texts)} {label} texts once with {embedder!r} (cached in {path}) ...")
    t0 = time.perf_counter()
    parts = []
    for start in range(0, len(texts), 256):
        parts.append(embed_batched(embedder, list(texts[start : start + 256])))
        _log(f"  {start + len(parts[-1])}/{len(texts)} ({time.perf_counter() - t0:.0f} s)")
    vectors = np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, vectors)
    tmp.replace(path)
    return vectors


def scifact(data: Path) -> tuple[list[str], list[str]]:
    """(passages, test queries) of SciFact: passages as indexed (title + text), queries in qrels order."""
    from agentrag.eval import load_beir

    ds = load_beir(data)
    passages = [" ".join(doc.index_text.split()) for doc in ds.corpus.values()]
    return passages, list(ds.queries.values())


def topic_neighbours(base: np.ndarray, k: int = NEIGHBOURS) -> np.ndarray:
    """Each passage's ``k`` nearest other passages (cosine): its topic cluster."""
    k = min(k, len(base) - 1)
    nbrs = np.empty((len(base), k), dtype=np.int64)
    for lo in range(0, len(base), 2048):
        sims = base[lo : lo + 2048] @ base.T
        sims[np.arange(len(sims)), np.arange(lo, lo + len(sims))] = -np.inf
        nbrs[lo : lo + len(sims)] = np.argpartition(-sims, k, axis=1)[:, :k]
    return nbrs


def passage_noise_basis(base: np.ndarray) -> np.ndarray:
    """``B`` with ``z @ B ~ N(0, cov(base))`` for standard normal ``z``: noise shaped like the corpus."""
    centred = (base - base.mean(axis=0)).astype(np.float64)
    eigvals, eigvecs = np.linalg.eigh(centred.T @ centred / (len(base) - 1))
    return (np.sqrt(np.clip(eigvals, 0, None))[:, None] * eigvecs.T).astype(np.float32)


def mixtures(
    n: int, base: np.ndarray, seed: int = 0, noise: float = NOISE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sources, weights, vectors)``: ``n`` chunks' 3 source passages, their weights and unit vectors.

    A chunk's sources are a passage and 1 or 2 (even odds) of its ``NEIGHBOURS`` nearest passages
    (its topic), weighted ``Dirichlet(1, 1, 1)`` (each at least ``MIN_WEIGHT`` before normalising, so
    every source has text in the chunk; the third weight 0 for two sources); its vector is
    ``normalise(normalise(sum w_i v_i) + noise * z @ B)``, ``B`` from :func:`passage_noise_basis`:
    Gaussian noise with the real passages' covariance, so it moves a chunk along the directions
    real MiniLM vectors vary in, not into the 384 - ~17 directions they do not use.
    """
    rng = np.random.default_rng(seed)
    nbrs = topic_neighbours(base)
    basis = passage_noise_basis(base)
    primary = rng.integers(0, len(base), n)
    pick = np.argsort(rng.random((n, nbrs.shape[1])), axis=1)[:, :2]
    sources = np.stack([primary, nbrs[primary, pick[:, 0]], nbrs[primary, pick[:, 1]]], axis=1)
    weights = np.maximum(rng.dirichlet((1.0, 1.0, 1.0), n), MIN_WEIGHT).astype(np.float32)
    weights[rng.random(n) < 0.5, 2] = 0.0
    weights /= weights.sum(axis=1, keepdims=True)
    vectors = np.empty((n, DIMS), dtype=np.float32)
    for lo in range(0, n, 100_000):
        hi = min(n, lo + 100_000)
        w, src = weights[lo:hi], sources[lo:hi]
        v = w[:, :1] * base[src[:, 0]] + w[:, 1:2] * base[src[:, 1]] + w[:, 2:] * base[src[:, 2]]
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        v += (rng.standard_normal((hi - lo, DIMS), dtype=np.float32) @ basis) * np.float32(noise)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        vectors[lo:hi] = v
    return sources, weights, vectors


def synthesize(
    n: int, passages: list[str], base: np.ndarray, seed: int = 0, noise: float = NOISE
) -> tuple[list[str], np.ndarray]:
    """``n`` chunk texts and their unit vectors, recombined from ``passages`` (see the docstring).

    The text holds sentences of the chunk's source passages (:func:`mixtures`), each passage's
    share of the characters its weight, taken from a random sentence on: the vector mixes the
    vectors of exactly the passages whose sentences make the text, in the same proportions.
    """
    rng = np.random.default_rng([seed, 1])
    sentences = [_SENTENCE.split(p) for p in passages]
    sources, weights, vectors = mixtures(n, base, seed, noise)
    target = rng.integers(MIN_CHARS + 40, MAX_CHARS, n)
    start = rng.random((n, 3))
    texts: list[str] = []
    for i in range(n):
        want = int(target[i])
        segments: list[str] = []
        used: list[int] = []
        for j in range(3):
            share = float(weights[i, j])
            if share <= 0:
                continue
            source = int(sources[i, j])
            used.append(source)
            sents = sentences[source]
            at = int(start[i, j] * len(sents))
            picked: list[str] = []
            size = 0
            for k in range(len(sents)):  # from a random sentence on, until its share is reached
                picked.append(sents[(at + k) % len(sents)])
                size += len(picked[-1]) + 1
                if size >= want * share:
                    break
            segment = " ".join(picked)
            budget = int((MAX_CHARS - 2) * share)  # never more than its share of the longest chunk
            if len(segment) > budget:
                cut = segment.rfind(" ", 0, budget)
                segment = segment[: cut if cut > budget // 2 else budget]
            segments.append(segment)
        text = " ".join(segments)
        while len(text) < MIN_CHARS:  # tiny passages: more of the same sources
            text += " " + passages[used[len(text) % len(used)]]
        if len(text) > MAX_CHARS:
            text = text[: text.rfind(" ", 0, MAX_CHARS)]
        texts.append(text)
    return texts, vectors


def documents(texts: list[str]) -> list[tuple[str, list[tuple[str, str, dict[str, Any]]]]]:
    """Per tenant (in chunk order), its ``(source, text, metadata)`` documents of 100 chunks."""
    n_docs = -(-len(texts) // CHUNKS_PER_DOC)
    by_tenant: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for d in range(n_docs):
        tenant = tenant_name(d * TENANTS // n_docs)
        chunk_texts = texts[d * CHUNKS_PER_DOC : (d + 1) * CHUNKS_PER_DOC]
        by_tenant.setdefault(tenant, []).append(
            (f"scale-{d:07d}.txt", "\n\n".join(chunk_texts), {"topic": d % TOPICS})
        )
    return list(by_tenant.items())


def tenant_name(i: int) -> str:
    return f"tenant-{i:02d}"


class PrecomputedVectors:
    """An embedder that costs nothing: the real model's id, vectors given in advance.

    Ingest: :meth:`expect` the chunk texts and their vectors in the order the write path embeds
    them; any other text is refused (so a vector always belongs to its text). Queries: the
    precomputed query vectors, by text.
    """

    dimensions = DIMS

    def __init__(self, queries: dict[str, np.ndarray]) -> None:
        from agentrag.embedders import LocalEmbedder

        local = LocalEmbedder()  # not loaded: only its model id and version
        self.model_id, self.version = local.model_id, local.version
        self._queries = queries
        self._texts: list[str] = []
        self._vectors = np.zeros((0, DIMS), dtype=np.float32)
        self._at = 0

    def expect(self, texts: list[str], vectors: np.ndarray) -> None:
        self._texts, self._vectors, self._at = texts, vectors, 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 1 and texts[0] in self._queries:
            return self._queries[texts[0]][None, :]
        at, n = self._at, len(texts)
        if list(texts) != self._texts[at : at + n]:
            raise RuntimeError("the write path asked for vectors of texts not expected in this order")
        self._at = at + n
        return self._vectors[at : at + n]


# ---- the load (child process) -------------------------------------------------------------
def _raw(store: Any) -> Any:
    import psycopg
    from pgvector.psycopg import register_vector
    from sqlalchemy.engine import make_url

    url = make_url(store.engine.url.render_as_string(hide_password=False))
    conn = psycopg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    register_vector(conn)
    return conn


_COPY = (
    "COPY {table} (id, document_id, collection_id, chunk_index, text, start_char, end_char,"
    " page, section, sha256, embedding) FROM STDIN WITH (FORMAT BINARY)"
)
_TYPES = ["text", "text", "int8", "int4", "text", "int4", "int4", "int4", "text", "text", "vector"]


def copy_floor(
    store: Any, texts: list[str], vectors: np.ndarray, vector_type: str = "vector"
) -> tuple[float, float]:
    """Seconds for one raw binary COPY of the rows into agentrag.chunks (rolled back); into a bare table.

    ``vector_type="halfvec"``: the rows' vectors go to ``embedding_half`` as float16, as the
    library's ingest writes them for a halfvec collection."""
    from pgvector import HalfVector

    half = vector_type == "halfvec"
    column, types = ("embedding_half", [*_TYPES[:-1], "halfvec"]) if half else ("embedding", _TYPES)
    copy_sql = _COPY.replace("embedding)", column + ")")
    rows = []
    n_docs = -(-len(texts) // CHUNKS_PER_DOC)
    doc_ids = ["doc_floor_" + uuid.uuid4().hex[:12] for _ in range(n_docs)]
    for i, text in enumerate(texts):
        rows.append(
            (
                "chk_floor_" + uuid.uuid4().hex[:12],
                doc_ids[i // CHUNKS_PER_DOC],
                None,
                i % CHUNKS_PER_DOC,
                text,
                0,
                len(text),
                None,
                None,
                hashlib.sha256(text.encode("utf-8")).hexdigest(),
                HalfVector(vectors[i]) if half else vectors[i],
            )
        )
    floor_coll = store.create_collection(f"bench_scale_floor_{uuid.uuid4().hex[:6]}", vector_type=vector_type)
    rows = [(r[0], r[1], floor_coll.id, *r[3:]) for r in rows]
    conn = _raw(store)
    try:
        with conn.cursor() as cur:
            with cur.copy(
                "COPY agentrag.documents (id, collection_id, source, sha256, text, chunk_count) FROM STDIN"
            ) as cp:
                for d, doc_id in enumerate(doc_ids):
                    cp.write_row((doc_id, floor_coll.id, f"floor-{d}", "", "", CHUNKS_PER_DOC))
            t = time.perf_counter()
            with cur.copy(copy_sql.format(table="agentrag.chunks")) as cp:
                cp.set_types(types)
                for row in rows:
                    cp.write_row(row)
            same_table = time.perf_counter() - t
        conn.rollback()  # nothing of the floor stays
        with conn.cursor() as cur:
            cur.execute(
                "CREATE UNLOGGED TABLE bench_scale_bare (id text, document_id text, collection_id bigint,"
                " chunk_index int, text text, start_char int, end_char int, page int, section text,"
                f" sha256 text, {column} {'halfvec' if half else 'vector'})"
            )
            t = time.perf_counter()
            with cur.copy(copy_sql.format(table="bench_scale_bare")) as cp:
                cp.set_types(types)
                for row in rows:
                    cp.write_row(row)
            bare = time.perf_counter() - t
        conn.rollback()
    finally:
        conn.close()
    store.delete_collection(floor_coll.name)
    return same_table, bare


def load(args: argparse.Namespace) -> None:
    """Build the collection through the library's write path; print the ingest table."""
    from agentrag.store.ingest import ingest_texts
    from benchmarks._db import bench_store

    cache = cache_dir(args.cache)
    passages, queries = scifact(Path(args.data))
    label = Path(args.data).name
    base = real_vectors(passages, cache, f"{label}-passages")
    real_vectors(queries, cache, f"{label}-queries")  # for the search phase
    t = time.perf_counter()
    texts, vectors = synthesize(args.chunks, passages, base, noise=args.noise)
    _log(f"synthesized {len(texts):,} chunks in {time.perf_counter() - t:.0f} s")
    groups = documents(texts)

    embedder = PrecomputedVectors({})
    store = bench_store(embedder)
    name = collection_name(args.chunks, args.vector_type)
    if any(c.name == name for c in store.collections()):
        store.delete_collection(name)
    coll = store.create_collection(
        name,
        description="benchmarks/scale.py",
        hnsw_m=args.hnsw_m,
        hnsw_ef_construction=args.hnsw_ef_construction,
        ef_search=args.ef_search,
        vector_type=args.vector_type,
    )

    import inspect

    from agentrag.store import ingest as ingest_module

    bulk = "bulk" in inspect.signature(ingest_module._ingest).parameters
    deferred: list[Any] = []
    build = store.ensure_vector_index
    options: dict[str, Any] = {"chunk_size": 1000, "chunk_overlap": 0}
    if bulk:
        options["bulk"] = True  # no HNSW index maintained while loading
    # One load per tenant (a tenant is per ingest call), one index build after the last: what
    # bulk=True does for a single load. Each call's own build is held back to the end.
    store.ensure_vector_index = lambda *a, **k: deferred.append(a)  # type: ignore[method-assign]
    at = 0
    written = 0
    t = time.perf_counter()
    for tenant, docs in groups:
        n = sum(len(d[1].split("\n\n")) for d in docs)
        embedder.expect(texts[at : at + n], vectors[at : at + n])
        report = ingest_texts(store, docs, collection=name, tenant=tenant, **options)
        if report.failed or embedder._at != n:
            raise SystemExit(f"ingest of {tenant} failed: {report!r}")
        written += report.chunks_written
        at += n
        _log(f"  {tenant}: {at:,} chunks ({time.perf_counter() - t:.0f} s)")
    ingest_s = time.perf_counter() - t
    store.ensure_vector_index = build  # type: ignore[method-assign]
    if written != len(texts):
        raise SystemExit(f"wrote {written} chunks, expected {len(texts)}")

    _log("floor: raw COPY of the same rows ...")
    floor_s, bare_s = copy_floor(store, texts, vectors, args.vector_type)
    del vectors
    gc.collect()

    _log(f"HNSW build (maintenance_work_mem {args.maintenance_work_mem}) ...")
    coll = store.collection(name)
    with store.engine.connect() as conn:
        has_index = conn.exec_driver_sql(
            "SELECT 1 FROM pg_indexes WHERE schemaname = 'agentrag' AND indexname = %(i)s",
            {"i": coll.hnsw_index},
        ).first()
    t = time.perf_counter()
    hnsw_s = 0.0
    if not has_index:
        store.ensure_vector_index(coll, maintenance_work_mem=args.maintenance_work_mem)
        hnsw_s = time.perf_counter() - t
    with store.engine.connect() as conn:
        workers = conn.exec_driver_sql("SHOW max_parallel_maintenance_workers").scalar()
    t = time.perf_counter()  # the build's ANALYZE again, alone: its share of the build above
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE agentrag.chunks, agentrag.documents")
    analyze_s = time.perf_counter() - t
    n = len(texts)
    how = (
        "bulk=True per tenant, the index built once after the last"
        if bulk
        else "the index build held back to after the last tenant (this library has no bulk=True)"
    )
    print(
        f"\n### Load: {n:,} chunks in {len(texts) // CHUNKS_PER_DOC:,} documents, {TENANTS} tenants "
        f"(vector noise {args.noise})\n"
    )
    print("| what | chunks | seconds | chunks/s | / floor |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| agentrag `ingest_texts` per tenant, vectors precomputed ({how}) | {n:,} | {ingest_s:.1f} | "
        f"{n / ingest_s:,.0f} | {floor_s / ingest_s:.2f} |"
    )
    print(
        f"| floor: one raw binary COPY of the same rows into agentrag.chunks | {n:,} | {floor_s:.1f} | "
        f"{n / floor_s:,.0f} | 1.00 |"
    )
    print(
        f"| physical floor: binary COPY into a bare unlogged table | {n:,} | {bare_s:.1f} | "
        f"{n / bare_s:,.0f} | "
        f"{floor_s / bare_s:.2f} |"
    )
    if hnsw_s:
        print(
            f"| HNSW build (`ensure_vector_index`: the raw `CREATE INDEX`, m={coll.hnsw_m} "
            f"ef_construction={coll.hnsw_ef_construction}, "
            f"maintenance_work_mem {args.maintenance_work_mem}, {workers} parallel workers, then ANALYZE) "
            f"| {n:,} | {hnsw_s:.1f} | {n / hnsw_s:,.0f} | {(hnsw_s - analyze_s) / hnsw_s:.2f} |"
        )
        print(f"| of which ANALYZE of chunks and documents (timed again alone) | | {analyze_s:.1f} | | |")
    else:
        print("| HNSW build: done inside the ingest (bulk=True), included above | | | | |")
    store.close()


def tune(args: argparse.Namespace) -> None:
    """Rebuild a kept collection's index with other parameters through the library; print the time."""
    from benchmarks._db import bench_store

    store = bench_store(PrecomputedVectors({}))
    name = collection_name(args.chunks, args.vector_type)
    t = time.perf_counter()
    coll = store.tune_vector_index(
        name,
        hnsw_m=args.hnsw_m,
        hnsw_ef_construction=args.hnsw_ef_construction,
        ef_search=args.ef_search,
        maintenance_work_mem=args.maintenance_work_mem,
    )
    print(
        f"| HNSW rebuild (`Store.tune_vector_index`: m={coll.hnsw_m}, ef_construction="
        f"{coll.hnsw_ef_construction}, maintenance_work_mem {args.maintenance_work_mem}) | "
        f"{coll.chunk_count:,} | {time.perf_counter() - t:.1f} s |"
    )
    store.close()


def collection_name(chunks: int, vector_type: str = "vector") -> str:
    return f"bench_scale_{chunks}" + ("_halfvec" if vector_type == "halfvec" else "")


# ---- the searches (parent process) --------------------------------------------------------
def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def search_phase(args: argparse.Namespace) -> None:
    from agentrag import Scope
    from agentrag.retrieval.bm25 import BM25Index
    from agentrag.retrieval.legs import ef_search_for
    from agentrag.retrieval.lexical import bm25_index, tsquery_text
    from agentrag.retrieval.sources import load_collections
    from benchmarks._db import bench_store

    cache = cache_dir(args.cache)
    _passages, all_queries = scifact(Path(args.data))
    qvecs = real_vectors(all_queries, cache, f"{Path(args.data).name}-queries")
    queries = all_queries[: args.queries]
    store = bench_store(PrecomputedVectors(dict(zip(all_queries, qvecs, strict=True))))
    name = collection_name(args.chunks, args.vector_type)
    coll = store.collection(name)
    n = coll.chunk_count
    cid = int(coll.id)
    with store.engine.connect() as conn:  # the ef_search the library's vector leg picks (its size rule)
        ef = ef_search_for(None, load_collections(conn, (name,))[0], DEPTH)

    # ---- memory: the BM25 index, built as the first lexical search builds it ----
    BM25Index.build(["imports and first-use allocations outside the measurement"])
    gc.collect()
    rss0 = rss_bytes()
    t = time.perf_counter()
    cached = bm25_index(store.bm25_cache, store.engine, cid, coll.version)
    bm25_s = time.perf_counter() - t
    gc.collect()
    rss1 = rss_bytes()
    own = cached.nbytes if hasattr(cached, "nbytes") else None
    t = time.perf_counter()
    modes = tuple(m for m in MODES if m in args.modes.split(","))
    if "lexical_sql" in modes:
        store.ensure_text_index(cid)
    tsv_s = time.perf_counter() - t
    budget_note = ""
    try:
        from agentrag.retrieval.lexical import DEFAULT_BM25_MEMORY_BUDGET as budget

        budget_note = f"; budget {_mb(budget)} per collection: {'over' if (own or 0) > budget else 'within'}"
    except ImportError:
        pass
    print(f"\n### Memory: the BM25 index of {n:,} chunks\n")
    print("| what | value |")
    print("|---|---:|")
    print(f"| process RSS before the BM25 build | {_mb(rss0)} |")
    print(f"| process RSS after the BM25 build | {_mb(rss1)} |")
    print(f"| RSS growth | {_mb(rss1 - rss0)} ({(rss1 - rss0) / n:,.0f} bytes/chunk) |")
    if own is not None:
        print(
            f"| the index's own size (postings, vocabulary, chunk ids) | {_mb(own)} "
            f"({own / n:,.0f} bytes/chunk){budget_note} |"
        )
    print(f"| BM25 build (read {n:,} chunks, tokenize, index) | {bm25_s:.1f} s |")
    print(
        f"| vocabulary / mean tokens per chunk | {cached.index.vocab_size:,} / "
        f"{cached.index.avg_doc_len:.0f} |"
    )
    if "lexical_sql" in modes:
        print(f"| lexical_sql: tsvectors + GIN index for the collection (first search) | {tsv_s:.1f} s |")

    # ---- storage: the vectors' bytes and the HNSW index's, for float32 beside halfvec ----
    from agentrag.retrieval.catalog import VECTOR_TYPES

    column = VECTOR_TYPES[coll.vector_type]  # an allow-listed column name
    with store.engine.connect() as conn:
        vector_bytes = conn.exec_driver_sql(
            f"SELECT sum(pg_column_size({column})) FROM agentrag.chunks WHERE collection_id = %(c)s",
            {"c": cid},
        ).scalar()
        index_bytes = conn.exec_driver_sql(
            "SELECT pg_relation_size(to_regclass('agentrag.' || %(i)s))", {"i": coll.hnsw_index}
        ).scalar()
    print(f"\n### Storage: {coll.vector_type} vectors of {n:,} chunks\n")
    print("| what | bytes | bytes/chunk |")
    print("|---|---:|---:|")
    print(
        f"| vectors (`{column}`, sum of pg_column_size) | {_mb(vector_bytes or 0)} "
        f"| {(vector_bytes or 0) / n:,.0f} |"
    )
    print(f"| HNSW index `{coll.hnsw_index}` | {_mb(index_bytes or 0)} | {(index_bytes or 0) / n:,.0f} |")

    # ---- who matches what (for the min(k, matches) check), after the memory figures ----
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT c.id, (d.metadata->>'topic')::int, d.tenant_id FROM agentrag.chunks c"
            " JOIN agentrag.documents d ON d.id = c.document_id WHERE c.collection_id = %(c)s",
            {"c": cid},
        ).all()
    where_of = {r[0]: (r[1], r[2]) for r in rows}
    del rows
    topic_at = np.array([where_of[i][0] for i in cached.chunk_ids], dtype=np.int16)
    tenant_at = np.array([int(where_of[i][1][-2:]) for i in cached.chunk_ids], dtype=np.int16)
    del where_of

    def restriction(
        q: int, cond: str
    ) -> tuple[dict[str, Any], str, tuple[Any, ...], Callable[[np.ndarray], np.ndarray]]:
        """(search options, raw SQL condition over d, its parameters, a mask over BM25 positions)."""
        if cond == "filter 1%":
            topic = q % TOPICS
            return (
                {"filters": {"metadata": {"topic": topic}}},
                "d.metadata -> 'topic' = %s::jsonb",
                (json.dumps(topic),),
                lambda pos, t=topic: topic_at[pos] == t,
            )
        if cond == "tenant scope":
            tenant = q % TENANTS
            return (
                {"scope": Scope(tenant=tenant_name(tenant))},
                "d.tenant_id = %s",
                (tenant_name(tenant),),
                lambda pos, t=tenant: tenant_at[pos] == t,
            )
        return {}, "TRUE", (), lambda pos: np.ones(len(pos), dtype=bool)

    raw = _raw(store)
    raw.autocommit = True
    raw.execute(f"SET hnsw.ef_search = {ef}")
    from agentrag.retrieval.catalog import vector_expr

    vtype = coll.vector_type
    vec_expr = f"{vector_expr(DIMS, vtype, 'c.')} <=> %s::vector({DIMS})::{vtype}({DIMS})"

    def raw_vector(vec: np.ndarray, cond_sql: str, params: tuple[Any, ...], k: int = DEPTH) -> list[str]:
        join = "" if cond_sql == "TRUE" else " JOIN agentrag.documents d ON d.id = c.document_id"
        sql = (
            f"SELECT c.id FROM agentrag.chunks c{join} WHERE c.collection_id = {cid} AND {cond_sql}"
            f" ORDER BY {vec_expr} LIMIT {int(k)}"
        )
        return [r[0] for r in raw.execute(sql, (*params, vec)).fetchall()]

    def raw_tsquery(query: str, cond_sql: str, params: tuple[Any, ...], limit: int = DEPTH) -> list[str]:
        from agentrag.retrieval.lexical import tsquery_text

        tsq = tsquery_text(query)
        if not tsq:
            return []
        sql = (
            "SELECT c.id, ts_rank(t.tsv, q, 1) AS s FROM agentrag.chunk_tsv t"
            " JOIN agentrag.chunks c ON c.id = t.chunk_id JOIN agentrag.documents d ON d.id = c.document_id,"
            f" to_tsquery('english', %s) q WHERE t.collection_id = {cid} AND t.tsv @@ q AND {cond_sql}"
            f" ORDER BY s DESC LIMIT {int(limit)}"
        )
        return [r[0] for r in raw.execute(sql, (tsq, *params)).fetchall()]

    def raw_bm25(query: str, cond_sql: str) -> Any:
        return cached.index.top(query, DEPTH) if cond_sql == "TRUE" else cached.index.scores(query)

    def expected(mode: str, query: str, cond_sql: str, params: tuple[Any, ...], mask: Any) -> int:
        if mode in ("vector", "hybrid"):
            return min(TOP_K, int(mask(every).sum()))  # every chunk in the restriction is a match
        if mode == "lexical":
            positions, _ = cached.index.scores(query)
            return min(TOP_K, int(mask(positions).sum()))
        tsq = tsquery_text(query)
        if not tsq:
            return 0
        return int(  # matches, up to k: no ranking needed
            raw.execute(
                "SELECT count(*) FROM (SELECT 1 FROM agentrag.chunk_tsv t"
                " JOIN agentrag.chunks c ON c.id = t.chunk_id"
                " JOIN agentrag.documents d ON d.id = c.document_id, to_tsquery('english', %s) q"
                f" WHERE t.collection_id = {cid} AND t.tsv @@ q AND {cond_sql} LIMIT {TOP_K}) s",
                (tsq, *params),
            ).fetchone()[0]
        )

    every = np.arange(len(cached.chunk_ids))
    floor_of = {
        "vector": "floor: raw HNSW SQL",
        "lexical": "floor: raw BM25 call",
        "lexical_sql": "floor: raw tsquery SQL",
        "hybrid": "floor: raw HNSW SQL + raw BM25 call",
    }
    systems = [*modes, *(floor_of[m] for m in modes)]
    times: dict[tuple[str, str], list[float]] = {}
    violations: dict[tuple[str, str], int] = {}
    used: dict[tuple[str, str], dict[str, int]] = {}
    phases: dict[tuple[str, str, str], list[float]] = {}  # SearchResult.timings_ms per mode, restriction
    vector_hits: dict[tuple[str, int], list[str]] = {}
    print(
        f"\n### Search latency at {n:,} chunks, top_k={TOP_K} ({len(queries)} SciFact test queries, "
        f"depth {DEPTH}, ef_search {ef}, query vectors precomputed)\n"
    )
    print(
        "| mode | restriction | p50 ms | p99 ms | floor p50 ms | floor p99 ms | p50 / floor | "
        "results != min(k, matches) | used_mode |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---|", flush=True)
    for cond in CONDITIONS:
        _log(f"searching: {cond} ...")
        raw.execute("SET hnsw.iterative_scan = " + ("off" if cond == "unfiltered" else "relaxed_order"))
        for q, query in enumerate([*queries[:3], *queries]):  # the first 3: untimed warm-up
            warm = q < 3
            qi = q - 3
            options, cond_sql, params, mask = restriction(max(qi, 0), cond)
            vec = store.embedder.embed([query])[0]
            # the first system to run a query reads its HNSW pages from disk: rotate who goes first
            turn = max(qi, 0) % len(systems)
            for system in systems[turn:] + systems[:turn]:
                t = time.perf_counter()
                if system in modes:
                    result = store.search(query, collections=name, mode=system, top_k=TOP_K, **options)
                elif system == "floor: raw HNSW SQL":
                    raw_vector(vec, cond_sql, params)
                elif system == "floor: raw BM25 call":
                    raw_bm25(query, cond_sql)
                elif system == "floor: raw tsquery SQL":
                    raw_tsquery(query, cond_sql, params)
                else:
                    raw_vector(vec, cond_sql, params)
                    raw_bm25(query, cond_sql)
                ms = (time.perf_counter() - t) * 1000
                if warm:
                    continue
                times.setdefault((system, cond), []).append(ms)
                if system in modes:
                    got = len(result.hits)
                    want = expected(system, query, cond_sql, params, mask)
                    violations[(system, cond)] = violations.get((system, cond), 0) + (got != want)
                    counts = used.setdefault((system, cond), {})
                    counts[result.used_mode] = counts.get(result.used_mode, 0) + 1
                    if system == "vector":
                        vector_hits[(cond, qi)] = [h.chunk_id for h in result.hits]
                    for part, part_ms in result.timings_ms.items():
                        phases.setdefault((system, cond, part), []).append(part_ms)
            if qi >= 0 and qi % 10 == 9:
                _log(f"  {qi + 1}/{len(queries)}")
        for mode in modes:  # this restriction's rows now: a long run keeps what it measured
            ours, floor = times[(mode, cond)], times[(floor_of[mode], cond)]
            modes_used = ", ".join(f"{m} x{c}" for m, c in sorted(used[(mode, cond)].items()))
            print(
                f"| {mode} | {cond} | {statistics.median(ours):.1f} | {_pct(ours, 0.99):.1f} | "
                f"{statistics.median(floor):.1f} | {_pct(floor, 0.99):.1f} | "
                f"{statistics.median(ours) / max(statistics.median(floor), 1e-6):.2f} | "
                f"{violations[(mode, cond)]} of {len(ours)} | {modes_used} |",
                flush=True,
            )
    print(
        f"\nFloors: {', '.join(floor_of.values())} (HNSW SQL: same ORDER BY, LIMIT {DEPTH}, ef_search {ef}, "
        "iterative scan when restricted; BM25: `top` unrestricted, `scores` restricted)."
    )
    parts = ("vector", "lexical", "fuse", "fetch", "total")
    print("\nWhere the time goes (p50 of each search's own `timings_ms`; the rest of `total` is the")
    print("connection, the collection lookup and the transaction):\n")
    print("| mode | restriction | " + " | ".join(f"{p} ms" for p in parts) + " |")
    print("|---|---|" + "---:|" * len(parts))
    for cond in CONDITIONS:
        for mode in modes:
            cells = [
                f"{statistics.median(phases[(mode, cond, p)]):.1f}" if (mode, cond, p) in phases else "-"
                for p in parts
            ]
            print(f"| {mode} | {cond} | " + " | ".join(cells) + " |")

    # ---- recall@10 against the exact scan ----
    _log("recall@10 against the exact scan ...")
    raw.execute("SET hnsw.iterative_scan = off")
    recall: dict[str, list[float]] = {}
    efs = sorted({40, 100, 200, 400, 800, ef})
    raw_ms: dict[int, list[float]] = {}
    for qi, query in enumerate(queries):
        vec = store.embedder.embed([query])[0]
        for cond in ("unfiltered", "filter 1%"):
            _options, cond_sql, params, _mask = restriction(qi, cond)
            join = "" if cond_sql == "TRUE" else " JOIN agentrag.documents d ON d.id = c.document_id"
            exact = [
                r[0]
                for r in raw.execute(
                    f"SELECT c.id FROM agentrag.chunks c{join} WHERE c.collection_id = {cid} AND {cond_sql}"
                    f" ORDER BY ({vec_expr}) + 0 LIMIT {TOP_K}",
                    (*params, vec),
                ).fetchall()
            ]
            hits = vector_hits[(cond, qi)]
            recall.setdefault(f"agentrag vector mode, {cond} (ef_search {ef})", []).append(
                len(set(hits) & set(exact)) / len(exact)
            )
            if cond == "unfiltered":
                for e in efs:
                    raw.execute(f"SET hnsw.ef_search = {e}")
                    t = time.perf_counter()
                    got = raw_vector(vec, "TRUE", (), k=TOP_K)
                    raw_ms.setdefault(e, []).append((time.perf_counter() - t) * 1000)
                    recall.setdefault(f"raw HNSW SQL, ef_search {e}, LIMIT {TOP_K}", []).append(
                        len(set(got) & set(exact)) / len(exact)
                    )
                raw.execute(f"SET hnsw.ef_search = {ef}")
        if qi % 10 == 9:
            _log(f"  {qi + 1}/{len(queries)}")
    print(
        f"\n### Vector recall@{TOP_K} against the exact scan ({len(queries)} queries; "
        f"HNSW m={coll.hnsw_m}, ef_construction={coll.hnsw_ef_construction})\n"
    )
    print("| what | recall@10 mean | min | queries under 0.9 | raw query p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, values in recall.items():
        e = int(label.split("ef_search ")[1].split(",")[0]) if label.startswith("raw") else None
        ms = f"{statistics.median(raw_ms[e]):.1f} | {_pct(raw_ms[e], 0.99):.1f}" if e else "- | -"
        print(
            f"| {label} | {statistics.mean(values):.4f} | {min(values):.2f} | "
            f"{sum(v < 0.9 for v in values)} | {ms} |"
        )

    # ---- the model's own query time, for scale ----
    from agentrag.embedders import LocalEmbedder

    local = LocalEmbedder().load()
    local.embed([queries[0]])
    t = time.perf_counter()
    for query in queries[:20]:
        local.embed([query])
    print(
        f"\nQuery embedding with {local!r}, not included above: "
        f"{(time.perf_counter() - t) * 1000 / min(20, len(queries)):.1f} ms per query (mean of 20)."
    )
    raw.close()
    if not args.keep:
        store.delete_collection(name)
    store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--chunks", type=int, default=100_000, help="chunks in the collection (1000000: the issue's run)"
    )
    parser.add_argument(
        "--queries", type=int, default=100, help="SciFact test queries per mode and restriction"
    )
    parser.add_argument("--modes", default=",".join(MODES), help="search modes to measure (comma-separated)")
    parser.add_argument(
        "--noise",
        type=float,
        default=NOISE,
        help=f"scale of the corpus-shaped noise added to each chunk's vector (default {NOISE}; see above)",
    )
    parser.add_argument(
        "--vector-type",
        choices=("vector", "halfvec"),
        default="vector",
        help="the collection's vector storage (halfvec: float16, its own collection bench_scale_N_halfvec)",
    )
    parser.add_argument("--hnsw-m", type=int, default=16, help="the collection's HNSW m (default 16)")
    parser.add_argument(
        "--hnsw-ef-construction", type=int, default=64, help="the collection's HNSW ef_construction (64)"
    )
    parser.add_argument(
        "--ef-search", type=int, default=None, help="the collection's ef_search (default: max(100, depth))"
    )
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--cache", default=None, help="where the real vectors are cached (.npy)")
    parser.add_argument("--maintenance-work-mem", default="2GB", help="for the HNSW build")
    parser.add_argument(
        "--phase",
        choices=("all", "load", "search", "tune"),
        default="all",
        help="load: build the collection; search: measure an existing one (--keep'd); tune: set a kept "
        "collection's --hnsw-m / --hnsw-ef-construction / --ef-search (Store.tune_vector_index, timed)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the collection (to rerun --phase search)")
    parser.add_argument(
        "--tenants",
        type=int,
        default=None,
        help="long-tail tenants instead: scoped beside unscoped search (benchmarks/scale_tenants.py)",
    )
    parser.add_argument(
        "--recall-queries", type=int, default=20, help="with --tenants: queries checked for recall"
    )
    parser.add_argument("--passages", type=int, default=0, help="with --tenants: SciFact passages (0: all)")
    parser.add_argument(
        "--tenant-indexes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --tenants: Store.optimize's per-tenant HNSW indexes; each scoped search also without them",
    )
    args = parser.parse_args(argv)
    if args.tenants is not None:
        from benchmarks import scale_tenants

        if not 1 <= args.tenants <= args.chunks // scale_tenants.CHUNKS_PER_DOC:
            parser.error("--tenants must be in [1, chunks / 10]")
        print(
            f"benchmarks.scale --tenants: load average {os.getloadavg()[0]:.1f} (a shared machine)",
            flush=True,
        )
        scale_tenants.run(args)
        return 0
    if not 0 <= args.noise <= 2:
        parser.error("--noise must be in [0, 2]")
    if args.chunks < CHUNKS_PER_DOC * TENANTS:
        parser.error(f"--chunks must be at least {CHUNKS_PER_DOC * TENANTS}")
    if args.phase != "load":
        print(
            f"benchmarks.scale: {args.chunks:,} chunks; load average {os.getloadavg()[0]:.1f} "
            f"(the machine may be shared: compare each figure with its floor)",
            flush=True,
        )
    if args.phase == "load":
        load(args)
        return 0
    if args.phase == "tune":
        tune(args)
        return 0
    if args.phase == "all":
        # the load in a child process: the memory figures below are the search side's alone
        child = (
            [sys.executable, "-m", "benchmarks.scale", *sys.argv[1:], "--phase", "load"]
            if argv is None
            else [sys.executable, "-m", "benchmarks.scale", *argv, "--phase", "load"]
        )
        sys.stdout.flush()
        if subprocess.call(child) != 0:
            return 1
    search_phase(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
