"""``agentrag ask``: the pipeline from the command line, readable and --json, with --proof."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentrag import cli
from agentrag.steps import new
from agentrag.store.store import Store
from tests.grounded_support import QUESTION
from tests.openai_stub import OpenAIStub, error, reply, stream


@pytest.fixture
def use_store(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("AGENTRAG_LLM", raising=False)

    def use(store: Store) -> None:
        monkeypatch.setattr(cli.common, "open_store", lambda args: store)

    return use


@pytest.fixture
def stub_env(openai_stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> OpenAIStub:
    monkeypatch.setenv("OPENAI_API_BASE", openai_stub.url)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_stub.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return openai_stub


def test_ask_without_an_llm_prints_an_extractive_answer(
    store: Store, support: str, use_store: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    use_store(store)
    assert cli.main(["ask", QUESTION, "--collection", support]) == 0
    out = capsys.readouterr().out
    assert "trash" in out.lower()
    assert "\nSources:\n  1. [chk_" in out and "(cited)" in out
    assert "mode: full  grounded: yes" in out


def test_ask_json_with_proof(
    store: Store, support: str, use_store: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    use_store(store)
    assert (
        cli.main(["ask", QUESTION, "-c", support, "--top-k", "3", "--mode", "lexical", "--json", "--proof"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["question"] == QUESTION and data["mode"] == "full" and data["grounded"] is True
    assert data["citations"] and set(data["citations"]) <= {s["chunk_id"] for s in data["sources"]}
    assert 0 < len(data["proof"]["chunks"]) <= 3
    assert data["proof"]["query_id"] == data["query_id"]
    assert {"retrieval", "context", "total"} <= set(data["latency_ms"])


def test_ask_with_an_llm_from_the_flag_and_from_the_environment(
    store: Store,
    support: str,
    use_store: Any,
    stub_env: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_store(store)
    top = new(QUESTION, store=store, collections=support).search().rerank().hits[0].chunk_id
    stub_env.enqueue(reply(f"Deleted notes wait in the trash [{top}]. They are gone after a week."))
    assert cli.main(["ask", QUESTION, "-c", support, "--llm", "openai/stub-model"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Deleted notes wait in the trash [{top}].")
    assert (
        "Ungrounded claims (no valid citation, or the cited source does not say it):\n"
        "  - They are gone after a week."
    ) in out
    assert "grounded: no" in out
    assert stub_env.requests[0].json["model"] == "stub-model"

    monkeypatch.setenv("AGENTRAG_LLM", "openai/stub-model")
    stub_env.enqueue(reply(f"Deleted notes wait in the trash [{top}]. They are gone after a week."))
    assert cli.main(["ask", QUESTION, "-c", support, "--suppress-ungrounded", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["answer"] == f"Deleted notes wait in the trash [{top}]."
    assert data["ungrounded_claims"] == ["They are gone after a week."]


def test_ask_streams(
    store: Store, support: str, use_store: Any, stub_env: OpenAIStub, capsys: pytest.CaptureFixture[str]
) -> None:
    use_store(store)
    top = new(QUESTION, store=store, collections=support).search().rerank().hits[0].chunk_id
    stub_env.enqueue(stream(["Deleted notes ", "wait in the trash ", f"[{top}]."]))
    assert cli.main(["ask", QUESTION, "-c", support, "--llm", "openai/stub-model", "--stream"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Deleted notes wait in the trash [{top}].\n")
    assert "mode: full  grounded: yes" in out


def test_ask_when_the_llm_fails_prints_the_raw_sources(
    store: Store, support: str, use_store: Any, stub_env: OpenAIStub, capsys: pytest.CaptureFixture[str]
) -> None:
    use_store(store)
    stub_env.enqueue(error(400, "bad request"))
    assert cli.main(["ask", QUESTION, "-c", support, "--llm", "openai/stub-model"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("The language model failed, so there is no generated answer.")
    assert "Sources:\n  1. [chk_" in captured.out and "mode: raw-results" in captured.out
    assert "warning: the LLM failed (LLMRequestError)" in captured.err


def test_ask_when_everything_is_down_exits_2(
    down_store: Store, support: str, use_store: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    use_store(down_store)
    assert cli.main(["ask", QUESTION, "-c", support, "--mode", "vector"]) == 2
    assert "agentrag: error: every retrieval source failed" in capsys.readouterr().err


def test_ask_with_graph_context_when_retrieval_is_down(
    store: Store, down_store: Store, support: str, use_store: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    store.add_relations(support, [("Trash", "keeps items for", "30 days")])
    use_store(down_store)
    assert cli.main(["ask", QUESTION, "-c", support, "--mode", "vector", "--entity", "trash"]) == 0
    out = capsys.readouterr().out
    assert "Trash --keeps items for--> 30 days" in out
    assert "mode: graph-only" in out
