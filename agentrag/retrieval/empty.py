"""Why a search came back empty: ``SearchResult.empty_reason``.

Computed only when a search returns no hit, with one cheap statement on the search's own
connection: per collection, how many documents the scope lets through and how many the filters
then keep (``count(*) FILTER (WHERE ...)`` over the scope's documents, which the scope and filter
fragments already address as ``d``; an unrestricted scope's count is the collection's size). The
first step that leaves nothing is the reason:

* ``collection 'docs' is empty``: nothing was ingested into it (in this database);
* ``nothing in collection 'docs' is visible to the scope (tenant='acme')``: a restricted caller
  (a tenant, session, principal) is told nothing about documents it may not read, not even
  whether there are any: the counts are the visible documents' only;
* ``the filters exclude all 12 documents``;
* ``no lexical match ... and no embedder``: a hybrid search lost its vector leg and BM25 found no
  chunk sharing a term with the query; ``no lexical match`` alone in the lexical modes;
* ``min_score=0.9 removed all 37 candidates (best 0.41)``.

The reason names counts, the collection and the scope's keys, never document text. The counts
use the search's own predicate per collection (:mod:`agentrag.retrieval.predicate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from agentrag.retrieval.predicate import Predicate
    from agentrag.retrieval.sources import CollectionInfo
    from agentrag.scope import Scope

__all__ = ["empty_reason"]


def _scope_text(scope: Scope | None) -> str:
    if scope is None:
        return ""
    pairs = (("tenant", scope.tenant), ("workspace", scope.workspace), ("session", scope.session))
    text = ", ".join(f"{key}={value!r}" for key, value in pairs if value is not None)
    if scope.principal is not None:
        text = ", ".join([*([text] if text else []), f"principal={scope.principal!r}"])
    return text


def _per_collection(colls: Sequence[CollectionInfo], fragment: Any) -> str:
    """One boolean over ``d`` that applies each collection's own fragment to its documents."""
    parts = {c.id: fragment(c) for c in colls}
    if all(p == "TRUE" for p in parts.values()):
        return "TRUE"
    return " OR ".join(f"(d.collection_id = {int(cid)} AND ({sql}))" for cid, sql in parts.items())


def empty_reason(
    conn: Connection,
    *,
    collections: Sequence[CollectionInfo],
    predicate: Predicate,
    used_mode: str,
    degraded: str | None,
    lexical_candidates: int,
    min_score: float | None,
    candidates: Sequence[tuple[str, float]],
) -> str:
    """The reason a search over ``collections`` returned no hit."""
    from sqlalchemy import text

    scope, params = predicate.scope, predicate.params
    scope_sql = _per_collection(collections, lambda c: predicate.visible_sql(c.acl, c.private_documents))
    matching_sql = _per_collection(
        collections, lambda c: predicate.where(acl=c.acl, private_documents=c.private_documents)
    )
    # only the documents in scope are read (through the scope's own indexes): a tenant's 4 documents
    # among 20,000 cost 0.3 ms, not a count of the whole collection (14 ms). An unrestricted caller's
    # scope is every document, so its in-scope count is the collection's size ("is empty" below).
    rows = conn.execute(
        text(
            "SELECT d.collection_id, count(*) AS in_scope,"
            f" count(*) FILTER (WHERE {matching_sql}) AS matching"
            " FROM agentrag.documents d WHERE d.collection_id = ANY(CAST(:e_ids AS bigint[]))"
            f" AND ({scope_sql}) GROUP BY d.collection_id"
        ),
        {**params, "e_ids": [c.id for c in collections]},
    ).all()
    counts = {row.collection_id: (row.in_scope, row.matching) for row in rows}
    in_scope = sum(c[0] for c in counts.values())
    matching = sum(c[1] for c in counts.values())
    if scope_sql != "TRUE" and in_scope == 0:
        # A restricted caller learns nothing of what it may not read: not a count, not emptiness.
        names = ", ".join(repr(c.name) for c in collections)
        hint = ""
        if scope is not None and scope.session is not None:
            hint = " (a document is in a session only when it was ingested with that session=)"
        return f"nothing in collection {names} is visible to the scope ({_scope_text(scope)}){hint}"
    if in_scope == 0:  # unrestricted: no collection holds a document
        empty = [c.name for c in collections if counts.get(c.id, (0, 0))[0] == 0]
        names = ", ".join(repr(n) for n in empty)
        verb = "is" if len(empty) == 1 else "are"
        return (
            f"collection {names} {verb} empty: nothing has been ingested into it in this database "
            "(ingest documents first, or check AGENTRAG_DATABASE_URL / AGENTRAG_DATA_DIR)"
        )
    if matching == 0:
        where = " in scope" if scope_sql != "TRUE" else ""
        n = f"{'' if in_scope == 1 else 'all '}{in_scope} document{'' if in_scope == 1 else 's'}"
        return f"the filters exclude {n}{where}"
    searched = f"{matching} document{'' if matching == 1 else 's'}"
    if min_score is not None and candidates:
        best = max(score for _, score in candidates)
        return f"min_score={min_score:g} removed all {len(candidates)} candidates (best score {best:.4f})"
    if used_mode in ("lexical", "lexical_sql") and lexical_candidates == 0:
        if degraded:
            return (
                f"no lexical match: no chunk of the {searched} shares a term with the query, and no embedder "
                "for the vector leg (it failed; see the warning)"
            )
        return f"no lexical match: no chunk of the {searched} shares a term with the query (mode={used_mode})"
    return f"no chunk of the {searched} matched the query (mode={used_mode})"
