"""Request limits: what one client may hold, and refusals answered (and counted) at the edge.

Two layers, both configured from :class:`~agentrag.server.config.ServerConfig`:

* :class:`agentrag.server.protocol.GuardedHttpToolsProtocol` (``agentrag serve``'s uvicorn
  protocol): 414 / 431 for an over-long request line or head, 408 for a head that does not
  arrive within ``header_timeout_s``; the idle keep-alive timeout is uvicorn's (``keep_alive_s``).
* :class:`RequestGuard`, the outermost ASGI layer (outside FastAPI's own error middleware, see
  :func:`install`), for every server: the same header limits (431), ``415`` for a body that is
  not JSON on the query routes, ``408`` when the body does not arrive within ``body_timeout_s``,
  a bound of ``send_timeout_s`` on each write of a streamed response (SSE) to a client that stops
  reading, and at most
  ``max_in_flight`` requests at once (beyond: ``503 OVERLOADED`` with ``Retry-After``).
  An exception raised after the response was completely sent is logged and swallowed, so the
  keep-alive connection stays usable.

Every refusal (a 4xx of the list :data:`REFUSALS`, or an overload 503) is counted in the
``agentrag.server.refused`` metric (by status and ``http.route``: the matched route's template, or
``(before routing)`` for what the guard refuses itself) and handed to ``on_refusal`` (the server
audits it: status, route, tenant from the path; never a body or a token). A refusal of the HTTP
protocol layer, before any request exists (414 / 431 / 408 on the request head), reaches the same
counter through :func:`head_refused`, with the fixed route :data:`HEAD_ROUTE` (nothing of the
request was parsed to name it); it is not audited (no tenant is known, and no path is trusted).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "HEAD_ROUTE",
    "REFUSALS",
    "RequestGuard",
    "RequestLimits",
    "error_body",
    "head_refused",
    "install",
    "tenant_of",
]

_log = logging.getLogger("agentrag.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]

#: The statuses that are refusals of the client's request (counted and audited).
REFUSALS = frozenset({400, 401, 403, 408, 413, 414, 415, 422, 429, 431})
#: The ``http.route`` of a refusal at the request-head stage (no route is known yet).
HEAD_ROUTE = "(request head)"
_UNROUTED = "(before routing)"  # refused by the guard itself (431, 415, 503), or no route matched
#: The counter of this process's serving guard (the latest :class:`RequestGuard` with a meter).
_HEAD_SINK: list[weakref.WeakMethod[Callable[[int], None]]] = []
_QUERY_PATH = re.compile(r"/api/v1/query/([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})/[a-z]+")
_JSON = re.compile(r"application/(?:[a-z0-9.+-]*\+)?json", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RequestLimits:
    max_header_count: int = 100
    max_header_bytes: int = 16384
    max_request_line_bytes: int = 8192
    header_timeout_s: float = 10.0
    body_timeout_s: float = 10.0
    send_timeout_s: float = 30.0
    max_in_flight: int = 1000

    @classmethod
    def of(cls, config: Any) -> RequestLimits:
        return cls(
            max_header_count=config.max_header_count,
            max_header_bytes=config.max_header_bytes,
            max_request_line_bytes=config.max_request_line_bytes,
            header_timeout_s=config.header_timeout_s,
            body_timeout_s=config.body_timeout_s,
            send_timeout_s=config.send_timeout_s,
            max_in_flight=config.max_in_flight,
        )


def tenant_of(path: str) -> str | None:
    """The tenant id of a query route's path (only a well-formed id), else None."""
    matched = _QUERY_PATH.fullmatch(path)
    return matched.group(1) if matched else None


def head_refused(status: int) -> None:
    """Count a refusal of the HTTP protocol layer (before an ASGI request exists) in the
    ``agentrag.server.refused`` metric of this process's server, under :data:`HEAD_ROUTE`."""
    sink = _HEAD_SINK[0]() if _HEAD_SINK else None
    if sink is None:
        return
    try:
        sink(status)
    except Exception as exc:  # bookkeeping never fails the protocol
        _log.warning("head refusal count failed: %s", type(exc).__name__)


def error_body(code: str, message: str, request_id: str | None) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "request_id": request_id}}).encode()


async def _answer(send: Any, status: int, code: str, message: str, *, retry_after: int | None = None) -> None:
    body = error_body(code, message, uuid.uuid4().hex)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    if status in (408, 413, 431):  # the rest of the request was not read: the connection ends
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RequestGuard:
    """The outermost ASGI layer (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        limits: RequestLimits,
        *,
        meter: Any = None,
        on_refusal: Callable[[int, Scope], None] | None = None,
    ) -> None:
        self.app = app
        self.limits = limits
        self.on_refusal = on_refusal
        self.in_flight = 0
        self.refused = (
            meter.create_counter(
                "agentrag.server.refused", unit="{request}", description="Requests refused, by status"
            )
            if meter is not None
            else None
        )
        if self.refused is not None:
            _HEAD_SINK[:] = [weakref.WeakMethod(self._count_head)]

    def _count_head(self, status: int) -> None:
        if self.refused is not None:
            self.refused.add(1, {"http.response.status_code": status, "http.route": HEAD_ROUTE})

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        state = {"status": 0, "started": False, "complete": False, "answered": False, "streaming": False}

        async def tracked_send(message: Message) -> None:
            if state["answered"]:  # the guard answered (408): the app's own answer is dropped
                return
            if message["type"] == "http.response.start":
                state["status"], state["started"] = int(message["status"]), True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["complete"] = True
            if message["type"] == "http.response.body":
                state["streaming"] = bool(message.get("more_body", False)) or state["streaming"]
            if not state["streaming"]:  # one small body: written to the transport's buffer at once
                return await send(message)
            try:  # a stream (SSE): a client that stops reading must not hold it open
                async with asyncio.timeout(self.limits.send_timeout_s):
                    await send(message)
            except TimeoutError:
                raise OSError("the client stopped reading (send timeout)") from None

        try:
            refusal = self._refuse_early(scope)
            if refusal is not None:
                status, code, message = refusal
                retry = 1 if status == 503 else None
                await _answer(tracked_send, status, code, message, retry_after=retry)
                return
            self.in_flight += 1
            try:
                await self.app(scope, self._timed_receive(receive, tracked_send, state), tracked_send)
            except Exception as exc:
                if not (state["complete"] or state["answered"]):
                    raise
                # answered already (FastAPI's error middleware re-raises after its 500): keep the
                # connection; the error was logged by that middleware
                _log.debug("exception after a complete response: %s", type(exc).__name__)
            finally:
                self.in_flight -= 1
        finally:
            self._count(state["status"], scope)

    def _refuse_early(self, scope: Scope) -> tuple[int, str, str] | None:
        limits = self.limits
        headers = scope.get("headers") or []
        if len(headers) > limits.max_header_count:
            return 431, "HEADERS_TOO_LARGE", "too many request headers"
        if sum(len(k) + len(v) + 4 for k, v in headers) > limits.max_header_bytes:
            return 431, "HEADERS_TOO_LARGE", "the request headers are too large"
        if self.in_flight >= limits.max_in_flight:
            return 503, "OVERLOADED", "the server is at its request limit; retry later"
        if scope.get("method") == "POST" and tenant_of(scope.get("path", "")) is not None:
            content_type = next((v for k, v in headers if k == b"content-type"), b"").decode("latin-1")
            if not _JSON.fullmatch(content_type.split(";", 1)[0].strip()):
                return 415, "UNSUPPORTED_MEDIA_TYPE", "the request body must be application/json"
        return None

    def _timed_receive(self, receive: Any, send: Any, state: dict[str, Any]) -> Any:
        """``receive`` with the body timeout: when it passes before the body is read, 408 is sent
        (connection: close) and the app gets a disconnect; whatever it answers then is dropped."""
        deadline = time.monotonic() + self.limits.body_timeout_s
        done = {"body": False}

        async def timed() -> Message:
            if done["body"]:  # the body is read: what follows is a disconnect, however late
                return await receive()
            left = deadline - time.monotonic()
            try:
                async with asyncio.timeout(max(left, 0.001)):
                    message = await receive()
            except TimeoutError:
                if not state["started"]:
                    await _answer(send, 408, "REQUEST_TIMEOUT", "the request body did not arrive in time")
                state["answered"] = done["body"] = True
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                done["body"] = True
            return message

        return timed

    def _count(self, status: int, scope: Scope) -> None:
        refused = status in REFUSALS or (status == 503 and self.in_flight >= self.limits.max_in_flight)
        if not refused:
            return
        if self.refused is not None:
            route = getattr(scope.get("route"), "path", None) or _UNROUTED
            self.refused.add(1, {"http.response.status_code": status, "http.route": route})
        if self.on_refusal is not None:
            try:
                self.on_refusal(status, scope)
            except Exception as exc:  # bookkeeping never fails a request
                _log.warning("refusal audit failed: %s", type(exc).__name__)


def install(app: Any, wrap: Callable[[ASGIApp], ASGIApp]) -> None:
    """Make ``wrap(stack)`` the outermost layer of a Starlette/FastAPI ``app``: outside its
    ServerErrorMiddleware, which re-raises every unhandled exception after answering 500."""
    build = app.build_middleware_stack

    def built() -> ASGIApp:
        return wrap(build())

    app.build_middleware_stack = built
