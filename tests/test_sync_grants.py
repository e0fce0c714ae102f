"""store.sync and grants (issue #26): a file's ``<file>.grants`` sidecar and its front matter
decide its document's grants on every sync, as they do at ingest. A changed sidecar (the file
itself unchanged) changes only the grants: no re-embedding, no new revision, the same chunks; a
deleted sidecar leaves the document with no grants (deny by default); the sidecar is never a
document of its own. Real PostgreSQL; only the embedder is faked."""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

import agentrag as ar
from agentrag.store.store import Store
from tests.sync_support import OLD, rows

# revisions of an acl=True collection are read as the documents are: with a principal (issue #37)
ADMIN = ar.Scope(principal=ar.Principal(admin=True))

_STAMPS = itertools.count(1)


def put(folder: Path, key: str, body: str) -> Path:
    """Write ``key``; each write gets a new mtime far before any listing (the pre-check trusts it)."""
    path = folder / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    stamp = OLD + next(_STAMPS) * 1_000_000
    os.utime(path, ns=(stamp, stamp))
    return path


def grants_of(store: Store, collection: str) -> dict[str, list[str] | None]:
    """``{source: grants as stored}`` of a collection's documents (read as the database has them)."""
    with store.engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT d.source, d.grants FROM agentrag.documents d"
                " JOIN agentrag.collections k ON k.id = d.collection_id WHERE k.name = :n"
            ),
            {"n": collection},
        ).all()
    return {source: None if g is None else sorted(g) for source, g in found}


def who(user: str | None = None, *groups: str, admin: bool = False) -> ar.Scope:
    return ar.Scope(principal=ar.Principal(user=user, groups=list(groups), admin=admin))


def found(store: Store, collection: str, scope: ar.Scope) -> set[str | None]:
    return {h.source for h in store.search("contract", collections=collection, top_k=10, scope=scope).hits}


@pytest.fixture
def acl(store: Store, collection_name: str) -> str:
    store.create_collection(collection_name, acl=True)
    return collection_name


def test_a_sidecar_applies_on_the_first_sync_and_is_never_a_document(
    store: Store, acl: str, tmp_path: Path
) -> None:
    put(tmp_path, "a.md", "Alpha contract terms.\n")
    put(tmp_path, "a.md.grants", "# the sales team\ngroup:sales\nuser:zoe\n")
    put(tmp_path, "b.md", "Beta contract terms, granted to no one.\n")
    put(tmp_path, "c.bin.grants", "group:sales\n")  # the sidecar of no document: ignored
    report = store.sync(tmp_path, collection=acl, include=["*"])
    assert report.ok and report.added == ("a.md", "b.md")
    assert grants_of(store, acl) == {"a.md": ["g:sales", "u:zoe"], "b.md": []}
    assert found(store, acl, who(None, "sales")) == {"a.md"}
    assert found(store, acl, who("bob")) == set()
    assert found(store, acl, who(admin=True)) == {"a.md", "b.md"}
    again = store.sync(tmp_path, collection=acl)
    assert again.read == 0 and again.unchanged == ("a.md", "b.md")  # sidecars pass the pre-check too


def test_a_changed_sidecar_changes_only_the_grants(store: Store, acl: str, tmp_path: Path) -> None:
    put(tmp_path, "a.md", "Alpha contract terms. " * 40)
    put(tmp_path, "a.md.grants", "group:sales\n")
    put(tmp_path, "b.md", "Beta contract terms.\n")
    store.sync(tmp_path, collection=acl)
    before = rows(store, acl)
    doc_id = dict((d[0], d[1]) for d in before["documents"])["a.md"]

    put(tmp_path, "a.md.grants", "group:legal\n")  # the file itself untouched
    report = store.sync(tmp_path, collection=acl)
    assert report.regranted == ("a.md",) and not report.modified and not report.added
    assert report.chunks_embedded == 0 and report.read == 1 and report.document_ids["a.md"] == doc_id
    assert report.changed and "1 regranted" in str(report) and report.to_dict()["regranted"] == ["a.md"]
    assert grants_of(store, acl) == {"a.md": ["g:legal"], "b.md": []}
    after = rows(store, acl)
    assert after["chunks"] == before["chunks"]  # the same chunk rows and vectors: nothing re-embedded
    assert [(r.revision, r.document_id) for r in store.revisions(doc_id, scope=ADMIN)] == [(1, doc_id)]
    assert found(store, acl, who(None, "legal")) == {"a.md"}
    assert found(store, acl, who(None, "sales")) == set()
    assert store.sync(tmp_path, collection=acl).read == 0  # recorded: the next run reads nothing

    (tmp_path / "a.md.grants").unlink()  # deny by default: an admin's only
    report = store.sync(tmp_path, collection=acl)
    assert report.regranted == ("a.md",) and report.chunks_embedded == 0 and not report.deleted
    assert grants_of(store, acl) == {"a.md": [], "b.md": []}
    assert found(store, acl, who(None, "legal", "sales")) == set()
    assert found(store, acl, who(admin=True)) == {"a.md", "b.md"}
    assert rows(store, acl)["chunks"] == before["chunks"]
    assert [r.revision for r in store.revisions(doc_id, scope=ADMIN)] == [1]

    synced = rows(store, acl)  # what a fresh ingest of the folder writes: the same rows
    store.delete_collection(acl)
    store.create_collection(acl, acl=True)
    assert store.ingest(tmp_path, collection=acl).ok
    assert rows(store, acl) == synced


def test_front_matter_grants_through_sync(store: Store, acl: str, tmp_path: Path) -> None:
    put(tmp_path, "a.md", "---\ngrants: group:legal, user:zoe\n---\nAlpha contract terms.\n")
    put(tmp_path, "b.md", "---\ngrants: group:legal\n---\nBeta contract terms.\n")
    put(tmp_path, "b.md.grants", "group:sales\n")  # the sidecar over the front matter, as at ingest
    store.sync(tmp_path, collection=acl)
    assert grants_of(store, acl) == {"a.md": ["g:legal", "u:zoe"], "b.md": ["g:sales"]}
    doc_id = store.sync(tmp_path, collection=acl).document_ids["a.md"]

    put(tmp_path, "a.md", "---\ngrants: user:zoe\n---\nAlpha contract terms.\n")  # grants only
    (tmp_path / "b.md.grants").unlink()  # back to the front matter's
    report = store.sync(tmp_path, collection=acl)
    assert report.regranted == ("a.md", "b.md") and report.chunks_embedded == 0
    assert report.document_ids["a.md"] == doc_id and [
        r.revision for r in store.revisions(doc_id, scope=ADMIN)
    ] == [1]
    assert grants_of(store, acl) == {"a.md": ["u:zoe"], "b.md": ["g:legal"]}

    put(tmp_path, "a.md", "---\ngrants: user:zoe\ntitle: A\n---\nAlpha contract terms.\n")  # more than grants
    report = store.sync(tmp_path, collection=acl)
    assert report.modified == ("a.md",) and not report.regranted  # a new revision, as before


def test_the_syncs_own_metadata_grants_win(store: Store, acl: str, tmp_path: Path) -> None:
    put(tmp_path, "a.md", "Alpha contract terms.\n")
    put(tmp_path, "a.md.grants", "group:sales\n")
    store.sync(tmp_path, collection=acl, metadata={"grants": ["user:ann"]})
    assert grants_of(store, acl) == {"a.md": ["u:ann"]}


def test_a_sidecar_on_a_collection_without_acl_fails_that_file(
    store: Store, collection_name: str, tmp_path: Path
) -> None:
    store.create_collection(collection_name)
    put(tmp_path, "a.md", "Alpha contract terms.\n")
    put(tmp_path, "b.md", "Beta contract terms.\n")
    store.sync(tmp_path, collection=collection_name)
    put(tmp_path, "a.md.grants", "group:sales\n")
    report = store.sync(tmp_path, collection=collection_name)
    assert [key for key, _why in report.failed] == ["a.md"] and "acl=True" in report.failed[0][1]
    assert grants_of(store, collection_name) == {"a.md": None, "b.md": None}  # left as stored


def test_a_bad_sidecar_fails_that_file_and_keeps_its_grants(store: Store, acl: str, tmp_path: Path) -> None:
    put(tmp_path, "a.md", "Alpha contract terms.\n")
    put(tmp_path, "a.md.grants", "group:sales\n")
    store.sync(tmp_path, collection=acl)
    put(tmp_path, "a.md.grants", "sales team\n")
    report = store.sync(tmp_path, collection=acl)
    assert [key for key, _why in report.failed] == ["a.md"] and "group:" in report.failed[0][1]
    assert grants_of(store, acl) == {"a.md": ["g:sales"]}
    (tmp_path / "a.md.grants").write_bytes(b"group:\xff\n")
    report = store.sync(tmp_path, collection=acl)
    assert [key for key, _why in report.failed] == ["a.md"] and "UTF-8" in report.failed[0][1]
    assert grants_of(store, acl) == {"a.md": ["g:sales"]}


GRANTS = st.lists(
    st.sampled_from(["user:ann", "user:bob", "group:hr", "group:sales", "everyone"]), max_size=3
)
# (which file, its sidecar's grants or None: no sidecar, whether the file is rewritten with its text)
EDIT = st.tuples(st.integers(0, 2), st.none() | GRANTS, st.booleans())


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(EDIT, max_size=4), min_size=1, max_size=4))
def test_random_sidecar_edits_the_grants_equal_the_sidecars(
    store: Store, tmp_path_factory: Any, runs: list[list[tuple[int, list[str] | None, bool]]]
) -> None:
    from agentrag.scope import grant_token

    folder = tmp_path_factory.mktemp("edits")
    name = f"c_{uuid.uuid4().hex[:10]}"
    store.create_collection(name, acl=True)
    sidecars: dict[str, list[str] | None] = {}
    try:
        for number in range(3):
            put(folder, f"f{number}.md", f"Document {number} of the contract.\n")
            sidecars[f"f{number}.md"] = None
        for edits in runs:
            for number, grants, touch in edits:
                key = f"f{number}.md"
                if touch:  # the file rewritten with the same text: read again, unchanged
                    put(folder, key, f"Document {number} of the contract.\n")
                sidecar = folder / f"{key}.grants"
                if grants is None:
                    sidecar.unlink(missing_ok=True)
                else:
                    put(folder, f"{key}.grants", "".join(f"{g}\n" for g in grants))
                sidecars[key] = grants
            report = store.sync(folder, collection=name)
            assert report.ok and report.chunks_embedded in (0, 3) and not report.modified
            expected = {key: sorted({grant_token(g) for g in (g or [])}) for key, g in sidecars.items()}
            assert grants_of(store, name) == expected
        assert store.sync(folder, collection=name).read == 0
    finally:
        store.delete_collection(name)


def test_a_regranting_sync_killed_at_every_step_converges(store: Store, acl: str, tmp_path: Path) -> None:
    from tests.test_sync_concurrency import Killed, Killer

    def version(n: int) -> None:
        for i in range(4):
            put(tmp_path, f"f{i}.md", f"File {i} of the contract.\n")
            put(tmp_path, f"f{i}.md.grants", "group:sales\n")
        if n == 2:
            put(tmp_path, "f0.md.grants", "group:legal\n")  # regranted
            (tmp_path / "f1.md.grants").unlink()  # regranted to none
            put(tmp_path, "f2.md", "File 2 of the contract, amended.\n")  # modified, its sidecar kept
            # front matter grants under a sidecar: the sidecar's still win, nothing changes
            put(tmp_path, "f3.md", "---\ngrants: user:zoe\n---\nFile 3 of the contract.\n")

    version(1)
    store.sync(tmp_path, collection=acl)
    version(2)
    events: list[str] = []
    report = store.sync(tmp_path, collection=acl, on_progress=lambda e: events.append(e.step))
    assert report.regranted == ("f0.md", "f1.md") and report.modified == ("f2.md",)
    assert "f3.md" in report.unchanged  # the same text, and its sidecar's grants still win
    assert "regranted" in events
    expected = (rows(store, acl), grants_of(store, acl))
    assert expected[1] == {"f0.md": ["g:legal"], "f1.md": [], "f2.md": ["g:sales"], "f3.md": ["g:sales"]}
    for stop_at in range(len(events)):
        store.delete_collection(acl)
        store.create_collection(acl, acl=True)
        version(1)
        store.sync(tmp_path, collection=acl)
        version(2)
        with pytest.raises(Killed):
            store.sync(tmp_path, collection=acl, on_progress=Killer(stop_at))
        assert store.sync(tmp_path, collection=acl).ok
        assert (rows(store, acl), grants_of(store, acl)) == expected, f"killed at {events[stop_at]}"
    store.delete_collection(acl)
    store.create_collection(acl, acl=True)
    assert store.ingest(tmp_path, collection=acl).ok  # and a fresh ingest writes the same rows
    assert (rows(store, acl), grants_of(store, acl)) == expected
