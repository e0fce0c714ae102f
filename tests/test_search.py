"""Hybrid retrieval against the real PostgreSQL: legs, fusion, filters, scopes, degradation, CLI."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import threading
import uuid
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from agentrag.errors import (
    CollectionNotFoundError,
    EmbeddingError,
    EmbeddingMismatchError,
    EmptyQueryError,
    FilterError,
    InvalidInputError,
    ScopeError,
)
from agentrag.hits import Hit
from agentrag.retrieval.filters import Filters, compile_filters
from agentrag.retrieval.lexical import tsquery_text
from agentrag.retrieval.result import SearchResult
from agentrag.retrieval.search import MAX_QUERY_CHARS, MODES, asearch, search
from agentrag.retrieval.vector import configure_hnsw, vector_leg, vector_sql
from agentrag.scope import Scope
from agentrag.store.ingest import ingest_texts
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "theta",
    "kappa",
    "lambda",
    "sigma",
    "omega",
    "orbit",
    "comet",
    "nebula",
    "quasar",
    "pulsar",
    "galaxy",
    "planet",
    "moon",
    "solar",
    "lunar",
    "crater",
    "basalt",
    "granite",
    "quartz",
    "marble",
    "copper",
    "silver",
    "cobalt",
    "nickel",
]
N_DOCS = 300
SECRET_EVERY = 10  # 30 of 300 documents are "secret": a 10%-selective filter


def _text_for(i: int) -> str:
    rng = random.Random(i)
    return f"record {i} " + " ".join(rng.choice(WORDS) for _ in range(12))


@pytest.fixture(scope="module")
def corpus(store: Store) -> Iterator[dict[str, Any]]:
    """300 one-chunk documents: classification, tier, region, n and a date in metadata."""
    name = f"corpus_{uuid.uuid4().hex[:8]}"
    store.create_collection(name)
    items = []
    for i in range(N_DOCS):
        meta = {
            "classification": "secret" if i % SECRET_EVERY == 0 else "public",
            "tier": ["gold", "silver", "bronze"][i % 3],
            "region": ["eu", "us", "apac", "latam"][i % 4],
            "n": i,
            "date": date(2024, 1 + i % 12, 1 + i % 28).isoformat(),
        }
        items.append((f"doc-{i:03d}", _text_for(i), meta))
    report = ingest_texts(store, items, collection=name)
    assert len(report.added) == N_DOCS
    with store.engine.begin() as conn:
        conn.execute(text("ANALYZE agentrag.chunks"))
        conn.execute(text("ANALYZE agentrag.documents"))
    yield {"name": name, "ids": report.document_ids, "items": items}
    store.delete_collection(name)


def _doc_rows(store: Store, doc_ids: list[str]) -> dict[str, Any]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT d.id, d.tenant_id, d.workspace_id, d.classification, d.metadata, d.doc_date,"
                " d.private,"
                " coalesce((SELECT array_agg(s.session_id) FROM agentrag.document_sessions s"
                "           WHERE s.document_id = d.id), '{}') AS sessions"
                " FROM agentrag.documents d WHERE d.id = ANY(:ids)"
            ),
            {"ids": doc_ids},
        ).all()
    return {row.id: row for row in rows}


# ---- the basics -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_returns_ranked_hits(store: Store, corpus: dict[str, Any], mode: str) -> None:
    query = _text_for(7)
    result = store.search(query, collections=corpus["name"], mode=mode, top_k=5)
    assert isinstance(result, SearchResult)
    assert result.mode == mode and result.used_mode == mode and result.degraded is None
    assert len(result) == 5 and [h.rank for h in result] == [1, 2, 3, 4, 5]
    assert all(isinstance(h, Hit) and h.collection == corpus["name"] for h in result)
    scores = [h.score for h in result]
    assert scores == sorted(scores, reverse=True)
    if mode == "lexical_sql":  # ts_rank (no IDF) rewards repeated words: the chunk is near the top
        assert "doc-007" in [h.source for h in result]
        return
    assert result[0].source == "doc-007"  # the query is that chunk's own text
    top = result[0]
    assert top.text == query and top.start_char == 0 and top.end_char == len(query)
    assert top.metadata["n"] == 7 and top.classification == "public" and top.embed_model == "fake-hashing"
    if mode in ("vector", "hybrid"):
        assert top.vector_rank == 1 and top.vector_score == pytest.approx(1.0, abs=1e-5)
    if mode in ("lexical", "hybrid"):
        assert top.lexical_rank == 1 and top.lexical_score and top.lexical_score > 0
    if mode == "hybrid":
        assert top.score == pytest.approx(1.0)  # relative_score (default): best in both legs
        rrf_top = store.search(query, collections=corpus["name"], top_k=5, fusion="rrf")[0]
        assert rrf_top.chunk_id == top.chunk_id and rrf_top.score == pytest.approx(2 / 61)
    if mode == "vector":
        assert top.score == top.vector_score and top.lexical_rank is None
    assert set(result.timings_ms) == {"embed", "vector", "lexical", "fuse", "fetch", "total"}
    assert result.to_dict()["hits"][0]["chunk_id"] == top.chunk_id
    assert "doc-007" in str(result) and repr(result) == str(result)
    assert result[1:3] == result.hits[1:3] and list(result) == list(result.hits)


def test_hybrid_fuses_both_legs_with_rrf(store: Store, corpus: dict[str, Any]) -> None:
    from agentrag.retrieval.fusion import rrf

    name, query = corpus["name"], "comet nebula quasar"
    vec = store.search(query, collections=name, mode="vector", top_k=50, depth=50)
    lex = store.search(query, collections=name, mode="lexical", top_k=50, depth=50)
    hyb = store.search(query, collections=name, mode="hybrid", top_k=10, depth=50, fusion="rrf")
    expected = rrf([vec.chunk_ids, lex.chunk_ids], k=60)[:10]
    assert [(h.chunk_id, pytest.approx(h.score)) for h in hyb] == [(i, pytest.approx(s)) for i, s in expected]
    vec_rank = {h.chunk_id: h.rank for h in vec}
    lex_rank = {h.chunk_id: h.rank for h in lex}
    for hit in hyb:
        assert hit.vector_rank == vec_rank.get(hit.chunk_id)
        assert hit.lexical_rank == lex_rank.get(hit.chunk_id)
    other = store.search(query, collections=name, mode="hybrid", top_k=10, depth=50, fusion="rrf", rrf_k=1)
    assert other[0].score == pytest.approx(
        sum(1 / (1 + r) for r in (other[0].vector_rank, other[0].lexical_rank) if r)
    )


def test_hybrid_relative_score_fuses_the_legs_normalised_scores(store: Store, corpus: dict[str, Any]) -> None:
    from agentrag.retrieval.fusion import relative_score

    name, query = corpus["name"], "comet nebula quasar"
    vec = store.search(query, collections=name, mode="vector", top_k=50, depth=50)
    lex = store.search(query, collections=name, mode="lexical", top_k=50, depth=50)
    for weight, fusion in ((None, None), (None, "relative_score"), (0.8, None)):
        options: dict[str, Any] = {} if weight is None else {"vector_weight": weight}
        if fusion is not None:
            options["fusion"] = fusion
        hyb = store.search(query, collections=name, top_k=10, depth=50, **options)
        expected = relative_score(
            [(h.chunk_id, h.score) for h in vec],
            [(h.chunk_id, h.score) for h in lex],
            vector_weight=0.5 if weight is None else weight,
        )[:10]
        assert [(h.chunk_id, pytest.approx(h.score)) for h in hyb] == [
            (i, pytest.approx(s)) for i, s in expected
        ]
        assert hyb.fusion == "relative_score" and hyb.to_dict()["fusion"] == "relative_score"
        assert "mode=hybrid (relative_score)" in str(hyb)
    assert store.search(query, collections=name).fusion == "relative_score"  # the default
    assert store.search(query, collections=name, fusion="rrf").fusion == "rrf"
    assert store.search(query, collections=name, mode="lexical").fusion is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fusion": "linear"},
        {"fusion": "rrf", "vector_weight": 0.3},  # rrf takes no weight
        {"rrf_k": 10},  # and relative_score (the default) no rrf_k
        {"fusion": "relative_score", "rrf_k": 60},
        {"fusion": "relative_score", "vector_weight": 1.5},
    ],
)
def test_fusion_options_that_do_not_apply_raise(
    store: Store, corpus: dict[str, Any], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInputError):
        store.search("comet", collections=corpus["name"], **kwargs)


def test_min_score_applies_to_the_final_score(store: Store, corpus: dict[str, Any]) -> None:
    name = corpus["name"]
    everything = store.search("comet", collections=name, mode="lexical", top_k=50)
    cut = everything[len(everything) // 2].score
    kept = store.search("comet", collections=name, mode="lexical", top_k=50, min_score=cut)
    assert kept.chunk_ids == [h.chunk_id for h in everything if h.score >= cut]
    assert len(store.search("comet", collections=name, mode="vector", min_score=1.01)) == 0
    # hybrid: the score shown (relative score fusion's, mapped above min-max's 0 for the weakest)
    everything = store.search("comet", collections=name, top_k=50)
    cut = everything[len(everything) // 2].score
    kept = store.search("comet", collections=name, top_k=50, min_score=cut)
    assert kept.chunk_ids == [h.chunk_id for h in everything if h.score >= cut]


def test_the_last_hit_of_a_search_returning_every_candidate_does_not_show_zero(store: Store) -> None:
    # issue #30: min-max fusion put the pool's weakest candidate at 0.0000; every chunk here
    # holds the query term, so even the weakest is worth its BM25 score against the best's
    name = f"small_{uuid.uuid4().hex[:8]}"
    store.create_collection(name)
    try:
        texts = [
            "comet comet comet tail",
            "a comet over the crater",
            "granite quartz marble comet basalt copper",
        ]
        for i, body in enumerate(texts):
            store.ingest_text(body, collection=name, source=f"s{i}.md")
        result = store.search("comet", collections=name, top_k=10)
        assert len(result) == 3 and result.used_mode == "hybrid"
        assert result[0].score <= 1.0 and all(h.score > 0 for h in result)
        lexical = {h.chunk_id: h.lexical_score for h in result}
        weakest = min(lexical.values()) / max(lexical.values())  # type: ignore[type-var,operator]
        assert result[-1].score >= 0.5 * weakest - 1e-9  # at least the lexical half of its worth
    finally:
        store.delete_collection(name)


def test_asearch_runs_the_same_search(store: Store, corpus: dict[str, Any]) -> None:
    sync = store.search("granite quartz", collections=corpus["name"], top_k=7)
    result = asyncio.run(store.asearch("granite quartz", collections=corpus["name"], top_k=7))
    assert result.chunk_ids == sync.chunk_ids
    result = asyncio.run(asearch(store, "granite quartz", collections=[corpus["name"]], top_k=7))
    assert result.chunk_ids == sync.chunk_ids


# ---- the 10%-selective filter ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [50, 10])
def test_selective_filter_returns_min_k_matches(
    store: Store, corpus: dict[str, Any], mode: str, k: int
) -> None:
    matches = N_DOCS // SECRET_EVERY  # 30
    query = "record " + " ".join(WORDS)  # every chunk scores lexically, so k is never short for want of terms
    result = store.search(
        query, collections=corpus["name"], mode=mode, top_k=k, filters={"classification": "secret"}
    )
    assert len(result) == min(k, matches)
    assert {h.classification for h in result} == {"secret"}
    assert len({h.chunk_id for h in result}) == len(result)


@pytest.mark.parametrize("depth", [1, 3, 10, 40])
@pytest.mark.parametrize(
    "restriction",
    [{"filters": {"classification": "secret"}}, {"filters": {"classification": "nonexistent"}}, {}],
)
def test_the_lexical_leg_sends_its_candidates_in_slices_with_the_same_result(
    store: Store,
    corpus: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    depth: int,
    restriction: dict[str, Any],
) -> None:
    """Slices of the BM25 ranking (20 x depth, then 10x more) give what one statement over all gives."""
    from sqlalchemy import event

    from agentrag.retrieval import lexical, scoped

    monkeypatch.setattr(scoped, "SCOPE_MAX_DOCS", -1)  # the slices, whatever the scope's size
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "jsonb_array_elements_text" in statement:
            statements.append(statement)

    query = "record " + " ".join(WORDS[:6])
    options = {"collections": corpus["name"], "mode": "lexical", "top_k": depth, "depth": depth}
    event.listen(store.engine, "before_cursor_execute", count)
    try:
        monkeypatch.setattr(lexical, "FIRST_SLICE", 10**9)  # one statement over every candidate
        whole = store.search(query, **options, **restriction)
        one = len(statements)
        monkeypatch.setattr(lexical, "FIRST_SLICE", 1)
        sliced = store.search(query, **options, **restriction)
        many = len(statements) - one
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert [(h.chunk_id, h.score) for h in sliced] == [(h.chunk_id, h.score) for h in whole]
    if restriction:
        assert one == 1
        matching = 0 if restriction["filters"]["classification"] == "nonexistent" else N_DOCS // SECRET_EVERY
        assert len(sliced) == min(depth, matching)
        if 20 * depth < N_DOCS and (matching == 0 or depth > 20 * depth * matching // N_DOCS):
            assert many > 1  # the first slice did not hold enough matches: more slices were sent
    else:
        assert one == many == 0  # unrestricted: the index's own top, no round trip
        assert len(sliced) == depth


def test_hnsw_iterative_scan_fills_k_under_a_selective_filter(store: Store, corpus: dict[str, Any]) -> None:
    """The raw HNSW path (no exact fallback): the index is used and relaxed iterative scans fill k."""
    coll = store.collection(corpus["name"])
    where, params = compile_filters({"classification": "secret"})
    sql = vector_sql(coll.id, coll.dimensions, coll.distance, where)
    qvec = store.embedder.embed(["comet nebula"])[0]
    for k in (50, 10):
        with store.engine.connect() as conn, conn.begin():
            configure_hnsw(conn, ef_search=40, iterative=True)
            conn.execute(text("SET LOCAL enable_seqscan = off"))
            conn.execute(text("SET LOCAL enable_sort = off"))
            plan = "\n".join(
                r[0] for r in conn.execute(text("EXPLAIN " + sql), {**params, "qvec": qvec, "depth": k})
            )
            assert coll.hnsw_index in plan
            rows = conn.execute(text(sql), {**params, "qvec": qvec, "depth": k}).all()
        assert len(rows) == min(k, 30)
        distances = [row.distance for row in rows]
        assert distances == sorted(distances)  # re-sorted after relaxed order


def test_an_unscoped_walk_that_comes_back_short_is_re_run_exactly(
    store: Store, corpus: dict[str, Any]
) -> None:
    """A walk can return fewer rows than the collection has (a candidate list crowded by the dead
    versions of replaced chunks before autovacuum: a vector search under concurrent syncs saw 5 of 6
    documents). Forced here with ef_search 1 and no iterative scan: the leg re-runs exactly, as it
    does for a scoped walk."""
    coll = store.collection(corpus["name"])
    qvec = store.embedder.embed(["comet nebula"])[0]
    with store.engine.connect() as conn, conn.begin():
        configure_hnsw(conn, ef_search=1, iterative=False)
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        walked = conn.execute(
            text(vector_sql(coll.id, coll.dimensions, coll.distance)), {"qvec": qvec, "depth": 20}
        )
        assert len(walked.all()) < 20  # the short walk this test is about
        rows = vector_leg(
            conn,
            collection_id=coll.id,
            dimensions=coll.dimensions,
            distance=coll.distance,
            query_vector=qvec,
            where="TRUE",
            params={},
            depth=20,
            need=20,
        )
    assert len(rows) == 20
    scores = [score for _id, score in rows]
    assert scores == sorted(scores, reverse=True)


def test_explain_uses_the_hnsw_index_for_an_unfiltered_vector_query(
    store: Store, collection_name: str
) -> None:
    # One document of ~3,000 chunks (one transaction): big enough that the planner prefers the
    # index to an exact scan (on a few hundred rows it rightly picks the exact scan).
    store.create_collection(collection_name)
    rng = random.Random(0)
    body = "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(20)) + "." for _ in range(3000))
    report = store.ingest_text(
        body, collection=collection_name, source="big", chunk_size=200, chunk_overlap=0
    )
    assert report.chunks_written >= 2500
    with store.engine.begin() as conn:
        conn.execute(text("ANALYZE agentrag.chunks"))
    coll = store.collection(collection_name)
    qvec = store.embedder.embed(["comet nebula"])[0]
    sql = vector_sql(coll.id, coll.dimensions, coll.distance)
    with store.engine.connect() as conn, conn.begin():
        configure_hnsw(conn, ef_search=100, iterative=False)
        plan = "\n".join(r[0] for r in conn.execute(text("EXPLAIN " + sql), {"qvec": qvec, "depth": 100}))
    assert f"Index Scan using {coll.hnsw_index}" in plan, plan
    result = store.search("comet nebula", collections=collection_name, mode="vector", top_k=50)
    assert len(result) == 50
    store.delete_collection(collection_name)


# ---- filters ---------------------------------------------------------------------------------------


def _expected_sources(corpus: dict[str, Any], keep: Any) -> set[str]:
    return {source for source, _text, meta in corpus["items"] if keep(meta)}


@pytest.mark.parametrize(
    ("filters", "keep"),
    [
        ({"classification": ["secret"]}, lambda m: m["classification"] == "secret"),
        ({"metadata": {"tier": "gold"}}, lambda m: m["tier"] == "gold"),
        (
            {"metadata": {"tier": "gold", "region": {"in": ["eu", "us"]}}},
            lambda m: m["tier"] == "gold" and m["region"] in ("eu", "us"),
        ),
        ({"metadata": {"n": {"in": [1, 2, 3, 250]}}}, lambda m: m["n"] in (1, 2, 3, 250)),
        ({"metadata": {"n": "1"}}, lambda m: False),  # type-exact: the string "1" is not the number 1
        ({"metadata": {"missing": None}}, lambda m: False),
        (
            {"date_range": {"start": "2024-03-01", "end": "2024-04-30"}},
            lambda m: "2024-03-01" <= m["date"] <= "2024-04-30",
        ),
        (Filters(date_range=(date(2024, 12, 1), None)), lambda m: m["date"] >= "2024-12-01"),  # type: ignore[arg-type]
        (
            {"classification": "public", "metadata": {"region": "latam"}, "date_range": (None, "2024-06-30")},
            lambda m: (
                m["classification"] == "public" and m["region"] == "latam" and m["date"] <= "2024-06-30"
            ),
        ),
    ],
)
def test_filters_select_exactly_the_matching_documents(
    store: Store, corpus: dict[str, Any], filters: Any, keep: Any
) -> None:
    expected = _expected_sources(corpus, keep)
    for mode in ("vector", "lexical"):
        result = store.search(
            "record " + " ".join(WORDS),
            collections=corpus["name"],
            mode=mode,
            top_k=300,
            max_top_k=300,
            filters=filters,
        )
        assert {h.source for h in result} == expected


def test_doc_ids_filter(store: Store, corpus: dict[str, Any]) -> None:
    ids = [corpus["ids"]["doc-010"], corpus["ids"]["doc-020"]]
    result = store.search(
        "comet", collections=corpus["name"], mode="hybrid", top_k=10, filters={"doc_ids": ids}
    )
    assert {h.document_id for h in result} <= set(ids)
    result = store.search(_text_for(10), collections=corpus["name"], mode="vector", filters={"doc_ids": ids})
    assert {h.document_id for h in result} == set(ids)


@pytest.mark.parametrize(
    "bad",
    [
        {"classificaton": "x"},
        {"metadata": {"tier": {"gt": 1}}},
        {"metadata": {"tier": {"in": "gold"}}},
        {"metadata": {"bad key": 1}},
        {"metadata": {"k": float("nan")}},
        {"classification": 5},
        {"classification": []},
        {"doc_ids": ["a\x00b"]},
        {"date_range": {"start": "2024-13-01"}},
        {"date_range": {"start": "2024-02-01", "end": "2024-01-01"}},
        ["classification"],
    ],
)
def test_bad_filters_raise_filter_error_before_sql(store: Store, bad: Any) -> None:
    with pytest.raises(FilterError):
        # the collection does not exist: reaching SQL would raise CollectionNotFoundError instead
        store.search("comet", collections="no_such_collection", filters=bad)


# The 10,000-example filter fuzz draws from pools of pre-built valid and invalid pieces (a few
# cheap draws per example keeps it fast), plus one free-form string.
_MISSING = object()
_OK_STRINGS = [
    "public",
    "",
    " ",
    "gold",
    "'; DROP TABLE agentrag.documents; --",
    "' OR 1=1 --",
    "$$",
    "\\",
    "a'b\"c",
    "%",
    "_",
    "日本語",
    "🙂",
    "İ",
    "x" * 500,
    "NULL",
    "true",
    "1",
    ":f_mk0",
    "{}",
    "[1]",
    "\\u0000",
]
_BAD_STRINGS = ["a\x00b", "\x00", "\ud800x", "x" * 10_001]
_OK_SCALARS = [None, True, False, 0, -1, 1, 2**63 - 1, -(2**63), 1.5, -0.0, 1e308, 5e-324, *_OK_STRINGS]
_BAD_SCALARS = [
    float("nan"),
    float("inf"),
    -float("inf"),
    2**64,
    b"x",
    1j,
    date(2024, 1, 1),
    (),
    *_BAD_STRINGS,
]
_OK_KEYS = ["tier", "region", "n", "_x", "a.b", "a-b", "K" * 64, "missing", "classification"]
_BAD_KEYS = ["", "a b", "1abc", "-x", ".a", "a\n", "x" * 65, "a'b", "é", "tier;", 7, None]
_OK_CONDS = [*_OK_SCALARS, *({"in": [v]} for v in _OK_SCALARS), {"in": _OK_SCALARS}, {"in": ["eu", "us"]}]
_BAD_CONDS = [
    *_BAD_SCALARS,
    {"in": []},
    {"in": "eu"},
    {"in": [[1]]},
    {"in": [{"in": [1]}]},
    {"gt": 1},
    {"eq": 1},
    {"$ne": 1},
    {"IN": [1]},
    {"in": [1], "gt": 2},
    {},
    [1, 2],
    {"in": [float("nan")]},
    {"in": ["\x00"]},
]
_OK_DATES = [None, date(2024, 1, 1), date(1, 1, 1), date(9999, 12, 31), "2024-02-29", "1999-12-31"]
_BAD_DATES = ["2024-02-30", "2024-1-1", "20240101", "2024-01-01T00:00", "", "yesterday", 20240101, 1.5]


def _pool(ok: list[Any], bad: list[Any], *, missing: int = 1) -> Any:
    """Valid values weighted 3:1 over invalid ones, and 'key absent' ``missing`` times as often as a value."""
    values = ok * 3 + bad
    return st.sampled_from([_MISSING] * (len(values) * missing) + values)


_CLASSIFICATION = _pool(
    [*_OK_STRINGS, ["public", "secret"], ["日本語", "' OR 1=1 --"], ["x"] * 1000],
    [5, 1.5, True, [], [5], ["a", "\x00"], {"in": ["a"]}, ["x"] * 1001, *_BAD_STRINGS],
)
_DOC_IDS = _pool(
    [*_OK_STRINGS, ["doc_1", "doc_2"], ["'; --"]], [5, [], [None], ("a", 1), {"a": 1}, *_BAD_STRINGS]
)
_DATE_RANGE = _pool(
    [
        *({"start": a, "end": b} for a in _OK_DATES for b in _OK_DATES),
        *((a, b) for a in _OK_DATES[1:] for b in _OK_DATES[1:]),
    ],
    [
        *({"start": d} for d in _BAD_DATES),
        *((d, None) for d in _BAD_DATES),
        {},
        (None, None),
        {"start": "2024-01-01", "after": "x"},
        ["2024-01-01"],
        ("a", "b", "c"),
        "2024-01-01",
        5,
        {"start": date(2024, 1, 2), "end": date(2024, 1, 1)},
    ],
)
_METADATA = _pool(
    [
        *({k: c} for k in _OK_KEYS for c in _OK_CONDS[:: max(1, len(_OK_CONDS) // 12)]),
        {"tier": "gold", "region": {"in": ["eu", "us"]}},
    ],
    [
        *({k: 1} for k in _BAD_KEYS),
        *({"tier": c} for c in _BAD_CONDS),
        {},
        [("tier", 1)],
        "tier=gold",
        {f"k{i}": i for i in range(33)},
    ],
)
_EXTRA = _pool(
    [],
    ["classificaton", "Classification", "doc_id", "dates", "$where", "metadata ", "filters", 1, None],
    missing=6,
)


def _assemble(
    classification: Any, doc_ids: Any, date_range: Any, metadata: Any, extra: Any, fuzz: str
) -> Any:
    out: dict[Any, Any] = {}
    for key, value in (
        ("classification", classification),
        ("doc_ids", doc_ids),
        ("date_range", date_range),
        ("metadata", metadata),
    ):
        if value is not _MISSING:
            out[key] = value
    if extra is not _MISSING:
        out[extra] = fuzz
    elif fuzz and fuzz[0] in "ab":  # the free-form string as a metadata value (may hold NUL bytes)
        out["metadata"] = {"fuzz": fuzz}
    elif fuzz and fuzz[0] in "cd":
        out["classification"] = fuzz
    elif fuzz == "!":
        return [out]  # not a dict at all
    return out


_FILTERS = st.builds(
    _assemble, _CLASSIFICATION, _DOC_IDS, _DATE_RANGE, _METADATA, _EXTRA, st.text(max_size=4)
)


_SQL_WORDS = set(
    [
        "TRUE",
        "AND",
        "ANY",
        "CAST",
        "AS",
        "d",
        "classification",
        "text",
        "f_classification",
        "doc_date",
        "date",
        "f_date_start",
        "f_date_end",
        "id",
        "f_doc_ids",
        "metadata",
        "jsonb",
    ]
)


@pytest.fixture(scope="module")
def filter_connection(store: Store, corpus: dict[str, Any]) -> Iterator[Any]:
    with store.engine.connect() as conn:
        yield conn
        conn.rollback()


@settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(filters=_FILTERS)
def test_every_generated_filter_compiles_to_a_query_or_raises_filter_error(
    filter_connection: Any, filters: Any
) -> None:
    try:
        sql, params = compile_filters(filters)
    except FilterError:
        return
    # The fragment holds only our own text: a fixed vocabulary of words and placeholders.
    assert set(re.findall(r"[^\w\s().,:=\[\]<>@-]", sql)) == set()  # @>: containment
    words = set(re.findall(r"\w+", sql))
    assert words <= _SQL_WORDS | {w for w in words if re.fullmatch(r"f_m[kvo]\d+", w)}, words - _SQL_WORDS
    assert all(key.startswith("f_") for key in params)
    filter_connection.execute(text(f"SELECT count(*) FROM agentrag.documents d WHERE {sql}"), params).scalar()


# ---- scopes --------------------------------------------------------------------------------------


def test_scoped_collection_requires_a_scope(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name, scoped=True)
    store.ingest_text("orbit comet nebula", collection=collection_name, source="a", tenant="t1")
    store.ingest_text("orbit comet quasar", collection=collection_name, source="b", tenant="t2")
    for scope in (None, Scope()):
        with pytest.raises(ScopeError):
            store.search("comet", collections=collection_name, scope=scope)
    everything = store.search("comet", collections=collection_name, scope=Scope.every(), mode="lexical")
    assert {h.source for h in everything} == {"a", "b"}
    mine = store.search("comet", collections=collection_name, scope=Scope(tenant="t1"))
    assert {h.source for h in mine} == {"a"}
    with pytest.raises(ScopeError):
        store.search("comet", collections=collection_name, scope=Scope(tenant="t\x00"))


def test_scope_applies_to_unscoped_collections_too(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    store.ingest_text("orbit comet nebula", collection=collection_name, source="none")
    store.ingest_text("orbit comet quasar", collection=collection_name, source="t1", tenant="t1")
    assert {h.source for h in store.search("comet", collections=collection_name)} == {"none", "t1"}
    assert {
        h.source for h in store.search("comet", collections=collection_name, scope=Scope(tenant="t1"))
    } == {"t1"}


_SCOPE_DOCS = st.lists(
    st.tuples(
        st.sampled_from([None, "t1", "t2"]),
        st.sampled_from([None, "w1", "w2"]),
        st.sampled_from([None, "s1", "s2"]),
        st.lists(st.sampled_from(WORDS[:8]), min_size=2, max_size=6).map(" ".join),
    ),
    min_size=2,
    max_size=8,
)
_SCOPES = st.builds(
    Scope,
    tenant=st.sampled_from([None, "t1", "t2"]),
    workspace=st.sampled_from([None, "w1", "w2"]),
    session=st.sampled_from([None, "s1", "s2"]),
).filter(lambda s: not s.is_empty)


def _in_scope(row: Any, scope: Scope) -> bool:
    """Tenant and workspace match; a session scope reads what is linked to it; outside a session
    scope a private session upload (issue #26) is invisible."""
    return (
        (scope.tenant is None or row.tenant_id == scope.tenant)
        and (scope.workspace is None or row.workspace_id == scope.workspace)
        and (scope.session in row.sessions if scope.session is not None else not row.private)
    )


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(docs=_SCOPE_DOCS, scope=_SCOPES, data=st.data())
def test_a_scoped_query_never_returns_another_scopes_chunk(
    store: Store, docs: list[tuple[str | None, str | None, str | None, str]], scope: Scope, data: Any
) -> None:
    name = f"scopes_{uuid.uuid4().hex[:8]}"
    store.create_collection(name, scoped=True)
    try:
        doc_ids = []
        for i, (tenant, workspace, session, body) in enumerate(docs):
            report = store.ingest_text(
                f"{body} n{i}",
                collection=name,
                source=f"d{i}",
                tenant=tenant,
                workspace=workspace,
                session=session,
            )
            doc_ids.append(report.document_ids[f"d{i}"])
        rows = _doc_rows(store, doc_ids)
        outside = [i for i, doc_id in enumerate(doc_ids) if not _in_scope(rows[doc_id], scope)]
        in_scope = {doc_id for doc_id in doc_ids if _in_scope(rows[doc_id], scope)}
        # The query is literally another scope's chunk text: that chunk is its nearest neighbour.
        target = data.draw(st.sampled_from(outside)) if outside else 0
        query = f"{docs[target][3]} n{target}"
        if scope.tenant is None:  # tenant-rooted: a workspace or session alone would cross tenants
            for mode in MODES:
                with pytest.raises(ScopeError, match="tenant-rooted"):
                    store.search(query, collections=name, mode=mode, scope=scope)
            return
        for mode in MODES:
            result = store.search(query, collections=name, mode=mode, scope=scope, top_k=50)
            found = {h.document_id for h in result}
            hit_rows = _doc_rows(store, sorted(found))  # checked in the database, not on Hit fields
            assert set(hit_rows) == found
            assert all(_in_scope(row, scope) for row in hit_rows.values()), (mode, scope)
            if mode == "vector":  # the vector leg ranks every chunk: all in-scope ones come back
                assert found == in_scope
    finally:
        store.delete_collection(name)


def test_session_scope_follows_document_links(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    a = store.ingest_text("orbit comet nebula", collection=collection_name, source="a", session="s1")
    store.ingest_text("orbit comet quasar", collection=collection_name, source="b")
    assert {
        h.source for h in store.search("comet", collections=collection_name, scope=Scope(session="s1"))
    } == {"a"}
    store.link_session(a.document_ids["a"], "s2")
    assert {
        h.source for h in store.search("comet", collections=collection_name, scope=Scope(session="s2"))
    } == {"a"}
    assert len(store.search("comet", collections=collection_name, scope=Scope(session="s3"))) == 0


# ---- hostile input ------------------------------------------------------------------------------

HOSTILE = [
    "'",
    '"',
    "''; DROP TABLE agentrag.chunks; --",
    "a & b | !c",
    "(comet) & !(nebula) | quasar:* <-> orbit <2> moon",
    "comet:A* & nebula:*B",
    "\\",
    "\\\\' \\x00",
    "!!!!",
    "& | ! ( ) : * <->",
    "comet\x00nebula",
    "\ud800 lone surrogate comet",
    "Ünïcödé ÇÅFÉ İstanbul straße ﬁnance",
    "彗星 星雲 クエーサー",
    "مرحبا بالعالم",
    "🙂🚀🔭 comet 🌌",
    "e\u0301\u0301\u0301 combining",
    "x" * 3000,
    ("comet & nebula | " * 700)[:10_500],
    "word " * 2100,
    "ab" * 5000 + " comet",
    "％ＴＥＳＴ％ full-width",
    "0x1F 1e10 -5 3.14 2024-01-01",
]


@pytest.mark.parametrize("mode", ["lexical", "lexical_sql", "hybrid"])
def test_hostile_lexical_input_never_breaks_the_database(
    store: Store, corpus: dict[str, Any], mode: str
) -> None:
    for query in HOSTILE:
        result = store.search(query, collections=corpus["name"], mode=mode, top_k=5)
        assert isinstance(result, SearchResult)
        assert len(result.query) <= MAX_QUERY_CHARS


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(query=st.text(min_size=1, max_size=200))
def test_generated_lexical_input_never_breaks_the_database(
    store: Store, corpus: dict[str, Any], query: str
) -> None:
    for mode in ("lexical", "lexical_sql", "hybrid"):
        try:
            store.search(query, collections=corpus["name"], mode=mode, top_k=3)
        except EmptyQueryError:
            assert not query.replace("\x00", " ").strip()


@given(query=st.text(max_size=300))
@settings(max_examples=300, database=None)
def test_tsquery_text_holds_only_alphanumeric_terms(query: str) -> None:
    tsq = tsquery_text(query)
    for term in tsq.split(" | ") if tsq else []:
        assert term and term.isalnum()


# ---- query preprocessing and argument validation ---------------------------------------------------


def test_query_is_stripped_and_whitespace_collapsed(store: Store, corpus: dict[str, Any]) -> None:
    result = store.search("  comet \n\t  nebula  ", collections=corpus["name"], mode="lexical")
    assert result.query == "comet nebula" and result.warnings == ()


@pytest.mark.parametrize("query", ["", "   ", "\n\t \x00 "])
def test_empty_query_raises(store: Store, corpus: dict[str, Any], query: str) -> None:
    with pytest.raises(EmptyQueryError):
        store.search(query, collections=corpus["name"])


def test_long_query_is_truncated_with_a_warning(
    store: Store, corpus: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    query = "comet secretword " * 1000  # 17,000 characters
    with caplog.at_level(logging.WARNING, logger="agentrag"):
        result = store.search(query, collections=corpus["name"], mode="hybrid")
    assert len(result.query) <= MAX_QUERY_CHARS
    assert any("truncated" in w for w in result.warnings)
    assert any("truncated" in r.getMessage() for r in caplog.records)
    assert not any("secretword" in r.getMessage() for r in caplog.records)


def test_unknown_keyword_raises_type_error(store: Store, corpus: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        search(store, "comet", collections=corpus["name"], bogus=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        store.search("comet", collections=corpus["name"], topk=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        store.asearch("comet", collections=corpus["name"], bogus=1)  # type: ignore[call-arg, unused-coroutine]
    with pytest.raises(TypeError):
        asearch(store, "comet", collections=corpus["name"], bogus=1)  # type: ignore[call-arg, unused-coroutine]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"top_k": 51}, InvalidInputError),
        ({"top_k": 0}, InvalidInputError),
        ({"top_k": 100, "max_top_k": 99}, InvalidInputError),
        ({"top_k": "5"}, TypeError),
        ({"mode": "fuzzy"}, InvalidInputError),
        ({"depth": 0}, InvalidInputError),
        ({"rrf_k": -1}, InvalidInputError),
        ({"ef_search": 5000}, InvalidInputError),
        ({"min_score": float("nan")}, InvalidInputError),
        ({"collections": []}, InvalidInputError),
        ({"collections": "bad name!"}, InvalidInputError),
        ({"collections": "missing_collection"}, CollectionNotFoundError),
        ({"scope": {"tenant": "t1"}}, TypeError),
    ],
)
def test_invalid_arguments(store: Store, corpus: dict[str, Any], kwargs: dict[str, Any], error: type) -> None:
    kwargs = {"collections": corpus["name"], **kwargs}
    with pytest.raises(error) as info:
        store.search("comet", **kwargs)
    if kwargs.get("mode") == "fuzzy":
        assert all(mode in str(info.value) for mode in MODES)


def test_top_k_up_to_max_top_k(store: Store, corpus: dict[str, Any]) -> None:
    assert (
        len(store.search("record", collections=corpus["name"], top_k=100, max_top_k=100, mode="lexical"))
        == 100
    )


# ---- embedders: degradation and mismatches -------------------------------------------------------


def test_hybrid_degrades_to_lexical_when_the_embedder_fails(
    database_url: str, corpus: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    broken = Store(database_url, embedder=FakeEmbedder(dimensions=64, fail=True))
    try:
        with caplog.at_level(logging.WARNING, logger="agentrag"):
            result = broken.search("comet uniquequeryword", collections=corpus["name"], mode="hybrid")
        assert result.used_mode == "lexical" and result.mode == "hybrid"
        assert result.degraded and "embedder" in result.degraded
        assert result.degraded in result.warnings
        assert len(result) == 5 and all(h.vector_rank is None and h.lexical_rank for h in result)
        assert result[0].score == result[0].lexical_score
        assert any("degraded" in r.getMessage() for r in caplog.records)
        assert not any("uniquequeryword" in r.getMessage() for r in caplog.records)
        with pytest.raises(EmbeddingError):
            broken.search("comet", collections=corpus["name"], mode="vector")
        assert len(broken.search("comet", collections=corpus["name"], mode="lexical")) == 5
    finally:
        broken.close()


def test_embedder_mismatch_raises_and_version_change_warns(database_url: str, corpus: dict[str, Any]) -> None:
    for embedder in (FakeEmbedder(dimensions=32), FakeEmbedder(dimensions=64, model_id="other-model")):
        other = Store(database_url, embedder=embedder)
        try:
            for mode in ("vector", "hybrid"):
                with pytest.raises(EmbeddingMismatchError):
                    other.search("comet", collections=corpus["name"], mode=mode)
            assert len(other.search("comet", collections=corpus["name"], mode="lexical")) == 5
        finally:
            other.close()
    newer = Store(database_url, embedder=FakeEmbedder(dimensions=64, version="2"))
    try:
        result = newer.search("comet", collections=corpus["name"], mode="hybrid")
        assert result.model_version_match is False and any("version" in w for w in result.warnings)
        assert len(result) == 5
    finally:
        newer.close()


# ---- several collections, the BM25 cache ----------------------------------------------------------


def test_several_collections_merge(store: Store) -> None:
    names = [f"multi_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        for j, name in enumerate(names):
            store.create_collection(name)
            ingest_texts(
                store,
                [(f"{name}-{i}", _text_for(1000 * (j + 1) + i), {}) for i in range(20)],
                collection=name,
            )
        query = _text_for(2003)  # a chunk of the second collection
        for mode in MODES:
            result = store.search(query, collections=names, mode=mode, top_k=30)
            assert result.collections == tuple(names)
            assert {h.collection for h in result} == set(names)
            assert result[0].source == f"{names[1]}-3"
            assert [h.rank for h in result] == list(range(1, len(result) + 1))
            if mode != "hybrid":
                scores = [h.score for h in result]
                assert scores == sorted(scores, reverse=True)
    finally:
        for name in names:
            store.delete_collection(name)


def test_bm25_cache_is_rebuilt_when_the_collection_changes(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    store.ingest_text("orbit comet nebula", collection=collection_name, source="a")
    assert len(store.search("zanzibar", collections=collection_name, mode="lexical")) == 0
    coll = store.collection(collection_name)
    first = store._bm25[coll.id]
    assert first.version == coll.version
    assert len(store.search("comet", collections=collection_name, mode="lexical")) == 1
    assert store._bm25[coll.id] is first  # unchanged collection: cached
    store.ingest_text("zanzibar spice comet", collection=collection_name, source="b")
    result = store.search("zanzibar", collections=collection_name, mode="lexical")
    assert [h.source for h in result] == ["b"]
    assert store._bm25[coll.id].version == store.collection(collection_name).version > first.version
    store.delete_document(result[0].document_id)
    assert len(store.search("zanzibar", collections=collection_name, mode="lexical")) == 0


def test_concurrent_searches_share_one_bm25_build(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    ingest_texts(store, [(f"d{i}", _text_for(i), {}) for i in range(50)], collection=collection_name)
    results: list[Any] = []
    barrier = threading.Barrier(6)

    def run() -> None:
        barrier.wait()
        try:
            results.append(
                store.search("comet nebula", collections=collection_name, mode="hybrid", top_k=5).chunk_ids
            )
        except Exception as exc:  # pragma: no cover - reported by the assertion
            results.append(exc)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == results[0] for r in results) and len(results[0]) == 5


def test_lexical_sql_has_or_semantics(store: Store, corpus: dict[str, Any]) -> None:
    result = store.search(
        "which records mention the comet zzzunknownword", collections=corpus["name"], mode="lexical_sql"
    )
    assert len(result) == 5 and all("comet" in h.text for h in result)


# ---- CLI -----------------------------------------------------------------------------------------


def test_cli_search(database_url: str, corpus: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from agentrag.cli import main

    argv = [
        "--database-url",
        database_url,
        "search",
        "comet nebula",
        "-c",
        corpus["name"],
        "--mode",
        "lexical",
    ]
    assert main([*argv, "--filter", "classification=secret", "--filter", "metadata.tier=gold", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "lexical" and data["hits"]
    assert {h["classification"] for h in data["hits"]} == {"secret"}
    assert {h["metadata"]["tier"] for h in data["hits"]} == {"gold"}
    assert (
        main(
            [
                *argv,
                "--top-k",
                "3",
                "--filter",
                "date_range.start=2024-06-01",
                "--filter",
                "metadata.region=eu",
                "--filter",
                "metadata.region=us",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "rank" in out and "lex" in out and out.count("doc-") == 3
    assert main([*argv, "--filter", "colour=red"]) == 2
    assert "unknown filter key 'colour'" in capsys.readouterr().err
    # the command line's keys are the Python model's: the old names say what they became
    assert main([*argv, "--filter", "date_from=2024-06-01"]) == 2
    assert "did you mean 'date_range.start'?" in capsys.readouterr().err
    assert main([*argv, "--filter", "clasification=secret"]) == 2
    assert "did you mean 'classification'?" in capsys.readouterr().err
    assert main([*argv, "--top-k", "500"]) == 2
    with pytest.raises(SystemExit):
        main([*argv, "--fusion", "linear"])
    assert "invalid choice: 'linear'" in capsys.readouterr().err


def test_lexical_sql_stores_tsvectors_on_first_use_and_tops_them_up(store, collection_name) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    c = store.create_collection(collection_name)
    store.ingest_text("Cursor pagination with next_cursor.", collection=collection_name, source="p.md")
    index = f"chunk_tsv_gin_{c.id}"

    def state() -> tuple[bool, int, int | None]:
        with store.engine.connect() as conn:
            exists = conn.execute(text("SELECT to_regclass(:n)"), {"n": f"agentrag.{index}"}).scalar()
            rows = conn.execute(
                text("SELECT count(*) FROM agentrag.chunk_tsv WHERE collection_id = :c"), {"c": c.id}
            ).scalar()
            synced = conn.execute(
                text("SELECT tsv_version FROM agentrag.collections WHERE id = :c"), {"c": c.id}
            ).scalar()
        return exists is not None, int(rows), synced

    assert state() == (False, 0, None)  # ingestion never pays for full text
    hits = store.search("pagination cursor", collections=collection_name, mode="lexical_sql")
    assert hits[0].text.startswith("Cursor pagination")
    version = store.collection(collection_name).version
    assert state() == (True, 1, version)
    # a later document is converted on the next lexical_sql search, and only it
    store.ingest_text("Webhooks retry with exponential backoff.", collection=collection_name, source="w.md")
    assert state()[1] == 1
    hits = store.search("webhooks backoff", collections=collection_name, mode="lexical_sql")
    assert hits[0].text.startswith("Webhooks retry")
    assert state() == (True, 2, store.collection(collection_name).version)
    # a deleted document takes its tsvectors with it
    doc_id = hits[0].document_id
    store.delete_document(doc_id)
    assert state()[1] == 1
    assert len(store.search("webhooks backoff", collections=collection_name, mode="lexical_sql")) == 0
    store.delete_collection(collection_name)
    assert state() == (False, 0, None)


def test_the_first_tsvector_fill_builds_its_index_once_with_more_memory(store, collection_name) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import event, text

    from agentrag.store.store import TEXT_INDEX_BUILD_MEMORY

    c = store.create_collection(collection_name)
    store.ingest_text("Cursor pagination with next_cursor.", collection=collection_name, source="p.md")
    seen: list[tuple[str, str]] = []  # (statement kind, the transaction's maintenance_work_mem then)

    def after(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        kind = statement.split()[0].upper()
        if "chunk_tsv" in statement and kind in ("INSERT", "CREATE"):
            cursor.execute("SHOW maintenance_work_mem")
            seen.append((kind, cursor.fetchone()[0]))

    with store.engine.connect() as conn:
        default = conn.execute(text("SHOW maintenance_work_mem")).scalar()
    assert default != TEXT_INDEX_BUILD_MEMORY
    event.listen(store.engine, "after_cursor_execute", after)
    try:
        # first use: the rows first, then one index build with the raised memory
        assert store.search("pagination", collections=collection_name, mode="lexical_sql")
        assert seen == [("INSERT", default), ("CREATE", TEXT_INDEX_BUILD_MEMORY)]
        # a top-up inserts into the index that exists: no build, no raised memory
        seen.clear()
        store.ingest_text("Webhooks retry with backoff.", collection=collection_name, source="w.md")
        hits = store.search("webhooks backoff", collections=collection_name, mode="lexical_sql")
        assert hits[0].text.startswith("Webhooks retry")
        assert seen == [("INSERT", default)]
    finally:
        event.remove(store.engine, "after_cursor_execute", after)
    # SET LOCAL: no pooled connection keeps the raised memory
    conns = [store.engine.connect() for _ in range(3)]
    try:
        assert {conn.execute(text("SHOW maintenance_work_mem")).scalar() for conn in conns} == {default}
    finally:
        for conn in conns:
            conn.close()
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT to_regclass(:n)"), {"n": f"agentrag.chunk_tsv_gin_{c.id}"}).scalar()
    store.delete_collection(collection_name)


def test_a_tsvector_sync_that_meets_a_concurrent_delete_is_retried(
    store, collection_name, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy.exc import IntegrityError

    store.create_collection(collection_name)
    store.ingest_text("Cursor pagination with next_cursor.", collection=collection_name, source="p.md")
    real, calls = store._sync_tsvectors, []

    def flaky(cid: int) -> None:
        calls.append(cid)
        if len(calls) == 1:  # what a chunk deleted under the INSERT's feet raises
            raise IntegrityError("INSERT INTO agentrag.chunk_tsv", {}, Exception("foreign key violation"))
        real(cid)

    monkeypatch.setattr(store, "_sync_tsvectors", flaky)
    hits = store.search("pagination", collections=collection_name, mode="lexical_sql")
    assert len(calls) == 2 and hits[0].text.startswith("Cursor pagination")
    store.delete_collection(collection_name)
