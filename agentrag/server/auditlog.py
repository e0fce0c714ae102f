"""Audit events written off the request path: one background writer per worker process.

A request hands its events to :meth:`AuditWriter.submit` and answers; the writer thread
inserts whatever has queued up in one statement per batch (one commit, one fsync for many
requests). The queue is bounded: when the database falls behind, ``submit`` blocks (the
request waits) rather than dropping an event. :meth:`AuditWriter.close` (the server's
shutdown) writes everything still queued, so a clean shutdown loses nothing; a crash (kill -9,
power loss) loses at most the events of the last ``interval_s`` and whatever is queued.
A failed insert is retried (with backoff) until it succeeds or the writer closes.

The writer has a connection of its own (a one-connection autocommit pool on the same URL): a
batch insert waits for its commit's fsync, and it must not hold one of the connections the
searches share while it does. A batch is one statement (the rows as column arrays, unnest'ed)
sent to the driver directly, in its own transaction: one round trip per batch, no pre-ping (a
connection found dead is replaced and the batch sent again at once; it had not run).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from agentrag.server._driver import execute_on_driver
from agentrag.server.tenants import AUDIT_INSERT_DRIVER, audit_columns, audit_rows, insert_audit_rows

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["AuditWriter"]

_log = logging.getLogger("agentrag.server")
_STOP = object()


class AuditWriter:
    """Batches audit rows into ``agentrag.audit_events`` from a daemon thread."""

    def __init__(
        self, engine: Engine, *, max_queue: int = 10_000, batch: int = 500, interval_s: float = 0.2
    ) -> None:
        from sqlalchemy import create_engine

        self.engine = create_engine(
            engine.url,
            pool_size=1,
            max_overflow=0,
            pool_pre_ping=False,
            hide_parameters=True,
            isolation_level="AUTOCOMMIT",
        )
        self.batch = batch
        self.interval_s = interval_s
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue)
        self._lock = threading.Condition()
        self._submitted = 0
        self._written = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="agentrag-audit", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"AuditWriter({self._written}/{self._submitted} written)"

    def submit(self, events: Iterable[Mapping[str, Any]], *, latency_ms: float | None) -> int:
        """Queue the events (blocks while the queue is full); returns how many."""
        rows = audit_rows(events, latency_ms=latency_ms)
        if self._closed:  # after shutdown: write through rather than lose them
            return insert_audit_rows(self.engine, rows)
        for row in rows:
            with self._lock:
                self._submitted += 1
            self._queue.put(row)
        return len(rows)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event submitted so far is in the database; False on timeout."""
        with self._lock:
            target = self._submitted
            return self._lock.wait_for(lambda: self._written >= target, timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Write everything queued, then stop the thread."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():
            _log.error("audit writer: %d events not written at shutdown", self._submitted - self._written)
        else:
            self.engine.dispose()  # a later submit() writes through on a new connection

    def _run(self) -> None:
        stopping = False
        while not stopping:
            item = self._queue.get()
            rows: list[dict[str, Any]] = []
            if item is _STOP:
                stopping = True
            else:
                rows.append(item)
                time.sleep(self.interval_s)  # let a batch gather
            while len(rows) < self.batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                else:
                    rows.append(item)
            if rows:
                self._write(rows, final=stopping)
            if stopping and not self._queue.empty():
                stopping = False  # more than one batch was left: keep draining
                self._queue.put(_STOP)

    def _write(self, rows: list[dict[str, Any]], *, final: bool) -> None:
        delay = 0.1
        while True:
            try:
                self._insert(rows)
                break
            except Exception as exc:
                _log.error("audit writer: insert of %d events failed: %s", len(rows), type(exc).__name__)
                if final and self._closed and delay > 5:
                    _log.error("audit writer: giving up on %d events at shutdown", len(rows))
                    break
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
        with self._lock:
            self._written += len(rows)
            self._lock.notify_all()

    def _insert(self, rows: list[dict[str, Any]]) -> None:
        """One statement in its own transaction; a dead pooled connection is replaced once, at once."""
        execute_on_driver(self.engine, AUDIT_INSERT_DRIVER, audit_columns(rows))
