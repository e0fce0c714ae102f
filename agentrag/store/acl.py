"""Document permissions on the write side: grants at ingest, ``grant`` / ``revoke`` / ``grants``,
and ``share`` (a private session upload promoted to its tenant's shared documents).

The read side (who sees what) is one predicate, :mod:`agentrag.retrieval.predicate`. A grant is
written as ``user:<name>``, ``group:<name>`` or ``everyone`` and stored as a token (``u:``,
``g:``, ``*``) in ``documents.grants`` (migration 0030); changing grants is one UPDATE of the
document row in one transaction: nothing is re-embedded, and the next query sees it.

Grants arrive at ingest from, in order: ``ingest(..., grants=[...])``, the document's metadata
``grants`` key (front matter ``grants: user:alice, group:hr``, a sync source's metadata, or a
sidecar file ``<file>.grants`` with one grant per line, read with the file). On a collection
without ``acl=True`` a document carrying grants fails (its grants would protect nothing).

Those are the *source's* grants (``documents.source_grants``). :func:`grant` and :func:`revoke`
are kept apart from them (``granted``, ``revoked``; migration 0055), so a later change of the
source's grants (a sidecar edited, a file modified or renamed, a re-ingest) leaves them; the
enforced ``grants`` column is (source + granted) - revoked (:func:`enforced`, :func:`enforced_sql`,
set by every writer). A revoke by hand
holds until the same grant is given by hand again.

Who may administer a document (grant, revoke, share, list its grants) is decided in the SQL that
reads and locks its row (:func:`_administered`): the application itself (no principal) and an
admin principal, everything in their tenant scope; any other principal, only its own private
upload, in its session (docs/how-to/permissions-admin.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.errors import (
    DocumentNotFoundError,
    IngestError,
    InvalidInputError,
    PermissionDeniedError,
    ScopeError,
)
from agentrag.retrieval.dberrors import guarded

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from agentrag.scope import Scope
    from agentrag.store.collections import Collection
    from agentrag.store.store import Store

__all__ = [
    "GRANTS_KEY",
    "SIDECAR_SUFFIX",
    "GrantDetails",
    "bump_acl_version",
    "check_owner",
    "document_grants",
    "enforced",
    "enforced_sql",
    "grant",
    "grant_details",
    "grant_tokens",
    "grants",
    "owner",
    "parse_sidecar",
    "read_sidecar",
    "regrant",
    "reset_grants",
    "revoke",
    "share",
    "with_grants",
]

GRANTS_KEY = "grants"  # the metadata key (front matter, sync metadata, sidecar) holding grants
SIDECAR_SUFFIX = ".grants"  # report.md.grants: one grant per line, '#' comments


def owner(tenant: str | None) -> str | None:
    """``create_collection(tenant=...)``: the owning tenant, checked (InvalidInputError)."""
    if tenant is not None and (not isinstance(tenant, str) or not tenant.strip() or "\x00" in tenant):
        raise InvalidInputError(f"tenant must be a non-empty string without NUL bytes, got {tenant!r}")
    return tenant


def check_owner(coll: Collection, tenant: str | None) -> None:
    """Ingest: a tenant's collection holds only that tenant's documents (InvalidInputError)."""
    if coll.tenant is not None and tenant != coll.tenant:
        raise InvalidInputError(
            f"collection {coll.name!r} belongs to another tenant: ingest into it with tenant={coll.tenant!r}"
            if tenant is None
            else f"no collection named {coll.name!r} for tenant {tenant!r}"
        )


def grant_tokens(values: Iterable[str] | str) -> list[str]:
    """``["user:alice", "group:hr"]`` (or ``"user:alice, group:hr"``) -> sorted stored tokens.

    InvalidInputError naming the accepted forms for anything else."""
    from agentrag.scope import grant_token

    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    try:
        return sorted({grant_token(v.strip() if isinstance(v, str) else v) for v in values})
    except ScopeError as exc:
        raise InvalidInputError(str(exc)) from None


def with_grants(metadata: dict[str, Any] | None, values: Iterable[str] | None) -> dict[str, Any]:
    """``ingest(metadata=..., grants=...)``: the metadata, its ``grants`` key set (checked now)."""
    from agentrag.scope import grant_text

    if values is None:
        return dict(metadata or {})
    return {**(metadata or {}), GRANTS_KEY: [grant_text(t) for t in grant_tokens(values)]}


def document_grants(coll: Collection, metadata: dict[str, Any], source: str) -> list[str] | None:
    """The ``grants`` column of a document written into ``coll`` (None outside ``acl=True``)."""
    raw = metadata.get(GRANTS_KEY)
    if not coll.acl:
        if raw is not None:
            raise IngestError(
                f"{source}: carries grants but collection {coll.name!r} does not enforce them:"
                " create it with acl=True (agentrag collections create NAME --acl)",
                source=source,
            )
        return None
    if raw is None:
        return []  # deny by default: an admin principal only, until granted
    if not isinstance(raw, str | list | tuple):
        raise IngestError(f"{source}: metadata 'grants' must be a list of grants", source=source)
    try:
        return grant_tokens(raw)
    except InvalidInputError as exc:
        raise IngestError(f"{source}: {exc}", source=source) from None


def enforced(source: list[str] | None, granted: Iterable[str], revoked: Iterable[str]) -> list[str] | None:
    """A document's enforced grant tokens: (the source's + granted by hand) - revoked by hand, sorted
    as :func:`enforced_sql` sorts them; None when ``source`` is (a collection without acl)."""
    if source is None:
        return None
    return sorted((set(source) | set(granted)) - set(revoked))


def enforced_sql(source: str, granted: str, revoked: str) -> str:
    """:func:`enforced` in SQL over three ``text[]`` expressions (every writer of ``documents.grants``
    derives it so: migration 0055; a trigger would not run on a distributed table under Citus)."""
    return (
        f"CASE WHEN {source} IS NULL THEN NULL ELSE ARRAY(SELECT t FROM unnest({source} || {granted}) t"
        f' WHERE t <> ALL({revoked}) GROUP BY t ORDER BY t COLLATE "C") END'
    )


def read_sidecar(path: Path) -> list[str] | None:
    """The grants of ``<path>.grants`` when that file exists (one per line, ``#`` comments)."""
    sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
    if not sidecar.is_file():
        return None
    return parse_sidecar(sidecar.read_text(encoding="utf-8"))


def parse_sidecar(text: str) -> list[str]:
    """A sidecar's grants: its lines, stripped, without blank lines and ``#`` comments."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def bump_acl_version(conn: Connection, collection_id: int) -> None:
    """Record in the caller's transaction that who may see the collection's documents changed
    without a write of its documents (``collections.acl_version``, migration 0057): the scope
    planner's cached counts of the state before are not read again
    (:mod:`agentrag.retrieval.scope_cache`). Every writer of ``grants``, ``private``, the metadata
    or the session links that does not bump ``collections.version`` calls it."""
    from sqlalchemy import text

    conn.execute(
        text("UPDATE agentrag.collections SET acl_version = acl_version + 1 WHERE id = :id"),
        {"id": int(collection_id)},
    )


def regrant(conn: Connection, coll: Collection, changes: list[tuple[str, dict[str, Any], str]]) -> list[str]:
    """``store.sync``: documents whose file changed its grants only (a sidecar, the front matter's
    ``grants``), as ``(document id, the file's metadata, key)``: each row's metadata and grants set
    in place in the caller's transaction (the keys locked) -- no new revision, nothing re-embedded,
    as ``grant`` does; the current revision's metadata follows. Returns the ids updated (a
    document replaced or deleted meanwhile is not)."""
    import json

    from sqlalchemy import text

    from agentrag.store.prepare import json_default

    if not changes:
        return []
    params = {
        "cid": coll.id,
        "ids": [doc_id for doc_id, _meta, _key in changes],
        "metas": [json.dumps(meta, default=json_default) for _id, meta, _key in changes],
        "grants": [json.dumps(document_grants(coll, meta, key)) for _id, meta, key in changes],
    }
    source = (
        "(CASE WHEN CAST(m.grants AS jsonb) = 'null' THEN NULL"
        " ELSE ARRAY(SELECT jsonb_array_elements_text(CAST(m.grants AS jsonb))) END)"
    )
    updated = list(
        conn.execute(
            text(
                f"UPDATE agentrag.documents d SET metadata = CAST(m.meta AS jsonb), source_grants = {source}"
                " FROM unnest(CAST(:ids AS text[]), CAST(:metas AS text[]), CAST(:grants AS text[]))"
                " AS m(id, meta, grants) WHERE d.id = m.id AND d.collection_id = :cid RETURNING d.id"
            ),
            params,
        ).scalars()
    )
    conn.execute(  # the enforced grants: the new source's with what was set by hand (migration 0055)
        text(
            f"UPDATE agentrag.documents SET grants = {enforced_sql('source_grants', 'granted', 'revoked')}"
            " WHERE id = ANY(:ids)"
        ),
        {"ids": updated},
    )
    conn.execute(
        text(
            "UPDATE agentrag.document_revisions r SET metadata = d.metadata FROM agentrag.documents d"
            " WHERE d.id = ANY(:ids) AND r.document_id = d.id AND r.valid_to IS NULL"
        ),
        {"ids": updated},
    )
    if updated:
        bump_acl_version(conn, coll.id)
    return updated


def _administered(conn: Connection, document_id: str, scope: Scope | None) -> Any:
    """The document's collection row, its document row locked, when ``scope`` administers it
    (docs/how-to/permissions-admin.md), decided in the statement that reads and locks the row:
    DocumentNotFoundError when the scope may not read it (outside its tenant, a private upload of
    another session, no grant), PermissionDeniedError when it may read it but not administer it."""
    from sqlalchemy import text

    from agentrag.retrieval.scope_sql import check_scope, compile_scope

    scope_sql, params = compile_scope(None if scope is None else _tenant_only(scope))
    visible, administers, rights = _rights(scope)
    row = conn.execute(
        text(
            f"SELECT c.id AS cid, c.name, c.scoped, c.acl, ({visible}) AS visible,"
            f" ({administers}) AS administers FROM agentrag.documents d"
            " JOIN agentrag.collections c ON c.id = d.collection_id"
            f" WHERE d.id = :id AND ({scope_sql}) FOR UPDATE OF d"
        ),
        {"id": document_id, **params, **rights},
    ).first()
    if row is None or not row.visible:
        raise DocumentNotFoundError(f"no document with id {document_id!r}")
    check_scope(scope, [row.name] if row.scoped else [])
    if not row.administers:
        raise PermissionDeniedError(
            f"{scope.principal!r} may read document {document_id!r} but not administer it: its grants"  # type: ignore[union-attr]
            " and sharing are changed by an admin principal (or, while it is a private upload, in its"
            " own session)"
        )
    return row


def _rights(scope: Scope | None) -> tuple[str, str, dict[str, Any]]:
    """``(visible, administers, params)``: SQL over ``d`` / ``c``. Without a principal the caller is
    the application itself (trusted code, as the CLI): everything its tenant scope reaches. An
    admin principal: the same. A scope naming a session (with either) never reaches another
    session's private upload. Any other principal administers only what it may read and that is
    a private upload of its scope's session; it reads as a search would (the predicate)."""
    from agentrag.retrieval.predicate import compile_predicate

    principal = scope.principal if scope is not None else None
    session = scope.session if scope is not None and not scope.all_scopes else None
    linked = (
        "EXISTS (SELECT 1 FROM agentrag.document_sessions s"
        " WHERE s.document_id = d.id AND s.session_id = :s_session)"
    )
    if principal is None or principal.admin:
        if session is None:
            return "TRUE", "TRUE", {}
        # a session's scope never reaches another session's private upload
        return f"NOT d.private OR {linked}", "TRUE", {"s_session": session}
    predicate = compile_predicate(scope)
    own_upload = f"d.private AND {linked}" if session is not None else "FALSE"
    return predicate.any_collection(), own_upload, predicate.params


def _tenant_only(scope: Scope) -> Scope:
    from agentrag.scope import Scope

    return scope if scope.all_scopes else Scope(tenant=scope.tenant, workspace=scope.workspace)


def _change(
    store: Store, document_id: str, values: Iterable[str] | str, scope: Scope | None, add: bool
) -> list[str]:
    from sqlalchemy import text

    from agentrag.scope import grant_text

    tokens = grant_tokens(values)
    if not tokens:
        raise InvalidInputError("name at least one grant: 'user:<name>', 'group:<name>' or 'everyone'")
    # by hand: kept apart from the source's grants, which a sync or ingest may replace; the
    # enforced grants are (source + granted) - revoked (migration 0055)
    order = 'ORDER BY t COLLATE "C"'
    plus = f"ARRAY(SELECT t FROM unnest({{}} || CAST(:tokens AS text[])) t GROUP BY t {order})"
    minus = f"ARRAY(SELECT t FROM unnest({{}}) t WHERE t <> ALL(CAST(:tokens AS text[])) {order})"
    if add:
        granted, revoked = plus.format("granted"), minus.format("revoked")
    else:
        granted, revoked = minus.format("granted"), plus.format("revoked")
    grants = enforced_sql("source_grants", granted, revoked)  # SET reads the old values: the new ones here
    merged = f"granted = {granted}, revoked = {revoked}, grants = {grants}"
    with store.engine.begin() as conn:
        row = _administered(conn, document_id, scope)
        _acl_only(row)
        stored = conn.execute(
            text(f"UPDATE agentrag.documents SET {merged} WHERE id = :id RETURNING grants"),
            {"id": document_id, "tokens": tokens},
        ).scalar_one()
        bump_acl_version(conn, row.cid)
    return [grant_text(t) for t in stored]


@guarded("granting", retry=False)
def grant(
    store: Store, document_id: str, values: Iterable[str] | str, *, scope: Scope | None = None
) -> list[str]:
    """Add grants to a document of an ``acl=True`` collection; returns all its grants.

    ``scope`` is the tenant-rooted scope the document lives in (required on ``scoped=True``
    collections, as for ``delete_document``); a document outside it is "not found"."""
    return _change(store, document_id, values, scope, add=True)


@guarded("revoking", retry=False)
def revoke(
    store: Store, document_id: str, values: Iterable[str] | str, *, scope: Scope | None = None
) -> list[str]:
    """Remove grants from a document; returns the grants left (the next query obeys them)."""
    return _change(store, document_id, values, scope, add=False)


@guarded("reading grants")
def grants(store: Store, document_id: str, *, scope: Scope | None = None) -> list[str] | None:
    """A document's grants (``["group:hr", "user:alice"]``); None on a collection without grants."""
    from sqlalchemy import text

    from agentrag.scope import grant_text

    with store.engine.begin() as conn:
        _administered(conn, document_id, scope)
        stored = conn.execute(
            text("SELECT grants FROM agentrag.documents WHERE id = :id"), {"id": document_id}
        ).scalar_one()
    return None if stored is None else [grant_text(t) for t in stored]


@dataclass(frozen=True, slots=True)
class GrantDetails:
    """Where a document's grants come from: ``grants`` = (``source`` + ``granted``) - ``revoked``.

    ``source``: what its source says (sidecar, front matter, ``ingest(grants=...)``, sync metadata);
    ``granted`` / ``revoked``: what :func:`grant` / :func:`revoke` changed by hand, which outlives
    any change of the source's. Grants read as users write them (``group:hr``)."""

    document_id: str
    grants: list[str]
    source: list[str]
    granted: list[str]
    revoked: list[str]

    @property
    def by_hand(self) -> bool:
        """Whether anything was granted or revoked by hand (:func:`reset_grants` undoes it)."""
        return bool(self.granted or self.revoked)

    def __repr__(self) -> str:
        hand = f", granted={self.granted}, revoked={self.revoked}" if self.by_hand else ""
        return f"GrantDetails({self.document_id!r}, grants={self.grants}, source={self.source}{hand})"


def _details(document_id: str, row: Any) -> GrantDetails:
    from agentrag.scope import grant_text

    def words(tokens: Iterable[str] | None) -> list[str]:
        return [grant_text(t) for t in tokens or ()]

    return GrantDetails(
        document_id, words(row.grants), words(row.source_grants), words(row.granted), words(row.revoked)
    )


_DETAIL_COLUMNS = "grants, source_grants, granted, revoked"


def _acl_only(row: Any) -> None:
    if not row.acl:
        raise InvalidInputError(
            f"collection {row.name!r} does not enforce grants: create it with acl=True to use them"
        )


@guarded("reading grants")
def grant_details(store: Store, document_id: str, *, scope: Scope | None = None) -> GrantDetails:
    """A document's grants and where they come from (:class:`GrantDetails`): the source's, and what
    was granted or revoked by hand. InvalidInputError on a collection without grants."""
    from sqlalchemy import text

    with store.engine.begin() as conn:
        _acl_only(_administered(conn, document_id, scope))
        row = conn.execute(
            text(f"SELECT {_DETAIL_COLUMNS} FROM agentrag.documents WHERE id = :id"), {"id": document_id}
        ).one()
    return _details(document_id, row)


@guarded("resetting grants", retry=False)
def reset_grants(store: Store, document_id: str, *, scope: Scope | None = None) -> GrantDetails:
    """Undo every grant and revoke made by hand: the document's grants become its source's again
    (the next query obeys). Returns the details after the reset."""
    from sqlalchemy import text

    none = "CAST('{}' AS text[])"
    with store.engine.begin() as conn:
        owner = _administered(conn, document_id, scope)
        _acl_only(owner)
        row = conn.execute(
            text(
                f"UPDATE agentrag.documents SET granted = {none}, revoked = {none},"
                f" grants = {enforced_sql('source_grants', none, none)}"
                f" WHERE id = :id RETURNING {_DETAIL_COLUMNS}"
            ),
            {"id": document_id},
        ).one()
        bump_acl_version(conn, owner.cid)
    return _details(document_id, row)


@guarded("sharing a document", retry=False)
def share(
    store: Store, document_id: str, *, workspace: str | None = None, scope: Scope | None = None
) -> None:
    """Promote a private session upload to the shared documents of its tenant (and ``workspace``,
    when given); its session links stay. InvalidInputError when that workspace already holds a
    document under the same source."""
    from sqlalchemy import text
    from sqlalchemy.exc import IntegrityError

    from agentrag.retrieval.scope_sql import compile_scope
    from agentrag.scope import Scope

    if workspace is not None:
        compile_scope(Scope(workspace=workspace))  # the value's checks
    try:
        with store.engine.begin() as conn:
            owner = _administered(conn, document_id, scope)
            conn.execute(
                text(
                    "UPDATE agentrag.documents SET private = false, updated_at = now(),"
                    " workspace_id = coalesce(CAST(:w AS text), workspace_id) WHERE id = :id"
                ),
                {"id": document_id, "w": workspace},
            )
            bump_acl_version(conn, owner.cid)
    except IntegrityError as exc:
        raise InvalidInputError(
            f"workspace {workspace!r} already holds a document with the same source: delete or rename one"
        ) from exc
