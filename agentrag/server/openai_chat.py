"""The OpenAI-compatible chat API of ``agentrag serve``: ``GET /v1/models``, ``POST /v1/chat/completions``.

For chat front ends and SDKs that speak the OpenAI API (Open WebUI, LibreChat, the ``openai``
package): the API key is the service's JWT (``Authorization: Bearer``), whose tenant claim names
the tenant. A model is a collection (``agentrag/support``), several joined by ``+``
(``agentrag/support+api``), or ``agentrag`` (the default collections, else every one).

The last user message is the question and the earlier turns its history: ``new -> condense ->
search -> rerank -> answer``, the library's chat pipeline (the configured LLM, or the offline
extractive answer). The reply's text carries numbered citations (``[1]``) and a "Sources" list;
the extra ``agentrag`` field carries the structured ``sources``, each sentence's
``supporting_spans``, ``grounded``, ``confidence``, ``abstained`` (the knowledge base does not
answer: the text says so) and the retrieval ``proof``.
``stream: true`` sends ``chat.completion.chunk`` events, the ``agentrag`` field on the last one,
then ``data: [DONE]``. Errors are OpenAI error objects (``{"error": {"message", "type",
"code", "param"}}``) with the HTTP status of the service's own routes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

import agentrag as ar
from agentrag.server import answering
from agentrag.server.errors import ApiError, api_error_for
from agentrag.server.gateway import Caller, Gateway, Refusal, Sink, Stream
from agentrag.server.models import FiltersIn, Mode

__all__ = ["ChatRequest", "document_schema", "install"]

MODEL_PREFIX = "agentrag"
MAX_MESSAGES = 64
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error"}
_TYPES |= {404: "not_found_error", 422: "invalid_request_error", 429: "rate_limit_error", 500: "api_error"}
_CODES = {"VALIDATION_ERROR": "invalid_top_k"}  # the gateway's codes this API names its own way


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str
    text: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(p.text or "" for p in self.content if p.type == "text")
        return self.content or ""


class ChatRequest(BaseModel):
    """The fields of an OpenAI chat request that matter here; the others (temperature, ...) are ignored."""

    model_config = ConfigDict(extra="ignore")
    model: str = Field(min_length=1, max_length=300)
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    # extensions of the OpenAI request (ignored by other servers): retrieval options
    top_k: int = Field(default=5, ge=1, le=50, description="chunks retrieved")
    filters: FiltersIn | None = None
    mode: Mode = "hybrid"

    @field_validator("messages")
    @classmethod
    def _last_is_user(cls, value: list[Message]) -> list[Message]:
        if value[-1].role != "user" or not value[-1].text().strip():
            raise ValueError("the last message must be a non-empty user message")
        for message in value:
            if "\x00" in message.text():
                raise ValueError("messages must not contain NUL bytes")
        return value


def document_schema(schema: dict[str, Any]) -> None:
    """Declare :class:`ChatRequest` as the request body of ``POST /v1/chat/completions`` in ``schema``
    (the route reads its body itself, to answer a bad one with an OpenAI error object)."""
    body = ChatRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(body.pop("$defs", {}))
    components["ChatRequest"] = body
    operation = schema.get("paths", {}).get("/v1/chat/completions", {}).get("post")
    if operation is not None:
        content = {"application/json": {"schema": {"$ref": "#/components/schemas/ChatRequest"}}}
        operation["requestBody"] = {"required": True, "content": content}


def _collections_of(model: str, known: set[str]) -> list[str] | None:
    if model == MODEL_PREFIX:
        return None
    prefix = MODEL_PREFIX + "/"
    if not model.startswith(prefix):
        raise Refusal(
            404, "model_not_found", f"unknown model; models are {prefix}<collection> (see /v1/models)"
        )
    names = [n for n in model[len(prefix) :].split("+") if n]
    if not names or any(n not in known for n in names):
        raise Refusal(404, "model_not_found", "unknown model: no such collection (see GET /v1/models)")
    return names


def _error(status: int, code: str, message: str, param: str | None = None, headers: Any = None) -> Any:
    from fastapi.responses import JSONResponse

    body = {
        "error": {"message": message, "type": _TYPES.get(status, "api_error"), "code": code, "param": param}
    }
    return JSONResponse(body, status_code=status, headers=headers)


def _extra(ctx: ar.Context, order: list[str]) -> dict[str, Any]:
    proof = ctx.proof().to_dict()
    generation = proof.get("generation") or {}
    return {
        "query_id": proof["query_id"],
        "question": proof.get("condensed_question") or proof.get("original_question"),
        "sources": answering.sources(proof, order),
        "supporting_spans": answering.supporting_spans(
            generation.get("answer"), proof["chunks"], generation.get("support") or ()
        ),
        "grounded": generation.get("grounded"),
        "abstained": generation.get("mode") == "abstained",
        "confidence": generation.get("confidence"),
        "proof": proof,
    }


def _footer(order_sources: list[dict[str, Any]]) -> str:
    if not order_sources:
        return ""
    lines = [f"[{s['n']}] {s['source']} ({s['collection']})" for s in order_sources]
    return "\n\nSources:\n" + "\n".join(lines)


def install(app: Any, *, gateway: Gateway, llm: Any) -> None:
    """Add ``/v1/models`` and ``/v1/chat/completions`` to ``app``: an adapter of the OpenAI protocol
    over the gateway (every call authenticated, admitted, scoped to the token's tenant and principal,
    audited)."""

    def known_collections(caller: Caller) -> set[str]:
        """The tenant's own collections and the shared ones: never another tenant's names."""
        return {c.name for c in gateway.visible(caller)}

    def listed(authorization: str | None) -> list[str]:
        return sorted(known_collections(gateway.enter(authorization)))

    def prepare(body: ChatRequest, authorization: str | None) -> tuple[Caller, ar.Context, Sink]:
        caller = gateway.enter(authorization)
        try:
            gateway.check(caller, top_k=body.top_k, generate=True)
        except Refusal as exc:
            raise Refusal(exc.status, _CODES.get(exc.code, exc.code), exc.message, exc.headers) from None
        names = _collections_of(body.model, known_collections(caller))
        *history, last = body.messages
        sink = Sink()
        ctx = gateway.context(
            caller,
            last.text(),
            sink,
            collections=gateway.collections(caller, names),
            llm=llm,
            top_k=body.top_k,
            mode=body.mode,
            filters=body.filters.to_filters() if body.filters else None,
            history=[{"role": m.role, "content": m.text()} for m in history],
        )
        ctx = gateway.search(ctx, sink, top_k=body.top_k, condense=bool(history), cut=False)
        # the library's chat pipeline (new | condense | search | rerank | answer): the same candidates
        return caller, ctx | ar.rerank(), sink

    def complete(caller: Caller, ctx: ar.Context, sink: Sink, started: float) -> dict[str, Any]:
        try:
            ctx = gateway.answer(ctx, sink, caller)
        except Refusal:
            raise Refusal(500, "generation_failed", "answer generation failed") from None
        text, order = answering.numbered(ctx.answer_text)
        extra = _extra(ctx, order)
        gateway.audit(sink, started)
        return {"content": text + _footer(extra["sources"]), "agentrag": extra}

    def streamed(caller: Caller, ctx: ar.Context, sink: Sink, body: ChatRequest, started: float) -> Any:
        from agentrag.server.streaming import ClosingStream

        ident, created = f"chatcmpl-{ctx.query_id}", int(time.time())

        def events(stream: Stream) -> AsyncIterator[bytes]:
            return _stream(stream, caller, sink, gateway, body.model, ident, created, started)

        idle = _sse_error("the answer stalled", "stream_idle")
        return ClosingStream(
            gateway.stream(ctx, events, idle_event=idle),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @app.get("/v1/models", summary="OpenAI-compatible: one model per collection", tags=["openai"])
    async def models(request: Request) -> Any:
        try:
            names = await asyncio.to_thread(listed, request.headers.get("authorization"))
        except Exception as exc:  # a refusal, or the database down (503) / the budget spent (504)
            mapped = api_error_for(exc)
            if mapped is None:
                raise
            return _refused(mapped)
        created = int(time.time())
        data = [{"id": MODEL_PREFIX, "object": "model", "created": created, "owned_by": "agentrag"}]
        data += [
            {"id": f"{MODEL_PREFIX}/{n}", "object": "model", "created": created, "owned_by": "agentrag"}
            for n in names
        ]
        return {"object": "list", "data": data}

    @app.post(
        "/v1/chat/completions",
        summary="OpenAI-compatible chat: condense, retrieve, answer with numbered citations",
        tags=["openai"],
    )
    async def chat_completions(request: Request) -> Any:
        started = time.perf_counter()
        authorization = request.headers.get("authorization")
        try:
            gateway.authenticate(authorization)  # 401 / 403 before the body is read
            try:
                body = ChatRequest.model_validate(json.loads(await request.body()))
            except (ValidationError, ValueError) as exc:
                param = None
                if isinstance(exc, ValidationError) and exc.errors():
                    param = ".".join(str(p) for p in exc.errors()[0]["loc"]) or None
                    message = str(exc.errors()[0]["msg"])
                else:
                    message = "the body is not JSON"
                return _error(400, "invalid_request", message, param)
            if body.stream:
                gateway.open_stream()
                try:
                    caller, ctx, sink = await asyncio.to_thread(prepare, body, authorization)
                    gateway.audit_streaming(sink)  # before the first byte leaves
                except BaseException:
                    gateway.release_stream()
                    raise
                return streamed(caller, ctx, sink, body, started)
            caller, ctx, sink = await asyncio.to_thread(prepare, body, authorization)
            result = await asyncio.to_thread(complete, caller, ctx, sink, started)
        except Exception as exc:  # a refusal, or the database down (503) / the budget spent (504)
            mapped = api_error_for(exc)
            if mapped is None:
                raise
            return _refused(mapped)
        return {
            "id": f"chatcmpl-{ctx.query_id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": result["content"]},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            "agentrag": result["agentrag"],
        }


def _refused(exc: ApiError) -> Any:
    code = "invalid_request" if exc.code == "VALIDATION_ERROR" else exc.code
    return _error(exc.status, code, exc.message, exc.field, headers=exc.headers)


def _sse_error(message: str, code: str) -> bytes:
    error = {"message": message, "type": "api_error", "code": code}
    return f"data: {json.dumps({'error': error})}\n\n".encode()


async def _stream(
    stream: Stream,
    caller: Caller,
    sink: Sink,
    gateway: Gateway,
    model: str,
    ident: str,
    created: int,
    started: float,
) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    numbering = answering.MarkerNumbering()
    final: ar.Context | None = None
    try:
        async for item in ar.aanswer_stream(stream.ctx, suppress_ungrounded=caller.suppress_ungrounded):
            if isinstance(item, str):
                text = numbering.feed(item)
                if text:
                    yield chunk({"content": text})
            else:
                final = item
        if final is None or final.error is not None:
            raise RuntimeError("answer generation failed")
    except Exception:
        stream.fail()
        yield _sse_error("answer generation failed", "generation_failed")
        return
    tail = numbering.flush()
    # the checked answer's own numbering decides the sources (suppress_ungrounded may drop some)
    _, order = answering.numbered(final.answer_text)
    extra = await asyncio.to_thread(_extra, final, order)
    await asyncio.to_thread(gateway.audit, sink, started)  # the generation's events, before they leave
    footer = _footer(extra["sources"])
    if tail or footer:
        yield chunk({"content": tail + footer})
    yield chunk({}, "stop", agentrag=extra)
    yield b"data: [DONE]\n\n"
