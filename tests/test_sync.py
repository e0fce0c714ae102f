"""store.sync against local folders on the real PostgreSQL (issue #24)."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentrag as ar
from tests.sync_support import rows, write


@pytest.fixture
def coll(store, collection_name):  # type: ignore[no-untyped-def]
    store.create_collection(collection_name)
    return collection_name


def test_add_modify_delete_rename_unchanged(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "a.md", "Alpha document about apples.\n")
    write(src, "b.md", "Beta document about bananas.\n")
    write(src, "sub/c.txt", "Gamma document about cherries.\n")
    first = store.sync(src, collection=coll)
    assert (first.added, first.modified, first.deleted, first.renamed) == (
        ("a.md", "b.md", "sub/c.txt"),
        (),
        (),
        (),
    )
    assert first.read == 3 and first.ok

    again = store.sync(src, collection=coll)
    assert again.unchanged == ("a.md", "b.md", "sub/c.txt") and not again.changed
    assert again.read == 0  # the pre-check: size + mtime as recorded, nothing read

    write(src, "a.md", "Alpha document about apricots now.\n")
    (src / "b.md").unlink()
    (src / "sub/c.txt").rename(src / "sub/renamed.txt")
    write(src, "d.md", "Delta document about dates.\n")
    report = store.sync(src, collection=coll)
    assert report.added == ("d.md",)
    assert report.modified == ("a.md",)
    assert report.deleted == ("b.md",)
    assert report.renamed == (("sub/c.txt", "sub/renamed.txt"),)
    assert report.chunks_embedded == 2  # a.md and d.md: the rename re-embedded nothing
    assert [d.source for d in store.documents(coll)] == ["a.md", "d.md", "sub/renamed.txt"]


def fresh_rows(store, coll: str, folder: Path) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """The rows a fresh ingest of ``folder`` gives, in a collection of the same name (same ids)."""
    store.delete_collection(coll)
    store.create_collection(coll)
    assert store.ingest(folder, collection=coll).ok
    return rows(store, coll)


def test_equals_a_fresh_ingest_chunk_for_chunk(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    long = " ".join(f"Sentence {i} of a longer document." for i in range(120))
    write(src, "long.md", long)
    write(src, "x.md", "---\ntitle: X\n---\nBody of x.\n")
    store.sync(src, collection=coll)
    (src / "long.md").rename(src / "moved/long.md") if (src / "moved").mkdir() is None else None
    write(src, "x.md", "---\ntitle: X2\n---\nBody of x.\n")  # metadata only: a new revision, same text
    report = store.sync(src, collection=coll)
    assert report.renamed == (("long.md", "moved/long.md"),) and report.modified == ("x.md",)
    assert report.chunks_embedded == 1
    synced = rows(store, coll)
    assert len(synced["chunks"]) > 3
    assert synced == fresh_rows(store, coll, src)


def test_a_file_that_fails_is_reported_and_the_others_go_on(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "good.md", "A good document.\n")
    write(src, "stored.md", "Stored before it broke.\n")
    store.sync(src, collection=coll)
    (src / "bad.txt").write_bytes(b"\xff\xfe not utf-8 \xff")
    (src / "stored.md").write_bytes(b"\xff broken now")
    write(src, "new.md", "A new document.\n")
    report = store.sync(src, collection=coll)
    assert report.added == ("new.md",)
    assert sorted(key for key, _why in report.failed) == ["bad.txt", "stored.md"]
    assert "not valid UTF-8" in report.failed[0][1] and "FAILED" in repr(report)
    stored = {d.source: d for d in store.documents(coll)}
    assert sorted(stored) == ["good.md", "new.md", "stored.md"]  # the broken file keeps its last revision
    assert store.document(stored["stored.md"].id).text == "Stored before it broke.\n"
    assert store.sync(src, collection=coll).read == 2  # failed files are read again next time


def test_dry_run_reports_and_writes_nothing(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "a.md", "Alpha.\n")
    write(src, "b.md", "Beta.\n")
    dry = store.sync(src, collection=coll, dry_run=True)
    assert dry.dry_run and dry.added == ("a.md", "b.md") and store.documents(coll) == []
    store.sync(src, collection=coll)
    before = rows(store, coll)
    write(src, "a.md", "Alpha changed.\n")
    (src / "b.md").rename(src / "c.md")
    write(src, "d.md", "Delta.\n")
    dry = store.sync(src, collection=coll, dry_run=True)
    assert (dry.added, dry.modified, dry.renamed) == (("d.md",), ("a.md",), (("b.md", "c.md"),))
    assert "dry run" in str(dry) and dry.chunks_embedded == 0
    assert rows(store, coll) == before


def test_delete_false_keeps_the_documents_of_vanished_files(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "a.md", "Alpha.\n")
    write(src, "b.md", "Beta.\n")
    store.sync(src, collection=coll)
    (src / "b.md").unlink()
    assert store.sync(src, collection=coll, delete=False).deleted == ()
    assert len(store.documents(coll)) == 2
    assert store.sync(src, collection=coll).deleted == ("b.md",)


def test_include_exclude_hidden_and_symlinks(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src, outside = tmp_path / "src", tmp_path / "outside"
    write(src, "docs/a.md", "Alpha.\n")
    write(src, "docs/draft-b.md", "Draft.\n")
    write(src, "notes/c.txt", "Notes.\n")
    write(src, ".hidden/d.md", "Hidden.\n")
    write(outside, "secret.md", "Outside the folder.\n")
    (src / "docs/link.md").symlink_to(outside / "secret.md")
    (src / "out").symlink_to(outside, target_is_directory=True)
    (src / "docs/inside.md").symlink_to(src / "notes/c.txt")
    report = store.sync(src, collection=coll, include=["docs/*"], exclude=["*draft*"])
    assert report.added == ("docs/a.md", "docs/inside.md")


def test_scopes_never_touch_another_scope(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    one, two = tmp_path / "one", tmp_path / "two"
    for folder in (one, two):
        write(folder, "same-key.md", f"Document of {folder.name}.\n")
        write(folder, "other.md", "Shared text.\n")
    store.sync(one, collection=coll, tenant="t1")
    store.sync(two, collection=coll, tenant="t2")
    (one / "same-key.md").unlink()
    (one / "other.md").unlink()
    report = store.sync(one, collection=coll, tenant="t1")
    assert report.deleted == ("other.md", "same-key.md")
    assert store.documents(coll, tenant="t1") == []
    assert [d.source for d in store.documents(coll, tenant="t2")] == ["other.md", "same-key.md"]


def test_bad_input_raises_typed_errors(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ar.errors.SyncSourceError, match="no such folder"):
        store.sync(tmp_path / "missing", collection=coll)
    write(tmp_path, "file.md", "x")
    with pytest.raises(ar.errors.SyncSourceError, match="not a folder"):
        store.sync(tmp_path / "file.md", collection=coll)
    with pytest.raises(ar.InvalidInputError, match="keep_revisions"):
        store.sync(tmp_path, collection=coll, keep_revisions=-1)
    with pytest.raises(ar.InvalidInputError, match="list of globs"):
        store.sync(tmp_path, collection=coll, include="*.md")  # type: ignore[arg-type]
    with pytest.raises(ar.CollectionNotFoundError):
        store.sync(tmp_path, collection="no_such_collection_x")
    with pytest.raises(TypeError):
        store.sync(tmp_path, collection=coll, delet=True)  # type: ignore[call-arg]


def test_revisions_keep_the_text_an_old_answer_quoted(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import hashlib

    src = tmp_path / "src"
    write(src, "policy.md", "Refunds are issued within 30 days of purchase.\n")
    store.sync(src, collection=coll)
    ctx = ar.new("When are refunds issued?", store=store, collections=[coll]) | ar.search() | ar.answer()
    old = ctx.proof().chunks[0]
    assert old.revision == 1
    write(src, "policy.md", "Refunds are issued within 14 days of purchase, by bank transfer.\n")
    assert store.sync(src, collection=coll).modified == ("policy.md",)

    quoted = store.document(old.doc_id, revision=old.revision)
    assert quoted.text is not None and quoted.text[old.start_char : old.end_char] == old.text
    assert hashlib.sha256(quoted.text.encode()).hexdigest() == old.source_sha256
    new = ar.new("When are refunds issued?", store=store, collections=[coll]) | ar.search()
    assert {(h.document_id, h.revision) for h in new.hits} == {(store.documents(coll)[0].id, 2)}
    assert [r.revision for r in store.revisions(old.doc_id)] == [1, 2]
    assert store.document(new.hits[0].document_id).revision == 2
    assert store.document(new.hits[0].document_id, revision=1).id == old.doc_id
    with pytest.raises(ar.DocumentNotFoundError, match="no revision 3"):
        store.document(old.doc_id, revision=3)


def test_keep_revisions_bounds_the_old_texts(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    for n in range(4):
        write(src, "a.md", f"Version {n} of the document.\n")
        store.sync(src, collection=coll)
    doc = store.documents(coll)[0]
    assert [r.revision for r in store.revisions(doc.id)] == [1, 2, 3, 4]
    write(src, "a.md", "Version 4 of the document.\n")
    assert store.sync(src, collection=coll, keep_revisions=1).revisions_pruned == 3
    assert [(r.revision, r.current) for r in store.revisions(doc.id)] == [(4, False), (5, True)]


def test_a_renamed_document_keeps_its_history(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "a.md", "First text.\n")
    store.sync(src, collection=coll)
    write(src, "a.md", "Second text.\n")
    store.sync(src, collection=coll)
    (src / "a.md").rename(src / "b.md")
    assert store.sync(src, collection=coll).renamed == (("a.md", "b.md"),)
    doc = store.documents(coll)[0]
    history = store.revisions(doc.id)
    assert [(r.revision, r.source, r.current) for r in history] == [
        (1, "a.md", False),
        (2, "a.md", False),
        (3, "b.md", True),
    ]
    assert store.document(doc.id, revision=1).text == "First text.\n"


def test_a_new_file_under_a_renamed_files_name_starts_its_own_history(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "a.md", "Text one: one sentence.\n")
    store.sync(src, collection=coll)
    (src / "a.md").rename(src / "moved-a.md")
    assert store.sync(src, collection=coll).renamed == (("a.md", "moved-a.md"),)
    write(src, "a.md", "Text one: one sentence.\n")  # a.md's old id again (ids come from the key)
    report = store.sync(src, collection=coll)
    assert report.ok and report.added == ("a.md",), report
    ids = report.document_ids
    assert [(r.revision, r.source, r.current) for r in store.revisions(ids["a.md"])] == [(1, "a.md", True)]
    assert [(r.revision, r.source, r.current) for r in store.revisions(ids["moved-a.md"])] == [
        (1, "a.md", False),
        (2, "moved-a.md", True),
    ]


def test_revisions_are_read_inside_a_scope_only(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "a.md", "Tenant one's first text.\n")
    store.sync(src, collection=coll, tenant="t1")
    write(src, "a.md", "Tenant one's second text.\n")
    store.sync(src, collection=coll, tenant="t1")
    doc = store.documents(coll, tenant="t1")[0]
    first = store.document(doc.id, revision=1, scope=ar.Scope(tenant="t1"))
    assert first.text == "Tenant one's first text.\n"
    with pytest.raises(ar.DocumentNotFoundError):
        store.document(doc.id, revision=1, scope=ar.Scope(tenant="t2"))
    assert [r.revision for r in store.revisions(doc.id, scope=ar.Scope(tenant="t1"))] == [1, 2]
    with pytest.raises(ar.DocumentNotFoundError):
        store.revisions(doc.id, scope=ar.Scope(tenant="t2"))


def test_renames_in_one_sync_each_keep_their_own_history(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "a.md", "---\ndate: 2024-01-02\nclassification: internal\n---\nAlpha text.\n")
    write(src, "b.md", "Beta first.\n")
    write(src, "c.md", "Gamma text, a longer one. " * 150)
    store.sync(src, collection=coll)
    write(src, "b.md", "Beta second.\n")
    store.sync(src, collection=coll)
    for key in ("a.md", "b.md", "c.md"):
        (src / key).rename(src / f"moved-{key}")
    report = store.sync(src, collection=coll)
    assert report.renamed == tuple((k, f"moved-{k}") for k in ("a.md", "b.md", "c.md"))
    assert report.chunks_embedded == 0
    docs = {d.source: d.id for d in store.documents(coll)}
    assert {k: [(r.revision, r.source, r.current) for r in store.revisions(i)] for k, i in docs.items()} == {
        "moved-a.md": [(1, "a.md", False), (2, "moved-a.md", True)],
        "moved-b.md": [(1, "b.md", False), (2, "b.md", False), (3, "moved-b.md", True)],
        "moved-c.md": [(1, "c.md", False), (2, "moved-c.md", True)],
    }
    assert store.document(docs["moved-b.md"], revision=1).text == "Beta first.\n"

    def columns() -> list[tuple[object, ...]]:
        from sqlalchemy import text

        with store.engine.connect() as conn:
            return [
                tuple(r)
                for r in conn.execute(
                    text(
                        "SELECT d.source, d.classification, d.doc_date::text FROM agentrag.documents d"
                        " JOIN agentrag.collections k ON k.id = d.collection_id WHERE k.name = :n"
                        " ORDER BY d.source"
                    ),
                    {"n": coll},
                )
            ]

    moved = columns()
    assert moved[0] == ("moved-a.md", "internal", "2024-01-02")
    synced = rows(store, coll)
    assert len(synced["chunks"]) > 3
    assert synced == fresh_rows(store, coll, src) and columns() == moved


def test_renames_in_an_acl_collection_take_each_new_files_grants(
    store, collection_name, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    src = tmp_path / "src"
    store.create_collection(collection_name, acl=True)
    write(src, "a.md", "---\ngrants: group:legal, user:zoe\n---\nAlpha contract terms.\n")
    write(src, "b.md", "Beta contract terms, granted to no one.\n")
    write(src, "c.md", "---\ngrants: group:sales\n---\nGamma contract terms.\n")
    store.sync(src, collection=collection_name)
    for key in ("a.md", "b.md", "c.md"):
        (src / key).rename(src / f"moved-{key}")
    report = store.sync(src, collection=collection_name)
    assert report.renamed == tuple((k, f"moved-{k}") for k in ("a.md", "b.md", "c.md"))

    def grants(name: str) -> dict[str, list[str] | None]:
        with store.engine.connect() as conn:
            found = conn.execute(
                text(
                    "SELECT d.source, d.grants, d.private FROM agentrag.documents d"
                    " JOIN agentrag.collections k ON k.id = d.collection_id WHERE k.name = :n"
                ),
                {"n": name},
            ).all()
        return {source: (sorted(g) if g is not None else None, private) for source, g, private in found}  # type: ignore[misc]

    fresh = collection_name + "_fresh"
    store.create_collection(fresh, acl=True)
    try:
        assert store.ingest(src, collection=fresh).ok
        assert grants(collection_name) == grants(fresh)
        assert grants(collection_name)["moved-b.md"][0] == []  # deny by default
    finally:
        store.delete_collection(fresh)
