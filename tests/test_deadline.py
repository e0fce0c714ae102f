"""Budget(max_seconds=...) is a deadline on every model call; fan-out has maximums; a custom
model's failing stream is a typed error (issue #28)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import pytest

import agentrag as ar
from agentrag.context import StopReason
from agentrag.errors import BudgetExceededError, InvalidInputError
from agentrag.llm import LLMReply
from agentrag.llm.deadline import acall_within, call_within, deadline_scope, remaining, timeout_within
from agentrag.llm.streams import AsyncTextStream, TextStream
from agentrag.store.store import Store


class _Stall:
    """An LLM callable that blocks until released (at most ``limit`` s). Whether it had returned when
    the pipeline did is what shows the call was abandoned, not how long that took: nothing here
    depends on the machine's speed (issue #38: a suite that passes on a busy machine)."""

    def __init__(self, limit: float = 120.0) -> None:
        self.limit, self.release, self.returned = limit, threading.Event(), threading.Event()

    def __call__(self, _prompt: str) -> str:
        self.release.wait(self.limit)
        self.returned.set()
        return '{"sub_questions": ["a?"], "reasoning": "r"}'

    def __enter__(self) -> _Stall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()  # the abandoned call's thread ends with the test


def test_no_deadline_runs_the_call_inline_and_none_remains() -> None:
    assert remaining() is None
    assert call_within("x", threading.get_ident) == threading.get_ident()


def test_a_clients_own_timeout_is_cut_to_the_time_left() -> None:
    assert timeout_within(30.0) == 30.0
    with deadline_scope(time.time() + 0.5, 0.5):
        assert 0 < timeout_within(30.0) <= 0.5
    with deadline_scope(time.time() - 1, 0.5):
        assert timeout_within(30.0) == 0.001  # spent: the call times out at once


def test_a_call_past_the_deadline_is_not_started() -> None:
    started: list[bool] = []
    with deadline_scope(time.time() - 1, 5.0), pytest.raises(BudgetExceededError) as raised:
        call_within("llm:gate", lambda: started.append(True))
    assert not started and raised.value.what == "llm:gate" and raised.value.limit_s == 5.0


def test_an_inner_scope_cannot_extend_the_outer_deadline() -> None:
    outer = time.time() + 1
    with deadline_scope(outer, 1.0), deadline_scope(outer + 100, 101.0):
        left = remaining()
        assert left is not None and left <= 1.0


def test_a_stalling_callable_is_abandoned_at_the_deadline() -> None:
    with _Stall() as stall:
        ctx = ar.new("what is x and what is y", llm=stall, budget=ar.Budget(max_seconds=0.5))
        out = ctx | ar.decompose()
        assert not stall.returned.is_set()  # abandoned at the deadline: the call is still blocked
    assert isinstance(out.error, BudgetExceededError) and "0.5s" in str(out.error)
    assert out.llm_calls and out.llm_calls[-1].error and "BudgetExceededError" in out.llm_calls[-1].error


def test_the_async_twin_cancels_at_the_deadline() -> None:
    ended: list[str] = []

    async def main() -> None:
        async def slow() -> str:
            try:
                await asyncio.Event().wait()  # never set: only a cancel ends it
            except asyncio.CancelledError:
                ended.append("cancelled")
                raise
            return "late"

        with deadline_scope(time.time() + 0.3, 0.3), pytest.raises(BudgetExceededError):
            await acall_within("llm:answer", slow)

    asyncio.run(main())
    assert ended == ["cancelled"]  # cancelled at the deadline, whatever the machine's speed


def test_a_self_correcting_search_stops_with_budget_exhausted(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    store.ingest_text("orbit comet nebula quasar pulsar galaxy", collection=collection_name, source="a")
    # the budget must outlast the first search on this machine, however loaded: five of them, measured
    started = time.monotonic()
    assert (ar.new("orbit comet", store=store, collections=[collection_name]) | ar.search()).hits
    budget = max(0.8, 5 * (time.monotonic() - started))
    with _Stall() as stall:
        ctx = ar.new(
            "orbit comet",
            store=store,
            llm=stall,
            collections=[collection_name],
            budget=ar.Budget(max_seconds=budget),
        )
        out = ctx | ar.search(self_correct=True, max_iterations=5)
        assert not stall.returned.is_set()  # stopped at the deadline, inside the stalled judge call
    assert out.error is None and out.hits  # the hits found before the budget ran out are kept
    assert [r.stop_reason for r in out.results] == [StopReason.BUDGET_EXHAUSTED]


@pytest.mark.parametrize("value", [0, 11, 400, True, 2.5])
def test_decompose_fan_out_has_a_maximum(value: Any) -> None:
    with pytest.raises(InvalidInputError, match="max_sub_questions"):
        ar.new("a and what is b") | ar.decompose(max_sub_questions=value)


def test_a_question_of_400_clauses_is_at_most_10_sub_questions() -> None:
    question = " and what is ".join(f"thing{i}" for i in range(400)) + "?"
    out = ar.new(question) | ar.decompose(max_sub_questions=10)
    assert out.error is None and 1 <= len(out.sub_questions) <= 10


class _BrokenStreamLLM:
    """A custom model (not agentrag's) whose stream fails after one piece with its own error."""

    model = "custom-broken"

    def complete(self, messages: Sequence[Any]) -> LLMReply:
        return LLMReply(text="fine", model=self.model)

    async def acomplete(self, messages: Sequence[Any]) -> LLMReply:
        return self.complete(messages)

    def stream(self, messages: Sequence[Any]) -> TextStream:
        def produce(_: TextStream) -> Iterator[str]:
            yield "partial "
            raise ConnectionResetError("peer reset; secret-prompt-text")

        return TextStream(self.model, produce)

    def astream(self, messages: Sequence[Any]) -> AsyncTextStream:
        async def produce(_: AsyncTextStream) -> AsyncIterator[str]:
            yield "partial "
            raise ConnectionResetError("peer reset; secret-prompt-text")

        return AsyncTextStream(self.model, produce)


def test_a_custom_models_failing_stream_is_a_recorded_degradation(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    store.ingest_text("orbit comet nebula quasar", collection=collection_name, source="a")
    ctx = (
        ar.new("orbit comet", store=store, llm=_BrokenStreamLLM(), collections=[collection_name])
        | ar.search()
    )

    def final(items: list[Any]) -> ar.Context:
        assert isinstance(items[-1], ar.Context)
        return items[-1]

    async def collect() -> list[Any]:
        return [item async for item in ar.aanswer_stream(ctx)]

    for out in (final(list(ar.answer_stream(ctx))), final(asyncio.run(collect()))):
        assert out.error is None
        assert [d.kind for d in out.degradations] == ["raw-results"]
        failed = out.llm_calls[-1].error or ""
        assert failed.startswith("LLMError") and "ConnectionResetError" in failed
        assert "secret-prompt-text" not in failed


# ---- the SQL of a search under the deadline: statement_timeout -------------------------------------
@contextmanager
def _chunks_locked(database_url: str) -> Iterator[Any]:
    """``agentrag.chunks`` held ACCESS EXCLUSIVE by another transaction (as a VACUUM FULL or a
    schema change holds it): every statement of a search that reads chunks waits, really, in SQL."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    holder = create_engine(database_url, poolclass=NullPool)
    try:
        with holder.connect() as conn:
            transaction = conn.begin()
            # a search that is not cancelled must not hang the suite: the lock goes after 20 s idle
            conn.execute(text("SET LOCAL idle_in_transaction_session_timeout = '20s'"))
            conn.execute(text("LOCK TABLE agentrag.chunks IN ACCESS EXCLUSIVE MODE"))
            try:
                yield conn
            finally:
                with suppress(Exception):  # already ended by that timeout when a search hung
                    transaction.rollback()
    finally:
        holder.dispose()


def _waiting_on_the_lock(conn: Any) -> int:
    """Backends waiting for a lock on agentrag.chunks right now."""
    from sqlalchemy import text

    return int(
        conn.execute(
            text("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'agentrag.chunks'::regclass")
        ).scalar()
    )


def _lock_corpus(store: Store, collection: str) -> None:
    store.create_collection(collection)
    for i in range(3):
        store.ingest_text(f"orbit comet nebula {i}", collection=collection, source=f"s{i}")


def test_a_search_blocked_in_sql_is_cancelled_at_the_deadline(
    database_url: str, store: Store, collection_name: str
) -> None:
    """The budget's time left is the search transaction's statement_timeout: PostgreSQL cancels the
    blocked statement (nothing waits on the lock afterwards, which is still held), and the cancel is
    BudgetExceededError: the search step's ctx.error, store.search's exception."""
    _lock_corpus(store, collection_name)
    budget = ar.Budget(max_seconds=1)
    ctx = ar.new("orbit comet", store=store, budget=budget, collections=[collection_name], mode="vector")
    with _chunks_locked(database_url) as holder:
        out = ctx | ar.search()
        assert isinstance(out.error, BudgetExceededError), out.error  # the step's typed error
        assert out.error.what == "search" and out.error.limit_s == 1 and not out.hits
        assert _waiting_on_the_lock(holder) == 0  # cancelled in the server, not only abandoned
        with deadline_scope(time.time() + 0.5, 0.5), pytest.raises(BudgetExceededError):
            store.search("orbit", collections=[collection_name], mode="vector")
        assert _waiting_on_the_lock(holder) == 0
    # the lock gone, the same run searches (the pooled connection is fine: the timeout was local)
    done = ar.new("orbit comet", store=store, budget=budget, collections=[collection_name], mode="vector")
    assert (done | ar.search()).hits
    with store.engine.connect() as conn:  # SET LOCAL: nothing left on the pooled connections
        from sqlalchemy import text

        assert conn.execute(text("SHOW statement_timeout")).scalar() == "0"


def test_a_search_past_its_deadline_runs_no_sql(store: Store, collection_name: str) -> None:
    from sqlalchemy import event

    _lock_corpus(store, collection_name)
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        with deadline_scope(time.time() - 1, 1.0), pytest.raises(BudgetExceededError):
            store.search("orbit", collections=[collection_name], mode="vector")
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    assert not any("statement_timeout" in s or "chunks" in s for s in statements), statements


def test_a_search_blocked_in_sql_is_a_504_in_the_service(
    database_url: str, store: Store, tmp_path: Any, collection_name: str
) -> None:
    import httpx

    from tests.server_support import auth, new_tenant, start_server

    tenant = new_tenant(store, "sqlbudget")
    store.create_collection(collection_name)
    store.ingest_text("orbit comet nebula", collection=collection_name, source="s", tenant=tenant)
    server = start_server(database_url, tmp_path, "--request-budget", "1")
    body = {"query_text": "orbit comet", "collections": [collection_name], "mode": "vector"}
    try:
        with httpx.Client(base_url=server.url, timeout=30, headers=auth(tenant)) as client:
            assert client.post(f"/api/v1/query/{tenant}/search", json=body).status_code == 200
            with _chunks_locked(database_url) as holder:
                r = client.post(f"/api/v1/query/{tenant}/search", json=body)
                assert r.status_code == 504, r.text
                assert r.json()["error"]["code"] == "BUDGET_EXCEEDED"
                assert _waiting_on_the_lock(holder) == 0
            assert client.post(f"/api/v1/query/{tenant}/search", json=body).status_code == 200
        assert "Exception in ASGI application" not in server.log()
    finally:
        server.stop()
