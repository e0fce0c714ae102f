"""Readers: every format's text, sections and locators, from files written by the formats' own
writers; structure-respecting chunking; the registry (extension, sniffing, override); laziness."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrag.errors import InvalidInputError, UnreadableFileError, UnsupportedFormatError
from agentrag.readers import Block, Extracted, JSONReader, PDFReader, chunk_text, format_locator, layout, read
from tests import reader_fixtures as fx

pytest.importorskip("docx")
pytest.importorskip("pptx")
pytest.importorskip("openpyxl")


def chunks_of(path: Path, size: int = 400, overlap: int = 60):  # type: ignore[no-untyped-def]
    extracted = read(path)
    text, chunks = layout(extracted, size=size, overlap=overlap)
    for chunk in chunks:  # the proof's invariant, for every format
        assert text[chunk.start_char : chunk.end_char] == chunk.text
    return extracted, text, chunks


def test_docx_headings_lists_and_tables(tmp_path: Path) -> None:
    extracted, text, chunks = chunks_of(fx.write_docx(tmp_path / "handbook.docx"))
    assert extracted.reader == "docx" and extracted.metadata["title"] == "Security handbook"
    assert "- Rotate service passwords every ninety days" in text  # a list item stays one
    password = next(c for c in chunks if "Argon2id" in c.text)
    assert password.section == "Passwords"  # its own section, not the previous one
    assert password.locator == {"section": ["Security handbook", "Passwords"]}
    table = next(c for c in chunks if "Business" in c.text)
    assert table.text.startswith("| Plan | Seats | Price per month | Support |\n|---|---|---|---|")
    assert "| Business | 100 | 480 | Phone within four hours |" in table.text
    assert table.locator == {"section": ["Security handbook", "Plans"], "table": 1, "rows": [2, 5]}
    assert format_locator(table.locator) == "rows 2-5, § Security handbook > Plans"


def test_docx_footnotes_come_last_under_their_own_section(tmp_path: Path) -> None:
    path = fx.add_footnote(fx.write_docx(tmp_path / "h.docx"), "Argon2id parameters follow OWASP 2025.")
    _extracted, text, chunks = chunks_of(path)
    assert text.endswith("[1] Argon2id parameters follow OWASP 2025.")
    assert chunks[-1].locator == {"section": ["Footnotes"]}


def test_pptx_one_chunk_per_slide_with_notes_and_tables(tmp_path: Path) -> None:
    extracted, _text, chunks = chunks_of(fx.write_pptx(tmp_path / "review.pptx"))
    assert extracted.metadata["slides"] == 4
    assert [c.page for c in chunks] == [1, 2, 3, 4]  # the slide number is the page
    assert [c.section for c in chunks] == ["Quarterly review", "Revenue", "Hiring plan", "Regional numbers"]
    assert chunks[1].text == (
        "Slide 2: Revenue\n\n- Revenue grew 38 percent year over year\n- Churn fell to 2.1 percent"
    )
    assert chunks[2].text.endswith("Notes: Speaker note: the Lisbon lease starts in March.")
    assert "| EMEA | 1,240 |" in chunks[3].text
    assert chunks[2].locator == {"slide": 3, "title": "Hiring plan"}
    assert format_locator(chunks[2].locator) == 'slide 3 "Hiring plan"'


def test_a_slide_title_its_bullets_and_notes_are_separate_sentences(tmp_path: Path) -> None:
    from agentrag.sentences import sentences

    _extracted, _text, chunks = chunks_of(fx.write_pptx(tmp_path / "review.pptx"))
    said = [s.text for s in sentences(chunks[1].text) if s.complete]
    assert said == ["Revenue grew 38 percent year over year", "Churn fell to 2.1 percent"]
    hiring = [s.text for s in sentences(chunks[2].text) if s.complete]
    assert hiring == [
        "We will hire eleven engineers in the Lisbon office",
        "Notes: Speaker note: the Lisbon lease starts in March.",
    ]


def test_a_slide_larger_than_a_chunk_is_split_and_keeps_its_slide() -> None:
    big = "Slide 1: Big\n" + "word " * 200
    _text, chunks = layout(Extracted([Block("slide", big, {"slide": 1})]), size=300, overlap=0)
    assert len(chunks) > 1 and {c.page for c in chunks} == {1}


def test_xlsx_rows_with_header_in_every_chunk(tmp_path: Path) -> None:
    extracted, _text, chunks = chunks_of(fx.write_xlsx(tmp_path / "book.xlsx", rows=300), size=500)
    assert extracted.metadata["sheets"] == ["Plans", "Inventory"]
    plans = [c for c in chunks if c.locator and c.locator["sheet"] == "Plans"]
    assert len(plans) == 1 and plans[0].locator == {"sheet": "Plans", "rows": [2, 5]}
    assert "| Enterprise | 1000 | 2900 | Dedicated engineer |" in plans[0].text  # 1000, not 1000.0
    inventory = [c for c in chunks if c.locator and c.locator["sheet"] == "Inventory"]
    assert len(inventory) > 5
    expected_row = 2
    for chunk in inventory:
        lines = chunk.text.split("\n")
        assert lines[:2] == ["| SKU | Item | Warehouse | Quantity |", "|---|---|---|---|"]
        assert all(line.startswith("| SKU-") and line.endswith(" |") for line in lines[2:])  # whole rows
        first, last = chunk.locator["rows"]  # type: ignore[index]
        assert first == expected_row and last - first + 1 == len(lines) - 2
        assert lines[2].startswith(f"| SKU-{first - 2:05d} |")
        expected_row = last + 1
    assert expected_row == 302  # every row, once, in order


def test_csv_is_sniffed_and_streamed_as_a_table(tmp_path: Path) -> None:
    path = tmp_path / "prices.csv"
    path.write_text('sku;price;note\nA-1;9.50;cheap\nA-2;12.00;\n\nA-3;99;"has; semicolon"\n')
    _extracted, text, chunks = chunks_of(path)
    assert text == (
        "| sku | price | note |\n|---|---|---|\n| A-1 | 9.50 | cheap |\n| A-2 | 12.00 |  |\n"
        "| A-3 | 99 | has; semicolon |"
    )
    assert chunks[0].locator == {"rows": [2, 5]}  # the file's line numbers, the blank line skipped


def test_html_main_content_without_boilerplate(tmp_path: Path) -> None:
    path = tmp_path / "rate-limits.html"
    path.write_text(fx.DOCS_PAGE)
    extracted, text, chunks = chunks_of(path)
    assert extracted.metadata["title"] == "Rate limits - Lumen Docs"
    for boilerplate in ("Log in", "Getting started", "Copyright", "Cookie settings", "analytics"):
        assert boilerplate not in text
    assert "600 requests per minute per workspace" in text
    table = next(c for c in chunks if c.locator and "table" in c.locator)
    assert table.text.splitlines()[0].replace(" ", "") == "|Plan|Requestsperminute|"
    assert table.locator == {"section": ["Rate limits", "Per-plan limits"], "table": 1, "rows": [1, 3]}
    retry = next(c for c in chunks if "back off" in c.text)
    assert retry.section == "Retrying" and retry.locator == {"section": ["Rate limits", "Retrying"]}


def test_saved_page_in_a_legacy_charset(tmp_path: Path) -> None:
    path = tmp_path / "office.htm"
    path.write_bytes(fx.SAVED_PAGE.replace("Rua", "Rua ção").encode("cp1252"))
    _extracted, text, chunks = chunks_of(path)
    assert "Rua ção das Flores 12" in text
    assert "Intranet" not in text and "Internal use only" not in text
    assert chunks[0].section == "Office move"


def test_eml_headers_body_and_an_attachment_through_its_reader(tmp_path: Path) -> None:
    extracted, text, chunks = chunks_of(fx.write_eml(tmp_path / "budget.eml", attachment=fx.xlsx_bytes()))
    assert extracted.metadata == {
        "from": "Ana Costa <ana@example.com>",
        "to": "team@example.com",
        "subject": "Budget approval for Q3",
        "date": "2026-07-14",
    }
    assert text.startswith(
        "From: Ana Costa <ana@example.com>\nTo: team@example.com\nSubject: Budget approval"
    )
    assert "84,000 euros" in chunks[0].text
    attached = chunks[-1]
    assert attached.locator == {"attachment": "plans.xlsx", "sheet": "Budget", "rows": [2, 3]}
    assert "| Hardware | 31000 |" in attached.text


def test_eml_attachment_that_fails_is_noted(tmp_path: Path) -> None:
    path = fx.write_eml(tmp_path / "m.eml", attachment=b"PK\x03\x04broken", attachment_name="x.docx")
    extracted = read(path)
    assert "84,000 euros" in extracted.blocks[0].text
    assert extracted.notes and extracted.notes[0].startswith(
        "attachment x.docx not read: UnreadableFileError"
    )


def test_mbox_messages(tmp_path: Path) -> None:
    extracted, _text, chunks = chunks_of(fx.write_mbox(tmp_path / "inbox.mbox"))
    assert extracted.metadata == {"messages": 2}
    assert [(c.locator or {}).get("message") for c in chunks] == [1, 2]
    assert chunks[1].section == "Lunch" and "Friday at noon" in chunks[1].text


def test_epub_chapters_in_reading_order(tmp_path: Path) -> None:
    pytest.importorskip("ebooklib")
    extracted, _text, chunks = chunks_of(fx.write_epub(tmp_path / "guide.epub"))
    assert extracted.metadata == {"title": "The Lumen field guide", "author": "Ana Costa", "language": "en"}
    assert [c.locator for c in chunks] == [
        {"chapter": 1, "section": ["Getting started"]},
        {"chapter": 2, "section": ["Backups"]},
    ]
    assert "thirty-five days" in chunks[1].text


def test_json_and_jsonl_text_field(tmp_path: Path) -> None:
    path = tmp_path / "faq.jsonl"
    path.write_text('{"title": "Reset", "text": "Use the reset link."}\n\n{"title": "Other", "body": "B"}\n')
    _e, _text, chunks = chunks_of(path)
    assert [c.text for c in chunks] == ["Use the reset link.", "title: Other\nbody: B"]
    assert [c.locator for c in chunks] == [{"record": 1, "title": "Reset"}, {"record": 3, "title": "Other"}]
    other = tmp_path / "faq.json"
    other.write_text('[{"q": "Why?", "body": "Because."}]')
    extracted = read(other, reader=JSONReader(text_field="body"))
    assert extracted.blocks[0].text == "Because."
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{not json\n')
    with pytest.raises(UnreadableFileError, match="not valid JSON at line 2"):
        read(bad)


needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract not installed")


@needs_tesseract
def test_scanned_pdf_is_read_by_ocr_and_reported_per_page(tmp_path: Path) -> None:
    pytest.importorskip("pytesseract")
    path = fx.write_scanned_pdf(tmp_path / "scan.pdf", [fx.SCANNED_TEXT, ["Second page says hello"]])
    extracted, text, chunks = chunks_of(path)
    assert extracted.metadata["ocr_pages"] == [1, 2]
    assert "Invoice 4471" in text and "1,250 EUR" in text and "Second page" in text
    assert chunks[0].locator == {"page": 1, "page_end": 2, "ocr": True}  # both pages fit one chunk
    assert format_locator(chunks[0].locator) == "p. 1-2, OCR"
    _text, small = layout(extracted, size=30, overlap=0)
    assert [c.locator for c in small if "hello" in c.text] == [{"page": 2, "ocr": True}]


def test_scanned_pdf_without_ocr_says_how_to_get_it(tmp_path: Path) -> None:
    path = fx.write_scanned_pdf(tmp_path / "scan.pdf")
    with pytest.raises(UnreadableFileError, match="no text layer; install the 'ocr' extra and Tesseract"):
        read(path, reader=PDFReader(ocr=False))


def test_section_is_the_chunks_own_not_where_its_overlap_starts() -> None:
    text = (
        "## Data regions\n\n"
        + "Data stays in its region. " * 8
        + "\n\n## Passwords\n\n"
        + ("Passwords are hashed with Argon2id and must be long. " * 5)
    )
    chunks = chunk_text(text, size=300, overlap=120)
    password = [c for c in chunks if "Argon2id" in c.text]
    assert password and all(c.section == "Passwords" for c in password)
    assert password[-1].locator == {"section": ["Data regions", "Passwords"]} or password[-1].locator == {
        "section": ["Passwords"]
    }
    assert chunks[0].section == "Data regions"


def test_heading_paths_nest_by_level() -> None:
    chunks = chunk_text(
        "# A\n\none\n\n## B\n\ntwo " * 1 + "\n\n### C\n\nthree\n\n## D\n\nfour", size=12, overlap=0
    )
    paths = [c.locator["section"] for c in chunks if c.locator]  # type: ignore[index]
    assert ["A", "B", "C"] in paths and ["A", "D"] in paths


rows = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60), min_size=1, max_size=80)


@settings(max_examples=150, deadline=None)
@given(cells=rows, size=st.integers(40, 400))
def test_table_layout_never_splits_a_row_that_fits(cells: list[str], size: int) -> None:
    header = "| h |\n|---|"
    lines = tuple((n, f"| {c.strip()} |") for n, c in enumerate(cells, start=2))
    extracted = Extracted([Block("text", "intro"), Block("table", "", {"sheet": "S"}, header, lines)])
    text, chunks = layout(extracted, size=size, overlap=size // 4)
    for chunk in chunks:
        assert text[chunk.start_char : chunk.end_char] == chunk.text
    table = [c for c in chunks if c.locator and "rows" in c.locator]
    covered = []
    for chunk in table:
        first, last = chunk.locator["rows"]  # type: ignore[index]
        if not covered or covered[-1] != last:  # a row larger than a chunk: several chunks, one range
            covered.extend(range(first, last + 1))
        if all(len(header) + 1 + len(line) <= size for _, line in lines[first - 2 : last - 1]):
            assert chunk.text.startswith("| h |\n|---|")
            assert len(chunk.text) <= size or last == first
    assert covered == sorted(set(covered)) == [n for n, _ in lines] or not table
    assert all(a.start_char < b.start_char for a, b in itertools.pairwise(chunks))


def test_registry_sniffs_content_over_a_wrong_extension(tmp_path: Path) -> None:
    wrong = tmp_path / "handbook.pdf"
    fx.write_docx(tmp_path / "h.docx").rename(wrong)
    extracted = read(wrong)
    assert extracted.reader == "docx"
    assert extracted.notes[0] == "read as docx: its content is docx, its name says .pdf"
    (tmp_path / "notes.weird").write_text("hello")
    with pytest.raises(
        UnsupportedFormatError, match=r"unsupported file type \.weird .*reader=NAME, --reader NAME"
    ):
        read(tmp_path / "notes.weird")
    assert read(tmp_path / "notes.weird", reader="text").blocks[0].text == "hello"
    assert read(tmp_path / "notes.weird", reader={".weird": "markdown"}).reader == "markdown"
    with pytest.raises(InvalidInputError, match="unknown reader 'word'"):
        read(tmp_path / "notes.weird", reader="word")


def test_binary_with_a_text_extension_is_a_typed_failure(tmp_path: Path) -> None:
    path = tmp_path / "image.txt"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00")
    with pytest.raises(UnreadableFileError, match="not valid UTF-8"):
        read(path)


def test_no_reader_library_is_imported_until_its_kind_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\ntext")
    code = (
        "import sys, agentrag, agentrag.readers as r; r.layout(r.read(sys.argv[1]), size=100, overlap=0);"
        "heavy = {'docx', 'pptx', 'openpyxl', 'trafilatura', 'bs4', 'ebooklib', 'pypdf', 'pytesseract',"
        " 'lxml'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.md")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_cli_reader_choices_are_the_registry() -> None:
    from agentrag.cli import build_parser
    from agentrag.readers import READERS

    parser = build_parser()
    args = parser.parse_args(["ingest", "x", "-c", "c", "--reader", "html"])
    assert args.reader == "html"
    ingest = next(
        a for a in parser._subparsers._group_actions[0].choices["ingest"]._actions if a.dest == "reader"
    )  # type: ignore[union-attr]
    assert set(ingest.choices) == set(READERS)  # type: ignore[arg-type]


def test_pdf_tables_kept_as_tables_when_asked(tmp_path: Path) -> None:
    pytest.importorskip("pdfplumber")
    path = fx.write_table_pdf(tmp_path / "plans.pdf")
    text, chunks = layout(read(path), size=1000, overlap=0)
    assert "Business 100 480" in text  # by default: pypdf's text lines
    assert all(c.locator == {"page": 1} for c in chunks)
    extracted = read(path, reader=PDFReader(tables=True))
    text, chunks = layout(extracted, size=1000, overlap=0)
    assert [c.text for c in chunks] == [
        "Plans and prices for every team size are below.",
        "| Plan | Seats | Price per month | Support |\n|---|---|---|---|\n"
        "| Free | 3 | 0 | Community forum |\n| Team | 25 | 120 | Email within one business day |\n"
        "| Business | 100 | 480 | Phone within four hours |\n"
        "| Enterprise | 1000 | 2900 | Dedicated engineer |",
        "Prices exclude VAT.",
    ]
    assert [c.locator for c in chunks] == [{"page": 1}, {"page": 1, "table": 1, "rows": [2, 5]}, {"page": 1}]
    assert all(text[c.start_char : c.end_char] == c.text for c in chunks)
