"""agentrag._sansio: one generator body, driven by a sync and an async shell, behaves the same."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agentrag._sansio import (
    END,
    Body,
    Emit,
    Op,
    blocking,
    close,
    concurrently,
    either,
    next_item,
    run_async,
    run_sync,
    stream_async,
    stream_sync,
)


async def _double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


def _body(log: list[str]) -> Body[int]:
    a = yield either(lambda x: 2 * x, _double, 3)
    b = yield blocking(lambda: a + 1)
    c = yield concurrently([lambda: b, lambda: b * 10])
    try:
        yield either(_fail, _afail)
    except ValueError as exc:  # the Op's error is raised inside the body, at its yield
        log.append(str(exc))
    return a + b + sum(c)


def _fail() -> None:
    raise ValueError("sync failed")


async def _afail() -> None:
    raise ValueError("async failed")


def test_both_shells_give_the_body_the_same_results() -> None:
    sync_log: list[str] = []
    async_log: list[str] = []
    assert run_sync(_body(sync_log)) == 6 + 7 + 77
    assert asyncio.run(run_async(_body(async_log))) == 6 + 7 + 77
    assert sync_log == ["sync failed"] and async_log == ["async failed"]


def test_an_error_the_body_does_not_catch_leaves_the_shell() -> None:
    def body() -> Body[None]:
        yield either(_fail, _afail)

    with pytest.raises(ValueError, match="sync failed"):
        run_sync(body())
    with pytest.raises(ValueError, match="async failed"):
        asyncio.run(run_async(body()))


class _Pieces:
    """An iterator (sync and async) that records whether it was closed."""

    def __init__(self, items: list[str]) -> None:
        self.items = list(items)
        self.closed = False

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if not self.items:
            raise StopIteration
        return self.items.pop(0)

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        if not self.items:
            raise StopAsyncIteration
        return self.items.pop(0)

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


def _stream(pieces: _Pieces, log: list[str]) -> Body[None]:
    try:
        while (piece := (yield next_item(pieces))) is not END:
            yield Emit(piece.upper())
        log.append("done")
    except BaseException as exc:
        yield close(pieces)  # the body may still wait on its cleanup before it re-raises
        log.append(type(exc).__name__)
        raise


async def _collect(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]


def test_streams_hand_out_the_same_items() -> None:
    sync_log: list[str] = []
    async_log: list[str] = []
    assert list(stream_sync(_stream(_Pieces(["a", "b"]), sync_log))) == ["A", "B"]
    assert asyncio.run(_collect(stream_async(_stream(_Pieces(["a", "b"]), async_log)))) == ["A", "B"]
    assert sync_log == async_log == ["done"]


def test_a_consumer_that_stops_reaches_the_bodys_cleanup() -> None:
    log: list[str] = []
    pieces = _Pieces(["a", "b", "c"])
    items = stream_sync(_stream(pieces, log))
    assert next(items) == "A"
    items.close()
    assert pieces.closed and log == ["GeneratorExit"]

    async def stop_early() -> tuple[_Pieces, list[str]]:
        alog: list[str] = []
        apieces = _Pieces(["a", "b", "c"])
        aitems = stream_async(_stream(apieces, alog))
        assert await aitems.__anext__() == "A"
        await aitems.aclose()
        return apieces, alog

    apieces, alog = asyncio.run(stop_early())
    assert apieces.closed and alog == ["GeneratorExit"]


def test_an_op_is_only_a_pair_of_callables() -> None:
    op = Op(lambda: "sync", lambda: asyncio.sleep(0, "async"))
    assert run_sync(_one(op)) == "sync"
    assert asyncio.run(run_async(_one(op))) == "async"


def _one(op: Op) -> Body[Any]:
    return (yield op)
