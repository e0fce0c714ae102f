"""Chunking: exact offsets (property), overlap, sections and pages, Markdown tables cut between rows."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from agentrag.store.chunking import chunk_text
from agentrag.store.readers import parse_front_matter

texts = st.lists(
    st.sampled_from(
        [
            *"abc xyz.!?\n\t#é中🙂|",
            "\n\n",
            "# Head\n",
            ". ",
            "word ",
            "\r",
            "\n| A | B |\n|---|---|\n",
            "| x. y | z |\n",
        ]
    ),
    max_size=800,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=texts, size=st.integers(20, 400), overlap_frac=st.floats(0, 0.5))
def test_offsets_round_trip(text: str, size: int, overlap_frac: float) -> None:
    overlap = int(size * overlap_frac)
    chunks = chunk_text(text, size=size, overlap=overlap)
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert text[chunk.start_char : chunk.end_char] == chunk.text
        assert chunk.text.strip() == chunk.text and chunk.text
        assert len(chunk.text) <= size
    # starts strictly increase and together the chunks cover every non-space character
    assert all(a.start_char < b.start_char for a, b in itertools.pairwise(chunks))
    covered = set()
    for c in chunks:
        covered.update(range(c.start_char, c.end_char))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_overlap_repeats_text_between_neighbours() -> None:
    text = " ".join(f"word{i}" for i in range(400))
    chunks = chunk_text(text, size=200, overlap=50)
    assert len(chunks) > 5
    for a, b in itertools.pairwise(chunks):
        assert b.start_char < a.end_char  # they overlap
        assert a.end_char - b.start_char <= 60


def test_sections_follow_nearest_heading_and_ignore_code_fences() -> None:
    text = (
        "# Intro\n"
        + "alpha " * 60
        + "\n\n## Limits\n"
        + "beta " * 60
        + "\n```\n# not a heading\n```\n"
        + "gamma " * 40
    )
    chunks = chunk_text(text, size=200, overlap=0)
    assert chunks[0].section == "Intro"
    limits_at = text.index("## Limits")
    after = [c for c in chunks if c.start_char >= limits_at]
    assert after and all(c.section == "Limits" for c in after)


def test_pages_from_page_starts() -> None:
    pages = ["first page " * 30, "second page " * 30, "third " * 30]
    text = "\n\n".join(pages)
    starts = [0, len(pages[0]) + 2, len(pages[0]) + len(pages[1]) + 4]
    chunks = chunk_text(text, size=150, overlap=0, page_starts=starts)
    assert chunks[0].page == 1 and chunks[-1].page == 3
    for c in chunks:
        assert c.page == sum(1 for s in starts if s <= c.start_char)


def test_front_matter_is_split_from_body() -> None:
    meta, body = parse_front_matter("---\ntitle: A\ntags: x, y\n---\n# A\n")
    assert meta == {"title": "A", "tags": ["x", "y"]} and body == "# A\n"
    meta, body = parse_front_matter("---\nnot front matter at all\n---\nbody")
    assert meta == {} and body.startswith("---")


# ---- Markdown tables in prose (session 17) ------------------------------------------------------------
HEADER = "| Plan | Seats | SSO |\n|---|---|---|"
TABLE = (
    "# Plans\n\nWhat each plan includes.\n\n"
    + HEADER
    + "\n"
    + "".join(
        f"| Plan {i} with a longer name | {i * 10} seats. Then more words | {'Yes' if i % 2 else 'No'} |\n"
        for i in range(40)
    )
    + "\nAfter the table, prose again. "
    + "word " * 80
)


def test_a_markdown_table_is_cut_between_rows_and_its_header_travels_in_the_locator() -> None:
    chunks = chunk_text(TABLE, size=400, overlap=60)
    body = TABLE.index("| Plan 0 ")
    end = TABLE.index("\nAfter the table")
    inside = [c for c in chunks if c.start_char < end and c.end_char > body]
    assert len(inside) > 3
    for c in inside:
        lines = [line for line in c.text.split("\n") if line.startswith("|")]
        assert all(line.endswith("|") for line in lines), c.text  # whole rows only
        assert TABLE[c.start_char : c.end_char] == c.text  # the file's own text
        if c.start_char >= body:  # below the header: the header, as written, in the locator
            assert c.text.startswith("| Plan ") and c.locator["table_header"] == HEADER
        else:
            assert "table_header" not in (c.locator or {})
            assert not c.text.endswith(("| SSO |", "|---|")), c.text  # a header stays with a row
    assert chunks[-1].locator == {"section": ["Plans"]}  # prose after the table: no header


def test_a_table_that_fits_is_not_cut() -> None:
    text = "Intro.\n\n" + HEADER + "\n| Team | 50 | No |\n| Business | 1,000 | Yes |\n\n" + "tail " * 60
    chunks = chunk_text(text, size=150, overlap=20)
    assert any(HEADER in c.text and c.text.rstrip().endswith("| Business | 1,000 | Yes |") for c in chunks)


def test_pipes_in_plain_text_or_a_code_fence_are_not_a_table() -> None:
    fence = "```\n" + HEADER + "\n" + "| a | b | c |\n" * 40 + "```\n"
    assert all("table_header" not in (c.locator or {}) for c in chunk_text(fence, size=200, overlap=20))
    plain = "| a | b |\n" * 60  # no rule under a header line
    assert all(c.locator is None for c in chunk_text(plain, size=200, overlap=20))
