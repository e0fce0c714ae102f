"""Where a ``/search`` request's time and CPU go beyond the in-process search (issue #39).

    .venv/bin/python -m benchmarks.serve_breakdown [--requests 300] [--against CHECKOUT]

Same data as benchmarks/serve.py (``--docs`` SciFact abstracts, one tenant, FakeEmbedder 384-d,
hybrid top_k 10). Two measurements:

* **in process, c=1, no HTTP**: each request of the server's own work (``QueryFlow.run_search``:
  admission, checks, the pipeline's search step, proof, audit hand-off, JSON) follows the floor's
  ``Store.search`` of the same query and the tenant + rate-limit statement alone; medians and the
  paired median difference ``run_search - floor``.
* **CPU per request at c=16**: ``agentrag serve`` (and ``--against``'s) driven by the
  benchmarks/_loadgen.py client, the server process's CPU time (``/proc/PID/stat``) per request,
  beside the floor's process CPU per request (``getrusage``) in the same rounds. On a machine whose
  cores are saturated, requests/s follow CPU per request: this is what bounds c=16's share of the
  floor. (PostgreSQL's own CPU is not counted on either side.)
* **CPU per request at c=1, by thread**: each server's CPU per request (``/proc/PID/task/*/schedstat``)
  split into its event loop and its other threads (the search's worker, the admission's side thread,
  the BM25 leg's, the audit writer), each request after the floor's ``Store.search`` of the same query
  in this process (its thread CPU: the search without the server around it). A lone request's code
  runs cold here (the server sleeps while the floor searches), as in ``benchmarks.serve`` at c=1.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import agentrag as ar
from agentrag.testing import FakeEmbedder
from benchmarks import serve
from benchmarks._db import bench_url


def in_process(store: ar.Store, queries: list[str], n: int) -> None:
    import jwt

    from agentrag.server.app import create_app
    from agentrag.server.auditlog import AuditWriter
    from agentrag.server.config import ServerConfig
    from agentrag.server.models import SearchRequest
    from agentrag.server.query_routes import QueryFlow
    from agentrag.server.tenants import Admitter

    os.environ["AGENTRAG_JWT_SECRET"] = serve.SECRET
    create_app(store, config=ServerConfig.from_env(), llm=None)
    import gc

    flows = [o for o in gc.get_objects() if isinstance(o, QueryFlow)]
    flow = flows[-1]
    writer = AuditWriter(store.engine)
    flow.gateway.write = lambda events, latency: writer.submit(events, latency_ms=latency)
    claims = {"tenant_id": serve.TENANT, "scope": "query", "exp": int(time.time()) + 7200}
    who = flow.gateway.authenticate(
        "Bearer " + jwt.encode(claims, serve.SECRET, algorithm="HS256"), serve.TENANT
    )
    scope = ar.Scope(tenant=serve.TENANT)
    admitter = Admitter(store.engine)
    body = {"top_k": 10, "collections": [serve.COLLECTION]}
    bodies = [SearchRequest.model_validate({"query_text": q, **body}) for q in queries]
    sides = {
        "floor: Store.search": lambda i: store.search(
            queries[i % len(queries)], collections=serve.COLLECTION, top_k=10, scope=scope
        ),
        "the admission statement alone": lambda i: admitter(serve.TENANT),
        "QueryFlow.run_search": lambda i: flow.run_search(bodies[i % len(bodies)], who, time.perf_counter()),
    }
    for side in sides.values():
        for i in range(60):
            side(i)
    times: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(n):
        for name, side in sides.items():
            t = time.perf_counter()
            side(i)
            times[name].append((time.perf_counter() - t) * 1000)
    print(f"\nin process, c=1, {n} requests each, interleaved")
    for name, values in times.items():
        print(f"  {name:32s} median {statistics.median(values):7.3f} ms")
    paired = [a - b for a, b in zip(times["QueryFlow.run_search"], times["floor: Store.search"], strict=True)]
    print(f"  paired run_search - floor        median {statistics.median(paired):7.3f} ms")
    writer.close()
    admitter.close()


def _process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_per_request(
    url: str, store: ar.Store, queries: list[str], against: Path | None, rounds: int = 4
) -> None:
    import jwt

    claims = {"tenant_id": serve.TENANT, "scope": "query", "exp": int(time.time()) + 7200}
    token = jwt.encode(claims, serve.SECRET, algorithm="HS256")
    logs = Path(tempfile.mkdtemp())
    servers = {"HTTP /search": serve.start_server(url, 1, logs / "this.log")}
    if against is not None:
        servers[f"HTTP /search, {against}"] = serve.start_server(url, 1, logs / "against.log", against)
    c, per_round = 16, 200
    sides: dict[str, Any] = {"floor: Store.search": serve.floor_side(store, queries, c)}
    for name, (_, base) in servers.items():
        sides[name] = serve.raw_side(base, token, queries, c, rounds * per_round)
    totals = {name: [0.0, 0.0, 0] for name in sides}  # CPU s, wall s, requests
    loops = dict.fromkeys(servers, 0)  # ns of each server's event loop thread
    try:
        for block in sides.values():
            block(range(100))
        for r in range(rounds):
            ids = range(r * per_round, (r + 1) * per_round)
            for name, block in sides.items():
                pid = servers[name][0].pid if name in servers else None
                before = _process_cpu(pid) if pid else _own_cpu()
                loop_before = _thread_cpu(pid).get(pid, 0) if pid else 0
                _, elapsed, _ = block(ids)
                totals[name][0] += (_process_cpu(pid) if pid else _own_cpu()) - before
                if pid:
                    loops[name] += _thread_cpu(pid).get(pid, 0) - loop_before
                totals[name][1] += elapsed
                totals[name][2] += len(ids)
    finally:
        for process, _ in servers.values():
            serve._stop(process)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nc=16, {rounds} interleaved rounds of {per_round} requests per side; load average {load}")
    for name, (cpu, wall, requests) in totals.items():
        loop = f" (event loop {loops[name] / 1e6 / requests:4.2f})" if name in loops else ""
        rate = f"{requests / wall:6.1f} req/s"
        print(f"  {name:40s} {1000 * cpu / requests:5.2f} ms process CPU/request{loop}, {rate}")


def _thread_cpu(pid: int) -> dict[int, int]:
    """ns on a CPU per thread of ``pid`` (``/proc/PID/task/TID/schedstat``: finer than clock ticks)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[int(tid)] = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):  # the thread ended meanwhile
            continue
    return out


def cpu_per_thread(url: str, store: ar.Store, queries: list[str], against: Path | None, n: int = 400) -> None:
    """c=1 over HTTP: each server's CPU per request, its event loop apart from its other threads, each
    request after the floor's ``Store.search`` of the same query (its thread CPU: the search alone)."""
    import jwt

    claims = {"tenant_id": serve.TENANT, "scope": "query", "exp": int(time.time()) + 7200}
    token = jwt.encode(claims, serve.SECRET, algorithm="HS256")
    logs = Path(tempfile.mkdtemp())
    servers = {"HTTP /search": serve.start_server(url, 1, logs / "this1.log")}
    if against is not None:
        servers[f"HTTP /search, {against}"] = serve.start_server(url, 1, logs / "against1.log", against)
    sides = {name: serve.raw_side(base, token, queries, 1, n + 50) for name, (_, base) in servers.items()}
    scope = ar.Scope(tenant=serve.TENANT)
    floor: list[float] = []
    cpu = {name: [0, 0] for name in sides}  # ns: the event loop, the other threads
    try:
        for block in sides.values():
            block(range(50))
        for i in range(50, n + 50):
            started = time.thread_time()
            store.search(queries[i % len(queries)], collections=serve.COLLECTION, top_k=10, scope=scope)
            floor.append(time.thread_time() - started)
            for name in sorted(sides, reverse=bool(i % 2)):  # the servers take the first turn in turn
                pid = servers[name][0].pid
                before = _thread_cpu(pid)
                sides[name](range(i, i + 1))
                time.sleep(0.002)  # the work after the response (span, metrics) lands in this request
                for tid, ns in _thread_cpu(pid).items():
                    cpu[name][tid != pid] += ns - before.get(tid, 0)
    finally:
        for block in sides.values():
            block.close()  # type: ignore[attr-defined]
        for process, _ in servers.values():
            serve._stop(process)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nc=1 over HTTP, {n} requests per side, each after the floor's; load average {load}")
    print(f"  floor: Store.search's thread CPU       median {1000 * statistics.median(floor):5.2f} ms")
    for name, (loop, others) in cpu.items():
        print(f"  {name:40s} {loop / 1e6 / n:5.2f} ms event loop + {others / 1e6 / n:5.2f} ms other threads")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=300, help="in-process requests per side")
    parser.add_argument("--against", type=Path, help="also serve from this checkout (CPU per request)")
    args = parser.parse_args()
    url = bench_url()
    store = ar.Store(url, embedder=FakeEmbedder(serve.DIMS), pool_size=10, max_overflow=0)
    queries = serve.prepare(store, args.docs)
    in_process(store, queries, args.requests)
    cpu_per_request(url, store, queries, args.against)
    cpu_per_thread(url, store, queries, args.against)


if __name__ == "__main__":
    main()
