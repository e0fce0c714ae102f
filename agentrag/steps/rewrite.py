"""``rewrite(max_rewrites=3)``: 1-3 extra search queries that search runs beside the question.

Local strategy: pseudo-relevance feedback. A lexical search for the question finds the
top chunks; their most frequent words that the question lacks are appended to it.
With an LLM, ``prompts/rewrite.j2`` writes the queries. Fan-out is bounded: ``max_rewrites`` is an
integer from 1 to 10 (anything else raises InvalidInputError).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from agentrag.context import Context
from agentrag.errors import InvalidInputError
from agentrag.hits import Hit
from agentrag.llm import LLMCall
from agentrag.prompts import chunk_views
from agentrag.step import Outcome, Step
from agentrag.steps._common import ask_json, clean_list, expansion_terms, use_llm


class RewriteReply(BaseModel):
    queries: list[str] = Field(min_length=1)
    reasoning: str = ""


def llm_rewrites(
    ctx: Context,
    question: str,
    *,
    max_rewrites: int,
    previous: Sequence[str],
    hits: Sequence[Hit],
    delimiter: str,
) -> tuple[list[str], str, list[LLMCall]]:
    reply, calls = ask_json(
        ctx,
        "rewrite",
        RewriteReply,
        question=question,
        max_rewrites=max_rewrites,
        previous_queries=list(previous),
        chunks=chunk_views(hits),
        delimiter=delimiter,
    )
    queries = clean_list(reply.queries, exclude=[question, *previous], limit=max_rewrites)
    return queries, reply.reasoning, calls


def prf_rewrite(question: str, hits: Sequence[Hit], *, count: int = 5) -> str | None:
    extra = expansion_terms(question, hits, count=count)
    return f"{question} {' '.join(extra)}" if extra else None


def _collections(ctx: Context) -> list[str]:
    if ctx.collections is not None:
        return list(ctx.collections)
    if ctx.options.collections is not None:
        return list(ctx.options.collections)
    assert ctx.deps.store is not None
    return [c.name for c in ctx.deps.store.collections()]


def _rewrite(ctx: Context, *, max_rewrites: int = 3, strategy: str = "auto") -> Outcome:
    from agentrag.prompts import new_delimiter

    if not isinstance(max_rewrites, int) or not 1 <= max_rewrites <= 10:
        raise InvalidInputError(f"max_rewrites must be an integer from 1 to 10, got {max_rewrites!r}")
    if use_llm(ctx, strategy, "rewrite"):
        queries, reasoning, calls = llm_rewrites(
            ctx, ctx.question, max_rewrites=max_rewrites, previous=(), hits=(), delimiter=new_delimiter()
        )
        return Outcome(
            {"rewrites": tuple(queries)},
            strategy="llm",
            attributes={"rewrite_count": len(queries)},
            content={"reasoning": reasoning},
            llm_calls=tuple(calls),
        )
    store = ctx.deps.store
    if store is None:
        return Outcome(
            {"rewrites": ()}, strategy="local:none", warnings=("rewrite: no store, so no feedback terms",)
        )
    hits = store.search(
        ctx.question,
        collections=_collections(ctx),
        mode="lexical",
        top_k=3,
        filters=ctx.options.filters,
        scope=ctx.options.scope,
    ).hits
    rewritten = prf_rewrite(ctx.question, hits)
    rewrites = (rewritten,) if rewritten else ()
    return Outcome(
        {"rewrites": rewrites},
        strategy="local:pseudo-relevance-feedback",
        attributes={"rewrite_count": len(rewrites)},
    )


rewrite = Step("rewrite", _rewrite)
