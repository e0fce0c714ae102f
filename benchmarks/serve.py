"""The serving API under load, beside the in-process floor measured in the same run.

    .venv/bin/python -m benchmarks.serve [--docs 2000] [--workers 1] [--levels 1,16,64,200]
        [--client raw|httpx|both] [--no-bare] [--rounds 8] [--c1-run 1] [--against CHECKOUT]
        [--also-workers N]

Indexes ``--docs`` SciFact abstracts for one tenant (FakeEmbedder, 384 dimensions: hashing, so
neither side waits on a model), starts ``agentrag serve`` on 127.0.0.1 (database pool of 10)
and sends ``POST /api/v1/query/{tenant}/search`` (hybrid, top_k 10) from ``c`` concurrent
keep-alive connections, for each concurrency level. Sides, all in the same run:

* the floor: the same search, ``Store.search(query, scope=Scope(tenant=...))``, called
  in-process from ``c`` threads over a pool of 10 (timed inside the thread: no client at all);
* the HTTP floor: a bare Starlette endpoint on the same uvicorn settings answering a canned
  ``/search`` response (benchmarks/_bare_app.py): what HTTP itself costs on this machine;
* ``HTTP /search``: the server, driven by benchmarks/_loadgen.py (pre-encoded requests on asyncio
  streams: a client that spends as little CPU as possible, since on 2 cores every millisecond it
  spends is taken from the server it measures); ``--client httpx`` uses httpx.AsyncClient instead
  (about 1 ms of client CPU per request), ``both`` measures both;
* ``--also-workers N``: the same server with N uvicorn worker processes (the pool of 10 split
  between them, 10 // N each), measured in the same rounds;
* ``--against DIR``: the same server started from another checkout (e.g. a worktree of main),
  for A/B comparisons in the same run.

The sides take turns: each level runs ``--rounds`` rounds in which every side sends its share of
the requests (at concurrency 1, request by request, or ``--c1-run`` requests per turn), so a change
in the machine's load hits every side alike. Request by request, each side's request follows the
other side's (another process had the CPUs: each runs cold); in runs of 10, nine in ten follow the
side's own previous request (each side measured warm). Query vectors are cached on both sides
after the warm-up (the queries cycle), so both sides time retrieval, not embedding. At concurrency
1 each HTTP request is also paired with the floor's request of the same query: the median of those per-request
differences, with a seeded 95% bootstrap interval, is printed beside the difference of the p50s
(pairing cancels the spread between queries that the two p50s carry); with ``--against``, the two
servers' requests of the same query are paired too (this checkout's minus the other's; the two servers
take the later turn in turn, and each query is asked in both orders over its two passes: the figure
for each order alone is printed beside it).

Per request the server does more than the floor: JWT check, the tenant + rate-limit statement,
the pipeline's search step, the proof, the JSON body and the hand-off to the audit writer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import agentrag as ar
from agentrag.server.tenants import Admitter, create_tenant
from agentrag.testing import FakeEmbedder
from benchmarks._db import bench_url
from benchmarks._paths import scifact_path

SCIFACT = scifact_path()
TENANT = "bench_serve"
COLLECTION = "bench_serve"
SECRET = "bench-secret-" + "b" * 40
DIMS = 384
FLOOR = "in-process Store.search (floor)"
FLOOR_ADMIT = "in-process rate-limit stmt + search"
BARE = "bare Starlette, canned JSON"
HTTP = "HTTP /search"
AGAINST = "HTTP /search, --against checkout"
POOL = 10  # the floor's pool; a server with N workers gets POOL // N connections per worker


def also_side(workers: int) -> str:
    return f"HTTP /search, {workers} workers"


# what ``agentrag serve`` passes uvicorn besides host, port, workers, log level (the bare floor too)
UVICORN_FLAGS = ["--no-access-log", "--no-server-header"]


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


Block = tuple[list[float], float, int]  # latencies (ms) of the successful requests, elapsed s, errors


def floor_side(store: ar.Store, queries: list[str], c: int, admitter: Any = None) -> Any:
    """The floor: ``Store.search`` from ``c`` threads in this process; a function of request ids.
    With ``admitter``, each search is preceded by the server's tenant + rate-limit statement."""
    scope = ar.Scope(tenant=TENANT)
    pool = ThreadPoolExecutor(c)

    def one(i: int) -> float:
        t = time.perf_counter()
        if admitter is not None and not admitter(TENANT).allowed:
            raise RuntimeError("the benchmark tenant was rate limited")
        store.search(queries[i % len(queries)], collections=COLLECTION, top_k=10, scope=scope)
        return (time.perf_counter() - t) * 1000

    def block(ids: range) -> Block:
        t = time.perf_counter()
        latencies = list(pool.map(one, ids))
        return latencies, time.perf_counter() - t, 0

    block.close = pool.shutdown  # type: ignore[attr-defined]
    return block


def _bodies(queries: list[str], n: int) -> list[bytes]:
    return [
        json.dumps({"query_text": q, "top_k": 10, "collections": [COLLECTION]}).encode()
        for q in (queries[i % len(queries)] for i in range(n))
    ]


def raw_side(url: str, token: str, queries: list[str], c: int, n: int) -> Any:
    """The HTTP side with the minimal load generator (benchmarks/_loadgen.py) on uvloop: one event
    loop and ``c`` keep-alive connections for the whole level."""
    from urllib.parse import urlsplit

    from benchmarks._loadgen import Connection, request_bytes, run

    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", int(parts.port or 80)
    path = f"/api/v1/query/{TENANT}/search"
    headers = {"Authorization": f"Bearer {token}"}
    encoded = [request_bytes(host, port, path, headers, b) for b in _bodies(queries, n)]
    loop = _new_event_loop()
    connections = [Connection(host, port) for _ in range(c)]

    def block(ids: range) -> Block:
        tally, elapsed = loop.run_until_complete(run(connections, [encoded[i] for i in ids]))
        return tally.latencies, elapsed, tally.errors

    def close() -> None:
        for conn in connections:
            conn.close()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()

    block.close = close  # type: ignore[attr-defined]
    return block


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop comes with the server extra
        return asyncio.new_event_loop()


def httpx_side(url: str, token: str, queries: list[str], c: int) -> Any:
    """The HTTP side with httpx.AsyncClient (the method before: ~1 ms of client CPU per request)."""

    def block(ids: range) -> Block:
        return asyncio.run(_httpx_block(url, token, queries, c, ids))

    block.close = lambda: None  # type: ignore[attr-defined]
    return block


async def _httpx_block(url: str, token: str, queries: list[str], c: int, ids: range) -> Block:
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

        async def worker(ws: range) -> None:
            for i in ws:
                await one(i)

        t = time.perf_counter()
        await asyncio.gather(*(worker(ids[w::c]) for w in range(c)))
        elapsed = time.perf_counter() - t
    return latencies, elapsed, errors


def against_first(r: int, period: int) -> bool:
    """Whether round ``r`` asks the ``--against`` server before this checkout's. The two take the
    later turn in turn, and the query of round ``r`` being ``r % period`` (c=1: one request a round,
    ``period`` queries), each query's next pass flips its order: every query is asked in both orders.
    (Flipping on ``r % 2`` alone gave a query the same order in every pass whenever ``period`` is
    even, so any cost of the turn stayed with the queries of one parity.)"""
    return bool((r % period + r // period) % 2)


def measure_level(
    sides: dict[str, Any], c: int, n: int, rounds: int, period: int | None = None
) -> list[dict[str, Any]]:
    """Every side at concurrency ``c``: a warm-up of ``max(2c, 50)`` requests each (psycopg prepares
    a statement on its 5th run on a connection: 10 pooled connections need 50), then ``rounds``
    rounds in which each side in turn sends ``n / rounds`` requests. Interleaving keeps the sides
    comparable on a shared machine whose load changes from one minute to the next. ``period``: the
    number of distinct queries (c=1: rounds ``r`` and ``r + period`` ask the same query)."""
    for block in sides.values():
        block(range(min(n, max(2 * c, 50))))
    per_round = max(c, n // rounds)
    totals: dict[str, list[Any]] = {name: [[], 0.0, 0] for name in sides}
    swapped: list[bool] = []  # per request: the --against server asked first in its round
    for r in range(rounds):
        ids = range(r * per_round, (r + 1) * per_round)
        order = list(sides)
        first = HTTP in order and AGAINST in order and against_first(r, period or rounds)
        swapped += [first] * len(ids)
        if first:
            i, j = order.index(HTTP), order.index(AGAINST)
            order[i], order[j] = order[j], order[i]
        for name in order:
            latencies, elapsed, errors = sides[name](ids)
            total = totals[name]
            total[0] += latencies
            total[1] += elapsed
            total[2] += errors
    rows = [_row(name, c, *totals[name]) for name in sides]
    if c == 1:  # request by request: each request of a side is paired with the floor's same query
        floor = totals[FLOOR]
        for row, name in zip(rows, sides, strict=True):
            lat, _, errors = totals[name]
            if name not in (FLOOR, BARE) and errors == 0 and floor[2] == 0 and len(lat) == len(floor[0]):
                row["paired"] = paired_overhead(lat, floor[0])
        this, other = totals.get(HTTP), totals.get(AGAINST)
        if this and other and this[2] == other[2] == 0 and len(this[0]) == len(other[0]):
            # this checkout's server minus the other's, request by request (the same query, adjacent)
            row = rows[list(sides).index(AGAINST)]
            row["paired_this_minus_against"] = paired_overhead(this[0], other[0])
            # the same, with each order alone: [this checkout's server asked first, the other first]
            diffs = list(zip((a - b for a, b in zip(this[0], other[0], strict=True)), swapped, strict=True))
            row["paired_by_order"] = [
                round(statistics.median(d for d, s in diffs if s == k), 3) for k in (False, True)
            ]
    return rows


def paired_overhead(latencies: list[float], floor: list[float], resamples: int = 2000) -> list[float]:
    """Median of the per-request differences ``latencies[i] - floor[i]`` (the same query, sent one
    after the other) and its 95% bootstrap interval (seeded): [median, low, high] in ms. The
    difference of two p50s mixes the spread of the queries into the overhead; pairing cancels it."""
    import random

    diffs = [a - b for a, b in zip(latencies, floor, strict=True)]
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(resamples))
    low, high = medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]
    return [round(statistics.median(diffs), 3), round(low, 3), round(high, 3)]


def _wait_ready(process: Any, base: str, probe: str, log: Path) -> None:
    import httpx

    for _ in range(600):
        try:
            if httpx.get(base + probe, timeout=1).status_code in (200, 405):
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"the server did not start:\n{log.read_text()}")


def start_server(url: str, workers: int, log: Path, source: Path | None = None) -> tuple[Any, str]:
    """``agentrag serve`` from this checkout, or from ``source`` (another checkout, for A/B runs)."""
    import subprocess

    from tests.server_support import free_port

    port = free_port()
    env = {**os.environ, "AGENTRAG_DATABASE_URL": url, "AGENTRAG_JWT_SECRET": SECRET}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    cmd = [sys.executable, "-m", "agentrag", "serve", "--port", str(port), "--embedder", f"fake:{DIMS}"]
    # the database pool is per worker process: N workers share the floor's 10 connections
    pool = max(1, POOL // workers)
    cmd += ["--workers", str(workers), "--pool-size", str(pool), "--log-level", "warning"]
    if _knows_no_access_log(source):  # both sides without the access-log line, when the checkout has the flag
        cmd.append("--no-access-log")
    process = subprocess.Popen(
        cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=source or Path.cwd()
    )
    base = f"http://127.0.0.1:{port}"
    _wait_ready(process, base, "/readyz", log)
    return process, base


def _knows_no_access_log(source: Path | None) -> bool:
    """Whether ``agentrag serve`` of ``source`` (None: this checkout) takes ``--no-access-log``: an A/B run
    whose other side logged a line per request compared the two servers with uvicorn's access log on one
    side only."""
    if source is None:
        return True
    cli = source / "agentrag" / "server" / "cli.py"
    return cli.is_file() and "--no-access-log" in cli.read_text(encoding="utf-8")


def start_bare(response: bytes, workers: int, log: Path) -> tuple[Any, str]:
    """The HTTP floor (benchmarks/_bare_app.py) on the settings ``agentrag serve`` gives uvicorn."""
    import subprocess

    from tests.server_support import free_port

    body = log.with_name("response.json")
    body.write_bytes(response)
    port = free_port()
    env = {**os.environ, "BENCH_BARE_RESPONSE": str(body)}
    cmd = [sys.executable, "-m", "uvicorn", "benchmarks._bare_app:app", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--workers", str(workers), "--log-level", "warning", *UVICORN_FLAGS]
    process = subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    _wait_ready(process, base, f"/api/v1/query/{TENANT}/search", log)
    return process, base


def _stop(process: Any) -> None:
    process.terminate()
    process.wait(timeout=30)


def main() -> int:
    import httpx
    import jwt

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--levels", default="1,16,64,200")
    parser.add_argument("--requests", type=int, default=400, help="requests per level (at least 3 x c)")
    parser.add_argument(
        "--client",
        default="raw",
        choices=["raw", "httpx", "both"],
        help="the HTTP load generator: raw (benchmarks/_loadgen.py, default), httpx.AsyncClient, or both",
    )
    parser.add_argument("--no-bare", action="store_true", help="skip the bare-Starlette HTTP floor")
    parser.add_argument(
        "--admit-floor",
        action="store_true",
        help="also the floor plus the server's tenant + rate-limit statement (in-process, same pool kind)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="also serve from this checkout (e.g. a git worktree of main) and measure it in the same rounds",
    )
    parser.add_argument(
        "--also-workers",
        type=int,
        help="also serve with this many uvicorn workers (pool split between them), in the same rounds",
    )
    parser.add_argument(
        "--rounds", type=int, default=8, help="interleaved rounds per level (the sides take turns)"
    )
    parser.add_argument(
        "--c1-run",
        type=int,
        default=1,
        help="at c=1, requests each side sends per turn (default 1: every request follows the other "
        "side's; 10: nine of ten follow the same side's own, each side measured warm)",
    )
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    url = bench_url()
    store = ar.Store(url, embedder=FakeEmbedder(DIMS), pool_size=10, max_overflow=0)
    queries = prepare(store, args.docs)
    token = jwt.encode(
        {"tenant_id": TENANT, "scope": "query", "exp": int(time.time()) + 7200}, SECRET, algorithm="HS256"
    )
    admitter = Admitter(store.engine)
    logs = Path(tempfile.mkdtemp())
    process, base = start_server(url, args.workers, logs / "server.log")
    bare = bare_base = None
    other = other_base = None
    also = also_base = None
    rows = []
    try:
        if args.also_workers:
            also, also_base = start_server(url, args.also_workers, logs / "also.log")
        if args.against is not None:
            other, other_base = start_server(url, args.workers, logs / "against.log", args.against.resolve())
        if not args.no_bare:
            sample = httpx.post(
                f"{base}/api/v1/query/{TENANT}/search",
                json={"query_text": queries[0], "top_k": 10, "collections": [COLLECTION]},
                headers={"Authorization": f"Bearer {token}"},
                timeout=120,  # the server's first search builds its BM25 index: seconds on a loaded VM
            )
            sample.raise_for_status()
            bare, bare_base = start_bare(sample.content, args.workers, logs / "bare.log")
        for c in levels:
            n = max(args.requests, 3 * c)
            ids = max(n, args.rounds * max(c, n // args.rounds), 2 * c, 50)
            sides = {FLOOR: floor_side(store, queries, c)}
            if args.admit_floor:
                sides[FLOOR_ADMIT] = floor_side(store, queries, c, admitter)
            if bare_base is not None:
                sides[BARE] = raw_side(bare_base, token, queries, c, ids)
            if args.client in ("raw", "both"):
                sides[HTTP] = raw_side(base, token, queries, c, ids)
            if args.client in ("httpx", "both"):
                sides[HTTP + " (httpx)"] = httpx_side(base, token, queries, c)
            if other_base is not None:
                sides[AGAINST] = raw_side(other_base, token, queries, c, ids)
            if also_base is not None:
                sides[also_side(args.also_workers)] = raw_side(also_base, token, queries, c, ids)
            # at c=1 the sides take turns request by request: paired, as close in time as can be
            c1_rounds = max(1, n // max(1, args.c1_run))
            rounds = c1_rounds if c == 1 else args.rounds
            level = measure_level(sides, c, n, rounds, len(queries) if c == 1 else None)
            for block in sides.values():
                block.close()
            for row in level:
                print(json.dumps(row), flush=True)
            rows += level
    finally:
        _stop(process)
        for extra in (bare, other, also):
            if extra is not None:
                _stop(extra)
        admitter.close()
        store.close()
    print(
        f"\n{args.docs} SciFact docs, 1 tenant, hybrid top_k 10, pool {POOL}, {args.workers} server worker(s)"
        + (f"; also {args.also_workers} workers, pool {POOL // args.also_workers} each" if also else "")
    )
    print(f"{'concurrency':>11}  {'side':<34} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}")
    for row in rows:
        print(
            f"{row['concurrency']:>11}  {row['side']:<34} {row['rps']:>8} {row['p50_ms']!s:>8}"
            f" {row['p99_ms']!s:>8} {row['errors']:>6}"
        )
    by = {(r["side"], r["concurrency"]): r for r in rows}
    for c in levels:
        f, b = by[(FLOOR, c)], by.get((BARE, c))
        sides_http = [HTTP, HTTP + " (httpx)", AGAINST]
        if args.also_workers:
            sides_http.append(also_side(args.also_workers))
        for side in sides_http:
            h = by.get((side, c))
            if h is None or h["p50_ms"] is None or f["p50_ms"] is None:
                continue
            line = (
                f"c={c} {side}: overhead p50 {h['p50_ms'] - f['p50_ms']:+.2f} ms"
                f" over the floor's {f['p50_ms']:.2f};"
                f" throughput {100 * h['rps'] / f['rps']:.0f}% of the floor's"
            )
            a = by.get((FLOOR_ADMIT, c))
            if a is not None and a["p50_ms"] is not None:
                line += f"; {h['p50_ms'] - a['p50_ms']:+.2f} ms over floor + rate-limit statement"
                if "paired" in a:
                    line += f" (the statement alone, paired: {a['paired'][0]:+.2f} ms)"
            if b is not None and b["p50_ms"] is not None:
                line += f"; bare HTTP floor p50 {b['p50_ms']:.2f} ms, {b['rps']:.0f} req/s"
            if "paired" in h:
                mid, low, high = h["paired"]
                line += f"; paired per-request overhead median {mid:+.2f} ms (95% CI {low:+.2f}, {high:+.2f})"
            if "paired_this_minus_against" in h:
                mid, low, high = h["paired_this_minus_against"]
                line += f"; this checkout's server minus this one, paired: {mid:+.2f} ms"
                line += f" (95% CI {low:+.2f}, {high:+.2f})"
                first, second = h["paired_by_order"]
                line += f" (this checkout's asked first: {first:+.2f}, the other first: {second:+.2f})"
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
