"""answer(): cite-only enforcement, degradation modes, streaming, audit events and metrics.

Real PostgreSQL; FakeLLM and FakeEmbedder are the only fakes; spans go to an in-memory
exporter through Telemetry(tracer_provider=...).
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from agentrag.abstain import DEFAULT_CALIBRATION
from agentrag.audit import AuditEventType, ListAuditSink
from agentrag.context import Context, StopReason
from agentrag.errors import InvalidInputError, LLMError, LLMTimeoutError, RetrievalError
from agentrag.steps import aanswer, aanswer_stream, answer, answer_stream, asearch, new
from agentrag.steps.answer import NOTHING_GROUNDED
from agentrag.store.store import Store
from agentrag.testing import FakeLLM
from tests.grounded_support import QUESTION, Traced, attributes


def searched(store: Store, collection: str, llm: Any = None, **options: Any) -> Context:
    return new(QUESTION, store=store, llm=llm, collections=collection, **options).search().rerank()


def first_ids(store: Store, collection: str) -> list[str]:
    return [h.chunk_id for h in searched(store, collection).hits]


# ---- cite-only ----------------------------------------------------------------------------------
def test_valid_citations_make_a_grounded_answer(store: Store, support: str) -> None:
    ids = first_ids(store, support)
    reply = f"Deleted notes go to the trash [{ids[0]}]. You can restore them from there [{ids[1]}]."
    ctx = searched(store, support, FakeLLM([reply])).answer()
    assert ctx.ok and ctx.mode == "full"
    assert ctx.answer_text == reply
    assert ctx.citations == (ids[0], ids[1])
    assert ctx.grounded is True
    assert ctx.invalid_citations == () and ctx.ungrounded_claims == ()
    assert {h.chunk_id for h in ctx.context_used} >= {ids[0], ids[1]}


def test_invalid_and_missing_citations_are_flagged(store: Store, support: str) -> None:
    ids = first_ids(store, support)
    reply = (
        f"Deleted notes go to the trash [{ids[0]}]. "
        "Deleted notes are also emailed to your manager. "
        "Support can restore anything within a year [chk_00000000deadbeef]."
    )
    ctx = searched(store, support, FakeLLM([reply])).answer()
    assert ctx.answer_text == reply  # flagged, not removed
    assert ctx.grounded is False
    assert ctx.citations == (ids[0],)
    assert ctx.invalid_citations == ("chk_00000000deadbeef",)
    assert ctx.ungrounded_claims == (
        "Deleted notes are also emailed to your manager.",
        "Support can restore anything within a year [chk_00000000deadbeef].",
    )


def test_suppress_ungrounded_strips_them(store: Store, support: str) -> None:
    ids = first_ids(store, support)
    reply = (
        f"Deleted notes go to the trash [{ids[0]}] [chk_00000000deadbeef]. "
        "Deleted notes are also emailed to your manager."
    )
    ctx = searched(store, support, FakeLLM([reply])).answer(suppress_ungrounded=True)
    assert ctx.answer_text == f"Deleted notes go to the trash [{ids[0]}]."
    assert ctx.ungrounded_claims == ("Deleted notes are also emailed to your manager.",)
    assert ctx.invalid_citations == ("chk_00000000deadbeef",)
    assert ctx.grounded is False  # still reported: something was removed


def test_an_answer_with_nothing_grounded_is_withheld_when_suppressing(store: Store, support: str) -> None:
    ctx = searched(store, support, FakeLLM(["The moon is made of cheese, says everyone."])).answer(
        suppress_ungrounded=True
    )
    assert ctx.answer_text == NOTHING_GROUNDED
    assert ctx.grounded is False and ctx.citations == ()


def test_no_results_need_no_llm_call(store: Store, empty_collection: str, traced: Traced) -> None:
    fake = FakeLLM([])
    ctx = new(QUESTION, store=store, llm=fake, collections=empty_collection, telemetry=traced.telemetry)
    ctx = ctx.search().rerank().answer()
    assert fake.calls == []
    assert ctx.ok and ctx.grounded is False and ctx.citations == ()
    assert ctx.context_used == ()
    assert "could not find anything relevant" in (ctx.answer_text or "")
    # the answer says why: the collection is empty
    assert ctx.empty_reason is not None and f"collection {empty_collection!r} is empty" in ctx.empty_reason
    assert ctx.empty_reason in (ctx.answer_text or "")
    assert ctx.steps[-1].strategy == "no-results"
    assert traced.spans("chat fake") == []


def test_without_an_llm_the_answer_is_extractive_and_cited(store: Store, support: str) -> None:
    ctx = searched(store, support).answer()
    assert ctx.steps[-1].strategy == "local:extractive"
    assert ctx.grounded is True and ctx.citations
    assert set(ctx.citations) <= {h.chunk_id for h in ctx.context_used}
    assert "trash" in (ctx.answer_text or "").lower()


def test_an_extractive_answer_with_nothing_relevant_says_so(store: Store, support: str) -> None:
    ctx = new("zebra quantum xylophone", store=store, collections=support).search().rerank()
    assert ctx.hits  # the vector leg always finds something
    ctx = ctx.answer()
    assert ctx.steps[-1].strategy == "local:abstained" and ctx.mode == "abstained"
    assert ctx.grounded is False and ctx.citations == ()
    assert (ctx.answer_text or "").startswith("The knowledge base does not seem to cover this question")
    assert ctx.answer_confidence is not None and ctx.answer_confidence < DEFAULT_CALIBRATION.abstain_below


def test_the_prompt_carries_only_the_packed_labels(store: Store, support: str) -> None:
    fake = FakeLLM(["Nothing."])
    ctx = searched(store, support, fake).answer(max_context_tokens=300)
    system = fake.calls[0][0]["content"]
    used = [h.chunk_id for h in ctx.context_used]
    assert used and f"Valid labels: {', '.join(used)}" in system
    dropped = {h.chunk_id for h in ctx.hits} - set(used)
    assert dropped, "the small budget should leave chunks out"
    assert all(d not in system for d in dropped)


def test_bad_options_raise_before_any_work(store: Store, support: str) -> None:
    ctx = searched(store, support)
    with pytest.raises(InvalidInputError):
        ctx.answer(max_context_tokens=10)
    with pytest.raises(InvalidInputError):
        ctx.answer(strategy="llm")  # no LLM configured
    with pytest.raises(TypeError):
        ctx.answer(nonsense=True)


# ---- degradation modes --------------------------------------------------------------------------
def test_embedder_down_gives_lexical_only(down_store: Store, support: str, traced: Traced) -> None:
    ids = first_ids(down_store, support)
    ctx = new(
        QUESTION,
        store=down_store,
        llm=FakeLLM([f"Restore it from the trash [{ids[0]}]."]),
        collections=support,
        telemetry=traced.telemetry,
    )
    ctx = ctx.search().rerank().answer()
    assert ctx.ok and ctx.mode == "lexical-only"
    assert ctx.grounded is True and ctx.context_used
    assert [d.kind for d in ctx.degradations] == ["lexical-only"]
    search_span = traced.span("agentrag.search")
    assert attributes(search_span)["agentrag.degraded"] is True
    assert attributes(search_span)["agentrag.mode"] == "lexical-only"
    assert search_span.status.status_code == StatusCode.UNSET  # the search itself worked
    answer_span = traced.span("agentrag.answer")
    assert attributes(answer_span)["agentrag.answer.mode"] == "lexical-only"
    assert answer_span.status.status_code == StatusCode.UNSET


def test_llm_down_gives_raw_results(store: Store, support: str, traced: Traced) -> None:
    ctx = new(
        QUESTION,
        store=store,
        llm=FakeLLM(fail_with=LLMTimeoutError("fake: no reply")),
        collections=support,
        telemetry=traced.telemetry,
    )
    ctx = ctx.search().rerank().answer()
    assert ctx.ok and ctx.error is None
    assert ctx.mode == "raw-results"
    assert ctx.answer_text == "" and ctx.grounded is False
    assert ctx.context_used and {h.chunk_id for h in ctx.context_used} <= {h.chunk_id for h in ctx.hits}
    assert [d.kind for d in ctx.degradations] == ["raw-results"]
    assert (ctx.llm_calls[-1].error or "").startswith("LLMTimeoutError")
    answer_span = traced.span("agentrag.answer")
    assert answer_span.status.status_code == StatusCode.ERROR
    assert attributes(answer_span)["agentrag.degraded"] is True
    assert attributes(answer_span)["agentrag.mode"] == "raw-results"
    assert traced.span("chat fake").status.status_code == StatusCode.ERROR
    assert traced.span("agentrag.search").status.status_code == StatusCode.UNSET


def test_embedder_and_llm_down(down_store: Store, support: str, traced: Traced) -> None:
    ctx = new(
        QUESTION,
        store=down_store,
        llm=FakeLLM(fail_with=LLMError("down")),
        collections=support,
        telemetry=traced.telemetry,
    )
    ctx = ctx.search().rerank().answer()
    assert ctx.ok and ctx.mode == "raw-results"
    assert [d.kind for d in ctx.degradations] == ["lexical-only", "raw-results"]
    assert ctx.context_used
    assert attributes(traced.span("agentrag.search"))["agentrag.mode"] == "lexical-only"
    assert traced.span("agentrag.answer").status.status_code == StatusCode.ERROR


@pytest.fixture(scope="module")
def graph(store: Store, support: str) -> dict[str, str]:
    store.add_relations(
        support,
        [
            ("Trash", "keeps items for", "30 days"),
            ("Trash", "is in", "the sidebar"),
            ("Business plan", "can extend", "Trash retention"),
        ],
        source="recover-deleted-note.md",
    )
    return {f"{r.subject}|{r.relation}": r.label for r in store.relations(support)}


def test_retrieval_down_with_graph_context_gives_graph_only(
    down_store: Store, support: str, graph: dict[str, str], traced: Traced
) -> None:
    label = graph["Trash|keeps items for"]
    fake = FakeLLM([f"According to the knowledge graph, the trash keeps items for 30 days [{label}]."])
    ctx = new(
        QUESTION, store=down_store, llm=fake, collections=support, mode="vector", telemetry=traced.telemetry
    )
    ctx = ctx.enrich(entity="trash").search().rerank().answer()
    assert ctx.ok and ctx.mode == "graph-only"
    assert ctx.results[0].error is not None and ctx.results[0].stop_reason == StopReason.RETRIEVAL_FAILED
    assert ctx.hits == () and ctx.context_used == ()
    assert ctx.citations == (label,) and ctx.grounded is True
    assert "retrieval-failed" in [d.kind for d in ctx.degradations]
    system = fake.calls[0][0]["content"]
    assert "knowledge-graph facts" in system and f"[{label}] Trash --keeps items for--> 30 days" in system
    search_span = traced.span("agentrag.search")
    assert search_span.status.status_code == StatusCode.ERROR
    assert attributes(search_span)["agentrag.mode"] == "retrieval-failed"
    answer_span = traced.span("agentrag.answer")
    assert attributes(answer_span)["agentrag.answer.mode"] == "graph-only"
    assert answer_span.status.status_code == StatusCode.UNSET


def test_graph_only_without_an_llm_lists_the_cited_facts(
    down_store: Store, support: str, graph: dict[str, str]
) -> None:
    ctx = (
        new(QUESTION, store=down_store, collections=support, mode="vector")
        .enrich(entity="Trash")
        .search()
        .answer()
    )
    assert ctx.mode == "graph-only" and ctx.grounded is True
    assert graph["Trash|keeps items for"] in ctx.citations
    assert "Trash --keeps items for--> 30 days" in (ctx.answer_text or "")


def test_everything_down_is_a_retrieval_error(down_store: Store, support: str, traced: Traced) -> None:
    fake = FakeLLM(fail_with=LLMError("down"))
    ctx = new(
        QUESTION, store=down_store, llm=fake, collections=support, mode="vector", telemetry=traced.telemetry
    )
    ctx = ctx.search().rerank().answer()
    assert isinstance(ctx.error, RetrievalError)
    assert "EmbeddingError" in str(ctx.error)
    assert fake.calls == []
    assert ctx.steps[-1].name == "answer" and ctx.steps[-1].error
    assert traced.span("agentrag.search").status.status_code == StatusCode.ERROR
    assert traced.span("agentrag.answer").status.status_code == StatusCode.ERROR
    with pytest.raises(RetrievalError):
        ctx.raise_for_error()


# ---- streaming ----------------------------------------------------------------------------------
def reply_for(store: Store, collection: str) -> str:
    ids = first_ids(store, collection)
    return f"Deleted notes are moved to the trash [{ids[0]}]. Restore them with one click. Or not [chk_nope]."


def test_stream_yields_pieces_then_the_same_context(store: Store, support: str, traced: Traced) -> None:
    reply = reply_for(store, support)
    base = new(QUESTION, store=store, collections=support, telemetry=traced.telemetry).search().rerank()
    plain = answer(with_llm(base, FakeLLM([reply])))
    items = list(answer_stream(with_llm(base, FakeLLM([reply], stream_chunk_size=8))))
    pieces, final = [p for p in items[:-1] if isinstance(p, str)], items[-1]
    assert len(pieces) == len(items) - 1 >= 2
    assert "".join(pieces) == reply
    assert isinstance(final, Context)
    assert final == plain
    assert final.ungrounded_claims and final.invalid_citations == ("chk_nope",)
    streamed_span = traced.spans("agentrag.answer")[-1]
    chat = [
        s for s in traced.spans("chat fake") if s.parent and s.parent.span_id == streamed_span.context.span_id
    ]
    assert len(chat) == 1, "the model-call span nests under the streamed answer span"
    assert traced.metric_points("llm.streaming.chunks")


def with_llm(ctx: Context, llm: Any) -> Context:
    from dataclasses import replace

    return ctx.evolve(deps=replace(ctx.deps, llm=llm))


def test_stream_with_suppression_equals_answer(store: Store, support: str) -> None:
    reply = reply_for(store, support)
    base = new(QUESTION, store=store, collections=support).search().rerank()
    plain = with_llm(base, FakeLLM([reply])).answer(suppress_ungrounded=True)
    final = list(with_llm(base, FakeLLM([reply])).answer_stream(suppress_ungrounded=True))[-1]
    assert final == plain and final.ungrounded_claims


def test_stream_when_the_llm_fails_equals_answer(store: Store, support: str) -> None:
    base = new(QUESTION, store=store, collections=support).search().rerank()
    plain = with_llm(base, FakeLLM(fail_with=LLMError("down"))).answer()
    items = list(answer_stream(with_llm(base, FakeLLM(fail_with=LLMError("down")))))
    assert len(items) == 1 and items[0] == plain and plain.mode == "raw-results"


def test_stream_without_a_model_call_yields_the_whole_answer(store: Store, empty_collection: str) -> None:
    items = list(new(QUESTION, store=store, collections=empty_collection).search().answer_stream())
    assert len(items) == 2 and isinstance(items[0], str) and isinstance(items[1], Context)
    assert items[0] == items[1].answer_text


def test_stream_of_an_errored_context_returns_it(store: Store) -> None:
    ctx = new(QUESTION, store=store).search(collections=["no_such_collection"])
    assert ctx.error is not None
    assert list(answer_stream(ctx)) == [ctx]


def test_stream_closed_early_ends_its_span(store: Store, support: str, traced: Traced) -> None:
    reply = reply_for(store, support)
    ctx = new(
        QUESTION, store=store, llm=FakeLLM([reply]), collections=support, telemetry=traced.telemetry
    ).search()
    stream = answer_stream(ctx)
    assert isinstance(next(stream), str)
    stream.close()
    assert attributes(traced.span("agentrag.answer"))["agentrag.cancelled"] is True


async def test_async_stream_and_async_answer_equal_the_sync_ones(store: Store, support: str) -> None:
    reply = reply_for(store, support)
    base = await asearch(new(QUESTION, store=store, collections=support))
    plain = with_llm(base, FakeLLM([reply])).answer()
    items = [item async for item in aanswer_stream(with_llm(base, FakeLLM([reply])))]
    assert len(items) >= 3 and "".join(i for i in items if isinstance(i, str)) == reply
    assert items[-1] == plain
    assert await aanswer(with_llm(base, FakeLLM([reply]))) == plain


async def test_async_stream_failure_no_model_and_error_paths_equal_the_sync_ones(
    store: Store, support: str, empty_collection: str
) -> None:
    base = new(QUESTION, store=store, collections=support).search().rerank()
    failing = [item async for item in aanswer_stream(with_llm(base, FakeLLM(fail_with=LLMError("down"))))]
    assert failing == list(answer_stream(with_llm(base, FakeLLM(fail_with=LLMError("down")))))
    assert len(failing) == 1 and failing[0].mode == "raw-results"
    empty = new(QUESTION, store=store, collections=empty_collection).search()
    items = [item async for item in aanswer_stream(empty)]
    assert items == list(answer_stream(empty)) and len(items) == 2 and items[0] == items[1].answer_text
    errored = new(QUESTION, store=store).search(collections=["no_such_collection"])
    assert [item async for item in aanswer_stream(errored)] == [errored]


async def test_async_twins_degrade_too(down_store: Store, support: str) -> None:
    ctx = await asearch(
        new(
            QUESTION,
            store=down_store,
            llm=FakeLLM(fail_with=LLMError("x")),
            collections=support,
            mode="vector",
        )
    )
    ctx = await aanswer(ctx)
    assert isinstance(ctx.error, RetrievalError)


# ---- audit, latencies, metrics ------------------------------------------------------------------
def test_audit_events_after_search_and_answer(store: Store, support: str) -> None:
    sink = ListAuditSink()
    ids = first_ids(store, support)
    ctx = new(
        QUESTION,
        store=store,
        llm=FakeLLM([f"Deleted notes go to the trash [{ids[0]}]."]),
        collections=support,
        audit=sink,
    )
    ctx = ctx.search()
    assert [e.type for e in sink.events] == [AuditEventType.RETRIEVAL_EXECUTED]
    ctx = ctx.rerank().answer()
    retrieval, generation = sink.events
    assert retrieval.query_id == ctx.query_id == generation.query_id
    assert retrieval.details["chunk_count"] == len(ctx.hits)
    assert set(retrieval.details["chunk_ids"]) == {h.chunk_id for h in ctx.hits}
    assert retrieval.details["model_version_match"] is True
    assert generation.type == AuditEventType.GENERATION_EXECUTED
    assert generation.details["cited_chunk_ids"] == [ids[0]]
    assert generation.details["grounded"] is True and generation.details["mode"] == "full"
    assert generation.details["model"] == "fake"


def test_a_failing_audit_sink_never_fails_the_query(store: Store, support: str, caplog: Any) -> None:
    class Broken:
        def emit(self, event: Any) -> None:
            raise RuntimeError("sink down")

    ctx = new(QUESTION, store=store, collections=support, audit=Broken()).search().answer()
    assert ctx.ok and ctx.answer_text
    assert "audit sink" in caplog.text


def test_latencies_tokens_and_metrics(store: Store, support: str, traced: Traced) -> None:
    ids = first_ids(store, support)
    ctx = new(
        QUESTION,
        store=store,
        llm=FakeLLM([f"Use the trash [{ids[0]}]."]),
        collections=support,
        telemetry=traced.telemetry,
    )
    ctx = ctx.search().rerank().answer()
    assert {"retrieval", "context", "generation", "total"} <= set(ctx.latencies_ms)
    assert ctx.tokens["input"] > 0 and ctx.tokens["output"] > 0
    assert ctx.model_version_match is True
    expected = {
        "retriever.search.duration_ms",
        "retriever.search.calls",
        "retriever.results_returned",
        "context.build.duration_ms",
        "context.tokens_used",
        "context.chunks_included",
        "llm.generate.duration_ms",
        "llm.generate.calls",
        "llm.tokens_input",
        "llm.tokens_output",
        "pipeline.query.duration_ms",
        "pipeline.query.calls",
    }
    assert expected <= traced.metric_names()
    assert traced.metric_points("retriever.search.calls")[0].attributes == {"retriever_type": "hybrid"}


def test_pipeline_errors_are_counted_by_stage(store: Store, traced: Traced) -> None:
    ctx = (
        new(QUESTION, store=store, telemetry=traced.telemetry)
        .search(collections=["no_such_collection"])
        .answer()
    )
    assert ctx.error is not None
    points = traced.metric_points("pipeline.query.errors")
    assert points and points[0].attributes == {"stage": "search", "error_type": "CollectionNotFoundError"}
    assert "retriever.search.errors" in traced.metric_names()


def test_gate_no_retrieval_answers_without_sources(store: Store) -> None:
    ctx = new("hello there", store=store, llm=FakeLLM(["Hi! How can I help?"])).evolve(retrieve=False)
    ctx = ctx.search().answer()
    assert ctx.answer_text == "Hi! How can I help?"
    assert ctx.grounded is None and ctx.ungrounded_claims == ()
    ctx = new("hello there", store=store).evolve(retrieve=False).search().answer()
    assert ctx.grounded is None and "no language model" in (ctx.answer_text or "")
