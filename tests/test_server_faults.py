"""The service's refusals, audit retention and paging, token lifetime, trace rotation (issue #28).

The shared ``server`` fixture is a real ``agentrag serve`` process; the writer, exporter and
purge are exercised on the session's real database.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from agentrag.server.errors import AuditBackpressure, known_field, safe_message
from agentrag.server.models import AskRequest
from agentrag.server.tenants import list_audit, purge_audit, write_audit
from tests.server_support import Server, auth, new_tenant, token


def _wait(predicate: Any, timeout: float = 120.0) -> Any:  # a bound for a failure only
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_that_is_not_json_is_415(client: Any, store: Any, content_type: str | None) -> None:
    tenant = new_tenant(store, "ct")
    headers = auth(tenant) | ({"Content-Type": content_type} if content_type else {})
    r = client.post(f"/api/v1/query/{tenant}/search", content=b'{"query_text": "x"}', headers=headers)
    assert r.status_code == 415 and r.json()["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"
    assert "query_text" not in r.text


def test_tokens_valid_for_longer_than_the_maximum_lifetime_are_refused(client: Any, store: Any) -> None:
    tenant = new_tenant(store, "life")
    path, body = f"/api/v1/query/{tenant}/search", {"query_text": "anything"}
    too_far = {"Authorization": f"Bearer {token(tenant, exp=400 * 86400)}"}
    issued_long = {"Authorization": f"Bearer {token(tenant, exp=600, iat=int(time.time()) - 2 * 86400)}"}
    for headers in (too_far, issued_long):
        r = client.post(path, json=body, headers=headers)
        assert r.status_code == 401 and "lifetime" in r.json()["error"]["message"]
    assert client.post(path, json=body, headers=auth(tenant)).status_code != 401


def test_refusals_are_counted_and_audited_without_body_or_token(
    server: Server, client: Any, store: Any
) -> None:
    tenant = new_tenant(store, "refuse")
    path = f"/api/v1/query/{tenant}/search"
    bad = "Bearer " + token(tenant, secret="another-secret-" + "y" * 40)
    assert (
        client.post(path, json={"query_text": "canary-q"}, headers={"Authorization": bad}).status_code == 401
    )
    assert (
        client.post(path, json={"query_text": "canary-q", "top_k": 0}, headers=auth(tenant)).status_code
        == 422
    )

    def refused() -> list[Any]:
        return [r for r in list_audit(store.engine, tenant=tenant) if r.type == "REQUEST_REFUSED"]

    # both rows: the writer batches, so the first can be written a batch before the second
    rows = _wait(lambda: len(refused()) >= 2 and refused())
    assert sorted(r.details["status"] for r in rows) == [401, 422]
    assert {r.details["route"] for r in rows} == {"/api/v1/query/{tenant_id}/search"}
    dumped = json.dumps([r.to_dict() for r in rows])
    assert "canary-q" not in dumped and bad.split()[1] not in dumped

    def counted() -> set[int]:
        return {
            i["attributes"]["http.response.status_code"]
            for i in server.telemetry()
            if i["kind"] == "metric" and i["name"] == "agentrag.server.refused"
        }

    assert {401, 422} <= _wait(lambda: counted() >= {401, 422} and counted())


def test_error_messages_never_quote_client_input() -> None:
    assert (
        safe_message("unknown filter key 'tier-canary'; allowed: x") == "unknown filter key '…'; allowed: x"
    )
    assert known_field(AskRequest, ["filters", "tier"]) == "filters"
    assert known_field(AskRequest, ["filters", "date_range", "start"]) == "filters.date_range.start"
    assert known_field(AskRequest, ["canary_field"]) is None


def _old_rows(store: Any, tenant: str, count: int, days_ago: float) -> None:
    events = [{"type": "RETRIEVAL_EXECUTED", "query_id": f"q{i}", "tenant": tenant} for i in range(count)]
    write_audit(store.engine, events, latency_ms=None)
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE agentrag.audit_events SET created_at = now() - make_interval(days => :d)"
                " WHERE tenant_id = :t"
            ),
            {"d": days_ago, "t": tenant},
        )


def test_purge_deletes_only_rows_older_than_the_retention(store: Any) -> None:
    old, recent = f"old_{uuid.uuid4().hex[:6]}", f"new_{uuid.uuid4().hex[:6]}"
    _old_rows(store, old, 5, days_ago=40)
    write_audit(
        store.engine, [{"type": "RETRIEVAL_EXECUTED", "query_id": "q", "tenant": recent}], latency_ms=None
    )
    assert purge_audit(store.engine, older_than_days=30, batch=2) >= 5
    assert list_audit(store.engine, tenant=old) == []
    assert len(list_audit(store.engine, tenant=recent)) == 1


def test_the_audit_writer_purges_on_its_schedule(store: Any) -> None:
    from agentrag.server.auditlog import AuditWriter

    old = f"sched_{uuid.uuid4().hex[:6]}"
    _old_rows(store, old, 3, days_ago=10)
    writer = AuditWriter(store.engine, retention_days=5, purge_interval_s=0.2)
    try:
        # the writer counts what it purged once purge_audit has returned, after the DELETE committed:
        # wait for both (a busy machine saw the rows gone and the count not yet added)
        assert _wait(lambda: list_audit(store.engine, tenant=old) == [] and writer.purged >= 3)
    finally:
        writer.close()


def test_a_full_audit_queue_pushes_back_with_a_typed_error(store: Any) -> None:
    from agentrag.server.auditlog import AuditWriter
    from tests.chaos_support import PgProxy

    proxy = PgProxy(store.url)
    proxy.stop()  # the writer's database is down: nothing drains the queue
    from sqlalchemy import create_engine

    engine = create_engine(proxy.url)
    writer = AuditWriter(engine, max_queue=2, block_s=0.2, interval_s=0.01)
    event = {"type": "RETRIEVAL_EXECUTED", "query_id": "q", "tenant": "t"}
    try:
        with pytest.raises(AuditBackpressure):
            for _ in range(10):
                writer.submit([event], latency_ms=None)
        assert writer.offer([event]) is False and writer.dropped == 1  # refusals never wait
        assert _wait(lambda: writer.failing)
    finally:
        proxy.start()
        writer.close(timeout=30)
        proxy.close()
        engine.dispose()


def test_audit_list_pages_and_says_when_there_is_more(database_url: str, store: Any) -> None:
    tenant = f"page_{uuid.uuid4().hex[:6]}"
    events = [{"type": "RETRIEVAL_EXECUTED", "query_id": f"q{i}", "tenant": tenant} for i in range(5)]
    write_audit(store.engine, events, latency_ms=None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "agentrag", "--database-url", database_url, "audit", "list"]
        return subprocess.run([*command, "--tenant", tenant, "--json", *args], capture_output=True, text=True)

    first = cli("--limit", "3")
    assert first.returncode == 0, first.stderr
    page = json.loads(first.stdout)
    assert [r["query_id"] for r in page] == ["q4", "q3", "q2"]
    assert f"--before-id {page[-1]['id']}" in first.stderr
    second = cli("--limit", "3", "--before-id", str(page[-1]["id"]))
    assert [r["query_id"] for r in json.loads(second.stdout)] == ["q1", "q0"]
    assert "more rows" not in second.stderr


def test_the_trace_file_writes_unchanged_metrics_once_and_rotates(tmp_path: Path) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from agentrag.server.observe import JsonLinesExporter

    path = tmp_path / "trace.jsonl"
    exporter = JsonLinesExporter(str(path), max_bytes=400)
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)  # type: ignore[arg-type]
    provider = MeterProvider(metric_readers=[reader])
    counter = provider.get_meter("t").create_counter("requests")
    counter.add(1, {"route": "a"})
    provider.force_flush()
    size = path.stat().st_size
    provider.force_flush()
    provider.force_flush()
    assert path.stat().st_size == size  # idle: nothing more written
    for i in range(20):
        counter.add(1, {"route": f"r{i}"})
        provider.force_flush()
    assert (tmp_path / "trace.jsonl.1").exists()
    assert path.stat().st_size < 400 + 200  # rotated, not grown without bound
    provider.shutdown()
