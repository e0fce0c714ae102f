"""The gateway's conformance suite (issue #37): the same cases through every interface, one outcome
class each, every data-bearing response audited, no slot held after a disconnect.

Interfaces: the service's ``/search``, ``/ask`` (JSON and SSE), ``/v1/chat/completions`` (plain and
streaming, through the ``openai`` client), ``/v1/models``, MCP over HTTP and over stdio (the ``mcp``
SDK's client), the playground's calls (its ask, as ``playground.js`` sends it), the LangGraph
subgraph. Cases: no token, a forged token, a suspended tenant, another tenant's token, a principal
without the grant, one with it, a client that leaves mid-stream, PostgreSQL stopped.

One ``agentrag serve`` process (real HTTP) on the session's database through a TCP proxy
(tests/chaos_support.PgProxy): stopping the proxy is, for the server, PostgreSQL stopped. Cases an
interface has no place for (a token over stdio or in a graph's config: their caller is the
process's own; a disconnect from a one-shot response) are skipped, saying so.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.server_support import SECRET as JWT_SECRET
from tests.server_support import Server, audit_of, new_tenant, start_server, token

openai = pytest.importorskip("openai")
pytest.importorskip("mcp")

REPO = Path(__file__).resolve().parent.parent
SECRET = "The Nightjar launch code word is HELIOTROPE, set by the review board."
QUESTION = "What is the Nightjar launch code word?"
INTERFACES = [
    "search", "ask", "ask_sse", "chat", "chat_stream", "models", "mcp_http", "mcp_stdio",
    "playground", "langgraph",
]  # fmt: skip
STREAMING = {"ask_sse", "chat_stream", "playground"}
LOCAL = {"mcp_stdio", "langgraph"}  # no token: the caller is the process's (its flags, its config)
UNAUTHENTICATED, REFUSED, DATA, NO_DATA, LISTED, UNAVAILABLE = (
    "unauthenticated", "refused", "data", "no_data", "listed", "unavailable",
)  # fmt: skip


@dataclass
class Outcome:
    kind: str
    text: str = ""
    query_id: str | None = None


@dataclass
class World:
    server: Server
    proxy: Any
    url: str  # the proxied database, as the server sees it
    tenant: str
    other: str
    suspended: str
    collection: str


@pytest.fixture(scope="module")
def world(database_url: str, store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from agentrag.server.tenants import set_state
    from tests.chaos_support import PgProxy

    tenant, other, suspended = new_tenant(store, "cf"), new_tenant(store, "cfo"), new_tenant(store, "cfs")
    set_state(store.engine, suspended, "SUSPENDED")
    collection = f"cf_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection, acl=True, tenant=tenant)
    store.ingest_text(SECRET, collection=collection, source="nightjar.md", tenant=tenant, grants=["group:hr"])
    proxy = PgProxy(database_url)
    server = start_server(proxy.url, tmp_path_factory.mktemp("conformance"), "--max-in-flight", "6")
    try:
        yield World(server, proxy, proxy.url, tenant, other, suspended, collection)
    finally:
        server.stop()
        proxy.close()


# ---- who asks, per case -------------------------------------------------------------------------------
def who(world: World, case: str) -> dict[str, Any]:
    """The case's caller: a token (None: none) over HTTP; tenant, user and groups for the local ones."""
    grant = {"sub": "bob", "groups": ["hr"]}
    tenant, claims, secret = world.tenant, grant, JWT_SECRET
    if case == "suspended":
        tenant = world.suspended
    elif case == "other_tenant":
        tenant = world.other
    elif case == "without_grant":
        claims = {"sub": "eve"}
    elif case == "forged":
        secret = "forged-" + "q" * 40
    key = None if case == "no_token" else token(tenant, secret=secret, **claims)
    return {"token": key, "tenant": tenant, "user": claims["sub"], "groups": claims.get("groups", [])}


def kind_of_status(status: int) -> str:
    if status == 401:
        return UNAUTHENTICATED
    if status == 503:
        return UNAVAILABLE
    return REFUSED if 400 <= status < 500 else f"status {status}"


def has_secret(text: str) -> str:
    return DATA if "HELIOTROPE" in text else NO_DATA


# ---- the interfaces ----------------------------------------------------------------------------------
def call(world: World, interface: str, case: str, *, disconnect: bool = False, outage: Any = None) -> Outcome:
    """One call of ``interface`` in ``case``; ``outage()`` (PostgreSQL stopped) runs just before the
    call is sent, once a local interface is up (its store connects when it starts)."""
    caller = who(world, case)
    if interface in LOCAL:
        return LOCAL_CALLS[interface](world, caller, outage or (lambda: None))
    if outage is not None:
        outage()
    return HTTP_CALLS[interface](world, caller, disconnect)


def _headers(caller: dict[str, Any], **extra: str) -> dict[str, str]:
    return ({"Authorization": f"Bearer {caller['token']}"} if caller["token"] else {}) | extra


def _service(world: World, caller: dict[str, Any], disconnect: bool, route: str, sse: bool) -> Outcome:
    import httpx

    body = {"query_text": QUESTION, "collections": [world.collection], "top_k": 3}
    headers = _headers(caller, **({"Accept": "text/event-stream"} if sse else {}))
    url = f"/api/v1/query/{world.tenant}/{route}"
    with httpx.Client(base_url=world.server.url, timeout=30) as client:
        if not sse:
            r = client.post(url, json=body, headers=headers)
            if r.status_code != 200:
                return Outcome(kind_of_status(r.status_code), r.text)
            return Outcome(has_secret(r.text), r.text, r.json()["query_id"])
        with client.stream("POST", url, json=body, headers=headers) as r:
            if r.status_code != 200:
                return Outcome(kind_of_status(r.status_code), r.read().decode())
            lines = []
            for line in r.iter_lines():
                lines.append(line)
                if disconnect and line.startswith("data: "):
                    break  # the client leaves after the first event
    text = "\n".join(lines)
    first = json.loads(next(x for x in lines if x.startswith("data: "))[6:])
    return Outcome(has_secret(text), text, first["query_id"])


def _openai_client(world: World, caller: dict[str, Any]) -> Any:
    """The ``openai`` client with the case's token as its key (none: the header is removed as sent)."""
    import httpx

    def strip(request: Any) -> None:
        if not caller["token"]:
            request.headers.pop("Authorization", None)

    return openai.OpenAI(
        base_url=world.server.url + "/v1",
        api_key=caller["token"] or "none",
        http_client=httpx.Client(event_hooks={"request": [strip]}, timeout=30),
        max_retries=0,
    )


def _openai(world: World, caller: dict[str, Any], disconnect: bool, *, stream: bool) -> Outcome:
    client = _openai_client(world, caller)
    model = f"agentrag/{world.collection}"
    messages = [{"role": "user", "content": QUESTION}]
    try:
        if not stream:
            reply = client.chat.completions.create(model=model, messages=messages)
            extra = dict(reply.model_extra or {})["agentrag"]
            text = json.dumps(extra) + (reply.choices[0].message.content or "")
            return Outcome(has_secret(text), text, extra["query_id"])
        pieces, query_id = [], None
        with client.chat.completions.create(model=model, messages=messages, stream=True) as events:
            for event in events:
                query_id = event.id.removeprefix("chatcmpl-")
                pieces.append(event.model_dump_json())
                if disconnect:
                    break
        text = "".join(pieces)
        return Outcome(NO_DATA if disconnect else has_secret(text), text, query_id)
    except openai.APIStatusError as exc:
        return Outcome(kind_of_status(exc.status_code), str(exc.body))


def _models(world: World, caller: dict[str, Any], disconnect: bool) -> Outcome:
    client = _openai_client(world, caller)
    try:
        ids = [m.id for m in client.models.list()]
    except openai.APIStatusError as exc:
        return Outcome(kind_of_status(exc.status_code), str(exc.body))
    return Outcome(LISTED, json.dumps(ids))


def _playground(world: World, caller: dict[str, Any], disconnect: bool) -> Outcome:
    """The playground's ask, as playground.js sends it (fetch, Accept: text/event-stream)."""
    import httpx

    body = {
        "model": f"agentrag/{world.collection}", "stream": True, "top_k": 5, "mode": "hybrid",
        "messages": [{"role": "user", "content": QUESTION}],
    }  # fmt: skip
    headers = _headers(caller, **{"Content-Type": "application/json", "Accept": "text/event-stream"})
    with (
        httpx.Client(base_url=world.server.url, timeout=30) as client,
        client.stream("POST", "/v1/chat/completions", content=json.dumps(body), headers=headers) as r,
    ):
        if r.status_code != 200:
            return Outcome(kind_of_status(r.status_code), r.read().decode())
        lines = []
        for line in r.iter_lines():
            lines.append(line)
            if disconnect and line.startswith("data: "):
                break
    text = "\n".join(lines)
    query_id = json.loads(lines[0][6:])["id"].removeprefix("chatcmpl-")
    return Outcome(NO_DATA if disconnect else has_secret(text), text, query_id)


def _mcp_http(world: World, caller: dict[str, Any], disconnect: bool) -> Outcome:
    statuses: list[int] = []  # the HTTP answers the SDK got (it raises without naming a refusal's status)

    async def record(response: Any) -> None:
        statuses.append(response.status_code)

    async def go() -> Outcome:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        hooks = {"response": [record]}
        async with (
            httpx2.AsyncClient(headers=_headers(caller), timeout=30, event_hooks=hooks) as http,
            Client(streamable_http_client(world.server.url + "/mcp", http_client=http)) as client,
        ):
            found = await client.call_tool("search", {"query": QUESTION, "collections": [world.collection]})
        text = found.content[0].text if found.content else ""
        if found.is_error:
            return Outcome(UNAVAILABLE if "UNAVAILABLE" in text else REFUSED, text)
        return Outcome(has_secret(text), text, found.structured_content["query_id"])

    try:
        return asyncio.run(go())
    except BaseException as exc:  # the SDK raises on an HTTP refusal: its status is the outcome
        refused = [s for s in statuses if s >= 400]
        if not refused:
            raise
        return Outcome(kind_of_status(refused[0]), repr(exc))


def _mcp_stdio(world: World, caller: dict[str, Any], outage: Any) -> Outcome:
    async def go() -> Outcome:
        from mcp import Client, StdioServerParameters

        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRAG_JWT")}
        env.update(AGENTRAG_DATABASE_URL=world.url, PYTHONPATH=str(REPO))
        groups = [f"--group={g}" for g in caller["groups"]]
        flags = ["--tenant", caller["tenant"], "--user", caller["user"], *groups]
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "agentrag", "mcp", "--embedder", "fake:64", *flags],
            env=env,
            cwd=str(REPO),
        )
        async with Client(params, read_timeout_seconds=60) as client:
            outage()
            found = await client.call_tool("search", {"query": QUESTION, "collections": [world.collection]})
        text = found.content[0].text if found.content else ""
        if found.is_error:
            return Outcome(UNAVAILABLE if "UNAVAILABLE" in text else REFUSED, text)
        return Outcome(has_secret(text), text, found.structured_content["query_id"])

    return asyncio.run(go())


def _langgraph(world: World, caller: dict[str, Any], outage: Any) -> Outcome:
    import agentrag as ar
    from agentrag.integrations.langgraph import rag_subgraph
    from agentrag.testing import FakeEmbedder

    store = ar.Store(world.url, embedder=FakeEmbedder(64))
    try:
        graph = rag_subgraph(store, config={"collections": [world.collection], "abstain": False})
        configurable = {"tenant_id": caller["tenant"], "user_id": caller["user"], "groups": caller["groups"]}
        outage()
        try:
            out = graph.invoke({"messages": [("user", QUESTION)]}, config={"configurable": configurable})
        except ar.DatabaseUnavailableError as exc:  # typed: the graph's caller knows to retry
            return Outcome(UNAVAILABLE, repr(exc))
    finally:
        store.close()
    text = json.dumps(out, default=str)
    if out["rag_mode"] == "failed":
        reason = out["rag_skipped_reason"] or ""
        down = "Unavailable" in reason or "OperationalError" in reason or "every search failed" in reason
        return Outcome(UNAVAILABLE if down else REFUSED, text)
    return Outcome(has_secret(text), text, (out["rag_proof"] or {}).get("query_id"))


HTTP_CALLS: dict[str, Any] = {
    "search": lambda w, c, d: _service(w, c, d, "search", sse=False),
    "ask": lambda w, c, d: _service(w, c, d, "ask", sse=False),
    "ask_sse": lambda w, c, d: _service(w, c, d, "ask", sse=True),
    "chat": lambda w, c, d: _openai(w, c, d, stream=False),
    "chat_stream": lambda w, c, d: _openai(w, c, d, stream=True),
    "models": _models,
    "mcp_http": _mcp_http,
    "playground": _playground,
}
LOCAL_CALLS: dict[str, Any] = {"mcp_stdio": _mcp_stdio, "langgraph": _langgraph}

# ---- the cases ---------------------------------------------------------------------------------------
EXPECTED = {
    "no_token": UNAUTHENTICATED,
    "forged": UNAUTHENTICATED,
    "suspended": REFUSED,
    # another tenant's collection is unknown to it (404); the path's tenant is not its own (403)
    "other_tenant": REFUSED,
    "without_grant": NO_DATA,
    "with_grant": DATA,
}


@pytest.mark.parametrize("case", list(EXPECTED))
@pytest.mark.parametrize("interface", INTERFACES)
def test_every_interface_gives_the_same_outcome(world: World, store: Any, interface: str, case: str) -> None:
    if interface in LOCAL and case in ("no_token", "forged", "suspended"):
        pytest.skip(f"{interface} takes no token: its caller is the process's own")
    outcome = call(world, interface, case)
    expected = EXPECTED[case]
    if interface == "models" and (expected in (DATA, NO_DATA) or case == "other_tenant"):
        expected = LISTED  # a listing bears names, not documents: the other tenant's lists its own
    assert outcome.kind == expected, outcome.text[:500]
    if case != "with_grant":
        assert "HELIOTROPE" not in outcome.text
    if interface == "models" and case == "other_tenant":
        assert world.collection not in outcome.text
    if outcome.kind == DATA and interface not in LOCAL:  # every data-bearing response has its audit row
        assert outcome.query_id and audit_of(store.engine, outcome.query_id, 1), interface


@pytest.mark.parametrize("interface", sorted(STREAMING))
def test_a_client_that_leaves_mid_stream_leaves_its_audit_rows_and_no_slot(
    world: World, store: Any, interface: str
) -> None:
    from agentrag.server.tenants import list_audit

    for _ in range(4):  # more than the server's 3 stream slots (--max-in-flight 6): none may stay held
        outcome = call(world, interface, "with_grant", disconnect=True)
        assert outcome.query_id, outcome.text[:300]
        deadline = time.monotonic() + 15
        while True:
            rows = list_audit(store.engine, query_id=outcome.query_id)
            ends = [r.details.get("outcome") for r in rows if r.type == "REQUEST_OUTCOME"]
            if ends or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert [r.details["outcome"] for r in rows if r.type == "RETRIEVAL_EXECUTED"] == ["streaming"]
        assert ends and ends[0] in ("client_disconnected", "completed")
    assert call(world, interface, "with_grant").kind == DATA  # a slot is free


def test_no_slot_is_held_after_the_streams_ended(world: World) -> None:
    """As many requests at once as the server admits are all served (a leaked slot would 503 one)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        kinds = list(pool.map(lambda i: call(world, "ask_sse", "with_grant").kind, range(3)))
    assert kinds == [DATA] * 3


@pytest.mark.parametrize("interface", INTERFACES)
def test_postgresql_stopped_is_unavailable_everywhere(world: World, interface: str) -> None:
    import httpx

    try:
        outcome = call(world, interface, "with_grant", outage=world.proxy.stop)
    finally:
        world.proxy.start()
    assert outcome.kind == UNAVAILABLE, outcome.text[:500]
    if interface in ("chat", "models"):  # in the protocol's own error object
        assert "'type': 'api_error'" in outcome.text and "DATABASE_UNAVAILABLE" in outcome.text
    headers = {"Authorization": f"Bearer {token(world.tenant, sub='bob', groups=['hr'])}"}
    body = {"query_text": "x", "collections": [world.collection]}
    deadline = time.monotonic() + 30
    with httpx.Client(base_url=world.server.url, timeout=30, headers=headers) as client:
        while client.post(f"/api/v1/query/{world.tenant}/search", json=body).status_code != 200:
            assert time.monotonic() < deadline, "no recovery within 30 s"
            time.sleep(0.1)
