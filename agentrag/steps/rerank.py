"""``rerank(strategy="heuristic" | "llm")``: order the retrieved chunks for the answer.

The heuristic picks greedily, each time the chunk with the best

    normalised score + 0.15 x section-title match + 0.10 x recency - 0.20 x same-document picks

so one long document does not crowd out other sources (source diversity), chunks under
a heading that matches the question rise, and newer documents (metadata ``date``) win
ties. With ``"llm"``, ``prompts/rerank.j2`` orders the chunk labels; any it leaves out
follow in heuristic order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import date

from pydantic import BaseModel

from agentrag.context import Context
from agentrag.errors import InvalidInputError
from agentrag.hits import Hit
from agentrag.llm import LLMCall
from agentrag.prompts import chunk_views
from agentrag.step import Outcome, Step
from agentrag.steps._common import ask_json, coverage

SECTION_WEIGHT = 0.15
RECENCY_WEIGHT = 0.10
REPEAT_PENALTY = 0.20


class RerankReply(BaseModel):
    ranking: list[str]


def _date(hit: Hit) -> date | None:
    raw = hit.metadata.get("date") if hit.metadata else None
    try:
        return date.fromisoformat(str(raw)) if raw else None
    except ValueError:
        return None


def heuristic_order(question: str, hits: Sequence[Hit]) -> list[Hit]:
    if not hits:
        return []
    top = max(h.score for h in hits) or 1.0
    dates = [d for d in (_date(h) for h in hits) if d is not None]
    oldest, newest = (min(dates), max(dates)) if dates else (None, None)

    def static(h: Hit) -> float:
        value = h.score / top
        if h.section:
            value += SECTION_WEIGHT * coverage(question, h.section)
        d = _date(h)
        if d is not None and oldest is not None and newest is not None and newest > oldest:
            value += RECENCY_WEIGHT * (d - oldest).days / (newest - oldest).days
        return value

    base = {h.chunk_id: static(h) for h in hits}
    remaining = sorted(hits, key=lambda h: h.chunk_id)
    picked: list[Hit] = []
    per_doc: Counter[str] = Counter()
    while remaining:
        best = max(
            remaining, key=lambda h: (base[h.chunk_id] - REPEAT_PENALTY * per_doc[h.document_id], h.chunk_id)
        )
        picked.append(best)
        per_doc[best.document_id] += 1
        remaining.remove(best)
    return picked


def _rerank(ctx: Context, *, strategy: str = "heuristic", top_k: int | None = None) -> Outcome:
    if strategy not in ("heuristic", "llm"):
        raise InvalidInputError(f"rerank(): strategy must be 'heuristic' or 'llm', got {strategy!r}")
    if ctx.retrieve is False:
        return Outcome(skipped="gate decided no retrieval is needed")
    hits = list(ctx.hits)
    order = heuristic_order(ctx.question, hits)
    calls: tuple[LLMCall, ...] = ()
    used = "heuristic"
    if strategy == "llm" and hits:
        if ctx.deps.llm is None:
            raise InvalidInputError("rerank(strategy='llm') needs an LLM: pass llm=... to new()")
        from agentrag.prompts import new_delimiter

        reply, got = ask_json(
            ctx,
            "rerank",
            RerankReply,
            question=ctx.question,
            chunks=chunk_views(order),
            delimiter=new_delimiter(),
        )
        calls, used = tuple(got), "llm"
        by_id = {h.chunk_id: h for h in order}
        named = [by_id[i] for i in dict.fromkeys(reply.ranking) if i in by_id]
        order = named + [h for h in order if h not in named]
    if top_k is not None:
        order = order[:top_k]
    ranked = tuple(replace(h, rank=i + 1) for i, h in enumerate(order))
    return Outcome(
        {"ranked": ranked}, strategy=used, attributes={"result_count": len(ranked)}, llm_calls=calls
    )


rerank = Step("rerank", _rerank)
