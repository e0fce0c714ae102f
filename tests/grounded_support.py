"""Fixtures and helpers shared by the grounded-answer tests (issue #5); a plugin of conftest.py.

Real PostgreSQL through the session ``store`` fixture; FakeLLM / FakeEmbedder are the only
fakes. Spans go to an in-memory exporter through a TracerProvider passed to Telemetry
(never the global provider).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentrag.store.store import Store
from agentrag.telemetry import Telemetry
from agentrag.testing import FakeEmbedder

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SUPPORT_FILES = (
    "recover-deleted-note.md",
    "sso-login-troubleshooting.md",
    "two-factor-authentication-reset.md",
    "attachment-size-limits.md",
)
QUESTION = "How do I recover a deleted note from the trash?"


@dataclass
class Traced:
    telemetry: Telemetry
    exporter: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.exporter.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def span(self, name: str) -> ReadableSpan:
        found = self.spans(name)
        assert len(found) == 1, f"expected one {name} span, got {[s.name for s in self.spans()]}"
        return found[0]

    def metric_names(self) -> set[str]:
        data = self.metrics.get_metrics_data()
        names: set[str] = set()
        if data is None:
            return names
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                names.update(m.name for m in scope.metrics)
        return names

    def metric_points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        points: list[Any] = []
        if data is None:
            return points
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.fixture
def traced() -> Iterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    yield Traced(Telemetry(tracer_provider=provider, meter_provider=meters), exporter, reader)
    provider.shutdown()
    meters.shutdown()


@pytest.fixture(scope="module")
def support(store: Store) -> str:
    """A collection holding four of the sample support articles (ingested once per module)."""
    name = f"support_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, description="Customer support articles")
    report = store.ingest([SAMPLES / "support" / f for f in SUPPORT_FILES], collection=name)
    assert report.ok and len(report.added) == len(SUPPORT_FILES)
    return name


@pytest.fixture(scope="module")
def down_store(database_url: str) -> Iterator[Store]:
    """The same database, with an embedder that is down (same model id and dimensions)."""
    s = Store(database_url, embedder=FakeEmbedder(64, fail=True), migrate=False)
    yield s
    s.close()


@pytest.fixture
def empty_collection(store: Store) -> str:
    name = f"empty_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, description="nothing here yet")
    return name
