"""A coarse cluster per chunk for a 10 % principal's vector search (issue #39): measured, not built.

    .venv/bin/python -m benchmarks.vector_ivf [--clusters 128,256,512] [--queries 50] [--cache DIR]
        [--keep-columns] [--generic-count] [--ivfflat 316:10,316:20]

Needs the collection ``benchmarks.acl --keep`` leaves (100,000 chunks, 1,000 groups, the same
``--passages`` / ``--cache``). A principal in 100 of the 1,000 groups sees 10 % of it (1,000 documents,
10,000 chunks), which the scope planner scans exactly. The candidate (IVF-style, as pgvector's ivfflat
but under the scope instead of after it): every chunk carries the id of its nearest of ``K`` centroids
(spherical k-means in numpy over the collection's vectors); a search reads only the scope's rows in the
``P`` clusters nearest the query, through an index on ``(cluster, document_id)``, and ranks them
exactly. ``P`` per ``K`` is the least reaching recall@10 >= 0.96 in numpy over *other* SciFact test
queries (``--fit-queries``, from query 100 on) within *another* 10 % principal's rows (groups 500-599),
never the queries or the scope reported.

Measured, in the same run, each query's systems in a seeded shuffled order:

* **whole searches** (``Store.search``, vector mode, top_k 10, depth 100): the admin's unfiltered HNSW
  walk; the 10 % principal with the library's exact scan; the 10 % principal with the cluster scan in
  its place (``legs.exact_vector_leg`` patched for the run; a result short of ``depth`` rows is re-run
  exactly, as a short walk is). Recall@10 against the exact scan of the same scope.
* **the statements alone**: the library's exact statement and each cluster statement.

The cluster columns (``bench_c<K>`` on this benchmark database's ``agentrag.chunks``, filled by one
UPDATE with the HNSW graph dropped and built again around it) and their indexes are dropped at the end.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import acl, scale

GROUPS_SEEN = 100  # of 1,000: the 10 % principal
DEPTH = acl.DEPTH
TOP_K = acl.TOP_K
RECALL_FIT = 0.96


def kmeans(unit: np.ndarray, k: int, seed: int = 39, rounds: int = 12) -> np.ndarray:
    """Spherical k-means: ``k`` unit centroids of the unit rows (a 30,000-row sample)."""
    rng = np.random.default_rng(seed)
    sample = unit[rng.choice(len(unit), size=min(len(unit), 30_000), replace=False)]
    centroids = sample[rng.choice(len(sample), size=k, replace=False)].copy()
    for _ in range(rounds):
        nearest = np.argmax(sample @ centroids.T, axis=1)
        for j in range(k):
            members = sample[nearest == j]
            if len(members):
                c = members.sum(0)
                centroids[j] = c / np.linalg.norm(c)
    return centroids


def probes_for(qvec: np.ndarray, centroids: np.ndarray, p: int) -> list[int]:
    return [int(j) for j in np.argsort(-(centroids @ qvec))[:p]]


def fit_probes(unit: np.ndarray, assign: np.ndarray, centroids: np.ndarray, fit: np.ndarray) -> int:
    """The least ``P`` whose recall@10 over the fit queries, within the fit scope's rows (``unit`` and
    ``assign``: another 10 % principal's, groups 500-599), is >= RECALL_FIT. Within a scope the ten
    nearest are farther and spread over more clusters than the collection's own ten: fitted on the
    whole collection, P would be about half."""
    truth = np.argsort(-(fit @ unit.T), axis=1)[:, :TOP_K]
    order = np.argsort(-(fit @ centroids.T), axis=1)
    for p in range(1, len(centroids) + 1):
        hit = [np.isin(assign[truth[i]], order[i, :p]).mean() for i in range(len(fit))]
        if np.mean(hit) >= RECALL_FIT:
            return p
    return len(centroids)


def cluster_sql(k: int) -> str:
    """The exact statement's shape (vector.vector_sql, exact, by documents) over the probed clusters."""
    return (
        "WITH hits AS MATERIALIZED (SELECT id, distance FROM (SELECT c.id,"
        " c.embedding::vector(384) <=> CAST(:qvec AS vector(384)) AS distance FROM agentrag.chunks c"
        f" WHERE c.bench_c{int(k)} = ANY(CAST(:probes AS smallint[]))"
        " AND c.document_id COLLATE \"C\" = ANY(string_to_array(:v_docs, ',')) OFFSET 0) s"
        " ORDER BY distance + 0 LIMIT :depth)"
        ' SELECT id, distance, 1 - (distance) AS score FROM hits ORDER BY distance, id COLLATE "C"'
    )


def ivfflat_sql(cid: int) -> str:
    """pgvector's own IVF (an ivfflat index with its iterative scan) under the scope's document ids,
    tested per candidate after the distance. The index is on the unit vectors by inner product (the
    cosine order) so that the planner cannot take the collection's HNSW index instead."""
    expr = "l2_normalize(c.embedding::vector(384))::vector(384) <#> l2_normalize(CAST(:qvec AS vector(384)))"
    return (
        f"WITH hits AS MATERIALIZED (SELECT c.id, {expr} AS distance FROM agentrag.chunks c"
        f" WHERE c.collection_id = {int(cid)} AND c.document_id = ANY(CAST(:v_list AS text[]))"
        f" ORDER BY {expr} LIMIT :depth)"
        ' SELECT id, distance FROM hits ORDER BY distance, id COLLATE "C"'
    )


def add_ivfflat(engine: Any, cid: int, lists: Sequence[int]) -> float:
    from sqlalchemy import text

    started = time.perf_counter()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("SET maintenance_work_mem = '1GB'"))
        for n in lists:
            conn.execute(
                text(
                    f"CREATE INDEX IF NOT EXISTS bench_ivfflat_{int(n)} ON agentrag.chunks USING ivfflat"
                    " ((l2_normalize(embedding::vector(384))::vector(384)) vector_ip_ops)"
                    f" WITH (lists = {int(n)}) WHERE collection_id = {int(cid)}"
                )
            )
        conn.execute(text("ANALYZE agentrag.chunks"))
    return time.perf_counter() - started


def add_clusters(engine: Any, cid: int, ids: list[str], assigns: dict[int, np.ndarray]) -> float:
    from sqlalchemy import text

    started = time.perf_counter()
    with engine.connect() as conn:  # a --keep-columns run's columns (k-means is seeded: the same ids)
        there = conn.execute(
            text(
                "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'agentrag'"
                " AND table_name = 'chunks' AND column_name = ANY(:names)"
            ),
            {"names": [f"bench_c{k}" for k in assigns]},
        ).scalar()
    if there == len(assigns):
        return 0.0
    with engine.begin() as conn:  # one transaction: an interrupted run leaves the table as it was
        # the HNSW graph is dropped for the UPDATE and built again after it: 100,000 graph inserts of
        # the rows' new versions took over 4 minutes at load 7 and were cancelled
        hnsw = conn.execute(
            text(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'agentrag'"
                " AND tablename = 'chunks' AND indexdef LIKE '%USING hnsw%'"
            )
        ).all()
        for index in hnsw:
            conn.execute(text(f'DROP INDEX agentrag."{index[0]}"'))
        for k in assigns:
            conn.execute(text(f"ALTER TABLE agentrag.chunks ADD COLUMN IF NOT EXISTS bench_c{k} smallint"))
        cols = ", ".join(f"c{k} smallint" for k in assigns)
        conn.execute(text(f"CREATE TEMP TABLE bench_assign (id text PRIMARY KEY, {cols}) ON COMMIT DROP"))
        raw = conn.connection.driver_connection
        with raw.cursor().copy(
            f"COPY bench_assign (id, {', '.join(f'c{k}' for k in assigns)}) FROM STDIN"
        ) as cp:
            for i, chunk_id in enumerate(ids):
                cp.write_row([chunk_id, *(int(a[i]) for a in assigns.values())])
        sets = ", ".join(f"bench_c{k} = a.c{k}" for k in assigns)
        conn.execute(
            text(
                f"UPDATE agentrag.chunks c SET {sets} FROM bench_assign a"
                " WHERE a.id = c.id AND c.collection_id = :c"
            ),
            {"c": cid},
        )
        conn.execute(text("SET LOCAL maintenance_work_mem = '1GB'"))
        for index in hnsw:
            conn.execute(text(index[1]))
        for k in assigns:
            conn.execute(
                text(
                    f"CREATE INDEX IF NOT EXISTS bench_chunks_c{k} ON agentrag.chunks"
                    f' (bench_c{k}, document_id COLLATE "C")'
                )
            )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE agentrag.chunks"))
    return time.perf_counter() - started


def drop_clusters(engine: Any, ks: Sequence[int]) -> None:
    from sqlalchemy import text

    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for k in ks:
            conn.execute(text(f"DROP INDEX IF EXISTS agentrag.bench_chunks_c{k}"))
            conn.execute(text(f"ALTER TABLE agentrag.chunks DROP COLUMN IF EXISTS bench_c{k}"))
        for name in conn.execute(
            text("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'bench_ivfflat_%'")
        ).scalars():
            conn.execute(text(f'DROP INDEX IF EXISTS agentrag."{name}"'))


def _generic_count() -> None:
    """The count statement planned once for any tokens (a generic plan) instead of for this principal's:
    on this collection, 102 tokens, the same connection at load 6: custom plans 23-170 ms a call,
    the generic plan 1.2-8.6 ms."""
    from sqlalchemy import text

    from agentrag.retrieval import legs, scoped

    original = scoped.count_scope

    def count_scope(conn: Any, collection_id: int, where: str, params: dict[str, Any]) -> Any:
        conn.execute(text("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"))
        try:
            return original(conn, collection_id, where, params)
        finally:
            conn.execute(text("SELECT set_config('plan_cache_mode', 'auto', true)"))

    scoped.count_scope = count_scope
    if hasattr(legs, "count_scope"):
        legs.count_scope = count_scope


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.vector_ivf", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--fit-queries", type=int, default=100, help="queries 100.. to fit P per K")
    parser.add_argument("--clusters", default="128,256,512")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data", default=str(scale.DEFAULT_DATA))
    parser.add_argument("--cache", help="where benchmarks.acl cached the query vectors")
    parser.add_argument("--keep-columns", action="store_true")
    parser.add_argument(
        "--ivfflat",
        default="316:10,316:20",
        help="pgvector ivfflat LISTS:PROBES pairs, statements only ('' for none)",
    )
    parser.add_argument(
        "--generic-count",
        action="store_true",
        help="the scope planner's count statement under plan_cache_mode = force_generic_plan (patched)",
    )
    args = parser.parse_args(argv)
    ks = [int(x) for x in args.clusters.split(",")]
    if args.generic_count:
        _generic_count()

    import agentrag as ar
    from agentrag.retrieval import legs
    from agentrag.retrieval.vector import joined_ids, vector_sql
    from benchmarks._db import bench_store

    _, queries = scale.scifact(Path(args.data))
    qvecs = np.asarray(
        scale.real_vectors(queries, scale.cache_dir(args.cache), f"{Path(args.data).name}-queries"),
        np.float32,
    )
    unitq = qvecs / np.linalg.norm(qvecs, axis=1, keepdims=True)
    report_q, fit_q = list(range(args.queries)), list(range(100, 100 + args.fit_queries))
    store = bench_store(scale.PrecomputedVectors(dict(zip(queries, qvecs, strict=True))))
    name = acl.collection_name(args.chunks, args.groups)
    if name not in {c.name for c in store.collections()}:
        raise SystemExit(f"no collection {name}: run benchmarks.acl --keep first")
    coll = store.collection(name)
    cid, engine = int(coll.id), store.engine
    print(f"benchmarks.vector_ivf: load average {os.getloadavg()[0]:.1f} at the start", flush=True)

    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT c.id, c.embedding, d.grants[1] FROM agentrag.chunks c"
                " JOIN agentrag.documents d ON d.id = c.document_id WHERE c.collection_id = :c ORDER BY c.id"
            ),
            {"c": cid},
        ).all()
    ids = [r[0] for r in rows]
    vectors = np.array([np.asarray(r[1].to_numpy(), np.float32) for r in rows])
    group = np.array([int(r[2].rsplit("g", 1)[1]) for r in rows])
    fit_rows = (group >= 500) & (group < 500 + GROUPS_SEEN)  # another 10 % principal's rows
    del rows
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cents, assigns, probes = {}, {}, {}
    for k in ks:
        t = time.perf_counter()
        cents[k] = kmeans(unit, k)
        assigns[k] = np.concatenate(
            [np.argmax(unit[s : s + 20_000] @ cents[k].T, axis=1) for s in range(0, len(unit), 20_000)]
        )
        probes[k] = fit_probes(unit[fit_rows], assigns[k][fit_rows], cents[k], unitq[fit_q])
        sizes = np.bincount(assigns[k], minlength=k)
        print(
            f"K={k}: k-means {time.perf_counter() - t:.1f} s; cluster sizes {sizes.min()}-{sizes.max()}"
            f" (median {int(np.median(sizes))}); P={probes[k]} fitted on queries 100-{99 + len(fit_q)}"
            " within groups 500-599's rows"
        )
    seconds = add_clusters(engine, cid, ids, assigns)
    print(f"cluster columns written and indexed in {seconds:.0f} s", flush=True)
    ivf = [tuple(int(x) for x in pair.split(":")) for pair in args.ivfflat.split(",") if pair]
    if ivf:
        seconds = add_ivfflat(engine, cid, sorted({n for n, _ in ivf}))
        print(f"ivfflat indexes built in {seconds:.0f} s", flush=True)
    args.ivf_pairs = ivf
    engine.dispose()  # the searches on connections of their own
    try:
        _measure(
            args,
            store,
            name,
            cid,
            queries,
            qvecs,
            unitq,
            report_q,
            ks,
            cents,
            probes,
            joined_ids,
            vector_sql,
            legs,
            ar,
        )
    finally:
        if not args.keep_columns:
            drop_clusters(engine, ks)
    print(f"Load average {os.getloadavg()[0]:.1f} at the end.")
    return 0


def _measure(
    args,
    store,
    name,
    cid,
    queries,
    qvecs,
    unitq,
    report_q,
    ks,
    cents,
    probes,
    joined_ids,
    vector_sql,
    legs,
    ar,
) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    groups = [f"g{g:04d}" for g in range(GROUPS_SEEN)]
    principal = ar.Principal(user="u", groups=groups)
    admin = ar.Principal(user="root", admin=True)
    tokens = "{" + ",".join(principal.tokens()) + "}"
    with store.engine.connect() as conn:
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
    v_docs = joined_ids(tuple(docs))
    exact_sql = vector_sql(cid, 384, "cosine", exact=True, by_documents=True)
    original = legs.exact_vector_leg
    current: dict[str, Any] = {"k": None}

    def cluster_leg(conn: Any, **kw: Any) -> list[tuple[str, float]]:
        k = current["k"]
        if k is None or kw.get("documents") is None:
            return original(conn, **kw)
        qv = np.asarray(kw["query_vector"], np.float32)
        p = probes_for(qv / np.linalg.norm(qv), cents[k], probes[k])
        bound = {"qvec": kw["query_vector"], "depth": int(kw["depth"]), "v_docs": joined_ids(kw["documents"])}
        rows = conn.execute(text(cluster_sql(k)), {**bound, "probes": p}).all()
        if len(rows) < int(kw["depth"]):
            return original(conn, **kw)
        return [(r.id, float(r.score)) for r in rows]

    legs.exact_vector_leg = cluster_leg
    systems = ["unfiltered", "exact", *[f"K={k} P={probes[k]}" for k in ks]]
    ivf_systems = {f"ivfflat lists={n} probes={p} (statement only)": (n, p) for n, p in args.ivf_pairs}
    statements = [*systems[1:], *ivf_systems]
    lat: dict[str, list[float]] = {s: [] for s in systems}
    parts: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
    rec: dict[str, list[float]] = {s: [] for s in systems}
    stmt: dict[str, list[float]] = {s: [] for s in statements}
    srec: dict[str, list[float]] = {s: [] for s in statements}
    v_list = "{" + ",".join(docs) + "}"
    rng = random.Random(39)
    gc.collect()
    gc.freeze()  # the collection's vectors and ids read above are not scanned by each collection
    try:
        for _round in range(args.rounds):
            for qi in report_q:
                query, vec = queries[qi], qvecs[qi]
                with store.engine.connect() as conn:
                    truth = [
                        r.id
                        for r in conn.execute(
                            text(exact_sql), {"qvec": vec, "depth": TOP_K, "v_docs": v_docs}
                        )
                    ]
                got: dict[str, list[str]] = {}
                for system in rng.sample(systems, len(systems)):
                    current["k"] = int(system.split()[0][2:]) if system.startswith("K=") else None
                    who = admin if system == "unfiltered" else principal
                    t = time.perf_counter()
                    result = store.search(
                        query, collections=name, mode="vector", top_k=TOP_K, scope=ar.Scope(principal=who)
                    )
                    lat[system].append((time.perf_counter() - t) * 1000)
                    got[system] = [h.chunk_id for h in result.hits]
                    parts[system].append(result.timings_ms)
                for system in systems[1:]:
                    rec[system].append(len(set(got[system]) & set(truth)) / max(1, len(truth)))
        # the statements alone, shuffled, in a phase of their own after every search
        for _round in range(args.rounds):
            for qi in report_q:
                vec = qvecs[qi]
                with store.engine.connect() as conn:
                    truth = [
                        r.id
                        for r in conn.execute(
                            text(exact_sql), {"qvec": vec, "depth": TOP_K, "v_docs": v_docs}
                        )
                    ]
                    for system in rng.sample(statements, len(statements)):
                        if system == "exact":
                            sql, extra = exact_sql, {}
                        elif system in ivf_systems:
                            _lists, p = ivf_systems[system]
                            sql, extra = ivfflat_sql(cid), {"v_list": v_list}
                            conn.execute(
                                text(
                                    "SELECT set_config('ivfflat.probes', :p, true),"
                                    " set_config('ivfflat.iterative_scan', 'relaxed_order', true),"
                                    " set_config('enable_indexscan', 'on', true)"
                                ),
                                {"p": str(p)},
                            )
                        else:
                            k = int(system.split()[0][2:])
                            sql, extra = (
                                cluster_sql(k),
                                {"probes": probes_for(unitq[qi], cents[k], probes[k])},
                            )
                        t = time.perf_counter()
                        out = conn.execute(
                            text(sql), {"qvec": vec, "depth": DEPTH, "v_docs": v_docs, **extra}
                        ).all()
                        stmt[system].append((time.perf_counter() - t) * 1000)
                        if system in ivf_systems and qi == 0 and _round == 0:
                            plan = conn.execute(
                                text("EXPLAIN " + sql),
                                {"qvec": vec, "depth": DEPTH, "v_docs": v_docs, **extra},
                            ).scalars()
                            print(f"{system}: " + " / ".join(line.strip() for line in plan if "Scan" in line))
                        srec[system].append(
                            len({r.id for r in out[:TOP_K]} & set(truth)) / max(1, len(truth))
                        )
    finally:
        legs.exact_vector_leg = original
    base = statistics.median(lat["unfiltered"])
    print(
        f"\n10 % principal: {len(docs):,} documents; {len(report_q)} queries x {args.rounds}, vector mode,"
        f" top_k {TOP_K}, depth {DEPTH}; load average {os.getloadavg()[0]:.1f}\n"
    )
    print(
        "| system | search p50 ms | p95 | **p50 / unfiltered** | recall@10 (lowest)"
        " | statement p50 ms | statement recall@10 |"
    )
    print("|---|---:|---:|---:|---|---:|---:|")
    for s in [*systems, *ivf_systems]:
        r = f"{np.mean(rec[s]):.3f} ({min(rec[s]):.1f})" if rec.get(s) else "-"
        st = f"{statistics.median(stmt[s]):.2f} | {np.mean(srec[s]):.3f}" if s in stmt else "- | -"
        if s in lat:
            p50 = statistics.median(lat[s])
            head = f"{p50:.2f} | {np.percentile(lat[s], 95):.2f} | {p50 / base:.2f}x"
        else:
            head = "- | - | -"
        print(f"| {s} | {head} | {r} | {st} |")
    print("\nWhere the search's time goes (timings_ms, p50 ms; other: total less embed, legs, fetch)\n")
    print("| system | total | vector leg | fetch | other (plan, scope count) |\n|---|---:|---:|---:|---:|")
    for s in systems:
        rows = parts[s]
        med = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in ("total", "vector", "fetch")}
        known = ("embed", "vector", "lexical", "fuse", "fetch")
        other = statistics.median(r["total"] - sum(r.get(k, 0.0) for k in known) for r in rows)
        print(f"| {s} | {med['total']:.2f} | {med['vector']:.2f} | {med['fetch']:.2f} | {other:.2f} |")


if __name__ == "__main__":
    raise SystemExit(main())
