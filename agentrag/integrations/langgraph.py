"""A LangGraph RAG subgraph for chat graphs (extra ``langgraph``: langgraph + langchain-core).

Add it before the reply node; it reads the conversation from the state's ``messages`` and the
scope from the runnable configuration, and writes the ``rag_*`` fields::

    from langgraph.graph import END, START, StateGraph
    from agentrag.integrations.langgraph import RAGState, rag_subgraph, with_rag_context

    def reply(state: RAGState) -> dict:
        system = with_rag_context("You are Lumen's support assistant.", state)
        return {"messages": [model.invoke([("system", system), *state["messages"]])]}

    graph = StateGraph(RAGState)
    graph.add_node("rag", rag_subgraph(store, config={"enable_query_rewrite": True}))
    graph.add_node("reply", reply)
    graph.add_edge(START, "rag"); graph.add_edge("rag", "reply"); graph.add_edge("reply", END)
    app = graph.compile()
    app.invoke({"messages": [("user", "Which plans include SSO?")]},
               config={"configurable": {"tenant_id": "t1", "session_id": "s-42", "workspace_id": "acme"}})

The subgraph is ``gate -> condense -> rewrite -> search -> rerank -> context`` (``rewrite``
only when ``enable_query_rewrite`` is on; a skipped or disabled turn goes from ``gate``
straight to ``context``), each node one agentrag step with
its span. ``invoke`` / ``ainvoke`` / ``stream`` / ``astream`` all work; in async runs the
searches run concurrently. Scope: ``tenant_id``, ``workspace_id`` and ``session_id`` from
``config["configurable"]`` become an :class:`agentrag.Scope`, enforced in SQL.

This module uses only agentrag's public API (``agentrag`` and :mod:`agentrag.chat`) and
the ``langgraph`` extra.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

import agentrag as ar
from agentrag.chat import (
    RAGConfig,
    asearch_node,
    condense_node,
    context_node,
    gate_node,
    rerank_node,
    rewrite_node,
    scope_from_configurable,
    search_node,
    start,
    with_rag_context,
)

__all__ = ["RAGConfig", "RAGState", "rag_subgraph", "with_rag_context"]


class RAGState(TypedDict, total=False):
    """The chat state the subgraph reads (``messages``) and writes (``rag_*``). Extend it for your graph."""

    messages: Annotated[list[AnyMessage], add_messages]
    rag_context: str
    rag_citations: list[dict[str, Any]]
    rag_chunks: list[dict[str, Any]]
    rag_grounded: bool
    rag_mode: str
    rag_skipped_reason: str | None
    rag_proof: dict[str, Any] | None
    rag_guidance: str | None
    rag_question: str | None
    rag_confidence: float | None


class _RunState(RAGState, total=False):
    # A token naming the agentrag Context in flight between the nodes (None once the turn is
    # done). The Context itself stays in this process (:class:`_Runs`), so a checkpointer only
    # ever serialises the token and the JSON-friendly rag_* fields.
    rag_run: str | None


class _Runs:
    """The Contexts of the turns in flight, by token; bounded, so abandoned runs cannot pile up."""

    def __init__(self, limit: int = 1024) -> None:
        self._limit = limit
        self._runs: OrderedDict[str, ar.Context] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, ctx: ar.Context, token: str | None = None) -> str:
        token = token or uuid.uuid4().hex
        with self._lock:
            self._runs[token] = ctx
            self._runs.move_to_end(token)
            while len(self._runs) > self._limit:
                self._runs.popitem(last=False)
        return token

    def get(self, token: str | None, *, pop: bool = False) -> ar.Context:
        with self._lock:
            ctx = self._runs.pop(token, None) if pop else self._runs.get(token)  # type: ignore[arg-type]
        if ctx is None:
            raise RuntimeError(
                "rag subgraph: this turn's context is gone (resumed in another process, or more than "
                "1024 turns in flight); run the turn again"
            )
        return ctx


Node = Callable[[ar.Context, RAGConfig], ar.Context]


class _Node(Runnable[Any, Any]):
    """A graph node with a sync and an async body. (RunnableLambda would do, but it sets up
    callbacks and a child run per call: about 1.5 ms a node, more than the node's own work.)"""

    def __init__(self, name: str, func: Callable[..., Any], afunc: Callable[..., Any]) -> None:
        self.name = name
        self._func = func
        self._afunc = afunc

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._func(input, config or {})

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._afunc(input, config or {})


def rag_subgraph(
    store: ar.Store,
    config: RAGConfig | Mapping[str, Any] | None = None,
    *,
    llm: Any = None,
    name: str = "rag",
    **new_options: Any,
) -> Any:
    """The compiled RAG subgraph over ``store``. ``config`` is a :class:`RAGConfig` (or its
    settings as a mapping, validated now); ``llm`` a litellm model string, an LLM object or
    ``None`` for the local strategies; ``new_options`` go to :func:`agentrag.new` (``telemetry``,
    ``prompts``, ``fusion``, ``filters``, ``budget``, ...)."""
    if isinstance(config, RAGConfig):
        cfg = config
    elif config is None or isinstance(config, Mapping):
        cfg = RAGConfig.model_validate(dict(config or {}))
    else:
        raise ar.InvalidInputError(f"config must be a RAGConfig or a mapping, got {type(config).__name__}")
    if "scope" in new_options:
        raise TypeError("rag_subgraph() takes the scope from config['configurable'], not scope=")

    runs = _Runs()

    def begin(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        scope = scope_from_configurable(config.get("configurable"))
        ctx = start(store, state.get("messages") or [], config=cfg, scope=scope, llm=llm, **new_options)
        return {"rag_run": runs.put(gate_node(ctx, cfg))}

    async def abegin(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return await asyncio.to_thread(begin, state, config)

    def step(node: Node) -> tuple[Callable[..., dict[str, Any]], Callable[..., Any]]:
        def run(state: Mapping[str, Any], _config: RunnableConfig) -> dict[str, Any]:
            token = state["rag_run"]
            return {"rag_run": runs.put(node(runs.get(token), cfg), token)}

        async def arun(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
            return await asyncio.to_thread(run, state, config)

        return run, arun

    async def asearch(state: Mapping[str, Any], _config: RunnableConfig) -> dict[str, Any]:
        token = state["rag_run"]
        return {"rag_run": runs.put(await asearch_node(runs.get(token), cfg), token)}

    def finish(state: Mapping[str, Any], _config: RunnableConfig) -> dict[str, Any]:
        _ctx, result = context_node(runs.get(state["rag_run"], pop=True), cfg)
        return {**result.as_state(), "rag_run": None}

    async def afinish(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return await asyncio.to_thread(finish, state, config)

    def after_gate(state: Mapping[str, Any]) -> str:
        ctx = runs.get(state["rag_run"])
        skip = not cfg.enabled or ctx.error is not None or ctx.retrieve is False
        return "context" if skip else "condense"

    graph = StateGraph(_RunState, input_schema=RAGState, output_schema=RAGState)
    graph.add_node("gate", _Node("gate", begin, abegin))
    nodes: list[tuple[str, Node]] = [("condense", condense_node)]
    if cfg.enable_query_rewrite:  # off: no rewrite node at all (the graph mirrors the config)
        nodes.append(("rewrite", rewrite_node))
    for label, node in nodes:
        graph.add_node(label, _Node(label, *step(node)))
    search_run, _ = step(search_node)
    graph.add_node("search", _Node("search", search_run, asearch))
    for label, node in (("rerank", rerank_node),):
        graph.add_node(label, _Node(label, *step(node)))
    graph.add_node("context", _Node("context", finish, afinish))
    graph.add_edge(START, "gate")
    graph.add_conditional_edges("gate", after_gate, ["condense", "context"])
    path = [label for label, _ in nodes] + ["search", "rerank", "context"]
    for a, b in itertools.pairwise(path):
        graph.add_edge(a, b)
    graph.add_edge("context", END)
    return graph.compile(name=name)
