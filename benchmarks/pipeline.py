"""The pipeline's own overhead per question, beside the search it wraps.

    .venv/bin/python -m benchmarks.pipeline [--questions 50]

Runs new -> gate -> route -> decompose -> search(self_correct=True) -> rerank -> answer over
the sample corpus with FakeLLM (scripted, ~0 ms) and FakeEmbedder, and times every
``Store.search`` call. Overhead = pipeline time - time inside search - time inside the LLM.
The floor is the search calls themselves (raw retrieval the pipeline cannot avoid). Each
pipeline runs twice: with warm per-text caches, and with every cache emptied before each
question (see :func:`clear_caches`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import agentrag as ar
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder
from benchmarks._db import bench_url
from tests.pipeline_fixtures import scripted

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
QUESTIONS = [
    "How do I paginate through the notes API and what happens when I hit the rate limit?",
    "Compare support response times and API rate limits between the Team and Business plans.",
    "How do I recover a deleted note?",
    "Why can't I log in with SSO?",
    "What export formats are available?",
]


class TimedStore(Store):
    search_ms = 0.0
    inside = False

    def search(self, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        TimedStore.inside = True
        try:
            return super().search(*args, **kwargs)
        finally:
            TimedStore.inside = False
            TimedStore.search_ms += (time.perf_counter() - t) * 1000


class TimedEmbedder(FakeEmbedder):
    outside_search_ms = 0.0  # embedding done outside Store.search (the local route step)

    def embed(self, texts):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return super().embed(texts)
        finally:
            if not TimedStore.inside:
                TimedEmbedder.outside_search_ms += (time.perf_counter() - t) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=50)
    args = parser.parse_args()
    store = TimedStore(bench_url(), embedder=TimedEmbedder(dimensions=64, model_id="bench/fake-64"))
    names = []
    for spec in json.loads((SAMPLES / "collections.json").read_text()):
        name = "bench_" + spec["name"]
        store.create_collection(name, description=spec["description"], exist_ok=True)
        store.ingest(SAMPLES / spec["name"], collection=name)
        names.append(name)

    rows = [
        ("local (no LLM)", None, "warm"),
        ("local (no LLM)", None, "cold"),
        ("FakeLLM (every decision through prompts + JSON)", "llm", "warm"),
        ("FakeLLM (every decision through prompts + JSON)", "llm", "cold"),
    ]
    print(
        "| pipeline | caches | questions | total ms/q | search ms/q | LLM ms/q | overhead ms/q (p50) "
        "| overhead p99 |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for label, kind, caches in rows:
        overheads, totals, searches, llms = [], [], [], []
        for i in range(args.questions + 5):
            question = QUESTIONS[i % len(QUESTIONS)]
            llm = scripted(route=[names[2]]) if kind else None
            if caches == "cold":
                clear_caches(store)
            TimedStore.search_ms = TimedEmbedder.outside_search_ms = 0.0
            t = time.perf_counter()
            ctx = (
                ar.new(question, store=store, llm=llm)
                | ar.gate()
                | ar.route(collections=names)
                | ar.decompose()
                | ar.search(self_correct=True, max_iterations=2)
                | ar.rerank()
                | ar.answer()
            )
            total = (time.perf_counter() - t) * 1000
            ctx.raise_for_error()
            llm_ms = sum(c.latency_ms for c in ctx.llm_calls)
            if i < 5:
                continue  # warm-up: BM25 index build, first connections
            totals.append(total)
            searches.append(TimedStore.search_ms)
            llms.append(llm_ms)
            overheads.append(total - TimedStore.search_ms - llm_ms - TimedEmbedder.outside_search_ms)
        overheads.sort()
        p99 = overheads[min(len(overheads) - 1, int(len(overheads) * 0.99))]
        print(
            f"| {label} | {caches} | {len(totals)} | {statistics.mean(totals):.1f} | "
            f"{statistics.mean(searches):.1f} | {statistics.mean(llms):.2f} | "
            f"{statistics.median(overheads):.2f} | {p99:.2f} |"
        )
    print(
        "\nOverhead excludes time inside Store.search (the floor), the LLM, and the route step's embedding. "
        "warm: the per-text caches (token counts per chunk block, chunk terms, query vectors, the route's "
        "catalogue read) hold what earlier questions left, as in a running chatbot; cold: all of them are "
        "emptied before every question."
    )


def clear_caches(store: Store) -> None:
    """Empty every per-text cache the pipeline keeps, so a question pays for everything."""
    from agentrag import grounding
    from agentrag.steps import _common

    grounding._block_tokens.cache_clear()
    _common.terms.cache_clear()
    store.clear_query_cache()
    store._described.clear()


if __name__ == "__main__":
    main()
