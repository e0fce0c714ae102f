"""Metric measurements taken while a search request is served, recorded once its response is sent.

A served search records four or five measurements in its worker thread (the search step's
duration, the retriever's calls, duration and hits): each is ~5 us of the OpenTelemetry SDK's
Python hot (attribute hashing, the aggregation's lock), several times that when the request's code
runs cold, and all of it before the response could leave. :class:`DeferringMeterProvider` wraps
the service's own ``MeterProvider`` (:func:`agentrag.server.metrics.server_telemetry`): its
histograms and counters record at once, except inside :func:`deferring`'s block, where a
measurement is queued with its value and a copy of its attributes, to be recorded by
:meth:`Deferred.record` after the response is written. The same values reach the same instruments
with the same attributes: only *when* changes (a scrape in between sees the request's measurements
a few microseconds later). A measurement taken after the queue was recorded (work still running
when its request ended) is recorded at once. A measurement given an explicit OpenTelemetry
``context`` is recorded at once. Other instruments (observable ones, gauges) are the SDK's own.

:class:`~agentrag.server.fastpath.SearchFastPath` defers only when its request is the only one in
flight, so the event loop would idle after the response anyway. Under load the event loop is
what every request waits for (py-spy at 16 clients: two thirds of the time the GIL is held, it is
the event loop that holds it), so the worker records its measurements as it goes, as before.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import Any

__all__ = ["Deferred", "DeferringMeterProvider", "deferring"]


class Deferred:
    """The measurements of one request not recorded yet (see the module)."""

    __slots__ = ("_lock", "_open", "items")

    def __init__(self) -> None:
        self.items: list[tuple[Any, float, Any]] = []  # (the instrument's own record/add, value, attributes)
        self._lock = threading.Lock()
        self._open = True

    def queue(self, record: Any, amount: float, attributes: Any) -> bool:
        """Queue one measurement; False once :meth:`record` ran (the caller records it itself)."""
        with self._lock:
            if self._open:
                self.items.append((record, amount, attributes))
                return True
        return False

    def record(self) -> None:
        """Record every queued measurement, in order; later ones are recorded as they come."""
        with self._lock:
            self._open = False
            items, self.items = self.items, []
        for record, amount, attributes in items:
            record(amount, attributes)


_CURRENT: ContextVar[Deferred | None] = ContextVar("agentrag_deferred_measurements", default=None)


class deferring:  # a context manager, named as one
    """``with deferring() as deferred:`` measurements taken in this context (and in worker threads
    running a copy of it) wait for ``deferred.record()``, which the ``with`` block does not call.
    ``deferring(False)``: nothing waits (``deferred.record()`` has nothing to record)."""

    __slots__ = ("deferred", "token", "when")

    def __init__(self, when: bool = True) -> None:
        self.when = when

    def __enter__(self) -> Deferred:
        self.deferred = Deferred()
        self.token = _CURRENT.set(self.deferred if self.when else None)
        return self.deferred

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self.token)


class _Instrument:
    """A histogram or counter: ``record`` / ``add`` queued inside :func:`deferring`."""

    __slots__ = ("_inner", "_now")

    def __init__(self, inner: Any, method: str) -> None:
        self._inner = inner
        self._now = getattr(inner, method)

    def _measure(self, amount: float, attributes: Any = None, context: Any = None) -> None:
        deferred = _CURRENT.get()
        if deferred is None or context is not None:
            self._now(amount, attributes, context)
        elif not deferred.queue(self._now, amount, dict(attributes) if attributes else attributes):
            self._now(amount, attributes)

    record = add = _measure

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Meter:
    __slots__ = ("_inner",)

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_histogram(self, *args: Any, **kwargs: Any) -> _Instrument:
        return _Instrument(self._inner.create_histogram(*args, **kwargs), "record")

    def create_counter(self, *args: Any, **kwargs: Any) -> _Instrument:
        return _Instrument(self._inner.create_counter(*args, **kwargs), "add")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class DeferringMeterProvider:
    """``provider`` whose meters' histograms and counters honour :func:`deferring` (see the module)."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider

    def get_meter(self, *args: Any, **kwargs: Any) -> _Meter:
        return _Meter(self.provider.get_meter(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:  # shutdown, force_flush
        return getattr(self.provider, name)
