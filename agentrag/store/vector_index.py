"""The collection's HNSW index: its CREATE INDEX (the body of ``Store.ensure_vector_index``), and
as an ingest or a re-embedding sees it: does it exist, build it after a load (with the memory the
graph needs), count the chunks it covers."""

from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING, Any

from agentrag.errors import InvalidInputError, StoreError
from agentrag.retrieval.catalog import opclass, vector_expr
from agentrag.store.connection import retrying

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from agentrag.store.collections import Collection
    from agentrag.store.store import Store

__all__ = ["build_index", "count_chunks", "create_vector_index", "index_exists"]


def _scalar(store: Store, sql: str, params: dict[str, Any]) -> Any:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        return conn.execute(text(sql), params).scalar()


def count_chunks(store: Store, coll: Collection) -> int:
    sql = "SELECT count(*) FROM agentrag.chunks WHERE collection_id = :c"
    return int(retrying("counting chunks", functools.partial(_scalar, store, sql, {"c": coll.id})) or 0)


def index_exists(store: Store, coll: Collection) -> bool:
    found = retrying(
        "looking up the vector index",
        functools.partial(
            _scalar, store, "SELECT to_regclass(:name) IS NOT NULL", {"name": f"agentrag.{coll.hnsw_index}"}
        ),
    )
    return bool(found)


def build_index(store: Store, coll: Collection, *, bulk_load: bool) -> bool:
    """Build the collection's HNSW index if missing; True when this call built it."""
    if index_exists(store, coll):
        return False
    options: dict[str, Any] = {}
    if bulk_load:
        options = {
            "maintenance_work_mem": _graph_memory(count_chunks(store, coll), coll.dimensions, coll.hnsw_m)
        }
    try:
        retrying("building the vector index", functools.partial(store.ensure_vector_index, coll, **options))
    except StoreError as exc:  # a concurrent ingest may be building the same index (23505)
        if getattr(exc, "sqlstate", None) not in ("23505", "42P07"):
            raise
        return False
    return True


def _graph_memory(rows: int, dimensions: int, m: int = 16) -> str:
    """maintenance_work_mem for an HNSW build of ``rows`` vectors: the whole graph in memory
    (about the vector plus 0.5 kB of neighbour lists per row at m=16, in proportion to m),
    between 1 GB and 4 GB."""
    need = rows * (4 * dimensions + 32 * m) * 5 // 4
    return f"{min(max(need // 2**20 + 1, 1024), 4096)}MB"


def create_vector_index(
    engine: Engine, collection: Collection, *, maintenance_work_mem: str, parallel_workers: int | None
) -> None:
    """``Store.ensure_vector_index``: build the collection's HNSW index if it is missing, with its
    recorded parameters, and refresh the planner statistics after a first build (see its docstring)."""
    from sqlalchemy import text

    if not re.fullmatch(r"\d{1,6}(kB|MB|GB)", maintenance_work_mem):
        raise InvalidInputError(f"maintenance_work_mem must look like '512MB', got {maintenance_work_mem!r}")
    ops = opclass(collection.distance, collection.vector_type)
    sql = (
        f"CREATE INDEX IF NOT EXISTS {collection.hnsw_index} ON agentrag.chunks "
        f"USING hnsw (({vector_expr(collection.dimensions, collection.vector_type)}) {ops})"
        f" WITH (m = {int(collection.hnsw_m)}, ef_construction = {int(collection.hnsw_ef_construction)})"
        f" WHERE collection_id = {int(collection.id)}"
    )
    if parallel_workers is None:
        parallel_workers = min(max((os.cpu_count() or 1) - 1, 0), 7)
    if not isinstance(parallel_workers, int) or not 0 <= parallel_workers <= 64:
        raise InvalidInputError(f"parallel_workers must be an int in [0, 64], got {parallel_workers!r}")
    with engine.begin() as conn:
        missing = conn.execute(
            text("SELECT to_regclass(:name) IS NULL"), {"name": f"agentrag.{collection.hnsw_index}"}
        ).scalar()
        conn.execute(text("SELECT set_config('maintenance_work_mem', :m, true)"), {"m": maintenance_work_mem})
        conn.execute(
            text("SELECT set_config('max_parallel_maintenance_workers', :w, true)"),
            {"w": str(parallel_workers)},
        )
        conn.execute(text(sql))
    if missing:
        with engine.begin() as conn:
            conn.execute(text("ANALYZE agentrag.chunks, agentrag.documents"))
