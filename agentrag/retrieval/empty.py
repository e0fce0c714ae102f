"""Why a search came back empty: ``SearchResult.empty_reason``.

Computed only when a search returns no hit, with one cheap statement on the search's own
connection: per collection, how many documents it holds, how many the scope lets through and
how many the filters then keep (``count(*) FILTER (WHERE ...)`` over the documents table,
which the scope and filter fragments already address as ``d``). The first step that leaves
nothing is the reason:

* ``collection 'docs' is empty``: nothing was ingested into it (in this database);
* ``the scope (session='s1') excludes all 12 documents``;
* ``the filters exclude all 12 documents``;
* ``no lexical match ... and no embedder``: a hybrid search lost its vector leg and BM25 found no
  chunk sharing a term with the query; ``no lexical match`` alone in the lexical modes;
* ``min_score=0.9 removed all 37 candidates (best 0.41)``.

The reason names counts, the collection and the scope's keys, never document text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from agentrag.scope import Scope

__all__ = ["empty_reason"]


def _scope_text(scope: Scope | None) -> str:
    if scope is None:
        return ""
    pairs = (("tenant", scope.tenant), ("workspace", scope.workspace), ("session", scope.session))
    return ", ".join(f"{key}={value!r}" for key, value in pairs if value is not None)


def empty_reason(
    conn: Connection,
    *,
    collections: Sequence[tuple[int, str]],
    scope_sql: str,
    filter_sql: str,
    params: dict[str, Any],
    scope: Scope | None,
    used_mode: str,
    degraded: str | None,
    lexical_candidates: int,
    min_score: float | None,
    candidates: Sequence[tuple[str, float]],
) -> str:
    """The reason a search over ``collections`` (``(id, name)`` pairs) returned no hit."""
    from sqlalchemy import text

    rows = conn.execute(
        text(
            "SELECT d.collection_id, count(*) AS total,"
            f" count(*) FILTER (WHERE {scope_sql}) AS in_scope,"
            f" count(*) FILTER (WHERE ({scope_sql}) AND ({filter_sql})) AS matching"
            " FROM agentrag.documents d WHERE d.collection_id = ANY(CAST(:e_ids AS bigint[]))"
            " GROUP BY d.collection_id"
        ),
        {**params, "e_ids": [cid for cid, _ in collections]},
    ).all()
    counts = {row.collection_id: (row.total, row.in_scope, row.matching) for row in rows}
    total = sum(c[0] for c in counts.values())
    in_scope = sum(c[1] for c in counts.values())
    matching = sum(c[2] for c in counts.values())
    empty = [name for cid, name in collections if counts.get(cid, (0, 0, 0))[0] == 0]
    docs = f"{'' if total == 1 else 'all '}{total} document{'' if total == 1 else 's'}"
    if total == 0:
        names = ", ".join(repr(n) for n in empty)
        verb = "is" if len(empty) == 1 else "are"
        return (
            f"collection {names} {verb} empty: nothing has been ingested into it in this database "
            "(ingest documents first, or check AGENTRAG_DATABASE_URL / AGENTRAG_DATA_DIR)"
        )
    if in_scope == 0:
        hint = ""
        if scope is not None and scope.session is not None:
            hint = " (a document is in a session only when it was ingested with that session=)"
        return f"the scope ({_scope_text(scope)}) excludes {docs}{hint}"
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
