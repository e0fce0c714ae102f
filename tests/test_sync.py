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
    assert (first.added, first.modified, first.deleted, first.renamed) == (("a.md", "b.md", "sub/c.txt"), (), (), ())
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
