"""Ingest's producer thread: documents are prepared (chunked, embedded, their COPY rows built) one
write batch ahead, in a thread of their own, while the caller's thread writes the batch before.

Checked against the real PostgreSQL: the overlap happens, the batches are full, and a failure on
the producer's side (an exception in the prepare stage, at any batch size) surfaces with its own
type after the batches before it are committed, never leaves a partial document, and a re-run
writes exactly what is missing. Backends are killed mid-ingest at every statement, at several
batch sizes, with the producer running.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from sqlalchemy import text

from agentrag.errors import AgentragError, EmbeddingError, StoreError
from agentrag.store import ingest
from agentrag.store.ingest import PreparedDocument, ingest_texts, run_ahead
from agentrag.store.prepare import LocalExecutor
from agentrag.store.store import Store
from tests.test_chaos import Killer, _typed_or_ok
from tests.test_ingest_batches import _check_whole, _docs, _stored


def _producers_alive() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("agentrag-prepare") and t.is_alive()]


# ---- run_ahead on its own --------------------------------------------------------------------------


def test_run_ahead_keeps_the_order_and_runs_in_another_thread() -> None:
    threads: set[int] = set()

    def produce() -> Iterator[int]:
        for i in range(50):
            threads.add(threading.get_ident())
            yield i

    assert list(run_ahead(produce, 2)) == list(range(50))
    assert threads and threading.get_ident() not in threads
    assert _producers_alive() == []


def test_run_ahead_raises_the_producers_error_after_the_items_before_it() -> None:
    def produce() -> Iterator[int]:
        yield 1
        yield 2
        raise EmbeddingError("the embedder is down")

    got: list[int] = []
    with pytest.raises(EmbeddingError, match="the embedder is down"):
        for item in run_ahead(produce, 1):
            got.append(item)
    assert got == [1, 2] and _producers_alive() == []


def test_run_ahead_stops_closes_and_joins_the_producer_when_the_caller_stops() -> None:
    closed = threading.Event()

    def produce() -> Iterator[int]:
        try:
            i = 0
            while True:  # endless: only the caller stopping ends it
                yield i
                i += 1
        finally:
            closed.set()

    stream = run_ahead(produce, 1)
    assert [next(stream), next(stream)] == [0, 1]
    stream.close()
    assert closed.is_set() and _producers_alive() == []

    class Stop(Exception):
        pass

    closed.clear()
    with pytest.raises(Stop):
        for item in run_ahead(produce, 1):
            if item == 3:
                raise Stop
    assert closed.is_set() and _producers_alive() == []


# ---- through ingest --------------------------------------------------------------------------------


class Recording:
    """LocalExecutor, recording where it runs and announcing each document it hands over."""

    def __init__(self, fail_after: int | None = None, error: type[BaseException] = EmbeddingError) -> None:
        self.inner = LocalExecutor(batch_documents=4)
        self.threads: set[int] = set()
        self.yielded = 0
        self.handed: dict[int, threading.Event] = {}
        self.fail_after = fail_after
        self.error = error

    def handed_over(self, n: int) -> threading.Event:
        return self.handed.setdefault(n, threading.Event())

    def run(self, documents: Iterable[PreparedDocument], **options: Any) -> Iterator[PreparedDocument]:
        for doc in self.inner.run(documents, **options):
            self.threads.add(threading.get_ident())
            if self.fail_after is not None and self.yielded == self.fail_after:
                raise self.error("prepare failed mid-stream")
            self.yielded += 1
            self.handed_over(self.yielded).set()
            yield doc


def _version(store: Store, name: str) -> int:
    with store.engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT version FROM agentrag.collections WHERE name = :n"), {"n": name}
            ).scalar()
        )


def test_the_next_batch_is_prepared_while_this_one_is_written(
    store: Store, collection_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "WRITE_BATCH_DOCUMENTS", 2)
    store.create_collection(collection_name)
    executor = Recording()
    overlapped: list[bool] = []
    caller = threading.get_ident()
    callback_threads: set[int] = set()

    def on_progress(event: Any) -> None:
        callback_threads.add(threading.get_ident())
        if event.status == "writing" and event.source == "d000.md":
            # inside batch 1's transaction: the producer hands over document 3 (batch 2) meanwhile;
            # written one after the other, it never would (the timeout only bounds a failure)
            overlapped.append(executor.handed_over(3).wait(timeout=60))

    report = ingest_texts(
        store, _docs(6), collection=collection_name, executor=executor, on_progress=on_progress
    )
    assert overlapped == [True]
    assert report.ok and len(report.added) == 6
    assert caller not in executor.threads  # prepared in the producer thread ...
    assert callback_threads == {caller}  # ... written (and reported) in the caller's
    _check_whole(store, collection_name)


def test_write_batches_are_full(store: Store, collection_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One transaction (one version bump) per full batch: a document that would overflow the
    chunk budget starts the next batch (it used to be written alone, one extra transaction)."""
    docs = _docs(12)
    store.create_collection(collection_name)
    before = _version(store, collection_name)
    monkeypatch.setattr(ingest, "WRITE_BATCH_CHUNKS", 2 * 3 + 1)  # every document here has 3 chunks
    report = ingest_texts(store, docs, collection=collection_name, chunk_size=600, chunk_overlap=0)
    counts = {d.source: d.chunk_count for d in store.documents(collection_name)}
    assert set(counts.values()) == {3} and report.ok and report.retried_alone == 0
    assert _version(store, collection_name) - before == 6  # 12 documents, 2 per batch


@pytest.mark.parametrize("batch_size", [1, 4, 8, 64])
@pytest.mark.parametrize("error", [EmbeddingError, RuntimeError])
def test_a_producer_failure_is_raised_typed_and_leaves_no_partial_document(
    store: Store,
    collection_name: str,
    monkeypatch: pytest.MonkeyPatch,
    batch_size: int,
    error: type[BaseException],
) -> None:
    monkeypatch.setattr(ingest, "WRITE_BATCH_DOCUMENTS", batch_size)
    store.create_collection(collection_name)
    docs = _docs(12)
    with pytest.raises(error, match="prepare failed mid-stream"):
        ingest_texts(store, docs, collection=collection_name, executor=Recording(fail_after=9, error=error))
    assert _producers_alive() == []
    _check_whole(store, collection_name)
    stored = {d.source for d in store.documents(collection_name)}
    # the whole batches handed over before the failure are in; nothing after it
    assert stored == {f"d{i:03}.md" for i in range(9 // batch_size * batch_size)}
    rerun = ingest_texts(store, docs, collection=collection_name)
    assert set(rerun.unchanged) == stored and set(rerun.added) == {s for s, _t, _m in docs} - stored
    _check_whole(store, collection_name)


@pytest.mark.parametrize("batch_size", [1, 4, 8, 64])
def test_backends_killed_at_every_statement_with_the_producer_running(
    database_url: str, store: Store, monkeypatch: pytest.MonkeyPatch, batch_size: int
) -> None:
    """Kill statement N and N+1 (the retry too) for every N: no partial document, the report says
    what is stored, the re-run writes exactly what is missing and the rows equal a clean load's."""
    monkeypatch.setattr(ingest, "WRITE_BATCH_DOCUMENTS", batch_size)
    # four batches of one cover what nine do (each batch runs the same statements): a third of the time
    docs = _docs(9 if batch_size > 1 else 4)
    clean = f"clean_{uuid.uuid4().hex[:8]}"
    store.create_collection(clean)
    ingest_texts(store, docs, collection=clean)
    expected = _stored(store, clean)
    store.delete_collection(clean)
    n = 1
    while True:
        name = f"kill_{uuid.uuid4().hex[:8]}"
        store.create_collection(name)
        killer = Killer(store, database_url, {n, n + 1})
        try:
            outcome = _typed_or_ok(lambda name=name: ingest_texts(store, docs, collection=name))
        finally:
            killer.close()
        _check_whole(store, name)
        stored = {d.source for d in store.documents(name)}
        if isinstance(outcome, AgentragError):
            assert isinstance(outcome, StoreError)
        else:
            assert stored == set(outcome.added)
        assert _producers_alive() == []
        rerun = ingest_texts(store, docs, collection=name)
        assert rerun.ok and set(rerun.added) == {s for s, _t, _m in docs} - stored
        assert _stored(store, name) == expected
        store.delete_collection(name)
        if not killer.kills:
            break
        n += 1
    assert n > 3
