"""The stored tsvectors of the ``lexical_sql`` mode: ``agentrag.chunk_tsv`` and one GIN index per
collection, synced by :meth:`Store.ensure_text_index` (see its docstring).

Each chunk is analysed in its language (its collection's declared one, else its document's; None:
English) as :mod:`agentrag.retrieval.text_search` says: by PostgreSQL with the language's
configuration where the server has one (``to_tsvector(cfg, text)``, the configuration bound and
cast to ``regconfig``; English exactly as before), else by our analyser into ``simple``. The
languages of a collection's tsvectors are kept in ``collections.tsv_languages``: a search analyses
the question in each of them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agentrag.retrieval.text_search import SIMPLE, TS_CONFIG_NAMES, analysed_text, sql_configs

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

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
            text("SELECT version, tsv_version, tsv_languages FROM agentrag.collections WHERE id = :cid"),
            {"cid": cid},
        ).one_or_none()
        if row is None:
            return None
        current, synced = int(row.version), row.tsv_version
        if synced != current:
            languages = _insert_tsvectors(conn, cid, every_chunk=row.tsv_languages is None)
            conn.execute(
                text(
                    "UPDATE agentrag.collections SET tsv_version = :v, tsv_languages = ARRAY("
                    "SELECT DISTINCT x FROM unnest(COALESCE(tsv_languages, '{}') || CAST(:langs AS text[])) x"
                    " ORDER BY x) WHERE id = :cid"
                ),
                {"v": current, "cid": cid, "langs": languages},
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


# The chunks of :cid with their documents and collection (a chunk's language, as the BM25 leg reads
# it: _LANGUAGE); _PENDING: those without a tsvector.
_CHUNKS = """
FROM agentrag.chunks c
JOIN agentrag.documents d ON d.id = c.document_id
JOIN agentrag.collections col ON col.id = c.collection_id
WHERE c.collection_id = :cid
"""
_PENDING = _CHUNKS + " AND NOT EXISTS (SELECT 1 FROM agentrag.chunk_tsv t WHERE t.chunk_id = c.id)"
_LANGUAGE = "COALESCE(col.language, d.language, 'en')"


def _insert_tsvectors(conn: Connection, cid: int, *, every_chunk: bool) -> list[str]:
    """Insert the missing tsvectors of the collection; the languages of the chunks read."""
    from sqlalchemy import text

    available = conn.execute(
        text("SELECT cfgname::text FROM pg_ts_config WHERE cfgname::text = ANY(:names)"),
        {"names": list(TS_CONFIG_NAMES)},
    ).scalars()
    configs = sql_configs(available)
    scope = {"cid": cid}
    read = _CHUNKS if every_chunk else _PENDING
    languages = list(conn.execute(text(f"SELECT DISTINCT {_LANGUAGE} {read}"), scope).scalars())
    conn.execute(
        text(
            "INSERT INTO agentrag.chunk_tsv (chunk_id, collection_id, tsv)"
            f" SELECT c.id, c.collection_id, to_tsvector(CAST(CAST(:configs AS jsonb) ->> {_LANGUAGE}"
            f" AS regconfig), c.text) {_PENDING} AND (CAST(:configs AS jsonb) ->> {_LANGUAGE}) IS NOT NULL"
            " ON CONFLICT (chunk_id) DO NOTHING"
        ),
        {**scope, "configs": json.dumps(configs)},
    )
    for language in sorted(set(languages) - set(configs)):
        rows = conn.execute(
            text(f"SELECT c.id, c.text {_PENDING} AND {_LANGUAGE} = :lang"),
            {**scope, "lang": language},
        ).all()
        if rows:
            conn.execute(
                text(
                    "INSERT INTO agentrag.chunk_tsv (chunk_id, collection_id, tsv)"
                    " VALUES (:id, :cid, to_tsvector(CAST(:config AS regconfig), :analysed))"
                    " ON CONFLICT (chunk_id) DO NOTHING"
                ),
                [
                    {
                        "id": r.id,
                        "cid": cid,
                        "config": SIMPLE,
                        "analysed": analysed_text(r.text, language),
                    }
                    for r in rows
                ],
            )
    return languages
