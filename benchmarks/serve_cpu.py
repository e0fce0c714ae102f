"""CPU per request, by thread, of the serving app beside ``Store.search`` in the same process.

    .venv/bin/python -m benchmarks.serve_cpu [--requests 400] [--block 50] [--concurrency 1] [--freeze]

A diagnostic for benchmarks/serve.py that does not depend on the machine being quiet: wall-clock
times on a shared machine are noise, CPU time per thread is not (much). The ASGI app
(``create_app``, its lifespan, the audit writer, FastAPI's whole stack) is driven in-process on a
uvloop event loop without sockets, at ``--concurrency`` (default 1), twice: as served, and with every request
through FastAPI's route (the search fast path removed); in alternating blocks of ``--block``
requests the same searches run as the floor: ``Store.search`` in a thread of this process, and
``ar.new(...) | ar.search()`` (the pipeline the server runs) in another. For each side it prints
the CPU per request of every thread that worked (from /proc/self/task/*/schedstat, nanoseconds),
the wall time per request, and the garbage collector's passes and time per request
(gc.callbacks). Both sides share one heap, one pool kind and one database.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import agentrag as ar
from benchmarks.serve import COLLECTION, DIMS, SECRET, TENANT, prepare

ROUTED = "HTTP app, FastAPI route only"
_gc_state: dict[str, Any] = {"t": 0.0, "n": defaultdict(int), "s": defaultdict(float)}


def _gc_callback(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_state["t"] = time.perf_counter()
    else:
        gen = info["generation"]
        _gc_state["n"][gen] += 1
        _gc_state["s"][gen] += time.perf_counter() - _gc_state["t"]


def thread_cpu() -> dict[str, int]:
    """Per thread of this process, keyed by thread name: nanoseconds on a CPU so far, and (under
    ``name + " scheduled"``) how many times the scheduler put it on a CPU (a wake-up or a return
    after preemption: the third field of schedstat)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, int] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns, _, runs = (int(x) for x in f.read().split()[:3])
        except OSError:
            continue
        name = names.get(int(tid), f"native-{tid}")
        if name.startswith("agentrag_"):  # the app's search pool: one bucket for all its threads
            name = "app worker threads"
        elif name.startswith(("floor-raw_", "floor-pipeline_")):
            name = name.rsplit("_", 1)[0] + " threads"
        out[name] = out.get(name, 0) + ns
        out[name + " scheduled"] = out.get(name + " scheduled", 0) + runs
    return out


def main() -> int:
    from benchmarks._db import bench_url

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=400, help="per side")
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight per side")
    parser.add_argument("--freeze", action="store_true", help="gc.freeze() after the warm-up")
    args = parser.parse_args()

    import jwt
    import uvloop

    from agentrag.server import create_app
    from agentrag.server.config import ServerConfig
    from agentrag.testing import FakeEmbedder

    url = bench_url()
    store = ar.Store(url, embedder=FakeEmbedder(DIMS), pool_size=10, max_overflow=0)
    queries = prepare(store, args.docs)
    token = jwt.encode(
        {"tenant_id": TENANT, "scope": "query", "exp": int(time.time()) + 7200}, SECRET, algorithm="HS256"
    )
    app = create_app(store, config=ServerConfig(database_url=url, jwt_secret=SECRET, pool_size=10))
    # the same app without the search fast path (every request through FastAPI's route): A/B
    routed = create_app(store, config=ServerConfig(database_url=url, jwt_secret=SECRET, pool_size=10))
    routed.user_middleware = [
        m for m in routed.user_middleware if getattr(m.cls, "__name__", "") != "_SearchFastPath"
    ]
    scope = ar.Scope(tenant=TENANT)
    raw_pool = ThreadPoolExecutor(args.concurrency, thread_name_prefix="floor-raw")
    pipe_pool = ThreadPoolExecutor(args.concurrency, thread_name_prefix="floor-pipeline")
    path = f"/api/v1/query/{TENANT}/search"
    bodies = [
        json.dumps({"query_text": q, "top_k": 10, "collections": [COLLECTION]}).encode() for q in queries
    ]
    headers = [
        (b"host", b"127.0.0.1"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
    ]

    def raw(i: int) -> None:
        store.search(queries[i % len(queries)], collections=COLLECTION, top_k=10, scope=scope)

    def pipeline(i: int) -> None:
        ctx = ar.new(queries[i % len(queries)], store=store, limit=10, collections=[COLLECTION], scope=scope)
        ctx = ctx | ar.search()
        ctx.proof().to_dict()

    canned = Path(tempfile.mkdtemp()) / "response.json"
    canned.write_bytes(b'{"query_id": "x"}')
    os.environ["BENCH_BARE_RESPONSE"] = str(canned)
    from benchmarks._bare_app import app as bare_app

    async def http(i: int, target: Any = app) -> None:
        body = bodies[i % len(bodies)]
        scope_ = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        sent = False
        status = [0]

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.sleep(3600)
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]

        await target(scope_, receive, send)
        if status[0] != 200:
            raise SystemExit(f"status {status[0]}")

    async def run() -> None:
        loop = asyncio.get_running_loop()
        totals: dict[str, dict[str, Any]] = {}

        async def block(side: str, ids: range) -> None:
            gc_n, gc_s = dict(_gc_state["n"]), dict(_gc_state["s"])
            before = thread_cpu()
            t = time.perf_counter()

            async def lane(lane_ids: range) -> None:
                for i in lane_ids:
                    if side == "HTTP app (ASGI, in-process)":
                        await http(i)
                    elif side == ROUTED:
                        await http(i, routed)
                    elif side == "bare Starlette (ASGI, canned)":
                        await http(i, bare_app)
                    elif side == "Store.search (floor)":
                        await loop.run_in_executor(raw_pool, raw, i)
                    else:
                        await loop.run_in_executor(pipe_pool, pipeline, i)

            c = min(args.concurrency, len(ids))
            await asyncio.gather(*(lane(ids[w::c]) for w in range(c)))
            wall = time.perf_counter() - t
            after = thread_cpu()
            total = totals.setdefault(
                side, {"n": 0, "wall": 0.0, "cpu": defaultdict(int), "gc": defaultdict(float)}
            )
            total["n"] += len(ids)
            total["wall"] += wall
            for name, ns in after.items():
                total["cpu"][name] += ns - before.get(name, 0)
            for gen in range(3):
                total["gc"][f"n{gen}"] += _gc_state["n"][gen] - gc_n.get(gen, 0)
                total["gc"][f"s{gen}"] += _gc_state["s"][gen] - gc_s.get(gen, 0.0)

        async with app.router.lifespan_context(app), routed.router.lifespan_context(routed):
            sides = ["Store.search (floor)", "pipeline (floor)", "HTTP app (ASGI, in-process)", ROUTED]
            sides.append("bare Starlette (ASGI, canned)")
            for side in sides:  # warm-up: prepared statements, BM25 index, JWT cache
                for i in range(60):
                    await block(side, range(i, i + 1))
            totals.clear()
            if args.freeze:
                gc.collect()
                gc.freeze()
            gc.callbacks.append(_gc_callback)
            for r in range(args.requests // args.block):
                for side in sides:
                    await block(side, range(r * args.block, (r + 1) * args.block))
            gc.callbacks.remove(_gc_callback)
        for side in sides:
            total = totals[side]
            n = total["n"]
            print(f"\n{side}: {n} requests, wall {1000 * total['wall'] / n:.2f} ms/request")
            cpu_sum = 0.0
            cpu = {k: v for k, v in total["cpu"].items() if not k.endswith(" scheduled")}
            for name, ns in sorted(cpu.items(), key=lambda kv: -kv[1]):
                per = ns / n / 1e6
                runs = total["cpu"].get(name + " scheduled", 0) / n
                if per >= 0.01:
                    print(f"    {name:<28} {per:7.3f} ms CPU/request, on a CPU {runs:5.1f} times/request")
                cpu_sum += per
            gcs = total["gc"]
            print(f"    {'all threads':<28} {cpu_sum:7.3f} ms CPU/request")
            print(
                "    gc per request: "
                + ", ".join(
                    f"gen{g} {gcs[f'n{g}'] / n:.3f} passes {1000 * gcs[f's{g}'] / n:.3f} ms" for g in range(3)
                )
            )

    uvloop.run(run())
    raw_pool.shutdown()
    pipe_pool.shutdown()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
