"""The serving API: ``agentrag serve``, a multi-tenant retrieval service over HTTP.

``create_app(store, config=...)`` builds the ASGI app (FastAPI; the ``server`` extra), which
``agentrag serve`` runs under uvicorn. The request flow (seed 001)::

    JWT (401) -> query scope + tenant claim == path tenant (403) -> tenant ACTIVE (403/404)
    -> rate limit in PostgreSQL (429) -> search with Scope(tenant=...) (+ answer) -> proof
    -> RETRIEVAL_EXECUTED / GENERATION_EXECUTED persisted

Modules: :mod:`.config` (arguments and ``AGENTRAG_*`` variables), :mod:`.auth` (JWT),
:mod:`.tenants` (tenants, rate limit and audit tables; no FastAPI), :mod:`.models` (request
and response bodies), :mod:`.observe` (server span, request metrics, body limit),
:mod:`.app` (the routes). The tenants and audit commands import only :mod:`.tenants`, so
they work without the ``server`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrag.server.config import ServerConfig

if TYPE_CHECKING:
    from agentrag.server.app import create_app

__all__ = ["ServerConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from agentrag.server.app import create_app

        return create_app
    raise AttributeError(f"module 'agentrag.server' has no attribute {name!r}")
