"""What ``/metrics`` costs a request: the metric records of one ``/search``, on the service's own
``MeterProvider`` (an in-memory reader, as ``agentrag serve`` now builds) beside the no-op provider
(what the service recorded into before, without ``--trace-file``): the floor. Plus one scrape.

    .venv/bin/python -m benchmarks.metrics_cost [--requests 20000] [--rounds 5]

CPU time (``time.process_time``) of the records one ``/search`` makes (the request histogram and
the active-requests counter twice, the search step's duration, the retriever's calls, duration and
results), per request, median over interleaved rounds; then the render of a scrape after them.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

ROUTE = "/api/v1/query/{tenant_id}/search"


def one_request(instruments: Any, duration: Any, active: Any) -> None:
    attrs = {"http.request.method": "POST", "url.scheme": "http"}
    active.add(1, attrs)
    mode = {"retriever_type": "hybrid"}
    instruments.retriever_search_calls.add(1, mode)
    instruments.retriever_search_duration.record(1.7, mode)
    instruments.retriever_results_returned.record(10, mode)
    instruments.step_duration.record(2.1, {"step": "search"})
    duration.record(0.0021, {**attrs, "http.response.status_code": 200, "http.route": ROUTE})
    active.add(-1, attrs)


def per_request_us(telemetry: Any, requests: int) -> float:
    meter = telemetry.meter
    duration = meter.create_histogram("http.server.request.duration", unit="s")
    active = meter.create_up_down_counter("http.server.active_requests")
    instruments = telemetry.instruments
    started = time.process_time()
    for _ in range(requests):
        one_request(instruments, duration, active)
    return (time.process_time() - started) / requests * 1e6


def main() -> None:
    import agentrag as ar
    from agentrag.server.metrics import Exposition, server_telemetry

    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    served, _, reader = server_telemetry(None)
    noop = ar.Telemetry()  # the global providers: no-op unless an application installed its own
    sides: dict[str, list[float]] = {"no-op provider (floor)": [], "/metrics reader": []}
    for _ in range(args.rounds):
        sides["no-op provider (floor)"].append(per_request_us(noop, args.requests))
        sides["/metrics reader"].append(per_request_us(served, args.requests))
    started = time.process_time()
    text = Exposition(reader, {}).render()
    scrape_ms = (time.process_time() - started) * 1000
    floor = statistics.median(sides["no-op provider (floor)"])
    rounds = f"median of {args.rounds} rounds x {args.requests}"
    print(f"metric records of one /search, CPU per request ({rounds})")
    for side, values in sides.items():
        median = statistics.median(values)
        print(f"  {side:<24} {median:7.1f} us   (+{median - floor:.1f} us over the floor)")
    print(f"  one scrape: {scrape_ms:.2f} ms CPU, {len(text.splitlines())} lines")


if __name__ == "__main__":
    main()
