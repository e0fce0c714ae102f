"""Chat follow-ups: recall@5 of condensed vs raw follow-ups, and the per-turn overhead of
condense + the LangGraph subgraph beside the search it wraps.

    .venv/bin/python -m benchmarks.chat [--repeats 5] [--embedder local|fake]

Quality: the multi-turn set ``samples/conversations.jsonl`` (36 conversations over the sample
corpus; the last user message of each is a follow-up that needs the earlier turns, with the
documents that answer it). For each, one ``store.search(top_k=5)`` over the three sample
collections, for: the raw follow-up, the follow-up condensed by the local strategy, and (a
reference, not a strategy) every user turn concatenated. recall@5 = share of the expected
documents among the top-5 hits' documents, averaged over the conversations.

Speed: each conversation's last turn through (a) ``condense`` alone, (b) ``chat.retrieve_turn``
(new, gate, condense, search, rerank, context) and (c) the compiled subgraph (``invoke``),
with warm caches (one untimed round first). Every ``Store.search`` call is timed; overhead =
turn time - time inside ``Store.search`` (the floor: the retrieval any turn must do).

The LangGraph wrapper = ``invoke`` - the time inside the agentrag node functions (clocked), in
wall time and in this thread's CPU time (steadier on a shared machine). Its floors, all the
subgraph's shape (same nodes and edges, same state schema, same keys written):

* same node work, least glue: the nodes call the same (clocked) agentrag functions, the
  Context passed in a local variable (no token table, no scope parsing): the fair floor, run
  turn by turn alternating with the subgraph. subgraph - this = what our glue costs;
* no-op nodes right after the turn's ``retrieve_turn``: LangGraph alone, caches as cold as a
  real turn leaves them;
* no-op nodes back to back: LangGraph alone with every cache hot (the old floor; a chat turn
  never runs like that: it follows network, database and model work).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from pathlib import Path
from typing import Any

import agentrag as ar
from agentrag.chat import RAGConfig, retrieve_turn
from agentrag.steps.condense import condense_local
from agentrag.steps.new import parse_history
from agentrag.store.store import Store
from benchmarks._db import bench_url

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def load_conversations(path: Path = SAMPLES / "conversations.jsonl") -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class TimedStore(Store):
    search_ms = 0.0

    def search(self, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return super().search(*args, **kwargs)
        finally:
            TimedStore.search_ms += (time.perf_counter() - t) * 1000


def recall_at_5(store: Store, names: list[str], query: str, expected: list[str]) -> float:
    hits = store.search(query, collections=names, mode="hybrid", top_k=5).hits
    found = {f"{h.collection.removeprefix('chat_').removesuffix('_fake')}/{h.source}" for h in hits}
    return len(found & set(expected)) / len(expected)


def queries(conv: dict[str, Any]) -> dict[str, str]:
    *earlier, last = conv["messages"]
    history = parse_history(earlier)
    users = [m["content"] for m in conv["messages"] if m["role"] == "user"]
    return {
        "raw follow-up": last["content"],
        "condensed (local)": condense_local(last["content"], history),
        "all user turns concatenated (reference)": " ".join(users),
    }


def timed(fn: Any) -> tuple[float, float]:
    """(total ms, ms inside Store.search) of one call."""
    TimedStore.search_ms = 0.0
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000, TimedStore.search_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--embedder", choices=["local", "fake"], default="local")
    parser.add_argument("--show", action="store_true", help="print every condensed follow-up")
    parser.add_argument(
        "--gc-freeze", action="store_true", help="gc.freeze() after warm-up (as long-lived servers do)"
    )
    args = parser.parse_args()
    if args.embedder == "local":
        store = TimedStore(bench_url())
    else:
        from agentrag.testing import FakeEmbedder

        store = TimedStore(bench_url(), embedder=FakeEmbedder(dimensions=64, model_id="bench/fake-64"))
    names = []
    for spec in json.loads((SAMPLES / "collections.json").read_text()):
        name = f"chat_{spec['name']}" + ("" if args.embedder == "local" else "_fake")
        store.create_collection(name, description=spec["description"], exist_ok=True)
        store.ingest(SAMPLES / spec["name"], collection=name)
        names.append(name)
    conversations = load_conversations()

    # ---- quality -------------------------------------------------------------------------
    scores: dict[str, list[float]] = {}
    for conv in conversations:
        for label, query in queries(conv).items():
            scores.setdefault(label, []).append(recall_at_5(store, names, query, conv["expected"]))
        if args.show:
            q = queries(conv)
            print(f"{conv['id']}: {q['raw follow-up']!r} -> {q['condensed (local)']!r}")
    print(f"\nrecall@5 over {len(conversations)} conversations (hybrid, top_k=5, embedder={args.embedder})")
    print(f"{'query':45} {'recall@5':>9}")
    for label, values in scores.items():
        print(f"{label:45} {statistics.fmean(values):9.3f}")
    gain = statistics.fmean(scores["condensed (local)"]) - statistics.fmean(scores["raw follow-up"])
    print(f"{'condensed - raw':45} {gain:+9.3f}")

    # ---- speed ---------------------------------------------------------------------------
    speed(store, names, [c["messages"] for c in conversations], args.repeats, gc_freeze=args.gc_freeze)


def now() -> tuple[float, float]:
    """(wall, CPU time of this thread) in ms. CPU time does not count the time other processes
    hold the core, so it is the steadier figure on a shared machine."""
    return time.perf_counter() * 1000, time.thread_time() * 1000


class Clock:
    """Wraps the agentrag node functions: the time spent inside them, so that
    ``graph.invoke`` minus that is the LangGraph wrapper's."""

    def __init__(self) -> None:
        self.inside = [0.0, 0.0]

    def wrap(self, fn: Any) -> Any:
        def wrapped(*a: Any, **k: Any) -> Any:
            t = now()
            try:
                return fn(*a, **k)
            finally:
                u = now()
                self.inside[0] += u[0] - t[0]
                self.inside[1] += u[1] - t[1]

        return wrapped

    def run(self, fn: Any) -> tuple[float, float]:
        """(wall, CPU) ms of ``fn()`` outside the wrapped functions."""
        self.inside = [0.0, 0.0]
        t = now()
        fn()
        u = now()
        return u[0] - t[0] - self.inside[0], u[1] - t[1] - self.inside[1]


def floor_graph(subgraph: Any, store: Store, config: RAGConfig, nodes: dict[str, Any], *, work: bool) -> Any:
    """LangGraph alone, the subgraph's shape: the same nodes and edges (read from the subgraph's
    builder), the same state schema, the same keys written (``rag_run`` by every node, the
    ``rag_*`` fields and ``rag_run`` by the last). With ``work`` the nodes call the same agentrag
    node functions (``nodes``, clocked like the subgraph's) with the least glue there can be: the
    Context passes in a local variable. Without it they do nothing."""
    from langgraph.graph import END, START, StateGraph

    import agentrag.integrations.langgraph as lg
    from agentrag.chat import RAG_FIELDS

    labels = list(subgraph.builder.nodes)  # gate, condense, [rewrite], search, rerank, context
    assert labels[0] == "gate" and labels[-1] == "context", labels
    held: list[Any] = [None]

    def node(label: str) -> Any:
        def run(state: Any, _config: Any) -> dict[str, Any]:
            if label == "context":
                if not work:
                    return {**dict.fromkeys(RAG_FIELDS), "rag_run": None}
                _ctx, result = nodes["context_node"](held[0], config)
                return {**result.as_state(), "rag_run": None}
            if work:
                if label == "gate":
                    ctx = nodes["start"](store, state["messages"], config=config)
                    held[0] = nodes["gate_node"](ctx, config)
                else:
                    held[0] = nodes[f"{label}_node"](held[0], config)
            return {"rag_run": "token"}

        async def arun(state: Any, config: Any) -> dict[str, Any]:
            return run(state, config)

        return lg._Node(label, run, arun)

    def after_gate(state: Any) -> str:
        ctx = held[0]
        skip = work and (ctx.error is not None or ctx.retrieve is False)
        return "context" if skip else "condense"

    graph = StateGraph(lg._RunState, input_schema=lg.RAGState, output_schema=lg.RAGState)
    for label in labels:
        graph.add_node(label, node(label))
    graph.add_edge(START, "gate")
    graph.add_conditional_edges("gate", after_gate, ["condense", "context"])
    for a, b in itertools.pairwise(labels[1:]):
        graph.add_edge(a, b)
    graph.add_edge("context", END)
    return graph.compile()


def speed(store: Store, names: list[str], turns: list[Any], repeats: int, *, gc_freeze: bool) -> None:
    import agentrag.integrations.langgraph as lg

    clock = Clock()
    # Time the agentrag work inside each node; the rest of graph.invoke is the wrapper's.
    nodes = {}
    for name in (
        "start",
        "gate_node",
        "condense_node",
        "rewrite_node",
        "search_node",
        "rerank_node",
        "context_node",
    ):
        nodes[name] = clock.wrap(getattr(lg, name))
        setattr(lg, name, nodes[name])
    config = RAGConfig(collections=tuple(names), gate="local", condense="local")
    graph = lg.rag_subgraph(store, config=config)
    with_work = floor_graph(graph, store, config, nodes, work=True)
    no_op = floor_graph(graph, store, config, nodes, work=False)
    for messages in turns:  # the fair floor does the subgraph's work: the same fields out
        ours, floors = graph.invoke({"messages": messages}), with_work.invoke({"messages": messages})
        for key in ("rag_citations", "rag_mode", "rag_grounded", "rag_question"):
            assert ours[key] == floors[key], (key, ours[key], floors[key])

    def condense_only(messages: list[dict[str, str]]) -> None:
        *earlier, last = messages
        ar.condense(ar.new(last["content"], history=earlier))

    if gc_freeze:
        import gc

        for messages in turns:  # warm up, then move everything alive to the permanent generation
            graph.invoke({"messages": messages})
        gc.collect()
        gc.freeze()
    runs: dict[str, list[tuple[float, float]]] = {"condense": [], "retrieve_turn": [], "subgraph": []}
    wrapper: dict[str, list[tuple[float, float]]] = {
        "rag_subgraph": [],
        "floor: same graph, same node work, least glue": [],
        "floor: same graph, no-op nodes, after the turn's retrieval": [],
        "floor: same graph, no-op nodes, back to back": [],
    }
    subgraph, floor, cold, hot = wrapper
    condense_cpu: list[float] = []
    for repeat in range(repeats + 1):  # round 0 warms every cache and is not counted
        for i, messages in enumerate(turns):
            a = clock.run(lambda m=messages: condense_only(m))  # (wall, CPU): no search inside
            b = timed(lambda m=messages: retrieve_turn(store, m, config=config))
            # LangGraph alone, with its caches as cold as after the retrieval the turn does
            d = clock.run(lambda m=messages: no_op.invoke({"messages": m}))
            # the subgraph and its floor with the same work, in alternating order
            pair = [(subgraph, graph), (floor, with_work)][:: 1 if i % 2 else -1]
            measured = {}
            for label, g in pair:
                TimedStore.search_ms = 0.0
                t = time.perf_counter()
                measured[label] = clock.run(lambda g=g, m=messages: g.invoke({"messages": m}))
                measured[label + " total"] = ((time.perf_counter() - t) * 1000, TimedStore.search_ms)
            if repeat:
                runs["condense"].append((a[0], 0.0))
                condense_cpu.append(a[1])
                runs["retrieve_turn"].append(b)
                runs["subgraph"].append(measured[subgraph + " total"])
                wrapper[subgraph].append(measured[subgraph])
                wrapper[floor].append(measured[floor])
                wrapper[cold].append(d)
    for repeat in range(repeats + 1):  # LangGraph alone back to back: every cache hot
        for messages in turns:
            d = clock.run(lambda m=messages: no_op.invoke({"messages": m}))
            if repeat:
                wrapper[hot].append(d)

    med = statistics.median
    print(f"\nper turn, median of {repeats} x {len(turns)} turns, warm caches (ms)")
    print(f"{'path':34} {'total':>8} {'in search':>10} {'overhead':>9} {'overhead/search':>16}")
    for label, values in runs.items():
        total = med([t for t, _ in values])
        inside = med([s for _, s in values])
        over = med([t - s for t, s in values])
        ratio = f"{over / inside:.3f}" if inside else "-"
        print(f"{label:34} {total:8.2f} {inside:10.2f} {over:9.2f} {ratio:>16}")
    cond = med([t for t, _ in runs["condense"]])
    cond_cpu = med(condense_cpu)
    print("\nLangGraph wrapper per turn: invoke - time inside the agentrag node functions (ms)")
    print(f"{'':62} {'wall':>6} {'cpu':>6}")
    w = {label: (med([x for x, _ in v]), med([y for _, y in v])) for label, v in wrapper.items()}
    for label, (wall, cpu) in w.items():
        print(f"{label:62} {wall:6.2f} {cpu:6.2f}")
    ours = (w[subgraph][0] - w[floor][0], w[subgraph][1] - w[floor][1])
    print(f"{'ours: rag_subgraph - floor with the same work':62} {ours[0]:6.2f} {ours[1]:6.2f}")
    ratio = (w[subgraph][0] / w[floor][0], w[subgraph][1] / w[floor][1])
    print(f"{'ratio rag_subgraph / floor with the same work':62} {ratio[0]:6.2f} {ratio[1]:6.2f}")
    print(f"{'condense':62} {cond:6.2f} {cond_cpu:6.2f}")
    total = (cond + w[subgraph][0], cond_cpu + w[subgraph][1])
    print(f"{'condense + wrapper (target <= 2 ms)':62} {total[0]:6.2f} {total[1]:6.2f}")
    least = (cond + w[floor][0], cond_cpu + w[floor][1])
    print(f"{'condense + floor (the least a LangGraph wrapper can cost)':62} {least[0]:6.2f} {least[1]:6.2f}")


if __name__ == "__main__":
    main()
