"""The serving API over real HTTP: the seed's request flow, every failure row, proof, audit, SSE, spans."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from tests.server_support import Server, audit_of, auth, new_tenant, token

DOCS = {
    "pay": "The payment terms specify net-30 days for every invoice. Late payments accrue interest monthly.",
    "pto": "Employees receive twenty days of paid leave per year. Unused leave carries over once.",
    "sec": "Passwords rotate every ninety days. Two-factor authentication is mandatory for admins.",
}


@pytest.fixture(scope="module")
def corpus(store: Any) -> dict[str, Any]:
    """Two tenants' documents in one collection, plus tenants in every state the flow needs."""
    collection = f"srv_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection)
    a = new_tenant(store, "a", retrieval_top_k_max=10)
    b = new_tenant(store, "b")
    for key, text in DOCS.items():
        store.ingest_text(text, collection=collection, source=f"{key}.txt", tenant=a, metadata={})
    store.ingest_text(
        "The payment terms of tenant B are secret: net-90.", collection=collection, source="b.txt", tenant=b
    )
    docs = {d.id: d for d in store.documents(collection, tenant=a)}
    return {"collection": collection, "a": a, "b": b, "docs": docs}


def body(corpus: dict[str, Any], query: str = "What are the payment terms?", **extra: Any) -> dict[str, Any]:
    return {"query_text": query, "collections": [corpus["collection"]], **extra}


def search(client: Any, tenant: str, payload: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    return client.post(
        f"/api/v1/query/{tenant}/search", json=payload, headers=auth(tenant) if headers is None else headers
    )


def error_of(response: Any) -> dict[str, Any]:
    data = response.json()
    assert set(data) == {"error"}, data
    assert isinstance(data["error"]["code"], str) and isinstance(data["error"]["message"], str)
    return data["error"]


# ---- the happy path: steps 5-10 -------------------------------------------------------------------
def test_search_returns_a_verifiable_retrieval_proof(client: Any, corpus: dict[str, Any], store: Any) -> None:
    r = search(client, corpus["a"], body(corpus, top_k=2, mode="hybrid"))
    assert r.status_code == 200, r.text
    proof = r.json()
    assert proof["tenant_id"] == corpus["a"] and proof["model_version_match"] is True
    assert proof["warnings"] == [] and proof["generation"] is None
    assert 1 <= len(proof["chunks"]) <= 2
    top = proof["chunks"][0]
    assert top["doc_id"] in corpus["docs"] and "net-30" in top["text"]
    document = store.document(top["doc_id"])
    assert document.text[top["start_char"] : top["end_char"]] == top["text"]
    assert hashlib.sha256(document.text.encode()).hexdigest() == top["source_sha256"]
    assert top["embed_model"] == "fake-hashing" and top["embed_version"] == "1"
    assert r.headers["x-request-id"]


def test_search_applies_filters_and_modes(client: Any, corpus: dict[str, Any]) -> None:
    pto = next(d for d in corpus["docs"].values() if d.source == "pto.txt")
    for mode in ("hybrid", "vector", "lexical", "lexical_sql"):
        payload = body(corpus, "How many days of paid leave?", mode=mode, filters={"doc_ids": [pto.id]})
        r = search(client, corpus["a"], payload)
        assert r.status_code == 200, r.text
        assert {c["doc_id"] for c in r.json()["chunks"]} == {pto.id}, mode
    r = search(client, corpus["a"], body(corpus, filters={"date_range": {"start": "2999-01-01"}}))
    assert r.status_code == 200 and r.json()["chunks"] == []


def test_retrieval_is_audited_with_ids_and_latency_never_text(
    client: Any, corpus: dict[str, Any], store: Any
) -> None:
    r = search(client, corpus["a"], body(corpus))
    proof = r.json()
    rows = audit_of(store.engine, proof["query_id"], 1)
    assert [row.type for row in rows] == ["RETRIEVAL_EXECUTED"]
    row = rows[0]
    assert row.tenant_id == corpus["a"] and row.latency_ms is not None and row.latency_ms > 0
    assert row.details["chunk_ids"] == [c["chunk_id"] for c in proof["chunks"]]
    assert row.details["chunk_count"] == len(proof["chunks"])
    assert row.details["model_version_match"] is True
    assert "payment" not in json.dumps(row.details).lower()


def test_ask_answers_citing_only_retrieved_chunks_and_audits_generation(
    client: Any, corpus: dict[str, Any], store: Any
) -> None:
    r = client.post(f"/api/v1/query/{corpus['a']}/ask", json=body(corpus), headers=auth(corpus["a"]))
    assert r.status_code == 200, r.text
    proof = r.json()
    generation = proof["generation"]
    assert generation["answer"] and generation["cited_chunks"]
    assert set(generation["cited_chunks"]) <= {c["chunk_id"] for c in proof["chunks"]}
    assert generation["ungrounded_claims"] == []
    types = sorted(row.type for row in audit_of(store.engine, proof["query_id"], 2))
    assert types == ["GENERATION_EXECUTED", "RETRIEVAL_EXECUTED"]


def test_ask_streams_server_sent_events_ending_with_checked_citations(
    client: Any, corpus: dict[str, Any]
) -> None:
    headers = {**auth(corpus["a"]), "Accept": "text/event-stream"}
    with client.stream("POST", f"/api/v1/query/{corpus['a']}/ask", json=body(corpus), headers=headers) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = []
    for block in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    names = [name for name, _ in events]
    assert names[0] == "retrieval" and names[-2:] == ["citations", "done"]
    assert "token" in names
    retrieved = {c["chunk_id"] for c in events[0][1]["chunks"]}
    citations = events[-2][1]["generation"]
    assert citations["cited_chunks"] and set(citations["cited_chunks"]) <= retrieved
    streamed = "".join(data["text"] for name, data in events if name == "token")
    assert streamed.strip()


def test_ask_abstains_on_an_out_of_domain_question_in_json_and_sse(
    client: Any, corpus: dict[str, Any]
) -> None:
    payload = body(corpus, query="What is the capital of France?")
    r = client.post(f"/api/v1/query/{corpus['a']}/ask", json=payload, headers=auth(corpus["a"]))
    assert r.status_code == 200, r.text
    generation = r.json()["generation"]
    assert generation["mode"] == "abstained" and generation["grounded"] is False
    assert generation["cited_chunks"] == [] and generation["confidence"] < 0.6
    assert generation["answer"].startswith("The knowledge base does not seem to cover this question")
    headers = {**auth(corpus["a"]), "Accept": "text/event-stream"}
    with client.stream("POST", f"/api/v1/query/{corpus['a']}/ask", json=payload, headers=headers) as r:
        raw = r.read().decode()
    events = [dict(line.split(": ", 1) for line in block.splitlines()) for block in raw.strip().split("\n\n")]
    streamed = json.loads(next(e["data"] for e in events if e["event"] == "citations"))["generation"]
    assert streamed["mode"] == "abstained" and streamed["grounded"] is False and streamed["confidence"] < 0.6


def test_ask_returns_the_support_span_of_each_answer_sentence(client: Any, corpus: dict[str, Any]) -> None:
    r = client.post(f"/api/v1/query/{corpus['a']}/ask", json=body(corpus), headers=auth(corpus["a"]))
    generation = r.json()["generation"]
    assert generation["confidence"] >= 0.6 and generation["support"]
    span = generation["support"][0]
    assert span["supported"] is True and span["chunk_id"] in generation["cited_chunks"]
    assert span["text"] in DOCS["pay"] and span["end"] > span["start"]


def test_model_version_mismatch_is_flagged_with_a_warning(client: Any, store: Any, database_url: str) -> None:
    import agentrag as ar
    from agentrag.testing import FakeEmbedder

    old = FakeEmbedder(64, version="0")  # same model, older version than the server's
    collection = f"old_{uuid.uuid4().hex[:8]}"
    tenant = new_tenant(store)
    with ar.Store(database_url, embedder=old) as indexer:
        indexer.create_collection(collection)
        indexer.ingest_text(
            "Quarterly revenue grew by nine percent.", collection=collection, source="q", tenant=tenant
        )
    r = search(client, tenant, {"query_text": "revenue growth", "collections": [collection]})
    assert r.status_code == 200, r.text
    assert r.json()["model_version_match"] is False
    assert any("model_version_match is false" in w for w in r.json()["warnings"])


# ---- the failure rows -----------------------------------------------------------------------------
def test_step_1_authentication_failures_are_401(client: Any, corpus: dict[str, Any]) -> None:
    a = corpus["a"]
    for headers in (
        {},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer not.a.token"},
        {"Authorization": f"Bearer {token(a, secret='another-secret-' + 'y' * 40)}"},
        {"Authorization": f"Bearer {token(a, exp=-60)}"},
    ):
        r = search(client, a, body(corpus), headers)
        assert r.status_code == 401, (headers, r.text)
        assert error_of(r)["code"] == "UNAUTHENTICATED"
        assert r.headers["www-authenticate"] == "Bearer"


def test_step_2_scope_and_tenant_mismatch_are_403(client: Any, corpus: dict[str, Any]) -> None:
    a, b = corpus["a"], corpus["b"]
    r = search(client, a, body(corpus), auth(a, scope="ingest admin"))
    assert r.status_code == 403 and error_of(r)["code"] == "INSUFFICIENT_SCOPE"
    r = search(client, a, body(corpus), auth(b))
    assert r.status_code == 403 and error_of(r)["code"] == "TENANT_MISMATCH"


def test_step_3_suspended_tenant_is_403_and_unknown_tenant_404(
    client: Any, store: Any, corpus: dict[str, Any]
) -> None:
    from agentrag.server.tenants import set_state

    tenant = new_tenant(store)
    payload = body(corpus, "anything")
    assert search(client, tenant, payload).status_code == 200
    set_state(store.engine, tenant, "SUSPENDED")
    r = search(client, tenant, payload)
    assert r.status_code == 403 and error_of(r)["code"] == "TENANT_SUSPENDED"
    set_state(store.engine, tenant, "ACTIVE")
    assert search(client, tenant, payload).status_code == 200
    r = search(client, "nobody_here", payload)
    assert r.status_code == 404 and error_of(r)["code"] == "TENANT_NOT_FOUND"


def test_step_4_rate_limit_is_429_with_retry_after(client: Any, store: Any, corpus: dict[str, Any]) -> None:
    tenant = new_tenant(store, rate_limit=3, rate_limit_period_s=600)
    statuses = [search(client, tenant, body(corpus, "hello")).status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    r = search(client, tenant, body(corpus, "hello"))
    assert error_of(r)["code"] == "RATE_LIMITED"
    assert 150 <= int(r.headers["retry-after"]) <= 201  # one slot per 200 s


def test_step_5_embedding_failure_is_500_without_details(client: Any, store: Any) -> None:
    from agentrag.testing import FakeEmbedder

    collection = f"dims_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection, embedder=FakeEmbedder(16, model_id="other-model"))
    tenant = new_tenant(store)
    r = search(client, tenant, {"query_text": "x", "collections": [collection], "mode": "vector"})
    assert r.status_code == 500
    err = error_of(r)
    assert err["code"] == "EMBEDDING_FAILED" and err["message"] == "retrieval failed"
    assert "Traceback" not in r.text and "SELECT" not in r.text


def test_unknown_collection_is_404(client: Any, corpus: dict[str, Any]) -> None:
    r = search(client, corpus["a"], {"query_text": "x", "collections": ["no_such_collection"]})
    assert r.status_code == 404
    assert error_of(r)["code"] == "COLLECTION_NOT_FOUND"


def test_body_too_large_is_413(client: Any, corpus: dict[str, Any]) -> None:
    payload = body(corpus, filters={"doc_ids": ["d" * 900] * 90})  # ~ 83 KB
    r = search(client, corpus["a"], payload)
    assert r.status_code == 413 and error_of(r)["code"] == "BODY_TOO_LARGE"

    def chunked() -> Any:  # no Content-Length: the limit applies while the body is read
        data = json.dumps(payload).encode()
        for i in range(0, len(data), 4096):
            yield data[i : i + 4096]

    headers = {**auth(corpus["a"]), "Content-Type": "application/json"}
    r = client.post(f"/api/v1/query/{corpus['a']}/search", content=chunked(), headers=headers)
    assert r.status_code == 413 and error_of(r)["code"] == "BODY_TOO_LARGE"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"query_text": "x", "unexpected": 1}, None),  # an unknown key is never echoed
        ({"query_text": "x", "filters": {"tier": "gold"}}, "filters"),
        ({"query_text": "x", "top_k": 11}, "top_k"),  # over the tenant's retrieval_top_k_max (10)
        ({"query_text": "x", "top_k": 0}, "top_k"),
        ({"query_text": "x", "mode": "semantic"}, "mode"),
        ({"query_text": "   "}, "query_text"),
        ({"query_text": "a\x00b"}, "query_text"),
        ({}, "query_text"),
        ({"query_text": "x", "filters": {"date_range": {"start": "2024-13-01"}}}, "filters.date_range.start"),
    ],
)
def test_invalid_bodies_are_422_naming_the_field(
    client: Any, corpus: dict[str, Any], payload: dict[str, Any], field: str | None
) -> None:
    r = search(client, corpus["a"], payload)
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert err["code"] == "VALIDATION_ERROR" and err.get("field") == field
    assert "unexpected" not in r.text and "tier" not in r.text


def test_malformed_json_is_422(client: Any, corpus: dict[str, Any]) -> None:
    r = client.post(
        f"/api/v1/query/{corpus['a']}/search",
        content=b'{"query_text": ',
        headers={**auth(corpus["a"]), "Content-Type": "application/json"},
    )
    assert r.status_code == 422 and error_of(r)["code"] == "VALIDATION_ERROR"


def test_generation_disabled_tenant_gets_403_on_ask(client: Any, store: Any) -> None:
    tenant = new_tenant(store, generation_enabled=False)
    r = client.post(f"/api/v1/query/{tenant}/ask", json={"query_text": "x"}, headers=auth(tenant))
    assert r.status_code == 403 and error_of(r)["code"] == "GENERATION_DISABLED"
    r = search(client, tenant, {"query_text": "x", "collections": ["no_such_collection"]})
    assert r.status_code == 404  # search itself is still allowed


def test_health_readiness_docs_and_unknown_routes(client: Any) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    checks = {"database": True, "migrations": True, "embedder": True, "audit": True}
    assert ready == {"status": "ready", "checks": checks}
    schema = client.get("/openapi.json").json()
    assert "/api/v1/query/{tenant_id}/search" in schema["paths"]
    assert client.get("/docs").status_code == 200
    r = client.get("/nowhere")
    assert r.status_code == 404 and error_of(r)["code"] == "NOT_FOUND"


# ---- observability ------------------------------------------------------------------------------
def _wait_for(server: Server, predicate: Any, timeout: float = 120.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        items = server.telemetry()
        if predicate(items) or time.monotonic() > deadline:
            return items
        time.sleep(0.1)


def test_one_server_span_parents_the_pipeline_spans(
    server: Server, client: Any, corpus: dict[str, Any]
) -> None:
    r = search(client, corpus["a"], body(corpus))
    request_id = r.headers["x-request-id"]

    def found(items: list[dict[str, Any]]) -> bool:
        return any(i.get("attributes", {}).get("agentrag.request_id") == request_id for i in items)

    items = _wait_for(server, found)
    spans = [i for i in items if i["kind"] == "span"]
    root = next(s for s in spans if s["attributes"].get("agentrag.request_id") == request_id)
    assert root["name"] == "POST /api/v1/query/{tenant_id}/search" and root["span_kind"] == "SERVER"
    attrs = root["attributes"]
    assert attrs["http.request.method"] == "POST" and attrs["http.response.status_code"] == 200
    assert attrs["http.route"] == "/api/v1/query/{tenant_id}/search"
    children = [s for s in spans if s["parent_id"] == root["span_id"]]
    assert "agentrag.search" in {s["name"] for s in children}
    assert all(s["trace_id"] == root["trace_id"] for s in children)


def test_request_metrics_count_duration_and_status(
    server: Server, client: Any, corpus: dict[str, Any]
) -> None:
    search(client, corpus["a"], body(corpus), {"Authorization": "Bearer nope"})

    def has_401(items: list[dict[str, Any]]) -> bool:
        return any(
            i["kind"] == "metric"
            and i["name"] == "http.server.request.duration"
            and i["attributes"].get("http.response.status_code") == 401
            for i in items
        )

    items = _wait_for(server, has_401)
    assert has_401(items)
    point = next(
        i for i in items if i["kind"] == "metric" and i["attributes"].get("http.response.status_code") == 401
    )
    assert point["count"] >= 1 and point["sum"] > 0


# ---- the CLI ------------------------------------------------------------------------------------
def test_tenants_and_audit_commands(
    database_url: str, store: Any, client: Any, corpus: dict[str, Any]
) -> None:
    def cli(*args: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "agentrag", "--database-url", database_url, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    name = f"cli_{uuid.uuid4().hex[:6]}"
    created = json.loads(cli("tenants", "create", name, "--rate-limit", "7", "--json"))
    assert created["state"] == "ACTIVE" and created["rate_limit"] == 7
    assert json.loads(cli("tenants", "suspend", name, "--json"))["state"] == "SUSPENDED"
    assert search(client, name, body(corpus, "x")).status_code == 403
    cli("tenants", "resume", name)
    assert search(client, name, body(corpus, "x")).status_code == 200
    assert name in cli("tenants", "list")
    query_id = search(client, corpus["a"], body(corpus)).json()["query_id"]
    assert audit_of(store.engine, query_id, 1)  # the server's writer has written it
    rows = json.loads(cli("audit", "list", "--tenant", corpus["a"], "--json"))
    assert any(r["query_id"] == query_id and r["type"] == "RETRIEVAL_EXECUTED" for r in rows)
    assert all(r["tenant_id"] == corpus["a"] for r in rows)


# ---- the fast path ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("ok", 200),
        ("top_k over the tenant's maximum", 422),  # refused in the worker thread, with its field
        ("unknown collection", 404),
        ("suspended", 403),
        ("rate limited", 429),
        ("bad token", 401),
        ("invalid body", 422),
    ],
)
def test_the_search_fast_path_answers_like_the_fastapi_route(
    client: Any, store: Any, corpus: dict[str, Any], case: str, status: int
) -> None:
    """``application/json`` searches are served by ``SearchFastPath``; ``application/vnd.api+json``
    (JSON to FastAPI, not to the fast path) by the FastAPI route. Both must answer alike."""
    from agentrag.server.tenants import set_state

    tenant, payload = corpus["a"], body(corpus, top_k=2)
    headers = auth(tenant)
    if case == "top_k over the tenant's maximum":
        payload["top_k"] = 11
    elif case == "unknown collection":
        payload["collections"] = ["no_such_collection"]
    elif case == "suspended":
        tenant = new_tenant(store)
        headers = auth(tenant)
        set_state(store.engine, tenant, "SUSPENDED")
    elif case == "rate limited":
        tenant = new_tenant(store, rate_limit=1, rate_limit_period_s=600)
        headers = auth(tenant)
        assert search(client, tenant, payload, headers).status_code == 200  # the one slot
    elif case == "bad token":
        headers = {"Authorization": "Bearer not.a.token"}
    elif case == "invalid body":
        payload["mode"] = "semantic"
    answers = []
    for content_type in ("application/json", "application/vnd.api+json"):
        r = client.post(
            f"/api/v1/query/{tenant}/search",
            content=json.dumps(payload).encode(),
            headers={**headers, "Content-Type": content_type},
        )
        assert r.status_code == status, (content_type, r.text)
        data = r.json()
        data.pop("query_id", None), data.pop("timestamp", None)
        if "error" in data:
            assert data["error"].pop("request_id") == r.headers["x-request-id"]
        kept = ("content-type", "www-authenticate")
        assert int(r.headers["content-length"]) == len(r.content)
        names = list(r.headers.keys())  # the same headers, in the same order, on both paths
        answers.append((data, {k: r.headers.get(k) for k in kept}, r.headers.get("retry-after"), names))
    assert answers[0][:2] == answers[1][:2] and answers[0][3] == answers[1][3]
    if status == 429:  # whole seconds to the next slot: the two requests are a few ms apart
        assert abs(int(answers[0][2]) - int(answers[1][2])) <= 1
    if status == 200:
        assert [c["chunk_id"] for c in answers[0][0]["chunks"]]  # a real result, not an empty one


def test_a_body_sent_in_chunks_is_served_or_replayed_whole(client: Any, corpus: dict[str, Any]) -> None:
    """The fast path reads every chunk; a refused body is replayed to FastAPI chunk by chunk."""

    def chunked(payload: dict[str, Any]) -> Any:  # no Content-Length: several http.request messages
        data = json.dumps(payload).encode()
        for i in range(0, len(data), 16):
            yield data[i : i + 16]

    url, headers = (
        f"/api/v1/query/{corpus['a']}/search",
        {**auth(corpus["a"]), "Content-Type": "application/json"},
    )
    r = client.post(url, content=chunked(body(corpus, top_k=2)), headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["chunks"]
    r = client.post(url, content=chunked(body(corpus, top_k=2, mode="semantic")), headers=headers)
    assert r.status_code == 422 and error_of(r)["field"] == "mode"


def _exchange(server: Server, request: bytes, until: bytes | None = None) -> tuple[bytes, int]:
    """``request`` on a fresh connection; the response (to its Content-Length, or until ``until``
    is in it) and how many TCP segments carrying data this client received (Linux ``tcp_info``)."""
    import socket
    import struct
    from urllib.parse import urlsplit

    parts = urlsplit(server.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(request)
        reply = b""
        while True:
            head, _, rest = reply.partition(b"\r\n\r\n")
            length = next((int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                           if k.strip().lower() == b"content-length"), None)  # fmt: skip
            if (until is not None and until in reply) or (length is not None and len(rest) >= length):
                break
            chunk = sock.recv(65536)
            assert chunk, reply
            reply += chunk
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 160)
    if len(info) < 156:  # tcpi_data_segs_in: Linux 4.6 and later
        pytest.skip("this kernel's tcp_info has no data segment count")
    return reply, struct.unpack_from("I", info, 152)[0]


@pytest.mark.skipif(sys.platform != "linux", reason="counts segments with Linux's TCP_INFO")
def test_a_response_leaves_in_one_segment_and_a_stream_sends_its_head_first(
    server: Server, corpus: dict[str, Any]
) -> None:
    """The head and body of a JSON response go in one write (one segment: the client wakes once);
    a streamed response still sends its head before its events, and each response is intact."""
    host = server.url.removeprefix("http://")
    reply, segments = _exchange(server, f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and reply.endswith(b'\r\n\r\n{"status":"ok"}')
    assert segments == 1
    tenant, data = corpus["a"], json.dumps(body(corpus, top_k=2)).encode()
    head = f"POST /api/v1/query/{tenant}/{{}} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    head += f"Authorization: {auth(tenant)['Authorization']}\r\nContent-Length: {len(data)}\r\n"
    reply, segments = _exchange(server, head.format("search").encode() + b"\r\n" + data)
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and segments == 1
    assert json.loads(reply.partition(b"\r\n\r\n")[2])["chunks"]
    sse = head.format("ask") + "Accept: text/event-stream\r\n"
    reply, segments = _exchange(server, sse.encode() + b"\r\n" + data, until=b"event: done")
    head_of_stream, _, chunked = reply.partition(b"\r\n\r\n")
    assert head_of_stream.startswith(b"HTTP/1.1 200 OK\r\n") and b"text/event-stream" in head_of_stream
    size, _, events = chunked.partition(b"\r\n")  # chunked encoding: the chunk's size line first
    assert int(size, 16) > 0 and events.startswith(b"event: retrieval")
