"""Shared pipeline fixtures: the sample corpus in the test database and a scripted LLM."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentrag.context import Context
from agentrag.testing import FakeLLM

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
NAMES = ["product_docs", "support", "api"]
Q_PAGINATE = "How do I paginate through the notes API and what happens when I hit the rate limit?"
Q_COMPARE = "Compare support response times and API rate limits between the Team and Business plans."


@pytest.fixture(scope="session")
def sample_store(fake_embedder):  # type: ignore[no-untyped-def]
    """The three sample collections, alone in a database of their own: the pipeline searches
    every collection, so what other tests leave in the shared ``store`` must not reach it."""
    from agentrag.store.store import Store
    from tests.conftest import fresh_database

    with fresh_database("agentrag_samples") as url:
        store = Store(url, embedder=fake_embedder)
        for spec in json.loads((SAMPLES / "collections.json").read_text()):
            store.create_collection(spec["name"], description=spec["description"])
            report = store.ingest(SAMPLES / spec["name"], collection=spec["name"])
            assert report.ok, report
        yield store
        store.close()


def prompt_kind(messages: Sequence[dict[str, str]]) -> str:
    text = "\n".join(m["content"] for m in messages)
    for key, kind in (
        ('"retrieve"', "gate"),
        ('"sub_questions"', "decompose"),
        ('"sufficient"', "sufficiency"),
        ('"ranking"', "rerank"),
        ('"queries"', "rewrite"),
        ('"collections"', "route"),
    ):
        if key in text:
            return kind
    return "answer"


def scripted(
    *, sufficient: bool | str = True, rewrite: str | None = None, route: Sequence[str] = ("api",)
) -> FakeLLM:
    """A deterministic LLM answering each prompt kind sensibly."""

    def reply(messages: Sequence[dict[str, str]]) -> str:
        kind = prompt_kind(messages)
        text = "\n".join(m["content"] for m in messages)
        if kind == "gate":
            return json.dumps({"retrieve": True, "reasoning": "needs the docs"})
        if kind == "route":
            return json.dumps({"collections": list(route), "reasoning": "api questions"})
        if kind == "decompose":
            return json.dumps({"sub_questions": ["How does pagination work?", "What happens on a 429?"]})
        if kind == "sufficiency":
            if isinstance(sufficient, str):
                return sufficient
            return json.dumps({"sufficient": sufficient, "reasoning": "judged"})
        if kind == "rewrite":
            n = len(re.findall(r"rewritten", text))
            return json.dumps({"queries": [rewrite or f"rewritten query {n}"]})
        if kind == "rerank":
            return json.dumps({"ranking": re.findall(r"\[(chk_[0-9a-f]+)\]", text)[::-1]})
        labels = re.findall(r"\[(chk_[0-9a-f]+)\]", text)
        return (
            f"Use the cursor from next_cursor to page [{labels[0]}]. "
            f"Retry after the Retry-After delay [{labels[-1]}]."
        )

    return FakeLLM(fn=reply)


def stable(ctx: Context) -> dict[str, Any]:
    """A snapshot-friendly view: random chunk ids become file#index."""
    names: dict[str, str] = {}
    for hit in [*ctx.hits, *ctx.context_used, *(h for r in ctx.results for h in r.hits)]:
        names[hit.chunk_id] = f"{Path(hit.source or '?').name}#{hit.chunk_index}"

    def fix(text: str | None) -> str | None:
        if text is None:
            return None
        return re.sub(r"chk_[0-9a-f]{16}", lambda m: names.get(m.group(0), "chk_?"), text)

    return {
        "question": ctx.question,
        "retrieve": ctx.retrieve,
        "collections": ctx.collections,
        "routing_reasoning": fix(ctx.routing_reasoning),
        "rewrites": ctx.rewrites,
        "sub_questions": ctx.sub_questions,
        "results": [
            {
                "question": r.question,
                "collection": r.collection,
                "stop_reason": r.stop_reason.value,
                "used_mode": r.used_mode,
                "hits": [names[h.chunk_id] for h in r.hits],
                "iterations": [
                    {
                        "queries": [fix(q) for q in it.queries],
                        "new_hits": it.new_hits,
                        "sufficient": it.sufficient,
                    }
                    for it in r.iterations
                ],
            }
            for r in ctx.results
        ],
        "answer": fix(ctx.answer_text),
        "citations": [names.get(c, c) for c in ctx.citations],
        "grounded": ctx.grounded,
        "mode": ctx.mode,
        "steps": [(s.name, s.strategy, s.skipped) for s in ctx.steps],
        "llm_calls": [(c.purpose, c.repair, c.error) for c in ctx.llm_calls],
        "degradations": [(d.step, d.kind) for d in ctx.degradations],
        "error": type(ctx.error).__name__ if ctx.error else None,
    }


Pipeline = Callable[[Context], Context]
