"""The admission beside the search when the process is idle (agentrag/server/speculative.py):
the work's result is used only once the admission allowed it; a refusal wins; a busy process and a
tenant not admitted recently are admitted first. Real PostgreSQL (the server's Admitter) throughout;
over HTTP, a tenant suspended between two searches is refused and nothing of its search is audited.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentrag.server.auth import Principal
from agentrag.server.gateway import Caller, Gateway, Refusal
from agentrag.server.tenants import Admitter, set_state
from tests.server_support import auth, new_tenant


@pytest.fixture
def gateway(store: Any) -> Any:
    admitter = Admitter(store.engine)
    yield Gateway(store, admit=admitter)
    admitter.close()


def _who(tenant: str) -> Principal:
    return Principal(subject=None, tenant=tenant, scopes=frozenset({"query"}))


class Work:
    """A request's work: records the callers it ran for, and from which thread."""

    def __init__(self, block: threading.Event | None = None) -> None:
        self.callers: list[Caller] = []
        self.threads: list[str] = []
        self.block, self.started = block, threading.Event()

    def __call__(self, caller: Caller) -> str:
        self.callers.append(caller)
        self.threads.append(threading.current_thread().name)
        self.started.set()
        if self.block is not None:
            self.block.wait(10)
        return f"hits for {caller.tenant}"


def test_the_first_request_is_admitted_first_then_beside_its_work(store: Any, gateway: Gateway) -> None:
    tenant = new_tenant(store, "spec")
    caller, result = gateway.admitted(_who(tenant), Work())
    assert gateway.speculation.speculated == 0  # nothing remembered: in turn
    again, result2 = gateway.admitted(_who(tenant), Work())
    assert gateway.speculation.speculated == 1
    assert (again, result2) == (caller, result) == (caller, f"hits for {tenant}")


def test_a_refusal_wins_over_the_work_done_beside_it(store: Any, gateway: Gateway) -> None:
    tenant = new_tenant(store, "spec")
    gateway.admitted(_who(tenant), Work())
    set_state(store.engine, tenant, "SUSPENDED")
    work = Work()
    with pytest.raises(Refusal) as refused:
        gateway.admitted(_who(tenant), work)
    assert refused.value.code == "TENANT_SUSPENDED"
    assert gateway.speculation.speculated == 1 and len(work.callers) == 1  # it ran, its result dropped
    work = Work()  # refused: forgotten, so the next request is admitted first (and refused again)
    with pytest.raises(Refusal):
        gateway.admitted(_who(tenant), work)
    assert gateway.speculation.speculated == 1 and work.callers == []


def test_over_the_rate_limit_the_refusal_wins_and_the_next_is_admitted_first(
    store: Any, gateway: Gateway
) -> None:
    tenant = new_tenant(store, "spec", rate_limit=1, rate_limit_period_s=3600)
    gateway.admitted(_who(tenant), Work())
    with pytest.raises(Refusal) as refused:
        gateway.admitted(_who(tenant), Work())
    assert refused.value.status == 429
    work = Work()
    with pytest.raises(Refusal):
        gateway.admitted(_who(tenant), work)
    assert work.callers == []  # not run at all: admitted first, refused


def test_changed_settings_redo_the_work_with_the_admitted_caller(store: Any, gateway: Gateway) -> None:
    from sqlalchemy import text

    tenant = new_tenant(store, "spec")
    first, _ = gateway.admitted(_who(tenant), Work())
    with store.engine.begin() as conn:
        conn.execute(
            text("UPDATE agentrag.tenants SET retrieval_top_k_max = 7 WHERE id = :id"), {"id": tenant}
        )
    work = Work()
    caller, _ = gateway.admitted(_who(tenant), work)
    assert caller.top_k_max == 7
    assert [c.top_k_max for c in work.callers] == [first.top_k_max, 7]  # guessed, then redone


def test_a_busy_process_admits_first(store: Any, gateway: Gateway) -> None:
    tenant = new_tenant(store, "spec")
    gateway.admitted(_who(tenant), Work())
    release = threading.Event()
    held = Work(block=release)
    running = threading.Thread(target=gateway.admitted, args=(_who(tenant), held))
    running.start()
    assert held.started.wait(10)
    try:
        gateway.admitted(_who(tenant), Work())  # another request is running: admitted first
    finally:
        release.set()
        running.join(10)
    assert gateway.speculation.speculated == 1  # only the held one ran beside its admission


def test_over_http_a_tenant_suspended_between_searches_is_refused_and_nothing_audited(
    store: Any, server: Any
) -> None:
    import time

    import httpx

    from agentrag.server.tenants import list_audit

    tenant = new_tenant(store, "spechttp")
    store.create_collection(f"{tenant}_docs", tenant=tenant)
    store.ingest_text(
        "The night shift starts at ten.", collection=f"{tenant}_docs", source="shift.txt", tenant=tenant
    )
    body = {"query_text": "night shift", "collections": [f"{tenant}_docs"]}
    url = f"{server.url}/api/v1/query/{tenant}/search"
    with httpx.Client(timeout=30) as client:
        ok = client.post(url, json=body, headers=auth(tenant))
        assert ok.status_code == 200, ok.text
        set_state(store.engine, tenant, "SUSPENDED")
        refused = client.post(url, json=body, headers=auth(tenant))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "TENANT_SUSPENDED"
    time.sleep(1.0)  # the audit writer's interval is 0.2 s
    answered = ok.json()["query_id"]
    rows = list_audit(store.engine, tenant=tenant)
    assert rows and {r.query_id for r in rows if r.type != "REQUEST_REFUSED"} == {answered}


def test_other_requests_in_flight_in_the_server_mean_admitted_first(store: Any) -> None:
    admitter = Admitter(store.engine)
    busy = Gateway(store, admit=admitter, idle=lambda: False)  # the server counts other requests in flight
    try:
        tenant = new_tenant(store, "spec")
        for _ in range(3):
            busy.admitted(_who(tenant), Work())
        assert busy.speculation.speculated == 0
    finally:
        admitter.close()
