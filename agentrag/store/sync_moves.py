"""A sync's renames written (:mod:`agentrag.store.sync`): each old document's row, chunks (with their
vectors, under the ids a fresh ingest gives), session links and relations moved to its new key in a
handful of set-based statements inside the caller's transaction, the old rows deleted and the revision
lineage continued."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentrag.store.acl import enforced_sql
from agentrag.store.prepare import PreparedDocument, json_default
from agentrag.store.revisions import continue_lineages

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["SCOPE_SQL", "write_moves"]

SCOPE_SQL = "coalesce(tenant_id, '') = :tenant AND coalesce(workspace_id, '') = :workspace"


def write_moves(
    conn: Connection,
    params: dict[str, Any],
    olds: list[str],
    news: list[str],
    old_ids: list[str],
    new_ids: list[str],
    read: dict[str, PreparedDocument],
    columns: Sequence[tuple[Any, Any]],
    grants: Sequence[Any],
) -> None:
    """Move ``olds[i]`` (document ``old_ids[i]``) to ``news[i]`` (``new_ids[i]``); ``params``: the
    collection (``cid``) and the scope (``tenant``, ``workspace``); ``columns`` and ``grants``: the new
    files' classification / date and grants, as their ingest would write them."""
    from sqlalchemy import text

    pairs = "unnest(CAST(:old_ids AS text[]), CAST(:new_ids AS text[])) AS m(old_id, new_id)"
    ids = {"old_ids": old_ids, "new_ids": new_ids}
    # the new file's grants are the source's; what was granted / revoked by hand moves with the row
    elements = "ARRAY(SELECT jsonb_array_elements_text(CAST(m.grants AS jsonb)))"
    source = f"CASE WHEN m.grants IS NOT NULL THEN {elements} END"
    conn.execute(
        text(
            "INSERT INTO agentrag.documents (id, collection_id, source, original_filename, sha256,"
            " text, metadata, classification, doc_date, tenant_id, workspace_id, chunk_count,"
            " source_grants, granted, revoked, private, language, chunk_size, chunk_overlap,"
            " chunker_version)"
            " SELECT m.new_id, d.collection_id, m.new, m.filename, d.sha256, d.text,"
            " CAST(m.meta AS jsonb), m.cls, CAST(m.day AS date), d.tenant_id, d.workspace_id,"
            f" d.chunk_count, {source}, d.granted, d.revoked,"
            " d.private, d.language,"
            " d.chunk_size, d.chunk_overlap, d.chunker_version"
            " FROM unnest(CAST(:old_ids AS text[]), CAST(:new_ids AS text[]),"
            " CAST(:news AS text[]), CAST(:filenames AS text[]), CAST(:metas AS text[]),"
            " CAST(:cls AS text[]), CAST(:days AS text[]), CAST(:grants AS text[]))"
            " AS m(old_id, new_id, new, filename, meta, cls, day, grants)"
            " JOIN agentrag.documents d ON d.id = m.old_id"
        ),
        {
            **ids,
            "news": news,
            "filenames": [read[new].original_filename for new in news],
            "metas": [json.dumps(read[new].metadata, default=json_default) for new in news],
            "cls": [cls for cls, _day in columns],
            "days": [day.isoformat() if day else None for _cls, day in columns],
            "grants": [None if g is None else json.dumps(g) for g in grants],
        },
    )
    conn.execute(  # the enforced grants of the new rows (agentrag.store.acl.enforced_sql)
        text(
            "UPDATE agentrag.documents SET"
            f" grants = {enforced_sql('source_grants', 'granted', 'revoked')} WHERE id = ANY(:new_ids)"
        ),
        {"new_ids": new_ids},
    )
    conn.execute(
        text(
            "INSERT INTO agentrag.chunks (id, document_id, collection_id, chunk_index, text,"
            " start_char, end_char, page, section, sha256, embedding, embedding_half, locator, tenant_id,"
            " cluster)"
            " SELECT 'chk_' || left(encode(sha256(convert_to(m.new_id || chr(31) || c.chunk_index::text,"
            " 'UTF8')), 'hex'), 16), m.new_id, c.collection_id, c.chunk_index, c.text, c.start_char,"
            " c.end_char, c.page, c.section, c.sha256, c.embedding, c.embedding_half, c.locator,"
            " nd.tenant_id, c.cluster"
            f" FROM {pairs} JOIN agentrag.chunks c ON c.document_id = m.old_id"
            " JOIN agentrag.documents nd ON nd.id = m.new_id"
        ),
        ids,
    )
    conn.execute(
        text(
            "INSERT INTO agentrag.document_sessions (session_id, document_id)"
            f" SELECT s.session_id, m.new_id FROM {pairs}"
            " JOIN agentrag.document_sessions s ON s.document_id = m.old_id"
        ),
        ids,
    )
    conn.execute(
        text(
            "UPDATE agentrag.relations SET source = m.new"
            " FROM unnest(CAST(:olds AS text[]), CAST(:news AS text[])) AS m(old, new)"
            f" WHERE collection_id = :cid AND {SCOPE_SQL} AND session_id IS NULL AND source = m.old"
        ),
        {**params, "olds": olds, "news": news},
    )
    conn.execute(text("DELETE FROM agentrag.documents WHERE id = ANY(:ids)"), {"ids": old_ids})
    continue_lineages(conn, old_ids, new_ids)
    conn.execute(text("UPDATE agentrag.collections SET version = version + 1 WHERE id = :cid"), params)
