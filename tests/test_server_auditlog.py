"""The background audit writer: batched, bounded, and nothing lost on a clean close."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from agentrag.server.auditlog import AuditWriter
from agentrag.server.tenants import list_audit


def _events(query_id: str, n: int) -> list[dict[str, Any]]:
    return [
        {"type": "RETRIEVAL_EXECUTED", "query_id": query_id, "tenant": "w", "details": {"i": i}}
        for i in range(n)
    ]


def test_flush_makes_every_submitted_event_visible(store: Any) -> None:
    writer = AuditWriter(store.engine, interval_s=0.01)
    try:
        query_id = uuid.uuid4().hex
        assert writer.submit(_events(query_id, 3), latency_ms=1.5) == 3
        assert writer.flush(timeout=30)
        rows = list_audit(store.engine, query_id=query_id)
        assert sorted(r.details["i"] for r in rows) == [0, 1, 2]
        assert all(r.latency_ms == 1.5 and r.tenant_id == "w" for r in rows)
    finally:
        writer.close()


def test_a_full_queue_makes_submitters_wait_and_close_writes_everything(store: Any) -> None:
    writer = AuditWriter(store.engine, max_queue=2, batch=3, interval_s=0.0)
    query_id = uuid.uuid4().hex
    threads = [
        threading.Thread(target=writer.submit, args=(_events(query_id, 5),), kwargs={"latency_ms": None})
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    writer.close()  # the server's shutdown: no flush() before it
    assert len(list_audit(store.engine, query_id=query_id, limit=100)) == 20
    # after close, events are written through, not dropped
    writer.submit(_events(query_id, 1), latency_ms=None)
    assert len(list_audit(store.engine, query_id=query_id, limit=100)) == 21


def test_a_killed_writer_connection_is_replaced_and_the_batch_written_once(store: Any) -> None:
    """No pre-ping: the batch meets the dead connection, which is replaced; the batch had not
    run, so it is written exactly once."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    writer = AuditWriter(store.engine, interval_s=0.0)
    admin = create_engine(store.engine.url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        first = uuid.uuid4().hex
        writer.submit(_events(first, 1), latency_ms=None)
        assert writer.flush(timeout=30)
        with writer.engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        with admin.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid}).scalar()
        second = uuid.uuid4().hex
        writer.submit(_events(second, 4), latency_ms=2.0)
        assert writer.flush(timeout=30)
        assert len(list_audit(store.engine, query_id=second, limit=100)) == 4
        with writer.engine.connect() as conn:
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar() != pid
    finally:
        admin.dispose()
        writer.close()


def test_the_writer_stores_what_the_one_off_insert_stores(store: Any) -> None:
    """The writer binds its column arrays in binary, ``write_audit`` as text: the same rows either way,
    for details with quotes, backslashes, braces, commas and non-ASCII, and for missing columns."""
    from agentrag.server.tenants import write_audit

    details = {"q": 'a "quoted", {braced} \\ path', "u": "é\u2028ß", "n": None, "ids": ["x", "y,z"]}
    via_writer, one_off = uuid.uuid4().hex, uuid.uuid4().hex
    event = {"type": "REQUEST_REFUSED", "details": details}  # no tenant, workspace or session
    writer = AuditWriter(store.engine, interval_s=0.0)
    try:
        writer.submit([{**event, "query_id": via_writer}], latency_ms=None)
        writer.submit([{**event, "query_id": via_writer, "tenant": "w"}], latency_ms=2.5)
        assert writer.flush(timeout=30)
    finally:
        writer.close()
    write_audit(store.engine, [{**event, "query_id": one_off}], latency_ms=None)
    write_audit(store.engine, [{**event, "query_id": one_off, "tenant": "w"}], latency_ms=2.5)

    def shapes(query_id: str) -> list[tuple[Any, ...]]:
        rows = list_audit(store.engine, query_id=query_id)
        return sorted(
            ((r.type, r.tenant_id, r.workspace_id, r.session_id, r.latency_ms, r.details) for r in rows),
            key=repr,
        )

    assert shapes(via_writer) == shapes(one_off)
    assert len(shapes(via_writer)) == 2 and shapes(via_writer)[0][5] == details
