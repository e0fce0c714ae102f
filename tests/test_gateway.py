"""Regression tests of issue #37's findings, each through the one gateway (agentrag/server/gateway.py):

* F-1: an authenticated ``GET /mcp`` is admitted and answered (405: the stateless server pushes
  nothing), never held open; held ones no longer starve ``/search``; a suspended tenant is refused.
* F-3: ``/v1/chat/completions`` with ``stream: true`` audits its retrieval before the first byte and
  its outcome when the client leaves; a stalled stream ends at the idle timeout; neither keeps its slot.
* F-7: grants work through ``/v1`` and MCP (the token's user and groups are the principal); a token
  without ``sub`` searching no named collection is answered, the acl collection reported skipped.
* F-9: ``GET /v1/models`` is admitted (suspended: 403, over the rate limit: 429).

Real ``agentrag serve`` processes over real HTTP, real PostgreSQL; the LLM is the scripted stub.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.openai_stub import OpenAIStub, slow
from tests.server_support import Server, auth, new_tenant, start_server, token

openai = pytest.importorskip("openai")

SECRET = "Nightjar payroll bands are set by the quarterly review board."
OPEN = "The cafeteria opens at eight and serves breakfast until ten."


@pytest.fixture(scope="module")
def hr(store: Any) -> dict[str, Any]:
    """A tenant with an ``acl=True`` collection (its one document granted to ``group:hr``) and an
    open collection."""
    from agentrag.server.tenants import set_state

    tenant = new_tenant(store, "gw")
    acl, plain = f"gwacl_{uuid.uuid4().hex[:8]}", f"gwopen_{uuid.uuid4().hex[:8]}"
    store.create_collection(acl, acl=True, tenant=tenant)
    store.create_collection(plain, tenant=tenant)
    store.ingest_text(SECRET, collection=acl, source="pay.txt", tenant=tenant, grants=["group:hr"])
    store.ingest_text(OPEN, collection=plain, source="cafe.txt", tenant=tenant)
    suspended = new_tenant(store, "gwsus")
    set_state(store.engine, suspended, "SUSPENDED")
    return {"tenant": tenant, "acl": acl, "plain": plain, "suspended": suspended}


def _audit_rows(store: Any, tenant: str, wanted: int, timeout: float = 15.0) -> list[Any]:
    from agentrag.server.tenants import list_audit

    deadline = time.monotonic() + timeout
    while True:
        rows = list_audit(store.engine, tenant=tenant)
        if len(rows) >= wanted or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


# ---- F-1 ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small(database_url: str, store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with room for 4 requests at once (2 streams)."""
    pytest.importorskip("mcp")
    s = start_server(database_url, tmp_path_factory.mktemp("small"), "--max-in-flight", "4")
    yield s
    s.stop()


def test_f1_get_mcp_streams_are_admitted_and_never_starve_searches(small: Server, hr: dict[str, Any]) -> None:
    import httpx

    accept = {"Accept": "text/event-stream"}
    search = {"query_text": "cafeteria breakfast", "collections": [hr["plain"]]}
    with httpx.Client(base_url=small.url, timeout=10) as client:
        held = []
        try:
            for _ in range(4):  # as many as the server's in-flight limit
                r = client.stream("GET", "/mcp", headers={**auth(hr["tenant"]), **accept})
                held.append(r)
                response = r.__enter__()
                assert response.status_code == 405, response.status_code
            path = f"/api/v1/query/{hr['tenant']}/search"
            found = client.post(path, json=search, headers=auth(hr["tenant"]))
            assert found.status_code == 200, found.text
        finally:
            for r in held:
                r.__exit__(None, None, None)
        suspended = client.get("/mcp", headers={**auth(hr["suspended"]), **accept})
        assert suspended.status_code == 403 and suspended.json()["error"]["code"] == "TENANT_SUSPENDED"
        assert client.get("/mcp", headers=accept).status_code == 401


# ---- F-3 and the idle timeout -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    s = OpenAIStub()
    yield s
    s.close()


@pytest.fixture(scope="module")
def llm_server(
    database_url: str, store: Any, stub: OpenAIStub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A server with the stub LLM, one stream at a time (``--max-in-flight 2``) and a 1.5 s idle timeout."""
    s = start_server(
        database_url, tmp_path_factory.mktemp("llm"), "--llm", "openai/stub-model",
        "--llm-api-base", stub.url, "--max-in-flight", "2",
        env={"AGENTRAG_LLM_API_KEY": "sk-test", "AGENTRAG_STREAM_IDLE_TIMEOUT_S": "1.5"},
    )  # fmt: skip
    yield s
    s.stop()


def _chat_stream(server: Server, tenant: str, collection: str, **claims: Any) -> Any:
    import httpx

    body = {
        "model": f"agentrag/{collection}",
        "stream": True,
        "messages": [{"role": "user", "content": "When does the cafeteria open?"}],
    }
    client = httpx.Client(base_url=server.url, timeout=30)
    return client, client.stream("POST", "/v1/chat/completions", json=body, headers=auth(tenant, **claims))


def test_f3_a_v1_stream_left_by_its_client_is_audited_and_frees_its_slot(
    llm_server: Server, stub: OpenAIStub, store: Any, hr: dict[str, Any]
) -> None:
    stub.reset()
    stub.enqueue(slow(1.0, "late"), slow(1.0, "late"))
    client, stream = _chat_stream(llm_server, hr["tenant"], hr["plain"])
    with client, stream as r:
        assert r.status_code == 200
        first = next(r.iter_lines())
        assert first.startswith("data: ") and json.loads(first[6:])["object"] == "chat.completion.chunk"
    rows = _audit_rows(store, hr["tenant"], 2)
    outcomes = [r.details.get("outcome") for r in rows if r.type == "REQUEST_OUTCOME"]
    retrieval = [r for r in rows if r.type == "RETRIEVAL_EXECUTED"]
    assert retrieval and retrieval[0].details["outcome"] == "streaming"
    assert outcomes == ["client_disconnected"]
    # the one stream slot is free again: the next stream is served, not 503
    client, stream = _chat_stream(llm_server, hr["tenant"], hr["plain"])
    with client, stream as r:
        assert r.status_code == 200
        r.read()


def test_a_stalled_stream_ends_at_the_idle_timeout_audited_and_frees_its_slot(
    llm_server: Server, stub: OpenAIStub, store: Any
) -> None:
    tenant = new_tenant(store, "gwidle")
    collection = f"gwidle_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection, tenant=tenant)
    store.ingest_text(OPEN, collection=collection, source="cafe.txt", tenant=tenant)
    stub.reset()
    stub.enqueue(slow(4.0, "far too late"))
    client, stream = _chat_stream(llm_server, tenant, collection)
    with client, stream as r:
        assert r.status_code == 200
        body = r.read().decode()
    assert '"code": "stream_idle"' in body
    outcomes = [
        r.details.get("outcome") for r in _audit_rows(store, tenant, 2) if r.type == "REQUEST_OUTCOME"
    ]
    assert outcomes == ["idle_timeout"]
    stub.reset()
    stub.enqueue(slow(0.1, "quick"))
    client, stream = _chat_stream(llm_server, tenant, collection)
    with client, stream as r:
        assert r.status_code == 200


# ---- F-7 ------------------------------------------------------------------------------------------
def test_f7_grants_work_through_v1(server: Server, hr: dict[str, Any]) -> None:
    def ask(**claims: Any) -> Any:
        chat = openai.OpenAI(
            base_url=server.url + "/v1", api_key=token(hr["tenant"], **claims), max_retries=0, timeout=60
        )
        return chat.chat.completions.create(
            model=f"agentrag/{hr['acl']}",
            messages=[{"role": "user", "content": "How are the Nightjar payroll bands set?"}],
        )

    granted = dict(ask(sub="bob", groups=["hr"]).model_extra or {})["agentrag"]
    assert SECRET in {c["text"] for c in granted["proof"]["chunks"]}
    denied = dict(ask(sub="eve").model_extra or {})["agentrag"]
    assert denied["proof"]["chunks"] == [] and SECRET not in json.dumps(denied)


async def test_f7_grants_work_through_mcp(server: Server, hr: dict[str, Any]) -> None:
    pytest.importorskip("mcp")
    from tests.test_mcp_server import over_http

    query = {"query": "Nightjar payroll bands", "collections": [hr["acl"]], "top_k": 3}
    async with over_http(server, token(hr["tenant"], sub="bob", groups=["hr"])) as client:
        found = await client.call_tool("search", query)
        assert not found.is_error, found.content
        assert SECRET in {r["text"] for r in found.structured_content["results"]}
        doc_id = found.structured_content["results"][0]["doc_id"]
        read = await client.call_tool("get_document", {"doc_id": doc_id})
        assert not read.is_error and read.structured_content["text"] == SECRET
    async with over_http(server, token(hr["tenant"], sub="eve")) as client:
        found = await client.call_tool("search", query)
        assert not found.is_error and found.structured_content["results"] == []
        read = await client.call_tool("get_document", {"doc_id": doc_id})
        assert read.is_error and SECRET not in str(read.content)


def test_f7_a_token_without_sub_searching_every_collection_is_answered(
    client: Any, hr: dict[str, Any]
) -> None:
    response = client.post(
        f"/api/v1/query/{hr['tenant']}/search",
        json={"query_text": "cafeteria breakfast payroll", "top_k": 10},
        headers=auth(hr["tenant"]),
    )
    assert response.status_code == 200, response.text
    proof = response.json()
    assert hr["acl"] in {s["collection"] for s in proof["skipped_collections"]}
    assert any(w.startswith(f"not searched: {hr['acl']}") for w in proof["warnings"])
    assert OPEN in {c["text"] for c in proof["chunks"]} and SECRET not in response.text


# ---- F-9 ------------------------------------------------------------------------------------------
def test_f9_models_are_admitted(client: Any, store: Any, hr: dict[str, Any]) -> None:
    suspended = client.get("/v1/models", headers=auth(hr["suspended"]))
    assert suspended.status_code == 403 and suspended.json()["error"]["code"] == "TENANT_SUSPENDED"
    unknown = client.get("/v1/models", headers=auth(f"nobody_{uuid.uuid4().hex[:6]}"))
    assert unknown.status_code == 404
    limited = new_tenant(store, "gwlim", rate_limit=1, rate_limit_period_s=3600)
    assert client.get("/v1/models", headers=auth(limited)).status_code == 200
    over = client.get("/v1/models", headers=auth(limited))
    assert over.status_code == 429 and over.headers["retry-after"]


def test_the_gateway_module_is_what_every_interface_imports() -> None:
    """The adapters hold no request path of their own: no authorize / admit / Scope building."""
    root = Path(__file__).resolve().parent.parent / "agentrag" / "server"
    for name in ("openai_chat.py", "mcp_server.py", "mcp_cli.py", "interfaces.py"):
        text = (root / name).read_text(encoding="utf-8")
        assert "authorize(" not in text and "ar.Scope(" not in text and "admit(" not in text, name
