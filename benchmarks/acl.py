"""Document permissions at scale: a search filtered by grants beside the unfiltered search and the floor.

    .venv/bin/python -m benchmarks.acl [--chunks 100000] [--groups 1000] [--queries 50] [--keep]
        [--vector-types vector,halfvec]

* Data: SciFact passages (all, or the first ``--passages``) recombined into ``--chunks`` chunks
  exactly as ``benchmarks/scale.py`` does (real all-MiniLM-L6-v2 vectors of the passages, mixed;
  cached as ``.npy`` in ``--cache``),
  10 chunks per document, in one collection created with ``acl=True``. Document ``d`` is granted
  to ``group:g<d mod groups>`` only (1,000 groups: each holds 0.1 % of the documents), written
  through the library's ingest with the grants in each document's metadata.
* Principals: a user in 10, 100 or 500 of the groups sees 1 %, 10 % or 50 % of the chunks; the
  unfiltered search is the same collection searched by an admin principal (no predicate at all).
* Latency, top_k=10, ``vector`` and ``hybrid`` modes through ``Store.search``, each query's systems
  interleaved in an order shuffled per query and principal (seeded). Floor: the vector search
  written by hand (psycopg) doing the library's work: the plan the library chose for that principal
  (its ``SearchResult.plan``: the HNSW walk, the iterative walk with the same ``max_scan_tuples``,
  or the exact scan), the same predicate (``d.grants && %s``, in the same statement), all ``depth``
  candidates ranked and returned (no outer LIMIT that would let the walk stop after ``top_k``), then
  the ``top_k`` hits' rows fetched as the library fetches them (no predicate for the unfiltered row).
* ``whole exact scan (clusters off)``: where the library reads the scope's nearest clusters (a collection
  fitted by ``Store.optimize``: ``vector=clusters``), the same searches with ``clusters.ENABLED = False``
  (the whole exact scan, the plan before migration 0056), in the same run; the floor of the clusters
  plan reads the scope's document ids, then its rows in the same probed clusters.
* ``count cache off``: the same searches with the store's cached scope counts bypassed
  (``scope_cache.ENABLED = False``: the plan counts the scope in every search, as before migration 0057), in
  the same run; "vector" and "hybrid" read a principal's scope from the cache after its first search.
* ``planner off``: the same searches with the scope planner disabled (``scoped.ENABLED = False``:
  the iterative HNSW walk and the BM25 ranking sent to SQL in slices, the path before the grant
  predicate went through the planner), in the same run.
* ``--vector-types vector,halfvec`` (issue #39): one collection per storage type (the same chunks, vectors
  and grants; the halfvec one named ``..._halfvec``), every system of each in the same shuffled order per
  query (planner off: the first type only), each row beside its own type's unfiltered search.
* Checked on every query: exactly ``min(top_k, visible chunks)`` hits, every hit visible to the
  principal (its grant named), and recall@10 of the vector mode against the exact scan with
  the same predicate (ordered by ``distance + 0``, which no index serves).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import scale

TOP_K = 10
DEPTH = 100
CHUNKS_PER_DOC = 10
VISIBILITY = (("1 %", 0.01), ("10 %", 0.10), ("50 %", 0.50))


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def collection_name(chunks: int, groups: int, vector_type: str = "vector") -> str:
    return f"acl_bench_{chunks}_{groups}" + ("" if vector_type == "vector" else f"_{vector_type}")


def load(
    store: Any,
    embedder: Any,
    args: argparse.Namespace,
    passages: list[str],
    base: np.ndarray,
    vector_type: str = "vector",
) -> None:
    from agentrag.store.ingest import ingest_texts

    texts, vectors = scale.synthesize(args.chunks, passages, base)
    docs = []
    for d in range(-(-len(texts) // CHUNKS_PER_DOC)):
        part = texts[d * CHUNKS_PER_DOC : (d + 1) * CHUNKS_PER_DOC]
        docs.append((f"acl-{d:06d}.txt", "\n\n".join(part), {"grants": [f"group:g{d % args.groups:04d}"]}))
    name = collection_name(args.chunks, args.groups, vector_type)
    store.create_collection(name, description="benchmarks/acl.py", acl=True, vector_type=vector_type)
    embedder.expect(texts, vectors)
    t = time.perf_counter()
    report = ingest_texts(store, docs, collection=name, chunk_size=1000, chunk_overlap=0, bulk=True)
    if report.failed or report.chunks_written != len(texts):
        raise SystemExit(f"the load failed: {report!r}")
    _log(f"loaded {len(texts):,} chunks in {len(docs):,} documents in {time.perf_counter() - t:.0f} s")


def _raw(store: Any) -> Any:
    import psycopg
    from pgvector.psycopg import register_vector
    from sqlalchemy.engine import make_url

    url = make_url(store.engine.url.render_as_string(hide_password=False))
    conn = psycopg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    register_vector(conn)
    return conn


def cluster_floor_sql(vector_type: str) -> str:
    """The clusters plan's statement by hand (agentrag.retrieval.clusters.cluster_sql, psycopg style)."""
    from agentrag.retrieval.catalog import vector_expr

    expr = f"{vector_expr(384, vector_type, 'c.')} <=> %(q)s::vector(384)::{vector_type}(384)"
    docs = "c.document_id COLLATE \"C\" = ANY(string_to_array(%(docs)s, ','))"
    return (
        f"WITH hits AS MATERIALIZED (SELECT id, distance FROM (SELECT c.id, {expr} AS distance"
        f" FROM agentrag.chunks c WHERE c.cluster = ANY(%(probes)s::smallint[]) AND {docs} UNION ALL"
        f" SELECT c.id, {expr} AS distance FROM agentrag.chunks c WHERE c.cluster IS NULL AND {docs}"
        " OFFSET 0) s ORDER BY distance + 0 LIMIT %(depth)s)"
        ' SELECT id FROM hits ORDER BY distance, id COLLATE "C"'
    )


def floor_sql(cid: int, restricted: bool, exact: bool = False, vector_type: str = "vector") -> str:
    """The vector leg written by hand: the same expression, index predicate, ORDER BY and LIMIT depth.

    Every ``depth`` candidate comes back (the library's leg returns them all for the fusion): an outer
    ``LIMIT k`` over the walk's CTE would let PostgreSQL stop the walk after ``k`` rows."""
    from agentrag.retrieval.catalog import vector_expr

    expr = f"{vector_expr(384, vector_type, 'c.')} <=> %(q)s::vector(384)::{vector_type}(384)"
    same = " AND d.collection_id = c.collection_id" if exact else ""
    join = f" JOIN agentrag.documents d ON d.id = c.document_id{same}" if restricted else ""
    where = " AND d.grants && %(tokens)s::text[]" if restricted else ""
    order = f"({expr}) + 0" if exact else expr
    return (
        f"WITH hits AS MATERIALIZED (SELECT c.id, {expr} AS distance FROM agentrag.chunks c{join}"
        f" WHERE c.collection_id = {int(cid)}{where} ORDER BY {order} LIMIT %(depth)s)"
        ' SELECT id FROM hits ORDER BY distance, id COLLATE "C"'
    )


#: the hits' rows, as the library fetches them (agentrag.retrieval.search)
FETCH_SQL = (
    "SELECT c.id, c.document_id, c.text, c.start_char, c.end_char, c.chunk_index, c.page, c.section,"
    " c.locator, c.sha256, d.source, d.original_filename, d.sha256, d.classification, d.metadata, d.grants,"
    " (SELECT r.revision FROM agentrag.document_revisions r"
    " WHERE r.document_id = d.id AND r.valid_to IS NULL),"
    " k.name, k.embed_model, k.embed_version FROM agentrag.chunks c"
    " JOIN agentrag.documents d ON d.id = c.document_id JOIN agentrag.collections k ON k.id = c.collection_id"
    " WHERE c.id = ANY(%(ids)s::text[])"
)


def run_floor(
    conn: Any,
    cid: int,
    vector: np.ndarray,
    tokens: list[str] | None,
    ef: int,
    plan: tuple[str, int | None],
    vector_type: str = "vector",
    centroids: np.ndarray | None = None,
) -> list[str]:
    """The library's plan for this principal (``(vector plan, max_scan_tuples or probes)``), by hand:
    the depth candidates, then the top_k hits' rows."""
    restricted = tokens is not None
    kind, max_scan = plan
    params = {"q": vector, "tokens": tokens, "depth": DEPTH}
    with conn.transaction():
        if kind == "clusters" and centroids is not None and max_scan is not None and restricted:
            # as the library: the scope's document ids, then its rows in the probed clusters
            from agentrag.retrieval.clusters import nearest_clusters

            docs = conn.execute(
                "SELECT coalesce(string_agg(id, ','), '') FROM agentrag.documents"
                f" WHERE collection_id = {int(cid)} AND grants && %(tokens)s::text[]",
                params,
            ).fetchone()[0]
            probes = nearest_clusters(centroids, vector, int(max_scan))
            bound = {"q": vector, "depth": DEPTH, "docs": docs, "probes": probes}
            rows = conn.execute(cluster_floor_sql(vector_type), bound).fetchall()
            if len(rows) < DEPTH:
                rows = conn.execute(floor_sql(cid, restricted, True, vector_type), params).fetchall()
        elif kind in ("exact", "clusters"):
            rows = conn.execute(floor_sql(cid, restricted, True, vector_type), params).fetchall()
        else:
            conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', %s, true)",
                (str(ef), "relaxed_order" if restricted else "off"),
            )
            if max_scan is not None:  # as the library sets it (scoped.set_max_scan_tuples)
                conn.execute(
                    "SELECT set_config('hnsw.max_scan_tuples', %s, true),"
                    " set_config('enable_sort', 'off', true)",
                    (str(max_scan),),
                )
            rows = conn.execute(floor_sql(cid, restricted, False, vector_type), params).fetchall()
            if max_scan is not None:
                conn.execute("SELECT set_config('enable_sort', 'on', true)")
            if restricted and len(rows) < min(TOP_K, DEPTH):  # what the library does too: re-run exactly
                rows = conn.execute(floor_sql(cid, restricted, True, vector_type), params).fetchall()
        ids = [r[0] for r in rows[:TOP_K]]
        fetched = {r[0] for r in conn.execute(FETCH_SQL, {"ids": ids})}
    return [i for i in ids if i in fetched]


def _centroids(store: Any, collection_id: int) -> np.ndarray | None:
    """The collection's centroids (Store.optimize), for the floor of the clusters plan."""
    from sqlalchemy import text

    with store.engine.connect() as conn:
        row = conn.execute(
            text("SELECT k, dimensions, centroids FROM agentrag.vector_clusters WHERE collection_id = :c"),
            {"c": int(collection_id)},
        ).first()
    if row is None:
        return None
    return np.frombuffer(bytes(row.centroids), dtype="<f4").reshape(int(row.k), int(row.dimensions))


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.acl", description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=50, help="SciFact test queries per principal")
    parser.add_argument("--data", default=str(scale.DEFAULT_DATA))
    parser.add_argument("--cache", help="where the passage / query vectors are cached")
    parser.add_argument(
        "--passages",
        type=int,
        default=None,
        help="recombine only the first N SciFact passages (default: all)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the collection for the next run")
    parser.add_argument(
        "--vector-types",
        default="vector",
        help="comma-separated storage types, one collection each, measured in the same run (vector,halfvec)",
    )
    args = parser.parse_args(argv)

    import agentrag as ar
    from agentrag.retrieval import clusters, scope_cache, scoped
    from benchmarks._db import bench_store

    print(f"benchmarks.acl: load average {os.getloadavg()[0]:.1f} at the start (shared machine)", flush=True)
    cache = scale.cache_dir(args.cache)
    passages, queries = scale.scifact(Path(args.data))
    passages = passages[: args.passages] if args.passages else passages
    label = Path(args.data).name
    base = scale.real_vectors(passages, cache, f"{label}-passages")
    qvecs = scale.real_vectors(queries, cache, f"{label}-queries")
    queries, qvecs = queries[: args.queries], qvecs[: args.queries]
    embedder = scale.PrecomputedVectors(dict(zip(queries, qvecs, strict=True)))
    store = bench_store(embedder)
    types = [t.strip() for t in args.vector_types.split(",") if t.strip()]
    names = {vt: collection_name(args.chunks, args.groups, vt) for vt in types}
    existing = {c.name for c in store.collections()}
    for vt, name in names.items():
        if name not in existing:
            load(store, embedder, args, passages, base, vt)
    colls = {vt: store.collection(name) for vt, name in names.items()}
    coll = colls[types[0]]
    total_chunks = int(coll.chunk_count or 0)
    n_docs = int(coll.document_count or 0)
    ef = max(100, DEPTH)

    principals: list[tuple[str, ar.Principal, list[str] | None, int]] = [
        ("unfiltered (admin)", ar.Principal(user="root", admin=True), None, total_chunks)
    ]
    for label_, share in VISIBILITY:
        groups = [f"g{g:04d}" for g in range(round(share * args.groups))]
        visible_docs = sum(1 for d in range(n_docs) if d % args.groups < len(groups))
        principal = ar.Principal(user="u", groups=groups)
        principals.append((f"sees {label_}", principal, principal.tokens(), visible_docs * CHUNKS_PER_DOC))

    floor_plans: dict[tuple[str, str], tuple[str, int | None]] = {}  # the library's vector plan
    for vt, name in names.items():
        for mode in ("vector", "hybrid"):  # warm: the BM25 index is built by the first lexical search
            store.search(queries[0], collections=name, mode=mode, scope=ar.Scope(principal=principals[0][1]))
        for who, principal, _tokens, _visible in principals:
            explained = store.search(
                queries[0], collections=name, mode="vector", scope=ar.Scope(principal=principal), explain=True
            ).explain
            leg = (explained or ({},))[0]
            kind = str(leg.get("vector", "hnsw"))
            extra = leg.get("probes") if kind == "clusters" else leg.get("max_scan_tuples")
            floor_plans[(who, vt)] = (kind, extra)
            _log(f"  {who} ({vt}): the floor runs the library's vector plan {floor_plans[(who, vt)]}")
    centroids = {vt: _centroids(store, colls[vt].id) for vt in types}
    conn = _raw(store)
    times: dict[tuple[str, str, str], list[float]] = {}
    recall: dict[tuple[str, str], list[float]] = {}
    systems = [(kind, vt) for vt in types for kind in ("vector", "hybrid", "floor")]
    systems += [("vector off", types[0]), ("hybrid off", types[0])]
    # the plain exact scan where the library reads clusters (clusters.ENABLED off): main's plan
    systems += [(kind, vt) for vt in types for kind in ("vector exact", "hybrid exact")]
    # every search counting its scope (scope_cache.ENABLED off): the plan before migration 0057
    systems += [(kind, vt) for vt in types for kind in ("vector nocache", "hybrid nocache")]
    plans: dict[str, set[str]] = {}
    legs: dict[tuple[str, str, str], list[dict[str, float]]] = {}  # the library's own timings, per system
    for qi, (query, vec) in enumerate(zip(queries, qvecs, strict=True)):
        for pi, (who, principal, tokens, visible) in enumerate(principals):
            # a seeded shuffle, not a rotation: a rotated cycle always runs "hybrid" right after "vector"
            # (the same plan's rows in the CPU caches: the 10 % exact scan 12 ms there, 20 ms after the
            # other systems), so every system must follow every other as often
            order = random.Random(qi * 1009 + pi).sample(systems, len(systems))
            for system, vt in order:
                if tokens is None and system.endswith(" off"):
                    continue  # no predicate: nothing to plan
                if system.endswith(" exact") and floor_plans[(who, vt)][0] != "clusters":
                    continue  # the same plan as "vector" / "hybrid"
                if system.endswith(" nocache") and tokens is None:
                    continue  # nothing counted
                t = time.perf_counter()
                if system == "floor":
                    plan = floor_plans[(who, vt)]
                    ids = run_floor(conn, colls[vt].id, vec, tokens, ef, plan, vt, centroids[vt])
                else:
                    scoped.ENABLED = not system.endswith(" off")
                    clusters.ENABLED = not system.endswith(" exact")
                    scope_cache.ENABLED = not system.endswith(" nocache")
                    try:
                        result = store.search(
                            query,
                            collections=names[vt],
                            mode=system.split()[0],
                            top_k=TOP_K,
                            scope=ar.Scope(principal=principal),
                        )
                    finally:
                        scoped.ENABLED = clusters.ENABLED = scope_cache.ENABLED = True
                    ids = [h.chunk_id for h in result.hits]
                    legs.setdefault((who, system, vt), []).append(result.timings_ms)
                    if system == "hybrid":
                        plans.setdefault(f"{who} ({vt})", set()).add(result.plan[0].split(": ", 1)[1])
                    if tokens is not None and any(h.grant is None or h.grant == "admin" for h in result.hits):
                        raise SystemExit(f"a hit without its grant for {who}")
                times.setdefault((who, system, vt), []).append((time.perf_counter() - t) * 1000)
                if len(ids) != min(TOP_K, visible):
                    raise SystemExit(f"{who} {system}: {len(ids)} hits, expected {min(TOP_K, visible)}")
                if system == "vector":
                    with conn.transaction():
                        params = {"q": vec, "tokens": tokens, "depth": TOP_K}
                        sql = floor_sql(colls[vt].id, tokens is not None, True, vt)
                        exact = [r[0] for r in conn.execute(sql, params)]
                    recall.setdefault((who, vt), []).append(len(set(ids) & set(exact)) / max(1, len(exact)))
        if qi % 10 == 9:
            _log(f"  {qi + 1}/{len(queries)} queries")
    conn.close()
    _report(
        args, types, principals, times, recall, floor_plans, legs, plans, total_chunks, n_docs, len(queries)
    )
    print(f"Load average {os.getloadavg()[0]:.1f} at the end.")
    if not args.keep:
        for name in names.values():
            store.delete_collection(name)
    return 0


def _report(
    args: argparse.Namespace,
    types: list[str],
    principals: list[tuple[str, Any, list[str] | None, int]],
    times: dict[tuple[str, str, str], list[float]],
    recall: dict[tuple[str, str], list[float]],
    floor_plans: dict[tuple[str, str], tuple[str, int | None]],
    legs: dict[tuple[str, str, str], list[dict[str, float]]],
    plans: dict[str, set[str]],
    total_chunks: int,
    n_docs: int,
    n_queries: int,
) -> None:
    print(
        f"\n### Permissions: {total_chunks:,} chunks in {n_docs:,} documents, {args.groups:,} groups, "
        f"top_k={TOP_K} ({n_queries} SciFact test queries, interleaved; storage {', '.join(types)})\n"
    )
    print(
        "| principal | visible chunks | storage | mode | plan | p50 ms | p95 ms | p50 / unfiltered"
        " | floor p50 ms | p50 / floor | planner off p50 ms | planner off / unfiltered"
        " | whole exact scan (clusters off) p50 ms | / unfiltered | count cache off p50 ms | / unfiltered"
        " | recall@10 |"
    )
    print("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for vt in types:
        base_p50 = {s: statistics.median(times[(principals[0][0], s, vt)]) for s in ("vector", "hybrid")}
        for who, _p, _tokens, visible in principals:
            floor = statistics.median(times[(who, "floor", vt)])
            for system in ("vector", "hybrid"):
                values = times[(who, system, vt)]
                p50 = statistics.median(values)
                rec = f"{statistics.mean(recall[(who, vt)]):.3f}" if system == "vector" else "-"
                off = times.get((who, f"{system} off", vt))
                off_cols = "- | -"
                if off:
                    off50 = statistics.median(off)
                    off_cols = f"{off50:.2f} | {off50 / base_p50[system]:.2f}x"
                whole = times.get((who, f"{system} exact", vt))
                whole_cols = "- | -"
                if whole:
                    w50 = statistics.median(whole)
                    whole_cols = f"{w50:.2f} | {w50 / base_p50[system]:.2f}x"
                uncached = times.get((who, f"{system} nocache", vt))
                if uncached:
                    n50 = statistics.median(uncached)
                    whole_cols += f" | {n50:.2f} | {n50 / base_p50[system]:.2f}x"
                else:
                    whole_cols += " | - | -"
                print(
                    f"| {who} | {visible:,} | {vt} | {system} | {floor_plans[(who, vt)][0]} | {p50:.2f} | "
                    f"{_pct(values, 95):.2f} | "
                    f"{p50 / base_p50[system]:.2f}x | {floor:.2f} | {p50 / floor:.2f}x | {off_cols}"
                    f" | {whole_cols} | {rec} |"
                )
    print("\nWhere the time goes (SearchResult.timings_ms, p50 ms; other: total less legs and fetch)\n")
    print(
        "| principal | system | storage | total | vector leg | lexical leg | fetch"
        " | other (plan, transaction) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for (who, system, vt), rows in legs.items():
        parts = ("embed", "vector", "lexical", "fuse", "fetch")
        med = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in ("total", *parts)}
        other = statistics.median(r["total"] - sum(r.get(k, 0.0) for k in parts) for r in rows)
        print(
            f"| {who} | {system} | {vt} | {med['total']:.2f} | {med['vector']:.2f} | {med['lexical']:.2f} | "
            f"{med['fetch']:.2f} | {other:.2f} |"
        )
    print("\nPlans (hybrid): " + "; ".join(f"{who}: {', '.join(sorted(p))}" for who, p in plans.items()))
    print(
        "\nEvery query returned exactly min(top_k, visible chunks) hits, each named by its grant. "
        "Floor: the library's vector plan for the principal by hand (psycopg): the same predicate in the"
        " same statement, all depth candidates, then the top_k hits' rows."
    )


if __name__ == "__main__":
    raise SystemExit(main())
