"""Extractive answers that read well over hard-wrapped Markdown (issue #13, item 2).

The sample corpus is hard-wrapped at 72 columns (prose and list items filled, headings, code and
tables untouched: tests/hardwrap.py) and ingested into real PostgreSQL; the extractive answers to
a set of questions are pinned as snapshots, and checked for what makes them readable: whole
sentences only (no fragments, no ",."), each quoted from its cited chunk, in document order
within a source.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentrag.sentences import blocks, sentences
from agentrag.steps import new
from agentrag.steps.answer import extractive_answer
from agentrag.store.store import Store
from tests.conftest import SAMPLES
from tests.hardwrap import hard_wrap, wrap_tree

QUESTIONS = [
    ("support", "Why can't I log in with SSO?"),
    ("support", "How do I recover a deleted note?"),
    ("support", "How long does support take to answer on the Team plan?"),
    ("api", "What happens when I hit the rate limit?"),
    ("api", "How do I paginate through the notes API?"),
    ("product_docs", "How does offline mode sync my changes?"),
    ("product_docs", "Which plans include SSO?"),
]
_MARKER = re.compile(r" ?\[(chk_[0-9a-f]+)\] ?")


def cited_sentences(text: str) -> list[tuple[str, str]]:
    """``(sentence, chunk id)`` pairs of an extractive answer: each sentence ends with its marker."""
    pieces = _MARKER.split(text)
    assert pieces[-1] == "", text  # nothing after the last citation
    return list(zip(pieces[0:-1:2], pieces[1:-1:2], strict=True))


@pytest.fixture(scope="module")
def wrapped(store: Store, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The sample collections, hard-wrapped, each in a fresh collection."""
    root = wrap_tree(SAMPLES, tmp_path_factory.mktemp("wrapped"))
    names = {}
    for folder in ("support", "api", "product_docs"):
        name = f"wrap_{folder}_{uuid.uuid4().hex[:6]}"
        store.create_collection(name)
        assert store.ingest(root / folder, collection=name, strict=True).ok
        names[folder] = name
    return names


def test_the_fixture_really_is_hard_wrapped(wrapped: dict[str, str], store: Store) -> None:
    doc = next(d for d in store.documents(wrapped["support"]) if "sso" in d.source)
    text = store.document(doc.id).text
    assert max(len(line) for line in text.splitlines()) <= 72 + 40  # long words / code may overflow
    assert "identity provider (IdP), such\nas Okta" in text


@pytest.mark.parametrize(("folder", "question"), QUESTIONS)
def test_extractive_answers_over_hard_wrapped_markdown(
    store: Store, wrapped: dict[str, str], folder: str, question: str, snapshot
) -> None:  # type: ignore[no-untyped-def]
    # the hashing test embedder is not what abstention is calibrated for: these answers are about reading
    ctx = new(question, store=store, collections=[wrapped[folder]], mode="lexical").search().rerank()
    ctx = ctx.answer(abstain=False)
    assert ctx.ok and ctx.mode in ("full", "low-confidence")
    answer = ctx.answer_text or ""
    used = {h.chunk_id: h for h in ctx.context_used}
    # a table row is quoted as written under its header line, cited in its last cell
    blocks = answer.split("\n\n")
    tables = [b for b in blocks if b.startswith("|")]
    for table in tables:
        header, rule, *rows = table.splitlines()
        assert re.fullmatch(r"\|(---\|)+", rule) and rows
        for row in rows:
            cited = re.search(r" \[(chk_[0-9a-f]+)\] \|$", row)
            assert cited, row
            assert row[: cited.start()] + " |" in used[cited.group(1)].text
            assert header in used[cited.group(1)].text
    text = " ".join(b for b in blocks if not b.startswith("|"))
    parts = cited_sentences(text) if text else []
    # every sentence is whole and cited; nothing is left over between them
    assert parts or tables
    assert " ".join(f"{s} [{c}]" for s, c in parts) == text
    assert all(re.search(r"[.!?][\"')\]*_`]*$", s) for s, _ in parts), parts
    assert ",." not in text and "\n" not in text
    for sentence, chunk_id in parts:
        assert sentence[0].isupper() or sentence[0] in "*`\"'(" or sentence[0].isdigit(), sentence
        assert len(sentence.split()) >= 4
        # quoted from the cited chunk (hard wraps joined); a table row as "Header: cell; ...", cells quoted
        joined = " ".join(used[chunk_id].text.split())
        cells = [c.split(": ", 1)[-1] for c in sentence.rstrip(".").split("; ")]
        assert sentence.rstrip(".") in joined or all(c in joined for c in cells), sentence
    # document order within a source
    positions: dict[str, list[int]] = {}
    for sentence, chunk_id in parts:
        hit = used[chunk_id]
        if sentence.rstrip(".") not in " ".join(hit.text.split()):
            continue  # a table row
        at = " ".join(hit.text.split()).index(sentence.rstrip("."))
        positions.setdefault(hit.document_id, []).append(hit.start_char * 10_000 + at)
    for found in positions.values():
        assert found == sorted(found)
    assert ctx.grounded is True and ctx.ungrounded_claims == ()
    labels = {c: f"[{n}]" for n, c in enumerate(dict.fromkeys(re.findall(r"chk_[0-9a-f]+", answer)), start=1)}
    readable = answer
    for chunk_id, label in labels.items():
        readable = readable.replace(f"[{chunk_id}]", label)
    assert readable == snapshot


@pytest.mark.parametrize("path", sorted(p for p in SAMPLES.rglob("*.md") if p.name != "README.md"), ids=str)
def test_hard_wraps_do_not_change_the_sentences(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for width in (40, 72):
        assert [(s.text, s.complete) for s in sentences(hard_wrap(text, width))] == [
            (s.text, s.complete) for s in sentences(text)
        ]


def test_markdown_blocks() -> None:
    text = (
        "# Title\n\nFirst line of a paragraph\nwrapped here. Second sentence, e.g. this one.\n\n"
        "- An item that\n  wraps onto two lines\n- Short\n\n```python\nx = 1. Not prose.\n```\n\n"
        "| a | b |\n|---|---|\n\n> A quoted sentence\n> over two lines.\n"
    )
    assert [kind for kind, _ in blocks(text)] == [
        "heading",
        "paragraph",
        "item",
        "item",
        "code",
        "table",
        "table",
        "quote",
    ]
    found = [(s.text, s.kind, s.complete) for s in sentences(text)]
    assert found == [
        ("First line of a paragraph wrapped here.", "paragraph", True),
        ("Second sentence, e.g. this one.", "paragraph", True),
        ("An item that wraps onto two lines", "item", True),
        ("Short", "item", False),
        ("A quoted sentence over two lines.", "quote", True),
    ]
    first = sentences(text)[0]
    assert text[first.start : first.end] == "First line of a paragraph\nwrapped here."


@pytest.mark.parametrize(
    "title",
    ["Slide 2: Hiring plan", "Code of conduct", "Travel"],
)
def test_a_title_on_the_line_above_its_text_is_not_glued_to_the_first_sentence(title: str) -> None:
    text = f"{title}\nWe will hire 14 warehouse technicians in Q3. Interviews start in May.\n"
    assert blocks(text)[0] == ("heading", title)
    assert [s.text for s in sentences(text)] == [
        "We will hire 14 warehouse technicians in Q3.",
        "Interviews start in May.",
    ]


def test_a_hard_wrapped_first_line_is_not_a_title() -> None:
    text = "Every full-time employee receives 25 days of paid\nAnnual leave per year, as the contract says.\n"
    assert [kind for kind, _ in blocks(text)] == ["paragraph"]
    assert len(sentences(text)) == 1


def test_fragments_cut_by_a_chunk_boundary_are_marked() -> None:
    chunk = "of the workspace is kept. When SSO is enabled, password login is off. Admins can then"
    found = sentences(chunk, cut_at_start=True, cut_at_end=True)
    assert [(s.text, s.complete) for s in found] == [
        ("of the workspace is kept.", False),
        ("When SSO is enabled, password login is off.", True),
        ("Admins can then", False),
    ]
    # the same text as a whole document: a capitalised first sentence is complete
    assert sentences("The workspace is kept safe. Then more.")[0].complete


def test_only_fragments_give_an_ungrounded_excerpt(store: Store, collection_name: str) -> None:
    store.create_collection(collection_name)
    store.ingest_text(
        "## Retention\n\n- trash retention thirty days\n- trash retention for admins\n",
        collection=collection_name,
        source="frag.md",
    )
    ctx = new("trash retention", store=store, collections=[collection_name]).search().answer()
    assert ctx.ok and ctx.answer_text is not None and ctx.answer_text.startswith("Excerpt: ")
    assert ctx.grounded is False
    assert ctx.steps[-1].strategy == "local:excerpt"


EXPENSES = """# Expenses

## How long does reimbursement take?

Approved claims are reimbursed with the next monthly payroll, usually within three weeks of approval.
Claims submitted after the 20th of a month are paid with the following payroll instead.
Finance answers questions about a pending claim within two working days of an email to the finance team.

## Limits

The hotel limit is 160 euros per night.
"""


def test_a_quoted_sentence_is_cited_under_the_section_it_is_in(
    tmp_path: Path, store: Store, collection_name: str
) -> None:
    (tmp_path / "expenses.md").write_text(EXPENSES)
    store.create_collection(collection_name)
    assert store.ingest(tmp_path, collection=collection_name).ok
    ctx = new("What is the hotel limit per night?", store=store, collections=[collection_name])
    ctx = ctx.search().answer()
    assert "160 euros" in (ctx.answer_text or "")
    (cited,) = [h for h in ctx.context_used if h.chunk_id in ctx.citations]
    assert cited.section == "Limits"
    assert cited.locator == {"section": ["Expenses", "Limits"]}
    # the chunk itself, as searched, is labelled with the section holding most of its text
    assert ctx.hits[0].section == "How long does reimbursement take?"


def test_sentences_come_back_in_document_order() -> None:
    from agentrag.hits import Hit

    def hit(chunk_id: str, text: str, start: int, rank: int) -> Hit:
        return Hit(
            chunk_id=chunk_id,
            document_id="doc_a",
            collection="c",
            text=text,
            score=1.0 / rank,
            rank=rank,
            start_char=start,
            end_char=start + len(text),
            chunk_index=start // 100,
        )

    # a chunk that starts mid-document begins with the tail of a cut sentence: never quoted
    late = hit("chk_late", "of the invoice. Refunds for annual plans are prorated by day.", 500, 1)
    early = hit("chk_early", "Refunds for monthly plans are not prorated at all.", 0, 2)
    answer = extractive_answer("refunds annual monthly plans prorated", [late, early], max_sentences=2)
    assert answer == (
        "Refunds for monthly plans are not prorated at all. [chk_early] "
        "Refunds for annual plans are prorated by day. [chk_late]"
    )


@given(
    st.lists(
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), min_size=0, max_size=60),
        max_size=12,
    )
)
def test_sentence_offsets_point_into_the_text(lines: list[str]) -> None:
    text = "\n".join(lines)
    for s in sentences(text):
        span = text[s.start : s.end]
        assert " ".join(span.split()).replace("\n", " ").endswith(s.text[-1])
        assert s.text.split()[0] in span


def test_wikipedia_abbreviations_and_reference_marks_do_not_cut_sentences() -> None:
    """ "St. Gallen" and "the U.S. Army" are inside a sentence; a reference mark after the full stop
    ("in 2010.[note 1]", "[citation needed]") ends it, as a closing quote does (the sentence was a
    fragment, never quoted, or ran on into the next)."""
    text = (
        "The river flows past the cantons of Thurgau and St. Gallen. The length was given as 1,232 "
        "kilometres in 2010.[note 1] The U.S. Army crossed it in March. He retired from the sport "
        "for good.[citation needed]"
    )
    assert [(s.text, s.complete) for s in sentences(text)] == [
        ("The river flows past the cantons of Thurgau and St. Gallen.", True),
        ("The length was given as 1,232 kilometres in 2010.[note 1]", True),
        ("The U.S. Army crossed it in March.", True),
        ("He retired from the sport for good.[citation needed]", True),
    ]
    assert [s.text for s in sentences("She finished 1st. Then she retired from the sport.")][-1] == (
        "Then she retired from the sport."
    )
