"""``agentrag token mint``: a development token for the service (HS256 with the configured secret).

For trying the service, the playground, the OpenAI endpoint and ``/mcp`` locally. Production tokens
come from an identity provider signing with its own key: when the service is configured with a public
key or a JWKS (``AGENTRAG_JWT_PUBLIC_KEY`` / ``AGENTRAG_JWT_JWKS``) minting is refused, since no token
signed here could verify there.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from typing import Any

from agentrag.errors import InvalidInputError

__all__ = ["mint", "parse_ttl", "register"]

MAX_TTL_S = 30 * 24 * 3600
_TTL = re.compile(r"^(\d+)([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_ttl(text: str) -> int:
    """``"90"`` / ``"90s"``, ``"15m"``, ``"1h"``, ``"7d"`` as seconds (1 s to 30 days)."""
    matched = _TTL.match(text.strip().lower())
    if not matched:
        raise InvalidInputError(
            f"--ttl must be a number with an optional unit s, m, h or d (e.g. 1h), got {text!r}"
        )
    seconds = int(matched.group(1)) * _UNITS[matched.group(2)]
    if not 1 <= seconds <= MAX_TTL_S:
        raise InvalidInputError(f"--ttl must be between 1 second and 30 days, got {text!r}")
    return seconds


def mint(
    config: Any,
    *,
    tenant: str,
    sub: str,
    groups: list[str] | None = None,
    ttl_s: int = 3600,
    scope: str = "query",
    now: float | None = None,
) -> str:
    """An HS256 token for ``tenant`` signed with ``config.jwt_secret``, with the configured ``iss`` /
    ``aud`` and tenant claim, so the service that shares the configuration accepts it."""
    import jwt

    if config.jwt_public_key or config.jwt_jwks:
        raise InvalidInputError(
            "token mint signs with the HS256 secret only, and this configuration verifies tokens with "
            "a public key (AGENTRAG_JWT_PUBLIC_KEY / AGENTRAG_JWT_JWKS): get tokens from the identity "
            "provider that holds the private key"
        )
    if not config.jwt_secret:
        raise InvalidInputError(
            "no HS256 secret: set AGENTRAG_JWT_SECRET (at least 32 bytes; the service must use the same) "
            "or pass --jwt-secret"
        )
    if not tenant.strip() or not sub.strip():
        raise InvalidInputError("--tenant and --sub must not be empty")
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        config.jwt_tenant_claim: tenant,
        "sub": sub,
        "scope": scope,
        "iat": issued,
        "exp": issued + ttl_s,
    }
    if groups:
        claims["groups"] = groups
    if config.jwt_issuer:
        claims["iss"] = config.jwt_issuer
    if config.jwt_audience:
        claims["aud"] = config.jwt_audience
    return str(jwt.encode(claims, config.jwt_secret, algorithm="HS256"))


def cmd_token_mint(args: argparse.Namespace) -> int:
    from agentrag.server.config import ServerConfig
    from agentrag.server.extras import require_extras

    require_extras("token mint", "server")

    config = ServerConfig.from_env(jwt_secret=args.jwt_secret)
    groups = [g.strip() for g in (args.groups or "").split(",") if g.strip()]
    ttl = parse_ttl(args.ttl)
    token = mint(config, tenant=args.tenant, sub=args.sub, groups=groups, ttl_s=ttl, scope=args.scope)
    if args.json:
        print(
            json.dumps(
                {"token": token, "tenant": args.tenant, "sub": args.sub, "groups": groups, "ttl_s": ttl}
            )
        )
    else:
        print(token)
    return 0


def register(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``token mint``."""
    tok = sub.add_parser("token", help="development tokens for the service (HS256)").add_subparsers(
        dest="token_command", required=True
    )
    p = add(tok, "mint", cmd_token_mint, "mint an HS256 token with $AGENTRAG_JWT_SECRET (development only)")
    p.add_argument("--tenant", required=True, help="the tenant the token is for")
    p.add_argument("--sub", required=True, help="the subject (a user or service name)")
    p.add_argument("--groups", help="comma-separated groups, put in the 'groups' claim")
    p.add_argument("--ttl", default="1h", help="lifetime: 90s, 15m, 1h, 7d (default 1h, at most 30d)")
    p.add_argument("--scope", default="query", help="space-separated scopes (default: query)")
    p.add_argument("--jwt-secret", help="HS256 secret (default: $AGENTRAG_JWT_SECRET)")
