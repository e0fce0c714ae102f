"""Helpers of the sync tests: folders of small documents and the store's rows compared chunk for chunk."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import text

OLD = 1_600_000_000_000_000_000  # an mtime well before any listing (the pre-check trusts it)


def write(folder: Path, key: str, body: str, *, old: bool = True) -> Path:
    path = folder / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    if old:  # an mtime far from the listing's: not "racy", so the pre-check may trust it
        stamp = OLD + hash(body) % 1_000_000 * 1000
        os.utime(path, ns=(stamp, stamp))
    return path


def rows(
    store: Any, collection: str, tenant: str | None = None, workspace: str | None = None
) -> dict[str, Any]:
    """Documents and chunks of a collection in one scope, keyed so two collections compare."""
    with store.engine.connect() as conn:
        cid = conn.execute(
            text("SELECT id FROM agentrag.collections WHERE name = :n"), {"n": collection}
        ).scalar()
        params = {"cid": cid, "t": tenant or "", "w": workspace or ""}
        scope = "coalesce(d.tenant_id, '') = :t AND coalesce(d.workspace_id, '') = :w"
        docs = conn.execute(
            text(
                "SELECT d.source, d.id, d.sha256, d.text, d.metadata, d.original_filename, d.chunk_count,"
                " d.chunk_size, d.chunk_overlap, d.chunker_version"
                f" FROM agentrag.documents d WHERE d.collection_id = :cid AND {scope} ORDER BY d.source"
            ),
            params,
        ).all()
        chunks = conn.execute(
            text(
                "SELECT d.source, c.id, c.chunk_index, c.text, c.start_char, c.end_char, c.sha256,"
                " c.embedding::text AS embedding, c.embedding_half::text AS half, c.locator::text AS locator"
                " FROM agentrag.chunks c JOIN agentrag.documents d"
                f" ON d.id = c.document_id WHERE c.collection_id = :cid AND {scope}"
                " ORDER BY d.source, c.chunk_index"
            ),
            params,
        ).all()
    return {"documents": [tuple(r) for r in docs], "chunks": [tuple(r) for r in chunks]}
