"""The stored tsvectors of the ``lexical_sql`` mode: ``agentrag.chunk_tsv`` and one GIN index per
collection, synced by :meth:`Store.ensure_text_index` (see its docstring)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["TEXT_INDEX_BUILD_MEMORY", "TSV_LOCK", "sync_tsvectors"]

TSV_LOCK = 0x61727473  # advisory-lock space of the tsvector syncs ("arts"); the key is the collection id
#: maintenance_work_mem of the transaction that builds a collection's GIN index over its tsvectors
#: (PostgreSQL's 64 MB default makes a large build flush its posting lists many times over)
TEXT_INDEX_BUILD_MEMORY = "1GB"


def sync_tsvectors(engine: Engine, cid: int, *, known: bool) -> int | None:
    """Insert the tsvectors of the collection's chunks that have none, and build its GIN index if
    it is missing (checked when the version moved or ``known`` is false: this store never synced
    it). Returns the collection version synced, None when the collection is gone."""
    from sqlalchemy import text

    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:space, :cid)"), {"space": TSV_LOCK, "cid": cid})
        row = conn.execute(
            text("SELECT version, tsv_version FROM agentrag.collections WHERE id = :cid"), {"cid": cid}
        ).one_or_none()
        if row is None:
            return None
        current, synced = int(row.version), row.tsv_version
        if synced != current:
            conn.execute(
                text(
                    "INSERT INTO agentrag.chunk_tsv (chunk_id, collection_id, tsv)"
                    " SELECT c.id, c.collection_id, to_tsvector('english', c.text) FROM agentrag.chunks c"
                    " WHERE c.collection_id = :cid AND NOT EXISTS"
                    " (SELECT 1 FROM agentrag.chunk_tsv t WHERE t.chunk_id = c.id)"
                    " ON CONFLICT (chunk_id) DO NOTHING"
                ),
                {"cid": cid},
            )
            conn.execute(
                text("UPDATE agentrag.collections SET tsv_version = :v WHERE id = :cid"),
                {"v": current, "cid": cid},
            )
        if synced != current or not known:
            # A first fill inserts into a table without this collection's index, then builds it
            # once (cheaper than growing a GIN index row by row), with more memory than the
            # server's default for that build only (SET LOCAL: this transaction alone).
            missing = conn.execute(
                text("SELECT to_regclass(:name) IS NULL"), {"name": f"agentrag.chunk_tsv_gin_{cid}"}
            ).scalar()
            if missing:
                conn.execute(
                    text("SELECT set_config('maintenance_work_mem', :m, true)"),
                    {"m": TEXT_INDEX_BUILD_MEMORY},
                )
                conn.execute(
                    text(
                        f"CREATE INDEX IF NOT EXISTS chunk_tsv_gin_{cid} ON agentrag.chunk_tsv"
                        f" USING gin (tsv) WHERE collection_id = {cid}"
                    )
                )
    return current
