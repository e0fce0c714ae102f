"""The request flow of the routes whose tenant comes from the token, not the path.

``/v1/chat/completions`` (the OpenAI-compatible endpoint) and ``/mcp`` (the MCP server over
streamable HTTP) take the tenant from the token's tenant claim, then go through the same checks
as ``/api/v1/query/{tenant_id}/...``: the token verifies (401), carries the ``query`` scope (403),
the tenant exists (404), is ACTIVE (403) and is under its rate limit (429, in PostgreSQL).
Failures are :class:`Refusal` (status, code, message, headers): each route turns them into its
own protocol's error (the service's JSON error body, an OpenAI error object, an MCP tool error).
"""

from __future__ import annotations

import math
from typing import Any

from agentrag.server.auth import AuthError, ForbiddenError, TokenVerifier, authorize

__all__ = ["Gate", "Refusal"]


class Refusal(Exception):
    """A request refused before any work: ``status`` is the HTTP status it maps to."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}


class Gate:
    """Authenticates a bearer token to its tenant, then admits the tenant's request."""

    def __init__(self, verifier: TokenVerifier, admit: Any) -> None:
        self.verifier = verifier
        self.admit = admit

    def tenant_of(self, authorization: str | None) -> str:
        """The tenant of the ``Authorization`` header's token (no I/O), or a :class:`Refusal`."""
        try:
            if not authorization:
                raise AuthError("missing bearer token")
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise AuthError("expected 'Authorization: Bearer <token>'")
            claimed = self.verifier.verify(token.strip()).get(self.verifier.config.jwt_tenant_claim)
            if not isinstance(claimed, str) or not claimed:
                raise ForbiddenError("TENANT_MISMATCH", "the token names no tenant")
            return authorize(self.verifier, authorization, claimed).tenant
        except AuthError as exc:
            raise Refusal(401, "UNAUTHENTICATED", str(exc), {"WWW-Authenticate": "Bearer"}) from None
        except ForbiddenError as exc:
            raise Refusal(403, exc.code, str(exc)) from None

    def admitted(self, tenant: str) -> Any:
        """The tenant's settings once admitted (one statement in PostgreSQL), or a :class:`Refusal`."""
        admission = self.admit(tenant)
        if admission.tenant is None:
            raise Refusal(404, "TENANT_NOT_FOUND", "no such tenant")
        if not admission.tenant.active:
            raise Refusal(403, "TENANT_SUSPENDED", "the tenant is suspended")
        if not admission.allowed:
            retry = str(max(1, math.ceil(admission.retry_after_s)))
            raise Refusal(429, "RATE_LIMITED", "rate limit exceeded; retry later", {"Retry-After": retry})
        return admission.tenant
