"""Invariants of the pipeline, for arbitrary step sequences and arbitrary LLM replies."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import agentrag as ar
from agentrag.context import Context, StopReason
from agentrag.errors import AgentragError, LLMTimeoutError
from agentrag.testing import FakeLLM
from tests.pipeline_fixtures import NAMES, Q_COMPARE, Q_PAGINATE, sample_store

__all__ = ["sample_store"]

MAX_ITERATIONS = 2


def _frozen_view(ctx: Context) -> dict[str, Any]:
    view = {f.name: copy.deepcopy(getattr(ctx, f.name)) for f in dataclasses.fields(ctx) if f.name != "deps"}
    view["error"] = repr(ctx.error)  # exceptions compare by identity; their repr is what must not change
    return view


json_replies = st.one_of(
    st.just(json.dumps({"retrieve": True})),
    st.just(json.dumps({"retrieve": False})),
    st.just(json.dumps({"collections": ["api"], "reasoning": "x"})),
    st.just(json.dumps({"collections": ["nope"]})),
    st.just(json.dumps({"sub_questions": ["a?", "b?"]})),
    st.just(json.dumps({"sub_questions": []})),
    st.just(json.dumps({"sufficient": False})),
    st.just(json.dumps({"sufficient": True})),
    st.just(json.dumps({"queries": ["pagination cursor"]})),
    st.just(json.dumps({"queries": []})),
    st.just(json.dumps({"ranking": ["chk_0000000000000000"]})),
)
replies = st.lists(
    st.one_of(
        json_replies,
        st.text(max_size=40),  # garbage, empty
        st.just('```json\n{"sufficient": tru\n```'),
        st.just("[1, 2, 3]"),
        st.just("Sure! [chk_x] is the answer."),
        st.builds(LLMTimeoutError, st.just("timeout")),
    ),
    max_size=30,
)
steps = st.lists(
    st.sampled_from(
        [
            ar.gate(),
            ar.rewrite(max_rewrites=2),
            ar.route(collections=NAMES),
            ar.decompose(),
            ar.search(),
            ar.search(self_correct=True, max_iterations=MAX_ITERATIONS),
            ar.rerank(),
            ar.answer(),
        ]
    ),
    min_size=1,
    max_size=6,
)

# LLM calls a step may make at most: each structured call may be repaired once.
PER_STEP = {"gate": 2, "rewrite": 2, "route": 2, "decompose": 2, "rerank": 2, "answer": 1}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(  # the gate says there is nothing to look up, then an LLM answers: nothing to check
    pipeline=[ar.gate(), ar.answer()],
    script=[json.dumps({"retrieve": False}), "Paris."],
    use_llm=True,
    question=Q_PAGINATE,
)
@given(
    pipeline=steps, script=replies, use_llm=st.booleans(), question=st.sampled_from([Q_PAGINATE, Q_COMPARE])
)
def test_any_pipeline_ends_typed_bounded_and_never_mutates(
    sample_store, pipeline, script, use_llm, question
) -> None:  # type: ignore[no-untyped-def]
    # The sample collections by name: the session database also holds other tests' (scoped) ones.
    llm = FakeLLM(list(script)) if use_llm else None
    ctx = ar.new(question, store=sample_store, llm=llm, collections=NAMES)
    bound = 0
    for bound_step in pipeline:
        before = _frozen_view(ctx)
        errored = ctx.error is not None
        out = ctx | bound_step
        assert _frozen_view(ctx) == before  # the input is untouched
        if errored:
            assert out is ctx  # an errored context passes through unchanged
        units = len(out.questions) * 3
        bound += PER_STEP.get(bound_step.step.name, units * MAX_ITERATIONS * 2 * 2)
        ctx = out
    assert ctx.error is None or isinstance(ctx.error, AgentragError)
    assert len(ctx.llm_calls) <= bound
    for record in ctx.results:
        assert isinstance(record.stop_reason, StopReason)
        assert 1 <= len(record.iterations) <= MAX_ITERATIONS
    if ctx.answer_text is not None and ctx.error is None:
        if ctx.retrieve is False:  # the gate said nothing to look up: nothing to check, nothing cited
            assert ctx.grounded is None and ctx.citations == ()
        else:
            assert ctx.grounded in (True, False)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pipeline=steps)
def test_any_step_on_an_errored_context_returns_it_unchanged(sample_store, pipeline) -> None:  # type: ignore[no-untyped-def]
    ctx = ar.new(Q_PAGINATE, store=sample_store, llm=FakeLLM([LLMTimeoutError("down")])).gate()
    assert ctx.error is not None
    for bound_step in pipeline:
        assert (ctx | bound_step) is ctx
