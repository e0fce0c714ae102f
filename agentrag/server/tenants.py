"""Tenants, the shared rate limit and persisted audit events (migration 0004), over a SQLAlchemy engine.

No FastAPI here: ``agentrag tenants ...`` and ``agentrag audit list`` use this module alone.

The rate limit is GCRA (the generic cell rate algorithm) with its state in
``agentrag.rate_limits``: a tenant may send ``rate_limit`` requests per
``rate_limit_period_s`` seconds, in bursts of up to ``rate_limit``. :func:`admit` reads the
tenant and takes one slot in a single atomic statement (an upsert whose ``WHERE`` refuses
the slot when the bucket is full), so every worker process of every server shares one limit
per tenant and concurrent requests cannot overdraw it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentrag.errors import InvalidInputError
from agentrag.server._driver import execute_on_driver

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = [
    "Admission",
    "Admitter",
    "AuditRow",
    "Tenant",
    "TenantNotFoundError",
    "admit",
    "audit_columns",
    "audit_rows",
    "create_tenant",
    "get_tenant",
    "insert_audit_rows",
    "list_audit",
    "list_tenants",
    "purge_audit",
    "set_state",
    "write_audit",
]

TENANT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
STATES = ("ACTIVE", "SUSPENDED")
_COLUMNS = (
    "id, state, retrieval_top_k_max, rate_limit, rate_limit_period_s, generation_enabled,"
    " suppress_ungrounded, config, created_at, updated_at"
)


class TenantNotFoundError(InvalidInputError):
    """No tenant by that id."""


@dataclass(frozen=True, slots=True)
class Tenant:
    id: str
    state: str
    retrieval_top_k_max: int
    rate_limit: int
    rate_limit_period_s: float
    generation_enabled: bool
    suppress_ungrounded: bool
    config: dict[str, Any]
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("created_at", "updated_at"):
            out[key] = out[key].isoformat() if out[key] else None
        return out

    def __repr__(self) -> str:
        return (
            f"Tenant({self.id!r} {self.state}, {self.rate_limit}/{self.rate_limit_period_s:g}s,"
            f" top_k<={self.retrieval_top_k_max})"
        )


def check_tenant_id(tenant: str) -> str:
    if not isinstance(tenant, str) or not TENANT_ID.fullmatch(tenant):
        raise InvalidInputError(f"a tenant id matches {TENANT_ID.pattern}, got {tenant!r}")
    return tenant


def create_tenant(
    engine: Engine,
    tenant: str,
    *,
    retrieval_top_k_max: int = 50,
    rate_limit: int = 1000,
    rate_limit_period_s: float = 60.0,
    generation_enabled: bool = True,
    suppress_ungrounded: bool = False,
    config: Mapping[str, Any] | None = None,
    exist_ok: bool = False,
) -> Tenant:
    """Create an ACTIVE tenant (``exist_ok``: update the settings of an existing one)."""
    from sqlalchemy import text

    check_tenant_id(tenant)
    if not isinstance(retrieval_top_k_max, int) or not 1 <= retrieval_top_k_max <= 50:
        raise InvalidInputError(f"retrieval_top_k_max must be 1..50, got {retrieval_top_k_max!r}")
    if not isinstance(rate_limit, int) or rate_limit < 1:
        raise InvalidInputError(f"rate_limit must be an integer >= 1, got {rate_limit!r}")
    if not math.isfinite(rate_limit_period_s) or rate_limit_period_s <= 0:
        raise InvalidInputError(f"rate_limit_period_s must be > 0, got {rate_limit_period_s!r}")
    conflict = (
        "DO UPDATE SET retrieval_top_k_max = EXCLUDED.retrieval_top_k_max, rate_limit = EXCLUDED.rate_limit,"
        " rate_limit_period_s = EXCLUDED.rate_limit_period_s,"
        " generation_enabled = EXCLUDED.generation_enabled,"
        " suppress_ungrounded = EXCLUDED.suppress_ungrounded, config = EXCLUDED.config, updated_at = now()"
        if exist_ok
        else "DO NOTHING"
    )
    with engine.begin() as conn:
        row = (
            conn.execute(
                text(
                    "INSERT INTO agentrag.tenants (id, retrieval_top_k_max, rate_limit, rate_limit_period_s,"
                    " generation_enabled, suppress_ungrounded, config)"
                    " VALUES (:id, :top_k, :rate, :period, :gen, :suppress, CAST(:config AS jsonb))"
                    f" ON CONFLICT (id) {conflict} RETURNING {_COLUMNS}"
                ),
                {
                    "id": tenant,
                    "top_k": retrieval_top_k_max,
                    "rate": rate_limit,
                    "period": float(rate_limit_period_s),
                    "gen": bool(generation_enabled),
                    "suppress": bool(suppress_ungrounded),
                    "config": json.dumps(dict(config or {})),
                },
            )
            .mappings()
            .first()
        )
        if exist_ok:  # a changed limit starts from a fresh bucket
            conn.execute(text("DELETE FROM agentrag.rate_limits WHERE tenant_id = :id"), {"id": tenant})
    if row is None:
        raise InvalidInputError(f"tenant {tenant!r} already exists")
    return Tenant(**row)


def get_tenant(engine: Engine, tenant: str) -> Tenant:
    from sqlalchemy import text

    with engine.connect() as conn:
        row = (
            conn.execute(text(f"SELECT {_COLUMNS} FROM agentrag.tenants WHERE id = :id"), {"id": tenant})
            .mappings()
            .first()
        )
    if row is None:
        raise TenantNotFoundError(f"no tenant {tenant!r}")
    return Tenant(**row)


def list_tenants(engine: Engine) -> list[Tenant]:
    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(text(f"SELECT {_COLUMNS} FROM agentrag.tenants ORDER BY id")).mappings().all()
    return [Tenant(**row) for row in rows]


def set_state(engine: Engine, tenant: str, state: str) -> Tenant:
    """Suspend (``SUSPENDED``) or resume (``ACTIVE``) a tenant; effective on its next request."""
    from sqlalchemy import text

    if state not in STATES:
        raise InvalidInputError(f"state must be one of {STATES}, got {state!r}")
    with engine.begin() as conn:
        row = (
            conn.execute(
                text(
                    "UPDATE agentrag.tenants SET state = :state, updated_at = now() WHERE id = :id"
                    f" RETURNING {_COLUMNS}"
                ),
                {"id": tenant, "state": state},
            )
            .mappings()
            .first()
        )
    if row is None:
        raise TenantNotFoundError(f"no tenant {tenant!r}")
    return Tenant(**row)


@dataclass(frozen=True, slots=True)
class Admission:
    """What :func:`admit` found: the tenant (None: unknown) and whether a rate slot was taken."""

    tenant: Tenant | None
    allowed: bool
    retry_after_s: float = 0.0


# One statement: read the tenant and, for an ACTIVE one, try to take ``slots`` GCRA slots at once
# (1, or a lease: agentrag.server.leases). With T = period / limit,
# tat' = max(tat, now) + slots * T is stored when tat' - now <= period (the burst allows them all);
# otherwise tat stays and ``allowed`` records the refusal. The row lock of the upsert
# serialises concurrent requests of one tenant; RETURNING gives the latest tat either way.
# ``quiet`` turns off synchronous_commit for this statement's own (autocommit) transaction:
# rate-limit state is not worth an fsync per request; a crash forgets at most a few slots.
_ADMIT_SQL = f"""
WITH quiet AS (
    SELECT set_config('synchronous_commit', 'off', true) AS synchronous_commit
), t AS (
    SELECT {_COLUMNS}, make_interval(secs => rate_limit_period_s / rate_limit) AS emission,
           make_interval(secs => rate_limit_period_s * CAST(:slots AS integer) / rate_limit) AS take,
           make_interval(secs => rate_limit_period_s) AS period
    FROM agentrag.tenants WHERE id = :tenant
), slot AS (
    INSERT INTO agentrag.rate_limits AS r (tenant_id, tat, allowed)
    SELECT id, CASE WHEN take <= period THEN now() + take ELSE now() END, take <= period
    FROM t WHERE state = 'ACTIVE'
    ON CONFLICT (tenant_id) DO UPDATE SET
        allowed = (greatest(r.tat, now()) + (SELECT take FROM t) - now() <= (SELECT period FROM t)),
        tat = CASE
            WHEN greatest(r.tat, now()) + (SELECT take FROM t) - now() <= (SELECT period FROM t)
            THEN greatest(r.tat, now()) + (SELECT take FROM t)
            ELSE r.tat
        END
    RETURNING r.tat, r.allowed
)
SELECT t.*, quiet.synchronous_commit, slot.allowed AS taken,
       extract(epoch FROM slot.tat + t.emission - t.period - now()) AS wait_s
FROM t LEFT JOIN slot ON true CROSS JOIN quiet
"""


# The same statement in the driver's own placeholder style (the Admitter sends it to psycopg).
_ADMIT_SQL_DRIVER = _ADMIT_SQL.replace(":tenant", "%(tenant)s").replace(":slots", "%(slots)s")


def admit(engine: Engine, tenant: str) -> Admission:
    """Look the tenant up and, when ACTIVE, take one rate-limit slot: one statement in its own
    (autocommit) transaction, so one round trip to the database (no BEGIN / COMMIT)."""
    from sqlalchemy import text

    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        row = conn.execute(text(_ADMIT_SQL), {"tenant": tenant, "slots": 1}).mappings().first()
    return _admission(row)


def _admission(row: Any) -> Admission:  # a mapping or None
    if row is None:
        return Admission(None, False)
    values = dict(row)
    taken, wait = values.pop("taken"), values.pop("wait_s")
    values.pop("emission"), values.pop("take"), values.pop("period"), values.pop("synchronous_commit")
    found = Tenant(**values)
    if not found.active:
        return Admission(found, False)
    return Admission(found, bool(taken), 0.0 if taken else max(float(wait or 0.0), 0.0))


class Admitter:
    """:func:`admit` on a small pool of its own: autocommit connections, no pre-ping, no ORM layer.

    The store's pool checks each connection before handing it out; for a one-statement request
    that would double the admission's round trips. Here a connection found dead by the statement
    itself is replaced and the statement sent once more. A disconnect after PostgreSQL committed
    the slot but before the reply arrived costs the tenant one extra slot: the limit errs on the
    strict side, never the lenient one.

    The statement goes to the driver (psycopg) directly on the pooled connection, as a prepared
    statement: SQLAlchemy's execution layer (statement cache lookup, result metadata) cost more
    Python than the round trip itself, on every request.

    ``admitter(tenant, lease=True)`` (what the gateway asks: :mod:`agentrag.server.leases`) may admit
    from slots an earlier statement took ahead, at most ``lease_slots`` at a time for ``lease_ttl_s``.
    """

    def __init__(
        self, engine: Engine, *, pool_size: int = 4, lease_slots: int = 8, lease_ttl_s: float = 1.0
    ) -> None:
        from sqlalchemy import create_engine

        from agentrag.server.leases import Leases

        self.leases = Leases(most=lease_slots, ttl_s=lease_ttl_s)

        self.engine = create_engine(
            engine.url,
            pool_size=pool_size,
            max_overflow=0,
            pool_pre_ping=False,
            pool_use_lifo=True,  # the most recently used connection: its backend is the warmest
            pool_timeout=30,
            hide_parameters=True,
            isolation_level="AUTOCOMMIT",
        )

    def __repr__(self) -> str:
        return f"Admitter({self.engine.pool.status()})"

    def __call__(self, tenant: str, *, lease: bool = False) -> Admission:
        """The tenant's admission: one statement, or with ``lease`` a slot taken ahead when one is left."""
        slots = 1
        if lease:
            leased = self.leases.take(tenant)
            if leased is not None:
                return leased
            slots = self.leases.size(tenant)
        admission = self._statement(tenant, slots)
        limited = not admission.allowed and admission.tenant is not None and admission.tenant.active
        if slots > 1 and limited:
            slots = 1  # the bucket cannot give the whole lease: this request's own slot, exactly
            admission = self._statement(tenant, 1)
            limited = not admission.allowed
        self.leases.hold(tenant, admission, slots)
        if lease and limited:  # over the limit: a slot another thread's statement took ahead still counts
            return self.leases.take(tenant) or admission
        return admission

    def _statement(self, tenant: str, slots: int) -> Admission:
        params = {"tenant": tenant, "slots": slots}
        return _admission(execute_on_driver(self.engine, _ADMIT_SQL_DRIVER, params, fetch=True))

    def close(self) -> None:
        self.engine.dispose()


# ---- audit ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AuditRow:
    id: int
    type: str
    query_id: str
    tenant_id: str | None
    workspace_id: str | None
    session_id: str | None
    latency_ms: float | None
    details: dict[str, Any]
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat()
        return out


def audit_rows(events: Iterable[Mapping[str, Any]], *, latency_ms: float | None) -> list[dict[str, Any]]:
    """``AuditEvent.to_dict()`` shapes as the parameter rows of :func:`insert_audit_rows`."""
    return [
        {
            "type": e["type"],
            "query_id": e["query_id"],
            "tenant": e.get("tenant"),
            "workspace": e.get("workspace"),
            "session": e.get("session"),
            "latency": latency_ms,
            "details": json.dumps(dict(e.get("details") or {}), default=str),
        }
        for e in events
    ]


# Every row of a batch in one INSERT (columns as arrays, unnest'ed): one statement, one round trip.
_AUDIT_INSERT = """
INSERT INTO agentrag.audit_events (type, query_id, tenant_id, workspace_id, session_id, latency_ms, details)
SELECT * FROM unnest(
    CAST(:type AS text[]), CAST(:query_id AS text[]), CAST(:tenant AS text[]), CAST(:workspace AS text[]),
    CAST(:session AS text[]), CAST(:latency AS double precision[]), CAST(CAST(:details AS text[]) AS jsonb[])
)
"""
# The driver's form binds the column arrays in PostgreSQL's binary format (``%(name)b``): as text, psycopg
# quotes every array element with a regular expression (the JSON details' every '"'), ~35 us of the writer
# thread's CPU per row, against ~3.4 us in binary (the rows stored are the same: tests/test_audit_writer.py).
AUDIT_INSERT_DRIVER = re.sub(r"(?<!:):(\w+)", r"%(\1)b", _AUDIT_INSERT)
_AUDIT_KEYS = ("type", "query_id", "tenant", "workspace", "session", "latency", "details")


def audit_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Rows made by :func:`audit_rows` as the column arrays of one multi-row INSERT."""
    return {key: [row[key] for row in rows] for key in _AUDIT_KEYS}


def insert_audit_rows(engine: Engine, rows: list[dict[str, Any]]) -> int:
    """Insert rows made by :func:`audit_rows` in one statement and one commit; returns the count."""
    from sqlalchemy import text

    if not rows:
        return 0
    with engine.begin() as conn:
        conn.execute(text(_AUDIT_INSERT), audit_columns(rows))
    return len(rows)


def write_audit(engine: Engine, events: Iterable[Mapping[str, Any]], *, latency_ms: float | None) -> int:
    """Persist audit events (``AuditEvent.to_dict()`` shapes) now, in one statement; returns the count.
    The server writes through :class:`agentrag.server.auditlog.AuditWriter` instead (batched)."""
    return insert_audit_rows(engine, audit_rows(events, latency_ms=latency_ms))


def list_audit(
    engine: Engine,
    *,
    tenant: str | None = None,
    query_id: str | None = None,
    limit: int = 50,
    before_id: int | None = None,
) -> list[AuditRow]:
    """Audit events, newest first, optionally of one tenant / one query; ``before_id``: only rows
    with a smaller id (the next page after a page whose last row has that id)."""
    from sqlalchemy import text

    if not isinstance(limit, int) or limit < 1:
        raise InvalidInputError(f"limit must be an integer >= 1, got {limit!r}")
    clauses: list[str] = []
    params: dict[str, Any] = {"limit": int(limit)}
    if before_id is not None:
        clauses.append("id < :before_id")
        params["before_id"] = int(before_id)
    if tenant is not None:
        clauses.append("tenant_id = :tenant")
        params["tenant"] = tenant
    if query_id is not None:
        clauses.append("query_id = :query_id")
        params["query_id"] = query_id
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT id, type, query_id, tenant_id, workspace_id, session_id, latency_ms, details,"
                f" created_at FROM agentrag.audit_events {where} ORDER BY id DESC LIMIT :limit"
            ),
            params,
        ).mappings()
        return [AuditRow(**row) for row in rows]


def purge_audit(engine: Engine, *, older_than_days: float, batch: int = 10_000) -> int:
    """Delete audit rows older than ``older_than_days`` days, ``batch`` rows per transaction (so a
    long backlog never holds one long lock); returns how many were deleted."""
    from sqlalchemy import text

    if not older_than_days > 0:
        raise InvalidInputError(f"older_than_days must be > 0, got {older_than_days!r}")
    total = 0
    while True:
        with engine.begin() as conn:
            deleted = conn.execute(
                text(
                    "DELETE FROM agentrag.audit_events WHERE id IN (SELECT id FROM agentrag.audit_events"
                    " WHERE created_at < now() - make_interval(secs => :seconds) ORDER BY id LIMIT :batch)"
                ),
                {"seconds": float(older_than_days) * 86400.0, "batch": int(batch)},
            ).rowcount
        total += deleted
        if deleted < batch:
            return total
