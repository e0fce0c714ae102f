"""``agentrag token mint``: the token verifies with the service's own verifier; refused where it could not."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentrag.errors import InvalidInputError
from agentrag.server.auth import TokenVerifier, authorize
from agentrag.server.config import ServerConfig
from agentrag.server.token_cli import mint, parse_ttl

REPO = Path(__file__).resolve().parent.parent
SECRET = "mint-secret-" + "y" * 40


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRAG_JWT")}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "agentrag", "token", "mint", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=environment,
    )


def test_minted_token_round_trips_through_the_service_verifier() -> None:
    env = {"AGENTRAG_JWT_SECRET": SECRET, "AGENTRAG_JWT_ISSUER": "dev", "AGENTRAG_JWT_AUDIENCE": "rag"}
    out = _cli("--tenant", "acme", "--sub", "alice", "--groups", "eng, ops", "--ttl", "15m", env=env)
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip()
    config = ServerConfig(jwt_secret=SECRET, jwt_issuer="dev", jwt_audience="rag")
    claims = TokenVerifier(config).verify(token)
    assert claims["tenant_id"] == "acme" and claims["sub"] == "alice" and claims["groups"] == ["eng", "ops"]
    assert claims["iss"] == "dev" and claims["aud"] == "rag" and claims["scope"] == "query"
    assert claims["exp"] - claims["iat"] == 900 and claims["iat"] <= time.time() + 1
    principal = authorize(TokenVerifier(config), f"Bearer {token}", "acme")
    assert principal.subject == "alice" and principal.tenant == "acme"


def test_the_tenant_claim_follows_the_configuration() -> None:
    config = ServerConfig(jwt_secret=SECRET, jwt_tenant_claim="org")
    token = mint(config, tenant="acme", sub="svc", ttl_s=60)
    claims = TokenVerifier(config).verify(token)
    assert claims["org"] == "acme" and "tenant_id" not in claims and "groups" not in claims


def test_expired_after_its_ttl() -> None:
    config = ServerConfig(jwt_secret=SECRET)
    token = mint(config, tenant="acme", sub="svc", ttl_s=60, now=time.time() - 120)
    with pytest.raises(Exception, match="expired"):
        TokenVerifier(config).verify(token)


def test_refused_when_an_asymmetric_key_is_configured(tmp_path: Path) -> None:
    key = tmp_path / "public.pem"
    key.write_text("not read")
    out = _cli("--tenant", "acme", "--sub", "a", env={"AGENTRAG_JWT_PUBLIC_KEY": str(key)})
    assert out.returncode == 2 and "HS256" in out.stderr and "identity provider" in out.stderr
    assert out.stdout == ""


def test_refused_without_a_secret_with_the_fix_named() -> None:
    out = _cli("--tenant", "acme", "--sub", "a")
    assert out.returncode == 2 and "AGENTRAG_JWT_SECRET" in out.stderr


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("1h", 3600), ("7D", 604800)]
)
def test_ttl_units(text: str, seconds: int) -> None:
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "1w", "-5m", "31d", "1.5h", "soon"])
def test_bad_ttl_is_a_clear_error(text: str) -> None:
    with pytest.raises(InvalidInputError, match="--ttl"):
        parse_ttl(text)
