"""``POST /api/v1/query/{tenant_id}/search`` served without FastAPI's routing, and JSON encoding.

:class:`SearchFastPath` is added by :func:`agentrag.server.app.create_app` inside
``ObserveMiddleware``; :func:`json_bytes` / :func:`json_response` encode every JSON body.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from fastapi.responses import JSONResponse, Response

from agentrag.server.auth import TokenVerifier, authorize
from agentrag.server.errors import ApiError
from agentrag.server.models import SearchRequest

__all__ = ["SearchFastPath", "json_bytes", "json_response"]

_SEARCH_PATH = re.compile(r"/api/v1/query/([^/]+)/search")
_JSON_TYPE = (b"content-type", b"application/json")


class SearchFastPath:
    """``POST /api/v1/query/{tenant_id}/search`` on its successful path, without FastAPI's routing.

    FastAPI's request machinery (routing, dependency solving, body reading, validation) was ~0.3 ms of
    the event loop's ~0.7 ms of CPU per search (measured in one process by the retired
    benchmarks/serve_cpu.py: benchmarks/HISTORY.md, serving). This middleware serves a search
    request itself when it is the plain case: ``application/json`` body, a bearer token that
    :func:`authorize` accepts for the path's tenant, and a body that parses and validates as
    :class:`SearchRequest` exactly as FastAPI would
    (``json.loads``, then the model's Python validation). The work is the route's own
    (``run_search``: admission, search, proof, audit, one thread hop). Anything else (another route,
    another content type, a bad token, an invalid body) goes to the FastAPI app with the body
    replayed, so every refusal keeps its one error body and the OpenAPI schema stays FastAPI's.
    Errors raised by the work itself (429, 404, ...) are answered with the same error body the
    app's handlers write; an unexpected exception propagates like the app's own.
    """

    def __init__(self, app: Any, *, run: Any, verifier: TokenVerifier, handoff: Any = None) -> None:
        self.app = app
        self.run = run
        self.handoff = handoff  # a Handoff: the worker threads (None: asyncio.to_thread)
        self.verifier = verifier
        self.route: Any = None  # the FastAPI route, for ObserveMiddleware's http.route

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            return await self.app(scope, receive, send)
        matched = _SEARCH_PATH.fullmatch(scope["path"])
        if matched is None:
            return await self.app(scope, receive, send)
        authorization = content_type = None
        for key, value in scope["headers"]:
            if key == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
            elif key == b"content-type" and content_type is None:
                content_type = value.decode("latin-1")
        if content_type is None or content_type.split(";", 1)[0].strip().lower() != "application/json":
            return await self.app(scope, receive, send)
        messages: list[dict[str, Any]] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # a disconnect while reading: FastAPI's way
                return await self.app(scope, _replay(messages, receive), send)
            if not message.get("more_body", False):
                break
        raw = b"".join(m.get("body", b"") for m in messages)
        tenant_id = matched.group(1)
        try:
            who = authorize(self.verifier, authorization, tenant_id)
            body = SearchRequest.model_validate(json.loads(raw))
        except Exception:  # any refusal: the app answers it, with its one error body
            return await self.app(scope, _replay(messages, receive), send)
        if self.route is None:
            self.route = _route_of(scope, "/api/v1/query/{tenant_id}/search")
        scope["route"], scope["path_params"] = self.route, {"tenant_id": tenant_id}
        started = time.perf_counter()
        if self.handoff is not None:
            result = await self.handoff.run(self.run, body, who, started)
        else:
            result = await asyncio.to_thread(self.run, body, who, started)
        if isinstance(result, ApiError):
            state = scope.get("state") or {}
            answer = JSONResponse(result.body(state.get("request_id")), result.status, result.headers)
            await answer(scope, receive, send)
            return
        # what ``json_response(result)`` sends, without building the Response: the same two messages
        headers = [(b"content-length", str(len(result)).encode("latin-1")), _JSON_TYPE]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": result})


def _replay(messages: list[dict[str, Any]], receive: Any) -> Any:
    """A ``receive`` that gives the ``messages`` already read again, in order, then the original's."""
    pending = list(messages)

    async def replay() -> Any:
        return pending.pop(0) if pending else await receive()

    return replay


def _route_of(scope: dict[str, Any], path: str) -> Any:
    app = scope.get("app")
    for route in getattr(app, "routes", ()):
        if getattr(route, "path", None) == path:
            return route
    return None


def json_bytes(content: Any) -> bytes:
    """``content`` as compact UTF-8 JSON (orjson: several times faster than ``json`` on a proof)."""
    import orjson

    try:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:  # a type orjson does not know (JSONEncodeError is a TypeError): the stdlib's turn
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def json_response(body: bytes) -> Response:
    return Response(body, media_type="application/json")
