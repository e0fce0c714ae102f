"""The README's examples state their expected facts (issue #36): the quickstart, the chat scenario, "Which
plans include SSO?", ``make demo``'s questions and the LangGraph follow-up, through the library and through
the front ends they appear in (``agentrag ask``, the service's ``/ask`` and ``/v1/chat/completions``), over
the sample corpus embedded with the real all-MiniLM-L6-v2, no LLM.

An example the answer step gets wrong would be an ``xfail(strict=True)`` naming what it answers instead
(none is left since session 17). The chat tutorial's follow-up ("how
long is it kept there?" after "Restore it from the trash.") is asserted through each chat front end: the
library, ``agentrag.chat.retrieve_turn``, ``agentrag chat``'s session, the LangGraph example and the
playground's request (``/v1/chat/completions``, streamed, over a real server process)."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentrag as ar
from agentrag.eval.answers import fact_hit
from tests.conftest import SAMPLES, run_cli
from tests.server_support import Server, new_tenant, start_server, token

#: the README's three-turn chat (the quickstart's "chat" section, `agentrag chat --samples`, the playground)
CHAT = (
    ("How do I recover a deleted note?", ["trash"]),
    ("how long is it kept there?", ["30 days"]),
    ("can an admin make that longer?", ["180 days"]),
)
SSO = ("Which plans include SSO?", ["Business and Enterprise"])
RESET = "How do I reset my password?"  # the LangGraph example's first turn; no sample article covers it
QUICKSTART = ("How long are deleted notes kept in the trash?", ["30 days"])  # README, first-answer tutorial


@pytest.fixture(scope="module")
def lumen(database_url: str, local_embedder: Any, store: Any) -> Iterator[dict[str, Any]]:
    """The sample corpus as the README's quickstart names it (docs, support, and api for the demo),
    ingested for one tenant with the real model; ``store`` has run the migrations."""
    tenant = new_tenant(store, "readme")
    real = ar.Store(database_url, embedder=local_embedder)
    suffix = uuid.uuid4().hex[:6]
    names = {}
    for folder, name, about in (
        ("product_docs", "docs", "Product documentation"),
        ("support", "support", "Support answers and troubleshooting"),
        ("api", "api", "REST API reference: endpoints, authentication, rate limits, pagination"),
    ):
        names[name] = f"{name}_{suffix}"
        real.create_collection(names[name], description=about)
        assert real.ingest(SAMPLES / folder, collection=names[name], tenant=tenant, strict=True).ok
    yield {"store": real, "tenant": tenant, "names": names, "url": database_url}
    real.close()


def _new(lumen: dict[str, Any], question: str, collections: list[str], **options: Any) -> ar.Context:
    return ar.new(
        question,
        store=lumen["store"],
        collections=collections,
        scope=ar.Scope(tenant=lumen["tenant"]),
        **options,
    )


def _all(lumen: dict[str, Any]) -> list[str]:
    return list(lumen["names"].values())


def _deleted_workspace(text: str) -> bool:
    """Whether ``text`` quotes what a deleted workspace's retention is (the sibling of a deleted note's
    in the same article: "A deleted **workspace** is kept for 30 days")."""
    return re.search(r"deleted\W+workspace", text, re.IGNORECASE) is not None


def _said(ctx: ar.Context, expected: list[str]) -> bool:
    return ctx.mode != "abstained" and fact_hit(ctx.answer_text or "", expected)


# ---- the library ------------------------------------------------------------------------------------
def test_the_quickstart_question_states_its_fact(lumen: dict[str, Any]) -> None:
    names = lumen["names"]
    question, expected = QUICKSTART
    ctx = _new(lumen, question, [names["docs"], names["support"]])
    ctx = ctx | ar.search(self_correct=True) | ar.rerank() | ar.answer()
    assert _said(ctx, expected), ctx.answer_text
    lines = re.split(r"\n|(?<=\.)\s+", ctx.answer_text or "")  # a note's 30 days, not a workspace's
    assert any("30 days" in line and "trash" in line.lower() for line in lines), ctx.answer_text


def _reset_right(said: str, abstained: bool) -> bool:
    """A password reset over the samples (no article covers it): a refusal, or the phishing article's
    "Change your Lumen password immediately from **Settings → Account → Security**"; never the two-factor
    article's reset (its steps, or "Contact your IT department to reset it.", where "it" is the 2FA)."""
    wrong = "two-factor" in said.lower() or "IT department" in said
    return not wrong and (abstained or "Settings → Account → Security" in said)


def test_a_password_reset_is_not_answered_with_the_two_factor_reset(lumen: dict[str, Any]) -> None:
    names = lumen["names"]
    ctx = _new(lumen, RESET, [names["docs"], names["support"]])
    ctx = ctx | ar.search(self_correct=True) | ar.rerank() | ar.answer()
    assert _reset_right(ctx.answer_text or "", ctx.mode == "abstained"), ctx.answer_text


def test_which_plans_include_sso_through_the_pipeline_and_the_fastapi_example(lumen: dict[str, Any]) -> None:
    question, expected = SSO
    piped = _new(lumen, question, _all(lumen)) | ar.gate() | ar.search() | ar.rerank() | ar.answer()
    assert "Business and Enterprise" in " ".join(h.text for h in piped.context_used)
    assert _said(piped, ["Free or Team", *expected]), piped.answer_text
    names = lumen[
        "names"
    ]  # the README's FastAPI /ask: gate, decompose, self-correcting search, rerank, answer
    fastapi = _new(lumen, question, [names["docs"], names["support"]])
    fastapi = fastapi | ar.gate() | ar.decompose() | ar.search(self_correct=True) | ar.rerank() | ar.answer()
    assert _said(fastapi, ["Free or Team", *expected]), fastapi.answer_text
    assert "GDPR" not in (fastapi.answer_text or "")


def _chat(lumen: dict[str, Any]) -> list[ar.Context]:
    history: list[dict[str, str]] = []
    out = []
    for question, _ in CHAT:
        ctx = _new(lumen, question, _all(lumen), history=history or None)
        ctx = ctx | ar.gate() | ar.condense() | ar.search() | ar.rerank() | ar.answer()
        history += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": ctx.answer_text or ""},
        ]
        out.append(ctx)
    return out


def test_the_three_turn_chat_states_each_fact(lumen: dict[str, Any]) -> None:
    turns = _chat(lumen)
    for ctx, (_, expected) in zip(turns, CHAT, strict=True):
        assert _said(ctx, expected), (ctx.question, ctx.answer_text)
    assert not _deleted_workspace(turns[1].answer_text or "")


def test_the_three_turn_chats_last_turn_states_the_admins_180_days(lumen: dict[str, Any]) -> None:
    """ "can an admin make that longer?" carries the previous question as its topic for the search and is
    scored on its own ask; "make" and "longer" are not terms the documents lack (it abstained at 0.2)."""
    last = _chat(lumen)[-1]
    assert last.question.startswith("Can an admin make that longer, regarding ")
    assert _said(last, CHAT[2][1]), last.answer_text


def test_the_chat_follow_ups_are_condensed_as_a_person_would_type(lumen: dict[str, Any]) -> None:
    history = [
        {"role": "user", "content": "How do I recover a deleted note?"},
        {"role": "assistant", "content": "Restore it from the trash."},
    ]
    ctx = _new(lumen, CHAT[1][0], _all(lumen), history=history) | ar.gate() | ar.condense()
    assert ctx.question == "How long is a deleted note kept in the trash?"  # the README's own line
    ctx = ctx | ar.search() | ar.rerank() | ar.answer()
    assert _said(ctx, ["30 days"]), ctx.answer_text


def test_make_demo_paginates_and_names_the_rate_limit_response(lumen: dict[str, Any]) -> None:
    from agentrag.demo import QUESTIONS, ask

    ctx = ask(QUESTIONS[0], lumen["store"], _all(lumen))
    assert _said(ctx, ["cursor-based pagination"]) and _said(ctx, ["429"]), ctx.answer_text


def test_make_demo_compares_support_times_and_rate_limits(lumen: dict[str, Any]) -> None:
    from agentrag.demo import QUESTIONS, ask

    ctx = ask(QUESTIONS[1], lumen["store"], _all(lumen))
    said = ctx.answer_text or ""
    assert fact_hit(said, ["24 hours"]) and fact_hit(said, ["8 hours"]), said
    assert fact_hit(said, ["300"]) and fact_hit(said, ["1,200"]), said


def test_the_langgraph_follow_up_reads_as_typed_and_retrieves_the_reset_article(
    lumen: dict[str, Any],
) -> None:
    history = [{"role": "user", "content": RESET}, {"role": "assistant", "content": "Use Forgot password."}]
    ctx = _new(lumen, "and what if I don't get the email?", _all(lumen), history=history)
    ctx = ctx | ar.gate() | ar.condense()
    assert ctx.question == "How do I reset my password if I don't get the email?"


# ---- the front ends -----------------------------------------------------------------------------
def _ask(lumen: dict[str, Any], question: str, *collections: str) -> str:
    """``agentrag ask`` in a process of its own over the lumen collections: the answer without sources."""
    env = {**os.environ, "AGENTRAG_DATABASE_URL": lumen["url"]}
    where = [arg for name in collections for arg in ("--collection", lumen["names"][name])]
    done = run_cli(env, "ask", question, *where, "--tenant", lumen["tenant"])
    assert done.returncode == 0, done.stderr
    return str(done.stdout).split("\nSources:")[0]


def test_agentrag_ask_on_the_command_line(lumen: dict[str, Any]) -> None:
    question, expected = SSO
    answer = _ask(lumen, question, "docs", "support")
    assert fact_hit(answer, ["Free or Team", *expected]), answer


def test_the_quickstart_question_on_the_command_line(lumen: dict[str, Any]) -> None:
    question, expected = QUICKSTART
    answer = _ask(lumen, question, "docs")
    assert fact_hit(answer, expected), answer


def test_a_password_reset_on_the_command_line(lumen: dict[str, Any]) -> None:
    answer = _ask(lumen, RESET, "docs", "support")
    assert _reset_right(answer, "does not seem to cover" in answer), answer


@pytest.fixture(scope="module")
def real_server(lumen: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``agentrag serve`` with the real query embedder (the documents were embedded with it)."""
    server = start_server(lumen["url"], Path(tmp_path_factory.mktemp("readme")), "--embedder", "local")
    yield server
    server.stop()


def test_the_service_ask_endpoint(lumen: dict[str, Any], real_server: Server) -> None:
    import httpx

    question, expected = SSO
    tenant = lumen["tenant"]
    body = {"query_text": question, "collections": _all(lumen)}
    headers = {"Authorization": f"Bearer {token(tenant)}"}
    r = httpx.post(f"{real_server.url}/api/v1/query/{tenant}/ask", json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    answer = r.json()["generation"]["answer"]
    assert fact_hit(answer, ["Free or Team", *expected]) and "GDPR" not in answer, answer


def _completion(server: Server, tenant: str, model: str, messages: list[dict[str, str]]) -> dict[str, Any]:
    """One ``/v1/chat/completions`` request (not streamed) over the real server: its JSON reply."""
    import httpx

    r = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": model, "messages": messages},
        headers={"Authorization": f"Bearer {token(tenant)}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def _reply(reply: dict[str, Any]) -> str:
    """The reply's text without its sources."""
    return str(reply["choices"][0]["message"]["content"]).split("\n\nSources:")[0]


def test_the_openai_chat_endpoint(lumen: dict[str, Any], real_server: Server) -> None:
    tenant = lumen["tenant"]
    messages = [{"role": "user", "content": SSO[0]}]
    content = _reply(_completion(real_server, tenant, "agentrag", messages))
    assert fact_hit(content, ["Free or Team", *SSO[1]]), content
    # the chat's second turn, condensed with the conversation
    messages += [
        {"role": "assistant", "content": content},
        {"role": "user", "content": "and how long do deleted notes stay in the trash?"},
    ]
    assert "30 days" in _reply(_completion(real_server, tenant, "agentrag", messages))


def test_a_password_reset_through_the_openai_chat_endpoint(
    lumen: dict[str, Any], real_server: Server
) -> None:
    names = lumen["names"]
    model = f"agentrag/{names['docs']}+{names['support']}"
    reply = _completion(real_server, lumen["tenant"], model, [{"role": "user", "content": RESET}])
    content = _reply(reply)
    assert _reset_right(content, bool(reply.get("agentrag", {}).get("abstained"))), content


# ---- the chat front ends: the documentation's follow-up (chatbot-backend.md) -------------------------
#: the tutorial's conversation so far: the first turn and the reply it shows
HISTORY = [
    {"role": "user", "content": "How do I recover a deleted note?"},
    {"role": "assistant", "content": "Restore it from the trash."},
]
FOLLOW_UP = ("how long is it kept there?", "How long is a deleted note kept in the trash?", ["30 days"])


def _trash_fact(text: str) -> bool:
    """The trash's 30 days, not a deleted workspace's (both are 30 days in the same article)."""
    lines = re.split(r"\n|(?<=\.)\s+", text)
    return any("30 days" in line and "trash" in line.lower() for line in lines)


def test_the_follow_up_through_agentrag_chat(lumen: dict[str, Any]) -> None:
    """``agentrag chat``: the terminal's session, the real model, the tutorial's history."""
    from agentrag.chat import RAGConfig
    from agentrag.cli.chat_terminal import ChatSession

    message, searched, expected = FOLLOW_UP
    config = RAGConfig(collections=tuple(_all(lumen)))
    session = ChatSession(lumen["store"], config=config, scope=ar.Scope(tenant=lumen["tenant"]), llm=None)
    session.messages = list(HISTORY)
    ctx, result = session.ask(message)
    assert result.question == searched
    said = ctx.answer_text or ""
    assert _said(ctx, expected) and _trash_fact(said) and not _deleted_workspace(said), said


def test_agentrag_chat_answers_as_the_library_pipeline(lumen: dict[str, Any]) -> None:
    """One request path: ``agentrag chat``'s turn quotes what ``new | gate | condense | search | rerank |
    answer`` quotes over the same candidates (the chat's limit), not a choice among the six chunks
    packed into the reply's context; its sources are what the answer read."""
    from agentrag.chat import RAGConfig
    from agentrag.cli.chat_terminal import ChatSession, render_turn

    message = FOLLOW_UP[0]
    config = RAGConfig(collections=tuple(_all(lumen)))
    session = ChatSession(lumen["store"], config=config, scope=ar.Scope(tenant=lumen["tenant"]), llm=None)
    session.messages = list(HISTORY)
    ctx, result = session.ask(message)
    piped = _new(lumen, message, _all(lumen), history=HISTORY, limit=config.rerank_top_n)
    piped = piped | ar.gate() | ar.condense() | ar.search() | ar.rerank() | ar.answer()
    assert ctx.answer_text == piped.answer_text and ctx.answer_confidence == piped.answer_confidence
    assert result.confidence == piped.answer_confidence  # the turn's confidence is the answer's
    shown = render_turn(ctx, result)
    assert all(f"[{label}]" in shown.split("sources:")[1] for label in ctx.citations), shown


def test_the_follow_up_through_retrieve_turn(lumen: dict[str, Any]) -> None:
    """``agentrag.chat.retrieve_turn`` (the tutorial's chat backend): the context holds the fact."""
    from agentrag.chat import RAGConfig, retrieve_turn

    message, searched, _ = FOLLOW_UP
    rag = retrieve_turn(
        lumen["store"],
        [*HISTORY, {"role": "user", "content": message}],
        config=RAGConfig(collections=tuple(_all(lumen))),
        scope=ar.Scope(tenant=lumen["tenant"]),
    )
    assert rag.question == searched and rag.mode != "abstained", rag.mode
    assert _trash_fact(rag.context), rag.context


def test_the_langgraph_example_with_real_retrieval(lumen: dict[str, Any]) -> None:
    """The tutorial's LangGraph graph over the real store: the SSO question's context names the plans,
    and the follow-up reads as typed."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langgraph.graph import END, START, StateGraph

    from agentrag.integrations.langgraph import RAGState, rag_subgraph, with_rag_context

    model = FakeListChatModel(responses=["(the model's reply)"] * 2)

    def reply(state: RAGState) -> dict[str, Any]:
        system = with_rag_context("You are Lumen's support assistant.", state)
        return {"messages": [model.invoke([("system", system), *state["messages"]])]}

    graph = StateGraph(RAGState)
    graph.add_node("rag", rag_subgraph(lumen["store"], config={"max_chunks": 4, "collections": _all(lumen)}))
    graph.add_node("reply", reply)
    graph.add_edge(START, "rag")
    graph.add_edge("rag", "reply")
    graph.add_edge("reply", END)
    app = graph.compile()
    config = {"configurable": {"tenant_id": lumen["tenant"]}}
    state = app.invoke({"messages": [("user", SSO[0])]}, config=config)
    assert "Business and Enterprise" in state["rag_context"], state["rag_context"]
    follow_up = [
        ("user", RESET),
        ("assistant", "Use Forgot password."),
        ("user", "and what if I don't get the email?"),
    ]
    state = app.invoke({"messages": follow_up}, config=config)
    assert state["rag_question"] == "How do I reset my password if I don't get the email?"


def _streamed(server: Server, tenant: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The playground's request (``/v1/chat/completions``, streamed): the text and the ``agentrag`` extra."""
    import json

    import httpx

    headers = {"Authorization": f"Bearer {token(tenant)}", "Accept": "text/event-stream"}
    content, extra = "", {}
    with httpx.stream(
        "POST",
        f"{server.url}/v1/chat/completions",
        json={**body, "stream": True},
        headers=headers,
        timeout=60,
    ) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            content += chunk["choices"][0]["delta"].get("content") or "" if chunk.get("choices") else ""
            extra = chunk.get("agentrag") or extra
    return content.split("\n\nSources:")[0], extra


def test_the_follow_up_through_the_playground_request(lumen: dict[str, Any], real_server: Server) -> None:
    message, searched, expected = FOLLOW_UP
    body = {
        "model": "agentrag/" + "+".join(_all(lumen)),
        "messages": [*HISTORY, {"role": "user", "content": message}],
    }
    content, extra = _streamed(real_server, lumen["tenant"], body)
    assert extra.get("question") == searched, extra.get("question")
    assert fact_hit(content, expected) and _trash_fact(content) and not _deleted_workspace(content), content
    assert not extra.get("abstained"), extra


def test_the_playground_answers_over_what_its_stream_audited_as_retrieved(
    lumen: dict[str, Any], real_server: Server
) -> None:
    """The chat endpoint answers over every hit its searches returned (not cut to ``top_k``): each chunk
    the answer read or cites is in the ``RETRIEVAL_EXECUTED`` row written before the stream's first byte."""
    from tests.server_support import audit_of

    body = {
        "model": "agentrag/" + "+".join(_all(lumen)),
        "messages": [*HISTORY, {"role": "user", "content": FOLLOW_UP[0]}],
        "top_k": 2,
    }
    _, extra = _streamed(real_server, lumen["tenant"], body)
    rows = audit_of(lumen["store"].engine, extra["query_id"], 3)
    retrieved = [r for r in rows if r.type == "RETRIEVAL_EXECUTED"]
    answered = [r for r in rows if r.type == "GENERATION_EXECUTED"]
    assert retrieved and retrieved[0].details["outcome"] == "streaming" and answered, [r.type for r in rows]
    audited = set(retrieved[0].details["chunk_ids"])
    assert len(audited) > 2  # three collections' hits, not the two of top_k
    assert {s["chunk_id"] for s in extra["sources"]} <= audited
    assert set(answered[0].details["context_chunk_ids"]) <= audited


def test_which_plans_include_sso_through_the_playground_request(
    lumen: dict[str, Any], real_server: Server
) -> None:
    body = {"model": "agentrag/" + "+".join(_all(lumen)), "messages": [{"role": "user", "content": SSO[0]}]}
    content, _ = _streamed(real_server, lumen["tenant"], body)
    assert fact_hit(content, ["Free or Team", *SSO[1]]), content


# ---- the documentation site's other example questions ---------------------------------------------
def test_the_answers_across_corpora_page_answers_sso_and_declines_the_company_car(
    lumen: dict[str, Any],
) -> None:
    """docs/explanation/answers-across-corpora.md: over the product docs, SSO's plans, and a refusal for a
    question the docs do not cover."""
    docs = [lumen["names"]["docs"]]
    sso = _new(lumen, SSO[0], docs) | ar.search() | ar.rerank() | ar.answer()
    assert _said(sso, ["Free or Team", *SSO[1]]), sso.answer_text
    car = (
        _new(lumen, "Does Lumen give employees a company car?", docs)
        | ar.search()
        | ar.rerank()
        | ar.answer()
    )
    assert car.mode == "abstained" and car.grounded is False, car.answer_text
    assert "does not seem to cover" in (car.answer_text or "")


def test_the_research_notebook_questions(lumen: dict[str, Any]) -> None:
    """docs/tutorials/research-notebook.md's pipes: export, and the two plans' rate limits compared."""
    names = _all(lumen)
    export = _new(lumen, "How do I export my notes?", []) | ar.route(collections=names) | ar.decompose()
    export = export | ar.search(self_correct=True) | ar.answer()
    assert _said(export, ["Export"]), export.answer_text
    question = "Compare the API rate limits on the Team and Business plans"
    compared = _new(lumen, question, []) | ar.route(collections=names) | ar.decompose()
    compared = compared | ar.search(self_correct=True) | ar.rerank() | ar.answer()
    said = compared.answer_text or ""
    assert fact_hit(said, ["300"]) and fact_hit(said, ["1,200"]), said


def test_the_openai_client_example_resets_two_factor(lumen: dict[str, Any], real_server: Server) -> None:
    """docs/how-to/clients.md: the OpenAI client's "How do I reset 2FA?" to ``agentrag/<support>``."""
    messages = [{"role": "user", "content": "How do I reset 2FA?"}]
    content = _reply(
        _completion(real_server, lumen["tenant"], f"agentrag/{lumen['names']['support']}", messages)
    )
    assert fact_hit(content, ["Reset two-factor authentication"]), content


def _rate_limit_turn(lumen: dict[str, Any], message: str) -> ar.Context:
    """A follow-up of answers-across-corpora.md's table, after "What are the API rate limits on the Team
    plan?"."""
    first = "What are the API rate limits on the Team plan?"
    ctx = _new(lumen, first, _all(lumen)) | ar.gate() | ar.search() | ar.rerank() | ar.answer()
    assert _said(ctx, ["300"]), ctx.answer_text
    history = [{"role": "user", "content": first}, {"role": "assistant", "content": ctx.answer_text or ""}]
    ctx = _new(lumen, message, _all(lumen), history=history)
    return ctx | ar.gate() | ar.condense() | ar.search() | ar.rerank() | ar.answer()


def test_the_rate_limit_follow_up_on_business(lumen: dict[str, Any]) -> None:
    ctx = _rate_limit_turn(lumen, "And on Business?")
    assert ctx.question == "What are the API rate limits on the Business plan?"
    assert _said(ctx, ["1,200"]), ctx.answer_text


def test_the_rate_limit_follow_up_on_exceeding_it(lumen: dict[str, Any]) -> None:
    """Searched as "What happens when I exceed the API rate limits on the Team plan?"; the heading "What
    happens when you hit the limit" restates the message as typed, so its 429 is quoted."""
    ctx = _rate_limit_turn(lumen, "what happens when I exceed it?")
    assert ctx.question == "What happens when I exceed the API rate limits on the Team plan?"
    assert _said(ctx, ["429"]), ctx.answer_text
