"""Sync opens files under its root without following a link out of it at any component (issue
#37 item 4, F-6). The race is made deterministic by sync's own progress hook: the "listed" event
comes after the listing and before any file is read, and the test swaps a folder for a link there."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import agentrag as ar
from agentrag.store.sync_report import SyncProgress
from tests.sync_support import write

SECRET = "Outside the synced folder: the payroll export.\n"


@pytest.fixture
def coll(store, collection_name):  # type: ignore[no-untyped-def]
    store.create_collection(collection_name)
    return collection_name


def _swap_after_listing(folder: Path, target: Path):  # type: ignore[no-untyped-def]
    def on_progress(event: SyncProgress) -> None:
        if event.step == "listed":  # listed, nothing read yet: the folder becomes a link out
            shutil.rmtree(folder)
            folder.symlink_to(target, target_is_directory=True)

    return on_progress


def _texts(store: ar.Store, coll: str) -> set[str | None]:
    return {store.document(d.id).text for d in store.documents(coll)}


def test_a_folder_swapped_for_a_link_out_between_listing_and_reading(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src, outside = tmp_path / "src", tmp_path / "outside"
    write(src, "kept.md", "Kept.\n")
    write(src, "team/a.md", "Alpha.\n")
    write(src, "team/a.md.grants", "group:team\n")
    write(outside, "a.md", SECRET)
    report = store.sync(src, collection=coll, on_progress=_swap_after_listing(src / "team", outside))
    assert report.added == ("kept.md",)
    assert [key for key, _ in report.failed] == ["team/a.md"]
    assert "outside the folder" in report.failed[0][1]
    assert SECRET not in _texts(store, coll)


def test_a_deeper_component_swapped_for_a_link_out(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src, outside = tmp_path / "src", tmp_path / "outside"
    write(src, "a/b/c/doc.md", "Inside.\n")
    write(outside, "c/doc.md", SECRET)
    report = store.sync(src, collection=coll, on_progress=_swap_after_listing(src / "a" / "b", outside))
    assert not report.added and [key for key, _ in report.failed] == ["a/b/c/doc.md"]
    assert SECRET not in _texts(store, coll)


def test_links_inside_the_folder_are_still_read(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write(src, "real/a.md", "Alpha inside.\n")
    (src / "alias").symlink_to(src / "real", target_is_directory=True)
    (src / "b.md").symlink_to(src / "real" / "a.md")
    report = store.sync(src, collection=coll)
    # (each real folder is walked once, by the first key reaching it: alias/ before real/)
    assert report.added == ("alias/a.md", "b.md") and not report.failed


def test_a_file_swapped_for_a_fifo_is_refused_without_blocking(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import os

    src = tmp_path / "src"
    write(src, "a.md", "Alpha.\n")

    def make_fifo(event: SyncProgress) -> None:
        if event.step == "listed":
            (src / "a.md").unlink()
            os.mkfifo(src / "a.md")

    report = store.sync(src, collection=coll, on_progress=make_fifo)
    assert [key for key, _ in report.failed] == ["a.md"] and "not a regular file" in report.failed[0][1]
