"""The search's hand-off from the event loop to a worker thread, with less work than ``asyncio.to_thread``.

``asyncio.to_thread`` goes through the loop's default ``ThreadPoolExecutor``: a
``concurrent.futures.Future`` (with its ``Condition``), a work item, the pool's idle semaphore, then
``wrap_future`` chaining that future's state back onto an asyncio future by two callbacks. On this
project's 2-CPU benchmark machine a request's code runs cold (the server sleeps while other processes
run), and each of those pieces costs several times its hot time: the hop was 160-240 us of the loop
thread's CPU per request at one client (benchmarks/RESULTS.md, "The serving API under load").

:class:`Handoff` keeps only what the hop needs: the asyncio future, the caller's context (so the
request's span is the parent of the work's spans, as with ``to_thread``) and one
``call_soon_threadsafe`` back. An idle worker is handed the call directly and woken by its own
lock; the most recently idle one first (at one client the same thread serves every request: its
stack is the warmest). With no worker idle and fewer than ``max_workers`` running, one is started;
beyond that the call waits in a backlog the workers take from before they go idle. As with
``to_thread``, a cancelled await does not stop a call already running.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Handoff"]

T = TypeVar("T")

# (loop, the awaited future, the caller's context, fn, args)
_Call = tuple[asyncio.AbstractEventLoop, Any, contextvars.Context, Callable[..., Any], tuple[Any, ...]]


class _Worker:
    __slots__ = ("call", "wake")

    def __init__(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()  # released by the hand-off that gives this worker a call
        self.call: _Call | None = None


class Handoff:
    """``await handoff.run(fn, *args)``: ``fn(*args)`` on a worker thread (see the module)."""

    def __init__(self, max_workers: int, *, name: str = "agentrag-search") -> None:
        self.max_workers, self.name = max(1, max_workers), name
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []  # a stack: the most recently idle worker last
        self._backlog: deque[_Call] = deque()
        self._started = 0
        self._closed = False

    @property
    def workers(self) -> int:
        """The worker threads started so far (at most ``max_workers``)."""
        return self._started

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._hand(loop, future, contextvars.copy_context(), fn, args)
        return await future

    def close(self) -> None:
        """Stop the idle workers, and each busy one once its call is done (calls still in the
        backlog are run first)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.wake.release()  # with no call: it exits

    def _hand(self, *call: Any) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the hand-off is closed")
            if self._idle:
                worker = self._idle.pop()
                worker.call = call
                worker.wake.release()
                return
            if self._started >= self.max_workers:
                self._backlog.append(call)
                return
            self._started += 1
            number = self._started - 1
        thread = threading.Thread(target=self._work, args=(call,), name=f"{self.name}_{number}", daemon=True)
        thread.start()

    def _work(self, call: _Call | None) -> None:
        worker = _Worker()
        while call is not None:
            loop, future, context, fn, args = call
            del call
            answer: tuple[Any, Any, BaseException | None]
            try:
                answer = (future, context.run(fn, *args), None)
            except BaseException as exc:  # raised where the call is awaited; the worker serves on
                answer = (future, None, exc)
            with self._lock:  # idle before the answer is sent: the caller's next call finds it so
                call = self._backlog.popleft() if self._backlog else None
                waits = call is None and not self._closed
                if waits:
                    self._idle.append(worker)
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits the answer
                loop.call_soon_threadsafe(_settle, *answer)
            del answer
            if waits:
                worker.wake.acquire()
                call, worker.call = worker.call, None


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
