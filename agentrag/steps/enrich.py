"""``enrich(entity=None, depth=1)``: add an entity's knowledge-graph neighbourhood to the context.

The triples within ``depth`` hops of ``entity`` (in every collection searched: the
context's collections, else ``collections=``, else all) become ``ctx.graph_context``, one
``[rel_<id>] subject --relation--> object`` line each, which the answer prompt shows
inside the request's delimiters; the ``rel_<id>`` labels are citable. Without ``entity``,
the entities named in the question are used (up to ``max_entities``, longest first).
Both reads run in the context's scope (``ctx.options.scope``, tenant-rooted, enforced in SQL
on every hop): another tenant's triples never reach ``graph_context``, and a scoped
collection without a tenant scope is refused with ``ScopeError`` as search refuses it.

When the graph cannot be read (database down), the step records a ``graph-unavailable``
degradation and leaves ``graph_context`` as it was: enrichment is never fatal. When search
fails later, a graph context lets ``answer()`` still answer in ``graph-only`` mode.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentrag.context import Context, Degradation
from agentrag.errors import InvalidInputError, StoreError
from agentrag.step import Outcome, Step
from agentrag.steps._common import require_store
from agentrag.store.relations import MAX_DEPTH, Relation, format_triples, mentioned_entities, neighbourhood


def _collections(ctx: Context, collections: Sequence[str] | str | None) -> list[str]:
    if isinstance(collections, str):
        collections = [collections]
    names = collections or ctx.collections or ctx.options.collections
    if names:
        return list(names)
    return [c.name for c in require_store(ctx, "enrich").collections()]


def _enrich(
    ctx: Context,
    *,
    entity: str | None = None,
    depth: int = 1,
    collections: Sequence[str] | None = None,
    limit: int = 50,
    max_entities: int = 3,
) -> Outcome:
    from sqlalchemy.exc import SQLAlchemyError

    store = require_store(ctx, "enrich")
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise InvalidInputError(f"depth must be an integer from 1 to {MAX_DEPTH}, got {depth!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise InvalidInputError(f"limit must be an integer from 1 to 1000, got {limit!r}")
    if entity is not None and (not isinstance(entity, str) or not entity.strip()):
        raise InvalidInputError(f"entity must be a non-empty string, got {entity!r}")
    scope = ctx.options.scope
    try:
        names = _collections(ctx, collections)
        found: dict[int, Relation] = {}
        entities: list[str] = []
        for name in names:
            wanted = (
                [entity]
                if entity
                else mentioned_entities(store, name, ctx.question, limit=max_entities, scope=scope)
            )
            entities.extend(wanted)
            for one in wanted:
                for triple in neighbourhood(store, name, one, depth, limit=limit, scope=scope):
                    known = found.get(triple.id)
                    if known is None or (triple.hop or 0) < (known.hop or 0):
                        found[triple.id] = triple
    except (StoreError, SQLAlchemyError) as exc:
        reason = f"the knowledge graph could not be read: {type(exc).__name__}"
        return Outcome(
            strategy="graph",
            warnings=(reason,),
            degradations=(Degradation("enrich", "graph-unavailable", reason),),
            attributes={"relation_count": 0},
        )
    triples = sorted(found.values(), key=lambda t: (t.hop or 0, t.id))[:limit]
    attrs = {
        "relation_count": len(triples),
        "entity_count": len(dict.fromkeys(e.lower() for e in entities)),
        "depth": depth,
    }
    if not triples:
        why = (
            "no entity of the knowledge graph is named in the question"
            if not entities
            else "no relations found"
        )
        return Outcome(strategy="graph" if entity else "graph:mentioned", attributes=attrs, skipped=why)
    text = format_triples(triples)
    lines = [*(ctx.graph_context or "").splitlines(), *text.splitlines()]
    graph = "\n".join(dict.fromkeys(line for line in lines if line.strip()))
    return Outcome(
        {"graph_context": graph}, strategy="graph" if entity else "graph:mentioned", attributes=attrs
    )


enrich = Step("enrich", _enrich)
