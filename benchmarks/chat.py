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
turn time - time inside ``Store.search`` (the floor: the retrieval any turn must do). The
wrapper's own cost = subgraph time - ``retrieve_turn`` time.
"""

from __future__ import annotations

import argparse
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
    found = {f"{h.collection.removeprefix('chat_')}/{h.source}" for h in hits}
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
    from agentrag.integrations.langgraph import rag_subgraph

    config = RAGConfig(collections=tuple(names), gate="local", condense="local")
    graph = rag_subgraph(store, config=config)
    turns = [c["messages"] for c in conversations]

    def condense_only(messages: list[dict[str, str]]) -> None:
        *earlier, last = messages
        ar.condense(ar.new(last["content"], history=earlier))

    runs: dict[str, list[tuple[float, float]]] = {"condense": [], "retrieve_turn": [], "subgraph": []}
    for repeat in range(args.repeats + 1):  # round 0 warms every cache and is not counted
        for messages in turns:
            a = timed(lambda m=messages: condense_only(m))
            b = timed(lambda m=messages: retrieve_turn(store, m, config=config))
            c = timed(lambda m=messages: graph.invoke({"messages": m}))
            if repeat:
                runs["condense"].append(a)
                runs["retrieve_turn"].append(b)
                runs["subgraph"].append(c)

    def med(values: list[float]) -> float:
        return statistics.median(values)

    print(f"\nper turn, median of {args.repeats} x {len(turns)} turns, warm caches (ms)")
    print(f"{'path':34} {'total':>8} {'in search':>10} {'overhead':>9} {'overhead/search':>16}")
    for label, values in runs.items():
        total = med([t for t, _ in values])
        inside = med([s for _, s in values])
        over = med([t - s for t, s in values])
        ratio = f"{over / inside:.3f}" if inside else "-"
        print(f"{label:34} {total:8.2f} {inside:10.2f} {over:9.2f} {ratio:>16}")
    wrapper = med([c[0] - b[0] for b, c in zip(runs["retrieve_turn"], runs["subgraph"], strict=True)])
    cond = med([t for t, _ in runs["condense"]])
    print(f"{'subgraph wrapper (subgraph - retrieve_turn)':45} {wrapper:8.2f} ms")
    print(f"{'condense + wrapper (target <= 2 ms)':45} {cond + wrapper:8.2f} ms")


if __name__ == "__main__":
    main()
