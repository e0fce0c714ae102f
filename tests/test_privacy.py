"""With default settings the question and document text never reach logs, spans or audit events."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from agentrag.audit import ListAuditSink
from agentrag.context import Context
from agentrag.errors import LLMError
from agentrag.steps import answer_stream, new
from agentrag.store.store import Store
from agentrag.testing import FakeLLM
from tests.grounded_support import Traced
from tests.openai_stub import OpenAIStub, reply

CANARY = "CANARY-7f3a9c1e-ZEBRA"
DOCUMENT = (
    "# Vault procedures\n\n"
    f"The vault code word is {CANARY}. Staff rotate the vault code every month.\n\n"
    "Only managers may open the vault after hours, and every opening is written in the vault log."
)
QUESTION = f"What is the vault code word {CANARY} and who may open the vault?"


def span_texts(span: ReadableSpan) -> list[str]:
    texts = [span.name, str(span.status.description or "")]
    texts.extend(f"{k}={v!r}" for k, v in (span.attributes or {}).items())
    for event in span.events:
        texts.append(event.name)
        texts.extend(f"{k}={v!r}" for k, v in (event.attributes or {}).items())
    return texts


def run_everything(
    store: Store, down_store: Store, collection: str, traced: Traced, sink: ListAuditSink
) -> list[Any]:
    """The pipeline along every path: full, graph, LLM down, embedder down, retrieval down, streaming."""
    common: dict[str, Any] = {"collections": collection, "telemetry": traced.telemetry}
    ids = [h.chunk_id for h in new(QUESTION, store=store, **common).search().hits]
    reply = f"The code word is {CANARY} [{ids[0]}]. Nobody else knows it."
    contexts = [
        new(QUESTION, store=store, llm=FakeLLM([reply]), audit=sink, **common)
        .enrich(entity="vault")
        .search(self_correct=True, strategy="local")
        .rerank()
        .answer(),
        new(QUESTION, store=store, llm=FakeLLM(fail_with=LLMError("down")), audit=sink, **common)
        .search()
        .answer(),
        new(QUESTION, store=down_store, llm=FakeLLM([reply]), audit=sink, **common).search().answer(),
        new(QUESTION, store=down_store, mode="vector", audit=sink, **common)
        .enrich(entity="vault")
        .search()
        .answer(),
        new(QUESTION, store=down_store, mode="vector", audit=sink, **common)
        .search()
        .answer(),  # RetrievalError
        new(QUESTION, store=store, **common).search().answer(),  # default audit sink: the logger
    ]
    streamed = list(
        answer_stream(new(QUESTION, store=store, llm=FakeLLM([reply]), audit=sink, **common).search())
    )
    final = streamed[-1]
    assert isinstance(final, Context)
    contexts.append(final)
    return contexts


def test_the_canary_never_leaves_the_context(
    store: Store, down_store: Store, traced: Traced, caplog: pytest.LogCaptureFixture
) -> None:
    collection = f"vault_{uuid.uuid4().hex[:8]}"
    sink = ListAuditSink()
    # Root at DEBUG: every logger that inherits its level (all of agentrag's) records everything.
    # SQLAlchemy keeps its own WARNING level: its engine echo prints statement parameters by design
    # and is the application's choice to turn on.
    with caplog.at_level(logging.DEBUG):
        store.create_collection(collection, description="vault procedures")
        store.ingest_text(DOCUMENT, collection=collection, source="vault.md")
        store.add_relations(collection, [("Vault", "is opened by", "Managers")], source="vault.md")
        contexts = run_everything(store, down_store, collection, traced, sink)

    # the canary really went through the pipeline...
    assert all(isinstance(c, Context) for c in contexts)
    assert CANARY in contexts[0].question and any(CANARY in h.text for h in contexts[0].hits)
    assert CANARY in (contexts[0].answer_text or "")
    assert {c.mode for c in contexts} >= {"full", "raw-results", "lexical-only", "graph-only"}
    assert any(c.error is not None for c in contexts)
    assert caplog.records and sink.events and traced.spans()

    # ...and none of it reached the logs, the spans or the audit events
    leaked_logs = [r.name for r in caplog.records if CANARY in r.getMessage() or CANARY in str(r.args)]
    assert leaked_logs == []
    for span in traced.spans():
        assert not [t for t in span_texts(span) if CANARY in t], span.name
    for event in sink.events:
        assert CANARY not in event.to_json()
    audit_logs = [r for r in caplog.records if r.name == "agentrag.audit"]
    assert audit_logs, "the default sink logs the events"


def test_litellm_does_not_copy_prompts_into_the_logs(
    openai_stub: OpenAIStub, caplog: pytest.LogCaptureFixture, restore_logger_levels: None
) -> None:
    """litellm and the OpenAI client print whole requests at DEBUG; a DEBUG root must not get them."""
    from agentrag.llm import LiteLLM

    openai_stub.enqueue(reply("fine"))
    llm = LiteLLM("openai/stub-model", api_base=openai_stub.url, api_key="sk-test")
    with caplog.at_level(logging.DEBUG):
        result = llm.complete([{"role": "user", "content": QUESTION}])
    assert result.text == "fine"
    assert CANARY in openai_stub.requests[-1].json["messages"][0]["content"]  # it was sent...
    assert [r.name for r in caplog.records if CANARY in r.getMessage()] == []  # ...and not logged


def test_an_explicit_logger_level_is_the_opt_in(
    openai_stub: OpenAIStub, caplog: pytest.LogCaptureFixture, restore_logger_levels: None
) -> None:
    from agentrag._lazy import PROMPT_ECHOING_LOGGERS
    from agentrag.llm import LiteLLM

    # Both loggers opted in: which of them echoes the request at DEBUG depends on the versions
    # (openai 1.x logs its request options, 3.x no longer does; litellm logs the call either way).
    for name in ("openai", "LiteLLM"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    openai_stub.enqueue(reply("fine"))
    with caplog.at_level(logging.DEBUG):
        LiteLLM("openai/stub-model", api_base=openai_stub.url, api_key="sk-test").complete(
            [{"role": "user", "content": QUESTION}]
        )
    assert logging.getLogger("openai").level == logging.DEBUG
    assert logging.getLogger("LiteLLM").level == logging.DEBUG
    assert any(CANARY in r.getMessage() for r in caplog.records if r.name in PROMPT_ECHOING_LOGGERS)


@pytest.fixture
def restore_logger_levels() -> Iterator[None]:
    from agentrag._lazy import PROMPT_ECHOING_LOGGERS

    levels = {name: logging.getLogger(name).level for name in PROMPT_ECHOING_LOGGERS}
    for name in PROMPT_ECHOING_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
