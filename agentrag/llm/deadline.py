"""One deadline across a run's calls: ``Budget(max_seconds=...)`` as a timeout on every LLM call.

A step that calls a model opens :func:`deadline_scope` with the run's deadline (the Context's
creation time plus ``max_seconds``); :func:`remaining` then gives the seconds left to anything
called inside it, in this thread or in a worker thread started with ``asyncio.to_thread`` (the
deadline is a context variable, copied into the thread). :func:`call_within` runs one model call
under it:

* no deadline: the call runs as is;
* the deadline already passed: :class:`~agentrag.errors.BudgetExceededError` before the call;
* otherwise the call runs in a daemon thread, and the caller waits at most the time left. A call
  still running then is abandoned (its thread finishes on its own; its reply is dropped) and
  :class:`~agentrag.errors.BudgetExceededError` is raised. :class:`~agentrag.llm.LiteLLM` also
  passes the time left as litellm's ``timeout`` (:func:`timeout_within`), so its HTTP request stops
  there too; so does ``LiteLLMEmbedder`` for a query embedded by a search step under a budget,
and :func:`agentrag.retrieval.search.search` gives its transaction's statements the time left as
PostgreSQL's ``statement_timeout``.

:func:`acall_within` is the async twin: at the deadline the call's task is cancelled and left to
finish its cleanup on its own (the caller does not wait for it).
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from agentrag.errors import BudgetExceededError

__all__ = [
    "acall_within",
    "budget_exceeded",
    "call_within",
    "deadline_scope",
    "remaining",
    "timeout_within",
]

T = TypeVar("T")

# (wall-clock deadline, the budget in seconds) of the current run, or None
_DEADLINE: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "agentrag_deadline", default=None
)


@contextmanager
def deadline_scope(at: float | None, limit_s: float | None = None) -> Iterator[None]:
    """Make ``at`` (``time.time()`` seconds) the deadline of the calls inside; None: no deadline.
    An earlier deadline already in force stays in force."""
    if at is None:
        yield
        return
    current = _DEADLINE.get()
    if current is not None and current[0] <= at:
        yield
        return
    token = _DEADLINE.set((at, limit_s if limit_s is not None else 0.0))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    """Seconds left before the current deadline (may be <= 0), or None without one."""
    current = _DEADLINE.get()
    return None if current is None else current[0] - time.time()


def timeout_within(timeout: float) -> float:
    """``timeout``, or less: the time left before the current deadline (for a client's own timeout:
    litellm's completion and embedding calls)."""
    left = remaining()
    return timeout if left is None else max(0.001, min(timeout, left))


def budget_exceeded(what: str) -> BudgetExceededError:
    """The typed error for ``what`` stopped (or not started) at the current deadline."""
    current = _DEADLINE.get()
    limit = current[1] if current else None
    shown = f" of {limit:g}s" if limit else ""
    return BudgetExceededError(f"{what}: the time budget{shown} ran out", limit_s=limit, what=what)


def call_within(what: str, call: Callable[[], T]) -> T:
    """``call()`` bounded by the current deadline (see the module docstring)."""
    left = remaining()
    if left is None:
        return call()
    if left <= 0:
        raise budget_exceeded(what)
    box: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            box["value"] = context.run(call)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="agentrag-deadline", daemon=True).start()
    if not done.wait(left):
        raise budget_exceeded(what)
    if "error" in box:
        raise box["error"]
    return box["value"]


async def acall_within(what: str, call: Callable[[], Awaitable[T]]) -> T:
    """The async twin of :func:`call_within`: the awaitable is cancelled at the deadline."""
    import asyncio

    left = remaining()
    if left is None:
        return await call()
    if left <= 0:
        raise budget_exceeded(what)
    task = asyncio.ensure_future(call())
    done, _ = await asyncio.wait({task}, timeout=left)
    if not done:  # cancelled, not waited for: its cleanup (closing a connection) runs on its own
        task.cancel()
        task.add_done_callback(_quiet)
        raise budget_exceeded(what)
    return task.result()


def _quiet(task: Any) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved" warning
