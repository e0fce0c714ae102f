"""``Store.optimize``: a partial HNSW index of its own for every large tenant of a collection.

A tenant-scoped search of a tenant holding a few percent of a collection either scans the tenant's
chunks exactly or walks the collection's HNSW index, testing every visited tuple for the tenant
(about ``depth / share`` of them): both 2-3x an unscoped search at 200k chunks (benchmarks/RESULTS.md,
scoped search). A tenant of at least :data:`~agentrag.retrieval.tenant_walk.TENANT_INDEX_MIN_ROWS`
chunks gets its own index, the collection's index restricted to it, which searches walk instead
(:mod:`agentrag.retrieval.tenant_walk`); it is dropped when the tenant falls under
:data:`~agentrag.retrieval.tenant_walk.TENANT_INDEX_KEEP_ROWS`, or is gone.

Each build first fills ``chunks.tenant_id`` of the tenant's chunks written before migration 0046,
then ``CREATE INDEX CONCURRENTLY`` (writes go on while it builds; a search sees the index only once
it is valid). The tenant's text reaches the DDL through PostgreSQL's own ``format('%L')``; the
index's name is digits and hex (:func:`~agentrag.retrieval.tenant_walk.tenant_index_name`). The
indexes go with the collection's own when a re-embedding, a new ``hnsw_m`` / ``ef_construction``
or a deletion drops it (:func:`drop_tenant_indexes`); the next ``optimize`` builds them again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrag.errors import InvalidInputError
from agentrag.retrieval import tenant_walk
from agentrag.retrieval.catalog import opclass, vector_expr
from agentrag.retrieval.dberrors import guarded
from agentrag.retrieval.scope_sql import compile_scope
from agentrag.retrieval.tenant_walk import tenant_index_name, tenant_index_prefix
from agentrag.scope import Scope

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from agentrag.store.collections import Collection

__all__ = ["OptimizeReport", "TenantIndexMethods", "drop_tenant_indexes", "optimize_collection"]

_NAME = re.compile(r"chunks_hnsw_\d+_t[0-9a-f]{16}")


@dataclass(frozen=True, slots=True)
class OptimizeReport:
    """What ``Store.optimize`` did to one collection's tenant indexes (``dry_run``: what it would do;
    nothing was built or dropped)."""

    collection: str
    built: tuple[str, ...]  # tenants given an index now
    kept: tuple[str, ...]  # tenants whose index was there and stays
    dropped: int  # indexes of tenants under the keep line, gone, or left invalid by a failed build
    clusters: str = ""  # what became of its coarse clusters (agentrag.store.vector_clusters.ClusterFit)
    dry_run: bool = False
    clusters_changed: bool = False  # fitted or dropped (in a dry run: would be)

    @property
    def due(self) -> bool:
        """Whether optimizing changes (or, in a dry run, would change) anything: a tenant index built or
        dropped, clusters fitted or dropped."""
        return bool(self.built or self.dropped or self.clusters_changed)

    def to_dict(self) -> dict[str, object]:
        return {
            "collection": self.collection,
            "built": list(self.built),
            "kept": list(self.kept),
            "dropped": self.dropped,
            "clusters": self.clusters,
            "dry_run": self.dry_run,
            "due": self.due,
        }

    def __str__(self) -> str:
        clusters = f"; {self.clusters}" if self.clusters else ""
        if self.dry_run:
            return (
                f"optimizing {self.collection!r} would build {len(self.built)} tenant index(es),"
                f" keep {len(self.kept)}, drop {self.dropped}{clusters}"
            )
        return (
            f"optimized {self.collection!r}: {len(self.built)} tenant index(es) built,"
            f" {len(self.kept)} kept, {self.dropped} dropped{clusters}"
        )


def existing_tenant_indexes(conn: Connection, collection_id: int) -> dict[str, bool]:
    """The collection's tenant indexes: name -> valid."""
    from sqlalchemy import text

    rows = conn.execute(
        text(
            "SELECT c.relname, i.indisvalid AND i.indisready FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'agentrag' AND starts_with(c.relname, :prefix)"
        ),
        {"prefix": tenant_index_prefix(collection_id)},
    ).all()
    return {str(name): bool(valid) for name, valid in rows if _NAME.fullmatch(str(name))}


def drop_tenant_indexes(conn: Connection, collection_id: int) -> int:
    """Drop every tenant index of the collection in ``conn``'s transaction; how many."""
    from sqlalchemy import text

    names = existing_tenant_indexes(conn, collection_id)
    for name in names:
        conn.execute(text(f"DROP INDEX IF EXISTS agentrag.{name}"))
    return len(names)


def _tenant_sizes(conn: Connection, collection_id: int) -> dict[str, int]:
    from sqlalchemy import text

    rows = conn.execute(
        text(
            "SELECT tenant_id, sum(chunk_count) FROM agentrag.documents"
            " WHERE collection_id = :c AND tenant_id IS NOT NULL GROUP BY tenant_id"
            " HAVING sum(chunk_count) >= :keep"
        ),
        {"c": int(collection_id), "keep": tenant_walk.TENANT_INDEX_KEEP_ROWS},
    ).all()
    return {str(t): int(n) for t, n in rows}


def _fill_tenant(engine: Engine, collection_id: int, tenant: str) -> None:
    """Chunks of the tenant written before migration 0046 get its tenant (document by document's
    tenant: a document's tenant never changes)."""
    from sqlalchemy import text

    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE agentrag.chunks c SET tenant_id = d.tenant_id FROM agentrag.documents d"
                " WHERE d.id = c.document_id AND d.collection_id = :c AND d.tenant_id = :t"
                " AND c.tenant_id IS NULL"
            ),
            {"c": int(collection_id), "t": tenant},
        )


def _build(engine: Engine, coll: Collection, tenant: str, maintenance_work_mem: str) -> None:
    from sqlalchemy import text

    compile_scope(Scope(tenant=tenant))  # the value's checks (NUL, lone surrogates): ScopeError
    name = tenant_index_name(coll.id, tenant)
    ops, stored = opclass(coll.distance, coll.vector_type), vector_expr(coll.dimensions, coll.vector_type)
    m, ef_c = int(coll.hnsw_m), int(coll.hnsw_ef_construction)
    with engine.connect() as conn:
        ddl = conn.execute(
            text(
                "SELECT format('CREATE INDEX CONCURRENTLY IF NOT EXISTS %I ON agentrag.chunks"
                f" USING hnsw (({stored}) {ops})"
                f" WITH (m = {m}, ef_construction = {ef_c})"
                f" WHERE collection_id = {int(coll.id)} AND tenant_id = %L',"
                " CAST(:name AS text), CAST(:t AS text))"
            ),
            {"name": name, "t": tenant},
        ).scalar_one()
        conn.rollback()
        auto = conn.execution_options(isolation_level="AUTOCOMMIT")
        memory = {"m": maintenance_work_mem}
        auto.execute(text("SELECT set_config('maintenance_work_mem', :m, false)"), memory)
        try:
            auto.exec_driver_sql(ddl)
        except BaseException:
            # a failed concurrent build leaves an invalid index behind: it goes (the next optimize retries)
            auto.exec_driver_sql(f"DROP INDEX IF EXISTS agentrag.{name}")
            raise
        finally:
            auto.execute(text("RESET maintenance_work_mem"))


def _drop(engine: Engine, name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a tenant index name: {name!r}")
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
            f"DROP INDEX CONCURRENTLY IF EXISTS agentrag.{name}"
        )


def optimize_collection(
    engine: Engine, coll: Collection, *, maintenance_work_mem: str, dry_run: bool = False
) -> OptimizeReport:
    """Build the missing tenant indexes of ``coll`` and drop the ones no longer wanted (see the module);
    ``dry_run``: report which, and touch none."""
    from sqlalchemy import text

    if not re.fullmatch(r"\d{1,6}(kB|MB|GB)", maintenance_work_mem):
        raise InvalidInputError(f"maintenance_work_mem must look like '512MB', got {maintenance_work_mem!r}")
    with engine.connect() as conn:
        sizes = _tenant_sizes(conn, coll.id)
        existing = existing_tenant_indexes(conn, coll.id)
        conn.rollback()
    wanted = {tenant_index_name(coll.id, t): t for t in sizes}
    built, kept = [], []
    dropped = 0
    for name, valid in sorted(existing.items()):
        if name not in wanted or not valid:
            if not dry_run:
                _drop(engine, name)
            dropped += 1
        else:
            kept.append(wanted[name])
    for name, tenant in sorted(wanted.items(), key=lambda item: item[1]):
        if existing.get(name) or sizes[tenant] < tenant_walk.TENANT_INDEX_MIN_ROWS:
            continue
        if not dry_run:
            _fill_tenant(engine, coll.id, tenant)
            _build(engine, coll, tenant, maintenance_work_mem)
        built.append(tenant)
    if dry_run:
        return OptimizeReport(coll.name, tuple(built), tuple(sorted(kept)), dropped, dry_run=True)
    if built:
        with engine.begin() as conn:  # the new indexes' reltuples, for the plans' max_scan_tuples
            conn.execute(text("ANALYZE agentrag.chunks"))
    return OptimizeReport(coll.name, tuple(built), tuple(sorted(kept)), dropped)


class TenantIndexMethods:
    """``Store.optimize`` (a base class of :class:`~agentrag.store.store.Store`)."""

    engine: Engine

    @guarded("optimizing a collection", retry=False)
    def optimize(
        self,
        collection: str,
        *,
        maintenance_work_mem: str = "512MB",
        clusters: bool = True,
        dry_run: bool = False,
    ) -> OptimizeReport:
        """Give every tenant of ``collection`` holding at least ``TENANT_INDEX_MIN_ROWS`` (5,000) chunks
        its own partial HNSW index, which its tenant-scoped searches then walk, and drop the index of a
        tenant fallen under ``TENANT_INDEX_KEEP_ROWS`` (2,500); run after large loads or on a schedule.
        The builds are concurrent (writes go on). First, a cosine collection of at least 20,000 chunks
        gets coarse clusters (:mod:`agentrag.store.vector_clusters`: k-means centroids and each chunk's
        nearest, which its large scoped exact scans then read in part), fitted again when it has changed
        by half; ``clusters=False`` drops them (its scopes are scanned whole). Returns what was built,
        kept and dropped (:class:`OptimizeReport`); CollectionNotFoundError for an unknown collection.
        ``dry_run=True`` writes nothing and reports what optimizing would do (``report.due``: anything)."""
        from dataclasses import replace

        from agentrag.store.collections import read_collection
        from agentrag.store.vector_clusters import fit_clusters

        coll = read_collection(self.engine, collection)
        fit = fit_clusters(self, coll, enabled=clusters, dry_run=dry_run)  # type: ignore[arg-type]
        report = optimize_collection(
            self.engine, coll, maintenance_work_mem=maintenance_work_mem, dry_run=dry_run
        )
        changed = fit.action in ("fitted", "dropped", "would fit", "would drop")
        return replace(report, clusters=str(fit), clusters_changed=changed)
