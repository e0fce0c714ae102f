"""The batched write path against the real PostgreSQL: many documents per transaction, each all
or nothing; bulk loads that drop and rebuild the collection's HNSW index.

A failure inside a batch comes from a real trigger on ``agentrag.documents`` (a document the
database refuses), never from a mock.
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from agentrag.errors import InvalidInputError
from agentrag.scope import Scope
from agentrag.store import ingest
from agentrag.store.ingest import IngestReport, ingest_texts
from agentrag.store.store import Store

WORDS = ["orbit", "comet", "nebula", "quasar", "pulsar", "galaxy", "meteor", "asteroid", "planet", "star"]


def _text(i: int, paragraphs: int = 3) -> str:
    """Distinct paragraphs (seeded by ``i``): no two chunks tie in a search."""
    rng = random.Random(i)
    vocab = [f"{w}{k}" for w in WORDS for k in range(20)]
    return "\n\n".join(" ".join(rng.choices(vocab, k=60)) + f" doc{i} part{p}." for p in range(paragraphs))


def _docs(n: int, salt: str = "") -> list[tuple[str, str, dict[str, Any]]]:
    return [(f"d{i:03}.md", _text(i) + salt, {"n": i}) for i in range(n)]


def _stored(store: Store, collection: str) -> list[tuple[Any, ...]]:
    """Every stored chunk of the collection with its document, keyed by source (ids are
    content-addressed per collection, so two collections are compared without them)."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT d.source, d.sha256, d.chunk_count, d.metadata::text, c.chunk_index, c.text,"
                " c.start_char, c.end_char, c.sha256 AS chunk_sha, c.embedding::text"
                " FROM agentrag.chunks c JOIN agentrag.documents d ON d.id = c.document_id"
                " JOIN agentrag.collections k ON k.id = d.collection_id WHERE k.name = :n"
                " ORDER BY d.source, c.chunk_index"
            ),
            {"n": collection},
        ).all()
    return [tuple(r) for r in rows]


def _check_whole(store: Store, collection: str) -> None:
    """No partial document: every document has exactly its chunk_count chunks."""
    with store.engine.connect() as conn:
        bad = conn.execute(
            text(
                "SELECT d.source FROM agentrag.documents d JOIN agentrag.collections k"
                " ON k.id = d.collection_id WHERE k.name = :n AND d.chunk_count <>"
                " (SELECT count(*) FROM agentrag.chunks c WHERE c.document_id = d.id)"
            ),
            {"n": collection},
        ).all()
        orphans = conn.execute(
            text(
                "SELECT count(*) FROM agentrag.chunks c JOIN agentrag.collections k"
                " ON k.id = c.collection_id WHERE k.name = :n"
                " AND NOT EXISTS (SELECT 1 FROM agentrag.documents d WHERE d.id = c.document_id)"
            ),
            {"n": collection},
        ).scalar()
    assert bad == [] and orphans == 0


def _index_valid(store: Store, collection: str) -> bool:
    name = store.collection(collection).hnsw_index
    with store.engine.connect() as conn:
        return bool(
            conn.execute(
                text("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(:n)"),
                {"n": f"agentrag.{name}"},
            ).scalar()
        )


@pytest.fixture
def poison(store: Store) -> Iterator[Any]:
    """``poison(collection, source)``: the database refuses that document (a real trigger)."""
    fn = f"agentrag.poison_{uuid.uuid4().hex[:8]}"
    made: list[str] = []

    def install(collection: str, source: str) -> None:
        cid = int(store.collection(collection).id)
        trigger = f"poison_{uuid.uuid4().hex[:8]}"
        with store.engine.begin() as conn:
            conn.execute(
                text(
                    f"CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$"
                    f" BEGIN IF NEW.collection_id = {cid} AND NEW.source = '{source}' THEN"
                    " RAISE EXCEPTION 'refused by the test trigger'; END IF; RETURN NEW; END $$"
                )
            )
            conn.execute(
                text(
                    f"CREATE TRIGGER {trigger} BEFORE INSERT ON agentrag.documents"
                    f" FOR EACH ROW EXECUTE FUNCTION {fn}()"
                )
            )
        made.append(trigger)

    yield install
    with store.engine.begin() as conn:
        for trigger in made:
            conn.execute(text(f"DROP TRIGGER IF EXISTS {trigger} ON agentrag.documents"))
        conn.execute(text(f"DROP FUNCTION IF EXISTS {fn}()"))


@pytest.mark.parametrize("batch_size", [1, 8, 64])
def test_a_document_the_database_refuses_fails_alone(
    store: Store, collection_name: str, poison: Any, batch_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "WRITE_BATCH_DOCUMENTS", batch_size)
    store.create_collection(collection_name)
    poison(collection_name, "d004.md")
    events: list[tuple[str, str]] = []
    report = ingest_texts(
        store,
        _docs(10),
        collection=collection_name,
        on_progress=lambda e: events.append((e.source, e.status)),
    )
    [(source, why)] = report.failed
    assert source == "d004.md" and "rolled back" in why and "SQLSTATE" in why
    assert sorted(report.added) == [f"d{i:03}.md" for i in range(10) if i != 4]
    # the failed batch (d000-d007 at 8, all ten at 64) was written again one by one
    assert report.retried_alone == {1: 0, 8: 8, 64: 10}[batch_size]
    final = [(s, st_) for s, st_ in events if st_ != "writing"]
    assert sorted(final) == sorted([(f"d{i:03}.md", "failed" if i == 4 else "added") for i in range(10)])
    assert {d.source for d in store.documents(collection_name)} == set(report.added)
    _check_whole(store, collection_name)
    assert _stored(store, collection_name)  # and they are complete documents with chunks

    rerun = ingest_texts(store, _docs(10), collection=collection_name)  # still refused; nothing else to do
    assert [s for s, _ in rerun.failed] == ["d004.md"] and len(rerun.unchanged) == 9 and not rerun.added


def test_batches_replace_changed_documents_and_skip_unchanged(
    store: Store, collection_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "WRITE_BATCH_DOCUMENTS", 4)
    store.create_collection(collection_name)
    first = ingest_texts(store, _docs(10), collection=collection_name, session="s1")
    assert len(first.added) == 10 and first.retried_alone == 0
    docs = _docs(10)
    docs[2] = (docs[2][0], docs[2][1] + " changed", docs[2][2])
    docs[7] = (docs[7][0], docs[7][1], {"n": 70})  # metadata only
    second = ingest_texts(store, docs, collection=collection_name, session="s2")
    assert sorted(second.replaced) == ["d002.md", "d007.md"] and len(second.unchanged) == 8
    assert second.chunks_written == len(_stored_for(store, collection_name, ["d002.md", "d007.md"]))
    # session uploads are private (issue #26): an unscoped listing hides them, an admin's lists them
    assert store.documents(collection_name) == []
    by_source = {d.source: d for d in store.documents(collection_name, scope=Scope.every())}
    assert len(by_source) == 10
    assert sorted(by_source["d000.md"].sessions) == ["s1", "s2"]  # unchanged: linked to the new session
    assert by_source["d002.md"].sessions == ["s2"]  # replaced: the old version's links went with it
    assert by_source["d007.md"].metadata == {"n": 70}
    _check_whole(store, collection_name)


def _stored_for(store: Store, collection: str, sources: list[str]) -> list[tuple[Any, ...]]:
    return [row for row in _stored(store, collection) if row[0] in sources]


@pytest.mark.parametrize("batch_size", [8, 64])
def test_concurrent_batched_ingests_of_the_same_keys(
    store: Store, collection_name: str, batch_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "WRITE_BATCH_DOCUMENTS", batch_size)
    store.create_collection(collection_name)
    docs = _docs(24)
    orders = [docs, docs[::-1], docs[12:] + docs[:12], docs[5:] + docs[:5]]  # overlapping batches
    barrier = threading.Barrier(len(orders))

    def run(order: list[tuple[str, str, dict[str, Any]]]) -> IngestReport:
        barrier.wait()
        return ingest_texts(store, order, collection=collection_name)

    with ThreadPoolExecutor(len(orders)) as pool:
        reports = list(pool.map(run, orders))
    assert all(r.ok for r in reports), [r.failed for r in reports]  # no deadlock, nothing refused
    added = [s for r in reports for s in r.added]
    assert sorted(added) == sorted(s for s, _, _ in docs)  # each document written exactly once
    for r in reports:
        assert sorted(r.added + r.unchanged) == sorted(s for s, _, _ in docs)
    _check_whole(store, collection_name)
    assert len(store.documents(collection_name)) == 24


def test_bulk_gives_the_same_rows_and_a_working_index(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "WRITE_BATCH_DOCUMENTS", 8)
    names = {mode: f"c_{mode}_{uuid.uuid4().hex[:8]}" for mode in ("bulk", "rowwise")}
    reports = {}
    for mode, name in names.items():
        store.create_collection(name)
        ingest_texts(store, _docs(6), collection=name)  # a first load: the index exists after it
        assert _index_valid(store, name)
        reports[mode] = ingest_texts(store, _docs(30, salt=" v2"), collection=name, bulk=mode == "bulk")
    assert reports["bulk"].vector_index == "rebuilt" and reports["bulk"].index_seconds > 0
    assert reports["rowwise"].vector_index == "maintained" and reports["rowwise"].index_seconds == 0
    assert reports["bulk"].chunks_written == reports["rowwise"].chunks_written > 0
    assert _stored(store, names["bulk"]) == _stored(store, names["rowwise"])
    assert _index_valid(store, names["bulk"]) and _index_valid(store, names["rowwise"])
    for query in ("comet3 nebula7", "doc17 part1", "galaxy2 star5 planet11"):
        found = {
            mode: [(h.source, h.text) for h in store.search(query, collections=name, mode="vector", top_k=10)]
            for mode, name in names.items()
        }
        assert found["bulk"] == found["rowwise"] and len(found["bulk"]) == 10
    with store.engine.connect() as conn:  # the vector leg can use the rebuilt index
        cid = store.collection(names["bulk"]).id
        conn.execute(text("SET LOCAL enable_seqscan = off"))  # a small table: make the planner show it
        conn.execute(text("SET LOCAL enable_bitmapscan = off"))
        conn.execute(text("SET LOCAL enable_sort = off"))
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                text(
                    f"EXPLAIN SELECT id FROM agentrag.chunks WHERE collection_id = {cid}"
                    " ORDER BY embedding::vector(64) <=> (SELECT embedding::vector(64) FROM agentrag.chunks"
                    f" WHERE collection_id = {cid} LIMIT 1) LIMIT 5"
                )
            )
        )
    assert store.collection(names["bulk"]).hnsw_index in plan
    for name in names.values():
        store.delete_collection(name)


def test_bulk_none_decides_by_the_size_of_the_load(
    store: Store, collection_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_collection(collection_name)
    first = ingest_texts(store, _docs(4), collection=collection_name)
    assert first.vector_index == "built"  # no index before the first load: built after it
    monkeypatch.setattr(ingest, "AUTO_BULK_MIN_CHUNKS", 5)
    big = ingest_texts(store, _docs(20, salt=" big"), collection=collection_name)  # more than stored
    assert big.vector_index == "rebuilt" and _index_valid(store, collection_name)
    small = ingest_texts(store, _docs(3, salt=" small"), collection=collection_name)  # far fewer than stored
    assert small.vector_index == "maintained" and _index_valid(store, collection_name)
    same = ingest_texts(store, _docs(3, salt=" small"), collection=collection_name, bulk=True)
    assert same.vector_index == "unchanged" and not same.changed  # nothing to write: index untouched
    assert _index_valid(store, collection_name)
    assert "vector index rebuilt in" in str(big) and big.to_dict()["vector_index"] == "rebuilt"


def test_a_failing_bulk_load_puts_the_index_back(
    store: Store, collection_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentrag.errors import EmbeddingError
    from agentrag.testing import FakeEmbedder

    store.create_collection(collection_name)
    ingest_texts(store, _docs(2), collection=collection_name)
    monkeypatch.setattr(ingest, "WRITE_BATCH_CHUNKS", 3)  # several prepare batches: the second fails

    class FailsSecondCall(FakeEmbedder):
        def embed(self, texts: Any) -> Any:
            if len(self.calls) == 1:
                self.calls.append(list(texts))
                raise EmbeddingError("the embedder is down")
            return super().embed(texts)

    failing = Store(store.url, embedder=FailsSecondCall(dimensions=64))
    try:
        with pytest.raises(EmbeddingError):
            ingest_texts(failing, _docs(8, salt=" x"), collection=collection_name, bulk=True)
    finally:
        failing.close()
    assert _index_valid(store, collection_name)  # dropped for the load, rebuilt on the way out
    _check_whole(store, collection_name)


def test_bulk_is_a_known_option_checked_at_call_time(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    with pytest.raises(InvalidInputError, match="bulk"):
        store.ingest_text("x y z", collection=collection_name, source="a", bulk="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bulky"):
        store.ingest_text("x y z", collection=collection_name, source="a", bulky=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="bulky"):
        ingest_texts(store, [("a", "x y z", {})], collection=collection_name, bulky=True)
    assert store.collection(collection_name).document_count == 0


def test_cli_ingest_bulk(
    store: Store,
    collection_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agentrag import cli

    monkeypatch.setattr(cli.common, "open_store", lambda args: store)
    (tmp_path / "a.md").write_text(_text(1))
    assert cli.main(["ingest", str(tmp_path), "-c", collection_name, "--create", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vector_index"] == "built"
    (tmp_path / "b.md").write_text(_text(2))
    assert cli.main(["ingest", str(tmp_path), "-c", collection_name, "--bulk", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["added"] == ["b.md"] and report["vector_index"] == "rebuilt" and report["index_seconds"] > 0
    assert _index_valid(store, collection_name)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch_documents=st.integers(min_value=1, max_value=12),
    batch_chunks=st.integers(min_value=1, max_value=40),
    changed=st.sets(st.integers(min_value=0, max_value=11), max_size=5),
)
def test_any_split_into_batches_stores_the_same_rows(
    store: Store, batch_documents: int, batch_chunks: int, changed: set[int]
) -> None:
    """Whatever the batch sizes, a load and a reload with some documents changed store exactly
    what one-document-per-transaction stores."""
    results = []
    for documents, chunks in ((1, 1), (batch_documents, batch_chunks)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ingest, "WRITE_BATCH_DOCUMENTS", documents)
            mp.setattr(ingest, "WRITE_BATCH_CHUNKS", chunks)
            name = f"c_prop_{uuid.uuid4().hex[:8]}"
            store.create_collection(name)
            ingest_texts(store, _docs(12), collection=name)
            reload = [
                (s, t + (" changed" if i in changed else ""), m) for i, (s, t, m) in enumerate(_docs(12))
            ]
            report = ingest_texts(store, reload, collection=name)
            results.append((_stored(store, name), sorted(report.replaced), sorted(report.unchanged)))
            _check_whole(store, name)
            store.delete_collection(name)
    assert results[0] == results[1]
    assert results[1][1] == sorted(f"d{i:03}.md" for i in changed)


def test_write_documents_takes_prepared_documents(store: Store, collection_name: str) -> None:
    """The write stage on its own (what an executor that chunks and embeds elsewhere calls)."""
    from agentrag.store.chunking import chunk_text
    from agentrag.store.ingest import PreparedDocument, write_documents

    store.create_collection(collection_name)
    coll = store.collection(collection_name)
    prepared = []
    for source, body, meta in _docs(5):
        chunks = chunk_text(body, size=200, overlap=0)
        vectors = store.embedder.embed([c.text for c in chunks])
        prepared.append(PreparedDocument(source, body, meta, chunks=chunks, vectors=vectors))
    prepared[3].metadata = {"date": "not a date"}
    outcomes = list(write_documents(store, coll, prepared, session="s"))
    assert [(o.source, o.status) for o in outcomes] == [
        (f"d{i:03}.md", "failed" if i == 3 else "added") for i in range(5)
    ]
    assert "ISO date" in (outcomes[3].error or "") and all(o.alone for o in outcomes)
    assert [o.chunks_written for o in outcomes] == [
        0 if i == 3 else len(prepared[i].chunks) for i in range(5)
    ]
    # the same documents through ingest get the same content-addressed ids
    same = ingest_texts(
        store, [(s, t, m) for i, (s, t, m) in enumerate(_docs(5)) if i != 3], collection=collection_name
    )
    assert len(same.unchanged) == 4 and same.document_ids == {
        o.source: o.document_id for o in outcomes if o.status == "added"
    }
    assert all(d.sessions == ["s"] for d in store.documents(collection_name))
    _check_whole(store, collection_name)
