"""The serving API under load, beside the in-process floor measured in the same run.

    .venv/bin/python -m benchmarks.serve [--docs 2000] [--workers 1] [--levels 1,16,64,200]

Indexes ``--docs`` SciFact abstracts for one tenant (FakeEmbedder, 384 dimensions: hashing, so
neither side waits on a model), starts ``agentrag serve`` on 127.0.0.1 (database pool of 10)
and sends ``POST /api/v1/query/{tenant}/search`` (hybrid, top_k 10) from ``c`` concurrent
clients (httpx.AsyncClient in this process), for each concurrency level. The floor is the same
search, ``Store.search(query, scope=Scope(tenant=...))``, called in-process from ``c`` threads
over a pool of 10. Query vectors are cached on both sides after the first pass (the queries
cycle), so both sides time retrieval, not embedding.

Per request the server does more than the floor: JWT check, the tenant + rate-limit statement,
the pipeline's search step, the proof (a filename lookup) and the audit insert. Client and
server share the machine's cores, so at high concurrency the load generator competes with the
server it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import agentrag as ar
from agentrag.server.tenants import create_tenant
from agentrag.testing import FakeEmbedder
from benchmarks._db import bench_url

SCIFACT = Path("/work/shared/data/beir/scifact")
TENANT = "bench_serve"
COLLECTION = "bench_serve"
SECRET = "bench-secret-" + "b" * 40
DIMS = 384


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _row(kind: str, c: int, latencies: list[float], elapsed: float, errors: int) -> dict[str, Any]:
    return {
        "side": kind,
        "concurrency": c,
        "requests": len(latencies) + errors,
        "errors": errors,
        "rps": round((len(latencies) + errors) / elapsed, 1),
        "p50_ms": round(_percentile(latencies, 0.50), 2) if latencies else None,
        "p99_ms": round(_percentile(latencies, 0.99), 2) if latencies else None,
    }


def prepare(store: ar.Store, docs: int) -> list[str]:
    store.create_collection(COLLECTION, exist_ok=True)
    have = len(store.documents(COLLECTION, tenant=TENANT, limit=docs + 1))
    if have < docs:
        with open(SCIFACT / "corpus.jsonl") as f:
            rows = [json.loads(line) for _, line in zip(range(docs), f, strict=False)]
        for row in rows:
            store.ingest_text(
                f"{row.get('title', '')}\n\n{row['text']}",
                collection=COLLECTION,
                source=row["_id"],
                tenant=TENANT,
            )
    create_tenant(store.engine, TENANT, rate_limit=10_000_000, exist_ok=True)
    with open(SCIFACT / "queries.jsonl") as f:
        return [json.loads(line)["text"] for line in f][:300]


def floor(store: ar.Store, queries: list[str], c: int, n: int) -> dict[str, Any]:
    scope = ar.Scope(tenant=TENANT)

    def one(i: int) -> float:
        t = time.perf_counter()
        store.search(queries[i % len(queries)], collections=COLLECTION, top_k=10, scope=scope)
        return (time.perf_counter() - t) * 1000

    with ThreadPoolExecutor(c) as pool:
        list(pool.map(one, range(min(n, 2 * c))))  # warm-up
        t = time.perf_counter()
        latencies = list(pool.map(one, range(n)))
        elapsed = time.perf_counter() - t
    return _row("in-process Store.search (floor)", c, latencies, elapsed, 0)


async def http(url: str, token: str, queries: list[str], c: int, n: int) -> dict[str, Any]:
    import httpx

    # A client must not reuse a connection the server may be closing: uvicorn closes idle keep-alive
    # connections after 5 s (at c=200 a warm-up task can idle that long), so expire them client-side first.
    limits = httpx.Limits(max_connections=c, max_keepalive_connections=c, keepalive_expiry=2.0)
    headers = {"Authorization": f"Bearer {token}"}
    latencies: list[float] = []
    errors = 0
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits, headers=headers) as client:

        async def one(i: int) -> None:
            nonlocal errors
            body = {"query_text": queries[i % len(queries)], "top_k": 10, "collections": [COLLECTION]}
            t = time.perf_counter()
            try:
                r = await client.post(f"/api/v1/query/{TENANT}/search", json=body)
                ok = r.status_code == 200
                if not ok and errors == 0:
                    print("first error:", r.status_code, r.text[:300], file=sys.stderr)
            except httpx.HTTPError as exc:
                ok = False
                if errors == 0:
                    print("first error:", type(exc).__name__, str(exc)[:300], file=sys.stderr)
            if ok:
                latencies.append((time.perf_counter() - t) * 1000)
            else:
                errors += 1

        async def worker(ids: range) -> None:
            for i in ids:
                await one(i)

        await asyncio.gather(*(worker(range(w, min(n, 2 * c), c)) for w in range(c)))  # warm-up
        latencies.clear()
        errors = 0
        t = time.perf_counter()
        await asyncio.gather(*(worker(range(w, n, c)) for w in range(c)))
        elapsed = time.perf_counter() - t
    return _row("HTTP /search", c, latencies, elapsed, errors)


def start_server(url: str, workers: int, log: Path) -> tuple[Any, str]:
    import subprocess

    import httpx

    from tests.server_support import free_port

    port = free_port()
    env = {**os.environ, "AGENTRAG_DATABASE_URL": url, "AGENTRAG_JWT_SECRET": SECRET}
    cmd = [sys.executable, "-m", "agentrag", "serve", "--port", str(port), "--embedder", f"fake:{DIMS}"]
    cmd += ["--workers", str(workers), "--pool-size", "10", "--log-level", "warning"]
    process = subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(base + "/readyz", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"the server did not start:\n{log.read_text()}")


def main() -> int:
    import jwt

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--levels", default="1,16,64,200")
    parser.add_argument("--requests", type=int, default=400, help="requests per level (at least 3 x c)")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    url = bench_url()
    store = ar.Store(url, embedder=FakeEmbedder(DIMS), pool_size=10, max_overflow=0)
    queries = prepare(store, args.docs)
    token = jwt.encode(
        {"tenant_id": TENANT, "scope": "query", "exp": int(time.time()) + 7200}, SECRET, algorithm="HS256"
    )
    log = Path(tempfile.mkdtemp()) / "server.log"
    process, base = start_server(url, args.workers, log)
    rows = []
    try:
        for c in levels:
            n = max(args.requests, 3 * c)
            rows.append(floor(store, queries, c, n))
            rows.append(asyncio.run(http(base, token, queries, c, n)))
            for row in rows[-2:]:
                print(json.dumps(row), flush=True)
    finally:
        process.terminate()
        process.wait(timeout=30)
        store.close()
    print(f"\n{args.docs} SciFact docs, 1 tenant, hybrid top_k 10, pool 10, {args.workers} server worker(s)")
    print(f"{'concurrency':>11}  {'side':<34} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}")
    for row in rows:
        print(
            f"{row['concurrency']:>11}  {row['side']:<34} {row['rps']:>8} {row['p50_ms']!s:>8}"
            f" {row['p99_ms']!s:>8} {row['errors']:>6}"
        )
    by = {(r["side"].startswith("HTTP"), r["concurrency"]): r for r in rows}
    for c in levels:
        h, f = by[(True, c)], by[(False, c)]
        if h["p50_ms"] is not None and f["p50_ms"] is not None:
            print(
                f"c={c}: HTTP overhead p50 {h['p50_ms'] - f['p50_ms']:+.2f} ms;"
                f" throughput {100 * h['rps'] / f['rps']:.0f}% of the floor's"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
