"""Ingest and sync never stop on one file (issue #37, F-2): a hostile file is a typed per-file
failure of the report, whatever the reader raised, and JSON nesting is bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentrag as ar
from agentrag.errors import FileTooLargeError, UnreadableFileError
from agentrag.readers import LIMITS, Extracted, Source, read


@pytest.fixture
def coll(store, collection_name):  # type: ignore[no-untyped-def]
    store.create_collection(collection_name)
    return collection_name


def _hostile_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "drop"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nThe reset link is on the login page.\n")
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "deep.jsonl").write_text('{"text": "fine"}\n' + "{" + '"a":{' * 50_000 + "}" * 50_001 + "\n")
    return folder


def test_deep_json_is_refused_naming_the_limit() -> None:
    deep = ("[" * (LIMITS.max_json_depth + 1) + "]" * (LIMITS.max_json_depth + 1)).encode()
    with pytest.raises(FileTooLargeError, match="max_json_depth") as caught:
        read(deep, name="deep.json")
    assert caught.value.source == "deep.json"
    at_limit = ("[" * LIMITS.max_json_depth + '"ok"' + "]" * LIMITS.max_json_depth).encode()
    assert "ok" in read(at_limit, name="fine.json").blocks[0].text
    # brackets inside strings are text, not nesting
    quoted = b'{"text": "' + b"[" * 10_000 + b'"}'
    assert read(quoted, name="quoted.json").blocks[0].text == "[" * 10_000


def test_ingest_reports_the_hostile_files_and_writes_the_others(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = store.ingest(_hostile_folder(tmp_path), collection=coll)
    assert report.added == ("good.md",)
    assert report.error_types == {"deep.json": "FileTooLargeError", "deep.jsonl": "FileTooLargeError"}


def test_sync_reports_the_hostile_files_and_writes_the_others(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = store.sync(_hostile_folder(tmp_path), collection=coll)
    assert report.added == ("good.md",)
    assert [key for key, _message in report.failed] == ["deep.json", "deep.jsonl"]
    assert all("max_json_depth" in message for _key, message in report.failed)


class _Exploding:
    """A reader whose library fails in ways no reader anticipates."""

    name, suffixes, extra = "exploding", (".boom",), None

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def read(self, source: Source) -> Extracted:
        raise self.error


@pytest.mark.parametrize(
    ("error", "typed", "says"),
    [
        (RecursionError("maximum recursion depth exceeded"), FileTooLargeError, "nested too deeply"),
        (MemoryError(), FileTooLargeError, "out of memory"),
        (KeyError("/Root"), UnreadableFileError, "KeyError"),
    ],
)
def test_any_reader_failure_is_a_typed_failure_of_its_file(
    error: BaseException, typed: type[Exception], says: str
) -> None:
    with pytest.raises(typed, match=says) as caught:
        read(b"anything", name="x.boom", reader=_Exploding(error))
    assert caught.value.source == "x.boom"  # type: ignore[attr-defined]


def test_a_reader_raising_memory_error_fails_its_file_only(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "good.md").write_text("Fine text.\n")
    (tmp_path / "bad.boom").write_text("boom")
    files = [tmp_path / "bad.boom", tmp_path / "good.md"]
    report = store.ingest(files, collection=coll, reader={".boom": _Exploding(MemoryError())})
    assert report.added == ("good.md",) and report.error_types == {"bad.boom": "FileTooLargeError"}


def test_a_file_that_cannot_be_opened_is_a_typed_failure(tmp_path: Path) -> None:
    folder_named_like_a_file = tmp_path / "notes.md"  # opening it is an OSError (IsADirectoryError)
    folder_named_like_a_file.mkdir()
    with pytest.raises(UnreadableFileError, match="cannot be read") as caught:
        read(folder_named_like_a_file)
    assert caught.value.source == "notes.md"


def test_ingest_of_a_folder_refuses_a_link_out_of_it(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder, outside = tmp_path / "drop", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text("The payroll password is hunter2.\n")
    (folder / "good.md").write_text("# Good\n\nThe reset link is on the login page.\n")
    (folder / "link.md").symlink_to(outside / "secret.md")
    (folder / "inside.md").symlink_to(folder / "good.md")  # a link that stays inside is read
    report = store.ingest(folder, collection=coll)
    assert report.added == ("good.md", "inside.md")
    assert report.error_types == {"link.md": "UnreadableFileError"}
    assert "resolves outside the folder" in dict(report.failed)["link.md"]
    assert [d.source for d in store.documents(coll)] == ["good.md", "inside.md"]
    # a file named on its own is read where it points (the caller chose it)
    assert store.ingest(folder / "link.md", collection=coll).added == ("link.md",)


def test_ingest_of_a_folder_refuses_a_folder_swapped_for_a_link_out_before_the_read(
    store, coll, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The swap happens at the last moment there is: the first time anything resolves or opens the
    listed file (a check by path, then a read by path, would read the secret)."""
    import os
    import shutil

    folder, outside = tmp_path / "drop", tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    (folder / "sub" / "doc.md").write_text("# Doc\n\nThe listed file, inside the folder.\n")
    (outside / "doc.md").write_text("The payroll password is hunter2.\n")
    target, swapped = str(folder / "sub" / "doc.md"), []

    def swap() -> None:
        if not swapped:  # the folder on the file's path becomes a link out of the folder
            swapped.append(True)
            shutil.rmtree(folder / "sub")
            (folder / "sub").symlink_to(outside, target_is_directory=True)

    real_resolve, real_open = Path.resolve, os.open

    def resolve(self: Path, strict: bool = False) -> Path:
        resolved = real_resolve(self, strict=strict)
        if str(self) == target:
            swap()
        return resolved

    def open_(path, flags, mode=0o777, *, dir_fd=None):  # type: ignore[no-untyped-def]
        if os.fspath(path) == target:
            swap()
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(Path, "resolve", resolve)
    monkeypatch.setattr(os, "open", open_)
    report = store.ingest(folder, collection=coll)
    assert swapped, "the listed file was never opened"
    assert report.error_types == {"sub/doc.md": "UnreadableFileError"}
    assert "resolves outside the folder" in dict(report.failed)["sub/doc.md"]
    assert store.documents(coll) == []


def test_ingest_of_a_folder_fails_a_file_whose_grants_sidecar_links_out(store, coll, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder, outside = tmp_path / "drop", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (outside / "any.grants").write_text("group:everyone\n")
    (folder / "plan.md").write_text("# Plan\n\nThe hiring plan for Q3.\n")
    (folder / "plan.md.grants").symlink_to(outside / "any.grants")
    (folder / "memo.md").write_text("# Memo\n\nThe office moves in May.\n")
    (folder / "memo.md.grants").write_text("group:staff\n")
    store.create_collection("acl_" + coll, acl=True)
    report = store.ingest(folder, collection="acl_" + coll)
    assert report.added == ("memo.md",)
    assert report.error_types == {"plan.md": "UnreadableFileError"}
    assert "plan.md.grants: refused: it resolves outside the folder" in dict(report.failed)["plan.md"]
    admin = ar.Scope(principal=ar.Principal(admin=True))
    (memo,) = store.documents("acl_" + coll, scope=admin)
    assert store.grants(memo.id, scope=admin) == ["group:staff"]
