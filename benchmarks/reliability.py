"""Reliability under load, faults and hostile input (issue #14); prints the figures of RESULTS.md.

    .venv/bin/python -m benchmarks.reliability [--searches 1000] [--filters 10000]

1. 200 simultaneous first queries per mode on a fresh Store (default pool 5+5): errors, p50/p99,
   beside the same 200 queries on the warmed Store (the floor: no cache to build).
2. ``--searches`` searches on 8 threads while a killer terminates the store's active backends:
   raw exceptions, typed failures, success rate after the one retry.
3. ``--filters`` hypothesis-generated filters and scopes (valid and hostile): raw database errors.
4. A canary in the question and the documents, with a chat model and an embedding provider (a
   local OpenAI-compatible server on 127.0.0.1) that fail echoing the request: occurrences of the
   canary in logs, spans, metrics, audit events and error messages.
5-7. The served API (``agentrag serve``) under backend kills, PostgreSQL going away and coming back,
   and 200 slow clients beside 16 normal ones: see benchmarks/reliability_http.py.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

import agentrag as ar
from agentrag.errors import AgentragError
from agentrag.retrieval.dberrors import is_driver_error
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder, FakeLLM
from benchmarks._db import bench_url

MODES = ("vector", "lexical", "lexical_sql", "hybrid")
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
    "cluster",
    "dwarf",
    "giant",
    "flare",
    "eclipse",
    "lunar",
    "solar",
    "crater",
    "ring",
    "moon",
    "dust",
    "plasma",
    "field",
    "wave",
]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _corpus(store: Store, name: str, n: int = 200, **scope: Any) -> None:
    rng = random.Random(7)
    for i in range(n):
        body = " ".join(rng.choice(WORDS) for _ in range(120))
        store.ingest_text(f"{body} doc{i}", collection=name, source=f"d{i}", **scope)


# ---- 1 ------------------------------------------------------------------------------------------------
def first_queries(url: str, embedder: FakeEmbedder) -> None:
    setup = Store(url, embedder=embedder)
    name = f"rel_first_{uuid.uuid4().hex[:6]}"
    setup.create_collection(name)
    _corpus(setup, name)
    print("\n### 200 simultaneous first queries per mode, fresh Store, default pool (5 + 5)\n")
    print("| mode | errors | p50 ms | p99 ms | warm p50 ms (floor) | warm p99 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode in MODES:
        store = Store(url, embedder=embedder, migrate=False)

        def run(store: Store = store, mode: str = mode) -> tuple[list[float], int]:
            barrier = threading.Barrier(200)

            def one(i: int) -> float | None:
                barrier.wait()
                started = time.perf_counter()
                try:
                    store.search(f"comet {WORDS[i % len(WORDS)]}", collections=name, mode=mode)
                except Exception:
                    return None
                return (time.perf_counter() - started) * 1000

            with ThreadPoolExecutor(200) as pool:
                results = list(pool.map(one, range(200)))
            return [r for r in results if r is not None], sum(r is None for r in results)

        cold, errors = run()
        warm, warm_errors = run()
        print(
            f"| {mode} | {errors + warm_errors} | {_pct(cold, 0.5):.1f} | {_pct(cold, 0.99):.1f} "
            f"| {_pct(warm, 0.5):.1f} | {_pct(warm, 0.99):.1f} |"
        )
        store.close()
    setup.delete_collection(name)
    setup.close()


# ---- 2 ------------------------------------------------------------------------------------------------
def under_killer(url: str, embedder: FakeEmbedder, searches: int) -> None:
    victim_url = make_url(url).update_query_dict({"application_name": "agentrag_victim"})
    store = Store(victim_url.render_as_string(hide_password=False), embedder=embedder, migrate=False)
    name = f"rel_kill_{uuid.uuid4().hex[:6]}"
    store.create_collection(name)
    _corpus(store, name, 100)
    admin = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    stop = threading.Event()
    kills = 0

    def killer() -> None:
        nonlocal kills
        with admin.connect() as conn:
            while not stop.is_set():
                kills += int(
                    conn.execute(
                        text(
                            "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity"
                            " WHERE application_name = 'agentrag_victim' AND state <> 'idle'"
                            " ORDER BY random() LIMIT 1) AS victim"
                        )
                    ).scalar()
                    or 0
                )
                time.sleep(0.1)

    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def one(i: int) -> None:
        try:
            store.search(f"comet {WORDS[i % len(WORDS)]}", collections=name, mode=MODES[i % len(MODES)])
            kind = "ok"
        except AgentragError as exc:
            kind = f"typed {type(exc).__name__} ({getattr(exc, 'driver_error', '')}: {exc})"
        except Exception as exc:
            kind = f"raw {type(exc).__module__}.{type(exc).__name__}"
        with lock:
            outcomes[kind] += 1

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(searches)))
    elapsed = time.perf_counter() - started
    stop.set()
    thread.join()
    raw = sum(n for k, n in outcomes.items() if k.startswith("raw"))
    print(
        f"\n### {searches} searches on 8 threads while a killer terminates one active backend every 100 ms\n"
    )
    print("| searches | backends killed | succeeded | typed failures | raw exceptions | success | wall s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    typed = {k: n for k, n in outcomes.items() if k.startswith("typed")}
    print(
        f"| {searches} | {kills} | {outcomes['ok']} | {sum(typed.values())} {typed or ''} | {raw} "
        f"| {100 * outcomes['ok'] / searches:.1f}% | {elapsed:.1f} |"
    )
    admin.dispose()
    store.delete_collection(name)
    store.close()


# ---- 3 ------------------------------------------------------------------------------------------------
def hostile_filters(url: str, embedder: FakeEmbedder, count: int) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    store = Store(url, embedder=embedder, migrate=False)
    names = []
    for scoped in (False, True):
        name = f"rel_filt_{uuid.uuid4().hex[:6]}"
        store.create_collection(name, scoped=scoped)
        _corpus(store, name, 30, tenant="t1", workspace="w1", session="s1")
        names.append(name)
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=30),
        st.sampled_from(
            ["2024-01-01", "x'; DROP TABLE agentrag.chunks; --", "\x00", "\ud800", "%", "_", "\\"]
        ),
        st.dates().map(str),
    )
    keys = st.one_of(
        st.sampled_from(["classification", "date_range", "doc_ids", "metadata", "tenant", "id"]),
        st.text(max_size=20),
    )
    operators = st.sampled_from(["in", "eq", "$or", "gt", "x"])
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(operators, inner, max_size=3),
        max_leaves=8,
    )
    meta_key = st.one_of(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,10}", fullmatch=True), st.text(max_size=10)
    )
    shaped = st.fixed_dictionaries(
        {},
        optional={
            "classification": st.one_of(st.text(max_size=10), st.lists(st.text(max_size=10), max_size=3)),
            "date_range": st.tuples(st.one_of(st.none(), st.dates().map(str)), st.one_of(st.none(), scalars)),
            "doc_ids": st.lists(st.text(max_size=20), max_size=3),
            "metadata": st.dictionaries(meta_key, values, max_size=3),
        },
    )
    filters = st.one_of(st.none(), shaped, st.dictionaries(keys, values, max_size=4), values)
    scope_text = st.one_of(st.none(), st.sampled_from(["t1", "w1", "s1", "t2"]), st.text(max_size=12))

    @st.composite
    def scopes(draw: Any) -> Any:
        if draw(st.booleans()):
            return draw(st.sampled_from([None, ar.Scope.every()]))
        return (draw(scope_text), draw(scope_text), draw(scope_text))  # built in probe: it may refuse

    outcomes: Counter[str] = Counter()

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        filters=filters,
        scope=st.one_of(scopes(), st.just("raise")),
        mode=st.sampled_from(MODES),
        name=st.sampled_from(names),
    )
    def probe(filters: Any, scope: Any, mode: str, name: str) -> None:
        try:
            if scope == "raise":
                scope = None
            elif isinstance(scope, tuple):
                scope = ar.Scope(tenant=scope[0], workspace=scope[1], session=scope[2])
            store.search("comet orbit", collections=name, mode=mode, filters=filters, scope=scope, top_k=3)
            outcomes["ok"] += 1
        except AgentragError as exc:
            outcomes[f"typed {type(exc).__name__}"] += 1
        except TypeError:
            outcomes["TypeError (wrong Python type)"] += 1
        except Exception as exc:
            kind = "raw database" if is_driver_error(exc) else "raw other"
            outcomes[f"{kind} {type(exc).__name__}"] += 1

    started = time.perf_counter()
    probe()
    elapsed = time.perf_counter() - started
    total = sum(outcomes.values())
    raw_db = sum(n for k, n in outcomes.items() if k.startswith("raw database"))
    raw_other = sum(n for k, n in outcomes.items() if k.startswith("raw other"))
    print(f"\n### {total} hypothesis-generated filters and scopes (all four modes, scoped and unscoped)\n")
    print("| searches | ok | typed errors | TypeError | raw database errors | other raw | wall s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    typed = sum(n for k, n in outcomes.items() if k.startswith("typed"))
    print(
        f"| {total} | {outcomes['ok']} | {typed} | {outcomes['TypeError (wrong Python type)']} | {raw_db} "
        f"| {raw_other} | {elapsed:.1f} |"
    )
    print("\nby outcome: " + ", ".join(f"{k} {n}" for k, n in outcomes.most_common()))
    for name in names:
        store.delete_collection(name)
    store.close()


# ---- 4 ------------------------------------------------------------------------------------------------
class _Echo(BaseHTTPRequestHandler):
    """Every POST fails with a 400 whose message echoes the request body (the prompt)."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        payload = json.dumps(
            {"error": {"message": f"invalid request: {body}", "type": "invalid_request_error"}}
        )
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload.encode())))
        self.end_headers()
        self.wfile.write(payload.encode())

    def log_message(self, *_: Any) -> None:
        pass


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.records: list[tuple[str, int, str]] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        self.lines.append(line)
        self.records.append((record.name, record.levelno, line))


def canary(url: str) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentrag.audit import ListAuditSink
    from agentrag.embedders import LiteLLMEmbedder

    secret = "CANARY" + uuid.uuid4().hex[:12]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api_base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    model = "openai/echo-embed"
    writer = Store(url, embedder=FakeEmbedder(64, model_id=model, version="1"), migrate=False)
    name = f"rel_canary_{uuid.uuid4().hex[:6]}"
    writer.create_collection(name)
    for i in range(5):
        writer.ingest_text(f"comet orbit {secret} notes {i}", collection=name, source=f"c{i}")
    embedder = LiteLLMEmbedder(model, dimensions=64, version="1", api_base=api_base, api_key="sk-x")
    store = Store(url, embedder=embedder, migrate=False)

    handler = _Collect()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    telemetry = ar.Telemetry(tracer_provider=tracer, meter_provider=MeterProvider(metric_readers=[reader]))
    audit = ListAuditSink()
    messages: list[str] = []
    llms = [
        ar.LiteLLM("openai/echo-chat", api_base=api_base, api_key="sk-x", max_retries=1, backoff=0.01),
        FakeLLM(fn=lambda msgs: (_ for _ in ()).throw(RuntimeError("provider echo: " + json.dumps(msgs)))),
    ]
    runs = 0
    for llm in llms:
        for question in (f"what does {secret} say about comet orbit?", f"{secret}"):
            runs += 1
            try:
                ctx = ar.new(
                    question, store=store, llm=llm, telemetry=telemetry, audit=audit, collections=name
                )
                ctx = ctx.gate().rewrite().route(collections=[name]).decompose().search().rerank().answer()
                if ctx.error is not None:
                    messages.append(f"{type(ctx.error).__name__}: {ctx.error}")
                messages.extend(str(w) for w in ctx.warnings)
                messages.extend(repr(d) for d in ctx.degradations)
                messages.extend(str(s.error) for s in ctx.steps if getattr(s, "error", None))
            except Exception as exc:
                messages.append(f"{type(exc).__name__}: {exc}")
            for call in (store.search, writer.search):
                try:
                    call(question, collections=name, mode="vector")
                except Exception as exc:
                    messages.append(f"{type(exc).__name__}: {exc}")
    root.removeHandler(handler)
    root.setLevel(old_level)
    server.shutdown()
    spans = []
    for span in exporter.get_finished_spans():
        spans.append(repr(dict(span.attributes or {})) + str(span.status.description) + span.name)
        spans.extend(repr(dict(e.attributes or {})) + e.name for e in span.events)
    data = reader.get_metrics_data()
    metrics = data.to_json() if data is not None else ""
    audit_text = [e.to_json() for e in audit.events]
    ours = [line for name, _, line in handler.records if name.startswith("agentrag")]
    info = [line for _, level, line in handler.records if level >= logging.INFO]
    debug_others = [
        line for name, level, line in handler.records if level < logging.INFO and line not in ours
    ]
    found = {
        "logs: agentrag.* at every level": sum(secret in line for line in ours),
        "logs: every logger at INFO and above": sum(secret in line for line in info),
        "logs: other libraries' DEBUG (litellm)": sum(secret in line for line in debug_others),
        "spans": sum(secret in s for s in spans),
        "metrics": metrics.count(secret),
        "audit": sum(secret in a for a in audit_text),
        "error messages": sum(secret in m for m in messages),
    }
    print(
        f"\n### canary in {runs} questions and 5 documents, providers failing with an echo of the request\n"
    )
    print("| where | records checked | canary occurrences |")
    print("|---|---:|---:|")
    checked = {
        "logs: agentrag.* at every level": len(ours),
        "logs: every logger at INFO and above": len(info),
        "logs: other libraries' DEBUG (litellm)": len(debug_others),
        "spans": len(spans),
        "metrics": len(metrics),
        "audit": len(audit_text),
        "error messages": len(messages),
    }
    if os.environ.get("RELIABILITY_DEBUG"):
        print([m for m in messages if secret in m])
    for where, n in found.items():
        unit = " chars" if where == "metrics" else ""
        print(f"| {where} | {checked[where]}{unit} | {n} |")
    writer.delete_collection(name)
    writer.close()
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--searches", type=int, default=1000)
    parser.add_argument("--filters", type=int, default=10000)
    parser.add_argument(
        "--http-kills", type=int, default=1000, help="section 5: backends killed under HTTP load"
    )
    parser.add_argument("--http-seconds", type=float, default=20.0, help="section 7: seconds per run")
    parser.add_argument("--no-http", action="store_true", help="skip sections 5-7 (the served API)")
    args = parser.parse_args()
    url = bench_url()
    embedder = FakeEmbedder(64)
    # The retry warnings and the pool's reports of killed connections would flood the output.
    quiet = [logging.getLogger(name) for name in ("agentrag", "sqlalchemy.pool")]
    for logger in quiet:
        logger.setLevel(logging.CRITICAL)
    first_queries(url, embedder)
    under_killer(url, embedder, args.searches)
    hostile_filters(url, embedder, args.filters)
    for logger in quiet:
        logger.setLevel(logging.NOTSET)
    canary(url)
    if not args.no_http:  # 5-7: the served API under faults (benchmarks/reliability_http.py)
        from benchmarks.reliability_http import run

        run(kills=args.http_kills, seconds=args.http_seconds)


if __name__ == "__main__":
    main()
