"""``/api/v1/query/{tenant_id}/search`` and ``/ask``: the REST interface's routes over the gateway.

:class:`QueryFlow` is the work of a query request (admission, scope, search, answer, proof, audit),
run in a worker thread; :func:`install` adds its two routes to the app. The search route's plain
case is also served by :class:`~agentrag.server.fastpath.SearchFastPath` with the same
:meth:`QueryFlow.run_search_guarded`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response

import agentrag as ar
from agentrag.server.auth import Principal
from agentrag.server.errors import ApiError, api_error_for
from agentrag.server.fastpath import json_bytes, json_response
from agentrag.server.gateway import Caller, Gateway, Sink, Stream
from agentrag.server.models import AskRequest, ProofResponse, SearchRequest
from agentrag.server.streaming import ClosingStream

__all__ = ["MODEL_MISMATCH_WARNING", "QueryFlow", "install"]

_log = logging.getLogger("agentrag.server")

MODEL_MISMATCH_WARNING = (
    "model_version_match is false: the query was embedded with another model version than the index; "
    "ranking may be degraded"
)


class QueryFlow:
    """A query request's work over the gateway (in a worker thread unless said otherwise).

    Authentication runs on the event loop (no I/O); admission (the tenant + rate-limit statement)
    runs in the same worker thread as the search that follows: one thread hop per request. The
    response body is encoded in the worker thread too, not on the event loop."""

    def __init__(self, gateway: Gateway, llm: Any = None) -> None:
        self.gateway, self.llm = gateway, llm

    def start(
        self, body: SearchRequest, who: Principal, *, generate: bool
    ) -> tuple[Caller, ar.Context, Sink]:
        """Admitted, scoped and searched (the admission beside the search when the process is idle)."""
        gateway = self.gateway

        def work(caller: Caller) -> tuple[ar.Context, Sink]:
            gateway.check(caller, top_k=body.top_k, generate=generate)
            sink = Sink()
            ctx = gateway.context(
                caller,
                body.query_text,
                sink,
                collections=gateway.collections(caller, body.collections),
                llm=self.llm if generate else None,
                top_k=body.top_k,
                mode=body.mode,
                filters=body.filters.to_filters() if body.filters else None,
            )
            return gateway.search(ctx, sink, top_k=body.top_k), sink

        caller, (ctx, sink) = gateway.admitted(who, work)
        return caller, ctx, sink

    def respond(self, ctx: ar.Context, sink: Sink, started: float) -> dict[str, Any]:
        proof = ctx.proof().to_dict()
        self.gateway.audit(sink, started)
        proof["warnings"] = _warnings(proof)
        return proof

    def respond_json(self, ctx: ar.Context, sink: Sink, started: float) -> bytes:
        """``json_bytes(respond(...))``: the same bytes, from the proof itself (:func:`proof_bytes`)."""
        proof = ctx.proof()
        self.gateway.audit(sink, started)
        return proof_bytes(proof)

    # No admission cap beyond the pool: a search never holds a pooled connection while waiting for
    # another (it builds a cold BM25 index or the tsvectors before taking its connection).
    def run_search(self, body: SearchRequest, who: Principal, started: float) -> bytes:
        _, ctx, sink = self.start(body, who, generate=False)
        return self.respond_json(ctx, sink, started)

    def run_search_guarded(self, body: SearchRequest, who: Principal, started: float) -> bytes | ApiError:
        """:meth:`run_search` for the fast path: an ApiError is returned, not raised (no traceback);
        so is the answer to a database outage (503) or a spent budget (504)."""
        try:
            return self.run_search(body, who, started)
        except Exception as exc:
            mapped = api_error_for(exc)
            if mapped is None:
                raise
            return mapped

    def run_ask(self, body: AskRequest, who: Principal, started: float) -> bytes:
        caller, ctx, sink = self.start(body, who, generate=True)
        ctx = self.gateway.answer(ctx, sink, caller)
        return self.respond_json(ctx, sink, started)

    def start_stream(self, body: AskRequest, who: Principal) -> tuple[ar.Context, Sink, Caller]:
        """Admission and search; the retrieval is audited here, before its first event is sent."""
        caller, ctx, sink = self.start(body, who, generate=True)
        self.gateway.audit_streaming(sink)
        return ctx, sink, caller

    async def stream(self, body: AskRequest, who: Principal, started: float) -> ClosingStream:
        """The SSE answer (on the event loop): a stream slot, admission and search, then the body."""
        gateway = self.gateway
        gateway.open_stream()
        try:
            ctx, sink, caller = await asyncio.to_thread(self.start_stream, body, who)
        except BaseException:
            gateway.release_stream()
            raise
        idle = _event("error", {"error": {"code": "STREAM_IDLE", "message": "the answer stalled"}})
        return ClosingStream(
            gateway.stream(ctx, lambda stream: self.sse(stream, sink, caller, started), idle_event=idle),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def sse(self, stream: Stream, sink: Sink, caller: Caller, started: float) -> AsyncIterator[bytes]:
        """``retrieval`` (the proof without generation), ``token`` pieces, ``citations``, ``done``;
        the gateway's :class:`Stream` audits the outcome however it ends."""
        ctx = stream.ctx
        retrieval = ctx.proof().to_dict()
        retrieval["warnings"] = [MODEL_MISMATCH_WARNING] if retrieval["model_version_match"] is False else []
        yield _event("retrieval", retrieval)
        final: ar.Context | None = None
        try:
            async for item in ar.aanswer_stream(ctx, suppress_ungrounded=caller.suppress_ungrounded):
                if isinstance(item, str):
                    yield _event("token", {"text": item})
                else:
                    final = item
            if final is None or final.error is not None:
                raise final.error if final is not None and final.error else RuntimeError("no answer")
            proof = await asyncio.to_thread(self.respond, final, sink, started)
        except Exception as exc:
            stream.fail()
            _log.error("stream failed: %s", type(exc).__name__)
            mapped = api_error_for(exc)
            if mapped is None or mapped.status == 500:
                mapped = ApiError(500, "GENERATION_FAILED", "answer generation failed")
            yield _event("error", {"error": {"code": mapped.code, "message": mapped.message}})
            return
        yield _event("citations", {"query_id": proof["query_id"], "generation": proof["generation"]})
        yield _event("done", {"query_id": proof["query_id"]})


def install(app: FastAPI, flow: QueryFlow, *, errors: dict[int, dict[str, Any]]) -> None:
    """Add ``POST /api/v1/query/{tenant_id}/search`` and ``/ask`` (``errors``: their documented refusals)."""
    gateway = flow.gateway

    async def authenticated(tenant_id: str, request: Request) -> Principal:
        return gateway.authenticate(request.headers.get("authorization"), tenant_id)

    @app.post(
        "/api/v1/query/{tenant_id}/search",
        response_model=ProofResponse,
        responses=errors,  # type: ignore[arg-type]
        summary="Search the tenant's documents; returns the retrieval proof",
    )
    async def search(body: SearchRequest, who: Principal = Depends(authenticated)) -> Response:  # noqa: B008
        started = time.perf_counter()
        return json_response(await asyncio.to_thread(flow.run_search, body, who, started))

    @app.post(
        "/api/v1/query/{tenant_id}/ask",
        response_model=ProofResponse,
        responses={**errors, 200: {"content": {"text/event-stream": {}}}},  # type: ignore[dict-item]
        summary="Search, then answer citing only retrieved chunks (SSE with Accept: text/event-stream)",
    )
    async def ask(
        request: Request,
        body: AskRequest,
        who: Principal = Depends(authenticated),  # noqa: B008
    ) -> Any:
        started = time.perf_counter()
        if "text/event-stream" not in request.headers.get("accept", ""):
            return json_response(await asyncio.to_thread(flow.run_ask, body, who, started))
        return await flow.stream(body, who, started)


def _event(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


_FIELDS: dict[type, tuple[str, ...]] = {}  # a Proof's field names, in declaration order


def proof_bytes(proof: Any) -> bytes:
    """``proof.to_dict()`` plus its ``warnings``, as JSON: the same bytes as ``json_bytes`` of that dict.

    Built shallow for orjson, which encodes a dataclass as an object of its fields in declaration
    order, tuples as arrays: the chunks and the generation stay the frozen dataclasses ``to_dict``
    would copy field by field (~25 us a response of ten chunks); only ``skipped_collections``, whose
    JSON shape is not its dataclass field's, is converted. Anything orjson refuses goes the
    ``to_dict`` way (the stdlib's turn)."""
    import orjson

    names = _FIELDS.get(type(proof))
    if names is None:
        names = _FIELDS[type(proof)] = tuple(f.name for f in dataclasses.fields(proof))
    body = {name: getattr(proof, name) for name in names}
    body["skipped_collections"] = [{"collection": c, "reason": r} for c, r in proof.skipped_collections]
    body["warnings"] = _warnings(body)
    try:
        return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:
        full = proof.to_dict()
        full["warnings"] = body["warnings"]
        return json_bytes(full)


def _warnings(proof: dict[str, Any]) -> list[str]:
    """The response's warnings: a model version mismatch, each degradation (with its reason when
    collections were skipped: which ones and why)."""
    warnings = [MODEL_MISMATCH_WARNING] if proof["model_version_match"] is False else []
    return (
        warnings
        + [f"degraded: {d}" for d in proof["degradations"]]
        + [f"not searched: {s['collection']} ({s['reason']})" for s in proof["skipped_collections"]]
    )
