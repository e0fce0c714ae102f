"""/ask with a real litellm call (to the local OpenAI-compatible stub): citations checked, SSE streamed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from tests.openai_stub import OpenAIStub, reply, stream
from tests.server_support import auth, new_tenant, start_server


def _events(raw: str) -> list[tuple[str, Any]]:
    out = []
    for block in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_ask_with_a_model_flags_or_suppresses_ungrounded_text_and_streams(
    database_url: str, store: Any, tmp_path: Path, openai_stub: OpenAIStub
) -> None:
    import httpx

    collection = f"llm_{uuid.uuid4().hex[:8]}"
    store.create_collection(collection)
    flag = new_tenant(store, "flag")
    strict = new_tenant(store, "strict", suppress_ungrounded=True)
    for tenant in (flag, strict):
        store.ingest_text(
            "Invoices are payable net-30. Late fees are two percent.",
            collection=collection,
            source="t",
            tenant=tenant,
        )
    server = start_server(
        database_url,
        tmp_path,
        "--llm",
        "openai/stub-model",
        "--llm-api-base",
        openai_stub.url,
        env={"AGENTRAG_LLM_API_KEY": "sk-test"},
    )
    body = {"query_text": "When are invoices due?", "collections": [collection]}
    try:
        with httpx.Client(
            base_url=server.url, timeout=180
        ) as client:  # a loaded machine: first ask imports litellm
            for tenant in (flag, strict):
                chunk = client.post(f"/api/v1/query/{tenant}/search", json=body, headers=auth(tenant)).json()
                chunk_id = chunk["chunks"][0]["chunk_id"]
                openai_stub.enqueue(
                    reply(f"Invoices are due in 30 days [{chunk_id}]. The moon is made of cheese.")
                )
                r = client.post(f"/api/v1/query/{tenant}/ask", json=body, headers=auth(tenant))
                assert r.status_code == 200, r.text
                generation = r.json()["generation"]
                assert generation["cited_chunks"] == [chunk_id] and generation["model"]
                if tenant == flag:
                    assert "cheese" in generation["answer"]
                    assert any("cheese" in claim for claim in generation["ungrounded_claims"])
                else:
                    assert "cheese" not in generation["answer"]

            openai_stub.enqueue(
                stream(["Invoices are ", f"due in 30 days [{chunk_id}]", " and [chk_deadbeef00000000]."])
            )
            headers = {**auth(strict), "Accept": "text/event-stream"}
            with client.stream("POST", f"/api/v1/query/{strict}/ask", json=body, headers=headers) as s:
                events = _events(s.read().decode())
    finally:
        server.stop()
    names = [name for name, _ in events]
    assert names[0] == "retrieval" and names.count("token") == 3 and names[-2:] == ["citations", "done"]
    generation = events[-2][1]["generation"]
    assert generation["cited_chunks"] == [chunk_id]
    assert generation["invalid_citations"] == ["chk_deadbeef00000000"]
    assert "chk_deadbeef00000000" not in generation["answer"]  # suppressed for the strict tenant
