"""Scale with long-tail tenants: scoped search beside unscoped (``benchmarks.scale --tenants N``).

    .venv/bin/python -m benchmarks.scale --tenants 1000 --chunks 1000000      # the issue's size
    .venv/bin/python -m benchmarks.scale --tenants 1000 --chunks 100000 --queries 40

* Data: ``--chunks`` synthetic chunks recombined from SciFact passages with their real vectors
  (:func:`benchmarks.scale.synthesize`; ``--passages N``: from the first N passages only, when embedding
  all 5,183 once is too slow for the machine), in documents of 10 chunks, each with ``metadata.topic`` in
  0..99 (``{"metadata": {"topic": 7}}`` keeps 1 %). ``--tenants`` tenants whose sizes follow a long tail,
  Zipf with exponent 1 (tenant ``i`` holds a share proportional to ``1 / (i + 1)``, at least one document):
  at 1M chunks and 1,000 tenants the largest holds 138,610 chunks and the median 260. Loaded
  through the library (``ingest_texts`` per tenant, ``bulk=True``, one HNSW build after the last).
* Queries: SciFact test queries (precomputed vectors), top_k 10, depth 100, hybrid, under: no
  restriction; the 1 % filter; a tenant scope; tenant + filter. Each scoped query takes a tenant of
  each size class in turn: ``large`` (the 3 largest), ``medium`` (ranks 10-49), ``small`` (the
  smallest half).
* Beside each: the floor in the same run (psycopg and the same in-memory BM25 index doing the same
  work: the vector SQL the planner chose, HNSW or exact, with its settings; BM25's top for no
  restriction, else the scope's chunk ids read by raw SQL and BM25 over them; the fetch of the 10
  hits), and ``planner off``: the library with the scope planner disabled (``scoped.ENABLED = False``:
  every restricted search walks HNSW iteratively with pgvector's ``max_scan_tuples`` and sends the BM25
  ranking in slices, as before the planner).
* ``--tenant-indexes`` (the default): ``Store.optimize`` gives each tenant of at least 5,000 chunks its
  own partial HNSW index (timed), and each restricted search also runs with them ignored
  (``tenant_walk.ENABLED = False``: the "no tenant index" column, same run); ``--no-tenant-indexes``:
  the searches never use them.
* ``--vector-type halfvec``: the collection stores float16 (``bench_tenants_N_T_halfvec``); the floor and the
  exact truth state the same halfvec expression; ``Store.optimize``'s tenant indexes take its opclass.
* Checked: every result has exactly ``min(10, matches)`` hits; vector recall@10 of the vector
  mode against the exact scan within the same restriction, per size class.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.scale import (
    DIMS,
    PrecomputedVectors,
    _log,
    _pct,
    cache_dir,
    real_vectors,
    scifact,
    synthesize,
)

CHUNKS_PER_DOC = 10
TOP_K = 10
DEPTH = 100
FILTER = {"metadata": {"topic": 7}}
CLASSES = {"large": (0, 3), "medium": (10, 50), "small": (None, None)}  # ranks; small: the lower half


def tenant_sizes(chunks: int, tenants: int) -> list[int]:
    """Chunks per tenant, Zipf(1), whole documents, at least one each, summing to ``chunks``."""
    docs = chunks // CHUNKS_PER_DOC
    weights = 1.0 / np.arange(1, tenants + 1)
    share = np.maximum(1, np.floor(weights / weights.sum() * docs)).astype(int)
    share[0] += docs - int(share.sum())  # the rounding goes to the largest
    return [int(s) * CHUNKS_PER_DOC for s in share]


def collection_name(chunks: int, tenants: int, vector_type: str = "vector") -> str:
    return f"bench_tenants_{chunks}_{tenants}" + ("_halfvec" if vector_type == "halfvec" else "")


def vector_sql(vector_type: str) -> tuple[str, str]:
    """The collection's indexed vector expression over ``c`` and the query parameter cast to its type
    (what the library's vector leg states, so the floor and the truth use the same index / scan)."""
    from agentrag.retrieval.catalog import vector_expr

    return vector_expr(DIMS, vector_type, "c."), f"%(q)s::vector({DIMS})::{vector_type}({DIMS})"


def class_tenants(sizes: list[int]) -> dict[str, list[str]]:
    n = len(sizes)
    out = {}
    for cls, (lo, hi) in CLASSES.items():
        ranks = range(n // 2, n) if lo is None else range(min(lo, n - 1), min(hi or n, n))
        out[cls] = [tenant(i) for i in ranks]
    return out


def tenant(i: int) -> str:
    return f"t{i:04d}"


def load(
    store: Any,
    name: str,
    chunks: int,
    tenants: int,
    data: Path,
    cache: Path,
    n_passages: int,
    memory: str,
    vector_type: str = "vector",
) -> None:
    from agentrag.store.ingest import ingest_texts

    passages, _queries = scifact(data)
    passages = passages[:n_passages] if n_passages else passages
    base = real_vectors(passages, cache, f"{data.name}-passages")
    t = time.perf_counter()
    texts, vectors = synthesize(chunks, passages, base)
    _log(f"synthesized {len(texts):,} chunks in {time.perf_counter() - t:.0f} s")
    embedder: PrecomputedVectors = store.embedder
    store.create_collection(
        name, description="benchmarks/scale_tenants.py", scoped=True, vector_type=vector_type
    )
    deferred: list[Any] = []
    build = store.ensure_vector_index
    store.ensure_vector_index = lambda *a, **k: deferred.append(a)  # one build after the last tenant
    at, doc = 0, 0
    t = time.perf_counter()
    for i, size in enumerate(tenant_sizes(chunks, tenants)):
        docs = []
        for start in range(at, at + size, CHUNKS_PER_DOC):
            body = "\n\n".join(texts[start : start + CHUNKS_PER_DOC])
            docs.append((f"doc-{doc:07d}.txt", body, {"topic": doc % 100}))
            doc += 1
        embedder.expect(texts[at : at + size], vectors[at : at + size])
        report = ingest_texts(
            store, docs, collection=name, tenant=tenant(i), chunk_size=1000, chunk_overlap=0, bulk=True
        )
        if report.failed or report.chunks_written != size:
            raise SystemExit(f"ingest of {tenant(i)} failed: {report!r}")
        at += size
        if i % 100 == 0:
            _log(f"  {i} tenants, {at:,} chunks ({time.perf_counter() - t:.0f} s)")
    store.ensure_vector_index = build
    _log(f"loaded {at:,} chunks in {time.perf_counter() - t:.0f} s; HNSW build ({memory}) ...")
    t = time.perf_counter()
    store.ensure_vector_index(store.collection(name), maintenance_work_mem=memory)
    _log(f"HNSW build {time.perf_counter() - t:.0f} s")


def _raw(store: Any) -> Any:
    import psycopg
    from pgvector.psycopg import register_vector
    from sqlalchemy.engine import make_url

    url = make_url(store.engine.url.render_as_string(hide_password=False))
    conn = psycopg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    register_vector(conn)
    return conn


def floor_search(
    conn: Any,
    cached: Any,
    cid: int,
    qvec: np.ndarray,
    query: str,
    where: str,
    params: dict[str, Any],
    leg: dict,
    vector_type: str = "vector",
) -> int:
    """The same work as the library's hybrid search, raw: the planned vector SQL, BM25, the fetch."""
    from agentrag.retrieval.bm25 import first_ranked
    from agentrag.retrieval.fusion import relative_score

    exact = leg["vector"] == "exact"
    own = leg["vector"] == "hnsw-tenant"  # the tenant's own index: the tenant stated on chunks
    stored, q = vector_sql(vector_type)
    order = f"({stored} <=> {q}) + 0" if exact else f"{stored} <=> {q}"
    join = "" if where == "TRUE" else " JOIN agentrag.documents d ON d.id = c.document_id"
    vector_where = where
    if own:
        only = where == "d.tenant_id = %(tenant)s"
        join = "" if only else join
        vector_where = "c.tenant_id = %(tenant)s" + ("" if only else f" AND ({where})")
    with conn.transaction():
        if not exact:
            conn.execute(
                "SELECT set_config('hnsw.ef_search', %(ef)s, true),"
                " set_config('hnsw.iterative_scan', %(s)s, true),"
                " set_config('hnsw.max_scan_tuples', %(m)s, true),"
                " set_config('plan_cache_mode', %(p)s, true)",
                {
                    "ef": str(leg["ef_search"] or 100),
                    "s": "off" if where == "TRUE" else "relaxed_order",
                    "m": str(leg["max_scan_tuples"] or 20000),
                    "p": "force_custom_plan" if own else "auto",
                },
            )
        vector = conn.execute(
            f"WITH h AS MATERIALIZED (SELECT c.id, {stored} <=> {q} AS dist"
            f" FROM agentrag.chunks c{join} WHERE c.collection_id = {cid} AND ({vector_where})"
            f" ORDER BY {order} LIMIT {DEPTH})"
            " SELECT id, 1 - dist FROM h ORDER BY dist",
            {**params, "q": qvec},
        ).fetchall()
        if where == "TRUE":
            positions, scores = cached.index.top(query, DEPTH)
        else:
            scope = conn.execute(
                f"SELECT d.id FROM agentrag.documents d WHERE d.collection_id = {cid} AND ({where})", params
            ).fetchall()
            keys = cached.document_keys
            at = np.searchsorted(keys, np.array([r[0].encode() for r in scope], dtype=bytes))
            in_scope = np.zeros(len(keys), dtype=bool)
            in_scope[at] = True
            positions, scores = cached.index.match(query)
            keep = in_scope[cached.document_of[positions]]
            positions, scores = first_ranked(positions[keep], scores[keep], DEPTH)
        lexical = [(str(i), float(s)) for i, s in zip(cached.chunk_ids[positions], scores, strict=True)]
        fused = relative_score([(r[0], float(r[1])) for r in vector], lexical, vector_weight=0.5)[:TOP_K]
        ids = [i for i, _ in fused]
        rows = conn.execute(
            "SELECT c.id, c.text, d.source FROM agentrag.chunks c"
            " JOIN agentrag.documents d ON d.id = c.document_id WHERE c.id = ANY(%(ids)s)",
            {"ids": ids},
        ).fetchall()
    return len(rows)


def run(args: argparse.Namespace) -> None:
    from agentrag import Scope
    from agentrag.retrieval import scoped, tenant_walk
    from agentrag.retrieval.lexical import bm25_index
    from benchmarks._db import bench_store

    data, cache = Path(args.data), cache_dir(args.cache)
    _passages, all_queries = scifact(data)
    qvecs = real_vectors(all_queries, cache, f"{data.name}-queries")
    store = bench_store(PrecomputedVectors(dict(zip(all_queries, qvecs, strict=True))))
    name = collection_name(args.chunks, args.tenants, args.vector_type)
    if name not in {c.name for c in store.collections()}:
        load(
            store,
            name,
            args.chunks,
            args.tenants,
            data,
            cache,
            args.passages,
            args.maintenance_work_mem,
            args.vector_type,
        )
    coll = store.collection(name)
    if coll.vector_type != args.vector_type:
        raise SystemExit(f"{name} stores {coll.vector_type}, not {args.vector_type}")
    indexed = _tenant_indexes(store, name, args.tenant_indexes)
    sizes = tenant_sizes(args.chunks, args.tenants)
    classes = class_tenants(sizes)
    size_of = {tenant(i): s for i, s in enumerate(sizes)}
    cached = bm25_index(store.bm25_cache, store.engine, int(coll.id), coll.version)
    raw = _raw(store)
    queries = all_queries[: args.queries]
    qv = dict(zip(all_queries, qvecs, strict=True))

    conditions: list[tuple[str, str | None, bool]] = [("unscoped", None, False), ("filter 1%", None, True)]
    for cls in CLASSES:
        conditions += [(f"tenant {cls}", cls, False), (f"tenant {cls} + filter", cls, True)]
    lat: dict[str, dict[str, list[float]]] = {
        c[0]: {"lib": [], "floor": [], "off": [], "no_index": []} for c in conditions
    }
    plans: dict[str, set[str]] = {c[0]: set() for c in conditions}
    wrong: list[str] = []
    recall: dict[str, list[float]] = {c[0]: [] for c in conditions}
    leg_of: dict[tuple[str, str | None], dict[str, Any]] = {}
    for qi, query in enumerate(queries):
        for ci, (label, cls, filtered) in enumerate(conditions):
            t_name = classes[cls][qi % len(classes[cls])] if cls else None
            scope = Scope(tenant=t_name) if t_name else Scope.every()
            filters = FILTER if filtered else None
            where, params = _where(t_name, filtered)
            options = {
                "collections": name,
                "top_k": TOP_K,
                "depth": DEPTH,
                "scope": scope,
                "filters": filters,
            }
            key = (label, t_name)
            if key not in leg_of:  # the plan the floor runs, read once per restriction before any timing
                explained = store.search(query, explain=True, **options).explain
                leg_of[key] = explained[0] if explained else {}
            systems = ["lib", "floor"]
            if where != "TRUE":
                systems += ["off", "no_index"] if args.tenant_indexes else ["off"]
            # a seeded shuffle: run first, a system reads the pages cold for the others (the floor always
            # ran right after the library before, on pages the library had just read)
            result = None
            for system in random.Random(qi * 1009 + ci).sample(systems, len(systems)):
                t = time.perf_counter()
                if system == "lib":
                    result = store.search(query, explain=True, **options)
                elif system == "floor":
                    floor_search(
                        raw,
                        cached,
                        int(coll.id),
                        qv[query],
                        query,
                        where,
                        params,
                        leg_of[key],
                        coll.vector_type,
                    )
                elif system == "off":
                    scoped.ENABLED = False
                    try:
                        store.search(query, **options)
                    finally:
                        scoped.ENABLED = True
                else:
                    tenant_walk.ENABLED = False
                    try:
                        store.search(query, **options)
                    finally:
                        tenant_walk.ENABLED = True
                lat[label][system].append((time.perf_counter() - t) * 1000)
            assert result is not None
            leg = result.explain[0] if result.explain else {}
            plans[label].add(f"{leg.get('vector')}/{leg.get('lexical')}")
            matches = _count(raw, int(coll.id), where, params)
            if len(result) != min(TOP_K, matches):
                wrong.append(f"{label} q{qi}: {len(result)} hits, {matches} match")
            if qi < args.recall_queries:
                vector = store.search(query, mode="vector", **options)
                truth = _exact(raw, int(coll.id), qv[query], where, params, coll.vector_type)
                if truth:
                    recall[label].append(len(set(vector.chunk_ids) & set(truth)) / len(truth))
        if qi % 10 == 0:
            _log(f"  query {qi + 1}/{len(queries)}")
    raw.close()
    _report(args, coll, sizes, classes, size_of, lat, plans, recall, wrong)
    print(f"Tenant indexes: {indexed}")
    store.close()


def _tenant_indexes(store: Any, name: str, on: bool) -> str:
    """``Store.optimize`` (timed) with ``--tenant-indexes``; without, searches never use them."""
    from agentrag.retrieval import tenant_walk

    if not on:
        tenant_walk.ENABLED = False
        return "off (--no-tenant-indexes)"
    t = time.perf_counter()
    report = store.optimize(name)
    seconds = time.perf_counter() - t
    _log(f"{report} in {seconds:.0f} s")
    return f"{len(report.built) + len(report.kept)} ({report}; {seconds:.0f} s)"


def _where(t_name: str | None, filtered: bool) -> tuple[str, dict[str, Any]]:
    parts, params = [], {}
    if t_name:
        parts.append("d.tenant_id = %(tenant)s")
        params["tenant"] = t_name
    if filtered:
        parts.append("d.metadata @> %(f)s::jsonb")
        params["f"] = '{"topic": 7}'
    return (" AND ".join(parts) or "TRUE"), params


def _count(conn: Any, cid: int, where: str, params: dict[str, Any]) -> int:
    sql = "SELECT coalesce(sum(d.chunk_count), 0) FROM agentrag.documents d WHERE d.collection_id = %(c)s"
    return int(conn.execute(f"{sql} AND ({where})", {**params, "c": cid}).fetchone()[0])


def _exact(
    conn: Any, cid: int, qvec: np.ndarray, where: str, params: dict[str, Any], vector_type: str = "vector"
) -> list[str]:
    stored, q = vector_sql(vector_type)
    rows = conn.execute(
        "SELECT c.id FROM agentrag.chunks c JOIN agentrag.documents d ON d.id = c.document_id"
        f" WHERE c.collection_id = {cid} AND ({where})"
        f" ORDER BY ({stored} <=> {q}) + 0 LIMIT {TOP_K}",
        {**params, "q": qvec},
    ).fetchall()
    conn.rollback()
    return [r[0] for r in rows]


def _report(args, coll, sizes, classes, size_of, lat, plans, recall, wrong) -> None:  # type: ignore[no-untyped-def]
    from agentrag.retrieval.scoped import EXACT_MAX_ROWS

    unscoped = statistics.median(lat["unscoped"]["lib"])
    print(
        f"\n### {coll.vector_type} storage: {coll.chunk_count:,} chunks, {args.tenants:,} tenants "
        f"(Zipf 1: largest {sizes[0]:,}, "
        f"median {int(statistics.median(sizes)):,}, smallest {sizes[-1]:,} chunks); {args.queries} queries, "
        f"hybrid, top_k {TOP_K}, depth {DEPTH}; EXACT_MAX_ROWS {EXACT_MAX_ROWS:,}\n"
    )
    for cls, names in classes.items():
        chunk_counts = [size_of[n] for n in names]
        print(f"- {cls}: {len(names)} tenants of {min(chunk_counts):,}-{max(chunk_counts):,} chunks")
    print(
        "\n| restriction | plan (vector/lexical) | p50 ms | p99 ms | floor p50 | floor p99 | p50 / floor "
        "| p50 / unscoped p50 | planner off p50 | planner off p99 | no tenant index p50 / p99 (/ unscoped) "
        "| recall@10 |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, values in lat.items():
        lib, floor, off, bare = values["lib"], values["floor"], values["off"], values["no_index"]
        p50, f50 = statistics.median(lib), statistics.median(floor)
        off_cols = f"{statistics.median(off):.1f} | {_pct(off, 0.99):.1f}" if off else "- | -"
        bare_col = "-"
        if bare:
            b50 = statistics.median(bare)
            bare_col = f"{b50:.1f} / {_pct(bare, 0.99):.1f} ({b50 / unscoped:.2f})"
        rec = f"{statistics.mean(recall[label]):.3f}" if recall[label] else "-"
        print(
            f"| {label} | {', '.join(sorted(plans[label]))} | {p50:.1f} | {_pct(lib, 0.99):.1f} | "
            f"{f50:.1f} | {_pct(floor, 0.99):.1f} | {p50 / f50:.2f} | {p50 / unscoped:.2f} | "
            f"{off_cols} | {bare_col} | {rec} |"
        )
    print(f"\nResults with exactly min(k, matches) hits: {'all' if not wrong else f'NOT all: {wrong[:5]}'}")
