"""Markdown pipe tables in prose (a ``.md`` file, stored exactly as read): chunks are cut between rows, a
chunk that starts below a table's header carries it in its locator, and the answer step reads that chunk's
rows with it ("Plan: Business; SSO: Yes"), merged with a neighbour or not. Real PostgreSQL for the ingest."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from agentrag.evidence import units_of
from agentrag.extractive import extractive_answer
from agentrag.grounding import check_citations, pack_context
from tests.test_evidence import hit

HEADER = "| Plan | Seats | SSO |\n|---|---|---|"
PLANS = ["Free", "Team", "Business", "Enterprise"]
ROWS = "".join(
    f"| {p} | up to {10 ** (i + 1)} seats | {'Yes' if i > 1 else 'No'} |\n" for i, p in enumerate(PLANS)
)


def _below_header() -> Any:
    """A chunk that starts at the table's second row, below its header (as the chunker cuts a long table)."""
    text = ROWS.split("\n", 1)[1].rstrip("\n")
    return replace(hit(text, "chk_bbbbbbbbbbbbbbbb"), locator={"section": ["Plans"], "table_header": HEADER})


def test_a_chunks_rows_below_the_header_read_with_the_header_from_its_locator() -> None:
    rows = [u for u in units_of([_below_header()]) if u.kind == "row"]
    assert [u.text for u in rows] == [
        "Plan: Team; Seats: up to 100 seats; SSO: No",
        "Plan: Business; Seats: up to 1000 seats; SSO: Yes",
        "Plan: Enterprise; Seats: up to 10000 seats; SSO: Yes",
    ]
    answer = extractive_answer("Does the Business plan include SSO?", [_below_header()])
    assert (
        "| Plan | Seats | SSO |\n|---|---|---|\n| Business | up to 1000 seats | Yes [chk_bbbbbbbbbbbbbbbb] |"
        in answer
    )
    assert check_citations(answer, {"chk_bbbbbbbbbbbbbbbb"}).grounded
    # without the locator the same rows are headerless cells
    bare = [u.text for u in units_of([replace(_below_header(), locator=None)]) if u.kind == "row"]
    assert bare[1] == "Business: up to 1000 seats; Yes" and "SSO" not in " ".join(bare)


def test_a_merged_chunk_starting_below_the_header_keeps_it() -> None:
    """Adjacent chunks of one document are merged under the better-ranked one's id: the merged text starts
    with the other's rows, so the header of the one it starts with goes with it."""
    first = replace(_below_header(), rank=2, score=0.5)
    text = first.text + "\nAfter the table, prose."
    second = replace(
        hit("After the table, prose.", "chk_cccccccccccccccc"),
        start_char=len(first.text) + 1,
        end_char=len(text),
        locator={"section": ["Plans"]},
    )
    packed = pack_context([second, first], delimiter="SOURCE-0", estimate="chars/4")
    (merged,) = packed.hits
    assert merged.chunk_id == second.chunk_id and merged.locator == {
        "section": ["Plans"],
        "table_header": HEADER,
    }
    assert "Plan: Business; Seats: up to 1000 seats; SSO: Yes" in [u.text for u in units_of([merged])]


def test_an_ingested_markdown_file_keeps_its_text_and_its_long_tables_rows_their_header(
    store: Any, collection_name: str, tmp_path: Path
) -> None:
    rows = "".join(
        f"| Plan {i} | up to {i * 10} seats, billed yearly | {'Yes' if i % 3 else 'No'} |\n"
        for i in range(60)
    )
    text = "# Plans\n\nWhat each plan includes.\n\n" + HEADER + "\n" + rows + "\nPrices are per seat.\n"
    (tmp_path / "plans.md").write_text(text, encoding="utf-8")
    store.create_collection(collection_name)
    assert store.ingest(tmp_path, collection=collection_name, strict=True).ok
    (doc,) = store.documents(collection_name)
    assert store.document(doc.id).text == text  # the file as read
    hits = store.search("Plan 47 seats", collections=collection_name, mode="lexical", top_k=20).hits
    below = [h for h in hits if not h.text.startswith(("#", HEADER))]
    assert below and all((h.locator or {}).get("table_header") == HEADER for h in below)
    for h in below:
        assert all(
            u.text.startswith("Plan: Plan ") and "; SSO: " in u.text for u in units_of([h]) if u.kind == "row"
        )


def test_sync_rechunks_a_markdown_table_chunked_by_the_previous_chunker(
    store: Any, collection_name: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """CHUNKER_VERSION 2: a file with a long table, chunked by version 1 (pipe tables as prose), is
    re-chunked by the next sync; a file without one only has the new version recorded."""
    from agentrag.readers.chunking import CHUNKER_VERSION
    from tests.sync_support import rows
    from tests.test_sync_layout import fresh, layouts

    rows_md = "".join(f"| Plan {i} | up to {i * 10} seats. Billed yearly | No |\n" for i in range(60))
    src = tmp_path / "src"
    src.mkdir()
    (src / "plans.md").write_text("# Plans\n\n" + HEADER + "\n" + rows_md, encoding="utf-8")
    (src / "notes.md").write_text("# Notes\n\n" + "A note about plums. " * 80, encoding="utf-8")
    store.create_collection(collection_name)
    with monkeypatch.context() as old:  # version 1: no table rule
        old.setattr("agentrag.readers.chunking._tables", lambda text: [])
        old.setattr("agentrag.store.ingest.CHUNKER_VERSION", 1)
        store.sync(src, collection=collection_name)
    assert {v[-1] for v in layouts(store, collection_name).values()} == {1}
    report = store.sync(src, collection=collection_name)
    assert report.rechunked == ("plans.md",) and report.unchanged == ("notes.md",)
    assert {v[-1] for v in layouts(store, collection_name).values()} == {CHUNKER_VERSION}
    assert rows(store, collection_name) == fresh(store, collection_name, src)
