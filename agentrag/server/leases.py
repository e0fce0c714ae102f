"""Rate-limit slots taken a few at a time by a busy process (the admission's lease).

Every request is admitted by one statement (:data:`agentrag.server.tenants._ADMIT_SQL`): it reads
the tenant and takes a GCRA slot, a row update with its WAL. Under load that statement is a large
share of what the server adds to a search (benchmarks/RESULTS.md, serving: ~0.7 ms of PostgreSQL's
CPU and ~0.1 ms of the worker's a request at 16 clients). :class:`Leases` lets a *busy* process
take up to :attr:`Leases.most` slots in one statement and admit its next requests of that tenant
from them, so one statement admits several requests. The rules that keep it safe:

* **only when busy**: the caller says so (``lease=True``: another request is in flight, so the
  admission would queue behind it anyway); a lone request is always admitted by its own statement,
  so a suspension or a change of settings is seen by the very next request of an idle server;
* **never lenient**: a lease takes real slots from the shared bucket before it admits anything; slots
  left unused when the lease ends are lost (the limit errs on the strict side, as a disconnect does),
  and a lease is under 1 % of the tenant's burst (``rate_limit // 128`` slots, at most
  :attr:`Leases.most`): a tenant whose limit is under 256 requests a period is never leased;
* **short**: a lease admits for ``ttl_s`` (1 s) at most: under load a suspension, a new rate limit
  or new settings reach a busy process within that, and the tenant's row is what its statement read;
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

    def take(self, tenant: str) -> Admission | None:
        """A slot of the tenant's lease (its admission), or None: none left, or the lease is over."""
        with self._lock:
            lease = self._held.get(tenant)
            if lease is None or lease.left < 1 or time.monotonic() > lease.until:
                return None
            lease.left -= 1
            self.used += 1
            return lease.admission

    def size(self, tenant: str) -> int:
        """The slots to ask for: 1 until a statement has read the tenant's rate limit."""
        with self._lock:
            lease = self._held.get(tenant)
        if lease is None or lease.admission.tenant is None:
            return 1
        return max(1, min(self.most, lease.admission.tenant.rate_limit // 128))

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
