"""Scopes: which tenant / workspace / session a query may see, and who is asking.

A scope is enforced inside the SQL of every retrieval leg. A collection created with
``scoped=True`` refuses queries without a scope unless the caller passes ``Scope.every()``.
A collection created with ``acl=True`` returns only the documents the scope's
:class:`Principal` holds a grant for (a user, one of its groups, or ``everyone``); see
:mod:`agentrag.retrieval.predicate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentrag.errors import ScopeError

__all__ = ["EVERYONE", "Principal", "Scope"]

#: the grant that lets every principal of the document's tenant read it
EVERYONE = "everyone"
_MAX_GROUPS = 1000


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ScopeError(f"principal {what} must be a non-empty string, got {value!r}")
    if "\x00" in value or len(value) > 1000:
        raise ScopeError(f"principal {what} must hold no NUL byte and at most 1000 characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ScopeError(f"principal {what} is not valid Unicode (lone surrogate)") from None
    return value


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: a user and the groups it belongs to (``admin=True`` reads every document).

    On a collection created with ``acl=True`` a search returns only the documents granted to the
    user, to one of the groups or to ``everyone``; a principal without a grant sees nothing there.
    ``Principal.admin()`` bypasses grants (never sessions' privacy: an admin reads a session's
    uploads only in that session or with ``Scope.every()``).
    """

    user: str | None = None
    groups: Sequence[str] = ()  # kept as a sorted tuple
    admin: bool = False

    def __post_init__(self) -> None:
        if self.user is not None:
            _name(self.user, "user")
        groups = self.groups
        if isinstance(groups, str) or not isinstance(groups, tuple | list | set | frozenset):
            raise ScopeError(f"principal groups must be a list of strings, got {type(groups).__name__}")
        if len(groups) > _MAX_GROUPS:
            raise ScopeError(f"a principal holds at most {_MAX_GROUPS} groups, got {len(groups)}")
        object.__setattr__(self, "groups", tuple(sorted({_name(g, "group") for g in groups})))
        if not isinstance(self.admin, bool):
            raise ScopeError(f"principal admin must be a bool, got {type(self.admin).__name__}")
        if self.user is None and not self.groups and not self.admin:
            raise ScopeError("a principal needs a user, a group, or admin=True")

    def tokens(self) -> list[str]:
        """The grant tokens this principal holds (``u:<user>``, ``g:<group>``, ``*``), as stored."""
        return [EVERYONE_TOKEN, *([f"u:{self.user}"] if self.user else []), *(f"g:{g}" for g in self.groups)]

    def __repr__(self) -> str:
        parts = [f"user={self.user!r}"] if self.user else []
        if self.groups:
            parts.append(f"groups={list(self.groups)!r}")
        if self.admin:
            parts.append("admin=True")
        return f"Principal({', '.join(parts)})"


#: the stored token of the ``everyone`` grant
EVERYONE_TOKEN = "*"


def grant_token(grant: str) -> str:
    """A grant as written by users (``user:alice``, ``group:hr``, ``everyone``) -> its stored token.

    ScopeError for anything else, naming the accepted forms.
    """
    if not isinstance(grant, str):
        raise ScopeError(f"a grant must be a string, got {type(grant).__name__}")
    if grant.strip() == EVERYONE:
        return EVERYONE_TOKEN
    kind, sep, name = grant.partition(":")
    if sep and kind in ("user", "group"):
        return f"{kind[0]}:{_name(name, kind)}"
    raise ScopeError(f"unknown grant {grant!r}: use 'user:<name>', 'group:<name>' or 'everyone'")


def grant_text(token: str) -> str:
    """A stored token -> the grant as users write it."""
    if token == EVERYONE_TOKEN:
        return EVERYONE
    return ("user:" if token.startswith("u:") else "group:") + token[2:]


@dataclass(frozen=True, slots=True)
class Scope:
    """tenant and workspace match documents' columns; session matches document-session links."""

    tenant: str | None = None
    workspace: str | None = None
    session: str | None = None
    all_scopes: bool = False
    #: who is asking: enforced on ``acl=True`` collections (None: nobody, so nothing there)
    principal: Principal | None = None
    #: with ``session``: the session's uploads AND the shared documents the principal may read
    include_shared: bool = False

    def __post_init__(self) -> None:
        for name in ("tenant", "workspace", "session"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ScopeError(f"scope {name} must be a non-empty string, got {value!r}")
        if self.all_scopes and not self.is_empty:
            raise ScopeError("Scope.every() cannot be combined with a tenant, workspace or session")
        if self.principal is not None and not isinstance(self.principal, Principal):
            raise ScopeError(
                f"scope principal must be an agentrag.Principal, got {type(self.principal).__name__}"
            )
        if self.include_shared and self.session is None:
            raise ScopeError(
                "include_shared=True needs a session: Scope(tenant=..., session=..., include_shared=True)"
            )

    @classmethod
    def every(cls, principal: Principal | None = None) -> Scope:
        """An explicit request to search across every scope of a scoped collection (and every
        session); ``principal`` still applies on ``acl=True`` collections."""
        return cls(all_scopes=True, principal=principal)

    @property
    def is_empty(self) -> bool:
        return self.tenant is None and self.workspace is None and self.session is None

    def __repr__(self) -> str:
        who = f"principal={self.principal!r}" if self.principal is not None else ""
        if self.all_scopes:
            return f"Scope.every({who})"
        parts = [
            f"{k}={v!r}"
            for k, v in (("tenant", self.tenant), ("workspace", self.workspace), ("session", self.session))
            if v
        ]
        if self.include_shared:
            parts.append("include_shared=True")
        return f"Scope({', '.join([*parts, *([who] if who else [])])})"
