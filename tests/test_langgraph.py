"""The LangGraph RAG subgraph in a real StateGraph (rag -> reply with FakeLLM), sync and async."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

import agentrag as ar
from agentrag.integrations.langgraph import RAGState, rag_subgraph, with_rag_context
from agentrag.testing import FakeLLM
from tests.pipeline_fixtures import NAMES, sample_store

__all__ = ["sample_store"]

SYSTEM = "You are Lumen's support assistant."
LABEL = re.compile(r"\[(chk_[0-9a-f]+)\]")


def reply_llm() -> FakeLLM:
    """Answers from the context it is given: cites the first valid label, or says it found nothing."""

    def reply(messages: Sequence[dict[str, str]]) -> str:
        system = messages[0]["content"]
        if "Valid labels:" in system:
            return f"According to the documents, here is what applies [{LABEL.findall(system)[0]}]."
        if "found nothing relevant" in system:
            return "I could not find this in your documents."
        return "Happy to help!"

    return FakeLLM(fn=reply)


def chat_graph(store: ar.Store, model: FakeLLM, **config: Any) -> Any:
    """rag -> reply. Lexical by default: the tests' FakeEmbedder makes the vector leg noise."""
    config.setdefault("mode", "lexical")
    config.setdefault("collections", NAMES)

    def reply(state: RAGState) -> dict[str, Any]:
        system = with_rag_context(SYSTEM, state)
        history = [
            {"role": "user" if m.type == "human" else "assistant", "content": m.content}
            for m in state["messages"]
        ]
        return {
            "messages": [AIMessage(model.complete([{"role": "system", "content": system}, *history]).text)]
        }

    graph = StateGraph(RAGState)
    graph.add_node("rag", rag_subgraph(store, config=config))
    graph.add_node("reply", reply)
    graph.add_edge(START, "rag")
    graph.add_edge("rag", "reply")
    graph.add_edge("reply", END)
    return graph.compile()


def sources(state: dict[str, Any]) -> set[str]:
    return {c["source"] for c in state["rag_citations"]}


TURNS = [
    "How do I recover a deleted note?",
    "How long is it kept in the trash?",
    "thanks!",
]


def _check_conversation(states: list[dict[str, Any]], model: FakeLLM) -> None:
    first, second, third = states
    # turn 1: grounded, cited, bounded and delimited
    assert first["rag_grounded"] is True and first["rag_mode"] == "full"
    assert first["rag_skipped_reason"] is None and first["rag_guidance"] is None
    labels = [c["label"] for c in first["rag_citations"]]
    assert labels and labels == [c["label"] for c in first["rag_chunks"]]
    assert all(f"[{label}]" in first["rag_context"] for label in labels)
    assert re.search(r"<<<SOURCE-[0-9A-F]{12}>>>", first["rag_context"])
    assert first["rag_proof"]["original_question"] == TURNS[0]
    assert {c["chunk_id"] for c in first["rag_proof"]["chunks"]} >= set(labels)
    assert LABEL.findall(first["messages"][-1].content)[0] in labels
    # turn 2: the follow-up was condensed from turn 1 before searching
    assert second["rag_proof"]["original_question"] == TURNS[1]
    assert second["rag_question"] != TURNS[1]
    assert "deleted note" in second["rag_question"].lower()
    assert second["rag_proof"]["condensed_question"] == second["rag_question"]
    assert second["rag_grounded"] is True
    assert sources(second) & {"recover-deleted-note.md", "backups-and-retention.md"}, sources(second)
    # turn 3: small talk skips retrieval, nothing appended to the reply prompt
    assert third["rag_mode"] == "skipped" and third["rag_context"] == ""
    assert third["rag_citations"] == [] and third["rag_skipped_reason"]
    assert third["messages"][-1].content == "Happy to help!"
    assert model.calls[-1][0]["content"] == SYSTEM
    assert len(third["messages"]) == 6


def test_multi_turn_sync(sample_store) -> None:
    model = reply_llm()
    app = chat_graph(sample_store, model)
    messages: list[Any] = []
    states = []
    for turn in TURNS:
        state = app.invoke({"messages": [*messages, HumanMessage(turn)]})
        messages = state["messages"]
        states.append(state)
    _check_conversation(states, model)


async def test_multi_turn_async_ainvoke_and_astream(sample_store) -> None:
    model = reply_llm()
    app = chat_graph(sample_store, model)
    messages: list[Any] = []
    states = []
    for i, turn in enumerate(TURNS):
        payload = {"messages": [*messages, HumanMessage(turn)]}
        if i % 2 == 0:
            state = await app.ainvoke(payload)
        else:
            updates = [chunk async for chunk in app.astream(payload, stream_mode="updates", subgraphs=True)]
            nodes = [name for _ns, update in updates for name in update]
            assert nodes[:5] == ["gate", "condense", "search", "rerank", "context"]
            state = await app.ainvoke(payload)  # same turn, whole state (astream yields updates)
        messages = state["messages"]
        states.append(state)
    _check_conversation(states, model)
    sync = chat_graph(sample_store, reply_llm()).invoke({"messages": [HumanMessage(TURNS[0])]})
    assert sources(states[0]) == sources(sync)


def test_thread_memory_with_a_checkpointer(sample_store) -> None:
    """A checkpointer serialises the state between nodes: only JSON-friendly values may be in it."""
    from langgraph.checkpoint.memory import InMemorySaver

    graph = StateGraph(RAGState)
    graph.add_node("rag", rag_subgraph(sample_store, config={"mode": "lexical", "collections": NAMES}))
    graph.add_edge(START, "rag")
    graph.add_edge("rag", END)
    app = graph.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t-1"}}
    first = app.invoke({"messages": [HumanMessage(TURNS[0])]}, config=thread)
    second = app.invoke({"messages": [HumanMessage(TURNS[1])]}, config=thread)  # the thread holds turn 1
    assert first["rag_grounded"] and len(second["messages"]) == 2
    assert "deleted note" in second["rag_question"].lower()
    assert app.get_state(thread).values["rag_proof"]["original_question"] == TURNS[1]


def test_ungrounded_turn_gets_the_disclaimer(sample_store) -> None:
    model = reply_llm()
    app = chat_graph(sample_store, model)
    state = app.invoke({"messages": [HumanMessage("What is the airspeed velocity of an unladen swallow?")]})
    assert state["rag_grounded"] is False
    # out of domain: the turn abstains, says so and names the closest documents
    assert state["rag_mode"] == "abstained" and state["rag_context"] == ""
    assert state["rag_confidence"] is not None and state["rag_confidence"] < 0.6
    assert state["rag_guidance"].startswith("The knowledge base does not seem to cover this question")
    assert "widen the scope" in state["rag_guidance"].lower() and "add documents" in state["rag_guidance"]
    system = model.calls[-1][0]["content"]
    assert system.startswith(SYSTEM) and "found nothing relevant" in system
    assert state["rag_guidance"] in system
    assert state["messages"][-1].content == "I could not find this in your documents."


def test_disabled_retrieves_nothing(sample_store) -> None:
    model = reply_llm()
    app = chat_graph(sample_store, model, enabled=False)
    state = app.invoke({"messages": [HumanMessage(TURNS[0])]})
    assert state["rag_mode"] == "disabled" and state["rag_context"] == "" and state["rag_citations"] == []
    assert model.calls[-1][0]["content"] == SYSTEM


def test_session_scope_from_config_is_enforced(sample_store) -> None:
    store = sample_store
    name = f"notes_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, description="session notes", scoped=True)
    try:
        _check_session_scope(store, name)
    finally:
        store.delete_collection(name)  # the store is shared by the session: leave no scoped collection


def _check_session_scope(store: ar.Store, name: str) -> None:
    secret = "The zephyrine onboarding checklist for Orbix requires badge photos and a signed NDA."
    other = "The zephyrine onboarding checklist for Orbix: meet the team on Monday."
    store.ingest_text(
        secret, collection=name, source="theirs.md", tenant="t1", workspace="w1", session="s-other"
    )
    store.ingest_text(other, collection=name, source="mine.md", tenant="t1", workspace="w1", session="s-mine")
    app = chat_graph(store, reply_llm(), collections=[name])
    ask = {"messages": [HumanMessage("What does the zephyrine onboarding checklist for Orbix require?")]}

    mine = app.invoke(
        ask, config={"configurable": {"tenant_id": "t1", "session_id": "s-mine", "workspace_id": "w1"}}
    )
    assert sources(mine) == {"mine.md"}
    assert {c["source"] for c in mine["rag_proof"]["chunks"]} == {"mine.md"}
    assert mine["rag_proof"]["session_id"] == "s-mine" and mine["rag_proof"]["workspace_id"] == "w1"
    assert "badge photos" not in mine["rag_context"]

    theirs = app.invoke(
        ask, config={"configurable": {"tenant_id": "t1", "session_id": "s-other", "workspace_id": "w1"}}
    )
    assert sources(theirs) == {"theirs.md"}
    # another workspace sees neither; no scope at all on a scoped collection is refused
    elsewhere = app.invoke(
        ask, config={"configurable": {"tenant_id": "t1", "session_id": "s-mine", "workspace_id": "w2"}}
    )
    assert elsewhere["rag_citations"] == [] and elsewhere["rag_grounded"] is False
    with pytest.raises(ar.ScopeError):
        app.invoke(ask)
    with pytest.raises(ar.ScopeError, match="tenant-rooted"):  # a session alone would cross tenants
        app.invoke(ask, config={"configurable": {"session_id": "s-mine", "workspace_id": "w1"}})


def test_config_is_validated_when_the_subgraph_is_built(sample_store) -> None:
    with pytest.raises(ar.InvalidInputError, match="enable_rerank: unknown setting"):
        rag_subgraph(sample_store, config={"enable_rerank": True})
    with pytest.raises(ar.InvalidInputError, match="max_rewrites"):
        rag_subgraph(sample_store, config={"max_rewrites": 5})
    with pytest.raises(TypeError, match="configurable"):
        rag_subgraph(sample_store, scope=ar.Scope(session="s"))


def test_subgraph_output_is_only_the_rag_fields(sample_store) -> None:
    out = rag_subgraph(sample_store, config={"collections": NAMES}).invoke(
        {"messages": [HumanMessage(TURNS[0])]}
    )
    assert set(out) <= set(RAGState.__annotations__)
    assert "rag_run" not in out


def test_integration_imports_only_the_public_api() -> None:
    import ast
    from pathlib import Path

    import agentrag.integrations.langgraph as module

    tree = ast.parse(Path(module.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            if node.module.startswith("agentrag"):
                assert not any(alias.name.startswith("_") for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    ours = {m for m in imported if m.startswith("agentrag")}
    assert ours == {"agentrag", "agentrag.chat"}
    assert {m.split(".")[0] for m in imported} <= {
        "__future__",
        "asyncio",
        "collections",
        "itertools",
        "threading",
        "typing",
        "uuid",
        "agentrag",
        "langgraph",
        "langchain_core",
    }
