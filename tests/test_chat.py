"""Conversations (new(history=...), condense, gate with history), RAGConfig and one chat turn."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

import agentrag as ar
from agentrag.chat import GUIDANCE, RAGConfig, retrieve_turn, scope_from_configurable, with_rag_context
from agentrag.steps.condense import condense_local, is_follow_up
from agentrag.steps.new import parse_history
from agentrag.testing import FakeLLM
from tests.pipeline_fixtures import NAMES, sample_store

__all__ = ["sample_store"]

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
HISTORY = [
    {"role": "user", "content": "How do I recover a deleted note?"},
    {"role": "assistant", "content": "Restore it from the trash [chk_1]."},
]


# ---- history -------------------------------------------------------------------------------------
def test_history_from_openai_dicts_and_langchain_messages_is_the_same() -> None:
    as_dicts = parse_history(HISTORY)
    as_langchain = parse_history(
        [SystemMessage("be nice"), HumanMessage(HISTORY[0]["content"]), AIMessage(HISTORY[1]["content"])]
    )
    assert as_dicts == as_langchain
    assert [t.role for t in as_dicts] == ["user", "assistant"]
    parts = parse_history(
        [{"role": "user", "content": [{"type": "text", "text": "a  b"}, {"type": "image_url"}]}]
    )
    assert parts[0].content == "a b"
    assert parse_history([{"role": "tool", "content": "x"}, {"role": "user", "content": "  "}]) == ()


@pytest.mark.parametrize(
    ("history", "match"),
    [
        ([{"role": "robot", "content": "x"}], "unknown role 'robot'"),
        ([{"content": "x"}], "needs 'role' and 'content'"),
        ([42], "expected a"),
        ("hello", "must be a list"),
        ([{"role": "user", "content": 3}], "content must be"),
    ],
)
def test_bad_history_raises(history: Any, match: str) -> None:
    with pytest.raises(ar.InvalidInputError, match=match):
        ar.new("q", history=history)


def test_new_keeps_the_history_on_the_context() -> None:
    ctx = ar.new("how long is it kept?", history=HISTORY)
    assert [t.content for t in ctx.history] == [m["content"] for m in HISTORY]
    assert ctx.original_question is None


# ---- condense: local ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("message", "follow_up"),
    [
        ("how long is it kept?", True),
        ("And on Business?", True),
        ("What about the Enterprise plan?", True),
        ("Does that include webhooks?", True),
        ("Pricing?", True),
        ("How do I verify that the webhook signature is valid?", False),  # "that" as a conjunction
        ("How do I export my notes to Markdown?", False),
    ],
)
def test_is_follow_up(message: str, follow_up: bool) -> None:
    assert is_follow_up(message) is follow_up


def test_local_condense_replaces_a_pronoun_and_completes_an_ellipsis() -> None:
    history = parse_history(HISTORY)
    assert condense_local("how long is it kept?", history) == "How long is a deleted note kept?"
    assert (
        condense_local("how long is it kept there?", history)
        == "How long is a deleted note kept in the trash?"
    )
    assert condense_local("And in the API?", history) == "How do I recover a deleted note in the API?"
    assert condense_local("How do I export my notes to Markdown?", history) == (
        "How do I export my notes to Markdown?"
    )


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        # the reply ends on what it opens, emphasised as the interface names it; its opening "In the
        # sidebar" says where to click (an aside in parentheses is left out)
        (
            "In the sidebar, click **Trash** (or search with `is:trashed`). [chk_1]",
            "How long is a deleted note kept in the Trash?",
        ),
        ("Restore it from the trash (within 30 days).", "How long is a deleted note kept in the trash?"),
        # a button that is chosen, not opened, is no place: "there" stays
        ("Choose **Delete forever**.", "How long is a deleted note kept there?"),
    ],
)
def test_there_becomes_the_place_the_reply_ends_on(reply: str, expected: str) -> None:
    history = parse_history(
        [
            {"role": "user", "content": "How do I recover a deleted note?"},
            {"role": "assistant", "content": reply},
        ]
    )
    assert condense_local("how long is it kept there?", history) == expected


def test_local_condense_carries_the_topic_along_a_chain_of_follow_ups() -> None:
    history = parse_history(
        [
            {"role": "user", "content": "What are the API rate limits on the Team plan?"},
            {"role": "assistant", "content": "600 requests a minute."},
            {"role": "user", "content": "And on Business?"},
            {"role": "assistant", "content": "1,200."},
        ]
    )
    assert (
        condense_local("And on Business?", history[:2])
        == "What are the API rate limits on the Business plan?"
    )
    # the turn it follows, never a chain: no "regarding ... regarding ..."
    out = condense_local("what happens when I exceed them?", history)
    assert out == "What happens when I exceed the API rate limits on the Business plan?"
    money = parse_history(
        [
            {"role": "user", "content": "How do I get a refund?"},
            {"role": "assistant", "content": "Annual plans get a pro-rata refund within 30 days."},
        ]
    )
    assert condense_local("how long until the money is back?", money) == (
        "How long until the money is back, regarding a refund?"
    )


PREVIOUS_TURNS = (
    ("How do I empty the trash?", "Open the trash and choose Empty trash."),
    ("What are the API rate limits on the Team plan?", "600 requests per minute."),
    ("How do I recover a deleted note?", "Restore it from the trash."),
    ("Which plans include SSO?", "Business and Enterprise."),
)


@settings(max_examples=60, deadline=None)
@given(
    frame=st.sampled_from(
        [
            "What's the capital of {}?",
            "What is the population of {}?",
            "Who founded {}?",
            "When was {} released?",
            "How many employees does {} have?",
            "Where is the headquarters of {}?",
        ]
    ),
    name=st.sampled_from(["France", "Kubernetes", "Python 3.12", "the Rhine", "Norway", "PostgreSQL"]),
    turn=st.sampled_from(PREVIOUS_TURNS),
)
def test_a_standalone_question_passes_condense_unchanged(
    frame: str, name: str, turn: tuple[str, str]
) -> None:
    question = frame.format(name)
    history = parse_history([{"role": "user", "content": turn[0]}, {"role": "assistant", "content": turn[1]}])
    assert not is_follow_up(question)
    assert condense_local(question, history) == question


@pytest.mark.parametrize(
    ("previous", "message", "expected"),
    [
        # a pronoun is the previous question's subject, not the noun it ends on
        (
            "What are the API rate limits on the Team plan?",
            "what happens when I exceed it?",
            "What happens when I exceed the API rate limits on the Team plan?",
        ),
        (
            "What is the refund policy for annual plans?",
            "does it apply to monthly plans too?",
            "Does the refund policy for annual plans apply to monthly plans too?",
        ),
        # an elliptical "what if" reads as a person would type it
        (
            "How do I reset my password?",
            "and what if I don't get the email?",
            "How do I reset my password if I don't get the email?",
        ),
        # a question of its own after "and" is resolved as one, or kept when it stands alone
        (
            "How do I recover a deleted note?",
            "and how long is it kept?",
            "How long is a deleted note kept?",
        ),
        (
            "Which plans include SSO?",
            "and how long do deleted notes stay in the trash?",
            "How long do deleted notes stay in the trash?",
        ),
    ],
)
def test_local_condense_reads_as_a_person_would_type(previous: str, message: str, expected: str) -> None:
    history = parse_history([{"role": "user", "content": previous}, {"role": "assistant", "content": "OK."}])
    assert condense_local(message, history) == expected


def test_condense_step_keeps_both_questions_and_the_proof_has_them() -> None:
    ctx = ar.new("how long is it kept?", history=HISTORY) | ar.condense()
    assert ctx.original_question == "how long is it kept?"
    assert ctx.question == "How long is a deleted note kept?"
    assert ctx.steps[-1].strategy == "local:carry-topic"
    proof = ctx.proof().to_dict()
    assert proof["original_question"] == "how long is it kept?"
    assert proof["condensed_question"] == ctx.question
    assert ctx.condense().question == ctx.question  # idempotent: condensing again resolves the original


def test_condense_without_history_is_skipped() -> None:
    ctx = ar.condense(ar.new("How do I recover a deleted note?"))
    assert ctx.question == ctx.original_question == "How do I recover a deleted note?"
    assert ctx.steps[-1].skipped == "no earlier turns"


def test_condense_options_are_checked() -> None:
    with pytest.raises(TypeError, match="unknown option"):
        ar.condense(max_turn=3)
    with pytest.raises(ar.InvalidInputError, match="max_turns"):
        ar.condense(ar.new("q", history=HISTORY), max_turns=0)
    with pytest.raises(ar.InvalidInputError, match="needs an LLM"):
        ar.condense(ar.new("q", history=HISTORY), strategy="llm")


# ---- condense and gate: LLM --------------------------------------------------------------------
def test_llm_condense_records_the_prompt_and_fences_the_history() -> None:
    llm = FakeLLM(
        [json.dumps({"question": "How long is a deleted note kept in the trash?", "reasoning": "it"})]
    )
    ctx = ar.new("how long is it kept?", history=HISTORY, llm=llm) | ar.condense()
    assert ctx.question == "How long is a deleted note kept in the trash?"
    assert ctx.original_question == "how long is it kept?"
    assert ctx.steps[-1].strategy == "llm"
    call = ctx.llm_calls[-1]
    assert call.purpose == "condense"
    user = call.messages[-1]["content"]
    assert "assistant: Restore it from the trash [chk_1]." in user
    assert user.index("<<<SOURCE-") < user.index("user: How do I recover") < user.index("<<</SOURCE-")
    assert "Latest message: how long is it kept?" in user


def test_llm_condense_failure_falls_back_to_local_and_says_so() -> None:
    llm = FakeLLM(fail_with=ar.LLMTimeoutError("slow"))
    ctx = ar.new("how long is it kept?", history=HISTORY, llm=llm) | ar.condense()
    assert ctx.ok and ctx.question == "How long is a deleted note kept?"
    assert [d.kind for d in ctx.degradations] == ["local-condense"]
    assert ctx.steps[-1].strategy == "local:carry-topic"


def test_llm_gate_sees_the_history() -> None:
    llm = FakeLLM([json.dumps({"retrieve": True, "reasoning": "follow-up"})] * 2)
    ar.new("and how long is it kept?", history=HISTORY, llm=llm) | ar.gate()
    user = llm.calls[-1][-1]["content"]
    assert "user: How do I recover a deleted note?" in user and "Message: and how long is it kept?" in user
    ar.new("hello there", llm=llm) | ar.gate()
    assert "Earlier conversation" not in llm.calls[-1][-1]["content"]


# ---- RAGConfig -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"enabeld": True}, "enabeld: unknown setting"),
        ({"max_rewrites": 0}, "max_rewrites"),
        ({"max_rewrites": 4}, "max_rewrites"),
        ({"rrf_k": -1}, "rrf_k"),
        ({"per_method_k": 0}, "per_method_k"),
        ({"max_chunks": 30, "rerank_top_n": 10}, "max_chunks"),
        ({"per_method_k": 5, "rerank_top_n": 10}, "per_method_k"),
        ({"token_budget": 10}, "token_budget"),
        ({"mode": "semantic"}, "mode"),
        ({"collections": []}, "collections"),
        ({"rag": {"enabled": True, "bogus": 1}}, "bogus: unknown setting"),
    ],
)
def test_config_is_validated_at_construction(settings: dict[str, Any], match: str) -> None:
    with pytest.raises(ar.InvalidInputError, match=match):
        RAGConfig.model_validate(settings)


def test_config_takes_settings_nested_under_rag_and_is_frozen() -> None:
    config = RAGConfig.model_validate({"rag": {"enabled": False, "enable_query_rewrite": True}})
    assert config.enabled is False and config.enable_query_rewrite is True
    with pytest.raises(ar.InvalidInputError):
        RAGConfig(max_chunks=1, bogus=2)
    with pytest.raises(Exception, match="frozen"):
        config.enabled = True  # type: ignore[misc]


def test_scope_from_configurable() -> None:
    assert scope_from_configurable({"thread_id": "t"}) is None
    assert scope_from_configurable({"session_id": "s", "workspace_id": "w", "tenant_id": "t"}) == ar.Scope(
        tenant="t", workspace="w", session="s", include_shared=True
    )
    assert scope_from_configurable({"tenant_id": "t", "user_id": "ann", "groups": ["hr"]}) == ar.Scope(
        tenant="t", principal=ar.Principal(user="ann", groups=["hr"])
    )


# ---- one turn with the config's knobs honoured -----------------------------------------------------
TURN = [*HISTORY, {"role": "user", "content": "how long is it kept in the trash?"}]
LEX = {"collections": NAMES, "mode": "lexical"}


def test_disabled_runs_nothing(sample_store) -> None:
    result = retrieve_turn(sample_store, TURN, config={**LEX, "enabled": False})
    assert result.mode == "disabled" and result.context == "" and not result.citations
    assert result.ctx is not None and result.ctx.steps == ()


def test_query_rewrite_on_and_off(sample_store) -> None:
    off = retrieve_turn(sample_store, TURN, config=LEX)
    assert "rewrite" not in [s.name for s in off.ctx.steps]
    on = retrieve_turn(sample_store, TURN, config={**LEX, "enable_query_rewrite": True, "max_rewrites": 1})
    assert [s.name for s in on.ctx.steps] == ["gate", "condense", "rewrite", "search", "rerank"]
    assert len(on.ctx.rewrites) == 1
    assert on.ctx.results[0].iterations[0].queries == (on.ctx.question, *on.ctx.rewrites)


def test_llm_rerank_only_with_an_llm_and_the_fallback_is_recorded(sample_store) -> None:
    without = retrieve_turn(sample_store, TURN, config={**LEX, "enable_llm_rerank": True})
    assert without.ctx.steps[-1].strategy == "heuristic"
    assert [d.kind for d in without.ctx.degradations] == ["heuristic-rerank"]

    def reply(messages: list[dict[str, str]]) -> str:
        text = messages[-1]["content"]
        if '"ranking"' in messages[0]["content"]:
            import re

            return json.dumps({"ranking": re.findall(r"\[(chk_[0-9a-f]+)\]", text)[::-1]})
        if '"retrieve"' in messages[0]["content"]:
            return json.dumps({"retrieve": True})
        return json.dumps({"question": "How long are deleted notes kept in the trash?"})

    llm = FakeLLM(fn=reply)
    with_llm = retrieve_turn(sample_store, TURN, config={**LEX, "enable_llm_rerank": True}, llm=llm)
    assert with_llm.ctx.steps[-1].strategy == "llm" and not with_llm.ctx.degradations
    assert [c.purpose for c in with_llm.ctx.llm_calls] == ["gate", "condense", "rerank"]


def test_search_knobs_reach_the_store(sample_store) -> None:
    hybrid = {"collections": ["support"], "mode": "hybrid"}
    narrow = retrieve_turn(
        sample_store, TURN, config={**hybrid, "per_method_k": 3, "rerank_top_n": 3, "max_chunks": 3}
    )
    ranks = [r for h in narrow.ctx.hits for r in (h.vector_rank, h.lexical_rank) if r is not None]
    assert ranks and max(ranks) <= 3  # each leg kept its top 3
    wide = retrieve_turn(sample_store, TURN, config={**hybrid, "rerank_top_n": 10})
    assert len(wide.ctx.hits) == 10
    assert max(r for h in wide.ctx.hits for r in (h.vector_rank, h.lexical_rank) if r is not None) > 3
    # rrf_k is RRF's constant: it applies with fusion="rrf" (relative_score, the default, refuses it)
    rrf = retrieve_turn(sample_store, TURN, config={**hybrid, "rerank_top_n": 10}, fusion="rrf")
    sharp = retrieve_turn(sample_store, TURN, config={**hybrid, "rrf_k": 1, "rerank_top_n": 10}, fusion="rrf")
    assert max(h.score for h in sharp.ctx.hits) > max(h.score for h in rrf.ctx.hits)
    assert max(h.score for h in sharp.ctx.hits) <= 2 / (1 + 1)
    with pytest.raises(ar.InvalidInputError, match="rrf_k"):
        retrieve_turn(sample_store, TURN, config={**hybrid, "rrf_k": 1})


def test_context_is_bounded_by_max_chunks_and_the_token_budget(sample_store) -> None:
    roomy = retrieve_turn(sample_store, TURN, config={**LEX, "max_chunks": 6})
    assert 1 < len(roomy.citations) <= 6
    one = retrieve_turn(sample_store, TURN, config={**LEX, "max_chunks": 1})
    assert len(one.citations) == 1
    tight = retrieve_turn(sample_store, TURN, config={**LEX, "token_budget": 150})
    assert len(tight.citations) < len(roomy.citations)
    assert len(tight.context) < len(roomy.context)
    for result in (roomy, one, tight):
        ids = [c["label"] for c in result.citations]
        assert len(ids) == len(set(ids))
        assert result.context.count("<<</SOURCE-") == len(ids) + 1  # + the notice naming the marker


def test_adjacent_chunks_of_one_document_are_merged(sample_store) -> None:
    result = retrieve_turn(sample_store, TURN, config={**LEX, "max_chunks": 20, "token_budget": 20_000})
    spans: dict[str, list[tuple[int, int]]] = {}
    for hit in result.ctx.context_used:
        spans.setdefault(hit.document_id, []).append((hit.start_char, hit.end_char))
    for ranges in spans.values():
        ranges.sort()
        assert all(b[0] > a[1] + 1 for a, b in itertools.pairwise(ranges))


def test_with_rag_context() -> None:
    grounded = {"rag_context": "CONTEXT BLOCK", "rag_grounded": True, "rag_mode": "full"}
    assert with_rag_context("SYS", grounded) == "SYS\n\nCONTEXT BLOCK"
    ungrounded = {"rag_context": "", "rag_grounded": False, "rag_mode": "full", "rag_guidance": GUIDANCE}
    text = with_rag_context("SYS", ungrounded)
    assert text.startswith("SYS\n\nNote: a search of the user's documents found nothing relevant")
    assert text.endswith(GUIDANCE)
    assert with_rag_context("SYS", {"rag_context": "", "rag_mode": "skipped"}) == "SYS"
    assert with_rag_context("SYS", {}) == "SYS"


async def test_async_turn_equals_sync_turn(sample_store) -> None:
    sync = retrieve_turn(sample_store, TURN, config=LEX)
    from agentrag.chat import aretrieve_turn

    asynchronous = await aretrieve_turn(sample_store, TURN, config=LEX)
    assert [c["label"] for c in asynchronous.citations] == [c["label"] for c in sync.citations]
    assert asynchronous.question == sync.question


# ---- the multi-turn eval set ----------------------------------------------------------------------
def test_eval_set_is_well_formed() -> None:
    conversations = [json.loads(line) for line in (SAMPLES / "conversations.jsonl").read_text().splitlines()]
    assert len(conversations) >= 30
    assert len({c["id"] for c in conversations}) == len(conversations)
    for conv in conversations:
        roles = [m["role"] for m in conv["messages"]]
        assert roles[-1] == "user" and roles.count("user") >= 2
        assert all((SAMPLES / doc).is_file() for doc in conv["expected"]), conv["id"]


def test_condensing_the_eval_follow_ups_improves_lexical_recall(sample_store) -> None:
    """The benchmark's figure, cheaply: lexical search (no embedder needed), top 5 over the corpus."""
    from benchmarks.chat import load_conversations, queries

    totals = {"raw follow-up": 0.0, "condensed (local)": 0.0}
    conversations = load_conversations()
    for conv in conversations:
        for label, query in queries(conv).items():
            if label in totals:
                hits = sample_store.search(query, collections=NAMES, mode="lexical", top_k=5).hits
                found = {f"{h.collection}/{h.source}" for h in hits}
                totals[label] += len(found & set(conv["expected"])) / len(conv["expected"])
    raw, condensed = (totals[k] / len(conversations) for k in totals)
    assert condensed >= raw + 0.2, (raw, condensed)
