"""Bearer JWT authentication (PyJWT).

One key source, chosen by configuration, fixes the algorithms a token may use:

* ``jwt_secret``: HS256 only.
* ``jwt_public_key`` (a PEM file): RS256 for an RSA key, ES256 for a P-256 key.
* ``jwt_jwks`` (a JWKS file): RSA / EC keys by ``kid``, each with its one algorithm.

The token's header ``alg`` must be the key's algorithm before anything is verified, so
``alg: none`` and algorithm confusion (an HS256 token "signed" with the public key) are
refused. ``exp`` is required, and may be at most ``jwt_max_lifetime_s`` away (from now, and from
``iat`` when present); ``nbf`` is checked when present; ``iss`` and ``aud`` are
required and checked when configured. Then the claims must carry the ``query`` scope
(``scope``: space-separated, or ``scp``: a list) and the tenant claim (``tenant_id`` by
default) equal to the path's tenant. ``sub`` and the groups claim (``groups`` by default,
``jwt_groups_claim``: a list of strings or a space-separated string) become the principal that
``acl=True`` collections check grants against. Failures are :class:`AuthError` (401: who are you?) or
:class:`ForbiddenError` (403: not allowed); their messages never echo the token.

A token that verified is remembered (its exact text, at most ``CACHE_SIZE`` of them): a client
sends the same token on every request, and checking its signature again (HMAC or RSA) would
give the same answer, since the keys are fixed for the process's life. ``exp``, the only check
whose answer changes with time, is checked again on every use; ``nbf``, ``iat`` and the rest can
only stay true. Nothing that failed is remembered.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrag.server.config import ServerConfig

__all__ = ["AuthError", "ForbiddenError", "Principal", "TokenVerifier", "authorize"]

MAX_TOKEN_CHARS = 8192
CACHE_SIZE = 1024
REQUIRED_SCOPE = "query"


class AuthError(Exception):
    """401: no token, or a token that does not verify."""

    code = "UNAUTHENTICATED"


class ForbiddenError(Exception):
    """403: a valid token without the right to this request."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


MAX_GROUPS = 1000


@dataclass(frozen=True, slots=True)
class Principal:
    subject: str | None
    tenant: str
    scopes: frozenset[str]
    groups: tuple[str, ...] = ()


def _groups(claims: Mapping[str, Any], claim: str) -> tuple[str, ...]:
    """The groups claim: a list of non-empty strings, or one space-separated string; else 403."""
    value = claims.get(claim)
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ForbiddenError("INVALID_GROUPS", f"the {claim!r} claim must be a list of group names")
    if len(value) > MAX_GROUPS:
        raise ForbiddenError("INVALID_GROUPS", f"the {claim!r} claim holds more than {MAX_GROUPS} groups")
    return tuple(sorted(set(value)))


def _asymmetric_alg(key: Any) -> str:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < 2048:
            raise ValueError("RSA public keys must be at least 2048 bits")
        return "RS256"
    if isinstance(key, ec.EllipticCurvePublicKey):
        if not isinstance(key.curve, ec.SECP256R1):
            raise ValueError("EC public keys must be on P-256 (ES256)")
        return "ES256"
    raise ValueError(f"unsupported public key type {type(key).__name__}: use an RSA or P-256 EC key")


class TokenVerifier:
    """Verifies tokens against the configured key source (see the module docstring)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._keys: dict[str | None, tuple[Any, str]] = {}  # kid -> (key, algorithm)
        self._verified: dict[str, dict[str, Any]] = {}  # token -> its claims, oldest first
        self._lock = threading.Lock()
        if config.jwt_secret:
            self._keys[None] = (config.jwt_secret.encode(), "HS256")
        elif config.jwt_public_key:
            from cryptography.hazmat.primitives.serialization import load_pem_public_key

            key = load_pem_public_key(Path(config.jwt_public_key).read_bytes())
            self._keys[None] = (key, _asymmetric_alg(key))
        elif config.jwt_jwks:
            import jwt

            data = json.loads(Path(config.jwt_jwks).read_text(encoding="utf-8"))
            for jwk in data.get("keys", []):
                if jwk.get("kty") not in ("RSA", "EC"):
                    raise ValueError("the JWKS may hold RSA and EC public keys only")
                if "d" in jwk:
                    raise ValueError("the JWKS holds a private key: publish public keys only")
                key = jwt.PyJWK(jwk).key
                alg = _asymmetric_alg(key)
                if jwk.get("alg") not in (None, alg):
                    raise ValueError(
                        f"JWKS key {jwk.get('kid')!r}: alg {jwk.get('alg')!r} does not fit its key"
                    )
                self._keys[jwk.get("kid")] = (key, alg)
            if not self._keys:
                raise ValueError("the JWKS file holds no keys")

    @property
    def algorithms(self) -> list[str]:
        return sorted({alg for _, alg in self._keys.values()})

    def _key_for(self, header: Mapping[str, Any]) -> tuple[Any, str]:
        kid = header.get("kid")
        if kid is not None and kid in self._keys:
            return self._keys[kid]
        if len(self._keys) == 1:
            return next(iter(self._keys.values()))
        raise AuthError("unknown signing key")

    def verify(self, token: str) -> dict[str, Any]:
        """The verified claims of ``token`` (a copy), or :class:`AuthError`."""
        claims = self._verified.get(token)
        if claims is not None:
            if time.time() < claims["exp"] + self.config.jwt_leeway_s:  # PyJWT's own expiry test
                return dict(claims)
            self._verified.pop(token, None)
            raise AuthError("token expired")
        claims = self._verify(token)
        if isinstance(claims.get("exp"), int | float) and not isinstance(claims["exp"], bool):
            with self._lock:
                while len(self._verified) >= CACHE_SIZE:
                    self._verified.pop(next(iter(self._verified)), None)
                self._verified[token] = dict(claims)
        return claims

    def _verify(self, token: str) -> dict[str, Any]:
        import jwt

        if not self._keys:
            raise AuthError("authentication is not configured")
        if not token or len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
            raise AuthError("malformed token")
        try:
            header = jwt.get_unverified_header(token)
            if not isinstance(header, dict):
                raise AuthError("malformed token")
            key, alg = self._key_for(header)
            if header.get("alg") != alg:
                raise AuthError("token algorithm not allowed")
            cfg = self.config
            required = ["exp", *(["iss"] if cfg.jwt_issuer else []), *(["aud"] if cfg.jwt_audience else [])]
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=cfg.jwt_audience,
                issuer=cfg.jwt_issuer,
                leeway=cfg.jwt_leeway_s,
                options={"require": required, "verify_aud": cfg.jwt_audience is not None},
            )
        except AuthError:
            raise
        except jwt.ExpiredSignatureError:
            raise AuthError("token expired") from None
        except jwt.ImmatureSignatureError:
            raise AuthError("token not yet valid") from None
        except jwt.InvalidAudienceError:
            raise AuthError("token audience not accepted") from None
        except jwt.InvalidIssuerError:
            raise AuthError("token issuer not accepted") from None
        except jwt.MissingRequiredClaimError as exc:
            raise AuthError(f"token lacks the {exc.claim!r} claim") from None
        except jwt.InvalidSignatureError:
            raise AuthError("token signature invalid") from None
        except Exception:  # any other decoding problem, whatever raised it
            raise AuthError("malformed token") from None
        if not isinstance(claims, dict):
            raise AuthError("malformed token")
        _check_lifetime(claims, self.config.jwt_max_lifetime_s)
        return claims


def _check_lifetime(claims: Mapping[str, Any], max_lifetime_s: float) -> None:
    """A token may not be valid for longer than ``max_lifetime_s``: from now (its ``exp``) and,
    when it has an ``iat``, from its issue."""
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise AuthError("malformed token")
    if exp - time.time() > max_lifetime_s or (
        isinstance(iat, int | float) and not isinstance(iat, bool) and exp - iat > max_lifetime_s
    ):
        raise AuthError(f"token lifetime is over the maximum of {max_lifetime_s:g}s (jwt_max_lifetime_s)")


def _scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    out: set[str] = set()
    scope = claims.get("scope")
    if isinstance(scope, str):
        out.update(scope.split())
    for key in ("scp", "scopes"):
        value = claims.get(key)
        if isinstance(value, list):
            out.update(v for v in value if isinstance(v, str))
        elif isinstance(value, str):
            out.update(value.split())
    return frozenset(out)


def authorize(verifier: TokenVerifier, authorization: str | None, tenant: str) -> Principal:
    """Check the ``Authorization`` header for ``tenant``: a :class:`Principal` or an error."""
    if not authorization:
        raise AuthError("missing bearer token")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("expected 'Authorization: Bearer <token>'")
    claims = verifier.verify(token.strip())
    scopes = _scopes(claims)
    if REQUIRED_SCOPE not in scopes:
        raise ForbiddenError("INSUFFICIENT_SCOPE", f"the token lacks the {REQUIRED_SCOPE!r} scope")
    claimed = claims.get(verifier.config.jwt_tenant_claim)
    if not isinstance(claimed, str) or claimed != tenant:
        raise ForbiddenError("TENANT_MISMATCH", "the token is not valid for this tenant")
    subject = claims.get("sub")
    return Principal(
        subject=subject if isinstance(subject, str) and subject.strip() else None,
        tenant=tenant,
        scopes=scopes,
        groups=_groups(claims, verifier.config.jwt_groups_claim),
    )
