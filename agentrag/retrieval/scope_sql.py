"""Scopes in SQL: the WHERE fragment that keeps a search inside a tenant / workspace / session.

Every retrieval leg puts this fragment (over the documents alias ``d``) into its own query, so
a chunk of another scope can never be ranked, let alone returned. Values are bound parameters
(``:s_*``); the fragment holds only this module's text.

* ``tenant``: ``d.tenant_id = :s_tenant``
* ``workspace``: ``d.workspace_id = :s_workspace``
* ``session``: the document is linked to the session in ``agentrag.document_sessions``
  (``EXISTS``); on a scoped collection always together with the tenant (:func:`check_scope`
  refuses a workspace or session without one), so a session never crosses tenants.

The parts combine with AND. A scope applies to unscoped collections too: documents ingested
without a tenant simply do not match a tenant scope. ``None``, an empty ``Scope()`` and
``Scope.every()`` compile to ``TRUE``; refusing an unscoped query on a ``scoped=True``
collection is the caller's job (:func:`check_scope`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentrag.errors import ScopeError
from agentrag.retrieval.catalog import is_valid_unicode
from agentrag.scope import Scope

__all__ = ["check_scope", "compile_row_scope", "compile_scope"]


def _value(value: str, name: str) -> str:
    if "\x00" in value:
        raise ScopeError(f"scope {name} must not contain NUL bytes")
    if not is_valid_unicode(value):
        raise ScopeError(f"scope {name} is not valid Unicode (lone surrogate)")
    return value


def _checked(scope: Scope | None) -> Scope | None:
    """``scope`` itself; ``TypeError`` for anything but a Scope or None."""
    if scope is not None and not isinstance(scope, Scope):
        raise TypeError(f"scope must be an agentrag.Scope or None, got {type(scope).__name__}")
    return scope


def compile_scope(scope: Scope | None) -> tuple[str, dict[str, Any]]:
    """``(sql, params)``: a boolean SQL expression over the documents alias ``d``."""
    if (scope := _checked(scope)) is None:
        return "TRUE", {}
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if scope.tenant is not None:
        clauses.append("d.tenant_id = :s_tenant")
        params["s_tenant"] = _value(scope.tenant, "tenant")
    if scope.workspace is not None:
        clauses.append("d.workspace_id = :s_workspace")
        params["s_workspace"] = _value(scope.workspace, "workspace")
    if scope.session is not None:
        clauses.append(
            "EXISTS (SELECT 1 FROM agentrag.document_sessions s"
            " WHERE s.document_id = d.id AND s.session_id = :s_session)"
        )
        params["s_session"] = _value(scope.session, "session")
    if not clauses:
        return "TRUE", {}
    return " AND ".join(f"({clause})" for clause in clauses), params


def compile_row_scope(scope: Scope | None, alias: str) -> tuple[str, dict[str, Any]]:
    """``(sql, params)`` for a table carrying its own ``tenant_id`` / ``workspace_id`` /
    ``session_id`` columns (knowledge-graph relations): each named part must equal its column,
    so a row without a tenant never matches a tenant scope. ``alias`` is an identifier of the
    caller's own SQL text (allow-listed here), never user input."""
    if alias not in ("r",):
        raise ValueError(f"unknown table alias {alias!r}")
    if (scope := _checked(scope)) is None:
        return "TRUE", {}
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for name in ("tenant", "workspace", "session"):
        value = getattr(scope, name)
        if value is not None:
            clauses.append(f"{alias}.{name}_id = :s_{name}")
            params[f"s_{name}"] = _value(value, name)
    if not clauses:
        return "TRUE", {}
    return " AND ".join(clauses), params


def check_scope(scope: Scope | None, scoped_collections: Iterable[str]) -> None:
    """Refuse a query without a scope on ``scoped=True`` collections (``Scope.every()`` passes).

    Scopes are tenant-rooted: a workspace or a session belongs to a tenant, and two tenants may
    both have a workspace named "shared". On a scoped collection a scope naming a workspace or a
    session without its tenant is refused too, instead of crossing tenants.
    """
    names = sorted(scoped_collections)
    if scope is not None and not scope.all_scopes and scope.tenant is None and not scope.is_empty:
        if names:
            raise ScopeError(
                f"collection(s) {', '.join(repr(n) for n in names)} are scoped and scopes are tenant-rooted: "
                f"{scope!r} names no tenant; pass Scope(tenant=..., workspace=..., session=...)"
            )
        return
    if scope is not None and (scope.all_scopes or not scope.is_empty):
        return
    if names:
        raise ScopeError(
            f"collection(s) {', '.join(repr(n) for n in names)} are scoped: pass scope=Scope(tenant=..., "
            "workspace=..., session=...) or scope=Scope.every() to search across every scope"
        )
