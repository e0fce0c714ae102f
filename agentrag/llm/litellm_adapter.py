"""The litellm adapter, :class:`LiteLLM`, with agentrag's own retries (backoff, ``Retry-After``)."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import Any

from agentrag._sansio import (
    END,
    Body,
    Emit,
    Op,
    close,
    either,
    next_item,
    run_async,
    run_sync,
    stream_async,
    stream_sync,
)
from agentrag.errors import LLMAuthError, LLMError, LLMRateLimitError, LLMRequestError, LLMTimeoutError
from agentrag.llm.deadline import timeout_within
from agentrag.llm.protocol import LLMReply, Message, int_or_none, snippet
from agentrag.llm.streams import AsyncTextStream, TextStream

__all__ = ["LiteLLM"]

_RETRYABLE = frozenset({"timeout", "rate_limit", "server", "connection"})
_RESERVED_KWARGS = frozenset({"model", "messages", "stream", "num_retries", "max_retries"})


class LiteLLM:
    """Any model litellm supports, with agentrag's own retries.

    litellm's and the OpenAI client's retries are off (``num_retries=0``,
    ``max_retries=0``). Instead, 429s, 5xx, connection errors and timeouts are retried
    up to ``max_retries`` times, waiting ``min(max_backoff, backoff * 2**attempt)``
    with jitter (between half and all of it); a 429 with a ``Retry-After`` (or
    ``retry-after-ms``) header waits that long instead, capped at ``max_backoff``.
    Other 4xx are never retried, nor is a missing or rejected credential (401 / 403, or the
    client refusing to send without a key): that is :class:`LLMAuthError`, naming the
    environment variable the provider needs. (litellm reports a reply body it cannot parse as a
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

    # ---- public API: each sync/async pair drives one body (see agentrag._sansio)

    def complete(self, messages: Sequence[Message]) -> LLMReply:
        return self._reply(*run_sync(self._completion(self._request(messages, stream=False))))

    async def acomplete(self, messages: Sequence[Message]) -> LLMReply:
        return self._reply(*await run_async(self._completion(self._request(messages, stream=False))))

    def stream(self, messages: Sequence[Message]) -> TextStream:
        """Pieces of the reply as they arrive. Retries happen only before the first piece."""
        request = self._request(messages, stream=True)
        return TextStream(self.model, lambda out: stream_sync(self._pieces(request, out)))

    def astream(self, messages: Sequence[Message]) -> AsyncTextStream:
        request = self._request(messages, stream=True)
        return AsyncTextStream(self.model, lambda out: stream_async(self._pieces(request, out)))

    def _completion(self, request: dict[str, Any]) -> Body[tuple[Any, int]]:
        """The response (after retries) and how many attempts failed before it."""
        litellm = _litellm()
        attempt = 0
        while True:
            try:
                return (yield either(litellm.completion, litellm.acompletion, **request)), attempt
            except Exception as exc:
                delay = self._retry_delay(exc, attempt)  # raises the typed error when giving up
            yield either(self._sleep, self._async_sleep or _asyncio_sleep, delay)
            attempt += 1

    def _pieces(self, request: dict[str, Any], out: TextStream | AsyncTextStream) -> Body[None]:
        """The streamed reply's text pieces (Emit); usage and retries go on ``out``."""
        response, out.retries = yield from self._completion(request)
        try:
            while (chunk := (yield next_item(response))) is not END:
                text = self._chunk(chunk, out)
                if text:
                    yield Emit(text)
        except Exception as exc:
            raise self._error(exc, out.retries) from exc
        finally:
            yield Op(lambda: _close_quietly(response), close(response).arun)

    # ---- request / response

    def _request(self, messages: Sequence[Message], *, stream: bool) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "timeout": timeout_within(self.timeout),
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
            raise LLMError(f"{self.model}: the response has no message: {snippet(repr(response))}") from exc
        usage = getattr(response, "usage", None)
        return LLMReply(
            text=str(text),
            model=str(getattr(response, "model", None) or self.model),
            input_tokens=int_or_none(getattr(usage, "prompt_tokens", None)),
            output_tokens=int_or_none(getattr(usage, "completion_tokens", None)),
            retries=retries,
        )

    @staticmethod
    def _chunk(chunk: Any, out: TextStream | AsyncTextStream) -> str | None:
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            out.input_tokens = int_or_none(getattr(usage, "prompt_tokens", None)) or out.input_tokens
            out.output_tokens = int_or_none(getattr(usage, "completion_tokens", None)) or out.output_tokens
        choices = getattr(chunk, "choices", None)
        if not choices:
            return None
        delta = getattr(choices[0], "delta", None)
        content = getattr(delta, "content", None)
        return content if isinstance(content, str) else None

    # ---- retries

    def _retry_delay(self, exc: Exception, attempt: int) -> float:
        """Seconds to wait before retrying ``exc``; raises the typed error when not retrying."""
        kind, _ = _classify(exc)
        if kind not in _RETRYABLE or attempt >= self.max_retries:
            raise self._error(exc, attempt) from exc
        if kind == "rate_limit":
            retry_after = retry_after_seconds(exc)
            if retry_after is not None:
                return min(max(retry_after, 0.0), self.max_backoff)
        ceiling = min(self.max_backoff, self.backoff * 2**attempt)
        return ceiling / 2 + random.uniform(0.0, ceiling / 2)

    def _error(self, exc: Exception, retries: int) -> LLMError:
        kind, status = _classify(exc)
        attempts = f"after {retries + 1} attempt{'s' if retries else ''}"
        # The provider's message stays off the error's text (it may echo the prompt: the question,
        # retrieved documents); it is kept on ``error.detail`` for code that wants it.
        detail = type(exc).__name__
        error: LLMError
        if kind == "timeout":
            error = LLMTimeoutError(f"{self.model}: no reply within {self.timeout}s ({attempts}): {detail}")
        elif kind == "rate_limit":
            error = LLMRateLimitError(f"{self.model}: rate limited (429) {attempts}: {detail}")
        elif kind == "auth":
            error = _auth_error(self.model, status, detail, has_key=self._api_key is not None)
        elif kind == "request":
            error = LLMRequestError(f"{self.model}: request rejected ({status}): {detail}")
        else:
            error = LLMError(f"{self.model}: call failed {attempts}: {detail}")
        error.detail = snippet(str(exc) or type(exc).__name__, 300)  # type: ignore[attr-defined]
        error.retries = retries  # type: ignore[attr-defined]
        error.status_code = status  # type: ignore[attr-defined]
        return error


def _asyncio_sleep(seconds: float) -> Awaitable[None]:
    import asyncio

    return asyncio.sleep(seconds)


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
    if _is_auth_error(exc, status):
        return "auth", status
    if _is_connection_error(exc):
        return "connection", status
    if status is not None and status >= 500:
        return "server", status
    if status is not None and 400 <= status < 500:
        return "request", status
    return "other", status


def _is_auth_error(exc: BaseException, status: int | None) -> bool:
    """401 / 403, or the client refusing to send a request without an API key."""
    if status in (401, 403) or type(exc).__name__ in ("AuthenticationError", "PermissionDeniedError"):
        return True
    if status is not None and status != 500:
        return False
    # the client refusing to send without a key; litellm wraps it as an InternalServerError (500)
    text = str(exc).lower()
    return "missing credentials" in text or "api_key client option" in text or "no api key" in text


def _auth_error(model: str, status: int | None, detail: str, *, has_key: bool) -> LLMAuthError:
    """An LLMAuthError naming the credential: the environment variables litellm expects for ``model``."""
    missing: tuple[str, ...] = ()
    if not has_key:
        try:
            missing = tuple(_litellm().validate_environment(model=model).get("missing_keys") or ())
        except Exception:  # an unknown provider: say what we know
            missing = ()
    if missing:
        need = f"set {' or '.join(missing)} (or pass api_key= to ar.LiteLLM)"
        what = "missing credential"
    else:
        need = "check the API key (environment variable or api_key=) and its permissions"
        what = "credential rejected" + (f" ({status})" if status else "")
    return LLMAuthError(f"{model}: {what}: {need}; not retried: {detail}", missing=missing)


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


def retry_after_seconds(exc: BaseException) -> float | None:
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
