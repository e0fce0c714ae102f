"""Issue #13 items 4 and 6: LLM auth errors, collection names checked by new(), the ingest
report's failures in its repr and ``strict=True``, one filter vocabulary for CLI and Python."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentrag as ar
from agentrag.cli import main
from agentrag.retrieval.filters import DateRange, Filters, filter_keys, parse_filter_pairs, validate_filters
from agentrag.store.store import Store
from tests.openai_stub import OpenAIStub, error, reply


# ---- LLM credentials ------------------------------------------------------------------------------
def test_a_rejected_key_is_not_retried_and_says_so(openai_stub: OpenAIStub) -> None:
    openai_stub.enqueue(error(401, "Incorrect API key provided"), reply("never sent"))
    slept: list[float] = []
    llm = ar.LiteLLM("openai/stub-model", api_base=openai_stub.url, api_key="sk-wrong", sleep=slept.append)
    with pytest.raises(ar.LLMAuthError) as caught:
        llm.complete([{"role": "user", "content": "hi"}])
    assert isinstance(caught.value, ar.LLMRequestError)  # still a request error for existing handlers
    assert len(openai_stub.requests) == 1 and slept == []
    assert "credential rejected (401)" in str(caught.value) and "not retried" in str(caught.value)


def test_a_missing_key_names_the_variable_without_retrying(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    slept: list[float] = []
    llm = ar.LiteLLM("gpt-4o-mini", sleep=slept.append, timeout=5)
    with pytest.raises(ar.LLMAuthError) as caught:
        llm.complete([{"role": "user", "content": "hi"}])
    assert caught.value.missing == ("OPENAI_API_KEY",)
    assert "missing credential: set OPENAI_API_KEY" in str(caught.value)
    assert slept == []  # no retries, no backoff


def test_the_pipeline_records_the_auth_error_as_raw_results(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentrag.hits import Hit

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    hit = Hit("chk_1", "doc_1", "c", "Notes stay in the trash for thirty days.", 1.0, 1, 0, 40)
    ctx = ar.Context(question="how long do notes stay in the trash?", ranked=(hit,))
    from dataclasses import replace

    ctx = replace(ctx, deps=replace(ctx.deps, llm=ar.LiteLLM("anthropic/claude-3-5-haiku-latest")))
    ctx = ctx.answer()
    assert ctx.mode == "raw-results"
    assert any("LLMAuthError" in w for w in ctx.warnings)
    assert "ANTHROPIC_API_KEY" in str(ctx.llm_calls[-1].error)


# ---- new() checks collection names -----------------------------------------------------------------
def test_new_refuses_unknown_collections_when_given_a_store(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    with pytest.raises(ar.CollectionNotFoundError) as caught:
        ar.new("hello there friend", store=store, collections=[collection_name, "nope"])
    assert "no collection named 'nope'" in str(caught.value)
    assert repr(collection_name) in str(caught.value)  # it names what exists
    with pytest.raises(ar.InvalidInputError):
        ar.new("hello", store=store, collections=["bad name!"])
    assert ar.new("hello", store=store, collections=[collection_name]).options.collections == (
        collection_name,
    )
    assert ar.new("hello", collections=["nope"]).options.collections == (
        "nope",
    )  # no store: nothing to check


# ---- ingest reports ------------------------------------------------------------------------------
@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "good.md").write_text("# Good\n\nA perfectly fine document about the trash.\n")
    (tmp_path / "bad.md").write_bytes(b"---\ndate: not-a-date\n---\n\nBody text here.\n")
    return tmp_path


def test_ingest_failures_show_in_the_repr(store: Store, collection_name: str, folder: Path) -> None:
    store.create_collection(collection_name)
    report = store.ingest(folder, collection=collection_name)
    assert not report.ok and len(report.added) == 1 and len(report.failed) == 1
    assert repr(report).startswith(
        f"IngestReport({collection_name!r}: 1 added, 0 replaced, 0 unchanged, 1 failed"
    )
    assert "FAILED: bad.md" in repr(report) and "ISO date" in repr(report)


def test_strict_ingest_raises_after_trying_every_file(
    store: Store, collection_name: str, folder: Path
) -> None:
    store.create_collection(collection_name)
    with pytest.raises(ar.IngestError) as caught:
        store.ingest(folder, collection=collection_name, strict=True)
    assert "1 of 2 sources failed" in str(caught.value) and "the other 1 are ingested" in str(caught.value)
    assert caught.value.source == "bad.md"
    report = caught.value.report  # type: ignore[attr-defined]
    assert report.failed and report.added
    # the good file is in, the bad one is not (no partial document)
    assert [d.source for d in store.documents(collection_name)] == ["good.md"]
    assert store.ingest(folder / "good.md", collection=collection_name, strict=True).ok


# ---- one filter vocabulary -------------------------------------------------------------------------
def test_cli_filter_keys_are_the_models_fields() -> None:
    keys = filter_keys()
    tops = {k.split(".")[0] for k in keys}
    assert tops == set(Filters.model_fields)
    assert {k.split(".")[1] for k in keys if k.startswith("date_range.")} == set(DateRange.model_fields)


def test_parsed_pairs_equal_the_python_filters() -> None:
    parsed = parse_filter_pairs(
        [
            "classification=public",
            "classification=internal",
            "doc_ids=doc_1",
            "date_range.start=2025-01-01",
            "date_range.end=2026-12-31",
            "metadata.tier=gold",
            "metadata.region=eu",
            "metadata.region=us",
        ]
    )
    python = {
        "classification": ["public", "internal"],
        "doc_ids": ["doc_1"],
        "date_range": {"start": "2025-01-01", "end": "2026-12-31"},
        "metadata": {"tier": "gold", "region": {"in": ["eu", "us"]}},
    }
    assert validate_filters(parsed) == validate_filters(python)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.", min_size=1, max_size=20))
def test_a_key_is_accepted_by_the_cli_only_if_the_model_has_it(key: str) -> None:
    try:
        parsed = parse_filter_pairs([f"{key}=x"])
    except ar.FilterError as exc:
        assert "unknown filter key" in str(exc) or "date_range" in str(exc)
        return
    assert parsed is not None
    validate_filters(parsed) if not key.startswith("date_range.") else None


def test_a_typo_names_the_closest_key_in_python_too() -> None:
    with pytest.raises(
        ar.FilterError, match=r"unknown filter key 'clasification' \(did you mean 'classification'\?\)"
    ):
        validate_filters({"clasification": "public"})


def test_ask_takes_filters(store: Store, collection_name: str, database_url: str, capsys: Any) -> None:
    store.create_collection(collection_name)
    store.ingest_text(
        "Trash keeps deleted notes for thirty days on every plan.",
        collection=collection_name,
        source="pub.md",
        metadata={"classification": "public"},
    )
    store.ingest_text(
        "Trash keeps deleted notes for ninety days for internal staff.",
        collection=collection_name,
        source="int.md",
        metadata={"classification": "internal"},
    )
    argv = ["--database-url", database_url, "ask", "How long does the trash keep deleted notes?"]
    argv += ["-c", collection_name, "--mode", "lexical", "--json"]
    assert main([*argv, "--filter", "classification=internal"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["source"] for s in data["sources"]] == ["int.md"] and "ninety" in data["answer"]
    assert main([*argv, "--filter", "classification=secret"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sources"] == [] and data["empty_reason"] == "the filters exclude all 2 documents"
    assert main([*argv, "--filter", "clasification=public"]) == 2
    assert "did you mean 'classification'?" in capsys.readouterr().err
