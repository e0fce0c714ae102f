"""A large tenant's own HNSW index: its name, whether it is there, and the vector leg through it.

``Store.optimize`` (:mod:`agentrag.store.tenant_indexes`) gives every tenant of at least
:data:`TENANT_INDEX_MIN_ROWS` chunks a partial HNSW index of its own::

    CREATE INDEX chunks_hnsw_<ID>_t<sha256(tenant)[:16]> ON agentrag.chunks
        USING hnsw ((embedding::vector(<DIMS>)) <opclass>) WITH (m = .., ef_construction = ..)
        (a halfvec collection: ``(embedding_half::halfvec(<DIMS>)) halfvec_<..>_ops``)
        WHERE collection_id = <ID> AND tenant_id = '<tenant>'

and drops it when the tenant falls under :data:`TENANT_INDEX_KEEP_ROWS`. A tenant-scoped search
whose scope still holds at least :data:`TENANT_WALK_MIN_ROWS` chunks then walks that index
instead of scanning the scope exactly or walking the collection's index (``hnsw-tenant`` on the
plan): the walk visits the tenant's tuples only, so it needs about ``depth`` of them, not ``depth /
share``. The statement states ``c.tenant_id = :t_tenant`` (a bound parameter); PostgreSQL proves a
partial index's predicate from a *custom* plan only (the value known when planning), and a
statement psycopg prepared after five runs may get a generic plan: the leg sets ``plan_cache_mode
= force_custom_plan`` for its transaction. A scope narrower than the tenant (a workspace, a filter,
grants, a session) is tested on top, with pgvector's iterative scan: the scope's document ids when
the plan read them, else the documents join under the predicate; ``hnsw.max_scan_tuples`` is raised
to the tuples a scope of that share of the tenant needs. A short result is re-run exactly (as
every walk is, :func:`agentrag.retrieval.vector.vector_leg`).

``c.tenant_id`` is read only through such an index: chunks written before migration 0046 have
none until ``Store.optimize`` fills their tenant's before building its index.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import TYPE_CHECKING

from agentrag.retrieval.scope_sql import compile_scope
from agentrag.retrieval.scoped import MAX_MAX_SCAN_TUPLES, MIN_MAX_SCAN_TUPLES, SCAN_MARGIN, LegPlan
from agentrag.scope import Scope

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "ENABLED",
    "TENANT_INDEX_KEEP_ROWS",
    "TENANT_INDEX_MIN_ROWS",
    "TENANT_WALK_MIN_ROWS",
    "prepare_tenant_walk",
    "tenant_index_name",
    "tenant_index_prefix",
    "tenant_index_rows",
    "tenant_leg",
    "tenant_only",
]

#: False: tenant indexes are never used by a search (benchmarks/scale_tenants.py's "without" column).
ENABLED = True
#: A tenant of at least this many chunks gets its own HNSW index from ``Store.optimize``: an exact scan
#: of a scope this size costs about the unscoped search at 200k chunks (benchmarks/RESULTS.md, scoped search).
TENANT_INDEX_MIN_ROWS = 5_000
#: ... and keeps it until it falls under this many (half: a tenant near the line is not rebuilt and
#: dropped by every optimize).
TENANT_INDEX_KEEP_ROWS = 2_500
#: A scope of fewer chunks is scanned exactly even inside an indexed tenant (a narrow filter).
TENANT_WALK_MIN_ROWS = 2_500


def tenant_index_prefix(collection_id: int) -> str:
    """The name every tenant index of the collection starts with (never the collection's own)."""
    return f"chunks_hnsw_{int(collection_id)}_t"


def tenant_index_name(collection_id: int, tenant: str) -> str:
    """The tenant's index name: an identifier of digits and hex only, whatever the tenant's text."""
    return tenant_index_prefix(collection_id) + hashlib.sha256(tenant.encode("utf-8")).hexdigest()[:16]


def tenant_index_rows(conn: Connection, collection_id: int, tenant: str) -> int | None:
    """The rows of the tenant's index when it exists and is valid (None otherwise; ``0`` when
    PostgreSQL has not counted them yet)."""
    from sqlalchemy import text

    row = conn.execute(
        text(
            "SELECT greatest(c.reltuples, 0)::bigint FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indexrelid = to_regclass(:name) AND i.indisvalid AND i.indisready"
        ),
        {"name": f"agentrag.{tenant_index_name(collection_id, tenant)}"},
    ).first()
    return None if row is None else int(row[0])


def tenant_only(where: str) -> bool:
    """Whether a collection's WHERE fragment is the tenant's equality and nothing else."""
    return where == compile_scope(Scope(tenant="-"))[0]


def tenant_leg(
    conn: Connection, leg: LegPlan, scope: Scope | None, collection_id: int, depth: int
) -> LegPlan:
    """``leg`` through the tenant's own index when the scope's tenant has one and the scope is large
    enough (see the module docstring); otherwise ``leg`` unchanged."""
    if not ENABLED or scope is None or scope.tenant is None or scope.all_scopes:
        return leg
    if leg.vector not in ("exact", "hnsw-iterative") or leg.scope_rows is None:
        return leg
    if leg.scope_rows < TENANT_WALK_MIN_ROWS:
        return leg
    rows = tenant_index_rows(conn, collection_id, scope.tenant)
    if rows is None:
        return leg
    tenant_rows = max(rows, leg.scope_rows)
    need = SCAN_MARGIN * depth * tenant_rows // max(leg.scope_rows, 1)
    tuples = max(MIN_MAX_SCAN_TUPLES, min(MAX_MAX_SCAN_TUPLES, need))
    why = f"the tenant's own HNSW index ({rows} rows); {leg.reason}"
    return replace(leg, vector="hnsw-tenant", max_scan_tuples=tuples, reason=why)


def prepare_tenant_walk(conn: Connection, tuples: int) -> None:
    """The transaction's settings for a walk of a tenant's index: ``max_scan_tuples``, the ordered
    walk preferred to a sort (as :func:`agentrag.retrieval.scoped.set_max_scan_tuples`), and custom
    plans, so that the partial index's predicate is proved from the bound tenant."""
    from sqlalchemy import text

    conn.execute(
        text(
            "SELECT set_config('hnsw.max_scan_tuples', :n, true), set_config('enable_sort', 'off', true),"
            " set_config('plan_cache_mode', 'force_custom_plan', true)"
        ),
        {"n": str(int(tuples))},
    )
