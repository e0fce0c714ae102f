"""Plain functions as models (:class:`CallableLLM`) and :func:`as_llm`, which turns what a user
passes as ``llm=`` into an :class:`~agentrag.llm.protocol.LLM`."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import suppress
from typing import Any

from agentrag.errors import LLMError
from agentrag.llm.litellm_adapter import LiteLLM
from agentrag.llm.protocol import LLM, LLMReply, Message
from agentrag.llm.streams import AsyncTextStream, TextStream

__all__ = ["CallableLLM", "as_llm", "messages_to_prompt"]


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
