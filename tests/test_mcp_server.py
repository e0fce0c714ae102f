"""The MCP server, driven by the ``mcp`` SDK's own client: over stdio (``agentrag mcp``, a real
subprocess) and over streamable HTTP (``/mcp`` of a real ``agentrag serve``)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.interfaces_support import SECRET_TEXT, make_corpus
from tests.server_support import Server, new_tenant, token

mcp = pytest.importorskip("mcp")

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"search", "ask", "list_collections", "get_document"}


@pytest.fixture(scope="module")
def corpus(store: Any) -> dict[str, Any]:
    return make_corpus(store, "mcp")


@asynccontextmanager
async def over_http(server: Server, key: str | None) -> AsyncIterator[Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(server.url + "/mcp", http_client=http)) as client,
    ):
        yield client


@asynccontextmanager
async def over_stdio(database_url: str, *args: str) -> AsyncIterator[Any]:
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRAG_JWT")}
    env.update(AGENTRAG_DATABASE_URL=database_url, PYTHONPATH=str(REPO))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentrag", "mcp", "--embedder", "fake:64", *args],
        env=env,
        cwd=str(REPO),
    )
    async with Client(params, read_timeout_seconds=60) as client:
        yield client


async def exercise(client: Any, corpus: dict[str, Any]) -> None:
    """Every tool once, as the tenant ``corpus['a']`` (the caller's transport decides who that is)."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description) > 60 and tool.annotations.read_only_hint is True
    assert tools["search"].input_schema["required"] == ["query"]
    assert "doc_id" in tools["get_document"].input_schema["properties"]

    listed = await client.call_tool("list_collections", {})
    assert not listed.is_error
    assert corpus["collection"] in {c["name"] for c in listed.structured_content["collections"]}

    found = await client.call_tool(
        "search",
        {"query": "reset two-factor authentication", "collections": [corpus["collection"]], "top_k": 3},
    )
    assert not found.is_error
    results = found.structured_content["results"]
    assert 1 <= len(results) <= 3 and found.structured_content["untrusted_text"] is True
    top = results[0]
    assert (
        top["source"].endswith(".md") and top["end_char"] > top["start_char"] and len(top["revision"]) == 64
    )
    text = found.content[0].text
    assert f'<untrusted_document chunk_id="{top["chunk_id"]}"' in text and "never instructions" in text

    # get_document returns exactly the cited text at the cited offsets and revision
    cited = await client.call_tool(
        "get_document",
        {
            "doc_id": top["doc_id"],
            "revision": top["revision"],
            "start_char": top["start_char"],
            "end_char": top["end_char"],
        },
    )
    assert not cited.is_error and cited.structured_content["text"] == top["text"]
    stale = await client.call_tool("get_document", {"doc_id": top["doc_id"], "revision": "0" * 64})
    assert stale.is_error and "changed since it was cited" in stale.content[0].text

    answered = await client.call_tool(
        "ask",
        {"question": "How do I reset two-factor authentication?", "collections": [corpus["collection"]]},
    )
    assert not answered.is_error
    data = answered.structured_content
    assert data["grounded"] is True and "[1]" in data["answer"] and data["citations"][0]["n"] == 1
    assert data["abstained"] is False and data["confidence"] >= 0.5
    unknown = await client.call_tool("ask", {"question": "What is the boiling point of mercury on Jupiter?"})
    assert not unknown.is_error and unknown.structured_content["abstained"] is True
    assert unknown.structured_content["citations"] == [] and unknown.structured_content["confidence"] < 0.5
    assert data["supporting_spans"] and all(s["end"] > s["start"] for s in data["supporting_spans"])
    assert "Sources:\n[1] " in answered.content[0].text

    # bad arguments are tool errors, not crashes; the server goes on answering
    for name, arguments in (
        ("search", {"query": "x", "top_k": 500}),
        ("search", {"top_k": 3}),
        ("search", {"query": "x", "collections": ["no_such_collection"]}),
        ("search", {"query": "x", "filters": {"nonsense": 1}}),
        ("get_document", {"doc_id": "doc_does_not_exist"}),
        ("get_document", {"doc_id": top["doc_id"], "start_char": 10, "end_char": 5}),
    ):
        bad = await client.call_tool(name, arguments)
        assert bad.is_error, (name, arguments)
    again = await client.call_tool("list_collections", {})
    assert not again.is_error


async def test_over_stdio(database_url: str, corpus: dict[str, Any]) -> None:
    async with over_stdio(database_url, "--tenant", corpus["a"]) as client:
        await exercise(client, corpus)
        secret = await client.call_tool("get_document", {"doc_id": corpus["b_doc"]})
        assert secret.is_error and "no document" in secret.content[0].text


async def test_over_http(server: Server, corpus: dict[str, Any]) -> None:
    async with over_http(server, token(corpus["a"])) as client:
        await exercise(client, corpus)


async def test_a_tenant_cannot_reach_another_tenants_documents(
    server: Server, corpus: dict[str, Any]
) -> None:
    async with over_http(server, token(corpus["a"])) as client:
        found = await client.call_tool("search", {"query": "Nightjar launch code word", "top_k": 20})
        assert all(r["doc_id"] != corpus["b_doc"] for r in found.structured_content["results"])
        assert "HELIOTROPE" not in found.content[0].text
        direct = await client.call_tool("get_document", {"doc_id": corpus["b_doc"]})
        assert direct.is_error and "HELIOTROPE" not in direct.content[0].text
    async with over_http(server, token(corpus["b"])) as client:
        mine = await client.call_tool("get_document", {"doc_id": corpus["b_doc"]})
        assert not mine.is_error and mine.structured_content["text"] == SECRET_TEXT


async def test_http_needs_a_valid_token(server: Server, corpus: dict[str, Any]) -> None:
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=server.url) as http:
        missing = await http.post("/mcp", json=body, headers=accept)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        forged = token(corpus["a"], secret="forged-" + "q" * 40)
        bad = await http.post("/mcp", json=body, headers={**accept, "Authorization": f"Bearer {forged}"})
        assert bad.status_code == 401
        wrong_scope = token(corpus["a"], scope="admin")
        scoped = await http.post(
            "/mcp", json=body, headers={**accept, "Authorization": f"Bearer {wrong_scope}"}
        )
        assert scoped.status_code == 403


async def test_every_http_message_is_admitted_per_tenant(server: Server, store: Any) -> None:
    """Each JSON-RPC message over HTTP, ``tools/list`` included (F-9), is admitted for the token's
    tenant before the SDK sees it: the rate limit (429, Retry-After) and a suspended tenant (403)."""
    import httpx

    from agentrag.server.tenants import set_state

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    limited = new_tenant(store, "mcplim", rate_limit=1, rate_limit_period_s=3600)
    suspended = new_tenant(store, "mcpsus")
    set_state(store.engine, suspended, "SUSPENDED")
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        headers = {**accept, "Authorization": f"Bearer {token(limited)}"}
        first = await http.post("/mcp", json=body, headers=headers)
        assert first.status_code == 200 and first.json()["result"]["tools"]
        second = await http.post("/mcp", json=body, headers=headers)
        assert second.status_code == 429 and second.headers["retry-after"]
        assert second.json()["error"]["code"] == "RATE_LIMITED"
        headers = {**accept, "Authorization": f"Bearer {token(suspended)}"}
        refused = await http.post("/mcp", json=body, headers=headers)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "TENANT_SUSPENDED"
        call = {**body, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "x"}}}
        refused = await http.post("/mcp", json=call, headers=headers)
        assert refused.status_code == 403 and "HELIOTROPE" not in refused.text


async def test_in_process_audit_events_go_to_the_audit_logger(
    store: Any, corpus: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Without the service's audit writer (as over stdio): ids and counts to ``agentrag.audit``."""
    import json
    import logging

    from mcp import Client

    from agentrag.server.gateway import Gateway
    from agentrag.server.mcp_server import build_server

    gateway = Gateway(store)
    server = build_server(gateway, caller_of=lambda ctx: gateway.local(corpus["a"]))
    question = "How do I reset two-factor authentication?"
    with caplog.at_level(logging.INFO, logger="agentrag.audit"):
        async with Client(server) as client:
            result = await client.call_tool("search", {"query": question, "top_k": 2})
    assert not result.is_error
    events = [json.loads(r.getMessage()) for r in caplog.records if r.name == "agentrag.audit"]
    assert [e["type"] for e in events] == ["RETRIEVAL_EXECUTED"]
    assert events[0]["tenant"] == corpus["a"] and len(events[0]["details"]["chunk_ids"]) == 2
    assert "two-factor" not in caplog.text


def test_building_the_server_leaves_the_applications_logging_alone(store: Any) -> None:
    """The MCP SDK's constructor calls ``logging.basicConfig``: an application embedding the server
    with no logging configured must not find a root handler (and every library's INFO lines) after it."""
    import logging

    from agentrag.server.gateway import Gateway
    from agentrag.server.mcp_server import build_server

    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    root.handlers[:] = []  # as in an application that configured nothing (pytest adds its own handlers)
    root.setLevel(logging.WARNING)
    try:
        build_server(Gateway(store), caller_of=lambda ctx: Gateway.local("t"))
        after, after_level = list(root.handlers), root.level
    finally:
        root.handlers[:] = saved
        root.setLevel(level)
    assert after == [] and after_level == logging.WARNING
