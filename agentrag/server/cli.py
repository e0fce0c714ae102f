"""``agentrag serve``, ``agentrag tenants ...``, ``agentrag audit list``, and through their own modules
``agentrag mcp`` and ``agentrag token mint`` (registered by agentrag.cli)."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["register"]

DEMO_TENANT = "demo"


def _engine(args: argparse.Namespace) -> Any:
    import agentrag as ar

    return ar.Store(getattr(args, "database_url", None)).engine


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str, ensure_ascii=False))


# ---- tenants -----------------------------------------------------------------------------------
def cmd_tenants_create(args: argparse.Namespace) -> int:
    from agentrag.server.tenants import create_tenant

    tenant = create_tenant(
        _engine(args),
        args.tenant,
        retrieval_top_k_max=args.top_k_max,
        rate_limit=args.rate_limit,
        rate_limit_period_s=args.rate_limit_period,
        generation_enabled=not args.no_generation,
        suppress_ungrounded=args.suppress_ungrounded,
        exist_ok=args.update,
    )
    _print_json(tenant.to_dict()) if args.json else print(f"created {tenant!r}")
    return 0


def _set_state(state: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        from agentrag.server.tenants import set_state

        tenant = set_state(_engine(args), args.tenant, state)
        _print_json(tenant.to_dict()) if args.json else print(repr(tenant))
        return 0

    return handler


def cmd_tenants_list(args: argparse.Namespace) -> int:
    from agentrag.server.tenants import list_tenants

    tenants = list_tenants(_engine(args))
    if args.json:
        _print_json([t.to_dict() for t in tenants])
        return 0
    if not tenants:
        print("no tenants yet: agentrag tenants create TENANT")
    for t in tenants:
        flags = ("" if t.generation_enabled else " no-generation") + (
            " suppress-ungrounded" if t.suppress_ungrounded else ""
        )
        print(
            f"{t.id:<24} {t.state:<9} {t.rate_limit}/{t.rate_limit_period_s:g}s"
            f"  top_k<={t.retrieval_top_k_max}{flags}"
        )
    return 0


# ---- audit -------------------------------------------------------------------------------------
def cmd_audit_list(args: argparse.Namespace) -> int:
    from agentrag.server.tenants import list_audit

    if args.limit < 1:
        raise SystemExit("agentrag audit list: --limit must be >= 1")
    found = list_audit(
        _engine(args),
        tenant=args.tenant,
        query_id=args.query_id,
        limit=args.limit + 1,
        before_id=args.before_id,
    )
    rows, more = found[: args.limit], len(found) > args.limit
    if args.json:
        _print_json([r.to_dict() for r in rows])
    if more:  # on stderr, so --json output stays one JSON document
        print(f"more rows: agentrag audit list --before-id {rows[-1].id} ...", file=sys.stderr)
    if args.json:
        return 0
    for r in rows:
        ids = r.details.get("chunk_ids") or r.details.get("cited_chunk_ids") or []
        latency = f"{r.latency_ms:.1f} ms" if r.latency_ms is not None else "-"
        print(
            f"{r.created_at:%Y-%m-%d %H:%M:%S}  {r.type:<20} {r.tenant_id or '-':<16} {r.query_id}"
            f"  {len(ids)} chunks  {latency}"
        )
    return 0


def cmd_audit_purge(args: argparse.Namespace) -> int:
    from agentrag.server.tenants import purge_audit

    if not args.older_than_days > 0:
        raise SystemExit("agentrag audit purge: --older-than-days must be > 0")
    deleted = purge_audit(_engine(args), older_than_days=args.older_than_days)
    _print_json({"deleted": deleted}) if args.json else print(f"deleted {deleted} audit rows")
    return 0


# ---- serve -------------------------------------------------------------------------------------
_OPTIONS = (
    # (flag, config field, type, help)
    ("--embedder", "embedder", str, "query embedder: local (all-MiniLM-L6-v2) or fake[:DIMS] (tests)"),
    ("--llm", "llm", str, "litellm model for /ask (default: none, extractive answers)"),
    ("--llm-api-base", "llm_api_base", str, "API base URL of the --llm model"),
    ("--pool-size", "pool_size", int, "database connections per worker (default 10)"),
    (
        "--search-concurrency",
        "search_concurrency",
        int,
        "searches running at once per worker, the rest queued (default 0: 3 per core)",
    ),
    ("--jwt-secret", "jwt_secret", str, "HS256 secret (>= 32 bytes); prefer $AGENTRAG_JWT_SECRET"),
    ("--jwt-public-key", "jwt_public_key", str, "PEM public key file (RS256 / ES256)"),
    ("--jwt-jwks", "jwt_jwks", str, "JWKS file of RSA / EC public keys, chosen by kid"),
    ("--jwt-issuer", "jwt_issuer", str, "required iss claim"),
    ("--jwt-audience", "jwt_audience", str, "required aud claim"),
    ("--jwt-tenant-claim", "jwt_tenant_claim", str, "claim holding the tenant id (default tenant_id)"),
    ("--jwt-groups-claim", "jwt_groups_claim", str, "claim holding the user's groups (default groups)"),
    ("--jwt-leeway", "jwt_leeway_s", float, "clock skew allowed for exp / nbf, seconds (default 0)"),
    ("--jwt-max-lifetime", "jwt_max_lifetime_s", float, "longest token validity, seconds (default 86400)"),
    ("--max-body-bytes", "max_body_bytes", int, "largest request body (default 65536)"),
    ("--trace-file", "trace_file", str, "write spans and request metrics as JSON lines to this file"),
    ("--trace-file-max-bytes", "trace_file_max_bytes", int, "rotate the trace file at this size"),
    ("--collections", "default_collections", str, "comma-separated collections searched by default"),
    ("--max-header-count", "max_header_count", int, "most request headers (default 100; else 431)"),
    ("--max-header-bytes", "max_header_bytes", int, "largest request head (default 16384; else 431)"),
    ("--max-request-line", "max_request_line_bytes", int, "longest request line (default 8192; 414)"),
    ("--header-timeout", "header_timeout_s", float, "seconds for the request head to arrive (10; 408)"),
    ("--body-timeout", "body_timeout_s", float, "seconds for the request body to arrive (10; 408)"),
    ("--send-timeout", "send_timeout_s", float, "drop a client that reads nothing this long (30 s)"),
    ("--keep-alive", "keep_alive_s", int, "close idle keep-alive connections after this (5 s)"),
    ("--max-in-flight", "max_in_flight", int, "requests at once per worker (1000; beyond: 503)"),
    (
        "--stream-idle-timeout",
        "stream_idle_timeout_s",
        float,
        "end a stream that sends nothing this long (60 s)",
    ),
    ("--request-budget", "request_budget_s", float, "seconds a query may take, LLM calls included (0: none)"),
    ("--audit-retention-days", "audit_retention_days", float, "purge older audit rows (365; 0: keep)"),
    ("--read-database-urls", "read_database_urls", str, "comma-separated read replicas the searches go to"),
)


def cmd_serve(args: argparse.Namespace) -> int:
    from agentrag.server.extras import require_extras

    require_extras("serve", "server")
    import uvicorn

    import agentrag as ar
    from agentrag.server.config import ServerConfig

    overrides = {field: getattr(args, field) for _, field, _, _ in _OPTIONS}
    overrides["database_url"] = getattr(args, "database_url", None)
    overrides["metrics"] = args.metrics
    config = ServerConfig.from_env(**overrides)
    store = ar.Store(config.database_url)  # applies pending migrations once, before any worker starts
    if args.demo:
        config = _demo(store, config, args.port)
    if config.database_url is None:  # the embedded server this process started: workers connect to it
        from dataclasses import replace

        config = replace(config, database_url=store.engine.url.render_as_string(hide_password=False))
    store.close()
    os.environ.update(config.to_env())
    print(f"agentrag serve: starting {args.workers} worker(s) on port {args.port} ...", file=sys.stderr)
    _say_when_ready(args.host, args.port, args.workers)
    uvicorn.run(
        "agentrag.server.app:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
        access_log=args.access_log,
        server_header=False,  # no "server: uvicorn" on every response
        http=_http_protocol(),
        timeout_keep_alive=config.keep_alive_s,
        h11_max_incomplete_event_size=config.max_header_bytes + config.max_request_line_bytes,
    )
    return 0


def _say_when_ready(host: str, port: int, workers: int) -> None:
    """Print the address once a worker answers ``/readyz`` (uvicorn's own "running" line comes
    before its workers have loaded the app), from a daemon thread polling it."""
    import threading

    import httpx

    probe = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host

    def poll() -> None:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://{probe}:{port}/readyz", timeout=5).status_code == 200:
                    print(
                        f"agentrag serve: ready at http://{host}:{port} ({workers} worker(s)); docs at /docs",
                        file=sys.stderr,
                        flush=True,
                    )
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)

    threading.Thread(target=poll, name="agentrag-ready", daemon=True).start()


def _http_protocol() -> str:
    """uvicorn's httptools protocol with the request-head limits (agentrag.server.protocol), or
    h11 (whose head-size limit uvicorn sets) where httptools is not installed."""
    import importlib.util

    return (
        "agentrag.server.protocol:GuardedHttpToolsProtocol"
        if importlib.util.find_spec("httptools")
        else "h11"
    )


def _demo(store: Any, config: Any, port: int) -> Any:
    """Ingest the sample corpus for tenant ``demo`` into the demo's own collections (``demo_api``,
    ...), create the tenant, print a token and a search over those collections."""
    from dataclasses import replace

    import jwt

    import agentrag as ar
    from agentrag.server.tenants import create_tenant

    local = ar_store_with_embedder(store.url if config.database_url is None else config.database_url, config)
    try:  # the same documents as `agentrag demo` (tenant demo): after it, every one is unchanged
        names = ar.ingest_samples(local, tenant=DEMO_TENANT, on_report=lambda report: print(f"  {report}"))
    except FileNotFoundError as exc:
        raise SystemExit(f"agentrag serve --demo: {exc}") from None
    finally:
        local.close()
    create_tenant(store.engine, DEMO_TENANT, exist_ok=True)
    if not config.has_key:
        config = replace(config, jwt_secret=secrets.token_urlsafe(32))
    if config.jwt_secret:
        claims = {"tenant_id": DEMO_TENANT, "scope": "query", "exp": int(time.time()) + 3600}
        if config.jwt_issuer:
            claims["iss"] = config.jwt_issuer
        if config.jwt_audience:
            claims["aud"] = config.jwt_audience
        token = jwt.encode(claims, config.jwt_secret, algorithm="HS256")
        body = json.dumps({"query_text": "How do I paginate the notes API?", "collections": names})
        print(
            f"demo collections (tenant {DEMO_TENANT}): {', '.join(names)}\n"
            "demo token (1 hour):\n"
            f"  curl -s -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' \\\n"
            f"    -d '{body}' \\\n"
            f"    http://127.0.0.1:{port}/api/v1/query/{DEMO_TENANT}/search",
            file=sys.stderr,
        )
    return config


def ar_store_with_embedder(url: str | None, config: Any) -> Any:
    import agentrag as ar
    from agentrag.server.app import server_embedder

    return ar.Store(url, embedder=server_embedder(config.embedder))


def register(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``serve``, ``tenants`` and ``audit`` to the ``agentrag`` parser."""
    p = add(sub, "serve", cmd_serve, "serve the HTTP API (FastAPI on uvicorn)", json_flag=False)
    p.add_argument("--host", default=os.environ.get("AGENTRAG_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("AGENTRAG_PORT", "8000")))
    p.add_argument("--workers", type=int, default=int(os.environ.get("AGENTRAG_WORKERS", "1")))
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument(
        "--demo",
        action="store_true",
        help="ingest the samples for tenant 'demo' (collections demo_*) and print a token",
    )
    p.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="no uvicorn access-log line per request (method, path, status; never a body)",
    )
    p.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_const",
        const=False,
        help="no /metrics (saves the metric records' ~40 us of CPU per request); $AGENTRAG_METRICS=false",
    )
    for flag, field, kind, help in _OPTIONS:
        p.add_argument(flag, dest=field, type=kind, help=help)

    ten = sub.add_parser("tenants", help="serving tenants: create, suspend, resume, list").add_subparsers(
        dest="tenants_command", required=True
    )
    p = add(ten, "create", cmd_tenants_create, "create an ACTIVE tenant")
    p.add_argument("tenant")
    p.add_argument("--rate-limit", type=int, default=1000, help="requests per period (default 1000)")
    p.add_argument("--rate-limit-period", type=float, default=60.0, help="seconds (default 60)")
    p.add_argument("--top-k-max", type=int, default=50, help="largest top_k a request may ask (default 50)")
    p.add_argument("--no-generation", action="store_true", help="refuse /ask (403 GENERATION_DISABLED)")
    p.add_argument("--suppress-ungrounded", action="store_true", help="strip uncited sentences from answers")
    p.add_argument("--update", action="store_true", help="update the settings of an existing tenant")
    for verb, state in (("suspend", "SUSPENDED"), ("resume", "ACTIVE")):
        p = add(ten, verb, _set_state(state), f"{verb} a tenant (effective on its next request)")
        p.add_argument("tenant")
    add(ten, "list", cmd_tenants_list, "list tenants")

    aud = sub.add_parser("audit", help="persisted audit events of the serving API").add_subparsers(
        dest="audit_command", required=True
    )
    p = add(aud, "list", cmd_audit_list, "audit events, newest first (ids and counts, never text)")
    p.add_argument("--tenant")
    p.add_argument("--query-id")
    p.add_argument("--limit", "-n", type=int, default=50, help="rows per page (default 50)")
    p.add_argument("--before-id", type=int, help="the next page: rows older than this id")
    p = add(aud, "purge", cmd_audit_purge, "delete audit rows older than --older-than-days")
    p.add_argument("--older-than-days", type=float, required=True)

    from agentrag.server import mcp_cli, token_cli

    mcp_cli.register(sub, add)
    token_cli.register(sub, add)
