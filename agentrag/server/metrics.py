"""``GET /metrics``: the OpenTelemetry metrics the service already records, in Prometheus text format.

:func:`server_telemetry` builds the service's providers when the application gives none: a
``MeterProvider`` whose readers are an in-memory reader (what ``/metrics`` renders on each scrape)
and, with ``--trace-file``, the JSON-lines exporter. :class:`Exposition` renders the reader's
cumulative points in the text format (version 0.0.4), plus what no instrument records: the
database pool gauges (read at scrape time) and the rate-limit refusals (the 429s of the request
histogram).

Labels come from an allow-list of attribute keys (method, route template, status, mode, step,
model, error type); any other attribute is dropped, so neither a question, a tenant's name nor a
concrete path with ids in it can reach a label.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["CONTENT_TYPE", "Exposition", "server_telemetry"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

HTTP_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
# OpenTelemetry attribute -> Prometheus label; nothing else becomes a label
LABELS: dict[str, str] = {
    "http.request.method": "method",
    "http.route": "route",
    "http.response.status_code": "status",
    "url.scheme": "scheme",
    "retriever_type": "mode",
    "step": "step",
    "error_type": "error_type",
    "model": "model",
    "purpose": "purpose",
    "gen_ai.token.type": "token_type",
}
_NAME = re.compile(r"[^a-zA-Z0-9_]")


def server_telemetry(
    trace_file: str | None, *, metrics: bool = True, trace_max_bytes: int = 10_000_000
) -> tuple[Any, list[Any], Any]:
    """``(telemetry, providers to shut down, the /metrics reader or None)`` for a service given no
    telemetry. Neither a trace file nor metrics: the global providers (no-op unless installed). The
    meter provider's histograms and counters record in batches (:mod:`agentrag.server.deferred`)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

    import agentrag as ar
    from agentrag.server.deferred import BatchingMeterProvider

    if not trace_file and not metrics:
        return ar.Telemetry(), [], None
    reader = InMemoryMetricReader() if metrics else None
    readers: list[Any] = [reader] if reader is not None else []
    tracer_provider = None
    if trace_file:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        from agentrag.server.observe import JsonLinesExporter

        exporter = JsonLinesExporter(trace_file, max_bytes=trace_max_bytes)
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[arg-type]
        readers.append(PeriodicExportingMetricReader(exporter, export_interval_millis=500))  # type: ignore[arg-type]
    # the HTTP semantic conventions' buckets for a duration in seconds (the SDK's default suits ms)
    seconds = View(
        instrument_name="http.server.request.duration",
        aggregation=ExplicitBucketHistogramAggregation(boundaries=HTTP_SECONDS_BUCKETS),
    )
    meter_provider = MeterProvider(metric_readers=readers, views=[seconds])
    # the service's measurements are recorded in batches, at the latest when a reader collects
    batching = BatchingMeterProvider(meter_provider)
    telemetry = ar.Telemetry(tracer_provider=tracer_provider, meter_provider=batching)  # type: ignore[arg-type]
    owned = [p for p in (tracer_provider, meter_provider) if p is not None]
    return telemetry, owned, reader


def metric_name(name: str, unit: str | None) -> str:
    base = _NAME.sub("_", name)
    if unit == "s" and not base.endswith("_seconds"):
        base += "_seconds"
    return base if base[:1].isalpha() else "_" + base


def _labels(attributes: Mapping[str, Any] | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    out = {LABELS[k]: str(v) for k, v in (attributes or {}).items() if k in LABELS}
    out.update(extra or {})
    return out


def _render_labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    parts = []
    for key, value in sorted(labels.items()):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        parts.append(f'{key}="{escaped}"')
    return "{" + ",".join(parts) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Exposition:
    """Renders the reader's metrics and the pools' gauges (``pools``: name -> SQLAlchemy engine)."""

    def __init__(self, reader: Any, pools: Mapping[str, Any]) -> None:
        self.reader = reader
        self.pools = dict(pools)

    def render(self) -> str:
        lines: list[str] = []
        refusals: dict[tuple[tuple[str, str], ...], float] = {}
        data = self.reader.get_metrics_data()
        for metric in _metrics(data):
            kind = type(metric.data).__name__
            unit = getattr(metric, "unit", None)
            name = metric_name(metric.name, unit)
            help_text = (metric.description or metric.name).replace("\\", "\\\\").replace("\n", " ")
            if kind == "Histogram":
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
                for point in metric.data.data_points:
                    labels = _labels(point.attributes)
                    cumulative = 0
                    for bound, count in zip(
                        [*point.explicit_bounds, math.inf], point.bucket_counts, strict=True
                    ):
                        cumulative += count
                        bucket = _render_labels(
                            {**labels, "le": "+Inf" if math.isinf(bound) else repr(float(bound))}
                        )
                        lines.append(f"{name}_bucket{bucket} {cumulative}")
                    lines.append(f"{name}_sum{_render_labels(labels)} {_number(point.sum)}")
                    lines.append(f"{name}_count{_render_labels(labels)} {point.count}")
                    if metric.name == "http.server.request.duration" and labels.get("status") == "429":
                        key = tuple(sorted((k, v) for k, v in labels.items() if k == "route"))
                        refusals[key] = refusals.get(key, 0) + point.count
            elif kind == "Sum":
                monotonic = bool(metric.data.is_monotonic)
                total = name.removesuffix("_total") + "_total" if monotonic else name
                # a counter's HELP / TYPE name its samples' name, _total included (as prometheus_client)
                lines += [
                    f"# HELP {total} {help_text}",
                    f"# TYPE {total} {'counter' if monotonic else 'gauge'}",
                ]
                for point in metric.data.data_points:
                    lines.append(f"{total}{_render_labels(_labels(point.attributes))} {_number(point.value)}")
            elif kind == "Gauge":
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
                for point in metric.data.data_points:
                    lines.append(f"{name}{_render_labels(_labels(point.attributes))} {_number(point.value)}")
        name = "agentrag_rate_limit_refusals_total"
        lines += [f"# HELP {name} Requests refused with 429 by the rate limit", f"# TYPE {name} counter"]
        for key, count in sorted(refusals.items()):
            lines.append(f"{name}{_render_labels(dict(key))} {_number(count)}")
        lines += self._pool_lines()
        return "\n".join(lines) + "\n"

    def _pool_lines(self) -> list[str]:
        name = "agentrag_db_pool_connections"
        lines = [f"# HELP {name} Database connections per pool and state", f"# TYPE {name} gauge"]
        for pool_name, engine in sorted(self.pools.items()):
            pool = engine.pool
            for state, read in (("size", "size"), ("checked_out", "checkedout"), ("idle", "checkedin")):
                method = getattr(pool, read, None)
                if method is None:
                    continue
                value = method()
                lines.append(f"{name}{_render_labels({'pool': pool_name, 'state': state})} {value}")
        return lines


def _metrics(data: Any) -> Iterable[Any]:
    if data is None:
        return []
    return [
        metric
        for resource_metrics in data.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
    ]
