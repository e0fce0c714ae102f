"""Language models: one small protocol, a litellm adapter, and traced calls.

An :class:`LLM` is anything with a ``model`` name and ``complete`` / ``acomplete`` /
``stream`` / ``astream``. Three ship with agentrag:

* :class:`LiteLLM` for any model litellm knows: ``"gpt-4o-mini"``,
  ``"anthropic/claude-3-5-haiku-latest"``, ``"ollama/llama3.1"``, or
  ``"openai/<name>"`` plus ``api_base`` for any OpenAI-compatible server. It retries
  429, 5xx, connection errors and timeouts itself, with exponential backoff.
* :class:`CallableLLM` turns a function ``prompt -> reply`` (sync or async) into an LLM.
* ``agentrag.testing.FakeLLM``, scripted, for tests.

Pipeline steps do not call an LLM directly: they go through :func:`call_llm` (one
traced call, returning an :class:`LLMCall` record), :func:`complete_json` (a reply
validated against a pydantic model, with one repair attempt) or :func:`stream_llm`.
Each has an ``a``-prefixed async twin.

Every failure is an :class:`~agentrag.errors.LLMError`; the failed call's record is
attached to the exception as ``exc.call`` (and, for :func:`complete_json`, every
record so far as ``exc.calls``).
"""

from __future__ import annotations

import inspect
import json
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from agentrag.errors import LLMError, LLMOutputError, LLMRateLimitError, LLMRequestError, LLMTimeoutError
from agentrag.telemetry import DEFAULT_TELEMETRY, Telemetry

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from agentrag.telemetry import GenAISpan

__all__ = [
    "JSON_REPAIR_PROMPT",
    "LLM",
    "AsyncLLMStream",
    "AsyncTextStream",
    "CallableLLM",
    "LLMCall",
    "LLMReply",
    "LLMStream",
    "LiteLLM",
    "Message",
    "TextStream",
    "acall_llm",
    "acomplete_json",
    "as_llm",
    "astream_llm",
    "call_llm",
    "complete_json",
    "messages_to_prompt",
    "stream_llm",
]

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""

M = TypeVar("M", bound="BaseModel")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LLMReply:
    """What a model returned. ``retries`` counts the attempts that failed before it."""

    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    retries: int = 0


@dataclass(frozen=True, slots=True)
class LLMCall:
    """The record of one model call, as kept on the pipeline context.

    ``reply`` is the raw text (None when the call failed), ``parsed`` the validated
    value as plain data when the reply was parsed, ``error`` ``"<ExceptionType>: message"``
    when the call failed or its reply was unusable, ``repair`` True for the repair
    attempt of :func:`complete_json`.
    """

    purpose: str
    model: str
    # The prompt holds a random per-request delimiter, and latency is a timing: neither takes
    # part in equality, so two runs with the same inputs and replies compare equal.
    messages: tuple[Message, ...] = field(hash=False, compare=False)
    reply: str | None
    parsed: Any = field(default=None, hash=False)
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float = field(default=0.0, compare=False)
    error: str | None = None
    repair: bool = False
    retries: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    def __repr__(self) -> str:
        parts = [
            self.purpose + (" (repair)" if self.repair else ""),
            self.model,
            f"{len(self.messages)} msgs",
        ]
        if self.reply is not None:
            parts.append(f"-> {_snippet(self.reply)!r}")
        if self.input_tokens is not None or self.output_tokens is not None:
            parts.append(f"{self.input_tokens}+{self.output_tokens} tok")
        parts.append(f"{self.latency_ms:.1f}ms")
        if self.retries:
            parts.append(f"{self.retries} retries")
        if self.error is not None:
            parts.append(f"error={_snippet(self.error)!r}")
        return f"LLMCall({' '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class LLM(Protocol):
    """What agentrag needs from a language model.

    ``stream`` / ``astream`` may return a :class:`TextStream` / :class:`AsyncTextStream`
    (or any iterator with ``input_tokens`` / ``output_tokens`` attributes filled by the
    end of the stream); the token counts are then recorded.
    """

    model: str

    def complete(self, messages: Sequence[Message]) -> LLMReply: ...

    async def acomplete(self, messages: Sequence[Message]) -> LLMReply: ...

    def stream(self, messages: Sequence[Message]) -> Iterator[str]: ...

    def astream(self, messages: Sequence[Message]) -> AsyncIterator[str]: ...


# --------------------------------------------------------------------------- streams


class TextStream:
    """An iterator of reply pieces that also carries usage once it is exhausted.

    ``produce(stream)`` returns the pieces and may set ``stream.input_tokens``,
    ``stream.output_tokens``, ``stream.model`` and ``stream.retries`` as it goes.
    """

    def __init__(self, model: str, produce: Callable[[TextStream], Iterator[str]]) -> None:
        self.model = model
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.retries = 0
        self._pieces = produce(self)

    def __iter__(self) -> TextStream:
        return self

    def __next__(self) -> str:
        return next(self._pieces)

    def close(self) -> None:
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()


class AsyncTextStream:
    """The async twin of :class:`TextStream`."""

    def __init__(self, model: str, produce: Callable[[AsyncTextStream], AsyncIterator[str]]) -> None:
        self.model = model
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.retries = 0
        self._pieces = produce(self)

    def __aiter__(self) -> AsyncTextStream:
        return self

    async def __anext__(self) -> str:
        return await self._pieces.__anext__()

    async def aclose(self) -> None:
        aclose = getattr(self._pieces, "aclose", None)
        if aclose is not None:
            await aclose()


# --------------------------------------------------------------------------- LiteLLM

_RETRYABLE = frozenset({"timeout", "rate_limit", "server", "connection"})
_RESERVED_KWARGS = frozenset({"model", "messages", "stream", "num_retries", "max_retries"})


class LiteLLM:
    """Any model litellm supports, with agentrag's own retries.

    litellm's and the OpenAI client's retries are off (``num_retries=0``,
    ``max_retries=0``). Instead, 429s, 5xx, connection errors and timeouts are retried
    up to ``max_retries`` times, waiting ``min(max_backoff, backoff * 2**attempt)``
    with jitter (between half and all of it); a 429 with a ``Retry-After`` (or
    ``retry-after-ms``) header waits that long instead, capped at ``max_backoff``.
    Other 4xx are never retried. (litellm reports a reply body it cannot parse as a
    500, so it is retried like one.)

    After the last attempt: timeout -> :class:`LLMTimeoutError`, 429 ->
    :class:`LLMRateLimitError`, other 4xx -> :class:`LLMRequestError`, anything else ->
    :class:`LLMError`. The error has ``retries`` and ``status_code`` attributes.

    ``**extra`` goes to ``litellm.completion`` as is (``top_p``, ``seed``,
    ``response_format``, ``drop_params`` ...). ``drop_params=True`` is the default so
    that e.g. ``temperature`` is dropped for models that do not accept it.
    ``sleep`` / ``async_sleep`` are injectable for tests.
    """

    system = "litellm"

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] | None = None,
        **extra: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise TypeError(f"model must be a non-empty string, got {model!r}")
        reserved = _RESERVED_KWARGS & extra.keys()
        if reserved:
            raise TypeError(f"LiteLLM sets {sorted(reserved)} itself; they cannot be passed")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.extra = extra
        self._sleep = sleep
        self._async_sleep = async_sleep

    def __repr__(self) -> str:
        base = f", api_base={self.api_base!r}" if self.api_base else ""
        return f"LiteLLM({self.model!r}{base}, timeout={self.timeout}, max_retries={self.max_retries})"

    # ---- public API

    def complete(self, messages: Sequence[Message]) -> LLMReply:
        litellm = _litellm()
        request = self._request(messages, stream=False)
        response, retries = self._retrying(lambda: litellm.completion(**request))
        return self._reply(response, retries)

    async def acomplete(self, messages: Sequence[Message]) -> LLMReply:
        litellm = _litellm()
        request = self._request(messages, stream=False)
        response, retries = await self._aretrying(lambda: litellm.acompletion(**request))
        return self._reply(response, retries)

    def stream(self, messages: Sequence[Message]) -> TextStream:
        """Pieces of the reply as they arrive. Retries happen only before the first piece."""
        request = self._request(messages, stream=True)

        def produce(out: TextStream) -> Iterator[str]:
            litellm = _litellm()
            response, out.retries = self._retrying(lambda: litellm.completion(**request))
            try:
                for chunk in response:
                    text = self._chunk(chunk, out)
                    if text:
                        yield text
            except Exception as exc:
                raise self._error(exc, out.retries) from exc
            finally:
                _close_quietly(response)

        return TextStream(self.model, produce)

    def astream(self, messages: Sequence[Message]) -> AsyncTextStream:
        request = self._request(messages, stream=True)

        async def produce(out: AsyncTextStream) -> AsyncIterator[str]:
            litellm = _litellm()
            response, out.retries = await self._aretrying(lambda: litellm.acompletion(**request))
            try:
                async for chunk in response:
                    text = self._chunk(chunk, out)
                    if text:
                        yield text
            except Exception as exc:
                raise self._error(exc, out.retries) from exc
            finally:
                aclose = getattr(response, "aclose", None)
                if aclose is not None:
                    with suppress(Exception):
                        await aclose()

        return AsyncTextStream(self.model, produce)

    # ---- request / response

    def _request(self, messages: Sequence[Message], *, stream: bool) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "timeout": self.timeout,
            "temperature": self.temperature,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
        }
        if self.api_base is not None:
            request["api_base"] = self.api_base
        if self._api_key is not None:
            request["api_key"] = self._api_key
        if self.max_tokens is not None:
            request["max_tokens"] = self.max_tokens
        if stream:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        request.update(self.extra)
        return request

    def _reply(self, response: Any, retries: int) -> LLMReply:
        try:
            text = response.choices[0].message.content or ""
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise LLMError(f"{self.model}: the response has no message: {_snippet(repr(response))}") from exc
        usage = getattr(response, "usage", None)
        return LLMReply(
            text=str(text),
            model=str(getattr(response, "model", None) or self.model),
            input_tokens=_int_or_none(getattr(usage, "prompt_tokens", None)),
            output_tokens=_int_or_none(getattr(usage, "completion_tokens", None)),
            retries=retries,
        )

    @staticmethod
    def _chunk(chunk: Any, out: TextStream | AsyncTextStream) -> str | None:
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            out.input_tokens = _int_or_none(getattr(usage, "prompt_tokens", None)) or out.input_tokens
            out.output_tokens = _int_or_none(getattr(usage, "completion_tokens", None)) or out.output_tokens
        choices = getattr(chunk, "choices", None)
        if not choices:
            return None
        delta = getattr(choices[0], "delta", None)
        content = getattr(delta, "content", None)
        return content if isinstance(content, str) else None

    # ---- retries

    def _retrying(self, send: Callable[[], T]) -> tuple[T, int]:
        attempt = 0
        while True:
            try:
                return send(), attempt
            except Exception as exc:
                delay = self._retry_delay(exc, attempt)  # raises the typed error when giving up
            self._sleep(delay)
            attempt += 1

    async def _aretrying(self, send: Callable[[], Awaitable[T]]) -> tuple[T, int]:
        sleep = self._async_sleep
        if sleep is None:
            import asyncio

            sleep = asyncio.sleep
        attempt = 0
        while True:
            try:
                return await send(), attempt
            except Exception as exc:
                delay = self._retry_delay(exc, attempt)
            await sleep(delay)
            attempt += 1

    def _retry_delay(self, exc: Exception, attempt: int) -> float:
        """Seconds to wait before retrying ``exc``; raises the typed error when not retrying."""
        kind, _ = _classify(exc)
        if kind not in _RETRYABLE or attempt >= self.max_retries:
            raise self._error(exc, attempt) from exc
        if kind == "rate_limit":
            retry_after = _retry_after(exc)
            if retry_after is not None:
                return min(max(retry_after, 0.0), self.max_backoff)
        ceiling = min(self.max_backoff, self.backoff * 2**attempt)
        return ceiling / 2 + random.uniform(0.0, ceiling / 2)

    def _error(self, exc: Exception, retries: int) -> LLMError:
        kind, status = _classify(exc)
        attempts = f"after {retries + 1} attempt{'s' if retries else ''}"
        detail = _snippet(str(exc) or type(exc).__name__, 300)
        error: LLMError
        if kind == "timeout":
            error = LLMTimeoutError(f"{self.model}: no reply within {self.timeout}s ({attempts}): {detail}")
        elif kind == "rate_limit":
            error = LLMRateLimitError(f"{self.model}: rate limited (429) {attempts}: {detail}")
        elif kind == "request":
            error = LLMRequestError(f"{self.model}: request rejected ({status}): {detail}")
        else:
            error = LLMError(f"{self.model}: call failed {attempts}: {type(exc).__name__}: {detail}")
        error.retries = retries  # type: ignore[attr-defined]
        error.status_code = status  # type: ignore[attr-defined]
        return error


def _litellm() -> Any:
    from agentrag._lazy import import_litellm

    return import_litellm()


def _classify(exc: BaseException) -> tuple[str, int | None]:
    """(kind, HTTP status) of a provider exception; kind drives retries and error types."""
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    if _is_timeout(exc):
        return "timeout", status
    if status == 429:
        return "rate_limit", status
    if _is_connection_error(exc):
        return "connection", status
    if status is not None and status >= 500:
        return "server", status
    if status is not None and 400 <= status < 500:
        return "request", status
    return "other", status


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError):
        return True
    import httpx
    import openai

    return isinstance(exc, openai.APITimeoutError | httpx.TimeoutException)


def _is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError):
        return True
    import httpx
    import openai

    return isinstance(exc, openai.APIConnectionError | httpx.TransportError)


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from ``retry-after-ms`` / ``Retry-After`` response headers, if any."""
    sources = (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "headers", None),
    )
    for source in sources:
        try:
            headers = {str(k).lower(): str(v) for k, v in dict(source or {}).items()}
        except (TypeError, ValueError):
            continue
        with suppress(ValueError):
            if "retry-after-ms" in headers:
                return float(headers["retry-after-ms"]) / 1000.0
        value = headers.get("retry-after")
        if value is None:
            continue
        with suppress(ValueError):
            return float(value)
        with suppress(TypeError, ValueError, IndexError):
            from email.utils import parsedate_to_datetime

            return parsedate_to_datetime(value).timestamp() - time.time()
    return None


def _close_quietly(response: Any) -> None:
    for target in (response, getattr(response, "completion_stream", None)):
        close = getattr(target, "close", None)
        if callable(close):
            with suppress(Exception):
                close()
            return


# --------------------------------------------------------------------------- CallableLLM


def messages_to_prompt(messages: Sequence[Message]) -> str:
    """The one-string prompt :class:`CallableLLM` passes: ``"<role>:\\n<content>"`` per
    message, joined by a blank line, e.g. ``"system:\\nBe brief.\\n\\nuser:\\nHi"``."""
    return "\n\n".join(f"{m['role']}:\n{m['content']}" for m in messages)


class CallableLLM:
    """A function ``prompt -> reply`` (sync or async) used as an :class:`LLM`.

    The messages become one prompt string with :func:`messages_to_prompt`. Exceptions
    from the function become :class:`LLMError` (chained). A sync function runs in a
    worker thread under ``acomplete``; an async one runs with ``asyncio.run`` under
    ``complete`` (so not from inside a running event loop). Streams yield the whole
    reply as one piece. Token counts are unknown (None).
    """

    system = "callable"

    def __init__(
        self, fn: Callable[[str], str] | Callable[[str], Awaitable[str]], *, model: str | None = None
    ):
        if not callable(fn):
            raise TypeError(f"CallableLLM needs a callable, got {type(fn).__name__}")
        self.fn = fn
        qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        self.model = model or f"callable:{qualname}"
        self._is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
        )

    def __repr__(self) -> str:
        return f"CallableLLM({self.model!r})"

    def complete(self, messages: Sequence[Message]) -> LLMReply:
        prompt = messages_to_prompt(messages)
        if self._is_async:
            import asyncio

            with suppress(RuntimeError):
                asyncio.get_running_loop()
                raise TypeError(f"{self.model} is async: use acomplete() inside an event loop")
            return self._wrap(lambda: asyncio.run(self.fn(prompt)))  # type: ignore[arg-type]
        return self._wrap(lambda: self.fn(prompt))

    async def acomplete(self, messages: Sequence[Message]) -> LLMReply:
        prompt = messages_to_prompt(messages)
        try:
            if self._is_async:
                text = await self.fn(prompt)  # type: ignore[misc]
            else:
                import asyncio

                text = await asyncio.to_thread(self.fn, prompt)
        except LLMError:
            raise
        except Exception as exc:
            raise LLMError(f"{self.model} failed: {type(exc).__name__}: {exc}") from exc
        return self._reply(text)

    def stream(self, messages: Sequence[Message]) -> TextStream:
        def produce(out: TextStream) -> Iterator[str]:
            yield self.complete(messages).text

        return TextStream(self.model, produce)

    def astream(self, messages: Sequence[Message]) -> AsyncTextStream:
        async def produce(out: AsyncTextStream) -> AsyncIterator[str]:
            yield (await self.acomplete(messages)).text

        return AsyncTextStream(self.model, produce)

    def _wrap(self, run: Callable[[], Any]) -> LLMReply:
        try:
            text = run()
        except LLMError:
            raise
        except Exception as exc:
            raise LLMError(f"{self.model} failed: {type(exc).__name__}: {exc}") from exc
        return self._reply(text)

    def _reply(self, text: Any) -> LLMReply:
        if not isinstance(text, str):
            raise TypeError(f"{self.model} returned {type(text).__name__}, expected str")
        return LLMReply(text=text, model=self.model)


def as_llm(obj: Any) -> LLM | None:
    """None -> None; a model name -> :class:`LiteLLM`; an LLM -> itself; a callable ->
    :class:`CallableLLM`; anything else -> TypeError."""
    if obj is None:
        return None
    if isinstance(obj, str):
        return LiteLLM(obj)
    if hasattr(obj, "complete"):
        return obj
    if callable(obj):
        return CallableLLM(obj)
    raise TypeError(f"expected a model name, an LLM or a callable, got {type(obj).__name__}")


# --------------------------------------------------------------------------- traced calls


class _Recorder:
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
            input_tokens=_int_or_none(getattr(stream, "input_tokens", None)),
            output_tokens=_int_or_none(getattr(stream, "output_tokens", None)),
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
    recorder = _Recorder(llm, messages, purpose=purpose, telemetry=telemetry, repair=repair)
    try:
        with recorder.current():
            reply = llm.complete(recorder.request)
    except BaseException as exc:
        recorder.fail(exc)
        raise
    return recorder.succeed(reply)


async def acall_llm(
    llm: LLM,
    messages: Sequence[Message],
    *,
    purpose: str,
    telemetry: Telemetry = DEFAULT_TELEMETRY,
    repair: bool = False,
) -> LLMCall:
    """The async twin of :func:`call_llm`."""
    recorder = _Recorder(llm, messages, purpose=purpose, telemetry=telemetry, repair=repair)
    try:
        with recorder.current():
            reply = await llm.acomplete(recorder.request)
    except BaseException as exc:
        recorder.fail(exc)
        raise
    return recorder.succeed(reply)


class LLMStream:
    """A traced streamed call: iterate it (once) for the reply pieces.

    Once exhausted, ``call`` holds the :class:`LLMCall` record and ``text`` the whole
    reply. On failure the typed error is raised from the iteration with ``exc.call``;
    ``call`` is set too. The span starts at the first ``next()``.
    """

    def __init__(
        self,
        llm: LLM,
        messages: Sequence[Message],
        *,
        purpose: str,
        telemetry: Telemetry = DEFAULT_TELEMETRY,
    ) -> None:
        self.llm = llm
        self.messages = [dict(m) for m in messages]
        self.purpose = purpose
        self.telemetry = telemetry
        self.call: LLMCall | None = None
        self._recorder: _Recorder | None = None
        self._started = False

    def __repr__(self) -> str:
        state = "done" if self.call else ("streaming" if self._started else "not started")
        return f"{type(self).__name__}({self.purpose} {getattr(self.llm, 'model', '?')} {state})"

    @property
    def text(self) -> str:
        """The reply so far (all of it once the stream is exhausted)."""
        return "".join(self._recorder.pieces) if self._recorder else ""

    def _begin(self) -> _Recorder:
        if self._started:
            raise RuntimeError(f"{type(self).__name__} can be iterated only once")
        self._started = True
        self._recorder = _Recorder(
            self.llm, self.messages, purpose=self.purpose, telemetry=self.telemetry, repair=False
        )
        return self._recorder

    def __iter__(self) -> Iterator[str]:
        recorder = self._begin()
        return self._run(recorder)

    def _run(self, recorder: _Recorder) -> Iterator[str]:
        pieces: Iterator[str] | None = None
        try:
            pieces = self.llm.stream(recorder.request)
            for piece in pieces:
                if piece:
                    recorder.piece(piece)
                    yield piece
        except BaseException as exc:
            self.call = recorder.fail(exc)
            close = getattr(pieces, "close", None)
            if close is not None:
                with suppress(Exception):
                    close()
            raise
        self.call = recorder.succeed_stream(pieces)


class AsyncLLMStream(LLMStream):
    """The async twin of :class:`LLMStream`: ``async for piece in stream``."""

    def __iter__(self) -> Iterator[str]:
        raise TypeError("AsyncLLMStream is async: use `async for`")

    def __aiter__(self) -> AsyncIterator[str]:
        recorder = self._begin()
        return self._arun(recorder)

    async def _arun(self, recorder: _Recorder) -> AsyncIterator[str]:
        pieces: AsyncIterator[str] | None = None
        try:
            pieces = self.llm.astream(recorder.request)
            async for piece in pieces:
                if piece:
                    recorder.piece(piece)
                    yield piece
        except BaseException as exc:
            self.call = recorder.fail(exc)
            aclose = getattr(pieces, "aclose", None)
            if aclose is not None:
                with suppress(Exception):
                    await aclose()
            raise
        self.call = recorder.succeed_stream(pieces)


def stream_llm(
    llm: LLM, messages: Sequence[Message], *, purpose: str, telemetry: Telemetry = DEFAULT_TELEMETRY
) -> LLMStream:
    """A traced streamed call; see :class:`LLMStream`."""
    return LLMStream(llm, messages, purpose=purpose, telemetry=telemetry)


def astream_llm(
    llm: LLM, messages: Sequence[Message], *, purpose: str, telemetry: Telemetry = DEFAULT_TELEMETRY
) -> AsyncLLMStream:
    """A traced async streamed call; see :class:`AsyncLLMStream`."""
    return AsyncLLMStream(llm, messages, purpose=purpose, telemetry=telemetry)


# --------------------------------------------------------------------------- JSON replies

JSON_REPAIR_PROMPT = (
    "Your previous reply could not be used: {problem}\n"
    "Reply again with only the JSON object, with no other text and no code fences."
)
"""The user message of the one repair attempt of :func:`complete_json`."""

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_SCAN_STARTS = 64


class _UnusableReply(Exception):
    """Why a reply could not be turned into the schema (text for the repair prompt)."""


class _JSONExchange(Generic[M]):
    """The parse / repair logic of complete_json, shared by the sync and async drivers.

    The driver sends ``messages`` (with ``repair``), hands each successful call to
    :meth:`accept` until it returns a value, and passes any call failure to
    :meth:`failed`.
    """

    def __init__(self, messages: Sequence[Message], schema: type[M]) -> None:
        self.schema = schema
        self.original = [dict(m) for m in messages]
        self.messages = self.original
        self.repair = False
        self.calls: list[LLMCall] = []

    def accept(self, call: LLMCall) -> M | None:
        """The validated value; None when a repair attempt must be sent; raises after it."""
        try:
            value = _parse_json_reply(call.reply or "", self.schema)
        except _UnusableReply as problem:
            self.calls.append(replace(call, error=f"LLMOutputError: {problem}"))
            if self.repair:
                error = LLMOutputError(
                    f"{self.schema.__name__}: the reply was unusable even after one repair: {problem}",
                    raw=call.reply,
                )
                error.call = self.calls[-1]  # type: ignore[attr-defined]
                error.calls = list(self.calls)  # type: ignore[attr-defined]
                raise error from None
            self.repair = True
            self.messages = [
                *self.original,
                {"role": "assistant", "content": call.reply or ""},
                {"role": "user", "content": JSON_REPAIR_PROMPT.format(problem=problem)},
            ]
            return None
        self.calls.append(replace(call, parsed=value.model_dump(mode="json")))
        return value

    def failed(self, exc: BaseException) -> None:
        failed_call = getattr(exc, "call", None)
        calls = [*self.calls, failed_call] if isinstance(failed_call, LLMCall) else list(self.calls)
        with suppress(AttributeError):
            exc.calls = calls  # type: ignore[attr-defined]


def complete_json(
    llm: LLM,
    messages: Sequence[Message],
    schema: type[M],
    *,
    purpose: str,
    telemetry: Telemetry = DEFAULT_TELEMETRY,
) -> tuple[M, list[LLMCall]]:
    """Ask for a JSON object and validate it as ``schema``.

    The reply may wrap the object in a ```json fence or in prose. When it cannot be
    parsed or validated, one repair attempt is made: the reply goes back as the
    assistant turn, followed by :data:`JSON_REPAIR_PROMPT` naming the problem. If that
    fails too: :class:`LLMOutputError` (``raw`` = the last reply, ``calls`` = every
    record). Returns the value and the call records (1 or 2).
    """
    exchange = _JSONExchange(messages, schema)
    while True:
        try:
            call = call_llm(
                llm, exchange.messages, purpose=purpose, telemetry=telemetry, repair=exchange.repair
            )
        except BaseException as exc:
            exchange.failed(exc)
            raise
        value = exchange.accept(call)
        if value is not None:
            return value, exchange.calls


async def acomplete_json(
    llm: LLM,
    messages: Sequence[Message],
    schema: type[M],
    *,
    purpose: str,
    telemetry: Telemetry = DEFAULT_TELEMETRY,
) -> tuple[M, list[LLMCall]]:
    """The async twin of :func:`complete_json`."""
    exchange = _JSONExchange(messages, schema)
    while True:
        try:
            call = await acall_llm(
                llm, exchange.messages, purpose=purpose, telemetry=telemetry, repair=exchange.repair
            )
        except BaseException as exc:
            exchange.failed(exc)
            raise
        value = exchange.accept(call)
        if value is not None:
            return value, exchange.calls


def _parse_json_reply(text: str, schema: type[M]) -> M:
    from pydantic import ValidationError

    data = _extract_json(text)
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise _UnusableReply(_describe_validation_error(exc)) from None


def _extract_json(text: str) -> Any:
    """The JSON value in ``text``: the whole text, a fenced block, or the first object/array."""
    stripped = text.strip()
    if not stripped:
        raise _UnusableReply("the reply was empty.")
    with suppress(ValueError):
        return json.loads(stripped)
    for match in _FENCE.finditer(stripped):
        with suppress(ValueError):
            return json.loads(match.group(1).strip())
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(stripped) if ch in "{["][:_MAX_SCAN_STARTS]
    for start in starts:
        with suppress(ValueError):
            value, _ = decoder.raw_decode(stripped, start)
            return value
    raise _UnusableReply("the reply does not contain a JSON object.")


def _describe_validation_error(exc: ValidationError, limit: int = 8) -> str:
    errors = exc.errors(include_url=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "the JSON does not match the expected schema (" + "; ".join(parts) + ")."


# --------------------------------------------------------------------------- helpers


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _snippet(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
