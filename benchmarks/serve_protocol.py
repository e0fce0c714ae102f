"""What ``agentrag serve``'s HTTP protocol costs a request, without the app: beside another checkout's.

    .venv/bin/python -m benchmarks.serve_protocol --against CHECKOUT [--rounds 10]

Serves the bare Starlette endpoint of benchmarks/_bare_app.py (a canned 13.6 KB JSON body, the size of
a top-10 ``/search`` proof) on uvicorn with ``agentrag serve``'s protocol
(:class:`agentrag.server.protocol.GuardedHttpToolsProtocol`, uvloop), once from this checkout and once
from ``--against``'s, and drives both with benchmarks/_loadgen.py in the same rounds (the two take the
first turn in turn): at c=1 the p50 latency, at c=1 and c=16 requests/s and the server process's CPU
per request (``/proc``). No database: what differs is the protocol layer alone (issue #39: a response's
head and body in one write).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import serve
from benchmarks.serve_breakdown import _process_cpu

PROTOCOL = "agentrag.server.protocol:GuardedHttpToolsProtocol"


def canned_body() -> bytes:
    chunk = {"chunk_id": "c" * 32, "doc_id": "d" * 32, "collection": "bench_serve", "text": "x" * 1215}
    return json.dumps({"query_id": "q" * 32, "chunks": [chunk] * 10, "warnings": []}).encode()


def start(source: Path, body: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    from tests.server_support import free_port

    port = free_port()
    env = {**os.environ, "BENCH_BARE_RESPONSE": str(body), "PYTHONPATH": str(source)}
    cmd = [sys.executable, "-m", "uvicorn", "benchmarks._bare_app:app", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--log-level", "warning", *serve.UVICORN_FLAGS]
    cmd += ["--http", PROTOCOL, "--loop", "uvloop"]
    process = subprocess.Popen(cmd, env=env, cwd=source, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    serve._wait_ready(process, base, f"/api/v1/query/{serve.TENANT}/search", log)
    return process, base


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--against", type=Path, required=True, help="the other checkout (e.g. a worktree of main)"
    )
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp())
    body = logs / "response.json"
    body.write_bytes(canned_body())
    servers = {"this checkout": start(Path.cwd(), body, logs / "this.log")}
    servers[str(args.against)] = start(args.against.resolve(), body, logs / "against.log")
    queries = ["the query text is not read by the bare endpoint"]
    try:
        for c, per_round in ((1, 300), (16, 1600)):
            sides = {
                name: serve.raw_side(base, "-", queries, c, per_round) for name, (_, base) in servers.items()
            }
            for block in sides.values():
                block(range(200))
            totals = {name: {"latencies": [], "cpu": 0.0, "wall": 0.0, "requests": 0} for name in sides}
            for r in range(args.rounds):
                for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                    pid = servers[name][0].pid
                    before = _process_cpu(pid)
                    latencies, elapsed, errors = sides[name](range(per_round))
                    if errors:
                        raise SystemExit(f"{name}: {errors} errors")
                    total = totals[name]
                    total["cpu"] += _process_cpu(pid) - before
                    total["wall"] += elapsed
                    total["requests"] += per_round
                    total["latencies"] += latencies
            for name, total in totals.items():
                print(
                    f"c={c:<2} {name:32s} p50 {statistics.median(total['latencies']) * 1000:6.1f} us,"
                    f" {total['requests'] / total['wall']:7.0f} req/s,"
                    f" server CPU {1e6 * total['cpu'] / total['requests']:5.1f} us/request"
                )
            for block in sides.values():
                block.close()
        print(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        for process, _ in servers.values():
            serve._stop(process)


if __name__ == "__main__":
    main()
