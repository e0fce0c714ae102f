"""Document revisions (migration 0020): every documents row is one revision of a document.

``agentrag.document_revisions`` holds one row per revision: its document id (content-addressed,
so a citation's ``doc_id`` names the exact text it quoted), sha256, source key, metadata and
validity interval ``[valid_from, valid_to)``; a closed revision keeps the text it had. Triggers
on ``agentrag.documents`` write them, so ingest, sync and deletions all record revisions; a
document keeps its *lineage* (the id of its first revision) across replacements under its key
and across renames by ``store.sync``. Searches read ``agentrag.chunks``, which hold the current
revisions' chunks only: an old revision keeps its text, not its chunks or vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentrag.errors import DocumentNotFoundError, InvalidInputError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from agentrag.scope import Scope
    from agentrag.store.documents import Document

__all__ = ["Revision", "continue_lineages", "prune_revisions", "read_revision", "revisions"]


@dataclass(frozen=True, slots=True)
class Revision:
    """One revision of a document (``text`` only from :func:`read_revision`)."""

    lineage: str
    revision: int
    document_id: str
    source: str
    sha256: str
    chunk_count: int
    valid_from: datetime
    valid_to: datetime | None  # None: the current revision

    @property
    def current(self) -> bool:
        return self.valid_to is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "lineage": self.lineage,
            "revision": self.revision,
            "document_id": self.document_id,
            "source": self.source,
            "sha256": self.sha256,
            "chunk_count": self.chunk_count,
            "valid_from": self.valid_from.isoformat(),
            "valid_to": self.valid_to.isoformat() if self.valid_to else None,
            "current": self.current,
        }


# A document id can name revisions of two lineages (a.md renamed to b.md, then a new a.md): the
# current revision's lineage first, then the one it left last.
_LINEAGE_SQL = (
    "SELECT lineage FROM agentrag.document_revisions WHERE document_id = :id"
    " ORDER BY valid_to DESC NULLS FIRST, revision DESC LIMIT 1"
)


def _visible(scope: Scope | None, join: str = "") -> tuple[str, dict[str, Any]]:
    """``(sql, params)``: the revisions of the lineage ``:id`` names that ``scope`` may read, as
    ``FROM ... rv JOIN collections c WHERE ...`` (``rv``: the revision rows, ``current_id``: the
    lineage's current document). A revision is read as its document is read now (issue #37, F-5):
    its tenant / workspace inside the scope, a scoped collection only with a tenant or every(),
    and the lineage's current document visible under the search predicate (grants, a private
    upload only in its session). A lineage with no current document (deleted) has no grants or
    privacy left to check: on an ``acl=True`` collection only an admin principal reads it, on a
    collection that ever held private uploads only ``Scope.every()``. ``join``: the caller's own
    further joins (its text, never input)."""
    from agentrag.retrieval.predicate import compile_predicate
    from agentrag.retrieval.scope_sql import compile_scope
    from agentrag.scope import Scope

    tenant_sql, params = compile_scope(
        None if scope is None or scope.all_scopes else Scope(tenant=scope.tenant, workspace=scope.workspace)
    )
    predicate = compile_predicate(scope)
    scoped_ok = scope is not None and (scope.all_scopes or scope.tenant is not None)
    principal = scope.principal if scope is not None else None
    sql = (
        " FROM (SELECT d.*, (SELECT cur.document_id FROM agentrag.document_revisions cur"
        " WHERE cur.lineage = d.lineage AND cur.valid_to IS NULL) AS current_id"
        f" FROM agentrag.document_revisions d WHERE d.lineage = ({_LINEAGE_SQL}) AND ({tenant_sql})) rv"
        f" JOIN agentrag.collections c ON c.id = rv.collection_id{join}"
        " WHERE (NOT c.scoped OR :r_scoped_ok) AND CASE WHEN rv.current_id IS NULL"
        " THEN (NOT c.acl OR :r_admin) AND (NOT c.private_documents OR :r_every)"
        " ELSE EXISTS (SELECT 1 FROM agentrag.documents d JOIN agentrag.collections c"
        f" ON c.id = d.collection_id WHERE d.id = rv.current_id AND ({predicate.any_collection()})) END"
    )
    return sql, {
        **params,
        **predicate.params,
        "r_scoped_ok": scoped_ok,
        "r_admin": principal is not None and principal.admin,
        "r_every": scope is not None and scope.all_scopes,
    }


def revisions(engine: Engine, document_id: str, scope: Scope | None = None) -> list[Revision]:
    """Every revision of the document ``document_id`` is a revision of (any of them), oldest
    first, that ``scope`` may read as it reads the document now (checked in SQL, :func:`_visible`)."""
    from sqlalchemy import text

    visible, params = _visible(scope)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT rv.lineage, rv.revision, rv.document_id, rv.source, rv.sha256, rv.chunk_count,"
                f" rv.valid_from, rv.valid_to{visible} ORDER BY rv.revision"
            ),
            {"id": document_id, **params},
        ).all()
    if not rows:
        raise DocumentNotFoundError(f"no document with id {document_id!r} (nor a revision of one)")
    return [Revision(*row) for row in rows]


def read_revision(engine: Engine, document_id: str, revision: int, scope: Scope | None = None) -> Document:
    """Revision ``revision`` of the document ``document_id`` is a revision of, with the text it had.

    ``document_id`` may name any revision (an old answer's citation names the one it quoted);
    the result's ``id`` is the revision's own document id and ``text`` its text, so the old
    citation's offsets and ``source_sha256`` verify against it. Only when ``scope`` may read it
    as it reads the document now (:func:`_visible`)."""
    from sqlalchemy import text

    from agentrag.store.documents import Document
    from agentrag.store.prepare import document_columns

    if type(revision) is not int or revision < 1:
        raise InvalidInputError(f"revision must be an integer >= 1, got {revision!r}")
    visible, params = _visible(scope, _CURRENT)
    with engine.connect() as conn:
        row = (
            conn.execute(
                text(
                    "SELECT rv.document_id AS id, c.name AS collection, rv.source, rv.original_filename,"
                    " rv.sha256, rv.metadata, rv.tenant_id AS tenant, rv.workspace_id AS workspace,"
                    " rv.chunk_count, rv.valid_from, rv.valid_to, rv.revision,"
                    " coalesce(rv.text, cur.text) AS text,"
                    " cur.created_at, cur.updated_at, cur.classification, cur.doc_date"
                    f"{visible}"
                    " AND rv.revision = :rev"
                ),
                {"id": document_id, "rev": revision, **params},
            )
            .mappings()
            .first()
        )
    if row is None:
        raise DocumentNotFoundError(
            f"document {document_id!r} has no revision {revision} (`agentrag documents revisions"
            f" {document_id}` lists them; old revisions may have been pruned by keep_revisions)"
        )
    metadata = dict(row["metadata"] or {})
    current = row["valid_to"] is None
    classification, doc_date = (
        (row["classification"], row["doc_date"]) if current else document_columns(metadata, row["source"])
    )
    return Document(
        id=row["id"],
        collection=row["collection"],
        source=row["source"],
        original_filename=row["original_filename"],
        sha256=row["sha256"],
        metadata=metadata,
        classification=classification,
        date=doc_date,
        tenant=row["tenant"],
        workspace=row["workspace"],
        chunk_count=row["chunk_count"],
        created_at=row["created_at"] or row["valid_from"],
        updated_at=row["updated_at"] or row["valid_to"] or row["valid_from"],
        text=row["text"],
        revision=row["revision"],
    )


# read_revision's join: the current revision's document row (its text and dates)
_CURRENT = " LEFT JOIN agentrag.documents cur ON cur.id = rv.document_id AND rv.valid_to IS NULL"


def continue_lineages(conn: Connection, old_document_ids: list[str], new_document_ids: list[str]) -> None:
    """Inside renames' transaction, after the new rows were inserted and the old ones deleted: each
    new document's revision continues its old one's lineage (the next revision number). One
    statement for every pair (distinct old documents are of distinct lineages). An old document
    id that named two lineages (see ``_LINEAGE_SQL``) continues the one it just left."""
    from sqlalchemy import text

    conn.execute(
        text(
            "UPDATE agentrag.document_revisions r SET (lineage, revision) = ("
            " SELECT o.lineage, (SELECT max(x.revision) FROM agentrag.document_revisions x"
            "                     WHERE x.lineage = o.lineage) + 1"
            " FROM agentrag.document_revisions o WHERE o.document_id = m.old"
            " ORDER BY o.valid_to DESC NULLS FIRST, o.revision DESC LIMIT 1)"
            " FROM unnest(CAST(:olds AS text[]), CAST(:news AS text[])) AS m(old, new)"
            " WHERE r.document_id = m.new AND r.valid_to IS NULL"
        ),
        {"olds": old_document_ids, "news": new_document_ids},
    )


def prune_revisions(
    conn: Connection, collection_id: int, keep: int, tenant: str | None, workspace: str | None
) -> int:
    """Delete the ended revisions of a collection's documents in one scope beyond the newest
    ``keep`` of each document; returns how many went."""
    from sqlalchemy import text

    if type(keep) is not int or keep < 0:
        raise InvalidInputError(f"keep_revisions must be an integer >= 0 or None (keep all), got {keep!r}")
    result = conn.execute(
        text(
            "DELETE FROM agentrag.document_revisions r USING ("
            " SELECT lineage, revision, row_number() OVER (PARTITION BY lineage ORDER BY revision DESC) AS n"
            " FROM agentrag.document_revisions WHERE collection_id = :cid AND valid_to IS NOT NULL"
            " AND coalesce(tenant_id, '') = coalesce(:tenant, '')"
            " AND coalesce(workspace_id, '') = coalesce(:workspace, '')) old"
            " WHERE r.lineage = old.lineage AND r.revision = old.revision AND old.n > :keep"
        ),
        {"cid": collection_id, "keep": keep, "tenant": tenant, "workspace": workspace},
    )
    return int(result.rowcount or 0)
