"""Documents: the :class:`Document` record, listing and reading them, deleting one, linking one to
a session (the bodies of ``Store.documents``, ``document``, ``delete_document``, ``link_session``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from agentrag.errors import DocumentNotFoundError, InvalidInputError
from agentrag.store.collections import WRITE_LOCK_SQL, write_lock_params

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from agentrag.scope import Scope
    from agentrag.store.store import Store

__all__ = ["DOCUMENT_SQL", "Document", "delete_document", "link_session", "list_documents", "read_document"]


@dataclass(frozen=True, slots=True)
class Document:
    """A stored document. ``text`` is loaded by :meth:`Store.document` (None in listings)."""

    id: str
    collection: str
    source: str
    original_filename: str | None
    sha256: str
    metadata: dict[str, Any]
    classification: str | None
    date: date | None
    tenant: str | None
    workspace: str | None
    chunk_count: int
    created_at: datetime
    updated_at: datetime
    sessions: list[str] = field(default_factory=list)
    text: str | None = field(default=None, repr=False)
    revision: int | None = None  # its number among the document's revisions (agentrag.store.revisions)
    language: str | None = None  # declared by its collection or detected at ingest (agentrag.languages)

    def __repr__(self) -> str:
        scope = "".join(f" {k}={getattr(self, k)!r}" for k in ("tenant", "workspace") if getattr(self, k))
        return f"Document({self.id} {self.collection}:{self.source!r} {self.chunk_count} chunks{scope})"

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "text"}
        for key in ("created_at", "updated_at", "date"):
            if out[key] is not None:
                out[key] = out[key].isoformat()
        return out


DOCUMENT_SQL = """
SELECT d.id, c.name AS collection, d.source, d.original_filename, d.sha256, d.metadata, d.classification,
       d.doc_date AS date, d.tenant_id AS tenant, d.workspace_id AS workspace, d.chunk_count,
       d.created_at, d.updated_at, {text} AS text, d.language,
       (SELECT r.revision FROM agentrag.document_revisions r
        WHERE r.document_id = d.id AND r.valid_to IS NULL) AS revision,
       coalesce((SELECT array_agg(s.session_id ORDER BY s.session_id) FROM agentrag.document_sessions s
                 WHERE s.document_id = d.id), '{{}}') AS sessions
FROM agentrag.documents d JOIN agentrag.collections c ON c.id = d.collection_id
{where}
ORDER BY c.name, d.source
"""


def document_from_row(row: Any) -> Document:
    values = dict(row)
    values["sessions"] = list(values["sessions"] or [])
    return Document(**values)


def list_documents(
    store: Store,
    collection: str | None,
    *,
    tenant: str | None,
    workspace: str | None,
    scope: Scope | None,
    limit: int,
) -> list[Document]:
    """``Store.documents``: the listing, narrowed in SQL by the scope (see its docstring)."""
    from sqlalchemy import text

    from agentrag.retrieval.predicate import check_principal, compile_predicate
    from agentrag.retrieval.scope_sql import check_scope
    from agentrag.scope import Scope

    if scope is not None and (tenant is not None or workspace is not None):
        raise InvalidInputError("pass either scope= or tenant= / workspace=, not both")
    if scope is None and (tenant is not None or workspace is not None):
        scope = Scope(tenant=tenant, workspace=workspace)
    clauses: list[str] = []
    params: dict[str, Any] = {"limit": int(limit)}
    if collection is not None:
        found = store.collection(collection)
        check_scope(scope, [found.name] if found.scoped else [])
        check_principal(scope, [found.name] if found.acl else [])
        params["cid"] = found.id
        clauses.append("d.collection_id = :cid")
    else:
        with store.engine.connect() as conn:
            scoped = conn.execute(text("SELECT name FROM agentrag.collections WHERE scoped")).scalars().all()
        check_scope(scope, scoped)
    predicate = compile_predicate(scope)  # what a search in this scope may read, nothing more
    visible = predicate.any_collection()
    if visible != "TRUE":
        clauses.append(f"({visible})")
        params.update(predicate.params)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    with store.engine.connect() as conn:
        rows = conn.execute(text(DOCUMENT_SQL.format(text="NULL", where=where) + " LIMIT :limit"), params)
        return [document_from_row(row) for row in rows.mappings()]


def read_document(
    engine: Engine, document_id: str, scope: Scope | None = None, revision: int | None = None
) -> Document:
    """``Store.document``: one document with its text, when ``scope`` may read it as a search
    would (scoped collections need a tenant, ``acl=True`` ones a principal with a grant, a private
    upload its session); DocumentNotFoundError otherwise, whether or not it exists. With
    ``revision``, that revision of the document (:func:`agentrag.store.revisions.read_revision`)."""
    from sqlalchemy import text

    from agentrag.retrieval.predicate import compile_predicate

    if revision is not None:  # revisions of acl=True collections: admins only (read_revision)
        from agentrag.store.revisions import read_revision

        return read_revision(engine, document_id, revision, scope)
    predicate = compile_predicate(scope)
    visible = f"(NOT c.scoped OR {_scoped_ok(scope)}) AND ({predicate.any_collection()})"
    sql = DOCUMENT_SQL.format(text="d.text", where=f"WHERE d.id = :id AND {visible}")
    with engine.connect() as conn:
        row = conn.execute(text(sql), {**predicate.params, "id": document_id}).mappings().first()
    if row is None:
        raise DocumentNotFoundError(
            f"no document with id {document_id!r} in {scope!r}"
            if scope
            else f"no document with id {document_id!r} (a scoped, acl or private one needs its scope=)"
        )
    return document_from_row(row)


def _scoped_ok(scope: Scope | None) -> str:
    """Whether ``scope`` may read a ``scoped=True`` collection at all (a tenant, or every())."""
    return "TRUE" if scope is not None and (scope.all_scopes or scope.tenant is not None) else "FALSE"


def delete_document(engine: Engine, document_id: str, scope: Scope | None) -> None:
    """``Store.delete_document``: the document and its chunks, inside ``scope``, in one transaction."""
    from sqlalchemy import text

    from agentrag.retrieval.scope_sql import check_scope, compile_scope

    scope_sql, scope_params = compile_scope(scope)
    with engine.begin() as conn:
        row = conn.execute(
            text(
                "SELECT c.id AS cid, c.name, c.scoped FROM agentrag.documents d"
                " JOIN agentrag.collections c ON c.id = d.collection_id WHERE d.id = :id"
                f" AND ({scope_sql}) FOR UPDATE OF d"
            ),
            {"id": document_id, **scope_params},
        ).first()
        if row is None:
            raise DocumentNotFoundError(f"no document with id {document_id!r}")
        check_scope(scope, [row.name] if row.scoped else [])
        conn.execute(text(WRITE_LOCK_SQL), write_lock_params(row.cid))  # see Store.reembed
        conn.execute(text("DELETE FROM agentrag.documents WHERE id = :id"), {"id": document_id})
        conn.execute(
            text("UPDATE agentrag.collections SET version = version + 1 WHERE id = :id"), {"id": row.cid}
        )


def link_session(engine: Engine, document_id: str, session: str) -> None:
    """``Store.link_session``: make a document visible to a session scope."""
    from sqlalchemy import text
    from sqlalchemy.exc import IntegrityError

    from agentrag.store.acl import bump_acl_version

    try:
        with engine.begin() as conn:
            linked = conn.execute(
                text(
                    "INSERT INTO agentrag.document_sessions (session_id, document_id) VALUES (:s, :d)"
                    " ON CONFLICT DO NOTHING RETURNING (SELECT collection_id FROM agentrag.documents"
                    " WHERE id = :d)"
                ),
                {"s": session, "d": document_id},
            ).scalar()
            if linked is not None:  # the session's scope now reads it (migration 0057)
                bump_acl_version(conn, linked)
    except IntegrityError as exc:
        raise DocumentNotFoundError(f"no document with id {document_id!r}") from exc
