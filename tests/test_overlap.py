"""A hybrid search's BM25 leg ranked beside the vector statement (agentrag/retrieval/overlap.py): the same
rankings as one leg after the other, only when the BM25 leg needs no SQL, never waiting on a busy pool."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentrag as ar
from agentrag.retrieval import overlap, scoped
from agentrag.retrieval import search as search_module
from agentrag.retrieval.legs import lexical_ranked
from agentrag.retrieval.predicate import compile_predicate
from agentrag.retrieval.sources import load_collections
from agentrag.scope import Scope
from agentrag.store.store import Store
from tests.conftest import tenant_corpus

WORDS = ["alpha", "beta", "gamma", "orbit", "comet", "nebula", "quasar", "pulsar", "planet", "moon", "dust"]
SIZES = {"big": 60, "mid": 20, "tiny": 3}


@pytest.fixture(scope="module")
def corpus(store: Store) -> Iterator[str]:
    with tenant_corpus(store, "overlap", SIZES, WORDS, seed=11, length=10, topics=5) as name:
        yield name


@contextmanager
def _lexical_threads() -> Iterator[list[str]]:
    """The name of the thread each lexical leg ran on."""
    threads: list[str] = []
    original = search_module.lexical_ranked

    def recorded(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)

    search_module.lexical_ranked = recorded  # type: ignore[assignment]
    try:
        yield threads
    finally:
        search_module.lexical_ranked = original


def _ranked(result: ar.SearchResult) -> list[tuple[str, float]]:
    return [(h.chunk_id, round(h.score, 9)) for h in result]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    tenant=st.sampled_from([None, *sorted(SIZES)]),
    topic=st.one_of(st.none(), st.integers(0, 6)),
    depth=st.integers(1, 40),
    fusion=st.sampled_from(["rrf", "relative_score"]),
)
def test_side_by_side_legs_rank_exactly_as_one_after_the_other(
    store: Store,
    corpus: str,
    words: list[str],
    tenant: str | None,
    topic: int | None,
    depth: int,
    fusion: str,
) -> None:
    options: dict[str, Any] = {
        "collections": corpus,
        "scope": Scope.every() if tenant is None else Scope(tenant=tenant),
        "top_k": min(depth, 30),
        "depth": depth,
        "fusion": fusion,
        "filters": None if topic is None else {"metadata": {"topic": topic}},
    }
    query = " ".join(words)
    with _lexical_threads() as threads:
        side_by_side = store.search(query, **options)
    overlap.ENABLED = False
    try:
        in_turn = store.search(query, **options)
    finally:
        overlap.ENABLED = True
    assert _ranked(side_by_side) == _ranked(in_turn)
    assert {"vector", "lexical"} <= side_by_side.timings_ms.keys()
    if "bm25-slices" in side_by_side.plan[0]:  # the leg filters in SQL: on the search's own connection
        assert threads == [threading.current_thread().name]


def test_the_bm25_leg_ranks_on_the_pool_while_the_vector_statement_runs(
    store: Store, corpus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = search_module.vector_ranked
    during: list[bool] = []

    def slow_vector(*args: Any, before_statement: Any = None, **kwargs: Any) -> Any:
        def started_then_slow() -> None:
            assert before_statement is not None  # a hybrid search whose BM25 leg needs no SQL
            before_statement()
            time.sleep(0.3)  # a slow statement: the worker surely starts meanwhile
            during.append(True)

        return original(*args, before_statement=started_then_slow, **kwargs)

    monkeypatch.setattr(search_module, "vector_ranked", slow_vector)
    for scope in (Scope.every(), Scope(tenant="mid")):  # unrestricted, and a counted scope (bm25-scope)
        with _lexical_threads() as threads:
            result = store.search("comet dust", collections=corpus, scope=scope, top_k=5)
        assert threads and threads[0].startswith("agentrag-bm25"), result.plan
        assert during and len(result) == 5


def test_a_bm25_leg_that_needs_sql_runs_on_the_searchs_own_thread(
    store: Store, corpus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scoped, "SCOPE_MAX_DOCS", -1)  # no document ids read: the leg filters in SQL
    with _lexical_threads() as threads:
        result = store.search("comet", collections=corpus, scope=Scope(tenant="big"), top_k=5)
    assert "bm25-slices" in result.plan[0]
    assert threads == [threading.current_thread().name]
    assert len(result) == 5


def test_a_bm25_leg_given_no_connection_refuses_sql_instead_of_sharing_the_searchs(
    store: Store, corpus: str
) -> None:
    with store.engine.connect() as conn:
        colls = load_collections(conn, (corpus,))
    predicate = compile_predicate(Scope(tenant="mid"))  # restricted, and no plan read its document ids
    with pytest.raises(RuntimeError, match="off the search's thread"):
        lexical_ranked(overlap.NoConnection(), store, colls, "hybrid", "comet", predicate, 10)  # type: ignore[arg-type]


def test_a_job_no_worker_takes_runs_in_the_callers_thread() -> None:
    release = threading.Event()
    busy = [overlap._executor().submit(release.wait, 10) for _ in range(overlap.WORKERS)]
    try:
        ran_on: list[str] = []

        def leg() -> list[tuple[str, float]]:
            ran_on.append(threading.current_thread().name)
            return [("c1", 1.0)]

        job = overlap.LexicalJob(leg)
        ranked, milliseconds = job.result()
    finally:
        release.set()
    assert ranked == [("c1", 1.0)] and milliseconds >= 0
    assert ran_on == [threading.current_thread().name]
    assert all(f.result(5) for f in busy)


def test_a_free_worker_runs_the_job_and_errors_reach_the_caller() -> None:
    ran_on: list[str] = []
    started = threading.Event()

    def leg() -> list[tuple[str, float]]:
        started.set()
        ran_on.append(threading.current_thread().name)
        return []

    job = overlap.LexicalJob(leg)
    assert started.wait(5)
    assert job.result()[0] == []
    assert ran_on and ran_on[0].startswith("agentrag-bm25")

    def broken() -> list[tuple[str, float]]:
        raise ValueError("bm25 broke")

    failing = overlap.LexicalJob(broken)
    with pytest.raises(ValueError, match="bm25 broke"):
        failing.result()


def test_a_forked_child_makes_its_own_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = overlap._executor()
    assert overlap._executor() is parent
    monkeypatch.setattr(overlap.os, "getpid", lambda: -1)  # as os.fork's child sees it: another pid
    child = overlap._executor()
    assert child is not parent
    assert child.submit(lambda: 7).result(5) == 7
    monkeypatch.undo()
    assert overlap._executor() is not child  # back in the "parent": a pool of its own pid again


def test_a_busy_process_runs_the_legs_in_turn(store: Store, corpus: str) -> None:
    """More searches in flight than overlap.BUSY (half the cores): no second thread per search."""
    with overlap.searching():
        assert overlap.beside()  # alone
    with contextlib.ExitStack() as others:
        for _ in range(overlap.BUSY):  # other searches in flight: the next one makes BUSY + 1
            others.enter_context(overlap.searching())
        with overlap.searching():
            assert not overlap.beside()
        with _lexical_threads() as threads:
            busy = store.search("comet dust", collections=corpus, scope=Scope.every(), top_k=5)
        assert threads == [threading.current_thread().name]
    with overlap.searching():
        assert overlap.beside()  # the count went back down
    alone = store.search("comet dust", collections=corpus, scope=Scope.every(), top_k=5)
    assert _ranked(busy) == _ranked(alone)


def test_a_forked_child_counts_its_own_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    with overlap.searching(), overlap.searching():
        monkeypatch.setattr(overlap.os, "getpid", lambda: -1)  # a child: the parent's count is not its own
        with overlap.searching():
            assert overlap._in_flight == [-1, 1]
            assert overlap.beside()
        monkeypatch.undo()
    with overlap.searching():  # the parent counts afresh: nothing of its own is left in flight
        assert overlap._in_flight[1] == 1
