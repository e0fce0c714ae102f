"""The rate limit lives in PostgreSQL: two worker processes share one limit per tenant."""

from __future__ import annotations

import random
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.server_support import auth, new_tenant, start_server


def test_two_workers_share_the_limit_and_tenants_are_limited_separately(
    database_url: str, store: Any, tmp_path: Path
) -> None:
    import httpx

    limit = 100  # per 600 s: the refill during the test (< 1 request per 6 s) stays under 2 %
    greedy = new_tenant(store, "greedy", rate_limit=limit, rate_limit_period_s=600)
    modest = new_tenant(store, "modest", rate_limit=limit, rate_limit_period_s=600)
    collection = f"rl_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection)
    for tenant in (greedy, modest):
        store.ingest_text("rate limits apply per tenant", collection=collection, source="d", tenant=tenant)
    server = start_server(database_url, tmp_path, "--workers", "2")
    try:
        requests = [greedy] * (2 * limit) + [modest] * (limit // 2)
        random.Random(7).shuffle(requests)
        payload = {"query_text": "rate limits", "collections": [collection], "mode": "lexical"}
        with httpx.Client(base_url=server.url, timeout=30) as client:

            def send(tenant: str) -> tuple[str, int, str | None]:
                r = client.post(f"/api/v1/query/{tenant}/search", json=payload, headers=auth(tenant))
                return tenant, r.status_code, r.headers.get("retry-after")

            with ThreadPoolExecutor(16) as pool:
                results = list(pool.map(send, requests))
    finally:
        server.stop()
    pids = set(re.findall(r"Started server process \[(\d+)\]", server.log()))
    assert len(pids) == 2  # two worker processes served
    greedy_statuses = [status for tenant, status, _ in results if tenant == greedy]
    modest_statuses = [status for tenant, status, _ in results if tenant == modest]
    assert set(greedy_statuses) <= {200, 429} and set(modest_statuses) == {200}
    refused = greedy_statuses.count(429)
    assert abs(refused - limit) <= 0.02 * limit, refused  # the excess, within 2 %
    assert all(int(after) >= 1 for _, status, after in results if status == 429 and after is not None)
    assert all(after is not None for _, status, after in results if status == 429)


def test_admit_is_one_atomic_statement_under_concurrency(store: Any) -> None:
    """64 threads racing on a bucket of 40 get exactly 40 slots (no lost update)."""
    from agentrag.server.tenants import admit

    tenant = new_tenant(store, rate_limit=40, rate_limit_period_s=3600)
    with ThreadPoolExecutor(16) as pool:
        admissions = list(pool.map(lambda _: admit(store.engine, tenant), range(64)))
    assert sum(a.allowed for a in admissions) == 40
    waits = [a.retry_after_s for a in admissions if not a.allowed]
    assert all(80 <= w <= 91 for w in waits)  # the next slot: one emission interval (90 s) away


def test_the_admitter_replaces_a_dead_connection_and_takes_one_slot(store: Any) -> None:
    """No pre-ping: a connection killed under the admitter fails its statement once, is replaced,
    and the request takes exactly one slot."""
    from sqlalchemy import text

    from agentrag.server.tenants import Admitter

    tenant = new_tenant(store, rate_limit=10, rate_limit_period_s=3600)
    admitter = Admitter(store.engine, pool_size=1)
    try:
        assert admitter(tenant).allowed
        with admitter.engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
        admission = admitter(tenant)  # the pooled connection is dead: replaced, statement sent again
        assert admission.allowed and admission.tenant is not None and admission.tenant.id == tenant
        with admitter.engine.connect() as conn:
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar() != pid
        admissions = [admitter(tenant) for _ in range(10)]
        assert sum(a.allowed for a in admissions) == 8  # 2 slots taken above, exactly one each
        assert admitter(f"{tenant}-missing").tenant is None
    finally:
        admitter.close()
