"""The HTTP service under faults (issue #28); run by benchmarks/reliability.py (sections 5-7).

    .venv/bin/python -m benchmarks.reliability_http [--kills 1000] [--restarts 5] [--slow 200]

5. Requests (search, ask JSON, ask SSE on 8 keep-alive clients) against a real ``agentrag serve``
   while a killer terminates every client backend of the database every 100 ms, until ``--kills``
   backends died: the statuses, 503s without ``Retry-After``, dropped connections, broken streams.
6. PostgreSQL stopped and started ``--restarts`` times: a real server of the section's own (the
   embedded package's binaries, a temporary data directory, a free 127.0.0.1 port) stopped with
   ``pg_ctl stop -m fast`` for 3 s, then ``pg_ctl start``: the answers during the outage, the time
   from ``pg_ctl start`` returning to the first 200 and to ``/readyz`` answering 200.
7. ``--normal`` clients searching for ``--seconds``, alone (the quiet run: the floor) and beside
   ``--slow`` slow clients (half dribble a request head, half a request body, one byte a second,
   reconnecting whenever the server drops them): the normal clients' p50 / p99 and errors.

The server runs on its own database (``agentrag_bench_faults``): the killer terminates its backends.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from agentrag.server.tenants import create_tenant
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder
from tests.chaos_support import BackendKiller, PrivatePostgres
from tests.server_support import Server, auth, start_server

DATABASE = "agentrag_bench_faults"
WORDS = [
    "orbit",
    "comet",
    "nebula",
    "quasar",
    "pulsar",
    "galaxy",
    "meteor",
    "asteroid",
    "planet",
    "star",
    "dust",
    "plasma",
]


def faults_url() -> str:
    from agentrag.store.server import database_url

    base = make_url(database_url())
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if not conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": DATABASE}).scalar():
            conn.execute(text(f'CREATE DATABASE "{DATABASE}"'))
    admin.dispose()
    return base.set(database=DATABASE).render_as_string(hide_password=False)


def _corpus(url: str) -> tuple[str, str]:
    store = Store(url, embedder=FakeEmbedder(64))
    tenant, collection = f"bench_{uuid.uuid4().hex[:6]}", f"faults_{uuid.uuid4().hex[:6]}"
    create_tenant(store.engine, tenant, rate_limit=10_000_000)
    store.create_collection(collection)
    for i in range(100):
        body = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(80))
        store.ingest_text(f"{body} doc{i}", collection=collection, source=f"d{i}", tenant=tenant)
    store.close()
    return tenant, collection


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


class _Outcomes:
    def __init__(self) -> None:
        self.statuses: Counter[str] = Counter()
        self.lock = threading.Lock()

    def add(self, what: str) -> None:
        with self.lock:
            self.statuses[what] += 1


def _one(client: httpx.Client, tenant: str, body: dict[str, Any], kind: str, out: _Outcomes) -> None:
    path = f"/api/v1/query/{tenant}/{'search' if kind == 'search' else 'ask'}"
    try:
        if kind == "sse":
            r = client.post(path, json=body, headers={"Accept": "text/event-stream"})
            last = [line for line in r.text.splitlines() if line.startswith("event:")][-1:]
            if r.status_code == 200 and last == ["event: error"] and "DATABASE_UNAVAILABLE" in r.text:
                out.add("200, then an SSE error event DATABASE_UNAVAILABLE")
                return
            if r.status_code == 200 and last != ["event: done"]:
                out.add(f"sse ended with {last}")
                return
        else:
            r = client.post(path, json=body)
    except httpx.TransportError as exc:
        out.add(f"dropped connection ({type(exc).__name__})")
        return
    if r.status_code == 503 and r.headers.get("retry-after") is None:
        out.add("503 without Retry-After")
    elif r.status_code in (200, 503):
        out.add(str(r.status_code))
    else:  # named by its error code, so the table says what failed
        code = r.json().get("error", {}).get("code") if "json" in r.headers.get("content-type", "") else None
        out.add(f"{r.status_code} {code or ''} ({kind})".strip())


def under_kills(url: str, tenant: str, collection: str, kills: int, tmp: Path) -> None:
    server = start_server(url, tmp)
    body = {"query_text": "orbit comet nebula", "collections": [collection]}
    out = _Outcomes()
    stop = threading.Event()

    def client_loop(kind: str) -> None:
        with httpx.Client(base_url=server.url, timeout=60, headers=auth(tenant, exp=3600)) as client:
            while not stop.is_set():
                _one(client, tenant, body, kind, out)

    started = time.monotonic()
    try:
        with BackendKiller(url, interval_s=0.1) as killer:
            threads = [
                threading.Thread(target=client_loop, args=(kind,), daemon=True)
                for kind in ("search", "search", "search", "ask", "ask", "sse", "sse", "sse")
            ]
            for t in threads:
                t.start()
            while killer.kills < kills:
                time.sleep(0.05)
            stop.set()
            for t in threads:
                t.join(60)
        seconds = time.monotonic() - started
        log = server.log()
    finally:
        server.stop()
    total = sum(out.statuses.values())
    print(
        f"\n**{total:,} requests during {killer.kills:,} backend kills** ({seconds:.0f} s; 8 keep-alive"
        " clients:"
    )
    print("3 search, 2 ask JSON, 3 ask SSE; a killer terminating every client backend every 100 ms)\n")
    print("| answer | requests | share |\n|---|---:|---:|")
    for what, n in out.statuses.most_common():
        print(f"| {what} | {n:,} | {100 * n / total:.1f}% |")
    bad = sum(n for what, n in out.statuses.items() if what not in ("200", "503"))
    print(
        f"\n500s: {sum(n for w, n in out.statuses.items() if w.startswith('500'))}, dropped connections: "
        f"{sum(n for w, n in out.statuses.items() if w.startswith('dropped'))}, other than 200/503: {bad}; "
        f"'Exception in ASGI application' in the server log: {log.count('Exception in ASGI application')}"
    )


def after_restarts(restarts: int, tmp: Path) -> None:
    pg = PrivatePostgres()
    try:
        tenant, collection = _corpus(pg.url)
        server = start_server(pg.url, tmp)
        try:
            during, recoveries, readiness, log = _restart_rounds(server, pg, tenant, collection, restarts)
        finally:
            server.stop()
    finally:
        pg.close()
    total = sum(during.statuses.values())
    print(f"\n**PostgreSQL stopped for 3 s and started again, {restarts} times** (`pg_ctl stop -m fast`,")
    print(
        "`pg_ctl start` of a private server; one keep-alive client sends search, ask JSON, ask SSE in turn;"
        " polls every 10 ms once it is back)\n"
    )
    print("| answers during the outages | requests |\n|---|---:|")
    for what, n in during.statuses.most_common():
        print(f"| {what} | {n:,} |")
    first = f"median {statistics.median(recoveries) * 1000:.0f} ms, max {max(recoveries) * 1000:.0f} ms"
    ready = f"median {statistics.median(readiness) * 1000:.0f} ms, max {max(readiness) * 1000:.0f} ms"
    print(
        f"\nrequests during the outages: {total}; from `pg_ctl start` returning to the first 200: {first};"
        f" to /readyz 200: {ready} (over {len(recoveries)}; the same server process throughout);"
        f" 'Exception in ASGI application' in the log: {log.count('Exception in ASGI application')}"
    )


def _restart_rounds(
    server: Server, pg: PrivatePostgres, tenant: str, collection: str, restarts: int
) -> tuple[_Outcomes, list[float], list[float], str]:
    body = {"query_text": "orbit comet", "collections": [collection]}
    during = _Outcomes()
    recoveries: list[float] = []
    readiness: list[float] = []
    pid = server.process.pid
    with httpx.Client(base_url=server.url, timeout=60, headers=auth(tenant, exp=3600)) as client:
        for _ in range(restarts):
            assert client.post(f"/api/v1/query/{tenant}/search", json=body).status_code == 200
            pg.stop()
            until = time.monotonic() + 3.0
            while time.monotonic() < until:
                for kind in ("search", "ask", "sse"):
                    _one(client, tenant, body, kind, during)
                time.sleep(0.05)
            pg.start()
            back = time.monotonic()
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if client.post(f"/api/v1/query/{tenant}/search", json=body).status_code == 200:
                        break
                time.sleep(0.01)
            recoveries.append(time.monotonic() - back)
            while client.get("/readyz").status_code != 200:
                time.sleep(0.05)
            readiness.append(time.monotonic() - back)
    assert server.process.pid == pid and server.process.poll() is None
    return during, recoveries, readiness, server.log()


async def _slow_clients(
    port: int, path: str, token: str, count: int, stop: threading.Event, counts: Counter[str]
) -> None:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n".encode()

    async def one(i: int) -> None:
        body_sender = i % 2 == 1
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.5)
                continue
            counts["connections"] += 1
            try:
                if body_sender:  # a complete head, then a body one byte a second
                    writer.write(head + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
                else:  # the head, one byte a second
                    writer.write(head[:20])
                await writer.drain()
                while not stop.is_set():
                    writer.write(b"x" if body_sender else b"X")
                    await writer.drain()
                    with contextlib.suppress(TimeoutError):
                        if await asyncio.wait_for(reader.read(1), 1.0) == b"":
                            break
                        counts["answered by the server (408)"] += 1
                        break
            except (OSError, ConnectionError):
                pass
            finally:
                counts["dropped by the server"] += not stop.is_set()
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    await asyncio.gather(*(one(i) for i in range(count)))


def _normal_run(
    server: Server, tenant: str, collection: str, clients: int, seconds: float
) -> tuple[list[float], int]:
    body = {"query_text": "orbit comet nebula", "collections": [collection]}
    latencies: list[float] = []
    errors = [0]
    until = time.monotonic() + seconds

    def loop() -> None:
        with httpx.Client(base_url=server.url, timeout=60, headers=auth(tenant, exp=3600)) as client:
            while time.monotonic() < until:
                started = time.perf_counter()
                try:
                    ok = client.post(f"/api/v1/query/{tenant}/search", json=body).status_code == 200
                except httpx.TransportError:
                    ok = False
                if ok:
                    latencies.append((time.perf_counter() - started) * 1000)
                else:
                    errors[0] += 1

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors[0]


def slow_clients(
    url: str, tenant: str, collection: str, normal: int, slow: int, seconds: float, tmp: Path
) -> None:
    server = start_server(url, tmp)
    port = int(server.url.rsplit(":", 1)[1])
    from tests.server_support import token

    rows = []
    counts: Counter[str] = Counter()
    try:
        _normal_run(server, tenant, collection, normal, 3)  # warm-up
        quiet, quiet_errors = _normal_run(server, tenant, collection, normal, seconds)
        stop = threading.Event()
        path = f"/api/v1/query/{tenant}/search"
        runner = threading.Thread(
            target=lambda: asyncio.run(
                _slow_clients(port, path, token(tenant, exp=3600), slow, stop, counts)
            ),
            daemon=True,
        )
        runner.start()
        time.sleep(2)  # every slow client connected
        loaded, loaded_errors = _normal_run(server, tenant, collection, normal, seconds)
        stop.set()
        runner.join(30)
        rows = [
            ("quiet (the floor)", quiet, quiet_errors),
            (f"beside {slow} slow clients", loaded, loaded_errors),
        ]
    finally:
        server.stop()
    print(
        f"\n**{normal} normal clients searching for {seconds:g} s, alone and beside {slow} slow clients**"
        " (half send a"
    )
    print("request head, half a body, one byte a second; header and body timeouts 10 s, the defaults)\n")
    print("| run | searches | errors | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|")
    for name, values, errors in rows:
        print(f"| {name} | {len(values):,} | {errors} | {_pct(values, 0.5):.1f} | {_pct(values, 0.99):.1f} |")
    ratio = _pct(rows[1][1], 0.5) / _pct(rows[0][1], 0.5)
    print(
        f"\nnormal p50 beside the slow clients: {ratio:.2f}x the quiet run (target <= 1.5x); slow-client "
        f"connections opened: {counts['connections']}, "
        f"ended by the server: {counts['dropped by the server']} "
        f"(408 answers read: {counts['answered by the server (408)']})"
    )


def run(
    kills: int = 1000, restarts: int = 5, normal: int = 16, slow: int = 200, seconds: float = 20.0
) -> None:
    import logging

    logging.getLogger("agentrag").setLevel(logging.CRITICAL)
    url = faults_url()
    tenant, collection = _corpus(url)
    with tempfile.TemporaryDirectory() as tmp:
        sections: list[Callable[[], None]] = [
            lambda: under_kills(url, tenant, collection, kills, Path(tmp)),
            lambda: after_restarts(restarts, Path(tmp)),
            lambda: slow_clients(url, tenant, collection, normal, slow, seconds, Path(tmp)),
        ]
        for section in sections:
            section()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=1000)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--normal", type=int, default=16)
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    run(args.kills, args.restarts, args.normal, args.slow, args.seconds)


if __name__ == "__main__":
    main()
