"""agentrag.telemetry with explicit SDK providers (the global ones are never set)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentrag.errors import LLMTimeoutError
from agentrag.llm import LLMReply, call_llm, complete_json, stream_llm
from agentrag.telemetry import DEFAULT_TELEMETRY, Telemetry, mark_degraded, mark_skipped
from agentrag.testing import FakeLLM

SECRET_PROMPT = "my-secret-prompt-7f3a"
SECRET_REPLY = "the-secret-reply-91bc"
MESSAGES = [{"role": "user", "content": f"Tell me about {SECRET_PROMPT}"}]

RAG_INSTRUMENTS = {
    "retriever.search.duration_ms",
    "retriever.results_returned",
    "context.build.duration_ms",
    "context.tokens_used",
    "context.chunks_included",
    "llm.generate.duration_ms",
    "llm.streaming.first_token_ms",
    "pipeline.query.duration_ms",
    "retriever.search.calls",
    "retriever.search.errors",
    "retriever.empty_results",
    "context.chunks_truncated",
    "llm.generate.calls",
    "llm.generate.errors",
    "llm.generate.retries",
    "llm.tokens_input",
    "llm.tokens_output",
    "llm.streaming.chunks",
    "pipeline.query.calls",
    "pipeline.query.errors",
}


@dataclass
class Otel:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def telemetry(self, **kwargs: Any) -> Telemetry:
        return Telemetry(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **kwargs)

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        [span] = [s for s in self.finished() if s.name == name]
        return span

    def points(self, metric_name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource_metrics in data.resource_metrics if data else []:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == metric_name:
                        found.extend(metric.data.data_points)
        return found

    def metric_names(self) -> set[str]:
        data = self.reader.get_metrics_data()
        return {
            metric.name
            for resource_metrics in (data.resource_metrics if data else [])
            for scope_metrics in resource_metrics.scope_metrics
            for metric in scope_metrics.metrics
        }


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    global_provider = trace.get_tracer_provider()
    yield Otel(exporter, reader, tracer_provider, meter_provider)
    assert trace.get_tracer_provider() is global_provider  # nothing set the global provider
    tracer_provider.shutdown()
    meter_provider.shutdown()


def _all_text(spans: list[ReadableSpan]) -> str:
    """Every attribute and event attribute value of every span, as one string."""
    parts: list[str] = []
    for span in spans:
        parts.extend(f"{k}={v}" for k, v in (span.attributes or {}).items())
        for event in span.events:
            parts.append(event.name)
            parts.extend(f"{k}={v}" for k, v in (event.attributes or {}).items())
        if span.status.description:
            parts.append(span.status.description)
    return "\n".join(parts)


def test_llm_span_has_genai_attributes_and_is_a_child_of_the_step(otel: Otel) -> None:
    telemetry = otel.telemetry()
    fake = FakeLLM([SECRET_REPLY], model="fake-model")

    with telemetry.step_span("route") as step:
        call_llm(fake, MESSAGES, purpose="route", telemetry=telemetry)

    chat = otel.span("chat fake-model")
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "fake-model"
    assert attributes["gen_ai.system"] == "fake"
    assert attributes["gen_ai.usage.input_tokens"] == len(MESSAGES[0]["content"]) // 4
    assert attributes["gen_ai.usage.output_tokens"] == len(SECRET_REPLY) // 4
    assert attributes["agentrag.purpose"] == "route"
    assert chat.kind == trace.SpanKind.CLIENT
    assert chat.parent is not None
    assert chat.parent.span_id == step.get_span_context().span_id
    assert otel.span("agentrag.route").status.status_code == StatusCode.UNSET


def test_no_prompt_or_reply_text_by_default(otel: Otel) -> None:
    telemetry = otel.telemetry()
    fake = FakeLLM([SECRET_REPLY, f'{{"answer": "{SECRET_REPLY}"}}', SECRET_REPLY])

    with telemetry.step_span("answer"):
        call_llm(fake, MESSAGES, purpose="answer", telemetry=telemetry)
        list(stream_llm(fake, MESSAGES, purpose="answer", telemetry=telemetry))

    text = _all_text(otel.finished())
    assert len(otel.finished()) == 3
    assert SECRET_PROMPT not in text
    assert SECRET_REPLY not in text
    assert all(not span.events for span in otel.finished())


def test_capture_content_records_prompt_and_reply_events(otel: Otel) -> None:
    telemetry = otel.telemetry(capture_content=True)

    call_llm(FakeLLM([SECRET_REPLY]), MESSAGES, purpose="answer", telemetry=telemetry)

    chat = otel.span("chat fake")
    events = {event.name: dict(event.attributes or {}) for event in chat.events}
    assert SECRET_PROMPT in str(events["gen_ai.content.prompt"]["gen_ai.prompt"])
    assert events["gen_ai.content.completion"]["gen_ai.completion"] == SECRET_REPLY


def test_llm_metrics(otel: Otel) -> None:
    telemetry = otel.telemetry()

    call_llm(FakeLLM(["x" * 40]), MESSAGES, purpose="answer", telemetry=telemetry)

    [calls] = otel.points("llm.generate.calls")
    assert calls.value == 1
    assert dict(calls.attributes) == {"model": "fake", "purpose": "answer"}
    [output] = otel.points("llm.tokens_output")
    assert output.value == 10
    [duration] = otel.points("llm.generate.duration_ms")
    assert duration.count == 1
    usage = {p.attributes["gen_ai.token.type"]: p.sum for p in otel.points("gen_ai.client.token.usage")}
    assert usage == {"input": len(MESSAGES[0]["content"]) // 4, "output": 10}
    assert otel.points("llm.generate.errors") == []


def test_retries_reported_by_the_llm_are_counted(otel: Otel) -> None:
    class Retried:
        model = "retried"

        def complete(self, messages: Any) -> LLMReply:
            return LLMReply(text="ok", model="retried", retries=2)

    call_llm(Retried(), MESSAGES, purpose="route", telemetry=otel.telemetry())  # type: ignore[arg-type]

    [retries] = otel.points("llm.generate.retries")
    assert retries.value == 2


def test_failed_llm_call_marks_the_span_and_counts_the_error(otel: Otel) -> None:
    telemetry = otel.telemetry()

    with pytest.raises(LLMTimeoutError), telemetry.step_span("answer"):
        call_llm(FakeLLM([LLMTimeoutError("slow")]), MESSAGES, purpose="answer", telemetry=telemetry)

    chat = otel.span("chat fake")
    assert chat.status.status_code == StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == "LLMTimeoutError"
    assert [e.name for e in chat.events] == ["exception"]
    [errors] = otel.points("llm.generate.errors")
    assert errors.attributes["error_type"] == "LLMTimeoutError"
    assert otel.span("agentrag.answer").status.status_code == StatusCode.ERROR


def test_step_span_records_the_exception_and_reraises(otel: Otel) -> None:
    telemetry = otel.telemetry()

    with pytest.raises(ValueError, match="boom"), telemetry.step_span("rewrite", {"agentrag.k": 3}):
        raise ValueError("boom")

    span = otel.span("agentrag.rewrite")
    assert span.status.status_code == StatusCode.ERROR
    assert (span.attributes or {})["agentrag.k"] == 3
    [event] = span.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.type"] == "ValueError"
    [errors] = otel.points("agentrag.step.errors")
    assert dict(errors.attributes) == {"step": "rewrite", "error_type": "ValueError"}
    [duration] = otel.points("agentrag.step.duration")
    assert dict(duration.attributes) == {"step": "rewrite"}
    assert duration.count == 1


def test_step_span_success_records_duration_only(otel: Otel) -> None:
    telemetry = otel.telemetry()
    with telemetry.step_span("retrieve"):
        pass
    assert otel.span("agentrag.retrieve").status.status_code == StatusCode.UNSET
    assert otel.points("agentrag.step.errors") == []
    [duration] = otel.points("agentrag.step.duration")
    assert duration.count == 1


def test_skip_and_degrade_markers(otel: Otel) -> None:
    telemetry = otel.telemetry()
    with telemetry.step_span("rerank") as span:
        mark_skipped(span, "no reranker configured")
    with telemetry.step_span("answer") as span:
        mark_degraded(span, "extractive", "LLM unavailable")

    rerank = dict(otel.span("agentrag.rerank").attributes or {})
    assert rerank["agentrag.skipped"] is True
    assert rerank["agentrag.skip_reason"] == "no reranker configured"
    answer = dict(otel.span("agentrag.answer").attributes or {})
    assert answer["agentrag.degraded"] is True
    assert answer["agentrag.mode"] == "extractive"
    assert answer["agentrag.degraded_reason"] == "LLM unavailable"


def test_embedding_span(otel: Otel) -> None:
    telemetry = otel.telemetry()
    with telemetry.embedding_span("text-embedding-3-small", 5) as handle:
        handle.record_usage(20, None)
    span = otel.span("embeddings text-embedding-3-small")
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.operation.name"] == "embeddings"
    assert attributes["gen_ai.request.model"] == "text-embedding-3-small"
    assert attributes["agentrag.embedding.count"] == 5
    assert attributes["gen_ai.usage.input_tokens"] == 20
    assert "gen_ai.usage.output_tokens" not in attributes

    with pytest.raises(RuntimeError), telemetry.embedding_span("m", 1):
        raise RuntimeError("provider down")
    assert otel.span("embeddings m").status.status_code == StatusCode.ERROR


def test_stream_span_and_streaming_metrics(otel: Otel) -> None:
    telemetry = otel.telemetry()
    fake = FakeLLM(["abcdefghijkl"], stream_chunk_size=4)

    with telemetry.step_span("answer") as step:
        streamed = stream_llm(fake, MESSAGES, purpose="answer", telemetry=telemetry)
        assert list(streamed) == ["abcd", "efgh", "ijkl"]

    chat = otel.span("chat fake")
    assert chat.parent is not None and chat.parent.span_id == step.get_span_context().span_id
    assert (chat.attributes or {})["gen_ai.usage.output_tokens"] == 3
    [chunks] = otel.points("llm.streaming.chunks")
    assert chunks.value == 3
    [first] = otel.points("llm.streaming.first_token_ms")
    assert first.count == 1


def test_repair_attempt_is_marked_on_its_span(otel: Otel) -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: str

    telemetry = otel.telemetry()
    complete_json(FakeLLM(["nope", '{"answer": "yes"}']), MESSAGES, Answer, purpose="x", telemetry=telemetry)

    spans = [s for s in otel.finished() if s.name == "chat fake"]
    assert [dict(s.attributes or {}).get("agentrag.repair", False) for s in spans] == [False, True]


def test_every_rag_instrument_exists_with_its_exact_name(otel: Otel) -> None:
    instruments = otel.telemetry().instruments
    for attribute in vars(instruments):
        instrument = getattr(instruments, attribute)
        if hasattr(instrument, "record"):
            instrument.record(1, {})
        else:
            instrument.add(1, {})

    names = otel.metric_names()
    assert names >= RAG_INSTRUMENTS
    assert names - RAG_INSTRUMENTS == {
        "agentrag.step.duration",
        "agentrag.step.errors",
        "gen_ai.client.token.usage",
    }


def test_instruments_and_tracer_are_created_once_per_telemetry(otel: Otel) -> None:
    telemetry = otel.telemetry()
    assert telemetry.instruments is telemetry.instruments
    assert telemetry.tracer is telemetry.tracer


def test_default_telemetry_is_a_harmless_no_op() -> None:
    with DEFAULT_TELEMETRY.step_span("noop") as span:
        mark_skipped(span, "nothing to do")
        call = call_llm(FakeLLM(["fine"]), MESSAGES, purpose="noop")
    assert call.reply == "fine"
    DEFAULT_TELEMETRY.instruments.pipeline_query_calls.add(1)
