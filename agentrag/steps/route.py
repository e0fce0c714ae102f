"""``route(collections=[...])``: pick the collections worth searching, with reasoning.

Local strategy: cosine similarity between the question and each collection's
description (with the store's embedder, through its query-vector cache, so descriptions are
embedded once); the best collection is kept, plus any within ``margin`` of it. A compound
question ("compare A and B ...", "... and what ...": its sub-questions when ``decompose`` ran
first, else the local decomposition's parts) is routed part by part as well, and every
collection a part chooses is kept: a question about support times and API limits searches
both collections, not only the one its blended wording is nearest to. With an LLM,
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
from agentrag.steps.decompose import local_decompose

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
    parts = list(ctx.sub_questions or ()) or local_decompose(ctx.question)[0]
    texts = [ctx.question, *(parts if len(parts) > 1 else ())]
    try:
        import numpy as np

        vectors = store.embed_queries(texts + [f"{c.name}: {c.description}" for c in known])
        queries, descriptions = vectors[: len(texts)], vectors[len(texts) :]
        sims = (queries @ descriptions.T) / (
            np.linalg.norm(queries, axis=1)[:, None] * np.linalg.norm(descriptions, axis=1)[None, :] + 1e-12
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
    kept: set[str] = set()
    for row in sims:  # the whole question, then each part
        kept.update(n for n, s in zip(names, row, strict=True) if s >= float(row.max()) - margin)
    best = sims.max(axis=0)  # each collection's best similarity to the question or a part
    chosen = tuple(
        n
        for n, _ in sorted(zip(names, best, strict=True), key=lambda ns: (-float(ns[1]), ns[0]))
        if n in kept
    )
    reasoning = "description similarity: " + ", ".join(
        f"{n}={s:.2f}" for n, s in zip(names, sims[0], strict=True)
    )
    for part, row in zip(texts[1:], sims[1:], strict=True):
        reasoning += f"; part {part!r}: " + ", ".join(f"{n}={s:.2f}" for n, s in zip(names, row, strict=True))
    return Outcome(
        {"collections": chosen, "routing_reasoning": f"{reasoning}; kept within {margin} of each best"},
        strategy="local:embedding-similarity",
        attributes={"collections": list(chosen)},
    )


route = Step("route", _route)
