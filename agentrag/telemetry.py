"""OpenTelemetry traces and metrics, through ``opentelemetry-api`` only.

agentrag never configures OpenTelemetry and never touches the global providers.
A :class:`Telemetry` names the providers to use (``None``: the global ones, which
are no-ops until the application installs an SDK)::

    from opentelemetry.sdk.trace import TracerProvider

    telemetry = Telemetry(tracer_provider=TracerProvider())

What is emitted:

* ``agentrag.<step>`` spans from :meth:`Telemetry.step_span`, with the histogram
  ``agentrag.step.duration`` (ms, attribute ``step``) and the counter
  ``agentrag.step.errors`` (attributes ``step``, ``error_type``).
* ``chat <model>`` / ``embeddings <model>`` spans with the GenAI semantic-convention
  attributes (``gen_ai.operation.name``, ``gen_ai.system``, ``gen_ai.request.model``,
  ``gen_ai.usage.input_tokens`` ...) and the histogram ``gen_ai.client.token.usage``
  (attribute ``gen_ai.token.type`` = ``input`` / ``output``).
* The RAG instruments of :class:`Instruments` (``retriever.search.duration_ms`` ...).

Prompt and reply text is recorded (as ``gen_ai.content.prompt`` /
``gen_ai.content.completion`` span events) only with ``capture_content=True``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, Status, StatusCode

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter, MeterProvider
    from opentelemetry.trace import Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

__all__ = [
    "DEFAULT_TELEMETRY",
    "GenAISpan",
    "Instruments",
    "Telemetry",
    "mark_degraded",
    "mark_skipped",
]

INSTRUMENTATION_NAME = "agentrag"

# (attribute on Instruments, kind, instrument name, unit, description)
_INSTRUMENT_SPECS: tuple[tuple[str, str, str, str, str], ...] = (
    ("step_duration", "histogram", "agentrag.step.duration", "ms", "Duration of one pipeline step"),
    ("step_errors", "counter", "agentrag.step.errors", "{error}", "Pipeline steps that raised"),
    ("token_usage", "histogram", "gen_ai.client.token.usage", "{token}", "Tokens used per model call"),
    ("retriever_search_duration", "histogram", "retriever.search.duration_ms", "ms", "Retriever search time"),
    ("retriever_results_returned", "histogram", "retriever.results_returned", "{hit}", "Hits per search"),
    ("context_build_duration", "histogram", "context.build.duration_ms", "ms", "Context building time"),
    ("context_tokens_used", "histogram", "context.tokens_used", "{token}", "Tokens in the built context"),
    ("context_chunks_included", "histogram", "context.chunks_included", "{chunk}", "Chunks in the context"),
    ("llm_generate_duration", "histogram", "llm.generate.duration_ms", "ms", "Model call time"),
    ("llm_streaming_first_token", "histogram", "llm.streaming.first_token_ms", "ms", "Time to first piece"),
    ("pipeline_query_duration", "histogram", "pipeline.query.duration_ms", "ms", "Whole query time"),
    ("retriever_search_calls", "counter", "retriever.search.calls", "{call}", "Retriever searches"),
    ("retriever_search_errors", "counter", "retriever.search.errors", "{error}", "Failed searches"),
    ("retriever_empty_results", "counter", "retriever.empty_results", "{search}", "Searches with no hit"),
    ("context_chunks_truncated", "counter", "context.chunks_truncated", "{chunk}", "Chunks left out"),
    ("llm_generate_calls", "counter", "llm.generate.calls", "{call}", "Model calls"),
    ("llm_generate_errors", "counter", "llm.generate.errors", "{error}", "Failed model calls"),
    ("llm_generate_retries", "counter", "llm.generate.retries", "{retry}", "Retries of model calls"),
    ("llm_tokens_input", "counter", "llm.tokens_input", "{token}", "Prompt tokens"),
    ("llm_tokens_output", "counter", "llm.tokens_output", "{token}", "Reply tokens"),
    ("llm_streaming_chunks", "counter", "llm.streaming.chunks", "{chunk}", "Streamed reply pieces"),
    ("pipeline_query_calls", "counter", "pipeline.query.calls", "{query}", "Queries answered"),
    ("pipeline_query_errors", "counter", "pipeline.query.errors", "{error}", "Queries that failed"),
)


class Instruments:
    """Every metric instrument agentrag records, created once per :class:`Telemetry`.

    Use them as ``telemetry.instruments.retriever_search_duration.record(ms, {...})``.
    The instrument name is the one in the comment (``retriever.search.duration_ms``).
    """

    step_duration: Histogram  # agentrag.step.duration
    step_errors: Counter  # agentrag.step.errors
    token_usage: Histogram  # gen_ai.client.token.usage
    retriever_search_duration: Histogram  # retriever.search.duration_ms
    retriever_results_returned: Histogram  # retriever.results_returned
    context_build_duration: Histogram  # context.build.duration_ms
    context_tokens_used: Histogram  # context.tokens_used
    context_chunks_included: Histogram  # context.chunks_included
    llm_generate_duration: Histogram  # llm.generate.duration_ms
    llm_streaming_first_token: Histogram  # llm.streaming.first_token_ms
    pipeline_query_duration: Histogram  # pipeline.query.duration_ms
    retriever_search_calls: Counter  # retriever.search.calls
    retriever_search_errors: Counter  # retriever.search.errors
    retriever_empty_results: Counter  # retriever.empty_results
    context_chunks_truncated: Counter  # context.chunks_truncated
    llm_generate_calls: Counter  # llm.generate.calls
    llm_generate_errors: Counter  # llm.generate.errors
    llm_generate_retries: Counter  # llm.generate.retries
    llm_tokens_input: Counter  # llm.tokens_input
    llm_tokens_output: Counter  # llm.tokens_output
    llm_streaming_chunks: Counter  # llm.streaming.chunks
    pipeline_query_calls: Counter  # pipeline.query.calls
    pipeline_query_errors: Counter  # pipeline.query.errors

    def __init__(self, meter: Meter) -> None:
        for attribute, kind, name, unit, description in _INSTRUMENT_SPECS:
            create = meter.create_histogram if kind == "histogram" else meter.create_counter
            setattr(self, attribute, create(name, unit=unit, description=description))

    def __repr__(self) -> str:
        return f"Instruments({len(_INSTRUMENT_SPECS)} instruments)"


@dataclass(frozen=True)
class Telemetry:
    """Where agentrag sends spans and metrics, and whether prompt text may go with them.

    ``capture_content=False`` (the default) keeps prompts and replies out of every
    span attribute and event; turn it on only where traces may hold user data.
    """

    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    capture_content: bool = False

    @cached_property
    def tracer(self) -> Tracer:
        return trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=self.tracer_provider)

    @cached_property
    def meter(self) -> Meter:
        return metrics.get_meter(INSTRUMENTATION_NAME, meter_provider=self.meter_provider)

    @cached_property
    def instruments(self) -> Instruments:
        return Instruments(self.meter)

    @contextmanager
    def step_span(self, name: str, attributes: Mapping[str, AttributeValue] | None = None) -> Iterator[Span]:
        """Span ``agentrag.<name>`` around one step, made current for the ``with`` body.

        Records ``agentrag.step.duration``; when the body raises, records the exception
        on the span, sets status ERROR, counts ``agentrag.step.errors`` and re-raises.
        """
        instruments = self.instruments
        start = time.perf_counter()
        with self.tracer.start_as_current_span(
            f"agentrag.{name}",
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except Exception as exc:
                record_error(span, exc, capture_content=self.capture_content)
                instruments.step_errors.add(1, {"step": name, "error_type": type(exc).__name__})
                raise
            finally:
                elapsed_ms = (time.perf_counter() - start) * 1000.0
                instruments.step_duration.record(elapsed_ms, {"step": name})

    def _start_genai_span(
        self, operation: str, model: str, system: str, extra: dict[str, AttributeValue]
    ) -> GenAISpan:
        """Start (not make current) a GenAI client span named ``<operation> <model>``."""
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": operation,
            "gen_ai.system": system,
            "gen_ai.request.model": model,
            **extra,
        }
        span = self.tracer.start_span(
            f"{operation} {model}",
            kind=trace.SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        return GenAISpan(self, span, operation=operation, model=model, system=system)

    def start_llm_span(self, model: str, purpose: str, *, system: str = "litellm") -> GenAISpan:
        """Start (not make current) a ``chat <model>`` span; the caller ends it.

        Meant for streams, whose span outlives any ``with`` block. Otherwise use
        :meth:`llm_span`.
        """
        return self._start_genai_span("chat", model, system, {"agentrag.purpose": purpose})

    @contextmanager
    def llm_span(self, model: str, purpose: str, *, system: str = "litellm") -> Iterator[GenAISpan]:
        """A current ``chat <model>`` span for one model call; errors are recorded and re-raised."""
        with self._current(self.start_llm_span(model, purpose, system=system)) as handle:
            yield handle

    @contextmanager
    def embedding_span(self, model: str, count: int, *, system: str = "litellm") -> Iterator[GenAISpan]:
        """A current ``embeddings <model>`` span for embedding ``count`` texts."""
        handle = self._start_genai_span("embeddings", model, system, {"agentrag.embedding.count": count})
        with self._current(handle) as current:
            yield current

    @contextmanager
    def _current(self, handle: GenAISpan) -> Iterator[GenAISpan]:
        try:
            with trace.use_span(
                handle.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                yield handle
        except Exception as exc:
            handle.fail(exc)
            raise
        finally:
            handle.end()


class GenAISpan:
    """A model-call span plus the GenAI metrics that go with it."""

    __slots__ = ("_ended", "model", "operation", "span", "system", "telemetry")

    def __init__(self, telemetry: Telemetry, span: Span, *, operation: str, model: str, system: str):
        self.telemetry = telemetry
        self.span = span
        self.operation = operation
        self.model = model
        self.system = system
        self._ended = False

    def __repr__(self) -> str:
        return f"GenAISpan({self.operation} {self.model!r})"

    def record_prompt(self, messages: Sequence[Mapping[str, str]]) -> None:
        """Add the prompt as a ``gen_ai.content.prompt`` event, only when capture_content is on."""
        if self.telemetry.capture_content:
            text = json.dumps([dict(m) for m in messages], ensure_ascii=False)
            self.span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": text})

    def record_completion(self, text: str) -> None:
        """Add the reply as a ``gen_ai.content.completion`` event, only when capture_content is on."""
        if self.telemetry.capture_content:
            self.span.add_event("gen_ai.content.completion", {"gen_ai.completion": text})

    def record_usage(
        self,
        input_tokens: int | None,
        output_tokens: int | None,
        *,
        response_model: str | None = None,
    ) -> None:
        """Set ``gen_ai.usage.*`` and record ``gen_ai.client.token.usage`` for known counts."""
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": self.operation,
            "gen_ai.system": self.system,
            "gen_ai.request.model": self.model,
        }
        if response_model:
            self.span.set_attribute("gen_ai.response.model", response_model)
        usage = self.telemetry.instruments.token_usage
        for kind, count in (("input", input_tokens), ("output", output_tokens)):
            if count is None:
                continue
            self.span.set_attribute(f"gen_ai.usage.{kind}_tokens", count)
            usage.record(count, {**attributes, "gen_ai.token.type": kind})

    def fail(self, exc: BaseException) -> None:
        """Record ``exc`` on the span: exception event, ``error.type``, status ERROR."""
        record_error(self.span, exc, capture_content=self.telemetry.capture_content)

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self.span.end()


REDACTED_MESSAGE = "redacted (capture_content=False)"
"""The ``exception.message`` of a span's exception event when content is not captured."""


def record_error(span: Span, exc: BaseException, *, capture_content: bool) -> None:
    """Record ``exc`` on ``span``: exception event, ``error.type``, status ERROR.

    An exception's text may hold the question or retrieved text (a provider that echoes the
    prompt, a driver error quoting a value). Unless ``capture_content`` is on, the event carries
    the exception's type and :data:`REDACTED_MESSAGE`, no stack trace, and the status only the
    type; with it, the full ``record_exception`` event and message.
    """
    kind = type(exc).__name__
    span.set_attribute("error.type", kind)
    if capture_content:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{kind}: {exc}"))
        return
    span.add_event("exception", {"exception.type": kind, "exception.message": REDACTED_MESSAGE})
    span.set_status(Status(StatusCode.ERROR, kind))


def mark_skipped(span: Span, reason: str) -> None:
    """Mark a step's span as skipped (``agentrag.skipped``, ``agentrag.skip_reason``)."""
    span.set_attribute("agentrag.skipped", True)
    span.set_attribute("agentrag.skip_reason", reason)


def mark_degraded(span: Span, mode: str, reason: str | None = None) -> None:
    """Mark a step as degraded to ``mode`` (``agentrag.degraded``, ``agentrag.mode``, reason)."""
    span.set_attribute("agentrag.degraded", True)
    span.set_attribute("agentrag.mode", mode)
    if reason is not None:
        span.set_attribute("agentrag.degraded_reason", reason)


DEFAULT_TELEMETRY = Telemetry()
"""The global OpenTelemetry providers: no-ops unless the application configured OpenTelemetry."""
