"""Admission beside the work, when the process is idle (the REST search / ask path).

A request's admission (:meth:`Gateway.admit`: the tenant + rate-limit statement) is one round trip
to the database, ~0.5-1 ms of a one-client request's latency. Most requests take no statement: a
slot of the tenant's lease (:mod:`agentrag.server.leases`) admits them. When a statement is needed,
:class:`Speculation` runs it *beside* the request's work instead of before it, and uses the work's
result only once the admission has allowed the request, under three conditions that keep it safe:

* **the tenant was admitted by this process within** ``max_age_s``, with the settings the work is
  then checked and scoped with (``top_k_max``, generation); a tenant refused (404, 403, 429)
  is forgotten, so its next request is admitted first, in turn;
* **no other request is running in this process** (none in this object's hands, and ``idle()``,
  the server's count of requests in flight, agrees): speculative work only uses capacity that would
  otherwise idle, so a tenant over its rate limit can never take capacity from admitted requests
  (under load, every request is admitted first, as before);
* **a refusal wins**: the admission's refusal is raised whatever the work did, and the work's
  result (its hits, its proof, its audit events: the request's sink is written by the caller only
  after this returns) is dropped; nothing retrieved leaves the process. Admitted with other
  settings than the ones remembered (the tenant was changed meanwhile), the work is done again in
  turn with the new ones.

Otherwise (the first request of a tenant, a busy process) the admission runs first and the work
after it, in the calling thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from agentrag.server.auth import Principal
    from agentrag.server.gateway import Caller

__all__ = ["Speculation"]

T = TypeVar("T")
_MAX_TENANTS = 4096  # the remembered admissions: the oldest are forgotten beyond this


class Speculation:
    """``admitted(who, work)``: the admitted :class:`Caller` and ``work(caller)`` (see the module)."""

    def __init__(
        self,
        admit: Callable[..., Caller],  # admit(who, lease=...): agentrag.server.leases
        *,
        leased: Callable[[Principal], Caller | None] | None = None,  # a lease's slot, no statement
        idle: Callable[[], bool] | None = None,
        max_age_s: float = 5.0,
    ) -> None:
        self.admit_now, self.leased, self.idle, self.max_age_s = admit, leased, idle, max_age_s
        self.running = 0  # requests inside admitted() now, in this process
        self.speculated = 0  # requests whose admission ran beside their work (for tests and benchmarks)
        self._lock = threading.Lock()
        self._recent: dict[tuple[Any, ...], tuple[Caller, float]] = {}
        self._side: ThreadPoolExecutor | None = None

    def admitted(self, who: Principal, work: Callable[[Caller], T]) -> tuple[Caller, T]:
        key = (who.tenant, who.subject, who.groups)
        with self._lock:
            self.running += 1
            alone = self.running == 1 and (self.idle is None or self.idle())
            remembered = self._recent.get(key)
        try:
            leased = self.leased(who) if self.leased is not None else None
            if leased is not None:  # a slot taken ahead: no statement at all
                self._remember(key, leased)
                return leased, work(leased)
            if alone and remembered is not None and time.monotonic() - remembered[1] <= self.max_age_s:
                return self._beside(key, who, remembered[0], work)
            caller = self._admit(key, who)
            return caller, work(caller)
        finally:
            with self._lock:
                self.running -= 1

    def close(self) -> None:
        if self._side is not None:
            self._side.shutdown(wait=False)

    def _admit(self, key: tuple[Any, ...], who: Principal) -> Caller:
        try:
            caller = self.admit_now(who, lease=True)  # the statement may take slots ahead
        except BaseException:
            with self._lock:
                self._recent.pop(key, None)
            raise
        self._remember(key, caller)
        return caller

    def _remember(self, key: tuple[Any, ...], caller: Caller) -> None:
        with self._lock:
            self._recent.pop(key, None)  # re-inserted last: the dict's order is the admissions' order
            self._recent[key] = (caller, time.monotonic())
            if len(self._recent) > _MAX_TENANTS:
                del self._recent[next(iter(self._recent))]

    def _beside(
        self, key: tuple[Any, ...], who: Principal, guess: Caller, work: Callable[[Caller], T]
    ) -> tuple[Caller, T]:
        if self._side is None:
            with self._lock:
                if self._side is None:
                    self._side = ThreadPoolExecutor(1, thread_name_prefix="agentrag-admit")
        admission: Future[Caller] = self._side.submit(self._admit, key, who)
        self.speculated += 1
        try:
            result = work(guess)
        except BaseException:
            caller = admission.result()  # a refusal wins over the work's own error
            if caller != guess:
                return caller, work(caller)
            raise
        caller = admission.result()  # raises the refusal: the work's result is dropped
        if caller != guess:  # the tenant's settings changed meanwhile: in turn, with the new ones
            return caller, work(caller)
        return caller, result
