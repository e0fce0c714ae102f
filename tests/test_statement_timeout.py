"""statement_timeout: a budget's time left bounds each statement of a search from that statement's
start, never above the connection's own statement_timeout; when the connection's own fires, the
error is StatementTimeoutError, which names the setting to raise."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

import agentrag as ar
from agentrag.errors import BudgetExceededError, StatementTimeoutError, StoreError
from agentrag.llm.deadline import deadline_scope
from agentrag.store.store import Store
from tests.test_deadline import _chunks_locked, _lock_corpus, _waiting_on_the_lock

OWN_MS = 300  # the connection's own statement_timeout in these tests


@pytest.fixture
def own_timeout(database_url: str, fake_embedder: Any) -> Iterator[Store]:
    """A Store whose connections carry their own statement_timeout (the URL's ``options``), as a
    role's or a database's setting would give them."""
    joiner = "&" if "?" in database_url else "?"
    url = f"{database_url}{joiner}options={quote(f'-c statement_timeout={OWN_MS}')}"
    s = Store(url, embedder=fake_embedder)
    yield s
    s.close()


def _setting_ms(value: str) -> float:
    """``SHOW statement_timeout``'s text as milliseconds."""
    for unit, factor in (("ms", 1.0), ("min", 60_000.0), ("s", 1000.0), ("h", 3_600_000.0)):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * factor
    return float(value)


def test_each_statement_of_a_search_gets_the_time_left_at_its_start(
    store: Store, collection_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search starts with 30 s left; after its first statement, only 0.5 s is left (an earlier
    deadline comes into force: as if 29.5 s had passed, without waiting). The next statement runs
    under at most 0.5 s, not the 30 s set at the transaction's start."""
    from sqlalchemy import text

    import agentrag.retrieval.search as search_module

    _lock_corpus(store, collection_name)
    real, seen = search_module.load_collections, []

    def then_time_passes(conn, names):  # type: ignore[no-untyped-def]
        colls = real(conn, names)
        with deadline_scope(time.time() + 0.5, 30.0):
            seen.append(conn.execute(text("SELECT current_setting('statement_timeout')")).scalar())
        return colls

    monkeypatch.setattr(search_module, "load_collections", then_time_passes)
    with deadline_scope(time.time() + 30, 30.0):
        assert store.search("orbit", collections=[collection_name], mode="vector").hits
    assert len(seen) == 1 and 0 < _setting_ms(seen[0]) <= 500, seen


def test_a_budget_never_raises_the_connections_own_statement_timeout(
    database_url: str, store: Store, own_timeout: Store, collection_name: str
) -> None:
    """With 5 s of budget left, a statement blocked on a lock is cancelled by the connection's own
    300 ms: StatementTimeoutError naming the setting, not the budget's error 5 s later."""
    _lock_corpus(store, collection_name)  # set up without the 300 ms
    budget = ar.Budget(max_seconds=5)
    question = {"store": own_timeout, "budget": budget, "collections": [collection_name], "mode": "vector"}
    with _chunks_locked(database_url) as holder:
        with deadline_scope(time.time() + 5, 5.0), pytest.raises(StatementTimeoutError, match="ALTER ROLE"):
            own_timeout.search("orbit", collections=[collection_name], mode="vector")
        assert _waiting_on_the_lock(holder) == 0
        out = ar.new("orbit comet", **question) | ar.search()  # the step: a retrieval failure on record
        assert out.error is None and not out.hits
        [failed] = [d for d in out.degradations if d.kind == "retrieval-failed"]
        assert "StatementTimeoutError" in failed.reason and "ALTER ROLE" in failed.reason
        assert _waiting_on_the_lock(holder) == 0
    assert (ar.new("orbit comet", **question) | ar.search()).hits


def test_the_budget_still_cancels_when_it_is_the_shorter(
    database_url: str, store: Store, own_timeout: Store, collection_name: str
) -> None:
    """0.1 s of budget against the connection's own 300 ms: the budget's cancel, BudgetExceededError."""
    _lock_corpus(store, collection_name)  # set up without the 300 ms
    with _chunks_locked(database_url) as holder:
        with deadline_scope(time.time() + 0.1, 0.1), pytest.raises(BudgetExceededError):
            own_timeout.search("orbit", collections=[collection_name], mode="vector")
        assert _waiting_on_the_lock(holder) == 0


def test_the_connections_own_statement_timeout_without_a_budget_is_a_typed_error(
    database_url: str, store: Store, own_timeout: Store, collection_name: str
) -> None:
    _lock_corpus(store, collection_name)  # set up without the 300 ms
    with _chunks_locked(database_url) as holder:
        with pytest.raises(StatementTimeoutError, match="statement_timeout") as caught:
            own_timeout.search("orbit", collections=[collection_name], mode="lexical_sql")
        assert caught.value.sqlstate == "57014"  # type: ignore[attr-defined]
        assert "ALTER ROLE" in str(caught.value) and "orbit" not in str(caught.value)
        report = own_timeout.ingest_text("orbit comet nebula 9", collection=collection_name, source="s9")
        assert report.error_types == {"s9": "StatementTimeoutError"}  # a write: its file failed, typed
        assert "ALTER ROLE" in report.failed[0][1]
        assert _waiting_on_the_lock(holder) == 0


def test_a_cancel_request_is_not_a_statement_timeout(
    database_url: str, store: Store, collection_name: str
) -> None:
    """SQLSTATE 57014 is also pg_cancel_backend: the server's message tells them apart."""
    from sqlalchemy import text

    _lock_corpus(store, collection_name)
    caught: list[BaseException] = []

    def search() -> None:
        try:
            store.search("orbit", collections=[collection_name], mode="vector")
        except BaseException as exc:
            caught.append(exc)

    with _chunks_locked(database_url) as holder:
        searcher = threading.Thread(target=search)
        searcher.start()
        while not _waiting_on_the_lock(holder) and searcher.is_alive():
            time.sleep(0.01)  # polling a condition: nothing depends on how long it takes
        holder.execute(
            text(
                "SELECT pg_cancel_backend(l.pid) FROM pg_locks l"
                " WHERE NOT l.granted AND l.relation = 'agentrag.chunks'::regclass"
            )
        )
        searcher.join(30)
    assert len(caught) == 1 and isinstance(caught[0], StoreError), caught
    assert not isinstance(caught[0], StatementTimeoutError)


def test_the_service_answers_a_statement_timeout_504_naming_the_setting() -> None:
    """Not 503 with Retry-After (database unavailable): the same request would time out again."""
    from agentrag.server.errors import api_error_for

    error = api_error_for(StatementTimeoutError("searching failed: ..."))
    assert error is not None and (error.status, error.code) == (504, "STATEMENT_TIMEOUT")
    assert "statement_timeout" in error.message and not error.headers
