"""The scope planner's count under grants (issue #39): planned to read the documents' GIN index on
``grants`` for every principal, whatever the number of its tokens and the connection's plan cache,
and still exact."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

import agentrag as ar
from agentrag.retrieval import scoped
from agentrag.retrieval.predicate import compile_predicate, grants_by_index
from agentrag.scope import Scope
from agentrag.store.ingest import ingest_texts
from agentrag.store.store import Store

DOCS = 3_000
GROUPS = 300  # document i granted to group g<i mod GROUPS> only: each group holds 10 documents


@pytest.fixture(scope="module")
def many_groups(store: Store) -> Iterator[dict[str, Any]]:
    """An acl collection of the benchmark's shape (benchmarks/acl.py), smaller: one chunk a document."""
    name = f"count_plan_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, acl=True)
    items = [
        (f"doc-{i:05d}", f"note {i} words", {"grants": [f"group:g{i % GROUPS:03d}"]}) for i in range(DOCS)
    ]
    report = ingest_texts(store, items, collection=name, bulk=True)
    assert report.chunks_written == DOCS
    with store.engine.begin() as conn:
        conn.execute(text("ANALYZE agentrag.documents"))
    yield {"name": name, "id": store.collection(name).id}
    store.delete_collection(name)


def _principal(groups: int) -> ar.Principal:
    return ar.Principal(user="ann", groups=[f"g{g:03d}" for g in range(groups)])


def _count_plan(store: Store, cid: int, principal: ar.Principal) -> tuple[str, scoped.ScopeCount]:
    predicate = compile_predicate(Scope(principal=principal))
    where = predicate.where(acl=True)
    with store.engine.begin() as conn:
        # EXPLAIN with the parameters bound: a custom plan, the tokens known to the planner
        plan = "\n".join(
            conn.execute(text("EXPLAIN " + scoped.count_sql(cid, where)), predicate.params).scalars()
        )
        counted = scoped.count_scope(conn, cid, where, predicate.params)
    return plan, counted


@pytest.mark.parametrize("groups", [3, 30, 60])
def test_the_count_reads_the_grants_index_for_every_principal(
    store: Store, many_groups: dict, groups: int
) -> None:
    """1 %, 10 % and 20 % of the documents (5, 32 and 62 tokens): with the tokens in the plan, the
    planner costs the overlap on each of the collection's rows as one operator and the GIN scan per
    token, and scanned the collection's documents for the larger principals (14-170 ms for 102 tokens
    on 10,000 documents against 1.3-15 through the index); every plan now reads documents_grants."""
    plan, counted = _count_plan(store, many_groups["id"], _principal(groups))
    assert "documents_grants" in plan, plan
    assert "Seq Scan" not in plan, plan
    visible = groups * DOCS // GROUPS
    assert (counted.documents, counted.chunks, counted.rows) == (visible, visible, visible)
    assert counted.ids is not None and len(set(counted.ids)) == visible


def test_the_indexed_grant_test_is_the_same_test_behind_a_subquery() -> None:
    """Only the grant part changes (the tenant and the filters keep their values in the plan), and a
    predicate without grants is left as it is."""
    scope = Scope(tenant="t1", principal=_principal(2))
    predicate = compile_predicate(scope, {"metadata": {"topic": 3}})
    where = predicate.where(acl=True)
    indexed = grants_by_index(where)
    assert "d.grants && (SELECT CAST(:p_tokens AS text[]))" in indexed
    assert indexed.replace("(SELECT CAST(:p_tokens AS text[]))", "CAST(:p_tokens AS text[])") == where
    assert grants_by_index(predicate.where(acl=False)) == predicate.where(acl=False)


def test_a_search_counts_exactly_what_it_returns(store: Store, many_groups: dict) -> None:
    """The count's rows through a search: exact scan at 10 %, every hit visible, exactly top_k."""
    principal = _principal(30)
    result = store.search(
        "note words",
        collections=many_groups["name"],
        mode="vector",
        scope=Scope(principal=principal),
        top_k=10,
    )
    assert result.plan[0].endswith("rows=300")
    assert len(result) == 10
    assert all(h.grant is not None and h.grant.startswith("group:g0") for h in result)
