"""One server span and the request metrics per request, the body-size limit, and a file exporter.

:class:`ObserveMiddleware` (pure ASGI) opens a SERVER span named ``{method} {route}`` with
the OpenTelemetry HTTP semantic-convention attributes (``http.request.method``,
``http.route``, ``url.path``, ``url.scheme``, ``http.response.status_code``,
``server.address``, ``server.port``, ``error.type``), makes it current for the handler (the
pipeline's step spans become its children), and records ``http.server.request.duration``
(seconds; its count is the request count) and ``http.server.active_requests``. An incoming
W3C ``traceparent`` is honoured. It also refuses bodies over ``max_body_bytes`` with 413,
from ``Content-Length`` or while reading a chunked body. Neither the body nor the query
string is ever recorded.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

__all__ = ["BodyTooLarge", "JsonLinesExporter", "ObserveMiddleware", "error_response_bytes"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTooLarge(Exception):
    """The request body is over the limit (raised from ``receive``; answered with 413)."""


def error_response_bytes(code: str, message: str, request_id: str | None) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "request_id": request_id}}).encode()


class ObserveMiddleware:
    def __init__(self, app: ASGIApp, *, tracer: Any, meter: Any, max_body_bytes: int) -> None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.app = app
        self.tracer = tracer
        self.propagator = TraceContextTextMapPropagator()
        self.max_body_bytes = max_body_bytes
        self.duration = meter.create_histogram(
            "http.server.request.duration", unit="s", description="Duration of HTTP server requests"
        )
        # in flight per (method, scheme), kept here on the event loop and read by the meter at each
        # collection: two synchronous up-down records a request cost ~25 us of the loop's CPU
        self.in_flight: dict[tuple[str, str], int] = {}
        meter.create_observable_up_down_counter(
            "http.server.active_requests",
            callbacks=[self._observe_in_flight],
            unit="{request}",
            description="HTTP requests in flight",
        )

    def _observe_in_flight(self, _options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        return [
            Observation(count, {"http.request.method": method, "url.scheme": scheme})
            for (method, scheme), count in list(self.in_flight.items())
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from opentelemetry import context as otel_context
        from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

        method = scope["method"]
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        request_id = uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        parent = self.propagator.extract(headers)
        server = scope.get("server") or (None, None)
        attributes = {
            "http.request.method": method,
            "url.path": scope.get("path", ""),
            "url.scheme": scope.get("scheme", "http"),
            "network.protocol.version": scope.get("http_version", "1.1"),
            "server.address": str(server[0]),
            "server.port": int(server[1] or 0),
            "agentrag.request_id": request_id,
        }
        span = self.tracer.start_span(method, context=parent, kind=SpanKind.SERVER, attributes=attributes)
        token = otel_context.attach(set_span_in_context(span))
        started = time.perf_counter()
        status = {"code": 500, "sent": False}
        active = (method, attributes["url.scheme"])
        self.in_flight[active] = self.in_flight.get(active, 0) + 1

        try:
            declared = int(headers.get("content-length", "0") or 0)
        except ValueError:
            declared = -1
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
                status["sent"] = True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            if declared > self.max_body_bytes or declared < 0:
                await _send_error(tracking_send, 413 if declared > 0 else 400, request_id, declared)
            else:
                try:
                    await self.app(scope, limited_receive, tracking_send)
                except BodyTooLarge:
                    if not status["sent"]:
                        await _send_error(tracking_send, 413, request_id, declared)
        except Exception as exc:
            span.set_attribute("error.type", type(exc).__name__)
            raise
        finally:
            route = scope.get("route")
            path_format = getattr(route, "path_format", None) or getattr(route, "path", None)
            code = status["code"]
            name = f"{method} {path_format}" if path_format else method
            span.update_name(name)
            if path_format:
                span.set_attribute("http.route", path_format)
            span.set_attribute("http.response.status_code", code)
            tenant = (scope.get("path_params") or {}).get("tenant_id")
            if isinstance(tenant, str):
                span.set_attribute("agentrag.tenant", tenant)
            if code >= 500:
                span.set_status(Status(StatusCode.ERROR))
                span.set_attribute("error.type", str(code))
            metric_attrs = {
                "http.request.method": method,
                "http.response.status_code": code,
                "url.scheme": attributes["url.scheme"],
                **({"http.route": path_format} if path_format else {}),
            }
            self.duration.record(time.perf_counter() - started, metric_attrs)
            self.in_flight[active] -= 1
            span.end()
            otel_context.detach(token)


async def _send_error(send: Send, status: int, request_id: str, declared: int) -> None:
    if status == 413:
        body = error_response_bytes("BODY_TOO_LARGE", "the request body is too large", request_id)
    else:
        body = error_response_bytes("BAD_REQUEST", "invalid Content-Length", request_id)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class JsonLinesExporter:
    """Span and metric exporter writing one JSON object per line to a file (``--trace-file``).

    For tests and local debugging: production deployments install their own OpenTelemetry
    SDK exporters around :func:`agentrag.server.create_app`. A metric point is written when it
    changed since its last line (an idle server writes nothing), and the file is rotated to
    ``<path>.1`` once it reaches ``max_bytes``.
    """

    def __init__(self, path: str, *, max_bytes: int = 10_000_000) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._last: dict[str, str] = {}  # metric point -> its last written line (unchanged: not again)
        # metric-exporter protocol attributes
        from opentelemetry.sdk.metrics.export import AggregationTemporality

        self._preferred_temporality: dict[type, AggregationTemporality] = {}
        self._preferred_aggregation: dict[type, Any] = {}

    def _write(self, lines: Sequence[dict[str, Any]]) -> None:
        if not lines:
            return
        with self._lock:
            try:
                if os.path.getsize(self.path) >= self.max_bytes:
                    os.replace(self.path, self.path + ".1")  # one old file kept
                    self._last.clear()
            except OSError:
                pass  # no file yet
            with open(self.path, "a", encoding="utf-8") as out:
                for line in lines:
                    out.write(json.dumps(line, default=str) + "\n")

    # SpanExporter
    def export(self, items: Any, timeout_millis: float = 10_000, **_: Any) -> Any:
        from opentelemetry.sdk.trace import ReadableSpan

        if isinstance(items, Sequence) and (not items or isinstance(items[0], ReadableSpan)):
            from opentelemetry.sdk.trace.export import SpanExportResult

            self._write(
                [
                    {
                        "kind": "span",
                        "name": s.name,
                        "span_kind": s.kind.name,
                        "trace_id": f"{s.context.trace_id:032x}",
                        "span_id": f"{s.context.span_id:016x}",
                        "parent_id": f"{s.parent.span_id:016x}" if s.parent else None,
                        "status": s.status.status_code.name,
                        "attributes": dict(s.attributes or {}),
                        "events": [
                            {"name": e.name, "attributes": dict(e.attributes or {})} for e in s.events
                        ],
                    }
                    for s in items
                ]
            )
            return SpanExportResult.SUCCESS
        from opentelemetry.sdk.metrics.export import MetricExportResult

        lines = []
        for resource_metrics in items.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    for point in metric.data.data_points:
                        lines.append(
                            {
                                "kind": "metric",
                                "name": metric.name,
                                "attributes": dict(point.attributes or {}),
                                "count": getattr(point, "count", None),
                                "sum": getattr(point, "sum", None),
                                "value": getattr(point, "value", None),
                            }
                        )
        changed = []
        for line in lines:  # a quiet server exports the same points every interval: written once
            key = json.dumps([line["name"], line["attributes"]], sort_keys=True, default=str)
            encoded = json.dumps(line, sort_keys=True, default=str)
            if self._last.get(key) != encoded:
                self._last[key] = encoded
                changed.append(line)
        self._write(changed)
        return MetricExportResult.SUCCESS

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        return None

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True
