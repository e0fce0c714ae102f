"""The scope planner (agentrag/retrieval/scoped.py): exact scans and BM25 over a small scope's own
postings, the iterative HNSW walk with a raised max_scan_tuples for a large one, the same rows either way,
and the choice on the result, in explain=True and on the search span."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event, text

import agentrag as ar
from agentrag.errors import InvalidInputError
from agentrag.retrieval import scoped
from agentrag.retrieval.vector import joined_ids, vector_sql
from agentrag.scope import Scope
from agentrag.store.ingest import ingest_texts
from agentrag.store.store import Store
from tests.conftest import tenant_corpus


def _vector_options(name: str, tenant: str, topic: int | None) -> dict[str, Any]:
    """A vector search of the top 10 in ``tenant``, with a metadata filter on ``topic`` if given."""
    return {
        "collections": name,
        "mode": "vector",
        "scope": Scope(tenant=tenant),
        "top_k": 10,
        "filters": None if topic is None else {"metadata": {"topic": topic}},
    }


@contextmanager
def _recorded(store: Store) -> Iterator[list[str]]:
    """The SQL statements ``store`` sends inside the block."""
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(store.engine, "before_cursor_execute", record)


WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "orbit",
    "comet",
    "nebula",
    "quasar",
    "pulsar",
    "galaxy",
    "planet",
    "moon",
    "star",
    "dust",
    "ice",
    "rock",
]
SIZES = {"big": 120, "mid": 30, "tiny": 3}  # one-chunk documents per tenant


@pytest.fixture(scope="module")
def tenants(store: Store) -> Iterator[dict[str, Any]]:
    with tenant_corpus(store, "scoped", SIZES, WORDS, seed=7, length=12, topics=10) as name:
        yield {"name": name}


def _exact(store: Store, name: str, query: str, tenant: str, k: int) -> list[str]:
    qvec = store.embed_queries([query])[0]
    with store.engine.connect() as conn:
        cid = conn.execute(text("SELECT id FROM agentrag.collections WHERE name = :n"), {"n": name}).scalar()
        rows = conn.execute(
            text(
                "SELECT c.id FROM agentrag.chunks c JOIN agentrag.documents d ON d.id = c.document_id"
                " WHERE c.collection_id = :c AND d.tenant_id = :t ORDER BY"
                ' (c.embedding::vector(64) <=> CAST(:q AS vector(64))) + 0, c.id COLLATE "C" LIMIT :k'
            ),
            {"c": cid, "t": tenant, "q": qvec, "k": k},
        ).all()
    return [r.id for r in rows]


def test_a_small_scope_is_scanned_exactly_and_ranked_over_its_own_postings(
    store: Store, tenants: dict
) -> None:
    name = tenants["name"]
    result = store.search("comet nebula", collections=name, scope=Scope(tenant="mid"), explain=True)
    assert result.plan == (f"{name}: vector=exact lexical=bm25-scope rows=30",)
    assert result.explain is not None
    leg = result.explain[0]
    assert leg["scope_rows"] == 30 and leg["exact_max_rows"] == scoped.EXACT_MAX_ROWS
    assert "exact" in leg["reason"]
    vector = store.search(
        "comet nebula", collections=name, scope=Scope(tenant="mid"), mode="vector", top_k=10
    )
    assert vector.chunk_ids == _exact(store, name, "comet nebula", "mid", 10)
    tiny = store.search("comet", collections=name, scope=Scope(tenant="tiny"), top_k=10)
    assert len(tiny) == 3  # exactly min(k, matches)


def test_a_large_scope_walks_hnsw_with_a_raised_max_scan_tuples(
    store: Store, tenants: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = tenants["name"]
    store.ensure_vector_index(store.collection(name))
    monkeypatch.setattr(scoped, "EXACT_MAX_ROWS", 20)
    monkeypatch.setattr(scoped, "SCOPE_MAX_DOCS", 20)
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *args: Any) -> None:
        if "max_scan_tuples" in statement:
            seen.append(str(params))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        result = store.search("comet", collections=name, scope=Scope(tenant="big"), explain=True, top_k=10)
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    assert result.plan == (f"{name}: vector=hnsw-iterative lexical=bm25-slices rows=>20",)
    assert result.explain is not None and result.explain[0]["max_scan_tuples"] >= scoped.MIN_MAX_SCAN_TUPLES
    assert seen and str(result.explain[0]["max_scan_tuples"]) in seen[0]
    assert len(result) == 10


def test_unrestricted_searches_count_nothing(store: Store, tenants: dict) -> None:
    with _recorded(store) as statements:
        result = store.search("comet", collections=tenants["name"], scope=Scope.every())
    assert result.plan[0].endswith("lexical=bm25-top")
    assert not any("chunk_count" in s for s in statements)


def test_the_plan_says_which_legs_ran(store: Store, tenants: dict) -> None:
    name, scope = tenants["name"], Scope(tenant="mid")
    assert (
        store.search("comet", collections=name, scope=scope, mode="vector")
        .plan[0]
        .endswith("vector=exact lexical=none rows=30")
    )
    assert (
        "vector=none lexical=sql"
        in store.search("comet", collections=name, scope=scope, mode="lexical_sql").plan[0]
    )
    assert store.search("comet", collections=name, scope=scope).explain is None
    with pytest.raises(InvalidInputError, match="explain"):
        store.search("comet", collections=name, scope=scope, explain="yes")  # type: ignore[arg-type]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    tenant=st.sampled_from(sorted(SIZES)),
    topic=st.one_of(st.none(), st.integers(0, 11)),
    depth=st.integers(1, 40),
)
def test_bm25_over_the_scope_finds_what_the_slices_find(
    store: Store, tenants: dict, words: list[str], tenant: str, topic: int | None, depth: int
) -> None:
    """Whatever the scope and filter: the same rows and scores, planner on or off."""
    options: dict[str, Any] = {
        "collections": tenants["name"],
        "mode": "lexical",
        "scope": Scope(tenant=tenant),
        "top_k": min(depth, 50),
        "depth": depth,
        "filters": None if topic is None else {"metadata": {"topic": topic}},
    }
    query = " ".join(words)
    on = store.search(query, **options)
    assert "bm25-scope" in on.plan[0]
    saved = scoped.SCOPE_MAX_DOCS
    scoped.SCOPE_MAX_DOCS = -1
    try:
        off = store.search(query, **options)
    finally:
        scoped.SCOPE_MAX_DOCS = saved
    assert "bm25-slices" in off.plan[0]
    assert [(h.chunk_id, h.score) for h in on] == [(h.chunk_id, h.score) for h in off]


def test_bm25_over_the_scope_reads_document_ids_once_and_no_chunk_id(store: Store, tenants: dict) -> None:
    """The plan's count returns the scope's document ids in the same statement; the lexical leg masks
    the index by them (no chunk id crosses the wire); without them it reads the ids itself: the same rows."""
    from agentrag.retrieval.lexical import cached_bm25

    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    name = tenants["name"]
    options: dict[str, Any] = {
        "collections": name,
        "mode": "lexical",
        "scope": Scope(tenant="big"),
        "top_k": 50,
    }
    store.scope_cache.clear()  # the count itself, not an earlier test's count of the same scope
    event.listen(store.engine, "before_cursor_execute", record)
    try:
        result = store.search("comet nebula orbit", explain=True, **options)
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    assert result.plan == (f"{name}: vector=none lexical=bm25-scope rows=120",)
    assert result.explain is not None and result.explain[0]["scope_max_docs"] == scoped.SCOPE_MAX_DOCS
    assert "documents" not in result.explain[0]
    assert sum("string_agg(id" in s for s in statements) == 1
    assert not any("SELECT c.id FROM agentrag.chunks" in s or "jsonb_array_elements" in s for s in statements)
    coll = store.collection(name)
    cached = cached_bm25(store.bm25_cache, coll.id, None)
    assert cached is not None
    with store.engine.connect() as conn:
        where, params = "d.tenant_id = :t", {"t": "big"}
        read_here = scoped.scope_bm25_leg(
            conn,
            cached,
            collection_id=coll.id,
            query="comet nebula orbit",
            where=where,
            params=params,
            depth=50,
        )
        count = scoped.count_scope(conn, coll.id, where, params)
        given_ids = scoped.scope_bm25_leg(
            conn,
            cached,
            collection_id=coll.id,
            query="comet nebula orbit",
            where=where,
            params=params,
            depth=50,
            documents=count.ids,
        )
    assert count.rows == 120 and count.documents == 120 and count.ids is not None and len(count.ids) == 120
    assert read_here == given_ids == [(h.chunk_id, h.score) for h in result]
    assert len(read_here) == 50


def test_the_plan_is_on_the_search_span(store: Store, tenants: dict) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    name = tenants["name"]
    ctx = (
        ar.new(
            "comet",
            store=store,
            collections=[name],
            scope=Scope(tenant="tiny"),
            telemetry=ar.Telemetry(tracer_provider=provider),
        )
        | ar.search()
    )
    assert ctx.ok and len(ctx.hits) == 3
    span = next(s for s in exporter.get_finished_spans() if s.name == "agentrag.search")
    assert list(span.attributes["agentrag.search.plan"]) == [
        f"{name}: vector=exact lexical=bm25-scope rows=3"
    ]
    assert list(span.attributes["agentrag.search.served_by"]) == ["primary"]


def test_planner_off_runs_what_ran_before_it(
    store: Store, tenants: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scoped.ENABLED = False (the benchmark's baseline): no count, the HNSW walk and the slices."""
    monkeypatch.setattr(scoped, "ENABLED", False)
    with _recorded(store) as statements:
        result = store.search("comet", collections=tenants["name"], scope=Scope(tenant="tiny"), top_k=10)
    assert result.plan == (f"{tenants['name']}: vector=hnsw-iterative lexical=bm25-slices",)
    assert len(result) == 3
    assert not any("chunk_count" in s or "max_scan_tuples" in s for s in statements)


@pytest.fixture(scope="module")
def granted(store: Store) -> Iterator[dict[str, Any]]:
    """An acl collection: document i readable by group g<i mod 6>, every 7th also by user ann."""
    name = f"scoped_acl_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, acl=True)
    rng = random.Random(11)
    items = []
    for i in range(60):
        grants = [f"group:g{i % 6}"] + (["user:ann"] if i % 7 == 0 else [])
        items.append((f"doc-{i}", " ".join(rng.choices(WORDS, k=12)), {"grants": grants, "topic": i % 4}))
    ingest_texts(store, items, collection=name)
    yield {"name": name}
    store.delete_collection(name)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    groups=st.sets(st.sampled_from([f"g{i}" for i in range(8)]), max_size=3),
    topic=st.one_of(st.none(), st.integers(0, 4)),
    mode=st.sampled_from(["lexical", "vector", "hybrid"]),
)
def test_grants_take_the_same_plan_and_find_the_same_rows(
    store: Store, granted: dict, words: list[str], groups: set[str], topic: int | None, mode: str
) -> None:
    """The grant predicate is one more part of the WHERE clause the planner counts (issue #26 on #29's
    paths): exact scan and BM25 over the visible documents, the same rows as the planner off."""
    principal = ar.Principal(user="ann", groups=sorted(groups))
    options: dict[str, Any] = {
        "collections": granted["name"],
        "mode": mode,
        "scope": Scope(principal=principal),
        "top_k": 10,
        "depth": 20,
        "filters": None if topic is None else {"metadata": {"topic": topic}},
    }
    query = " ".join(words)
    on = store.search(query, explain=True, **options)
    assert on.explain is not None
    visible = on.explain[0]["scope_rows"]
    expected = sum(
        1 for i in range(60) if (f"g{i % 6}" in groups or i % 7 == 0) and (topic is None or i % 4 == topic)
    )
    assert visible == expected
    if mode != "lexical":
        assert on.plan[0].startswith(f"{granted['name']}: vector=exact")
        assert len(on) == min(10, expected)  # exactly min(k, matches)
    if mode != "vector":
        assert "lexical=bm25-scope" in on.plan[0]
    saved = scoped.ENABLED
    scoped.ENABLED = False
    try:
        off = store.search(query, **options)
    finally:
        scoped.ENABLED = saved
    assert mode == "vector" or "bm25-slices" in off.plan[0]
    assert [(h.chunk_id, round(h.score, 6)) for h in on] == [(h.chunk_id, round(h.score, 6)) for h in off]
    assert all(h.grant is not None for h in on)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    tenant=st.sampled_from(["big", "mid"]),
    topic=st.one_of(st.none(), st.integers(0, 9)),
)
def test_the_walk_tests_the_scope_s_document_ids_and_finds_what_the_join_finds(
    store: Store, tenants: dict, words: list[str], tenant: str, topic: int | None
) -> None:
    """An iterative HNSW walk under a scope whose document ids the plan read tests them (no documents
    join per visited tuple): the same rows as the walk joining documents under the predicate."""
    name = tenants["name"]
    store.ensure_vector_index(store.collection(name))
    options = _vector_options(name, tenant, topic)
    saved = scoped.EXACT_MAX_ROWS, scoped.SCOPE_MAX_DOCS
    scoped.EXACT_MAX_ROWS = 0  # the walk, whatever the size
    try:
        with _recorded(store) as statements:
            by_ids = store.search(" ".join(words), **options)
        walked = [s for s in statements if "hnsw" not in s and "ORDER BY c.embedding" in s]
        scoped.SCOPE_MAX_DOCS = -1  # no ids read: the walk joins documents under the predicate
        joined = store.search(" ".join(words), **options)
    finally:
        scoped.EXACT_MAX_ROWS, scoped.SCOPE_MAX_DOCS = saved
    assert by_ids.plan[0].startswith(f"{name}: vector=hnsw-iterative")
    assert walked and all("v_docs" in s and "JOIN agentrag.documents" not in s for s in walked)
    assert [(h.chunk_id, h.score) for h in by_ids] == [(h.chunk_id, h.score) for h in joined]


def test_the_exact_scan_weighs_the_scope_s_share_of_the_collection() -> None:
    """Exact when ``rows * share <= EXACT_WALK_COST * depth`` (and at most EXACT_MAX_ROWS): a few percent of
    a large collection is scanned, a large share of a small one walks (it finds depth in depth / share)."""
    assert scoped.exact_wins(10_000, 100_000, 100)  # 10 %: 1,000 <= 3,000
    assert not scoped.exact_wins(20_000, 100_000, 100)  # 20 %: 4,000
    assert scoped.exact_wins(20_000, 1_000_000, 100)  # 2 % of a million
    assert not scoped.exact_wins(15_000, 30_000, 100)  # half of a small collection
    assert scoped.exact_wins(15_000, 30_000, 1000)  # ... unless the walk must find 1,000
    assert scoped.exact_wins(5_000, -1, 100)  # no index: the absolute bound only
    assert not scoped.exact_wins(scoped.EXACT_MAX_ROWS + 1, 10**9, 100)


def test_a_large_share_of_an_indexed_collection_walks(
    store: Store, tenants: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = tenants["name"]
    store.ensure_vector_index(store.collection(name))
    scope = Scope(tenant="big")  # 120 of the collection's 153 chunks
    counted = store.search("comet", collections=name, scope=scope, explain=True, top_k=10, depth=100)
    assert counted.plan == (f"{name}: vector=exact lexical=bm25-scope rows=120",)
    assert counted.explain is not None and counted.explain[0]["share"] == pytest.approx(120 / 153, abs=0.05)
    monkeypatch.setattr(scoped, "EXACT_WALK_COST", 0.5)  # 120 * 0.78 = 94: exact for depth 200, walk for 100
    deep = store.search("comet", collections=name, scope=scope, top_k=10, depth=200)
    assert deep.plan[0].startswith(f"{name}: vector=exact")
    walked = store.search("comet", collections=name, scope=scope, explain=True, top_k=10, depth=100)
    assert walked.plan == (f"{name}: vector=hnsw-iterative lexical=bm25-scope rows=120",)
    assert walked.explain is not None and "iterative HNSW scan" in walked.explain[0]["reason"]
    assert [h.chunk_id for h in walked] == [h.chunk_id for h in counted]
    assert len(walked) == 10


def test_the_grant_tokens_are_the_predicate_s_parameter() -> None:
    """The planner finds the tokens by the predicate's parameter name (scoped.TOKENS_PARAM)."""
    from agentrag.retrieval.predicate import compile_predicate

    principal = ar.Principal(user="ann", groups=["a", "b", "c"])
    predicate = compile_predicate(Scope(principal=principal))
    where = predicate.where(acl=True)
    assert scoped.grant_tokens(where, predicate.params) == len(principal.tokens()) == 5
    assert scoped.grant_tokens(predicate.where(acl=False), predicate.params) == 0  # no grants tested


def test_the_share_estimate_reads_the_statistics(store: Store, granted: dict) -> None:
    cid = store.collection(granted["name"]).id
    with store.engine.begin() as conn:
        conn.execute(text("ANALYZE agentrag.documents"))
        whole = scoped.estimate_share(conn, cid, f"d.collection_id = {int(cid)}", {})
        none = scoped.estimate_share(
            conn, cid, "d.grants && CAST(:p_tokens AS text[])", {"p_tokens": ["u:nobody"]}
        )
    assert 0.5 <= whole <= 1.0
    assert 0.0 <= none < 0.2


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    groups=st.sets(st.sampled_from([f"g{i}" for i in range(8)]), min_size=1, max_size=4),
    topic=st.one_of(st.none(), st.integers(0, 4)),
    mode=st.sampled_from(["lexical", "vector", "hybrid"]),
)
def test_a_principal_of_many_tokens_is_estimated_not_counted_and_finds_the_same_rows(
    store: Store, granted: dict, words: list[str], groups: set[str], topic: int | None, mode: str
) -> None:
    """More than COUNT_MAX_TOKENS grant tokens and an estimated share of at least UNCOUNTED_MIN_SHARE:
    no count; the walk filters in the same statement, BM25 in slices: the same rows as the counted plan
    and the planner off, exactly min(k, matches)."""
    principal = ar.Principal(user="ann", groups=sorted(groups))
    options: dict[str, Any] = {
        "collections": granted["name"],
        "mode": mode,
        "scope": Scope(principal=principal),
        "top_k": 10,
        "depth": 20,
        "filters": None if topic is None else {"metadata": {"topic": topic}},
    }
    query = " ".join(words)
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    saved = scoped.COUNT_MAX_TOKENS, scoped.UNCOUNTED_MIN_SHARE
    scoped.COUNT_MAX_TOKENS, scoped.UNCOUNTED_MIN_SHARE = 2, 0.0  # every principal here: 3+ tokens
    store.scope_cache.clear()  # an earlier example's cached count of this scope is used before an estimate
    event.listen(store.engine, "before_cursor_execute", record)
    try:
        estimated = store.search(query, explain=True, **options)
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
        scoped.COUNT_MAX_TOKENS, scoped.UNCOUNTED_MIN_SHARE = saved
    assert estimated.explain is not None and estimated.explain[0]["scope_rows"] is None
    assert " share~" in estimated.plan[0] and "not counted" in estimated.explain[0]["reason"]
    assert mode == "vector" or "lexical=bm25-slices" in estimated.plan[0]
    assert not any("chunk_count" in s for s in statements)
    assert sum(s.startswith("EXPLAIN (FORMAT JSON)") for s in statements) == 1
    counted = store.search(query, **options)
    assert " rows=" in counted.plan[0]
    expected = sum(
        1 for i in range(60) if (f"g{i % 6}" in groups or i % 7 == 0) and (topic is None or i % 4 == topic)
    )
    if mode != "lexical":
        assert len(estimated) == min(10, expected)
    saved_enabled = scoped.ENABLED
    scoped.ENABLED = False
    try:
        off = store.search(query, **options)
    finally:
        scoped.ENABLED = saved_enabled
    rows = [(h.chunk_id, round(h.score, 6)) for h in estimated]
    assert rows == [(h.chunk_id, round(h.score, 6)) for h in off]
    assert rows == [(h.chunk_id, round(h.score, 6)) for h in counted]
    assert all(h.grant is not None for h in estimated)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    tenant=st.sampled_from(sorted(SIZES)),
    topic=st.one_of(st.none(), st.integers(0, 11)),
)
def test_the_exact_scan_reads_the_scope_s_document_ids_and_finds_what_the_join_finds(
    store: Store, tenants: dict, words: list[str], tenant: str, topic: int | None
) -> None:
    """An exact scan under a scope whose document ids the plan read reads their chunks by document_id
    (no documents join, the predicate not evaluated again): the same rows as the exact scan joining
    documents under the predicate, exactly min(k, matches)."""
    name = tenants["name"]
    options = _vector_options(name, tenant, topic)
    saved = scoped.SCOPE_MAX_DOCS
    try:
        with _recorded(store) as statements:
            by_ids = store.search(" ".join(words), explain=True, **options)
        scanned = [s for s in statements if "distance + 0" in s]
        scoped.SCOPE_MAX_DOCS = -1  # no ids read: the exact scan joins documents under the predicate
        joined = store.search(" ".join(words), **options)
    finally:
        scoped.SCOPE_MAX_DOCS = saved
    assert by_ids.plan[0].startswith(f"{name}: vector=exact") and joined.plan[0].startswith(
        f"{name}: vector=exact"
    )
    assert scanned and all("v_docs" in s and "JOIN agentrag.documents" not in s for s in scanned)
    assert [(h.chunk_id, h.score) for h in by_ids] == [(h.chunk_id, h.score) for h in joined]
    assert by_ids.explain is not None and len(by_ids) == min(10, by_ids.explain[0]["scope_rows"])


def test_an_uncounted_plan_walks_with_pgvector_s_bound_or_scans_without_an_index() -> None:
    """A large estimated share needs at most depth / share tuples: pgvector's default max_scan_tuples
    unless depth is large; without an HNSW index the vector leg scans; BM25 always in slices."""
    walk = scoped.uncounted_plan("c", 100_000, 100, 100, 0.39, 502)
    assert (walk.vector, walk.lexical, walk.scope_rows, walk.max_scan_tuples) == (
        "hnsw-iterative",
        "bm25-slices",
        None,
        None,
    )
    assert walk.describe() == "c: vector=hnsw-iterative lexical=bm25-slices share~39%"
    assert "502 grant tokens" in walk.reason and not walk.counted
    deep = scoped.uncounted_plan("c", 100_000, 1000, 4000, 0.25, 300)
    assert deep.max_scan_tuples == scoped.scan_tuples(4000, 0.25) == 64_000
    bare = scoped.uncounted_plan("c", -1, 100, 100, 0.5, 300)
    assert (bare.vector, bare.lexical, bare.max_scan_tuples) == ("scan", "bm25-slices", None)


def test_the_exact_scan_reads_chunks_by_document_id_in_byte_order(store: Store, tenants: dict) -> None:
    """The statement's ``COLLATE "C"`` and migration 0047's index agree: PostgreSQL can use it (a
    collation mismatch would leave only a scan of every chunk)."""
    with store.engine.connect() as conn:
        documents = tuple(
            conn.execute(
                text(
                    "SELECT d.id FROM agentrag.documents d JOIN agentrag.collections k"
                    " ON k.id = d.collection_id WHERE k.name = :n AND d.tenant_id = 'tiny'"
                ),
                {"n": tenants["name"]},
            ).scalars()
        )
        sql = vector_sql(0, 64, "cosine", exact=True, by_documents=True)
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            conn.execute(
                text(f"EXPLAIN {sql}"),
                {"qvec": store.embed_queries(["comet"])[0], "depth": 5, "v_docs": joined_ids(documents)},
            ).scalars()
        )
    assert len(documents) == SIZES["tiny"]
    assert "chunks_document_c" in plan
    result = store.search(
        "comet", collections=tenants["name"], scope=Scope(tenant="tiny"), mode="vector", top_k=10
    )
    assert result.plan[0].endswith(f"vector=exact lexical=none rows={SIZES['tiny']}") and len(result) == 3


def test_a_scope_holding_the_whole_collection_searches_unrestricted(store: Store) -> None:
    """The only tenant of a scoped collection (or a principal granted every document): the count sees
    the scope holds every document and the legs run as with no scope; the next document outside the
    scope (another tenant's, a revoke) restricts the search again, in the same snapshot as its count."""
    with tenant_corpus(store, "whole", {"solo": 40}, WORDS, seed=3, length=8, topics=4) as name:
        scope = Scope(tenant="solo")
        whole = store.search("comet nebula", collections=name, scope=scope, top_k=10, explain=True)
        assert whole.plan == (f"{name}: vector=hnsw lexical=bm25-top rows=40",)
        assert whole.explain is not None and whole.explain[0]["whole"] is True
        saved = scoped.ENABLED
        scoped.ENABLED = False
        try:
            off = store.search("comet nebula", collections=name, scope=scope, top_k=10)
        finally:
            scoped.ENABLED = saved
        assert [(h.chunk_id, round(h.score, 6)) for h in whole] == [
            (h.chunk_id, round(h.score, 6)) for h in off
        ]
        ingest_texts(
            store, [("other-0", "comet nebula comet nebula", {"topic": 1})], collection=name, tenant="x"
        )
        again = store.search("comet nebula", collections=name, scope=scope, top_k=10, explain=True)
        assert again.plan == (f"{name}: vector=exact lexical=bm25-scope rows=40",)
        assert all(h.source != "other-0" for h in again)  # the other tenant's best match stays out

    name = f"whole_acl_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, acl=True)
    try:
        reports = [
            store.ingest_text(
                f"comet report {i} nebula", collection=name, source=f"r{i}.md", grants=["group:g"]
            )
            for i in range(6)
        ]
        reader = Scope(principal=ar.Principal(user="ann", groups=["g"]))
        every = store.search("comet nebula", collections=name, scope=reader, top_k=10, explain=True)
        assert every.plan[0].endswith("lexical=bm25-top rows=6") and len(every) == 6
        hidden = reports[0].document_ids["r0.md"]
        store.revoke(hidden, "group:g")
        after = store.search("comet nebula", collections=name, scope=reader, top_k=10, explain=True)
        assert "lexical=bm25-scope rows=5" in after.plan[0] and len(after) == 5
        assert hidden not in {h.document_id for h in after}
    finally:
        store.delete_collection(name)


def test_only_a_scope_near_the_whole_collection_pays_for_the_whole_check(store: Store, tenants: dict) -> None:
    """The check reads the collection's documents (one more than the scope's at most); a scope well
    under scoped.WHOLE_MIN_SHARE of the index's rows never runs it."""
    with _recorded(store) as statements:
        result = store.search("comet", collections=tenants["name"], scope=Scope(tenant="mid"), top_k=5)
    assert "vector=exact" in result.plan[0]
    assert statements and not any("FROM agentrag.documents a" in s for s in statements)
