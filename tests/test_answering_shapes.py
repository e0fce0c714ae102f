"""The shapes the OpenAI endpoint, the MCP tools and the playground share: numbered citations (also
streamed in arbitrary pieces) and each answer sentence's supporting span in its chunk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentrag.server.answering import MarkerNumbering, numbered, sources, supporting_spans

ANSWER = (
    "Invoices are due in thirty days. [chk_aa01] Late payments accrue interest. [chk_bb02, chk_aa01] "
    "A heading: Refunds take a week. [chk_bb02]"
)
CHUNKS = [
    {
        "chunk_id": "chk_aa01",
        "doc_id": "doc_1",
        "collection": "c",
        "original_filename": "pay.md",
        "source": "/x/pay.md",
        "section": None,
        "page": None,
        "start_char": 100,
        "end_char": 180,
        "source_sha256": "f" * 64,
        "text": "Terms. Invoices are due in thirty days. Nothing else.",
    },
    {
        "chunk_id": "chk_bb02",
        "doc_id": "doc_2",
        "collection": "c",
        "original_filename": None,
        "source": "/x/late.md",
        "section": "Fees",
        "page": 2,
        "start_char": 0,
        "end_char": 60,
        "source_sha256": "e" * 64,
        "text": "Late payments accrue interest monthly. Refunds are processed within one week.",
    },
]


def test_markers_are_numbered_in_first_cited_order() -> None:
    text, order = numbered(ANSWER)
    assert order == ["chk_aa01", "chk_bb02"]
    assert text == (
        "Invoices are due in thirty days. [1] Late payments accrue interest. [2][1] "
        "A heading: Refunds take a week. [2]"
    )
    assert numbered(None) == ("", [])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(ANSWER)), max_size=12))
def test_a_stream_split_anywhere_numbers_as_the_whole(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    pieces = [ANSWER[a:b] for a, b in zip([0, *points], [*points, len(ANSWER)], strict=True)]
    numbering = MarkerNumbering()
    streamed = "".join(numbering.feed(p) for p in pieces) + numbering.flush()
    assert streamed == numbered(ANSWER)[0]
    assert "chk_" not in streamed


def test_an_unclosed_bracket_is_released_at_the_end() -> None:
    numbering = MarkerNumbering()
    assert numbering.feed("see [chk_a") == "see "
    assert numbering.flush() == "[chk_a"


def test_sources_follow_the_numbers_and_carry_locators() -> None:
    proof = {"chunks": CHUNKS}
    out = sources(proof, ["chk_bb02", "chk_aa01", "chk_missing"])
    assert [(s["n"], s["chunk_id"]) for s in out] == [(1, "chk_bb02"), (2, "chk_aa01")]
    assert out[0]["source"] == "/x/late.md" and out[1]["source"] == "pay.md"
    assert out[1]["revision"] == "f" * 64 and (out[1]["start_char"], out[1]["end_char"]) == (100, 180)


def test_supporting_spans_point_into_the_cited_chunk() -> None:
    spans = supporting_spans(ANSWER, CHUNKS)
    assert [s["index"] for s in spans] == [0, 1, 2]
    first, second, third = spans
    text = CHUNKS[0]["text"]
    assert first["exact"] and text[first["start"] : first["end"]] == "Invoices are due in thirty days."
    assert (first["doc_start"], first["doc_end"]) == (100 + first["start"], 100 + first["end"])
    # the first cited chunk of a group supports the sentence; a paraphrase finds its closest sentence
    assert second["chunk_id"] == "chk_bb02" and not second["exact"]
    late = CHUNKS[1]["text"]
    assert late[second["start"] : second["end"]] == "Late payments accrue interest monthly."
    assert late[third["start"] : third["end"]] == "Refunds are processed within one week."


def test_no_span_for_an_unknown_chunk_or_an_unrelated_sentence() -> None:
    assert supporting_spans("Something else entirely. [chk_ffff]", CHUNKS) == []
    assert supporting_spans("Zebras qqq. [chk_aa01]", CHUNKS) == []
    assert supporting_spans(None, CHUNKS) == []


def test_a_quote_from_a_merged_neighbour_is_found_there() -> None:
    neighbour = {
        **CHUNKS[0],
        "chunk_id": "chk_aa02",
        "start_char": 180,
        "text": "Receipts are emailed at once.",
    }
    spans = supporting_spans("Receipts are emailed at once. [chk_aa01]", [CHUNKS[0], neighbour, CHUNKS[1]])
    assert [(s["chunk_id"], s["exact"], s["doc_start"]) for s in spans] == [("chk_aa02", True, 180)]


def test_the_answer_steps_own_support_check_comes_first() -> None:
    """A sentence the answer step supported takes its span (document offsets -> chunk offsets)."""
    answer = "Late payments accrue interest. [chk_bb02]"
    checked = {
        "sentence": "Late payments accrue interest.",
        "chunk_id": "chk_bb02",
        "document_id": "doc_2",
        "start": 0,
        "end": 38,
        "text": "Late payments accrue interest monthly.",
        "score": 0.9,
        "supported": True,
        "method": "overlap",
    }
    (span,) = supporting_spans(answer, CHUNKS, [checked])
    assert (span["start"], span["end"], span["method"], span["exact"]) == (0, 38, "overlap", False)
    # a span that does not match its chunk's text (or an unsupported one) is not trusted: located here
    for bad in ({**checked, "text": "something else"}, {**checked, "supported": False}):
        (fallback,) = supporting_spans(answer, CHUNKS, [bad])
        assert "method" not in fallback and fallback["chunk_id"] == "chk_bb02"
