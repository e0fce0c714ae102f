"""The service's own metric measurements, recorded in batches.

Every request records a handful of measurements: the request's duration (``ObserveMiddleware``),
the search step's duration, the retriever's calls, duration and hits. Each is a call into the
OpenTelemetry SDK's Python (the attributes hashed into a key, the aggregation's lock): ~5-12 us hot,
several times that when it runs cold, as it does for a lone request whose code has left the caches
by the time it records (session 25: the request histogram's record alone cost a lone client 0.09-0.20
ms of its 2 ms over the in-process search).

:class:`BatchingMeterProvider` wraps the service's own ``MeterProvider``
(:func:`agentrag.server.metrics.server_telemetry`): its histograms and counters append each
measurement (the instrument, the value and a copy of its attributes) to one queue, and the queue is
recorded into the SDK, in order, as one hot loop:

* at every collection, before the readers read anything (an observable instrument's callback: the
  SDK runs them first), so ``/metrics``, the trace file's exporter and any reader a deployment adds
  see every measurement taken before they collect, as before;
* when it holds :data:`BATCH_LIMIT` measurements, by whichever thread queued the last one: a
  server nobody scrapes keeps no more than that.

The same values reach the same instruments with the same attributes: only *when* changes. A
measurement given an explicit OpenTelemetry ``context`` (an exemplar's trace) is recorded at once.
Other instruments (observable ones, gauges) are the SDK's own.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["BATCH_LIMIT", "Batch", "BatchingMeterProvider"]

#: Measurements queued before the queue is recorded without waiting for a collection: ~40 requests'
#: worth (~1 ms of the SDK's time, hot).
BATCH_LIMIT = 256


class Batch:
    """The measurements not recorded yet (see the module)."""

    __slots__ = ("_lock", "items", "limit")

    def __init__(self, limit: int = BATCH_LIMIT) -> None:
        self.items: list[tuple[Any, float, Any]] = []  # (the instrument's own record/add, value, attributes)
        self.limit = limit
        self._lock = threading.Lock()

    def queue(self, record: Any, amount: float, attributes: Any) -> None:
        with self._lock:
            self.items.append((record, amount, attributes))
            full = len(self.items) >= self.limit
        if full:
            self.record()

    def record(self) -> None:
        """Record every queued measurement, in the order queued."""
        with self._lock:
            items, self.items = self.items, []
        for record, amount, attributes in items:
            record(amount, attributes)

    def at_collection(self, _options: Any) -> list[Any]:
        """An observable instrument's callback: the queue recorded, no observation of its own."""
        self.record()
        return []


class _Instrument:
    """A histogram or counter whose ``record`` / ``add`` is queued (see the module)."""

    __slots__ = ("_batch", "_inner", "_now")

    def __init__(self, inner: Any, method: str, batch: Batch) -> None:
        self._inner = inner
        self._now = getattr(inner, method)
        self._batch = batch

    def _measure(self, amount: float, attributes: Any = None, context: Any = None) -> None:
        if context is not None:
            self._now(amount, attributes, context)
        else:
            self._batch.queue(self._now, amount, dict(attributes) if attributes else attributes)

    record = add = _measure

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Meter:
    __slots__ = ("_batch", "_inner")

    def __init__(self, inner: Any, batch: Batch) -> None:
        self._inner = inner
        self._batch = batch

    def create_histogram(self, *args: Any, **kwargs: Any) -> _Instrument:
        return _Instrument(self._inner.create_histogram(*args, **kwargs), "record", self._batch)

    def create_counter(self, *args: Any, **kwargs: Any) -> _Instrument:
        return _Instrument(self._inner.create_counter(*args, **kwargs), "add", self._batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class BatchingMeterProvider:
    """``provider`` whose meters' histograms and counters record in batches (see the module)."""

    def __init__(self, provider: Any, *, limit: int = BATCH_LIMIT) -> None:
        self.provider = provider
        self.batch = Batch(limit)
        # its callback runs first in every reader's collection; it observes nothing itself
        provider.get_meter("agentrag.server.batch").create_observable_gauge(
            "agentrag.server.metric_batch", callbacks=[self.batch.at_collection]
        )

    def get_meter(self, *args: Any, **kwargs: Any) -> _Meter:
        return _Meter(self.provider.get_meter(*args, **kwargs), self.batch)

    def __getattr__(self, name: str) -> Any:  # shutdown, force_flush
        return getattr(self.provider, name)
