"""store.sync and the layout of a document's chunks (migration 0054): an unchanged file whose
document was chunked with another chunk size / overlap, or by an older chunker
(``CHUNKER_VERSION``), is re-chunked in place (``report.rechunked``), as a fresh ingest with this
run's settings would chunk it; its row, grants, metadata and revisions stay. A file whose chunks
come out the same only gets the layout recorded. Real PostgreSQL; only the embedder is faked."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

import agentrag as ar
from agentrag.readers.chunking import CHUNKER_VERSION
from agentrag.store.store import Store
from agentrag.store.sync_report import SyncProgress
from tests.sync_support import rows, write

LONG = "\n\n".join(
    " ".join(f"Paragraph {p} sentence {s} tells about apples and pears." for s in range(6)) for p in range(12)
)
SHORT = "A short note about plums.\n"


@pytest.fixture
def coll(store, collection_name):  # type: ignore[no-untyped-def]
    store.create_collection(collection_name)
    return collection_name


def layouts(store: Store, collection: str) -> dict[str, tuple[Any, ...]]:
    """``{source: (chunk_count, chunk_size, chunk_overlap, chunker_version)}`` as stored."""
    with store.engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT d.source, d.chunk_count, d.chunk_size, d.chunk_overlap, d.chunker_version"
                " FROM agentrag.documents d JOIN agentrag.collections k ON k.id = d.collection_id"
                " WHERE k.name = :n"
            ),
            {"n": collection},
        ).all()
    return {source: tuple(rest) for source, *rest in found}


def fresh(store: Store, coll: str, folder: Path, **options: Any) -> dict[str, Any]:
    """The rows a fresh ingest of ``folder`` gives (same collection name: the same ids)."""
    store.delete_collection(coll)
    store.create_collection(coll)
    assert store.ingest(folder, collection=coll, **options).ok
    return rows(store, coll)


def test_ingest_records_the_layout(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store.ingest_text(LONG, source="t.md", collection=coll, chunk_size=500, chunk_overlap=50)
    write(tmp_path, "f.md", SHORT)
    store.ingest(tmp_path, collection=coll)
    found = layouts(store, coll)
    assert found["t.md"][1:] == (500, 50, CHUNKER_VERSION)
    assert found["f.md"][1:] == (1000, 150, CHUNKER_VERSION)  # the defaults


def test_a_new_chunk_size_rechunks_unchanged_files_as_a_fresh_ingest(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "long.md", LONG)
    write(src, "short.md", SHORT)
    first = store.sync(src, collection=coll, chunk_size=400)
    before = layouts(store, coll)
    assert first.added == ("long.md", "short.md") and before["long.md"][:2] == (before["long.md"][0], 400)

    same = store.sync(src, collection=coll, chunk_size=400)  # the same settings: nothing read
    assert same.read == 0 and same.unchanged == ("long.md", "short.md") and not same.changed

    dry = store.sync(src, collection=coll, chunk_size=900, dry_run=True)
    assert dry.rechunked == ("long.md",) and layouts(store, coll) == before  # nothing written

    report = store.sync(src, collection=coll, chunk_size=900)
    assert report.rechunked == ("long.md",) and report.read == 2
    assert (report.added, report.modified, report.deleted) == ((), (), ())
    assert report.unchanged == ("short.md",)  # one chunk either way: only the layout recorded
    assert "1 rechunked" in str(report) and "  rechunked: long.md" in str(report)
    assert report.to_dict()["rechunked"] == ["long.md"]
    after = layouts(store, coll)
    assert after["long.md"][0] < before["long.md"][0] and after["long.md"][1] == 900
    assert after["short.md"] == (1, 900, 150, CHUNKER_VERSION)
    assert 0 < report.chunks_embedded <= after["long.md"][0]
    assert report.document_ids["long.md"] == first.document_ids["long.md"]  # the same document

    settled = store.sync(src, collection=coll, chunk_size=900)
    assert settled.read == 0 and not settled.changed
    assert rows(store, coll) == fresh(store, coll, src, chunk_size=900)  # chunk for chunk, vectors too


def test_grants_metadata_and_revisions_survive_a_rechunk(store, collection_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store.create_collection(collection_name, acl=True)
    src = tmp_path / "src"
    write(src, "doc.md", "---\ntitle: Kept\n---\n" + LONG)
    write(src, "doc.md.grants", "group:hr\n")
    first = store.sync(src, collection=collection_name, chunk_size=400)
    doc_id = first.document_ids["doc.md"]
    admin = ar.Scope(principal=ar.Principal(admin=True))
    before = store.document(doc_id, scope=admin)
    [revision] = store.revisions(doc_id, scope=admin)
    report = store.sync(src, collection=collection_name, chunk_size=900)
    assert report.rechunked == ("doc.md",) and report.document_ids["doc.md"] == doc_id
    after = store.document(doc_id, scope=admin)
    assert after.metadata == before.metadata and after.metadata["title"] == "Kept"
    with store.engine.connect() as conn:
        grants = conn.execute(
            text("SELECT grants FROM agentrag.documents WHERE id = :id"), {"id": doc_id}
        ).scalar()
    assert grants == ["g:hr"]  # as stored
    [current] = store.revisions(doc_id, scope=admin)  # no new revision: the text did not change
    assert (current.lineage, current.revision, current.valid_to) == (revision.lineage, 1, None)
    assert current.chunk_count == layouts(store, collection_name)["doc.md"][0] < revision.chunk_count
    hr = ar.Scope(principal=ar.Principal(user="ann", groups=["hr"]))
    assert {h.source for h in store.search("apples", collections=collection_name, scope=hr).hits} == {
        "doc.md"
    }
    nobody = ar.Scope(principal=ar.Principal(user="bob"))
    assert not store.search("apples", collections=collection_name, scope=nobody).hits


def test_a_bumped_chunker_version_rechunks_only_files_chunked_otherwise(  # type: ignore[no-untyped-def]
    store, coll, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    write(src, "long.md", LONG)
    write(src, "short.md", SHORT)
    store.sync(src, collection=coll, chunk_size=400)
    monkeypatch.setattr("agentrag.store.sync_layout.CHUNKER_VERSION", 99)
    monkeypatch.setattr("agentrag.store.ingest.CHUNKER_VERSION", 99)
    # the new chunker's rule: cut at any whitespace, never prefer a paragraph or sentence end
    monkeypatch.setattr("agentrag.readers.chunking._BREAKS", (re.compile(r"\s"),))
    report = store.sync(src, collection=coll, chunk_size=400)
    assert report.rechunked == ("long.md",) and report.unchanged == ("short.md",)
    assert {k: v[1:] for k, v in layouts(store, coll).items()} == {
        "long.md": (400, 150, 99),
        "short.md": (400, 150, 99),
    }
    assert store.sync(src, collection=coll, chunk_size=400).read == 0
    assert rows(store, coll) == fresh(store, coll, src, chunk_size=400)


def test_a_bumped_version_with_the_same_chunks_embeds_nothing(  # type: ignore[no-untyped-def]
    store, coll, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_embedder
) -> None:
    src = tmp_path / "src"
    write(src, "long.md", LONG)
    store.sync(src, collection=coll)
    before = rows(store, coll)
    monkeypatch.setattr("agentrag.store.sync_layout.CHUNKER_VERSION", CHUNKER_VERSION + 1)
    calls = len(fake_embedder.calls)
    report = store.sync(src, collection=coll)
    assert report.read == 1 and report.unchanged == ("long.md",) and not report.changed
    assert len(fake_embedder.calls) == calls and report.chunks_embedded == 0
    assert layouts(store, coll)["long.md"][1:] == (1000, 150, CHUNKER_VERSION + 1)
    assert rows(store, coll)["chunks"] == before["chunks"]


def test_rows_of_unknown_layout_are_read_once_and_rechunked_only_if_they_differ(
    store, coll, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "a.md", LONG)
    write(src, "b.md", LONG.replace("apples", "cherries"))
    store.sync(src, collection=coll, chunk_size=400)
    with store.engine.begin() as conn:  # as migration 0054 leaves the rows written before it
        conn.execute(
            text(
                "UPDATE agentrag.documents"
                " SET chunk_size = NULL, chunk_overlap = NULL, chunker_version = NULL"
            )
        )
    same = store.sync(src, collection=coll, chunk_size=400)
    assert same.read == 2 and same.unchanged == ("a.md", "b.md") and same.chunks_embedded == 0
    assert {v[1] for v in layouts(store, coll).values()} == {400}
    assert store.sync(src, collection=coll, chunk_size=400).read == 0
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE agentrag.documents SET chunk_size = NULL WHERE source = 'b.md'"))
    other = store.sync(src, collection=coll, chunk_size=700)
    assert other.rechunked == ("a.md", "b.md")


def test_the_migration_upgrades_a_release_and_its_next_sync_records_the_layout(tmp_path: Path) -> None:
    """The last release's database (tests/fixtures/upgrade): after the upgrade its documents have
    an unknown layout (NULL); the next sync of its synced folder reads each file once, rewrites
    nothing it need not, and records the layout, so the sync after it reads nothing."""
    import shutil

    from agentrag.testing import FakeEmbedder
    from tests.conftest import REPO, fresh_database
    from tests.fixtures.upgrade import EMBEDDER_DIMENSIONS, FIXTURES, restore

    release = sorted(p.name.removesuffix(".sql.gz") for p in FIXTURES.glob("*.sql.gz"))[-1]
    with fresh_database("agentrag_layout") as url:
        restore(FIXTURES / f"{release}.sql.gz", url)
        store = Store(url, embedder=FakeEmbedder(dimensions=EMBEDDER_DIMENSIONS), migrate=True)
        try:
            with store.engine.connect() as conn:
                known = conn.execute(
                    text("SELECT count(*), count(chunk_size), count(chunker_version) FROM agentrag.documents")
                ).one()
            assert known[0] > 0 and known[1:] == (0, 0)  # existing rows: layout unknown
            stored = {d.source for d in store.documents("handbook")}
            folder = tmp_path / "handbook"  # the fixture's synced folder (make_upgrade_fixture.py)
            shutil.copytree(REPO / "samples" / "product_docs", folder)
            for extra in sorted(folder.iterdir())[4:]:
                extra.unlink()
            report = store.sync(folder, collection="handbook")
            assert report.ok and (report.added, report.modified, report.deleted) == ((), (), ())
            assert set(report.unchanged) | set(report.rechunked) == stored and report.read == len(stored)
            assert {v[1:] for v in layouts(store, "handbook").values()} == {(1000, 150, CHUNKER_VERSION)}
            assert store.sync(folder, collection="handbook").read == 0
        finally:
            store.close()


@pytest.mark.parametrize("vector_type", ["vector", "halfvec"])
def test_a_chunk_whose_text_did_not_change_keeps_its_vector(  # type: ignore[no-untyped-def]
    store, collection_name, tmp_path: Path, fake_embedder, vector_type: str
) -> None:
    coll = collection_name
    store.create_collection(coll, vector_type=vector_type)
    src = tmp_path / "src"
    opening = " ".join(f"Opening sentence {i} about the harvest." for i in range(22))  # ~850 characters
    write(src, "doc.md", opening + "\n\n" + LONG)
    store.sync(src, collection=coll, chunk_overlap=150)
    before = len(fake_embedder.calls)
    report = store.sync(src, collection=coll, chunk_overlap=100)  # the first chunk ends where it did
    assert report.rechunked == ("doc.md",)
    embedded = [t for call in fake_embedder.calls[before:] for t in call]
    count = layouts(store, coll)["doc.md"][0]
    assert opening.strip() not in [t.strip() for t in embedded]  # its vector was read back
    assert report.chunks_embedded == len(embedded) == count - 1
    synced = rows(store, coll)
    assert synced["chunks"][0][8 if vector_type == "halfvec" else 7] is not None
    store.delete_collection(coll)
    store.create_collection(coll, vector_type=vector_type)
    assert store.ingest(src, collection=coll, chunk_overlap=100).ok
    assert synced == rows(store, coll)  # chunk for chunk: the reused vector is exact


def test_a_sync_killed_after_a_rechunk_converges(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "long.md", LONG)
    store.sync(src, collection=coll, chunk_size=400)

    def die(event: SyncProgress) -> None:
        if event.step == "rechunked":
            raise KeyboardInterrupt  # killed after the rechunk's commit, before its state row

    with pytest.raises(KeyboardInterrupt):
        store.sync(src, collection=coll, chunk_size=900, on_progress=die)
    again = store.sync(src, collection=coll, chunk_size=900)
    assert again.read == 1 and again.unchanged == ("long.md",) and again.chunks_embedded == 0
    assert store.sync(src, collection=coll, chunk_size=900).read == 0
    assert rows(store, coll) == fresh(store, coll, src, chunk_size=900)


def test_a_bulk_rechunk_rebuilds_the_vector_index_even_when_it_fails(  # type: ignore[no-untyped-def]
    store, coll, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentrag.store import sync_layout
    from agentrag.store.collections import find_collection
    from agentrag.store.vector_index import index_exists

    src = tmp_path / "src"
    write(src, "long.md", LONG)
    store.sync(src, collection=coll, chunk_size=400)
    collection = find_collection(store.engine, coll)
    assert index_exists(store, collection)
    dropped: list[bool] = []
    real_bulk = sync_layout._bulk

    def watched(*args: Any) -> bool:
        dropped.append(real_bulk(*args))
        return dropped[-1]

    monkeypatch.setattr(sync_layout, "_bulk", watched)

    def broken(*args: Any) -> list[str]:
        raise RuntimeError("the write failed")

    with monkeypatch.context() as patch:
        patch.setattr(sync_layout, "_replace_chunks", broken)
        with pytest.raises(RuntimeError, match="the write failed"):
            store.sync(src, collection=coll, chunk_size=900, bulk=True)
    assert dropped == [True] and index_exists(store, collection)  # dropped, and built again
    report = store.sync(src, collection=coll, chunk_size=900, bulk=True)
    assert report.rechunked == ("long.md",) and dropped == [True, True] and index_exists(store, collection)
    assert rows(store, coll) == fresh(store, coll, src, chunk_size=900)


def test_a_file_renamed_when_the_layout_changes_is_chunked_with_the_new_one(  # type: ignore[no-untyped-def]
    store, coll, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    write(src, "long.md", LONG)
    write(src, "short.md", SHORT)
    store.sync(src, collection=coll, chunk_size=400)
    (src / "long.md").rename(src / "moved.md")  # the same text under another name
    (src / "short.md").rename(src / "small.md")
    report = store.sync(src, collection=coll, chunk_size=900)
    # the long file's stored chunks are the old layout's: not moved, ingested afresh under its new name;
    # the short one's chunks are the same with either size: moved as before
    assert report.added == ("moved.md",) and report.deleted == ("long.md",), report
    assert report.renamed == (("short.md", "small.md"),), report
    assert layouts(store, coll)["moved.md"][1:] == (900, 150, CHUNKER_VERSION)
    synced = rows(store, coll)
    assert synced == fresh(store, coll, src, chunk_size=900)
