"""Admissions from slots taken ahead (agentrag/server/leases.py), on real PostgreSQL: one statement
takes a tenant's lease, its next requests use it without a statement, a lease is as large as the
tenant's recent requests (a slow tenant is never leased slots it will not use), the limit is exact at
its end (never lenient), small limits are never leased, a lease ends with its time or a refusal, and a
suspension reaches the gateway's requests within the lease's time."""

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


def _statements(admitter: Admitter, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The slots each statement of ``admitter`` asks for, in order."""
    asked: list[int] = []
    statement = admitter._statement

    def counted(tenant: str, slots: int) -> Any:
        asked.append(slots)
        return statement(tenant, slots)

    monkeypatch.setattr(admitter, "_statement", counted)
    return asked


def test_one_statement_takes_the_lease_and_the_next_requests_use_it(
    store: Any, admitter: Admitter, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = new_tenant(store, rate_limit=1024 * 60, rate_limit_period_s=60)  # at most 8 slots a lease
    asked = _statements(admitter, monkeypatch)
    first = admitter(tenant, lease=True)  # the rate limit is not known yet: one slot
    assert first.allowed and admitter.leases.used == 0 and asked == [1]
    for _ in range(6):
        admitter(tenant, lease=True)
    # a lease is as large as the tenant's requests so far (at most 8): 2 at the 2nd, 4 at the 4th
    assert asked == [1, 2, 4] and admitter.leases.used == 4
    eighth = admitter(tenant, lease=True)  # a statement taking 8: this request's and 7 ahead
    after_lease = _tat(store, tenant)
    for _ in range(7):
        assert admitter(tenant, lease=True) == eighth  # no statement: the bucket is untouched
    assert _tat(store, tenant) == after_lease and admitter.leases.used == 11 and asked == [1, 2, 4, 8]
    assert admitter(tenant, lease=True).allowed  # the lease is used up: a new statement
    assert _tat(store, tenant) > after_lease and asked == [1, 2, 4, 8, 8]


def test_a_tenant_with_one_request_a_lease_time_is_never_leased_slots_it_would_not_use(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    admitter = Admitter(store.engine, pool_size=1, lease_ttl_s=0.05)
    try:
        tenant = new_tenant(store, rate_limit=1024 * 60, rate_limit_period_s=60)
        asked = _statements(admitter, monkeypatch)
        for _ in range(4):
            assert admitter(tenant, lease=True).allowed
            time.sleep(0.12)  # more than two lease times: the last window saw no other request
        assert asked == [1, 1, 1, 1] and admitter.leases.used == 0
    finally:
        admitter.close()


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


def test_a_refusal_ends_the_lease(store: Any, admitter: Admitter) -> None:
    tenant = new_tenant(store, rate_limit=1024 * 60, rate_limit_period_s=60)
    for _ in range(4):
        admitter(tenant, lease=True)  # the 4th took 4 slots: 3 ahead
    used = admitter.leases.used
    set_state(store.engine, tenant, "SUSPENDED")
    own = admitter(tenant)  # lease=False: its own statement sees the suspension
    assert own.tenant is not None and not own.tenant.active and not own.allowed
    leased = admitter(tenant, lease=True)  # the refusal dropped the lease: a statement, refused
    assert not leased.allowed and admitter.leases.used == used


def _who(tenant: str) -> Principal:
    return Principal(subject=None, tenant=tenant, scopes=frozenset({"query"}))


class _Clock:
    """The leases module's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_the_gateway_admits_from_leases_and_a_suspension_reaches_it_within_the_lease_time(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentrag.server import leases

    clock = _Clock()
    monkeypatch.setattr(leases, "time", clock)
    admitter = Admitter(store.engine, lease_ttl_s=1.0)
    try:
        tenant = new_tenant(store, rate_limit=1024 * 60, rate_limit_period_s=60)
        idle = Gateway(store, admit=admitter)
        for _ in range(8):  # alone: a slot of the lease, else a statement beside the work
            idle.admitted(_who(tenant), lambda caller: caller)
        assert admitter.leases.used == 4  # statements at the 1st, 2nd, 4th and 8th request
        busy = Gateway(store, admit=admitter, idle=lambda: False)
        callers = [busy.admitted(_who(tenant), lambda caller: caller)[0] for _ in range(4)]
        assert admitter.leases.used == 8 and {c.tenant for c in callers} == {tenant}
        set_state(store.engine, tenant, "SUSPENDED")
        idle.admitted(_who(tenant), lambda caller: caller)  # within the lease's time: still its slot
        clock.now += 1.01  # the lease's time is over: its slots admit nothing
        with pytest.raises(Refusal) as refused:
            idle.admitted(_who(tenant), lambda caller: caller)
        assert refused.value.code == "TENANT_SUSPENDED"
        with pytest.raises(Refusal):  # and the refusal ended the lease
            busy.admitted(_who(tenant), lambda caller: caller)
        assert admitter.leases.used == 9
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
