"""Who may search what over HTTP: the request's scope (the path's tenant and the token's principal)
and the collections a tenant may search (its own and the shared ones)."""

from __future__ import annotations

import math
import threading
import time

import agentrag as ar
from agentrag.server.auth import Principal

__all__ = ["TenantCollections", "request_scope"]


class TenantCollections:
    """The names of the collections a tenant may search: its own and the shared ones (no owner),
    read at most every ``max_age`` seconds (a new collection is searched within that delay)."""

    def __init__(self, store: ar.Store, max_age: float = 5.0) -> None:
        self.store, self.max_age = store, max_age
        self.read_at, self.owners = -math.inf, {}  # type: float, dict[str, str | None]
        self.lock = threading.Lock()

    def names(self, tenant_id: str) -> list[str]:
        with self.lock:
            if time.monotonic() - self.read_at > self.max_age:
                self.owners = {c.name: c.tenant for c in self.store.collections()}
                self.read_at = time.monotonic()
            return [name for name, owner in self.owners.items() if owner in (None, tenant_id)]


def request_scope(tenant_id: str, who: Principal) -> ar.Scope:
    """The request's scope: the path's tenant, and the token's ``sub`` and groups as the principal
    that ``acl=True`` collections check grants against (none when the token names neither)."""
    principal = ar.Principal(user=who.subject, groups=who.groups) if who.subject or who.groups else None
    return ar.Scope(tenant=tenant_id, principal=principal)
