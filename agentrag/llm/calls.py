"""Traced calls: :func:`call_llm` / :func:`acall_llm`, one span, timing and metrics per call."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from agentrag._sansio import Body, Op, run_async, run_sync
from agentrag.errors import AgentragError, LLMError
from agentrag.llm.deadline import acall_within, call_within
from agentrag.llm.protocol import LLM, LLMCall, LLMReply, Message, int_or_none, snippet
from agentrag.telemetry import DEFAULT_TELEMETRY, Telemetry

if TYPE_CHECKING:
    from agentrag.telemetry import GenAISpan

__all__ = ["acall_llm", "call_llm"]


class CallRecorder:
    """Span, timing and metrics of one call, shared by every sync/async/stream variant."""

    def __init__(
        self, llm: LLM, messages: Sequence[Message], *, purpose: str, telemetry: Telemetry, repair: bool
    ) -> None:
        self.messages = tuple(dict(m) for m in messages)
        self.purpose = purpose
        self.model = str(getattr(llm, "model", type(llm).__name__))
        self.repair = repair
        self.instruments = telemetry.instruments
        self.attributes = {"model": self.model, "purpose": purpose}
        system = str(getattr(llm, "system", None) or type(llm).__name__.lower())
        self.span: GenAISpan = telemetry.start_llm_span(self.model, purpose, system=system)
        if repair:
            self.span.span.set_attribute("agentrag.repair", True)
        self.span.record_prompt(self.messages)
        self.pieces: list[str] = []
        self.start = time.perf_counter()

    @property
    def request(self) -> list[Message]:
        return [dict(m) for m in self.messages]

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000.0

    def piece(self, text: str) -> None:
        if not self.pieces:
            self.instruments.llm_streaming_first_token.record(self.elapsed_ms(), self.attributes)
        self.pieces.append(text)

    def succeed_stream(self, stream: object) -> LLMCall:
        reply = LLMReply(
            text="".join(self.pieces),
            model=str(getattr(stream, "model", None) or self.model),
            input_tokens=int_or_none(getattr(stream, "input_tokens", None)),
            output_tokens=int_or_none(getattr(stream, "output_tokens", None)),
            retries=int(getattr(stream, "retries", 0) or 0),
        )
        self.instruments.llm_streaming_chunks.add(len(self.pieces), self.attributes)
        return self.succeed(reply)

    def succeed(self, reply: LLMReply) -> LLMCall:
        latency = self.elapsed_ms()
        self.span.record_usage(reply.input_tokens, reply.output_tokens, response_model=reply.model)
        self.span.record_completion(reply.text)
        self.span.end()
        self._count(latency, reply.retries)
        if reply.input_tokens is not None:
            self.instruments.llm_tokens_input.add(reply.input_tokens, self.attributes)
        if reply.output_tokens is not None:
            self.instruments.llm_tokens_output.add(reply.output_tokens, self.attributes)
        return LLMCall(
            purpose=self.purpose,
            model=self.model,
            messages=self.messages,
            reply=reply.text,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            latency_ms=latency,
            repair=self.repair,
            retries=reply.retries,
        )

    def fail(self, exc: BaseException) -> LLMCall:
        """Record the failure, attach the record to ``exc`` as ``exc.call``, return it."""
        latency = self.elapsed_ms()
        retries = int(getattr(exc, "retries", 0) or 0)
        if isinstance(exc, Exception):
            error = f"{type(exc).__name__}: {exc}"
            self.span.fail(exc)
            self.instruments.llm_generate_errors.add(1, {**self.attributes, "error_type": type(exc).__name__})
        else:  # GeneratorExit / CancelledError: the consumer stopped, the model did not fail
            error = f"{type(exc).__name__}: stopped by the caller before the end"
            self.span.span.set_attribute("agentrag.cancelled", True)
        self.span.end()
        self._count(latency, retries)
        call = LLMCall(
            purpose=self.purpose,
            model=self.model,
            messages=self.messages,
            reply="".join(self.pieces) if self.pieces else None,
            latency_ms=latency,
            error=error,
            repair=self.repair,
            retries=retries,
        )
        with suppress(AttributeError):
            exc.call = call  # type: ignore[attr-defined]
        return call

    def _count(self, latency_ms: float, retries: int) -> None:
        self.instruments.llm_generate_calls.add(1, self.attributes)
        self.instruments.llm_generate_duration.record(latency_ms, self.attributes)
        if retries:
            self.instruments.llm_generate_retries.add(retries, self.attributes)

    def current(self) -> Any:
        """Make the span current around a non-streaming call (so nested spans attach)."""
        from opentelemetry import trace

        return trace.use_span(
            self.span.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )


def foreign_llm_error(llm: Any, exc: Exception) -> LLMError:
    """:class:`LLMError` for an exception that is not ours, raised by an LLM object.

    Its message names the exception's type only (a provider's text may echo the prompt); the
    text is kept on ``error.detail``.
    """
    name = getattr(llm, "model", type(llm).__name__)
    error = LLMError(f"{name}: the model call failed: {type(exc).__name__}")
    error.detail = snippet(str(exc), 300)  # type: ignore[attr-defined]
    return error


def call_body(
    llm: LLM, messages: Sequence[Message], *, purpose: str, telemetry: Telemetry, repair: bool
) -> Body[LLMCall]:
    """The one body of :func:`call_llm` and :func:`acall_llm` (see :mod:`agentrag._sansio`)."""
    recorder = CallRecorder(llm, messages, purpose=purpose, telemetry=telemetry, repair=repair)
    try:
        with recorder.current():
            request = recorder.request
            what = f"llm:{purpose}"
            reply = yield Op(
                lambda: call_within(what, lambda: llm.complete(request)),
                lambda: acall_within(what, lambda: llm.acomplete(request)),
            )
    except AgentragError as exc:
        recorder.fail(exc)
        raise
    except Exception as exc:  # an LLM object outside agentrag raised its own error: typed here
        error = foreign_llm_error(llm, exc)
        recorder.fail(error)
        raise error from None
    except BaseException as exc:
        recorder.fail(exc)
        raise
    return recorder.succeed(reply)


def call_llm(
    llm: LLM,
    messages: Sequence[Message],
    *,
    purpose: str,
    telemetry: Telemetry = DEFAULT_TELEMETRY,
    repair: bool = False,
) -> LLMCall:
    """One traced call. Returns its :class:`LLMCall`; on failure raises the typed
    :class:`LLMError` with the failed record attached as ``exc.call``."""
    return run_sync(call_body(llm, messages, purpose=purpose, telemetry=telemetry, repair=repair))


async def acall_llm(
    llm: LLM,
    messages: Sequence[Message],
    *,
    purpose: str,
    telemetry: Telemetry = DEFAULT_TELEMETRY,
    repair: bool = False,
) -> LLMCall:
    """The async twin of :func:`call_llm`."""
    return await run_async(call_body(llm, messages, purpose=purpose, telemetry=telemetry, repair=repair))
