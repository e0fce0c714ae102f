"""Fixtures for the serving-API tests: a real ``agentrag serve`` process on 127.0.0.1 and tokens.

The server runs as a subprocess (uvicorn, real HTTP) against the test session's database,
with the FakeEmbedder (``--embedder fake:64``, the same model as the ``store`` fixture) and
its spans and request metrics written to a JSON-lines file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

SECRET = "test-secret-" + "x" * 40
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def token(
    tenant: str | None,
    *,
    scope: str | None = "query",
    secret: str = SECRET,
    exp: float | None = 600,
    **claims: Any,
) -> str:
    import jwt

    payload: dict[str, Any] = dict(claims)
    if tenant is not None:
        payload["tenant_id"] = tenant
    if scope is not None:
        payload["scope"] = scope
    if exp is not None:
        payload["exp"] = int(time.time() + exp)
    return jwt.encode(payload, secret, algorithm="HS256")


def auth(tenant: str, **kw: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(tenant, **kw)}"}


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    trace_path: Path
    extra: dict[str, Any] = field(default_factory=dict)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def telemetry(self) -> list[dict[str, Any]]:
        if not self.trace_path.exists():
            return []
        # the server may be writing its last line as this reads: only whole lines (newline-ended) count
        text = self.trace_path.read_text()
        whole = text[: text.rfind("\n") + 1]
        return [json.loads(line) for line in whole.splitlines() if line.strip()]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(database_url: str, tmp: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    import httpx

    port = free_port()
    log_path = tmp / f"server-{port}.log"
    trace_path = tmp / f"trace-{port}.jsonl"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRAG_JWT")}
    environment.update(env or {})
    environment["AGENTRAG_DATABASE_URL"] = database_url
    cmd = [
        sys.executable, "-m", "agentrag", "serve", "--port", str(port), "--embedder", "fake:64",
        "--trace-file", str(trace_path), *args,
    ]  # fmt: skip
    if "--jwt-public-key" not in args and "--jwt-jwks" not in args:
        cmd += ["--jwt-secret", SECRET]
    log = open(log_path, "wb")  # noqa: SIM115 - the process owns it
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=environment)
    url = f"http://127.0.0.1:{port}"
    # a bound for a failure only (an exit fails at once): startup imports litellm and loads the
    # embedder, which on a loaded machine took over a minute (issue #38)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log_path.read_text()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return Server(url, process, log_path, trace_path)
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"server did not become ready:\n{log_path.read_text()}")


@pytest.fixture(scope="session")
def server_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server")


@pytest.fixture(scope="session")
def server(database_url: str, store: Any, server_tmp: Path) -> Iterator[Server]:
    """One shared single-worker server for the session (``store`` ran the migrations)."""
    s = start_server(database_url, server_tmp)
    yield s
    s.stop()


@pytest.fixture
def client(server: Server) -> Iterator[Any]:
    import httpx

    with httpx.Client(base_url=server.url, timeout=120) as c:  # a loaded machine answers late, never wrongly
        yield c


def new_tenant(store: Any, prefix: str = "t", **settings: Any) -> str:
    from agentrag.server.tenants import create_tenant

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    create_tenant(store.engine, name, **settings)
    return name


def audit_of(engine: Any, query_id: str, count: int, timeout: float = 120.0) -> list[Any]:
    """The audit rows of ``query_id`` once the server's background writer has written ``count`` of
    them (it batches every ~200 ms): waits on that condition, fails after ``timeout`` seconds."""
    from agentrag.server.tenants import list_audit

    deadline = time.monotonic() + timeout
    while True:
        rows = list_audit(engine, query_id=query_id)
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.02)
