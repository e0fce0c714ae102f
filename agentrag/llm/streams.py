"""Streaming: the stream objects a model returns (:class:`TextStream`) and traced streamed
calls (:func:`stream_llm`: an :class:`LLMStream` that records an :class:`LLMCall` at its end)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from agentrag._sansio import END, Body, Emit, Op, close, stream_async, stream_sync
from agentrag.errors import AgentragError
from agentrag.llm.calls import CallRecorder, foreign_llm_error
from agentrag.llm.deadline import acall_within, call_within
from agentrag.llm.protocol import LLM, LLMCall, Message
from agentrag.telemetry import DEFAULT_TELEMETRY, Telemetry

__all__ = ["AsyncLLMStream", "AsyncTextStream", "LLMStream", "TextStream", "astream_llm", "stream_llm"]


class _Usage:
    """What a stream knows once it is exhausted: model, token counts, retries."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.retries = 0


class TextStream(_Usage):
    """An iterator of reply pieces that also carries usage once it is exhausted.

    ``produce(stream)`` returns the pieces and may set ``stream.input_tokens``,
    ``stream.output_tokens``, ``stream.model`` and ``stream.retries`` as it goes.
    """

    def __init__(self, model: str, produce: Callable[[TextStream], Iterator[str]]) -> None:
        super().__init__(model)
        self._pieces = produce(self)

    def __iter__(self) -> TextStream:
        return self

    def __next__(self) -> str:
        return next(self._pieces)

    def close(self) -> None:
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()


class AsyncTextStream(_Usage):
    """The async twin of :class:`TextStream`."""

    def __init__(self, model: str, produce: Callable[[AsyncTextStream], AsyncIterator[str]]) -> None:
        super().__init__(model)
        self._pieces = produce(self)

    def __aiter__(self) -> AsyncTextStream:
        return self

    async def __anext__(self) -> str:
        return await self._pieces.__anext__()

    async def aclose(self) -> None:
        aclose = getattr(self._pieces, "aclose", None)
        if aclose is not None:
            await aclose()


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
        self._recorder: CallRecorder | None = None
        self._started = False

    def __repr__(self) -> str:
        state = "done" if self.call else ("streaming" if self._started else "not started")
        return f"{type(self).__name__}({self.purpose} {getattr(self.llm, 'model', '?')} {state})"

    @property
    def text(self) -> str:
        """The reply so far (all of it once the stream is exhausted)."""
        return "".join(self._recorder.pieces) if self._recorder else ""

    def _begin(self) -> CallRecorder:
        if self._started:
            raise RuntimeError(f"{type(self).__name__} can be iterated only once")
        self._started = True
        self._recorder = CallRecorder(
            self.llm, self.messages, purpose=self.purpose, telemetry=self.telemetry, repair=False
        )
        return self._recorder

    def __iter__(self) -> Iterator[str]:
        return stream_sync(self._run(self._begin(), lambda request: iter(self.llm.stream(request))))

    def _run(self, recorder: CallRecorder, open_: Callable[[list[Message]], Any]) -> Body[None]:
        """The one body of the sync and async iteration (see :mod:`agentrag._sansio`)."""
        pieces: Any = None
        try:
            pieces = open_(recorder.request)
            while (piece := (yield _next_within(pieces, self.purpose))) is not END:
                if piece:
                    recorder.piece(piece)
                    yield Emit(piece)
        except AgentragError as exc:
            self.call = recorder.fail(exc)
            yield close(pieces)
            raise
        except Exception as exc:  # a stream outside agentrag raised its own error: typed here
            error = foreign_llm_error(self.llm, exc)
            self.call = recorder.fail(error)
            yield close(pieces)
            raise error from None
        except BaseException as exc:
            self.call = recorder.fail(exc)
            yield close(pieces)
            raise
        self.call = recorder.succeed_stream(pieces)


def _next_within(pieces: Any, purpose: str) -> Op:
    """The next piece, bounded by the run's deadline (:mod:`agentrag.llm.deadline`)."""
    what = f"llm:{purpose}"
    return Op(
        lambda: call_within(what, lambda: next(pieces, END)),
        lambda: acall_within(what, lambda: anext(pieces, END)),
    )


class AsyncLLMStream(LLMStream):
    """The async twin of :class:`LLMStream`: ``async for piece in stream``."""

    def __iter__(self) -> Iterator[str]:
        raise TypeError("AsyncLLMStream is async: use `async for`")

    def __aiter__(self) -> AsyncIterator[str]:
        return stream_async(self._run(self._begin(), lambda request: aiter(self.llm.astream(request))))


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
