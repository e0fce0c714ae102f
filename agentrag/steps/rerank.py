"""``rerank(strategy="heuristic" | "llm" | "cross-encoder" | "api", reranker=...)``: order the chunks.

The heuristic picks greedily, each time the chunk with the best

    normalised score + 0.15 x section-title match + 0.10 x recency - 0.20 x same-document picks

so one long document does not crowd out other sources (source diversity), chunks under
a heading that matches the question rise, and newer documents (metadata ``date``) win
ties. With ``"llm"``, ``prompts/rerank.j2`` orders the chunk labels; any it leaves out
follow in heuristic order.

With a model, the first ``candidates`` hits (default 50, in fused order) are scored against
the question and sorted by score; the rest follow in fused order (:func:`agentrag.rerankers.rerank_hits`):

* ``"cross-encoder"``: a sentence-transformers CrossEncoder, ``model`` a name or a local directory
  (:class:`~agentrag.rerankers.CrossEncoderReranker`, batched, loaded on first use);
* ``"api"``: a hosted reranker through ``litellm.rerank``, ``model`` e.g. ``"cohere/rerank-english-v3.0"``,
  with ``api_base`` / ``api_key`` (:class:`~agentrag.rerankers.APIReranker`);
* ``reranker=obj``: any object with ``rerank(query, texts) -> scores`` (strategy ``"custom"``).

The scores land on the hits (``Hit.rerank_score``) and on the span (``agentrag.rerank.scores``,
``agentrag.rerank.model``). When the reranker fails (RerankError, or any exception from a user's
reranker) the step keeps the heuristic order and records a ``heuristic`` degradation. Search
more than you answer from so the model has candidates to choose among::

    model = "cross-encoder/ms-marco-MiniLM-L6-v2"
    ctx.search(limit=50).rerank(strategy="cross-encoder", model=model, top_k=5)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import date
from typing import Any

from pydantic import BaseModel

from agentrag.context import Context, Degradation
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


STRATEGIES = ("heuristic", "llm", "cross-encoder", "api")


def _model_reranker(strategy: str, model: str | None, reranker: Any, options: dict[str, Any]) -> Any:
    """The Reranker for a model strategy (or the user's), None for heuristic / llm; checks the options."""
    from agentrag.rerankers import APIReranker, CrossEncoderReranker, Reranker

    allowed = {"cross-encoder": {"batch_size", "max_length"}, "api": {"api_base", "api_key", "timeout"}}
    unknown = sorted(set(options) - allowed.get(strategy, set()))
    if unknown:
        raise InvalidInputError(f"rerank(strategy={strategy!r}) does not take {', '.join(unknown)}")
    if reranker is not None:
        if strategy not in ("heuristic", "custom") or model is not None:
            raise InvalidInputError("rerank(): reranker= takes no strategy or model")
        if not isinstance(reranker, Reranker):
            raise InvalidInputError(
                f"rerank(): reranker must have rerank(query, texts) -> scores, got {type(reranker).__name__}"
            )
        return reranker
    if strategy not in STRATEGIES:
        raise InvalidInputError(
            f"rerank(): strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}"
        )
    if strategy == "cross-encoder":
        return CrossEncoderReranker(model, **options) if model else CrossEncoderReranker(**options)
    if strategy == "api":
        if not model:
            raise InvalidInputError("rerank(strategy='api') needs model=, e.g. 'cohere/rerank-english-v3.0'")
        return APIReranker(model, **options)
    if model is not None:
        raise InvalidInputError(f"rerank(strategy={strategy!r}) takes no model")
    return None


def _rerank(
    ctx: Context,
    *,
    strategy: str = "heuristic",
    top_k: int | None = None,
    model: str | None = None,
    reranker: Any = None,
    candidates: int = 50,
    batch_size: int | None = None,
    max_length: int | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    timeout: float | None = None,
) -> Outcome:
    from agentrag.rerankers import rerank_hits, reranker_name

    given = {"batch_size": batch_size, "max_length": max_length, "api_base": api_base, "api_key": api_key}
    model_options = {k: v for k, v in {**given, "timeout": timeout}.items() if v is not None}
    scorer = _model_reranker(strategy, model, reranker, model_options)
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
        raise InvalidInputError(f"rerank(): candidates must be an integer >= 1, got {candidates!r}")
    if ctx.retrieve is False:
        return Outcome(skipped="gate decided no retrieval is needed")
    hits = list(ctx.hits)
    order = heuristic_order(ctx.question, hits)
    calls: tuple[LLMCall, ...] = ()
    used = "heuristic"
    attributes: dict[str, Any] = {}
    degradations: tuple[Degradation, ...] = ()
    if scorer is not None and hits:
        name = reranker_name(scorer)
        attributes["model"] = name
        try:
            order = rerank_hits(scorer, ctx.question, hits, candidates=candidates)
            used = "custom" if reranker is not None else strategy
            scores = [h.rerank_score for h in order if h.rerank_score is not None]
            attributes["scores"] = [round(s, 6) for s in scores]
            attributes["candidates"] = len(scores)
        except Exception as exc:  # a model or a user's reranker failed: the heuristic order stands
            reason = " ".join(str(exc).split())[:200]
            degradations = (
                Degradation(
                    "rerank", "heuristic", f"reranker {name} failed ({type(exc).__name__}: {reason})"
                ),
            )
    elif strategy == "llm" and hits:
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
        {"ranked": ranked},
        strategy=used,
        attributes={"result_count": len(ranked), **attributes},
        llm_calls=calls,
        degradations=degradations,
    )


rerank = Step("rerank", _rerank)
