"""A reader registered after import (docs/how-to/new-format.md) is used by folder ingests and syncs:
the extensions a folder walk picks up are asked of the registry at each walk, not frozen at import."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# the folder walk is loaded before the reader is registered, as in a program that made a Store first
import agentrag.store.ingest  # noqa: F401
from agentrag.readers import Block, Extracted, Source, register, registry


class UpperReader:
    name = "upper-test"
    suffixes = (".uppertest",)
    extra = None

    def read(self, source: Source) -> Extracted:
        return Extracted([Block("text", source.read_text().upper())], reader=self.name)


@pytest.fixture
def upper_reader() -> Iterator[None]:
    register(UpperReader())
    try:
        yield
    finally:
        registry.READERS.pop(UpperReader.name, None)
        registry._BY_SUFFIX.pop(".uppertest", None)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "meeting.uppertest").write_text("the launch moves to march\n")
    return folder


def test_a_folder_ingest_reads_a_reader_registered_after_import(
    store: Any, collection_name: str, tmp_path: Path, upper_reader: None
) -> None:
    store.create_collection(collection_name)
    report = store.ingest(_folder(tmp_path), collection=collection_name, strict=True)
    assert report.added == ("meeting.uppertest",), report
    hit = store.search("launch", collections=collection_name, top_k=1)[0]
    assert hit.source == "meeting.uppertest" and "THE LAUNCH" in hit.text


def test_a_sync_reads_a_reader_registered_after_import(
    store: Any, collection_name: str, tmp_path: Path, upper_reader: None
) -> None:
    store.create_collection(collection_name)
    report = store.sync(_folder(tmp_path), collection=collection_name)
    assert report.added == ("meeting.uppertest",), report
