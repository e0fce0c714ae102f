"""The store against the real PostgreSQL: migrations, collections, ingestion guarantees."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from agentrag.errors import (
    CollectionExistsError,
    CollectionNotFoundError,
    EmbeddingError,
    EmbeddingMismatchError,
    InvalidInputError,
    StoreError,
)
from agentrag.scope import Scope
from agentrag.store.store import Store
from agentrag.testing import FakeEmbedder

PARAGRAPH = "Lumen keeps notes in workspaces. Each workspace has members and permissions. " * 8


@pytest.fixture
def fresh_database_url(database_url: str) -> Iterator[str]:
    base = make_url(database_url)
    name = f"agentrag_fresh_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield base.set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _count(store: Store, sql: str, **params: object) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text(sql), params).scalar() or 0)


def test_migrations_from_empty_database_run_twice(
    fresh_database_url: str, fake_embedder: FakeEmbedder
) -> None:
    store = Store(fresh_database_url, embedder=fake_embedder, migrate=False)
    assert store.status().applied == ()
    from agentrag.store.migrate import available_migrations

    expected = [m.version for m in available_migrations()]
    assert expected[:4] == [1, 2, 3, 4]
    applied = store.upgrade()
    assert [m.version for m in applied] == expected
    assert store.upgrade() == []
    status = store.status()
    assert status.current == expected[-1] and not status.pending
    assert status.vector_version is not None and status.vector_version.startswith("0.8")
    assert _count(store, "SELECT count(*) FROM agentrag.migrations") == len(expected)
    store.close()


def test_migration_3_replaces_the_full_text_expression_indexes(
    fresh_database_url: str, fake_embedder: FakeEmbedder, tmp_path: Path
) -> None:
    import shutil

    from agentrag.store.migrate import resource_dir, upgrade

    for migration in sorted(resource_dir("migrations").glob("000[12]_*.sql")):
        shutil.copy(migration, tmp_path / migration.name)
    engine = create_engine(fresh_database_url)
    assert [m.version for m in upgrade(engine, tmp_path)] == [1, 2]
    with engine.begin() as conn:  # what 0002's lexical_sql left behind for collection 7
        conn.execute(
            text(
                "CREATE INDEX chunks_fts_7 ON agentrag.chunks USING gin (to_tsvector('english', text))"
                " WHERE collection_id = 7"
            )
        )
    assert next(m.version for m in upgrade(engine)) == 3  # then any later migrations
    with engine.connect() as conn:
        assert conn.execute(text("SELECT to_regclass('agentrag.chunks_fts_7')")).scalar() is None
        assert conn.execute(text("SELECT to_regclass('agentrag.chunk_tsv')")).scalar() is not None
    engine.dispose()


def test_migrations_from_two_processes_at_once(fresh_database_url: str, fake_embedder: FakeEmbedder) -> None:
    results: list[object] = []
    barrier = threading.Barrier(3)

    def run() -> None:
        barrier.wait()
        try:
            s = Store(fresh_database_url, embedder=fake_embedder)
            results.append(s.status().current)
            s.close()
        except Exception as exc:  # pragma: no cover - the assertion below reports it
            results.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    from agentrag.store.migrate import available_migrations

    latest = available_migrations()[-1].version
    assert results == [latest, latest, latest]


def test_collections_crud(store: Store, collection_name: str) -> None:
    c = store.create_collection(collection_name, description="product docs")
    assert c.embed_model == store.embedder.model_id and c.dimensions == store.embedder.dimensions
    assert c.distance == "cosine" and c.document_count == 0
    assert collection_name in [x.name for x in store.collections()]
    with pytest.raises(CollectionExistsError):
        store.create_collection(collection_name)
    assert store.create_collection(collection_name, exist_ok=True).id == c.id
    store.delete_collection(collection_name)
    with pytest.raises(CollectionNotFoundError):
        store.collection(collection_name)


@pytest.mark.parametrize("name", ["", "has space", "x" * 64, "semi;colon", "../up", "-dash-first"])
def test_bad_collection_names_rejected(store: Store, name: str) -> None:
    with pytest.raises(InvalidInputError):
        store.create_collection(name)


def test_unknown_distance_rejected(store: Store, collection_name: str) -> None:
    with pytest.raises(InvalidInputError, match="distance"):
        store.create_collection(collection_name, distance="manhattan")


def test_reingest_unchanged_is_noop_and_changed_replaces_atomically(
    store: Store, collection_name: str
) -> None:
    store.create_collection(collection_name)
    first = store.ingest_text(PARAGRAPH * 3, collection=collection_name, source="a.md")
    assert len(first.added) == 1 and first.chunks_written > 1
    version = store.collection(collection_name).version
    again = store.ingest_text(PARAGRAPH * 3, collection=collection_name, source="a.md")
    assert again.unchanged == ("a.md",) and again.chunks_written == 0
    assert store.collection(collection_name).version == version  # nothing written, BM25 cache stays valid

    old_id = first.document_ids["a.md"]
    changed = store.ingest_text(
        PARAGRAPH + "A new closing sentence.", collection=collection_name, source="a.md"
    )
    assert changed.replaced == ("a.md",)
    new_id = changed.document_ids["a.md"]
    assert new_id != old_id
    assert _count(store, "SELECT count(*) FROM agentrag.chunks WHERE document_id = :d", d=old_id) == 0
    assert (
        _count(
            store,
            "SELECT count(*) FROM agentrag.documents WHERE source = 'a.md' AND collection_id = :c",
            c=store.collection(collection_name).id,
        )
        == 1
    )
    doc = store.document(new_id)
    assert doc.text.endswith("A new closing sentence.")
    assert doc.chunk_count == _count(
        store, "SELECT count(*) FROM agentrag.chunks WHERE document_id = :d", d=new_id
    )


def test_metadata_change_replaces_document(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    store.ingest_text(
        PARAGRAPH, collection=collection_name, source="m.md", metadata={"classification": "public"}
    )
    report = store.ingest_text(
        PARAGRAPH, collection=collection_name, source="m.md", metadata={"classification": "internal"}
    )
    assert report.replaced == ("m.md",)
    (doc,) = store.documents(collection_name)
    assert doc.classification == "internal"


def test_failed_replace_keeps_the_old_version(store: Store, collection_name: str, database_url: str) -> None:
    store.create_collection(collection_name)
    store.ingest_text(PARAGRAPH, collection=collection_name, source="keep.md")
    before = store.documents(collection_name)
    broken = Store(database_url, embedder=FakeEmbedder(dimensions=64, fail=True))
    with pytest.raises(EmbeddingError):
        broken.ingest_text(PARAGRAPH + " changed", collection=collection_name, source="keep.md")
    broken.close()
    after = store.documents(collection_name)
    assert [(d.id, d.sha256, d.chunk_count) for d in after] == [
        (d.id, d.sha256, d.chunk_count) for d in before
    ]


def test_model_or_dimension_mismatch_rejected_before_writing(
    store: Store, collection_name: str, database_url: str
) -> None:
    store.create_collection(collection_name)
    for embedder in (FakeEmbedder(dimensions=32), FakeEmbedder(dimensions=64, model_id="other-model")):
        other = Store(database_url, embedder=embedder)
        with pytest.raises(EmbeddingMismatchError):
            other.ingest_text(PARAGRAPH, collection=collection_name, source="x.md")
        other.close()
    assert store.collection(collection_name).document_count == 0
    assert (
        _count(
            store,
            "SELECT count(*) FROM agentrag.chunks WHERE collection_id = :c",
            c=store.collection(collection_name).id,
        )
        == 0
    )


class _WrongShape(FakeEmbedder):
    def embed(self, texts):  # type: ignore[no-untyped-def]
        return np.zeros((len(texts), self.dimensions - 1), dtype=np.float32)


def test_embedder_returning_wrong_dimension_writes_nothing(
    store: Store, database_url: str, collection_name: str
) -> None:
    store.create_collection(collection_name)
    liar = Store(database_url, embedder=_WrongShape(dimensions=64))
    with pytest.raises(EmbeddingError, match="shape"):
        liar.ingest_text(PARAGRAPH, collection=collection_name, source="x.md")
    liar.close()
    assert store.collection(collection_name).document_count == 0


def test_stored_chunks_round_trip_to_document_text(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    report = store.ingest(Path(__file__).parent.parent / "samples" / "api", collection=collection_name)
    assert report.ok and len(report.added) >= 5
    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT d.text AS doc, c.text, c.start_char, c.end_char, c.sha256, c.section"
                " FROM agentrag.chunks c JOIN agentrag.documents d ON d.id = c.document_id"
                " WHERE c.collection_id = :c"
            ),
            {"c": store.collection(collection_name).id},
        ).all()
    assert rows
    for row in rows:
        assert row.doc[row.start_char : row.end_char] == row.text
        assert hashlib.sha256(row.text.encode()).hexdigest() == row.sha256
    assert any(row.section for row in rows)


def test_front_matter_becomes_metadata(store: Store, collection_name: str, tmp_path: Path) -> None:
    store.create_collection(collection_name)
    (tmp_path / "n.md").write_text(
        "---\ntitle: Note\nclassification: internal\ndate: 2026-01-02\n---\n# Note\nBody.\n"
    )
    report = store.ingest(tmp_path, collection=collection_name, metadata={"team": "docs"})
    (doc,) = store.documents(collection_name)
    assert report.ok
    assert doc.classification == "internal" and str(doc.date) == "2026-01-02"
    assert doc.metadata == {
        "title": "Note",
        "classification": "internal",
        "date": "2026-01-02",
        "team": "docs",
    }
    assert store.document(doc.id).text == "# Note\nBody.\n"


def test_unreadable_files_are_named_and_others_still_go_in(
    store: Store, collection_name: str, tmp_path: Path
) -> None:
    store.create_collection(collection_name)
    (tmp_path / "good.md").write_text("# Good\nfine text")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\x00binary")
    (tmp_path / "empty.md").write_text("   \n")
    (tmp_path / "baddate.md").write_text("---\ndate: yesterday\n---\ntext")
    report = store.ingest(tmp_path, collection=collection_name)
    assert not report.ok
    assert [Path(s).name for s in report.added] == ["good.md"]
    failed = {Path(s).name: why for s, why in report.failed}
    assert set(failed) == {"bad.txt", "empty.md", "baddate.md"}
    assert "UTF-8" in failed["bad.txt"] and "ISO date" in failed["baddate.md"]


@pytest.mark.parametrize("batch_size", [1, 4, 8, 64])
def test_connection_killed_mid_ingest_leaves_no_partial_document(
    database_url: str,
    fake_embedder: FakeEmbedder,
    collection_name: str,
    tmp_path: Path,
    batch_size: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentrag.store import ingest

    monkeypatch.setattr(ingest, "WRITE_BATCH_DOCUMENTS", batch_size)
    store = Store(database_url, embedder=fake_embedder)
    store.create_collection(collection_name)
    for i in range(6):
        (tmp_path / f"doc{i}.md").write_text(f"# Doc {i}\n\n" + PARAGRAPH * 4)
    killer = create_engine(make_url(database_url), isolation_level="AUTOCOMMIT")

    def kill_inside_fourth_document(event) -> None:  # type: ignore[no-untyped-def]
        # inside the transaction that writes doc3.md: its batch's, then its own (and its retry's)
        if event.status == "writing" and event.source == "doc3.md":
            with killer.connect() as conn:
                killed = conn.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                        " AND state = 'idle in transaction'"
                    )
                ).scalar()
                assert killed == 1

    # The batch holding the fourth document is killed (nothing of it stays) and written again one
    # document at a time; the fourth is killed, retried once on a fresh connection, killed again:
    # it is reported failed, the others still go in.
    report = store.ingest(tmp_path, collection=collection_name, on_progress=kill_inside_fourth_document)
    killer.dispose()
    [(source, why)] = report.failed
    assert source == "doc3.md" and "rolled back" in why and "SQLSTATE" in why
    assert len(report.added) == 5
    # the documents of the killed batch (doc0-doc3 at 4, all six above) were written one by one
    assert report.retried_alone == (0 if batch_size == 1 else min(batch_size, 6))

    docs = store.documents(collection_name)
    assert len(docs) == 5 and "doc3.md" not in {d.source for d in docs}
    cid = store.collection(collection_name).id
    for doc in docs:
        assert doc.chunk_count == _count(
            store, "SELECT count(*) FROM agentrag.chunks WHERE document_id = :d", d=doc.id
        )
    assert (
        _count(
            store,
            "SELECT count(*) FROM agentrag.chunks c WHERE c.collection_id = :c"
            " AND NOT EXISTS (SELECT 1 FROM agentrag.documents d WHERE d.id = c.document_id)",
            c=cid,
        )
        == 0
    )

    rerun = store.ingest(tmp_path, collection=collection_name)
    assert sorted(Path(s).name for s in rerun.added) == ["doc3.md"]
    assert len(rerun.unchanged) == 5
    store.close()


def test_session_links_and_scoped_documents(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name, scoped=True)
    a = store.ingest_text(PARAGRAPH, collection=collection_name, source="s.md", tenant="t1", session="sess-1")
    b = store.ingest_text(PARAGRAPH, collection=collection_name, source="s.md", tenant="t2")
    assert a.added and b.added  # the same source in two tenants is two documents
    assert store.documents(collection_name, tenant="t1") == []  # a session upload is private to it
    docs = store.documents(collection_name, scope=Scope(tenant="t1", session="sess-1"))
    assert len(docs) == 1 and docs[0].sessions == ["sess-1"]
    store.link_session(b.document_ids["s.md"], "sess-2")
    assert store.documents(collection_name, tenant="t2")[0].sessions == ["sess-2"]
    with pytest.raises(InvalidInputError):
        store.ingest_text(PARAGRAPH, collection=collection_name, source="y.md", tenant="  ")


def test_vector_index_is_built_per_collection(store: Store, collection_name: str) -> None:
    c = store.create_collection(collection_name)
    store.ingest_text(PARAGRAPH, collection=collection_name, source="i.md")
    with store.engine.connect() as conn:
        indexdef = conn.execute(
            text("SELECT indexdef FROM pg_indexes WHERE schemaname = 'agentrag' AND indexname = :n"),
            {"n": c.hnsw_index},
        ).scalar()
    assert indexdef is not None
    assert "hnsw" in indexdef and "vector_cosine_ops" in indexdef and f"collection_id = {c.id}" in indexdef


def test_chunk_vectors_stay_in_the_row_and_the_text_goes_out_first(
    database_url: str, collection_name: str
) -> None:
    """Migration 0015: a row over the 2 kB TOAST threshold moves its text out of line, not its vector
    (pgvector's default, EXTERNAL, moved the 384-d vector out: each distance then read the TOAST table)."""
    import random

    rng = random.Random(0)
    # incompressible words (pglz finds no repeats), so the row stays over 2 kB until a value moves out
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(400)]
    store = Store(database_url, embedder=FakeEmbedder(384))
    try:
        store.create_collection(collection_name)
        store.ingest_text(" ".join(words), collection=collection_name, source="wide.md", chunk_size=1500)
        with store.engine.connect() as conn:
            if (conn.dialect.server_version_info or (0,)) < (17,):
                pytest.skip("pg_column_toast_chunk_id needs PostgreSQL 17")
            storage = conn.execute(
                text(
                    "SELECT attstorage FROM pg_attribute"
                    " WHERE attrelid = 'agentrag.chunks'::regclass AND attname = 'embedding'"
                )
            ).scalar()
            rows = conn.execute(
                text(
                    "SELECT pg_column_toast_chunk_id(embedding) AS vector_out,"
                    " pg_column_toast_chunk_id(text) AS text_out, octet_length(text) AS text_bytes"
                    " FROM agentrag.chunks WHERE collection_id = :c"
                ),
                {"c": store.collection(collection_name).id},
            ).all()
        assert storage == "m"
        wide = [r for r in rows if r.text_bytes + 384 * 4 > 2100]
        assert wide, "the test needs rows over the TOAST threshold"
        assert all(r.vector_out is None for r in rows)
        assert all(r.text_out is not None for r in wide)
    finally:
        store.delete_collection(collection_name)
        store.close()


def test_delete_document_and_collection(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    r = store.ingest_text(PARAGRAPH, collection=collection_name, source="d.md")
    doc_id = r.document_ids["d.md"]
    store.delete_document(doc_id)
    assert store.documents(collection_name) == []
    with pytest.raises(StoreError):
        store.delete_document(doc_id)
    store.delete_collection(collection_name)
    assert _count(store, "SELECT count(*) FROM agentrag.chunks c WHERE c.document_id = :d", d=doc_id) == 0


def test_the_same_folder_from_another_location_is_not_ingested_twice(
    store: Store, collection_name: str, tmp_path: Path
) -> None:
    import shutil

    first = tmp_path / "checkout_a" / "docs"
    (first / "guides").mkdir(parents=True)
    (first / "intro.md").write_text("# Intro\nWelcome text.")
    (first / "guides" / "setup.md").write_text("# Setup\nInstall it.")
    second = tmp_path / "checkout_b" / "docs"
    shutil.copytree(first, second)
    store.create_collection(collection_name)
    report = store.ingest(first, collection=collection_name)
    assert sorted(report.added) == ["guides/setup.md", "intro.md"]
    again = store.ingest(second, collection=collection_name)
    assert again.added == () and sorted(again.unchanged) == ["guides/setup.md", "intro.md"]
    assert store.ingest(second / "intro.md", collection=collection_name).unchanged == ("intro.md",)
    assert store.collection(collection_name).document_count == 2


# ---- the query-vector cache and describe(max_age) ------------------------------------------------


def test_embed_queries_embeds_each_text_once_and_is_bounded(database_url: str) -> None:

    embedder = FakeEmbedder(32)
    with Store(database_url, embedder=embedder, query_cache_size=2) as s:
        first = s.embed_queries(["alpha", "beta", "alpha"])
        assert embedder.calls == [["alpha", "beta"]]  # the repeat within one call is embedded once too
        assert np.array_equal(first, embedder.embed(["alpha", "beta", "alpha"]))
        embedder.calls.clear()
        assert np.array_equal(s.embed_queries(["beta"]), first[1:2]) and embedder.calls == []
        s.embed_queries(["gamma"])  # evicts the least recently used: alpha
        s.embed_queries(["beta", "alpha"])
        assert embedder.calls == [["gamma"], ["alpha"]]
        out = s.embed_queries(["beta"])
        out[0, 0] = 99.0  # callers get their own array; the cache is not theirs to change
        assert s.embed_queries(["beta"])[0, 0] != 99.0
        s.clear_query_cache()
        embedder.calls.clear()
        s.embed_queries(["beta"])
        assert embedder.calls == [["beta"]]
        assert s.embed_queries([]).shape == (0, 32)


def test_query_cache_is_keyed_by_model_version_and_can_be_off(database_url: str) -> None:

    embedder = FakeEmbedder(16)
    with Store(database_url, embedder=embedder) as s:
        s.embed_queries(["alpha"])
        embedder.version = "2"  # a new model version never gets the old vectors
        s.embed_queries(["alpha"])
        assert embedder.calls == [["alpha"], ["alpha"]]
    off = FakeEmbedder(16)
    with Store(database_url, embedder=off, query_cache_size=0) as s:
        s.embed_queries(["alpha"])
        s.embed_queries(["alpha"])
        assert off.calls == [["alpha"], ["alpha"]]
    for bad in (-1, 1.5, True):
        with pytest.raises(InvalidInputError, match="query_cache_size"):
            Store(database_url, query_cache_size=bad)  # type: ignore[arg-type]


def test_a_failed_embedding_is_not_cached(database_url: str) -> None:

    embedder = FakeEmbedder(16, fail=True)
    with Store(database_url, embedder=embedder) as s:
        with pytest.raises(EmbeddingError):
            s.embed_queries(["alpha"])
        embedder.fail = False
        assert s.embed_queries(["alpha"]).shape == (1, 16)


def test_describe_with_max_age_reuses_what_it_read(store: Store, collection_name: str) -> None:
    from sqlalchemy import event

    store.create_collection(collection_name, description="first")
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        assert store.describe([collection_name])[0].description == "first"
        assert len(statements) == 1
        assert store.describe([collection_name], max_age=60)[0].description == "first"
        assert len(statements) == 1  # answered from what describe read
        store.describe([collection_name])  # max_age=0: always asks the database
        assert len(statements) == 2
        store.delete_collection(collection_name)
        with pytest.raises(CollectionNotFoundError):
            store.describe([collection_name], max_age=60)  # deleting through this store forgets it
        store.create_collection(collection_name, description="second")
        assert store.describe([collection_name], max_age=60)[0].description == "second"
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
        store.delete_collection(collection_name)
