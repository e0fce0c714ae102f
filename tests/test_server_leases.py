"""A busy process's admissions from slots taken ahead (agentrag/server/leases.py), on real PostgreSQL:
one statement takes a tenant's lease, its next requests use it without a statement, the limit is
exact at its end (never lenient), small limits are never leased, a lease ends with its time or a
refusal, and a lone request is always admitted by its own statement."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from agentrag.server.auth import Principal
from agentrag.server.gateway import Gateway, Refusal
from agentrag.server.leases import Leases
from agentrag.server.tenants import Admitter, set_state
from tests.server_support import new_tenant


def _tat(store: Any, tenant: str) -> Any:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        return conn.execute(
            text("SELECT tat FROM agentrag.rate_limits WHERE tenant_id = :t"), {"t": tenant}
        ).scalar()


@pytest.fixture
def admitter(store: Any) -> Any:
    made = Admitter(store.engine, pool_size=1, lease_ttl_s=60)  # no test here depends on the clock
    yield made
    made.close()


def test_one_statement_takes_the_lease_and_the_next_requests_use_it(store: Any, admitter: Admitter) -> None:
    tenant = new_tenant(store, rate_limit=1024 * 60, rate_limit_period_s=60)  # 8 slots a lease
    first = admitter(tenant, lease=True)  # the rate limit is not known yet: one slot
    assert first.allowed and admitter.leases.used == 0
    second = admitter(tenant, lease=True)  # a statement taking 8: this request's and 7 ahead
    after_lease = _tat(store, tenant)
    for _ in range(7):
        assert admitter(tenant, lease=True) == second  # no statement: the bucket is untouched
    assert _tat(store, tenant) == after_lease and admitter.leases.used == 7
    assert admitter(tenant, lease=True).allowed  # the lease is used up: a new statement
    assert _tat(store, tenant) > after_lease and admitter.leases.used == 7


def test_the_limit_is_exact_through_leases(store: Any, admitter: Admitter) -> None:
    """1,024 slots in a long period: leased requests are admitted exactly 1,024 times, then refused,
    whatever the leases' sizes (the last lease cannot be whole: the last slots one by one)."""
    tenant = new_tenant(store, rate_limit=1024, rate_limit_period_s=3600)
    admitted = 0
    for _ in range(1030):
        admission = admitter(tenant, lease=True)
        admitted += admission.allowed
    assert admitted == 1024 and admitter.leases.used > 800  # most requests took no statement
    refused = admitter(tenant)
    assert not refused.allowed and refused.retry_after_s > 0


def test_a_small_limit_is_never_leased(store: Any, admitter: Admitter) -> None:
    tenant = new_tenant(store, rate_limit=255, rate_limit_period_s=3600)  # under 256: 1 % is < 2 slots
    before = None
    for _ in range(5):
        assert admitter(tenant, lease=True).allowed
        now = _tat(store, tenant)
        assert before is None or now > before  # every request its own statement
        before = now
    assert admitter.leases.used == 0


def test_a_lease_ends_with_its_time(store: Any) -> None:
    admitter = Admitter(store.engine, pool_size=1, lease_ttl_s=0.05)
    try:
        tenant = new_tenant(store, rate_limit=1024 * 60, rate_limit_period_s=60)
        admitter(tenant, lease=True)
        admitter(tenant, lease=True)  # the lease: 7 slots ahead
        time.sleep(0.1)
        before = _tat(store, tenant)
        assert admitter(tenant, lease=True).allowed
        assert _tat(store, tenant) > before and admitter.leases.used == 0  # over: a statement
    finally:
        admitter.close()


def test_a_refusal_ends_the_lease_and_a_lone_request_never_uses_it(store: Any, admitter: Admitter) -> None:
    tenant = new_tenant(store, rate_limit=1024 * 60, rate_limit_period_s=60)
    admitter(tenant, lease=True)
    admitter(tenant, lease=True)  # 7 slots ahead
    set_state(store.engine, tenant, "SUSPENDED")
    lone = admitter(tenant)  # an idle server's request: its own statement sees the suspension
    assert lone.tenant is not None and not lone.tenant.active and not lone.allowed
    busy = admitter(tenant, lease=True)  # the refusal dropped the lease: a statement, refused
    assert not busy.allowed and admitter.leases.used == 0


def _who(tenant: str) -> Principal:
    return Principal(subject=None, tenant=tenant, scopes=frozenset({"query"}))


def test_the_gateway_leases_only_when_another_request_is_in_flight(store: Any) -> None:
    admitter = Admitter(store.engine)
    try:
        tenant = new_tenant(store, rate_limit=1024 * 60, rate_limit_period_s=60)
        idle = Gateway(store, admit=admitter)
        for _ in range(4):
            idle.admitted(_who(tenant), lambda caller: caller)
        assert admitter.leases.used == 0  # alone: every request its own statement (or beside it)
        busy = Gateway(store, admit=admitter, idle=lambda: False)
        callers = [busy.admitted(_who(tenant), lambda caller: caller)[0] for _ in range(4)]
        assert admitter.leases.used >= 2 and {c.tenant for c in callers} == {tenant}
        set_state(store.engine, tenant, "SUSPENDED")
        with pytest.raises(Refusal) as refused:  # idle again: the suspension is seen at once
            idle.admitted(_who(tenant), lambda caller: caller)
        assert refused.value.code == "TENANT_SUSPENDED"
    finally:
        admitter.close()


def test_leases_are_thread_safe_and_never_overdraw(store: Any) -> None:
    """Eight threads of one busy process take 600 admissions of a 512-slot bucket: exactly 512 pass."""
    admitter = Admitter(store.engine, pool_size=4, lease_ttl_s=60)
    tenant = new_tenant(store, rate_limit=512, rate_limit_period_s=3600)
    allowed: list[int] = []

    def run() -> None:
        allowed.append(sum(admitter(tenant, lease=True).allowed for _ in range(75)))

    threads = [threading.Thread(target=run) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        admitter.close()
    assert sum(allowed) == 512


def test_bad_lease_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="most must be >= 1"):
        Leases(most=0)
    with pytest.raises(ValueError, match="ttl_s"):
        Leases(ttl_s=float("nan"))
