"""One predicate for scope, filters and grants: who may see which documents, as bound SQL.

Every place that reads chunks or documents for a caller (both search legs, the empty-result
counts, document listings and reads) asks this module for its WHERE fragment over the
documents alias ``d``; no other module composes visibility. A :class:`Predicate` is compiled
once per call (:func:`compile_predicate`) from a :class:`~agentrag.scope.Scope` and
:class:`~agentrag.retrieval.filters.Filters`; :meth:`Predicate.where` then gives the fragment
for one collection, since what applies depends on two of its flags:

* ``acl``: the collection enforces grants. A document is visible when its ``grants`` array
  holds one of the principal's tokens (``d.grants && :p_tokens``: the user ``u:<name>``, each
  group ``g:<name>``, and ``*`` for an ``everyone`` grant); an admin principal passes, no
  principal is refused before any SQL runs (:func:`check_principal`).
* ``private_documents``: the collection holds private session uploads. Outside a session scope
  they are hidden (``NOT d.private``); a session scope reads its own (linked) uploads; with
  ``include_shared`` it reads them *and* the shared documents the principal may read, in one
  ranking. ``Scope.every()`` reads everything the grants allow, private uploads included.

The parts combine with AND: tenant / workspace (:func:`~agentrag.retrieval.scope_sql.compile_scope`),
the visibility above, then the filters. Values are bound parameters (``:s_*``, ``:f_*``,
``:p_tokens``); the fragment holds only this module's (and those two modules') own text.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrag.errors import CollectionNotFoundError, ScopeError
from agentrag.retrieval.scope_sql import compile_scope
from agentrag.scope import EVERYONE_TOKEN, Principal, Scope, grant_text

if TYPE_CHECKING:
    from agentrag.retrieval.filters import Filters

__all__ = [
    "Predicate",
    "check_owners",
    "check_principal",
    "compile_predicate",
    "grant_of",
    "grants_by_index",
    "may_search",
    "relation_visibility",
]

_LINKED = (
    "EXISTS (SELECT 1 FROM agentrag.document_sessions s"
    " WHERE s.document_id = d.id AND s.session_id = :s_session)"
)
_GRANTED = "d.grants && CAST(:p_tokens AS text[])"
#: The same test with the tokens behind a one-row subquery (an InitPlan, evaluated once per statement):
#: see :func:`grants_by_index`.
_GRANTED_BY_INDEX = "d.grants && (SELECT CAST(:p_tokens AS text[]))"


def _and(parts: Iterable[str]) -> str:
    kept = [p for p in parts if p != "TRUE"]
    if "FALSE" in kept:
        return "FALSE"
    if not kept:
        return "TRUE"
    return kept[0] if len(kept) == 1 else " AND ".join(f"({p})" for p in kept)


@dataclass(frozen=True, slots=True)
class Predicate:
    """What a caller may see, compiled: :meth:`where` per collection, :attr:`params` bound once."""

    scope: Scope | None
    tenant_sql: str  # tenant / workspace only (the session part is visibility's)
    filter_sql: str
    params: dict[str, Any]

    @property
    def principal(self) -> Principal | None:
        return self.scope.principal if self.scope is not None else None

    @property
    def grants_apply(self) -> bool:
        """Whether an ``acl=True`` collection restricts this caller (not an admin)."""
        return self.principal is None or not self.principal.admin

    def visibility(self, *, acl: bool, private_documents: bool) -> str:
        """The session and grant part for one collection (TRUE when nothing restricts)."""
        granted = _GRANTED if acl and self.grants_apply else "TRUE"
        scope = self.scope
        if scope is not None and scope.all_scopes:
            return granted
        session = scope.session if scope is not None else None
        if session is None:
            return _and(["NOT d.private" if private_documents else "TRUE", granted])
        own = _and([_LINKED, "d.private"]) if private_documents else "FALSE"
        if not scope or not scope.include_shared:  # the session's own uploads, and what is linked to it
            return _LINKED if granted == "TRUE" else _and([_LINKED, f"d.private OR {granted}"])
        shared = _and(["NOT d.private" if private_documents else "TRUE", granted])
        if own == "FALSE":
            return shared
        return f"({own}) OR ({shared})" if shared != "FALSE" else own

    def where(self, *, acl: bool = False, private_documents: bool = False) -> str:
        """The whole fragment for one collection: tenant / workspace AND visibility AND filters."""
        return _and(
            [self.tenant_sql, self.visibility(acl=acl, private_documents=private_documents), self.filter_sql]
        )

    def visible_sql(self, acl: bool = False, private_documents: bool = False) -> str:
        """Scope and grants without the filters (what the empty-result counts call "in scope")."""
        return _and([self.tenant_sql, self.visibility(acl=acl, private_documents=private_documents)])

    def any_collection(self, collections_alias: str = "c") -> str:
        """The fragment for documents of any collection, its flags read from the collections
        alias ``c`` joined in the caller's SQL (document listings and reads)."""
        if collections_alias != "c":
            raise ValueError(f"unknown table alias {collections_alias!r}")
        with_acl = self.where(acl=True, private_documents=True)
        without = self.where(acl=False, private_documents=True)
        if with_acl == without:
            return with_acl
        return f"(c.acl AND ({with_acl})) OR (NOT c.acl AND ({without}))"

    @property
    def restricted(self) -> bool:
        """Whether a collection with neither flag is restricted at all (the legs' fast paths)."""
        return self.where() != "TRUE"


def _compiled_filters(filters: Filters | Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """No filters compile to TRUE without importing the filters model (pydantic: a CLI search's
    cold start pays it only with ``--filter``)."""
    if filters is None:
        return "TRUE", {}
    from agentrag.retrieval.filters import compile_filters

    return compile_filters(filters)


def compile_predicate(scope: Scope | None, filters: Filters | Mapping[str, Any] | None = None) -> Predicate:
    """Compile ``scope`` and ``filters`` (FilterError / ScopeError / TypeError before any SQL)."""
    filter_sql, filter_params = _compiled_filters(filters)
    scope_only = None
    if scope is not None:
        if not isinstance(scope, Scope):
            raise TypeError(f"scope must be an agentrag.Scope or None, got {type(scope).__name__}")
        scope_only = Scope(tenant=scope.tenant, workspace=scope.workspace)
    tenant_sql, scope_params = compile_scope(scope_only)
    params: dict[str, Any] = {**filter_params, **scope_params}
    if scope is not None and scope.session is not None:
        compile_scope(Scope(session=scope.session))  # the same checks on the value
        params["s_session"] = scope.session
    principal = scope.principal if scope is not None else None
    params["p_tokens"] = TextArray(principal.tokens() if principal is not None else ())
    return Predicate(scope=scope, tenant_sql=tenant_sql, filter_sql=filter_sql, params=params)


def grants_by_index(where: str) -> str:
    """``where`` with its grant test planned to read the documents' GIN index (``documents_grants``)
    whatever the principal's tokens: for a statement over ``documents`` alone (the scope planner's
    count, a scope's document ids), never for the legs' statements over chunks.

    With the tokens known when planning (a custom plan: every statement until PostgreSQL's plan cache
    switches a prepared one to its generic plan, on the connection's 11th run or so), the planner
    estimates the GIN scan per token (102 tokens: cost 899) but the overlap tested on each of the
    collection's rows as one operator (10,000 rows: cost 1,095), so it scans the collection's
    documents and tests each: 14-170 ms for a principal in 100 of 1,000 groups, against 1.3-15 ms
    for the GIN scan (benchmarks/RESULTS.md, "Permissions"). Behind a subquery the tokens are a
    value the planner cannot see, as in the generic plan: the overlap's selectivity is its default
    and the GIN scan is costed for an unknown array, so the index is read in every plan, for every
    principal, whatever the connection's history. The rows are the same (the same test, the same
    tokens, enforced in SQL)."""
    return where.replace(_GRANTED, _GRANTED_BY_INDEX)


def check_owners(scope: Scope | None, owners: Iterable[tuple[str, str | None]]) -> None:
    """Refuse collections that belong to another tenant than the scope's: "not found", exactly
    as a name that does not exist (CollectionNotFoundError), so a tenant learns no other tenant's
    collection names; without a tenant scope, ScopeError (``Scope.every()`` passes)."""
    if scope is not None and scope.all_scopes:
        return
    for name, owner in owners:
        if owner is None:
            continue
        if scope is None or scope.tenant is None:
            raise ScopeError(f"collection {name!r} belongs to a tenant: pass scope=Scope(tenant=...)")
        if scope.tenant != owner:
            raise CollectionNotFoundError(f"no collection named {name!r}")


def may_search(scope: Scope | None, *, acl: bool, tenant: str | None) -> bool:
    """Whether a search in ``scope`` may name a collection at all (its owner, its grants): what
    "every collection" means when a caller names none."""
    if tenant is not None and not (scope is not None and (scope.all_scopes or scope.tenant == tenant)):
        return False
    return not acl or (scope is not None and scope.principal is not None)


def check_principal(scope: Scope | None, acl_collections: Iterable[str]) -> None:
    """Refuse a search or listing of ``acl=True`` collections without a principal (ScopeError)."""
    names = sorted(acl_collections)
    if names and (scope is None or scope.principal is None):
        raise ScopeError(
            f"collection(s) {', '.join(repr(n) for n in names)} enforce document grants (acl=True): pass "
            "scope=Scope(..., principal=Principal(user=..., groups=[...])), or Principal(admin=True) "
            "to read every document"
        )


# A knowledge-graph triple of an acl=True collection is as readable as the document it came from
# (its source, in its tenant and workspace): relations carry no grants of their own, so the
# documents' visibility decides, the same fragment as search's. A triple with no source, or whose
# document the scope may not read, is hidden (but from an admin principal).
_RELATION_SOURCE = (
    "EXISTS (SELECT 1 FROM agentrag.documents d WHERE d.collection_id = r.collection_id"
    " AND d.source = r.source AND d.tenant_id IS NOT DISTINCT FROM r.tenant_id"
    " AND d.workspace_id IS NOT DISTINCT FROM r.workspace_id AND ({visible}))"
)


def relation_visibility(scope: Scope | None, collection: str, *, acl: bool) -> tuple[str, dict[str, Any]]:
    """``(sql, params)`` over the relations alias ``r``: which triples of ``collection`` the scope
    may read (TRUE outside ``acl=True``); no principal on an acl collection: ScopeError."""
    if not acl:
        return "TRUE", {}
    check_principal(scope, [collection])
    if scope is not None and scope.principal is not None and scope.principal.admin:
        return "TRUE", {}  # an admin reads every triple (sessions still narrow by the row's own)
    predicate = compile_predicate(scope)
    visible = predicate.visibility(acl=True, private_documents=True)
    if visible == "TRUE":
        return "TRUE", {}
    params = {k: v for k, v in predicate.params.items() if k in ("s_session", "p_tokens")}
    return _RELATION_SOURCE.replace("{visible}", visible), params


class TextArray(str):
    """A ``text[]`` parameter bound as its array literal, rendered once (``CAST(:p AS text[])`` reads
    it): psycopg quotes a list element by element in every statement that binds it (a principal's
    502 grant tokens: 0.39 ms a statement, 0.16 as a literal; a search binds them up to four times).
    ``items`` are the elements."""

    items: tuple[str, ...]

    def __new__(cls, items: Iterable[str]) -> TextArray:
        items = tuple(items)
        quoted = ('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"' for item in items)
        literal = super().__new__(cls, "{" + ",".join(quoted) + "}")
        literal.items = items
        return literal


def grant_of(grants: list[str] | None, principal: Principal | None) -> str | None:
    """The grant that made a document visible to ``principal`` (``user:alice``, ``group:hr``,
    ``everyone``, ``admin``), or None on a collection without grants. Reported on each hit and
    in the proof; the SQL already decided visibility. The first of the principal's user, its groups
    in name order, then everyone."""
    if grants is None or principal is None:
        return None
    held = set(grants)
    if principal.user is not None and f"u:{principal.user}" in held:
        return grant_text(f"u:{principal.user}")
    groups = principal.groups  # a sorted tuple: the document's few group tokens are looked up in it
    for token in sorted(t for t in held if t.startswith("g:")):
        at = bisect.bisect_left(groups, token[2:])
        if at < len(groups) and groups[at] == token[2:]:
            return grant_text(token)
    if EVERYONE_TOKEN in held:
        return grant_text(EVERYONE_TOKEN)
    return "admin" if principal.admin else None
