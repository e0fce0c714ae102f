"""Audit events written off the request path: one background writer per worker process.

A request hands its events to :meth:`AuditWriter.submit` and answers; the writer thread
inserts whatever has queued up in one statement per batch (one commit, one fsync for many
requests). The queue is bounded: when the database falls behind, ``submit`` blocks (the
request waits) rather than dropping an event, for at most ``block_s``: then the request is
refused with 503 (``AuditBackpressure``) before anything it retrieved is sent. Refusals are
queued with :meth:`AuditWriter.offer`, which never waits and drops them once the queue is half
full. With ``retention_days``, the writer thread also deletes older rows every
``purge_interval_s`` (:func:`~agentrag.server.tenants.purge_audit`). :meth:`AuditWriter.close` (the server's
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
from agentrag.server.errors import AuditBackpressure
from agentrag.server.tenants import (
    AUDIT_INSERT_DRIVER,
    audit_columns,
    audit_rows,
    insert_audit_rows,
    purge_audit,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["AuditWriter"]

_log = logging.getLogger("agentrag.server")
_STOP = object()


class AuditWriter:
    """Batches audit rows into ``agentrag.audit_events`` from a daemon thread."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_queue: int = 10_000,
        batch: int = 500,
        interval_s: float = 0.2,
        block_s: float = 5.0,
        retention_days: float = 0.0,
        purge_interval_s: float = 3600.0,
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
        self.block_s = block_s
        self.retention_days = retention_days
        self.purge_interval_s = purge_interval_s
        self.failing = False  # the last insert failed (the database is not taking writes)
        self.dropped = 0  # refusal rows not queued because the queue was half full
        self.purged = 0
        self._next_purge = time.monotonic() + min(60.0, purge_interval_s)  # first purge soon after start
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
        """Queue the events; returns how many. While the queue is full this waits up to ``block_s``
        seconds, then raises :class:`~agentrag.server.errors.AuditBackpressure` (the request is
        answered 503 and nothing it retrieved leaves the process)."""
        rows = audit_rows(events, latency_ms=latency_ms)
        if self._closed:  # after shutdown: write through rather than lose them
            return insert_audit_rows(self.engine, rows)
        for row in rows:
            try:
                self._queue.put(row, timeout=self.block_s)
            except queue.Full:
                raise AuditBackpressure("the audit queue is full") from None
            with self._lock:
                self._submitted += 1
        return len(rows)

    def offer(self, events: Iterable[Mapping[str, Any]], *, required: bool = False) -> bool:
        """Queue events without waiting (from the event loop): refusals, which are dropped (False,
        counted in ``dropped``) once the queue is half full, so they never push back on queries;
        ``required`` events (a stream's outcome) only when the queue is completely full."""
        rows = audit_rows(events, latency_ms=None)
        room = self._queue.maxsize if required else self._queue.maxsize // 2
        if self._closed or self._queue.qsize() + len(rows) > room:
            self.dropped += len(rows)
            return False
        for row in rows:
            with self._lock:
                self._submitted += 1
            self._queue.put_nowait(row)
        return True

    @property
    def backlog(self) -> int:
        return self._queue.qsize()

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
            try:
                item = self._queue.get(timeout=self._until_purge())
            except queue.Empty:
                self._purge()
                continue
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
            if not stopping and self._until_purge() <= 0:
                self._purge()
            if stopping and not self._queue.empty():
                stopping = False  # more than one batch was left: keep draining
                self._queue.put(_STOP)

    def _until_purge(self) -> float:
        return max(0.0, self._next_purge - time.monotonic()) if self.retention_days > 0 else 3600.0

    def _purge(self) -> None:
        """Delete the rows older than ``retention_days`` (in batches; a failure waits for the next)."""
        if self.retention_days <= 0:
            return
        self._next_purge = time.monotonic() + self.purge_interval_s
        try:
            self.purged += purge_audit(self.engine, older_than_days=self.retention_days)
        except Exception as exc:
            _log.warning("audit writer: purge failed: %s", type(exc).__name__)

    def _write(self, rows: list[dict[str, Any]], *, final: bool) -> None:
        delay = 0.1
        while True:
            try:
                self._insert(rows)
                self.failing = False
                break
            except Exception as exc:
                self.failing = True
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
