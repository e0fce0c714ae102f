"""Scopes: which tenant / workspace / session a query may see.

A scope is enforced inside the SQL of every retrieval leg. A collection created with
``scoped=True`` refuses queries without a scope unless the caller passes ``Scope.every()``.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentrag.errors import ScopeError

__all__ = ["Scope"]


@dataclass(frozen=True, slots=True)
class Scope:
    """tenant and workspace match documents' columns; session matches document-session links."""

    tenant: str | None = None
    workspace: str | None = None
    session: str | None = None
    all_scopes: bool = False

    def __post_init__(self) -> None:
        for name in ("tenant", "workspace", "session"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ScopeError(f"scope {name} must be a non-empty string, got {value!r}")
        if self.all_scopes and not self.is_empty:
            raise ScopeError("Scope.every() cannot be combined with a tenant, workspace or session")

    @classmethod
    def every(cls) -> Scope:
        """An explicit request to search across every scope of a scoped collection."""
        return cls(all_scopes=True)

    @property
    def is_empty(self) -> bool:
        return self.tenant is None and self.workspace is None and self.session is None

    def __repr__(self) -> str:
        if self.all_scopes:
            return "Scope.every()"
        parts = [
            f"{k}={v!r}"
            for k, v in (("tenant", self.tenant), ("workspace", self.workspace), ("session", self.session))
            if v
        ]
        return f"Scope({', '.join(parts)})"
