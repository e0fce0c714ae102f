"""The FastAPI app: routes, the request flow and the one JSON error body.

Built on the library's public API only (``import agentrag as ar``): a search is
``ar.new(..., scope=ar.Scope(tenant=...)) | ar.search()`` and its ``proof()``; an ask adds
``ar.answer()`` (or ``ar.aanswer_stream`` for SSE). The pipeline's audit events are collected
per request and persisted (with the request latency) in ``agentrag.audit_events`` by a
background :class:`~agentrag.server.auditlog.AuditWriter` (batched, off the request path).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
import sys
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

import agentrag as ar
from agentrag.errors import InvalidInputError
from agentrag.server import limits
from agentrag.server.auditlog import AuditWriter
from agentrag.server.auth import TokenVerifier
from agentrag.server.config import ServerConfig
from agentrag.server.errors import ApiError, api_error_for, known_field, mapped_exceptions, safe_message
from agentrag.server.fastpath import SearchFastPath
from agentrag.server.gateway import Gateway
from agentrag.server.handoff import Handoff
from agentrag.server.interfaces import install as install_interfaces
from agentrag.server.metrics import server_telemetry
from agentrag.server.models import AskRequest, ErrorBody
from agentrag.server.observe import BodyTooLarge, ObserveMiddleware
from agentrag.server.query_routes import QueryFlow
from agentrag.server.query_routes import install as install_query_routes
from agentrag.server.tenants import Admitter, write_audit

__all__ = ["ApiError", "app_from_env", "build_store", "create_app"]

_log = logging.getLogger("agentrag.server")

# FastAPI's own OpenTelemetry (new in 0.16x) off: ObserveMiddleware already makes the one server
# span and the request metrics, and FastAPI's log records of validation failures would carry the
# rejected input (the query text). It also cost a provider lookup per request.
_NO_NATIVE_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}}
    if "telemetry" in inspect.signature(FastAPI).parameters
    else {}
)
_ERRORS: dict[int, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (401, "missing or invalid bearer token"),
        (403, "scope missing, tenant mismatch, TENANT_SUSPENDED or GENERATION_DISABLED"),
        (404, "unknown tenant or collection"),
        (413, "body too large"),
        (415, "the body is not application/json"),
        (422, "invalid request (the field is named)"),
        (429, "rate limited (Retry-After)"),
        (500, "internal error (no details)"),
        (503, "database unavailable or server overloaded (Retry-After)"),
        (504, "the request's time budget ran out, or the database's statement_timeout (STATEMENT_TIMEOUT)"),
    )
}


def _error(request: Request, status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    headers = extra.pop("headers", None)
    body = {"code": code, "message": message, "request_id": _request_id(request), **extra}
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _request_id(request: Request) -> str | None:
    state = request.scope.get("state") or {}
    return state.get("request_id")


class _Audit:
    """The app's audit sinks: the background :class:`AuditWriter` while the app runs (its lifespan),
    else written through."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.writers: list[AuditWriter] = []

    def write(self, events: list[dict[str, Any]], latency_ms: float | None) -> None:
        if self.writers:
            self.writers[0].submit(events, latency_ms=latency_ms)
        else:  # served without the lifespan: write through
            write_audit(self.engine, events, latency_ms=latency_ms)

    def offer(self, events: list[dict[str, Any]]) -> None:  # a stream's outcome: from the event loop
        if self.writers:
            self.writers[0].offer(events, required=True)
        else:
            write_audit(self.engine, events, latency_ms=None)

    def refused(self, status: int, scope: Any) -> None:  # a refusal's audit row: no body, no token
        route = getattr(scope.get("route"), "path", None) or "-"
        request_id = (scope.get("state") or {}).get("request_id") or "-"
        tenant = limits.tenant_of(scope.get("path", ""))
        details = {"status": status, "method": scope.get("method"), "route": route}
        event = {"type": "REQUEST_REFUSED", "query_id": request_id, "tenant": tenant, "details": details}
        if self.writers:
            self.writers[0].offer([event])

    @property
    def failing(self) -> bool | None:
        """Whether the writer is failing (None: no writer running)."""
        return self.writers[0].failing if self.writers else None


def create_app(
    store: ar.Store,
    *,
    config: ServerConfig | None = None,
    telemetry: ar.Telemetry | None = None,
    llm: Any = None,
    close_store: bool = False,
    freeze_gc: bool = False,
    switch_interval: float | None = None,
) -> FastAPI:
    """The ASGI app serving ``store``. ``config`` defaults to :meth:`ServerConfig.from_env`;
    ``telemetry`` to providers from ``config.trace_file`` or else the global ones; ``llm`` to
    ``config.llm`` (a litellm model) or none (extractive answers). ``freeze_gc``: once started,
    collect and ``gc.freeze()`` the process, so the garbage collector's full passes stop re-scanning
    the objects of startup (imports, FastAPI, pydantic); a process-wide setting, for a process that
    serves only this app (``agentrag serve`` sets it). ``switch_interval``: the interpreter's thread
    switch interval while the app runs (``sys.setswitchinterval``; restored at shutdown), also
    process-wide: ``agentrag serve`` sets :data:`SERVE_SWITCH_INTERVAL_S`."""
    number = isinstance(switch_interval, int | float) and not isinstance(switch_interval, bool)
    if switch_interval is not None and not (number and switch_interval > 0):
        raise InvalidInputError(f"switch_interval must be a number of seconds > 0, got {switch_interval!r}")
    config = config or ServerConfig.from_env()
    owned: list[Any] = []
    metrics_reader = None  # /metrics renders the metrics of the providers made here, not an app's own
    if telemetry is None:
        telemetry, owned, metrics_reader = server_telemetry(
            config.trace_file, metrics=config.metrics, trace_max_bytes=config.trace_file_max_bytes
        )
    if llm is None and config.llm:
        llm = ar.LiteLLM(config.llm, api_base=config.llm_api_base, api_key=config.llm_api_key)
    verifier = TokenVerifier(config)
    if not config.has_key:
        _log.warning("no JWT key configured: every query request will be refused with 401")
    admit = Admitter(store.engine)  # the tenant + rate-limit statement: one round trip, no pre-ping
    audit = _Audit(store.engine)
    guards: list[limits.RequestGuard] = []  # the outermost layer, once built: its count of requests in flight
    gateway = _gateway(store, config, telemetry, verifier, admit, audit, idle=lambda: _alone(guards))
    handoff = Handoff(search_concurrency(config))  # the search's worker threads (SearchFastPath)
    close = [*(p.shutdown for p in owned), admit.close, gateway.speculation.close, handoff.close]
    close += [store.close] if close_store else []
    app = FastAPI(
        title="agentrag",
        version=ar.__version__,
        summary="Multi-tenant retrieval with verifiable proofs and cite-only answers",
        lifespan=_lifespan(store, config, llm, audit, close, freeze_gc=freeze_gc, switch=switch_interval),
        docs_url=None,  # interfaces.install serves /docs from local assets
        **_NO_NATIVE_TELEMETRY,
    )
    _install_error_handlers(app)
    flow = QueryFlow(gateway, llm)  # agentrag.server.gateway: the one path of every interface
    install_query_routes(app, flow, errors=_ERRORS)
    _install_health_routes(app, store, audit)
    install_interfaces(
        app, gateway=gateway, config=config, llm=llm, metrics_reader=metrics_reader
    )  # /, /docs, /metrics, /v1/* (OpenAI), /mcp
    _install_middleware(
        app,
        config,
        telemetry,
        flow=flow,
        verifier=verifier,
        refused=audit.refused,
        guards=guards,
        handoff=handoff,
    )
    return app


def _gateway(
    store: ar.Store,
    config: ServerConfig,
    telemetry: ar.Telemetry,
    verifier: TokenVerifier,
    admit: Admitter,
    audit: _Audit,
    *,
    idle: Callable[[], bool],
) -> Gateway:
    default_collections = [c for c in (config.default_collections or "").split(",") if c] or None
    return Gateway(
        store,
        verifier=verifier,
        admit=admit,
        audit=audit.write,
        offer=audit.offer,
        telemetry=telemetry,
        budget=ar.Budget(max_seconds=config.request_budget_s or None),  # --request-budget: a deadline
        default_collections=default_collections,
        max_streams=max(1, config.max_in_flight // 2),
        idle_timeout_s=config.stream_idle_timeout_s,
        idle=idle,
    )


def _worker_threads(config: ServerConfig) -> int:
    """Worker threads of the default executor (every route but the search's fast path): twice the pool."""
    return max(8, 2 * config.pool_size)


#: Searches running at once per core this process may use, unless ``search_concurrency`` says. A search
#: is Python (under one GIL) and PostgreSQL's work, on a machine whose cores the database often shares:
#: past a few per core, another running search adds GIL hand-offs and cold caches, not throughput.
#: Measured on 2 cores (benchmarks/RESULTS.md, "The serving API under load", session 24): in process, 16
#: threads of ``Store.search`` serve 223 searches/s and 8 threads 272; over HTTP at 16 clients, 6
#: running searches served 3 to 13 points more of the floor than 16 did (ten paired runs), 2 running 3 fewer.
SEARCHES_PER_CORE = 3


def search_concurrency(config: ServerConfig) -> int:
    """How many searches this process runs at once (the hand-off's threads); the rest wait their turn
    in it, first come first served: ``config.search_concurrency``, or 3 per core (0, the default)."""
    if config.search_concurrency:
        return config.search_concurrency
    return SEARCHES_PER_CORE * _cores()


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity on macOS or Windows
        return os.cpu_count() or 1


def _alone(guards: list[limits.RequestGuard]) -> bool:
    """Whether the request asking is the only one in flight (read from a worker thread: a snapshot)."""
    return not guards or guards[-1].in_flight <= 1


def _lifespan(
    store: ar.Store,
    config: ServerConfig,
    llm: Any,
    audit: _Audit,
    close: list[Callable[[], Any]],
    *,
    freeze_gc: bool,
    switch: float | None = None,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start: the worker threads, the model loaded, the audit writer. Stop: every queued audit
    event written, then ``close`` in order."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=_worker_threads(config), thread_name_prefix="agentrag")
        asyncio.get_running_loop().set_default_executor(pool)
        await asyncio.to_thread(store.embedder.embed, ["warm up"])  # load the model before serving
        if getattr(llm, "system", None) == "litellm":  # not on the event loop at the first /ask
            await asyncio.to_thread(importlib.import_module, "litellm")
        days = config.audit_retention_days
        audit.writers.append(
            AuditWriter(store.engine, retention_days=days, purge_interval_s=config.audit_purge_interval_s)
        )
        if freeze_gc:
            import gc

            gc.collect()
            gc.freeze()
        before = sys.getswitchinterval()
        if switch is not None:
            sys.setswitchinterval(switch)
        try:
            yield
        finally:
            sys.setswitchinterval(before)
        await asyncio.to_thread(audit.writers.pop().close)  # every queued audit event is written
        for step in close:
            step()

    return lifespan


def _install_error_handlers(app: FastAPI) -> None:
    """One error body for every refusal and failure."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        extra: dict[str, Any] = {"headers": exc.headers}
        if exc.field is not None:
            extra["field"] = exc.field
        return _error(request, exc.status, exc.code, exc.message, **extra)

    async def _mapped(request: Request, exc: Exception) -> JSONResponse:
        mapped = api_error_for(exc)
        if mapped is None:
            return await _internal(request, exc)
        if mapped.status == 503:
            _log.warning("database unavailable: %s (503, Retry-After)", type(exc).__name__)
        return await _api_error(request, mapped)

    for kind in mapped_exceptions():  # handled here, not re-raised: the connection stays usable
        app.add_exception_handler(kind, _mapped)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        loc = [str(p) for p in first.get("loc", ()) if p != "body"]
        # the message only: pydantic's "input" (which may hold the query text) is never echoed, and a
        # field is named only when it is one of ours (not an unknown key the client sent)
        known = known_field(AskRequest, loc)
        message = (
            "unknown field" if first.get("type") == "extra_forbidden" else str(first.get("msg", "invalid"))
        )
        return _error(request, 422, "VALIDATION_ERROR", safe_message(message), field=known)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc.__cause__, BodyTooLarge):  # a chunked body went over the limit while read
            return _error(request, 413, "BODY_TOO_LARGE", "the request body is too large")
        codes = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "BODY_TOO_LARGE"}
        code = codes.get(exc.status_code, "HTTP_ERROR")
        message = exc.detail if isinstance(exc.detail, str) and exc.status_code != 422 else code.lower()
        return _error(request, exc.status_code, code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        # The type and the frames only: messages can hold SQL parameters or query text.
        frames = "".join(traceback.format_tb(exc.__traceback__))
        _log.error("unhandled %s in request %s\n%s", type(exc).__name__, _request_id(request), frames)
        return _error(request, 500, "INTERNAL", "internal error")


def _install_health_routes(app: FastAPI, store: ar.Store, audit: _Audit) -> None:
    @app.get("/healthz", summary="The process is up")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", summary="Database reachable, migrations current, embedder loaded")
    async def readyz() -> JSONResponse:
        checks = await asyncio.to_thread(_readiness, store, audit)
        ready = all(checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503
        )


def _readiness(store: ar.Store, audit: _Audit) -> dict[str, bool]:
    checks = {"database": False, "migrations": False, "embedder": False}
    try:
        status = store.status()
        checks["database"] = True
        checks["migrations"] = not status.pending
    except Exception as exc:
        _log.warning("readyz: database check failed: %s", type(exc).__name__)
    try:
        checks["embedder"] = len(store.embedder.embed(["ready"])) == 1
    except Exception as exc:
        _log.warning("readyz: embedder check failed: %s", type(exc).__name__)
    failing = audit.failing
    if failing is not None:  # the audit writer is writing (not stuck on a database that is down)
        checks["audit"] = not failing
    return checks


def _install_middleware(
    app: FastAPI,
    config: ServerConfig,
    telemetry: ar.Telemetry,
    *,
    flow: QueryFlow,
    verifier: TokenVerifier,
    refused: Callable[[int, Any], None],
    guards: list[limits.RequestGuard],
    handoff: Handoff,
) -> None:
    # Inside ObserveMiddleware (added first = innermost): the span, metrics and body limit still apply.
    app.add_middleware(
        SearchFastPath,
        run=flow.run_search_guarded,
        verifier=verifier,
        handoff=handoff,
    )
    app.add_middleware(
        ObserveMiddleware,
        tracer=telemetry.tracer,
        meter=telemetry.meter,
        max_body_bytes=config.max_body_bytes,
    )
    request_limits = limits.RequestLimits.of(config)  # outermost: header limits, 415, 408, in-flight

    def guard(stack: Any) -> limits.RequestGuard:
        guards.append(limits.RequestGuard(stack, request_limits, meter=telemetry.meter, on_refusal=refused))
        return guards[-1]

    limits.install(app, guard)


def build_store(config: ServerConfig) -> ar.Store:
    """The store a server process serves, from its configuration."""
    return ar.Store(
        config.database_url,
        read_urls=config.read_database_urls,  # None: $AGENTRAG_READ_DATABASE_URLS, as Store reads it
        embedder=server_embedder(config.embedder),
        pool_size=config.pool_size,
        max_overflow=0,
    )


def server_embedder(spec: str) -> Any:
    kind, _, arg = spec.partition(":")
    if kind == "local":
        return ar.LocalEmbedder()
    if kind == "fake":
        from agentrag.testing import FakeEmbedder

        return FakeEmbedder(int(arg or 64))
    raise InvalidInputError(f"embedder must be 'local' or 'fake[:DIMENSIONS]', got {spec!r}")


#: The thread switch interval of an ``agentrag serve`` process (the interpreter's default: 5 ms). Past
#: it, a thread that waits for the GIL asks the running one to let go; the searches' threads wait on
#: PostgreSQL and let go by themselves, so under load the thread asked most often was the event loop.
#: At 16 clients, against 5 ms in the same rounds, each setting served from either side (16 runs):
#: +1.9 points of the in-process floor's requests/s (the same code on both sides: -4 to +6); the
#: server's CPU per request -0.09 / -0.27 ms; one client unchanged (-0.05 / +0.06 ms). A small gain.
SERVE_SWITCH_INTERVAL_S = 0.02


def app_from_env() -> FastAPI:
    """The uvicorn factory of every worker process (``agentrag serve``): configuration from ``AGENTRAG_*``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ServerConfig.from_env()
    return create_app(
        build_store(config),
        config=config,
        close_store=True,
        freeze_gc=True,
        switch_interval=SERVE_SWITCH_INTERVAL_S,
    )
