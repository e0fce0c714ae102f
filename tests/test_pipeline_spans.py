"""Spans with an in-memory exporter: one per step, exception status, no text by default."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import agentrag as ar
from agentrag.errors import LLMTimeoutError
from agentrag.testing import FakeLLM
from tests.pipeline_fixtures import NAMES, sample_store, scripted

__all__ = ["sample_store"]
CANARY = "ZEBRACANARY"


def _telemetry(capture: bool = False) -> tuple[ar.Telemetry, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return ar.Telemetry(tracer_provider=provider, capture_content=capture), exporter


def _all_text(spans) -> str:  # type: ignore[no-untyped-def]
    parts = []
    for span in spans:
        parts.append(span.name)
        parts.extend(f"{k}={v}" for k, v in (span.attributes or {}).items())
        for event in span.events:
            parts.append(event.name)
            parts.extend(f"{k}={v}" for k, v in (event.attributes or {}).items())
        parts.append(str(span.status.description))
    return "\n".join(parts)


def test_one_span_per_step_with_stop_attributes(sample_store) -> None:
    telemetry, exporter = _telemetry()
    question = f"How do I paginate the notes API {CANARY} and what happens at the rate limit?"
    ctx = ar.new(question, store=sample_store, telemetry=telemetry)
    ctx = ctx | ar.route(collections=NAMES) | ar.decompose() | ar.search(self_correct=True) | ar.answer()
    assert ctx.ok
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert sorted(spans) == ["agentrag.answer", "agentrag.decompose", "agentrag.route", "agentrag.search"]
    assert list(spans["agentrag.route"].attributes["agentrag.route.collections"]) == list(
        ctx.collections or ()
    )
    assert spans["agentrag.decompose"].attributes["agentrag.decompose.sub_question_count"] == 2
    assert spans["agentrag.search"].attributes["agentrag.search.result_count"] == len(ctx.hits)
    assert spans["agentrag.search"].attributes["agentrag.search.iterations"] >= 1
    assert spans["agentrag.answer"].attributes["agentrag.answer.context_chunk_count"] == len(ctx.context_used)
    assert all(s.attributes["agentrag.strategy"] for s in spans.values())
    assert CANARY not in _all_text(exporter.get_finished_spans())


def test_llm_calls_are_child_spans_with_genai_attributes_and_no_text(sample_store) -> None:
    telemetry, exporter = _telemetry()
    ctx = ar.new(f"What is the rate limit? {CANARY}", store=sample_store, llm=scripted(), telemetry=telemetry)
    ctx = ctx | ar.route(collections=NAMES) | ar.answer()
    spans = exporter.get_finished_spans()
    route_span = next(s for s in spans if s.name == "agentrag.route")
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert chats and any(
        c.parent is not None and c.parent.span_id == route_span.context.span_id for c in chats
    )
    for chat in chats:
        assert chat.attributes["gen_ai.request.model"] == "fake"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
    assert CANARY not in _all_text(spans)


def test_prompt_text_goes_into_spans_only_when_opted_in(sample_store) -> None:
    telemetry, exporter = _telemetry(capture=True)
    ar.new(
        f"What is the rate limit? {CANARY}", store=sample_store, llm=scripted(), telemetry=telemetry
    ).route(collections=NAMES)
    assert CANARY in _all_text(exporter.get_finished_spans())


def test_failed_step_span_has_error_status_and_later_steps_are_marked_skipped(sample_store) -> None:
    telemetry, exporter = _telemetry()
    llm = FakeLLM([LLMTimeoutError("down")])
    ctx = ar.new("What is the rate limit?", store=sample_store, llm=llm, telemetry=telemetry)
    ctx = ctx | ar.route(collections=NAMES) | ar.search() | ar.answer()
    assert isinstance(ctx.error, LLMTimeoutError)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["agentrag.route"].status.status_code is StatusCode.ERROR
    assert spans["agentrag.route"].attributes["error.type"] == "LLMTimeoutError"
    for name in ("agentrag.search", "agentrag.answer"):
        assert spans[name].attributes["agentrag.skipped"] is True
        assert spans[name].status.status_code is not StatusCode.ERROR
