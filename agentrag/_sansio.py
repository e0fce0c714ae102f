"""One body for a sync/async pair: write the logic once as a generator, drive it twice.

A body is a generator that ``yield``\\ s an :class:`Op` wherever it must wait (a model call,
a database search, a backoff sleep) and receives the Op's result (or has its exception
raised at the ``yield``). :func:`run_sync` performs each Op by calling it; :func:`run_async`
by awaiting its async form. The body's ``return`` value is what both return::

    def _call(llm, messages):                       # the logic, once
        reply = yield either(llm.complete, llm.acomplete, messages)
        return record(reply)

    def call(llm, messages):                        # the sync shell
        return run_sync(_call(llm, messages))

    async def acall(llm, messages):                 # the async shell
        return await run_async(_call(llm, messages))

A streaming body also ``yield``\\ s :class:`Emit` items: :func:`stream_sync` /
:func:`stream_async` hand them to their consumer. An exception at the consumer's end (it
closed the stream) is raised inside the body at its ``yield Emit(...)``, and the body may
still wait on Ops (an async ``aclose``) before it re-raises.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "END",
    "Body",
    "Emit",
    "Op",
    "blocking",
    "choose",
    "close",
    "concurrently",
    "either",
    "next_item",
    "run_async",
    "run_sync",
    "stream_async",
    "stream_sync",
]

END: Any = object()
"""What :func:`next_item` returns after the last item."""

R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Op:
    """One wait of a body: ``run()`` in the sync shell, ``await arun()`` in the async one."""

    run: Callable[[], Any]
    arun: Callable[[], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Emit:
    """An item a streaming body hands to its consumer."""

    item: Any


Body = Generator[Any, Any, R]  # yields Op (and, when streaming, Emit)


def either(
    sync: Callable[..., Any], async_: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any
) -> Op:
    """``sync(*args, **kwargs)``, or ``await async_(*args, **kwargs)``."""
    return Op(lambda: sync(*args, **kwargs), lambda: async_(*args, **kwargs))


def choose(sync: Callable[[], Any], async_: Callable[[], Any]) -> Op:
    """``sync()`` in the sync shell, ``async_()`` in the async one (neither waits)."""

    async def chosen() -> Any:
        return async_()

    return Op(sync, chosen)


def next_item(iterator: Any) -> Op:
    """The iterator's next item, or :data:`END`: ``next()`` / ``await anext()``."""
    return Op(lambda: next(iterator, END), lambda: anext(iterator, END))


def close(iterator: Any) -> Op:
    """Close an iterator, quietly: ``close()`` / ``await aclose()`` where it has one."""

    def sync() -> None:
        with suppress(Exception):
            getattr(iterator, "close", lambda: None)()

    async def async_() -> None:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            with suppress(Exception):
                await aclose()

    return Op(sync, async_)


def blocking(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Op:
    """``function(...)``; in the async shell in a worker thread (``asyncio.to_thread``)."""

    async def in_thread() -> Any:
        import asyncio

        return await asyncio.to_thread(function, *args, **kwargs)

    return Op(lambda: function(*args, **kwargs), in_thread)


def concurrently(calls: Sequence[Callable[[], T]]) -> Op:
    """The results of ``calls`` in order: one after the other, or in worker threads at once."""

    async def gathered() -> list[T]:
        import asyncio

        return list(await asyncio.gather(*(asyncio.to_thread(call) for call in calls)))

    return Op(lambda: [call() for call in calls], gathered)


@dataclass(frozen=True, slots=True)
class _Done:
    value: Any


def _advance(body: Body[Any], value: Any, error: BaseException | None) -> Op | _Done:
    """Resume ``body`` with the last Op's result (or raise its error inside): the next Op, or done."""
    try:
        return body.throw(error) if error is not None else body.send(value)
    except StopIteration as stop:
        return _Done(stop.value)


def _outcome(run: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return run(), None
    except BaseException as exc:  # handed to the body, which decides (a cancel included)
        return None, exc


async def _aoutcome(op: Op) -> tuple[Any, BaseException | None]:
    try:
        return await op.arun(), None
    except BaseException as exc:  # as in _outcome
        return None, exc


def run_sync(body: Body[R]) -> R:
    """Drive ``body`` synchronously; its return value."""
    step = _advance(body, None, None)
    while isinstance(step, Op):
        step = _advance(body, *_outcome(step.run))
    return step.value


async def run_async(body: Body[R]) -> R:
    """Drive ``body``, awaiting each Op; its return value."""
    step = _advance(body, None, None)
    while isinstance(step, Op):
        step = _advance(body, *(await _aoutcome(step)))
    return step.value


def stream_sync(body: Body[None]) -> Generator[Any, None, None]:
    """Drive a streaming ``body``: its Emit items, as an iterator."""
    sent: tuple[Any, BaseException | None] = (None, None)
    while not isinstance(step := _advance(body, *sent), _Done):
        try:
            sent = _outcome(step.run) if isinstance(step, Op) else (yield step.item) or (None, None)
        except BaseException as exc:  # the consumer stopped: the body cleans up and re-raises
            sent = (None, exc)


async def stream_async(body: Body[None]) -> AsyncGenerator[Any, None]:
    """Drive a streaming ``body``, awaiting each Op: its Emit items, as an async iterator."""
    sent: tuple[Any, BaseException | None] = (None, None)
    while not isinstance(step := _advance(body, *sent), _Done):
        try:
            sent = await _aoutcome(step) if isinstance(step, Op) else (yield step.item) or (None, None)
        except BaseException as exc:  # as in stream_sync
            sent = (None, exc)
