"""``route(collections=[...])``: pick the collections worth searching, with reasoning.

Local strategy: cosine similarity between the question and each collection's
description (with the store's embedder, through its query-vector cache, so descriptions are
embedded once); the best collection is kept, plus any within ``margin`` of it. With an LLM,
``prompts/route.j2`` chooses (names are validated).

The collections' descriptions come from :meth:`Store.describe` with ``max_age`` of
:data:`CATALOGUE_MAX_AGE` seconds: a pipeline does not query the catalogue on every question.
A collection deleted by another process within that time fails at ``search`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field, create_model

from agentrag.context import Context, Degradation
from agentrag.errors import EmbeddingError, InvalidInputError
from agentrag.step import Outcome, Step
from agentrag.steps._common import ask_json, require_store, use_llm

CATALOGUE_MAX_AGE = 60.0


def _reply_model(names: Sequence[str]) -> type[BaseModel]:
    choice = Literal[tuple(names)]  # type: ignore[valid-type]
    return create_model(
        "RouteReply",
        collections=(list[choice], Field(min_length=1)),  # type: ignore[valid-type]
        reasoning=(str, ""),
    )


def _route(
    ctx: Context, *, collections: Sequence[str], strategy: str = "auto", margin: float = 0.05
) -> Outcome:
    if isinstance(collections, str) or not collections:
        raise InvalidInputError("route(collections=[...]) takes a non-empty list of collection names")
    names = list(dict.fromkeys(collections))
    store = require_store(ctx, "route")
    known = store.describe(names, max_age=CATALOGUE_MAX_AGE)  # CollectionNotFoundError for a typo
    if len(known) == 1:
        return Outcome(
            {"collections": (names[0],), "routing_reasoning": "only one collection given"},
            strategy="trivial",
            attributes={"collections": names},
        )
    if use_llm(ctx, strategy, "route"):
        reply, calls = ask_json(
            ctx,
            "route",
            _reply_model(names),
            question=ctx.question,
            collections=[{"name": c.name, "description": c.description} for c in known],
        )
        chosen = tuple(dict.fromkeys(reply.collections))  # type: ignore[attr-defined]
        return Outcome(
            {"collections": chosen, "routing_reasoning": reply.reasoning},  # type: ignore[attr-defined]
            strategy="llm",
            attributes={"collections": list(chosen)},
            content={"reasoning": reply.reasoning},  # type: ignore[attr-defined]
            llm_calls=tuple(calls),
        )
    try:
        import numpy as np

        vectors = store.embed_queries([ctx.question] + [f"{c.name}: {c.description}" for c in known])
        sims = (
            vectors[1:]
            @ vectors[0]
            / (np.linalg.norm(vectors[1:], axis=1) * np.linalg.norm(vectors[0]) + 1e-12)
        )
    except EmbeddingError as exc:
        return Outcome(
            {
                "collections": tuple(names),
                "routing_reasoning": "embedder unavailable: searching every collection",
            },
            strategy="local:all",
            attributes={"collections": names},
            degradations=(Degradation("route", "all-collections", f"embedder failed: {type(exc).__name__}"),),
        )
    best = float(sims.max())
    ranked = sorted(zip(names, sims, strict=True), key=lambda ns: (-float(ns[1]), ns[0]))
    chosen = tuple(n for n, s in ranked if s >= best - margin)
    scores = ", ".join(f"{n}={s:.2f}" for n, s in zip(names, sims, strict=True))
    return Outcome(
        {
            "collections": chosen,
            "routing_reasoning": f"description similarity: {scores}; kept within {margin}",
        },
        strategy="local:embedding-similarity",
        attributes={"collections": list(chosen)},
    )


route = Step("route", _route)
