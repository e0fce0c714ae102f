"""A hybrid search's BM25 leg ranked beside its vector leg's SQL, not after it.

The vector leg spends most of its time waiting on PostgreSQL (the GIL released); the BM25 leg is
in-process arithmetic over the cached index. When the BM25 leg needs no SQL for any collection of
the search (each collection's leg is unrestricted, or restricted to the document ids the scope
planner already read in this transaction), it runs on a small shared thread pool while the vector
statement runs on the search's connection. It starts just before that statement is sent (started
earlier, its Python holds the GIL while the statement is still being prepared), and it never
touches that connection: it is handed :class:`NoConnection`, which raises if a code path tries.

Nothing can wait on a busy pool: a job that has not started when the vector leg is done is
cancelled and run in the search's thread, exactly as before. A busy process (more searches in
flight than half its cores) runs the legs in turn: the overlap buys latency when cores are idle and
costs throughput when they are not. ``ENABLED = False`` runs every leg in turn (the benchmarks' A/B
switch).
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, NoReturn

__all__ = ["BUSY", "ENABLED", "LexicalJob", "NoConnection", "beside", "searching"]

#: run the BM25 leg beside the vector leg when it needs no SQL (False: one after the other)
ENABLED = True
#: threads shared by every search of the process: enough for a few searches at once, and a job
#: that finds none free runs in its search's own thread instead of waiting
WORKERS = 4

#: a leg's ranking ``[(chunk_id, score), ...]`` and the milliseconds it took
Timed = tuple[list[tuple[str, float]], float]

#: more searches in flight in this process than this (half its cores), and each runs its legs in turn:
#: with the cores busy a second thread per search only adds GIL handoffs (HTTP /search at 16 clients on
#: 2 cores: 5-8 % fewer requests/s beside than in turn)
BUSY = max(1, (os.cpu_count() or 2) // 2)

_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None
_in_flight: list[int] = [0, 0]  # [the pid counting, searches in flight]: a forked child starts at 0


class NoConnection:
    """Stands for the search's connection in the BM25 leg run off its thread: a leg that would run
    SQL there is a bug (two threads on one connection), raised instead of corrupting it."""

    def execute(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise RuntimeError("the BM25 leg ran SQL off the search's thread; it must be planned without SQL")


def _executor() -> ThreadPoolExecutor:
    """The process's pool (a forked child makes its own: the parent's threads do not exist there)."""
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(WORKERS, thread_name_prefix="agentrag-bm25"))
        return _pool[1]


@contextmanager
def searching() -> Iterator[None]:
    """Counts a search in flight (from taking a connection to its last row) while the block runs."""
    with _lock:
        if _in_flight[0] != os.getpid():
            _in_flight[:] = [os.getpid(), 0]
        _in_flight[1] += 1
    try:
        yield
    finally:
        with _lock:
            if _in_flight[0] == os.getpid():
                _in_flight[1] -= 1


def beside() -> bool:
    """Whether a search's BM25 leg may run beside its vector statement now: the switch is on and no
    more than :data:`BUSY` searches are in flight (this one included)."""
    return ENABLED and _in_flight[0] == os.getpid() and _in_flight[1] <= BUSY


class LexicalJob:
    """The BM25 leg, started; :meth:`result` returns ``(ranked, milliseconds)``."""

    def __init__(self, leg: Callable[[], list[tuple[str, float]]]) -> None:
        self._leg = leg
        context = contextvars.copy_context()  # the caller's deadline and telemetry context
        self._future: Future[Timed] = _executor().submit(context.run, self._timed)

    def _timed(self) -> Timed:
        t = time.perf_counter()
        ranked = self._leg()
        return ranked, (time.perf_counter() - t) * 1000

    def result(self) -> Timed:
        if self._future.cancel():  # never started (every worker busy): run it here
            return self._timed()
        return self._future.result()
