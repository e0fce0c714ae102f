"""The agentic pipeline on the real store: composition, errors, stop reasons, local strategies."""

from __future__ import annotations

import json
import re

import pytest

import agentrag as ar
from agentrag.context import Budget, StopReason
from agentrag.errors import InvalidInputError, LLMOutputError, LLMTimeoutError
from agentrag.testing import FakeLLM
from tests.pipeline_fixtures import NAMES, Q_COMPARE, Q_PAGINATE, prompt_kind, sample_store, scripted, stable

__all__ = ["sample_store"]  # the fixture is used by name


def _functional(ctx: ar.Context) -> ar.Context:
    return ar.answer(ar.search(ar.decompose(ar.route(ctx, collections=NAMES)), self_correct=True))


def _chain(ctx: ar.Context) -> ar.Context:
    return ctx.route(collections=NAMES).decompose().search(self_correct=True).answer()


def _pipes(ctx: ar.Context) -> ar.Context:
    return ctx | ar.route(collections=NAMES) | ar.decompose() | ar.search(self_correct=True) | ar.answer()


@pytest.mark.parametrize("with_llm", [False, True])
def test_three_composition_forms_give_identical_contexts(sample_store, with_llm: bool) -> None:
    results = []
    for form in (_functional, _chain, _pipes):
        llm = scripted() if with_llm else None
        results.append(form(ar.new(Q_PAGINATE, store=sample_store, llm=llm)))
    assert results[0] == results[1] == results[2]
    ctx = results[0]
    assert ctx.ok and ctx.answer_text
    # with the hashing test embedder (not what abstention is calibrated for) the local answer may abstain
    assert ctx.citations or (not with_llm and ctx.mode == "abstained")
    assert {s.name for s in ctx.steps} == {"route", "decompose", "search", "answer"}


async def test_async_twins_give_the_same_context(sample_store) -> None:
    sync = _pipes(ar.new(Q_COMPARE, store=sample_store))
    ctx = ar.new(Q_COMPARE, store=sample_store)
    async_ctx = await ar.arun(
        ctx, ar.route(collections=NAMES), ar.decompose(), ar.search(self_correct=True), ar.answer()
    )
    assert async_ctx == sync
    assert await ar.asearch(ar.new(Q_PAGINATE, store=sample_store, collections=NAMES)) == ar.search(
        ar.new(Q_PAGINATE, store=sample_store, collections=NAMES)
    )


def test_partial_pipeline_route_then_plain_search(sample_store) -> None:
    ctx = ar.new(Q_PAGINATE, store=sample_store).route(collections=NAMES)
    assert ctx.collections and ctx.results == ()
    hits = sample_store.search(ctx.question, collections=ctx.collections[0])
    assert len(hits) > 0


def test_unknown_options_raise_type_error_at_call_time(sample_store) -> None:
    ctx = ar.new("q", store=sample_store)
    with pytest.raises(TypeError, match="self_corect"):
        ar.search(self_corect=True)  # caught when the pipe is built, before any context exists
    with pytest.raises(TypeError):
        ctx.search(bogus=1)
    with pytest.raises(TypeError):
        ar.new("q", store=sample_store, colections=["api"])  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ar.search("not a context")  # type: ignore[arg-type]


def test_option_names_found_valid_once_are_not_bound_again_but_others_still_raise() -> None:
    step = ar.search
    step(limit=3, mode="vector")  # valid: remembered by its set of names
    assert frozenset({"limit", "mode"}) in step._checked
    step(mode="lexical", limit=4)  # the same names, other values: still valid
    with pytest.raises(TypeError, match="bogus"):
        step(limit=3, bogus=1)  # a superset with an unknown name is checked, not taken from the cache
    with pytest.raises(TypeError, match="self_corect"):
        step(self_corect=True)
    assert not any("bogus" in names or "self_corect" in names for names in step._checked)


def test_bad_option_values_raise_typed_errors(sample_store) -> None:
    ctx = ar.new("q", store=sample_store)
    with pytest.raises(InvalidInputError):
        ctx.search(mode="fuzzy")
    with pytest.raises(InvalidInputError):
        ctx.search(max_iterations=0)
    with pytest.raises(InvalidInputError):
        ctx.route(collections="api")
    with pytest.raises(InvalidInputError):
        ar.new("q", limit=0)
    with pytest.raises(InvalidInputError, match="fusion"):
        ar.new("q", fusion="linear")
    with pytest.raises(ar.EmptyQueryError):
        ar.new("   \n ")
    with pytest.raises(InvalidInputError, match="needs an LLM"):
        ctx.gate(strategy="llm")


def test_the_search_step_uses_the_fusion_of_the_context(sample_store) -> None:
    orders = {
        fusion: sample_store.search(Q_PAGINATE, collections="api", fusion=fusion).chunk_ids
        for fusion in ("rrf", "relative_score")
    }
    assert orders["rrf"] != orders["relative_score"]  # so the step below could not pass by ignoring it
    for fusion in ("rrf", "relative_score"):
        ctx = ar.new(Q_PAGINATE, store=sample_store, fusion=fusion).search(collections=["api"])
        expected = sample_store.search(Q_PAGINATE, collections="api", fusion=fusion)
        assert ctx.options.fusion == fusion
        assert [h.chunk_id for h in ctx.results[0].hits] == expected.chunk_ids


def test_question_is_preprocessed_and_long_ones_truncated_with_warning() -> None:
    assert ar.new("  how   do\nI  page ").question == "how do I page"
    ctx = ar.new("x" * 10_050)
    assert len(ctx.question) == 10_000 and "truncated" in ctx.warnings[0]


def test_runtime_failure_sets_error_and_later_steps_pass_through(sample_store) -> None:
    llm = FakeLLM([LLMTimeoutError("no reply in 60s")])
    ctx = ar.new(Q_PAGINATE, store=sample_store, llm=llm).route(collections=NAMES)
    assert isinstance(ctx.error, LLMTimeoutError)
    assert ctx.steps[-1].error and ctx.steps[-1].name == "route"
    for later in (ar.decompose(), ar.search(self_correct=True), ar.rerank(), ar.answer()):
        assert (ctx | later) is ctx
    with pytest.raises(LLMTimeoutError):
        ctx.raise_for_error()
    assert ar.new("fine").raise_for_error().ok


def test_unparseable_structured_reply_is_a_typed_error_after_one_repair(sample_store) -> None:
    llm = FakeLLM(["not json", "still not json"])
    ctx = ar.new(Q_PAGINATE, store=sample_store, llm=llm).decompose()
    assert isinstance(ctx.error, LLMOutputError)
    assert [c.repair for c in ctx.llm_calls] == [False, True]


def test_route_rejects_collections_it_was_not_offered(sample_store) -> None:
    llm = FakeLLM(
        [json.dumps({"collections": ["secret"]}), json.dumps({"collections": ["api"], "reasoning": "r"})]
    )
    ctx = ar.new(Q_PAGINATE, store=sample_store, llm=llm).route(collections=NAMES)
    assert ctx.collections == ("api",) and len(ctx.llm_calls) == 2 and ctx.llm_calls[1].repair


def test_gate_skips_retrieval_for_small_talk(sample_store) -> None:
    ctx = ar.new("Hello!", store=sample_store) | ar.gate() | ar.search() | ar.rerank()
    assert ctx.retrieve is False and ctx.results == ()
    assert [s.skipped for s in ctx.steps][1:] == ["gate decided no retrieval is needed"] * 2
    assert (ar.new(Q_PAGINATE, store=sample_store) | ar.gate()).retrieve is True


def test_local_route_prefers_the_api_collection_for_api_questions(sample_store, local_embedder) -> None:
    store = ar.Store(engine=sample_store.engine, embedder=local_embedder, migrate=False)
    ctx = ar.new(Q_PAGINATE, store=store).route(collections=NAMES)
    assert ctx.collections is not None and ctx.collections[0] == "api"
    assert ctx.steps[-1].strategy == "local:embedding-similarity"
    assert "api=" in (ctx.routing_reasoning or "")
    store.close()


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (Q_PAGINATE, ("How do I paginate through the notes API?", "What happens when I hit the rate limit?")),
        (
            Q_COMPARE,
            (
                "What are the support response times for the Team and Business plans?",
                "What are the API rate limits for the Team and Business plans?",
            ),
        ),
        ("What is SSO? How do I reset 2FA?", ("What is SSO?", "How do I reset 2FA?")),
        ("How do I export my notes?", ("How do I export my notes?",)),
    ],
)
def test_local_decompose_splits_conjunctions_and_comparisons(
    question: str, expected: tuple[str, ...]
) -> None:
    assert ar.new(question).decompose().sub_questions == expected


def test_search_covers_every_sub_question_and_collection(sample_store) -> None:
    ctx = ar.new(Q_COMPARE, store=sample_store).decompose().search(collections=["support", "api"])
    assert [(r.question, r.collection) for r in ctx.results] == [
        (q, c) for q in ctx.sub_questions or () for c in ("support", "api")
    ]
    assert all(r.stop_reason is StopReason.SINGLE_PASS for r in ctx.results)


def test_self_correct_local_never_retries_a_query_and_stops_with_a_reason(sample_store) -> None:
    ctx = ar.new(Q_PAGINATE, store=sample_store, threshold=1.01, collections=NAMES)
    ctx = ctx.search(self_correct=True, max_iterations=3)
    for record in ctx.results:
        queries = [q for it in record.iterations for q in it.queries]
        assert len(queries) == len(set(queries))
        assert len(record.iterations) <= 3
        assert record.stop_reason in (StopReason.MAX_ITERATIONS, StopReason.NO_NEW_EVIDENCE)


@pytest.mark.parametrize(
    ("llm_kwargs", "budget", "reason"),
    [
        ({"sufficient": True}, None, StopReason.SUFFICIENT),
        ({"sufficient": False}, None, StopReason.MAX_ITERATIONS),
        ({"sufficient": False, "rewrite": Q_PAGINATE}, None, StopReason.NO_NEW_EVIDENCE),
        ({"sufficient": "garbage"}, None, StopReason.JUDGE_UNPARSEABLE),
        ({"sufficient": False}, Budget(max_llm_calls=1), StopReason.BUDGET_EXHAUSTED),
    ],
)
def test_self_correct_stop_reasons(sample_store, llm_kwargs, budget, reason) -> None:  # type: ignore[no-untyped-def]
    llm = scripted(**llm_kwargs)
    ctx = ar.new(Q_PAGINATE, store=sample_store, llm=llm, collections=["api"], budget=budget)
    ctx = ctx.search(self_correct=True, max_iterations=3)
    (record,) = ctx.results
    assert record.stop_reason is reason
    assert len(record.iterations) <= 3
    if budget is not None:
        assert len(ctx.llm_calls) <= budget.max_llm_calls  # type: ignore[operator]


def test_llm_down_inside_the_loop_falls_back_visibly(sample_store) -> None:
    def reply(messages):  # type: ignore[no-untyped-def]
        raise LLMTimeoutError("timeout") if prompt_kind(messages) == "sufficiency" else AssertionError

    ctx = ar.new(Q_PAGINATE, store=sample_store, llm=FakeLLM(fn=reply), collections=["api"], threshold=0.0)
    ctx = ctx.search(self_correct=True)
    assert ctx.ok
    assert ctx.results[0].stop_reason is StopReason.SUFFICIENT
    assert [(d.step, d.kind) for d in ctx.degradations] == [("search", "local-judge")]


def test_llm_down_for_the_rewrite_falls_back_to_local_feedback_visibly(sample_store) -> None:
    """The judge answers, the rewrite call fails: the unit rewrites by pseudo-relevance feedback,
    judges locally from then on, and records one ``local-rewrite`` degradation."""
    kinds: list[str] = []

    def reply(messages):  # type: ignore[no-untyped-def]
        kinds.append(prompt_kind(messages))
        if kinds[-1] == "sufficiency":
            return json.dumps({"sufficient": False, "reasoning": "not yet"})
        raise LLMTimeoutError("timeout")

    ctx = ar.new(Q_PAGINATE, store=sample_store, llm=FakeLLM(fn=reply), collections=["api"], threshold=0.0)
    ctx = ctx.search(self_correct=True, max_iterations=3)
    assert ctx.ok
    (record,) = ctx.results
    assert [(d.step, d.kind) for d in ctx.degradations] == [("search", "local-rewrite")]
    assert kinds == ["sufficiency", "rewrite"]  # no LLM call after the failure
    assert len(record.iterations) >= 2  # the local rewrite ran a second search
    assert record.iterations[1].queries[0] != Q_PAGINATE
    assert record.iterations[1].sufficient is True  # judged locally: threshold 0.0
    assert record.stop_reason is StopReason.SUFFICIENT


def test_a_units_llm_prompts_share_one_delimiter_and_requests_do_not(sample_store) -> None:
    """Retrieved text in a unit's sufficiency and rewrite prompts is fenced by one random delimiter
    (drawn when the first prompt is built); the next request draws another."""

    def fences_of_one_request() -> list[tuple[str, set[str]]]:
        fences: list[tuple[str, set[str]]] = []

        def reply(messages):  # type: ignore[no-untyped-def]
            text = "\n".join(m["content"] for m in messages)
            fences.append((prompt_kind(messages), set(re.findall(r"<<<(SOURCE-[0-9A-F]{12})>>>", text))))
            if fences[-1][0] == "sufficiency":
                return json.dumps({"sufficient": len(fences) > 1, "reasoning": "r"})
            return json.dumps({"queries": ["pagination cursor limit"], "reasoning": "r"})

        ctx = ar.new(Q_PAGINATE, store=sample_store, llm=FakeLLM(fn=reply), collections=["api"])
        assert ctx.search(self_correct=True, max_iterations=3).ok
        return fences

    first, second = fences_of_one_request(), fences_of_one_request()
    assert [kind for kind, _ in first] == ["sufficiency", "rewrite", "sufficiency"]
    assert all(len(fence) == 1 for _, fence in first + second)  # every prompt fences what it shows
    assert len(set().union(*(fence for _, fence in first))) == 1  # one delimiter per unit
    assert first[0][1] != second[0][1]


def test_rerank_heuristic_spreads_sources_and_llm_orders_by_label(sample_store) -> None:
    ctx = ar.new(Q_COMPARE, store=sample_store, limit=8).search(collections=["support", "api"])
    ranked = ctx.rerank().ranked
    assert ranked is not None and [h.rank for h in ranked] == list(range(1, len(ranked) + 1))
    first_docs = [h.document_id for h in ranked[:3]]
    assert len(set(first_docs)) == len(first_docs)  # three different documents lead
    llm_ranked = (
        ar.new(Q_COMPARE, store=sample_store, llm=scripted(), limit=8)
        .search(collections=["support", "api"])
        .rerank(strategy="llm")
        .ranked
    )
    assert llm_ranked is not None and {h.chunk_id for h in llm_ranked} == {h.chunk_id for h in ranked}


def test_scripted_run_snapshot(sample_store, snapshot) -> None:  # type: ignore[no-untyped-def]
    ctx = ar.new(Q_PAGINATE, store=sample_store, llm=scripted(sufficient=False))
    ctx = (
        ctx
        | ar.gate()
        | ar.route(collections=NAMES)
        | ar.search(self_correct=True, max_iterations=2)
        | ar.rerank()
        | ar.answer()
    )
    assert stable(ctx) == snapshot


def test_local_run_snapshot(sample_store, snapshot) -> None:  # type: ignore[no-untyped-def]
    ctx = _pipes(ar.new(Q_COMPARE, store=sample_store))
    assert stable(ctx) == snapshot


def test_filters_are_validated_at_new_and_applied_in_search(sample_store) -> None:
    with pytest.raises(ar.FilterError):
        ar.new("q", filters={"colour": "red"})
    ctx = ar.new(Q_PAGINATE, store=sample_store, filters={"classification": "confidential"}, limit=10)
    assert isinstance(ctx.options.filters, ar.Filters)
    ctx = ctx.search(collections=["api", "support"])
    assert ctx.hits and {h.classification for h in ctx.hits} == {"confidential"}


def test_a_question_is_embedded_once_per_pipeline(sample_store) -> None:
    embedder = sample_store.embedder
    question = "How do I paginate through the notes API with a cursor, page after page?"
    sample_store.clear_query_cache()
    embedder.calls.clear()
    ctx = ar.new(question, store=sample_store).route(collections=NAMES).search(collections=NAMES)
    assert len(ctx.results) == len(NAMES)  # three searches, one per collection
    embedded = [text for call in embedder.calls for text in call]
    assert embedded.count(question) == 1  # route's embedding is reused by every search
