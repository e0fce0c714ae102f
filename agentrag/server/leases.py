"""Rate-limit slots taken a few at a time (the admission's lease).

Every request is admitted by one statement (:data:`agentrag.server.tenants._ADMIT_SQL`): it reads
the tenant and takes a GCRA slot, a row update with its WAL. That statement is a large share of what
the server adds to a search (benchmarks/RESULTS.md, serving: ~0.7 ms of PostgreSQL's CPU and ~0.1 ms
of the worker's a request at 16 clients; at one client, run beside the search, 0.3-0.5 ms of its
latency on 2 cores). :class:`Leases` lets a process take several slots in one statement and admit
its next requests of that tenant from them, so one statement admits several requests. The rules that
keep it safe:

* **as many as the tenant uses**: a lease is at most the tenant's requests to this process in the
  last ``ttl_s`` (or so far in this one, if more), so a tenant that sends one request a second takes
  one slot a statement, never slots it will not use; and at most ``rate_limit // 128`` slots (under
  1 % of the burst) and :attr:`Leases.most`: a tenant whose limit is under 256 requests a period is
  never leased;
* **never lenient**: a lease takes real slots from the shared bucket before it admits anything; slots
  left unused when the lease ends are lost (the limit errs on the strict side, as a disconnect does);
* **short**: a lease admits for ``ttl_s`` (1 s) at most: a suspension, a new rate limit or new
  settings reach every request within that, and the tenant's row is what its statement read;
* **a refusal ends it**: a statement that finds the tenant unknown or suspended drops its lease (a
  refusal for the rate limit keeps the slots already taken: they are paid for); a bucket that cannot
  give the whole lease is asked for one slot, so the limit is exact at its end
  (``tests/test_server_leases.py``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrag.errors import InvalidInputError

if TYPE_CHECKING:
    from agentrag.server.tenants import Admission

__all__ = ["Leases"]

_MAX_TENANTS = 4096  # tenants with a lease or a known size: the oldest are forgotten beyond this


@dataclass(slots=True)
class _Rate:
    since: float  # time.monotonic() at the start of the current window (ttl_s long)
    now: int  # the tenant's requests in it
    before: int  # in the window before it (0 if that one saw none)


@dataclass(slots=True)
class _Lease:
    admission: Admission  # what the lease's statement read (the tenant's row, allowed)
    left: int  # slots taken and not yet used
    until: float  # time.monotonic() past which the lease admits nothing


class Leases:
    """The leases of one :class:`~agentrag.server.tenants.Admitter` (thread-safe)."""

    def __init__(self, *, most: int = 8, ttl_s: float = 1.0) -> None:
        if most < 1 or not ttl_s >= 0:
            raise InvalidInputError(f"most must be >= 1 and ttl_s >= 0, got {most!r}, {ttl_s!r}")
        self.most, self.ttl_s = most, ttl_s
        self.used = 0  # requests admitted from a lease, not by a statement (tests, benchmarks)
        self._lock = threading.Lock()
        self._held: dict[str, _Lease] = {}
        self._rates: dict[str, _Rate] = {}

    def take(self, tenant: str) -> Admission | None:
        """A slot of the tenant's lease (its admission), or None: none left, or the lease is over."""
        with self._lock:
            lease = self._held.get(tenant)
            if lease is None or lease.left < 1 or time.monotonic() > lease.until:
                return None
            lease.left -= 1
            self.used += 1
            self._seen(tenant)
            return lease.admission

    def size(self, tenant: str) -> int:
        """The slots a request that needs a statement asks for (its own and those ahead): 1 until a
        statement has read the tenant's rate limit, then as many as the tenant's recent requests here
        (see the module), counting this one."""
        with self._lock:
            lease = self._held.get(tenant)
            rate = self._seen(tenant)
        if lease is None or lease.admission.tenant is None:
            return 1
        recent = max(rate.now, rate.before)
        return max(1, min(self.most, lease.admission.tenant.rate_limit // 128, recent))

    def _seen(self, tenant: str) -> _Rate:
        """Count a request of ``tenant`` (under the lock)."""
        at = time.monotonic()
        rate = self._rates.get(tenant)
        if rate is None:
            rate = self._rates[tenant] = _Rate(at, 0, 0)
            if len(self._rates) > _MAX_TENANTS:
                del self._rates[next(iter(self._rates))]
        elif at - rate.since >= self.ttl_s:
            rate.before = rate.now if at - rate.since < 2 * self.ttl_s else 0
            rate.since, rate.now = at, 0
        rate.now += 1
        return rate

    def hold(self, tenant: str, admission: Admission, taken: int) -> None:
        """Record a statement's admission that took ``taken`` slots, one of them for its own request:
        the rest join the tenant's lease (slots already taken are never dropped for a newer statement).
        A refusal for the rate limit keeps the slots taken before it; any other refusal (an unknown or
        suspended tenant) ends the lease."""
        with self._lock:
            lease = self._held.pop(tenant, None)  # re-inserted last: the dict's order is the statements'
            if not admission.allowed:
                if lease is not None and admission.tenant is not None and admission.tenant.active:
                    self._held[tenant] = lease  # over the limit: what was taken before stays usable
                return
            left = taken - 1
            if lease is not None and time.monotonic() <= lease.until:
                left += lease.left
            self._held[tenant] = _Lease(admission, left, time.monotonic() + self.ttl_s)
            if len(self._held) > _MAX_TENANTS:
                del self._held[next(iter(self._held))]
