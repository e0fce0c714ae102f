"""Server configuration: one frozen dataclass, from ``agentrag serve`` arguments or ``AGENTRAG_*``.

Every field has an environment variable (``AGENTRAG_`` + the upper-cased field name, e.g.
``AGENTRAG_JWT_SECRET``); arguments win over variables. ``agentrag serve`` puts its arguments
into the environment before uvicorn starts its workers, so every worker process builds the
same configuration with :meth:`ServerConfig.from_env`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from agentrag.errors import InvalidInputError

__all__ = ["ServerConfig"]

_PREFIX = "AGENTRAG_"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """How the service authenticates, limits and serves (see docs/how-to/serving.md)."""

    database_url: str | None = None
    read_database_urls: str | None = None  # comma-separated streaming replicas for searches
    embedder: str = "local"  # local | fake[:DIMENSIONS] (agentrag.testing.FakeEmbedder)
    llm: str | None = None  # a litellm model string; none: extractive answers
    llm_api_base: str | None = None
    llm_api_key: str | None = None
    pool_size: int = 10
    search_concurrency: int = 0  # searches running at once per worker, the rest queued (0: 3 per core)
    # JWT: exactly one of secret (HS256), public key file (RS256/ES256) or JWKS file
    jwt_secret: str | None = None
    jwt_public_key: str | None = None
    jwt_jwks: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_tenant_claim: str = "tenant_id"
    jwt_groups_claim: str = "groups"  # the user's groups (a list, or a space-separated string)
    jwt_leeway_s: float = 0.0
    jwt_max_lifetime_s: float = 86400.0  # a token whose exp is further away than this is refused
    max_body_bytes: int = 65536
    trace_file: str | None = None  # spans and request metrics as JSON lines (for tests, debugging)
    trace_file_max_bytes: int = 10_000_000  # then it is rotated to <file>.1 (one old file kept)
    default_collections: str | None = None  # comma-separated; none: every collection
    metrics: bool = True  # /metrics: record into the service's own MeterProvider (~40 us CPU a request)
    # request limits (agentrag.server.limits, agentrag.server.protocol)
    max_header_count: int = 100
    max_header_bytes: int = 16384
    max_request_line_bytes: int = 8192
    header_timeout_s: float = 10.0  # the request head must arrive within this
    body_timeout_s: float = 10.0  # the request body must arrive within this
    send_timeout_s: float = 30.0  # a client that reads nothing for this long is dropped
    keep_alive_s: int = 5  # an idle keep-alive connection is closed after this
    max_in_flight: int = 1000  # requests at once per worker; beyond: 503 OVERLOADED
    stream_idle_timeout_s: float = 60.0  # a stream (SSE) that sends nothing this long is ended
    request_budget_s: float = 0.0  # Budget(max_seconds=...) of every query (0: none)
    # audit (agentrag.server.auditlog)
    audit_retention_days: float = 365.0  # older audit rows are purged (0: kept forever)
    audit_purge_interval_s: float = 3600.0

    def __post_init__(self) -> None:
        keys = [k for k in (self.jwt_secret, self.jwt_public_key, self.jwt_jwks) if k]
        if len(keys) > 1:
            raise InvalidInputError("configure one of jwt_secret, jwt_public_key, jwt_jwks, not several")
        if self.jwt_secret is not None and len(self.jwt_secret.encode()) < 32:
            raise InvalidInputError("jwt_secret must be at least 32 bytes (HS256 needs a 256-bit key)")
        if self.pool_size < 1:
            raise InvalidInputError(f"pool_size must be >= 1, got {self.pool_size}")
        if self.search_concurrency < 0:
            raise InvalidInputError(
                f"search_concurrency must be >= 1, or 0 for 3 per core, got {self.search_concurrency}"
            )
        if self.max_body_bytes < 1024:
            raise InvalidInputError(f"max_body_bytes must be >= 1024, got {self.max_body_bytes}")
        positive = (
            "jwt_max_lifetime_s", "max_header_count", "max_header_bytes", "max_request_line_bytes",
            "header_timeout_s", "body_timeout_s", "send_timeout_s", "keep_alive_s", "max_in_flight",
            "stream_idle_timeout_s", "trace_file_max_bytes", "audit_purge_interval_s",
        )  # fmt: skip
        for name in positive:
            if not getattr(self, name) > 0:
                raise InvalidInputError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("request_budget_s", "audit_retention_days"):
            if not getattr(self, name) >= 0:
                raise InvalidInputError(f"{name} must be >= 0 (0: none), got {getattr(self, name)!r}")

    @property
    def has_key(self) -> bool:
        return bool(self.jwt_secret or self.jwt_public_key or self.jwt_jwks)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ServerConfig:
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = environ.get(_PREFIX + f.name.upper())
            if raw is None or raw == "":
                continue
            kind: Any = type(f.default) if f.default is not None else str
            if kind is bool:
                values[f.name] = raw.strip().lower() not in ("0", "false", "no", "off")
                continue
            try:
                values[f.name] = kind(raw) if kind in (int, float) else raw
            except ValueError:
                raise InvalidInputError(f"{_PREFIX}{f.name.upper()} must be a {kind.__name__}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"unknown server option(s): {', '.join(unknown)}")
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The ``AGENTRAG_*`` variables that rebuild this configuration in a worker process."""
        return {
            _PREFIX + f.name.upper(): str(getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) is not None
        }

    def __repr__(self) -> str:  # never the secret
        shown = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        for secret in ("jwt_secret", "llm_api_key"):
            if secret in shown:
                shown[secret] = "***"
        for url in ("database_url", "read_database_urls"):
            if url in shown:
                shown[url] = "<set>"
        return "ServerConfig(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"
