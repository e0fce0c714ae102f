"""JWT authentication: a fuzz of >= 1,000 bad tokens over HTTP, and the asymmetric key sources."""

from __future__ import annotations

import base64
import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.server_support import SECRET, new_tenant, start_server, token

SEARCH = "/api/v1/query/{}/search"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _raw(header: Any, payload: Any, signature: bytes = b"") -> str:
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    p = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return f"{_b64(h)}.{_b64(p)}.{_b64(signature)}"


def bad_tokens(tenant: str, other: str, n_random: int = 700) -> list[tuple[str, str, set[int]]]:
    """(kind, token, allowed statuses): every way a token can be wrong, plus random junk."""
    import jwt

    rng = random.Random(1234)
    now = int(time.time())
    good = {"tenant_id": tenant, "scope": "query", "exp": now + 600}
    out: list[tuple[str, str, set[int]]] = []

    def add(kind: str, tok: str, statuses: set[int] | None = None) -> None:
        out.append((kind, tok, statuses or {401}))

    for i in range(60):
        add("expired", jwt.encode({**good, "exp": now - 1 - i * 97}, SECRET, algorithm="HS256"))
        add("not-yet-valid", jwt.encode({**good, "nbf": now + 60 + i}, SECRET, algorithm="HS256"))
        add("wrong-secret", jwt.encode(good, f"another-secret-{i}-" + "z" * 32, algorithm="HS256"))
        add("hs512", jwt.encode(good, SECRET + "-" * 40, algorithm="HS512"))
        add("alg-none", _raw({"alg": "none", "typ": "JWT"}, {**good, "n": i}))
        add("alg-None", _raw({"alg": rng.choice(["None", "NONE", "nOnE", ""]), "typ": "JWT"}, good))
        add(
            "missing-exp",
            jwt.encode({"tenant_id": tenant, "scope": "query", "i": i}, SECRET, algorithm="HS256"),
        )
        add(
            "wrong-tenant",
            jwt.encode({**good, "tenant_id": f"{other}{i % 3 or ''}"}, SECRET, algorithm="HS256"),
            {403},
        )
        add(
            "no-tenant",
            jwt.encode({k: v for k, v in good.items() if k != "tenant_id"}, SECRET, algorithm="HS256"),
            {403},
        )
        add(
            "tenant-not-a-string",
            jwt.encode({**good, "tenant_id": [tenant]}, SECRET, algorithm="HS256"),
            {403},
        )
        add(
            "missing-scope",
            jwt.encode(
                {**good, "scope": rng.choice(["", "read", "queries", "admin ingest"])},
                SECRET,
                algorithm="HS256",
            ),
            {403},
        )
        add("scope-not-a-string", jwt.encode({**good, "scope": 7}, SECRET, algorithm="HS256"), {403})
        signed = jwt.encode(good, SECRET, algorithm="HS256").split(".")
        forged = _b64(json.dumps({**good, "tenant_id": tenant, "scope": "query admin", "i": i}).encode())
        add("tampered-payload", f"{signed[0]}.{forged}.{signed[2]}")
        add("truncated-signature", f"{signed[0]}.{signed[1]}.{signed[2][: rng.randrange(0, 40)]}")
        add("rs256-header", _raw({"alg": "RS256", "typ": "JWT"}, good, rng.randbytes(256)))
        add(
            "payload-not-json", _raw({"alg": "HS256"}, rng.randbytes(rng.randrange(1, 60)), rng.randbytes(32))
        )
        add("header-not-json", f"{_b64(rng.randbytes(20))}.{_b64(b'{}')}.{_b64(rng.randbytes(32))}")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ "
    for _ in range(n_random):
        length = rng.choice([0, 1, 5, 30, 120, 400, 2000, 9000])
        add("random", "".join(rng.choice(alphabet) for _ in range(length)).strip() or "x")
    return out


def test_a_thousand_bad_tokens_are_all_refused_with_401_or_403(server: Any, store: Any) -> None:
    import httpx

    tenant, other = new_tenant(store), new_tenant(store)
    collection = f"auth_{tenant}"
    store.create_collection(collection)
    store.ingest_text("quarterly numbers", collection=collection, source="q", tenant=tenant)
    payload = {"query_text": "q", "collections": [collection]}
    tokens = bad_tokens(tenant, other)
    assert len(tokens) >= 1000
    url = server.url + SEARCH.format(tenant)

    with httpx.Client(timeout=30) as client:

        def send(item: tuple[str, str, set[int]]) -> tuple[str, int, Any]:
            kind, tok, _ = item
            r = client.post(url, json=payload, headers={"Authorization": f"Bearer {tok}"})
            return kind, r.status_code, r.json()

        ok = client.post(url, json=payload, headers={"Authorization": f"Bearer {token(tenant)}"})
        assert ok.status_code == 200  # the control: a good token passes
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(send, tokens))
    wrong = [
        (kind, status)
        for (kind, status, _), (_, _, allowed) in zip(results, tokens, strict=True)
        if status not in allowed
    ]
    assert wrong == []
    assert all(set(body) == {"error"} for _, _, body in results)
    assert not any(status >= 500 for _, status, _ in results)


# ---- asymmetric keys ------------------------------------------------------------------------------
def _keys() -> dict[str, Any]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())

    def pem(key: Any) -> bytes:
        return key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    return {"rsa": rsa_key, "ec": ec_key, "rsa_pem": pem(rsa_key), "ec_pem": pem(ec_key)}


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    return _keys()


def _claims(tenant: str = "t1", **extra: Any) -> dict[str, Any]:
    return {"tenant_id": tenant, "scope": "query", "exp": int(time.time()) + 300, **extra}


@pytest.mark.parametrize(("kind", "alg"), [("rsa", "RS256"), ("ec", "ES256")])
def test_public_key_verification_and_algorithm_confusion(
    keys: dict[str, Any], tmp_path: Path, kind: str, alg: str
) -> None:
    import jwt

    from agentrag.server.auth import AuthError, TokenVerifier, authorize
    from agentrag.server.config import ServerConfig

    path = tmp_path / "key.pem"
    path.write_bytes(keys[f"{kind}_pem"])
    config = ServerConfig(jwt_public_key=str(path), jwt_issuer="https://issuer", jwt_audience="agentrag")
    verifier = TokenVerifier(config)
    assert verifier.algorithms == [alg]
    good = jwt.encode(_claims(iss="https://issuer", aud="agentrag"), keys[kind], algorithm=alg)
    assert authorize(verifier, f"Bearer {good}", "t1").tenant == "t1"
    bad = [
        # algorithm confusion: HS256 "signed" with the public key as the HMAC secret
        _raw({"alg": "HS256", "typ": "JWT"}, _claims(iss="https://issuer", aud="agentrag"), b"\x00" * 32),
        jwt.encode(_claims(iss="https://issuer", aud="other"), keys[kind], algorithm=alg),
        jwt.encode(_claims(iss="https://evil", aud="agentrag"), keys[kind], algorithm=alg),
        jwt.encode(_claims(aud="agentrag"), keys[kind], algorithm=alg),  # no iss
        jwt.encode(_claims(iss="https://issuer", aud="agentrag"), _keys()[kind], algorithm=alg),  # other key
        _raw({"alg": "none"}, _claims(iss="https://issuer", aud="agentrag")),
    ]
    import hashlib
    import hmac

    header_payload = ".".join(bad[0].split(".")[:2])
    mac = hmac.new(keys[f"{kind}_pem"], header_payload.encode(), hashlib.sha256).digest()
    bad.append(f"{header_payload}.{_b64(mac)}")  # a correct HMAC over the public PEM
    for tok in bad:
        with pytest.raises(AuthError):
            authorize(verifier, f"Bearer {tok}", "t1")


def test_jwks_server_over_http(keys: dict[str, Any], tmp_path: Path, database_url: str, store: Any) -> None:
    import httpx
    import jwt
    from jwt.algorithms import ECAlgorithm, RSAAlgorithm

    tenant = new_tenant(store)
    collection = f"jwks_{tenant}"
    store.create_collection(collection)
    store.ingest_text("quarterly numbers", collection=collection, source="q", tenant=tenant)
    jwks = {
        "keys": [
            {**json.loads(RSAAlgorithm.to_jwk(keys["rsa"].public_key())), "kid": "r1", "alg": "RS256"},
            {**json.loads(ECAlgorithm.to_jwk(keys["ec"].public_key())), "kid": "e1"},
        ]
    }
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks))
    server = start_server(database_url, tmp_path, "--jwt-jwks", str(path), "--jwt-audience", "agentrag")
    try:
        url = server.url + SEARCH.format(tenant)

        def status(tok: str) -> int:
            body = {"query_text": "q", "collections": [collection]}
            return httpx.post(url, json=body, headers={"Authorization": f"Bearer {tok}"}).status_code

        claims = _claims(tenant, aud="agentrag")
        assert status(jwt.encode(claims, keys["rsa"], algorithm="RS256", headers={"kid": "r1"})) == 200
        assert status(jwt.encode(claims, keys["ec"], algorithm="ES256", headers={"kid": "e1"})) == 200
        # the RSA key's kid with the EC key's signature, an unknown kid, HS256 with a JWKS configured
        assert status(jwt.encode(claims, keys["ec"], algorithm="ES256", headers={"kid": "r1"})) == 401
        assert status(jwt.encode(claims, keys["rsa"], algorithm="RS256", headers={"kid": "zz"})) == 401
        assert status(jwt.encode(claims, SECRET, algorithm="HS256", headers={"kid": "r1"})) == 401
        assert (
            status(jwt.encode(_claims(tenant), keys["rsa"], algorithm="RS256", headers={"kid": "r1"})) == 401
        )
    finally:
        server.stop()


def test_configuration_refuses_weak_or_ambiguous_keys(tmp_path: Path) -> None:
    from agentrag.errors import InvalidInputError
    from agentrag.server.config import ServerConfig

    with pytest.raises(InvalidInputError, match="32 bytes"):
        ServerConfig(jwt_secret="short")
    with pytest.raises(InvalidInputError, match="one of"):
        ServerConfig(jwt_secret="s" * 40, jwt_jwks="x.json")
    assert "s" * 40 not in repr(ServerConfig(jwt_secret="s" * 40))


def test_a_remembered_token_is_still_refused_once_it_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verified-token cache skips the signature check only: ``exp`` is checked on every use,
    a token that failed is never remembered, and callers get copies of the claims."""
    import jwt

    from agentrag.server import auth
    from agentrag.server.auth import AuthError, TokenVerifier, authorize
    from agentrag.server.config import ServerConfig

    verifier = TokenVerifier(ServerConfig(jwt_secret=SECRET, jwt_leeway_s=5))
    now = time.time()
    good = jwt.encode(_claims(exp=int(now) + 60), SECRET, algorithm="HS256")
    claims = verifier.verify(good)
    claims["tenant_id"] = "someone-else"  # a caller's copy: the remembered claims do not change
    assert authorize(verifier, f"Bearer {good}", "t1").tenant == "t1"
    assert good in verifier._verified

    monkeypatch.setattr(auth.time, "time", lambda: now + 64)  # inside the leeway
    assert verifier.verify(good)["tenant_id"] == "t1"
    monkeypatch.setattr(auth.time, "time", lambda: now + 66)  # past exp + leeway
    with pytest.raises(AuthError, match="expired"):
        verifier.verify(good)
    assert good not in verifier._verified
    monkeypatch.undo()
    with pytest.raises(AuthError):  # and the cache did not keep it alive for PyJWT's own check either
        TokenVerifier(ServerConfig(jwt_secret=SECRET)).verify(
            jwt.encode(_claims(exp=int(now) - 1), SECRET, algorithm="HS256")
        )

    forged = good[: good.rindex(".") + 1] + _b64(b"\x00" * 32)  # same header and claims, bad signature
    for _ in range(2):
        with pytest.raises(AuthError, match="signature"):
            verifier.verify(forged)
    assert forged not in verifier._verified

    for i in range(auth.CACHE_SIZE + 10):  # bounded: the oldest are forgotten first
        verifier.verify(jwt.encode(_claims(n=i), SECRET, algorithm="HS256"))
    assert len(verifier._verified) == auth.CACHE_SIZE
    assert good not in verifier._verified
