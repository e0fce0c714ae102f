"""The OpenAI-compatible chat API, driven by the ``openai`` package against a real ``agentrag serve``."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.interfaces_support import make_corpus
from tests.server_support import Server, new_tenant, token

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def corpus(store: Any) -> dict[str, Any]:
    return make_corpus(store, "oai")


def client(server: Server, key: str) -> Any:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=60)


def extra(response: Any) -> dict[str, Any]:
    return dict(response.model_extra or {})["agentrag"]


def test_models_are_the_collections(server: Server, corpus: dict[str, Any]) -> None:
    ids = [m.id for m in client(server, token(corpus["a"])).models.list()]
    assert ids[0] == "agentrag" and f"agentrag/{corpus['collection']}" in ids


def test_a_three_turn_conversation_with_follow_ups(server: Server, corpus: dict[str, Any]) -> None:
    chat = client(server, token(corpus["a"]))
    model = f"agentrag/{corpus['collection']}"
    messages: list[dict[str, str]] = [{"role": "system", "content": "Be brief."}]
    questions = [
        "How do I reset two-factor authentication?",
        "Can an Admin do it for me?",
        "What if I still have a recovery code?",
    ]
    searched = []
    for question in questions:
        messages.append({"role": "user", "content": question})
        reply = chat.chat.completions.create(model=model, messages=messages)
        content = reply.choices[0].message.content
        data = extra(reply)
        assert reply.object == "chat.completion" and reply.choices[0].finish_reason == "stop"
        # numbered citations in the text, each number a structured source from the proof
        numbers = {int(n) for n in re.findall(r"\[(\d+)\]", content.split("\n\nSources:\n")[0])}
        assert numbers and numbers == {s["n"] for s in data["sources"]}
        assert "chk_" not in content and "\n\nSources:\n[1] " in content
        proof_ids = {c["chunk_id"] for c in data["proof"]["chunks"]}
        assert {s["chunk_id"] for s in data["sources"]} <= proof_ids
        assert data["proof"]["tenant_id"] == corpus["a"] and data["grounded"] is True
        assert data["abstained"] is False and data["confidence"] >= 0.5
        for span in data["supporting_spans"]:
            chunk = next(c for c in data["proof"]["chunks"] if c["chunk_id"] == span["chunk_id"])
            assert chunk["text"][span["start"] : span["end"]]
        searched.append(data["question"])
        messages.append({"role": "assistant", "content": content})
    # the follow-ups were condensed with the conversation before retrieval
    assert searched[0] == questions[0]
    for follow_up, standalone in zip(questions[1:], searched[1:], strict=True):
        assert standalone != follow_up and "two-factor" in standalone.lower()


def test_streaming_sends_chunks_then_sources_and_done(server: Server, corpus: dict[str, Any]) -> None:
    chat = client(server, token(corpus["a"]))
    stream = chat.chat.completions.create(
        model=f"agentrag/{corpus['collection']}",
        messages=[{"role": "user", "content": "How do I reset two-factor authentication?"}],
        stream=True,
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) >= 2
    assert re.search(r"\[1\]", text) and "chk_" not in text
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    data = extra(last)
    assert data["sources"][0]["n"] == 1 and data["proof"]["generation"]["cited_chunks"]
    # the same question answered without streaming gives the same text
    plain = chat.chat.completions.create(
        model=f"agentrag/{corpus['collection']}",
        messages=[{"role": "user", "content": "How do I reset two-factor authentication?"}],
    )
    assert plain.choices[0].message.content == text


def test_a_wrong_key_is_401(server: Server, corpus: dict[str, Any]) -> None:
    model = f"agentrag/{corpus['collection']}"
    messages = [{"role": "user", "content": "How do I reset two-factor authentication?"}]
    for key in ("not-a-token", token(corpus["a"], secret="another-secret-" + "z" * 40)):
        with pytest.raises(openai.AuthenticationError) as caught:
            client(server, key).chat.completions.create(model=model, messages=messages)
        assert caught.value.status_code == 401
    with pytest.raises(openai.AuthenticationError):
        client(server, "not-a-token").models.list()


def test_a_tenant_never_sees_another_tenants_documents(server: Server, corpus: dict[str, Any]) -> None:
    model = f"agentrag/{corpus['collection']}"
    messages = [{"role": "user", "content": "What is the launch code word of Project Nightjar?"}]
    theirs = client(server, token(corpus["b"])).chat.completions.create(model=model, messages=messages)
    assert "HELIOTROPE" in theirs.choices[0].message.content
    mine = client(server, token(corpus["a"])).chat.completions.create(model=model, messages=messages)
    assert "HELIOTROPE" not in mine.choices[0].message.content
    assert all(c["doc_id"] != corpus["b_doc"] for c in extra(mine)["proof"]["chunks"])


def test_refusals_are_openai_errors(server: Server, corpus: dict[str, Any], store: Any) -> None:
    chat = client(server, token(corpus["a"]))
    with pytest.raises(openai.NotFoundError, match="model"):
        chat.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi there"}])
    with pytest.raises(openai.NotFoundError, match="collection"):
        chat.chat.completions.create(model="agentrag/nope", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as caught:
        chat.chat.completions.create(model="agentrag", messages=[{"role": "assistant", "content": "hello"}])
    assert caught.value.body["param"] == "messages"
    off = new_tenant(store, "oaioff", generation_enabled=False)
    with pytest.raises(openai.PermissionDeniedError, match="disabled"):
        client(server, token(off)).chat.completions.create(
            model="agentrag", messages=[{"role": "user", "content": "payment terms?"}]
        )
    limited = new_tenant(store, "oailim", rate_limit=1, rate_limit_period_s=3600)
    limited_chat = client(server, token(limited))
    limited_chat.chat.completions.create(model="agentrag", messages=[{"role": "user", "content": "terms?"}])
    with pytest.raises(openai.RateLimitError):
        limited_chat.chat.completions.create(
            model="agentrag", messages=[{"role": "user", "content": "terms?"}]
        )


def test_an_out_of_domain_question_abstains(server: Server, corpus: dict[str, Any]) -> None:
    reply = client(server, token(corpus["a"])).chat.completions.create(
        model=f"agentrag/{corpus['collection']}",
        messages=[{"role": "user", "content": "What is the boiling point of mercury on Jupiter?"}],
    )
    data = extra(reply)
    assert data["abstained"] is True and data["sources"] == [] and data["confidence"] < 0.5
    assert "does not seem to cover" in reply.choices[0].message.content
    assert "[1]" not in reply.choices[0].message.content


def test_openapi_declares_the_bearer_scheme_and_the_chat_body(client: Any) -> None:
    schema = client.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    for path in ("/api/v1/query/{tenant_id}/search", "/v1/chat/completions", "/v1/models"):
        operation = next(iter(schema["paths"][path].values()))
        assert operation["security"] == [{"bearerAuth": []}], path
    assert "security" not in schema["paths"]["/healthz"]["get"]
    body = schema["paths"]["/v1/chat/completions"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ChatRequest"}
    assert {"model", "messages", "stream"} <= set(
        schema["components"]["schemas"]["ChatRequest"]["properties"]
    )
