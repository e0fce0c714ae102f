"""Reading speed per format beside the bare parser, OCR pages/s, and the candidates compared.

    .venv/bin/python -m benchmarks.readers [--pages 20] [--repeats 3] [--ocr-pages 3]

For each format a corpus of about ``--pages`` pages is written here with the format's own
writer (python-docx, python-pptx, openpyxl, ebooklib, the email package, a small PDF writer).
A *page* is a PDF page, a slide, or 3,000 characters of extracted text for the formats that
have no pages (a printed page's worth). Two rows per format, timed in the same run, alternating:

* **bare parser**: the library call alone (open the file, pull every text run out), the floor;
* **agentrag reader**: ``agentrag.readers.read`` + ``layout`` (structure, tables by rows under
  their header, locators, chunks at 1,000 characters).

Then OCR pages/s (Tesseract through pytesseract on an image-only PDF at 150 dpi, the bare
``image_to_string`` beside the reader), and the library comparisons behind the choices in
ARCHITECTURE.md: HTML main-content extraction (trafilatura vs BeautifulSoup with our
boilerplate rules: content sentences kept, boilerplate phrases leaked, speed) and PDF text
(pypdf vs pdfplumber: speed). Medians of ``--repeats``; the load average is printed.
"""

from __future__ import annotations

import argparse
import csv
import email
import email.policy
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path
from typing import Any

PAGE_CHARS = 3000
TEXT = (
    "the workspace stores every document in one region and replicates backups nightly while the"
    " audit log records each access with its user and time so that compliance reviews can follow"
    " what happened and when it happened across teams projects and customers of the service"
)
WORDS = TEXT.split()


def _sentence(i: int, n: int = 18) -> str:
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(n)).capitalize() + "."


def _paragraph(i: int) -> str:
    return " ".join(_sentence(i * 5 + k) for k in range(5))


def write_docx(path: Path, pages: int) -> None:
    import docx

    d = docx.Document()
    for p in range(pages):
        d.add_heading(f"Section {p + 1}", level=2)
        for k in range(5):
            d.add_paragraph(_paragraph(p * 10 + k))
        if p % 5 == 4:
            t = d.add_table(rows=0, cols=4)
            for r in range(20):
                cells = t.add_row().cells
                for c in range(4):
                    cells[c].text = f"r{r}c{c}" if r else f"Column {c}"
    d.save(str(path))


def write_pptx(path: Path, pages: int) -> None:
    from pptx import Presentation

    deck = Presentation()
    for s in range(pages):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide title {s}"
        frame = slide.placeholders[1].text_frame
        frame.text = _sentence(s)
        for k in range(4):
            frame.add_paragraph().text = _sentence(s * 4 + k)
        slide.notes_slide.notes_text_frame.text = _sentence(s + 99)
    deck.save(str(path))


def _rows(pages: int) -> list[list[object]]:
    n = pages * PAGE_CHARS // 75
    return [["SKU", "Item", "Warehouse", "Quantity", "Price"]] + [
        [f"SKU-{i:06d}", f"Widget model {i}", ["Porto", "Lyon", "Gdansk"][i % 3], i * 7 % 500, i * 0.25]
        for i in range(n)
    ]


def write_xlsx(path: Path, pages: int) -> None:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    for row in _rows(pages):
        ws.append(row)
    wb.save(str(path))


def write_csv(path: Path, pages: int) -> None:
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(_rows(pages))


def html_page(i: int) -> str:
    nav = "".join(f'<li><a href="/p{k}">Navigation link {k}</a></li>' for k in range(25))
    body = "".join(f"<h2>Topic {i}.{k}</h2><p>{_paragraph(i * 10 + k)}</p>" for k in range(4))
    return (
        f"<!doctype html><html><head><title>Page {i}</title><script>var tracking = 1;</script></head><body>"
        f"<header><nav><ul>{nav}</ul></nav></header><aside><p>Related articles sidebar</p></aside>"
        f"<main><article><h1>Guide page {i}</h1>{body}</article></main>"
        "<footer><p>Copyright notice and cookie settings</p></footer></body></html>"
    )


def write_html(folder: Path, pages: int) -> None:
    for i in range(pages):
        (folder / f"page{i}.html").write_text(html_page(i))


def write_eml(folder: Path, pages: int) -> None:
    for i in range(pages):
        m = EmailMessage()
        m["From"], m["To"], m["Subject"] = "a@example.com", "b@example.com", f"Status {i}"
        m["Date"] = "Tue, 14 Jul 2026 09:30:00 +0100"
        m.set_content("\n\n".join(_paragraph(i * 10 + k) for k in range(5)))
        (folder / f"m{i}.eml").write_bytes(bytes(m))


def write_epub(path: Path, pages: int) -> None:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("bench")
    book.set_title("Bench book")
    chapters = []
    for i in range(pages):
        c = epub.EpubHtml(title=f"Chapter {i}", file_name=f"c{i}.xhtml")
        c.content = (
            f"<html><body><h1>Chapter {i}</h1>"
            + "".join(f"<p>{_paragraph(i * 10 + k)}</p>" for k in range(5))
            + "</body></html>"
        )
        book.add_item(c)
        chapters.append(c)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = chapters
    epub.write_epub(str(path), book)


def write_jsonl(path: Path, pages: int) -> None:
    with path.open("w") as f:
        for i in range(pages * 6):
            f.write(json.dumps({"title": f"Record {i}", "text": _paragraph(i)}) + "\n")


def write_pdf(path: Path, pages: int) -> None:
    """A text PDF: 45 lines of Helvetica per page (no dependencies)."""
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for p in range(pages):
        lines = [_sentence(p * 45 + k, 11) for k in range(45)]
        ops = "BT /F1 10 Tf 12 TL 50 750 Td " + " ".join(f"({line}) Tj T*" for line in lines) + " ET"
        objects.append(f"<< /Length {len(ops)} >>\nstream\n{ops}\nendstream")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {len(objects)} 0 R"
            " /Resources << /Font << /F1 3 0 R >> >> >>"
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))


def write_scanned(path: Path, pages: int) -> None:
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=30)
    images = []
    for p in range(pages):
        image = Image.new("RGB", (1240, 1754), "white")
        draw = ImageDraw.Draw(image)
        for k in range(30):
            draw.text((100, 100 + k * 52), _sentence(p * 30 + k, 9), fill="black", font=font)
        images.append(image)
    images[0].save(str(path), "PDF", resolution=150, save_all=True, append_images=images[1:])


# ---- bare parsers: the library call alone ---------------------------------------------------------
def bare_docx(paths: list[Path]) -> int:
    import docx

    n = 0
    for p in paths:
        d = docx.Document(str(p))
        n += sum(len(x.text) for x in d.paragraphs)
        n += sum(len(c.text) for t in d.tables for row in t.rows for c in row.cells)
    return n


def bare_pptx(paths: list[Path]) -> int:
    from pptx import Presentation

    n = 0
    for p in paths:
        for slide in Presentation(str(p)).slides:
            n += sum(len(s.text_frame.text) for s in slide.shapes if s.has_text_frame)
            if slide.has_notes_slide:
                n += len(slide.notes_slide.notes_text_frame.text)
    return n


def bare_xlsx(paths: list[Path]) -> int:
    import openpyxl

    n = 0
    for p in paths:
        wb = openpyxl.load_workbook(str(p), read_only=True, data_only=True)
        for ws in wb.worksheets:
            n += sum(len(str(v)) for row in ws.iter_rows(values_only=True) for v in row if v is not None)
        wb.close()
    return n


def bare_csv(paths: list[Path]) -> int:
    n = 0
    for p in paths:
        with p.open(newline="") as f:
            n += sum(len(v) for row in csv.reader(f) for v in row)
    return n


def bare_html(paths: list[Path]) -> int:
    import trafilatura

    from agentrag.readers.web import EXTRACT_OPTIONS  # the reader's options: the library call alone

    return sum(len(trafilatura.extract(p.read_text(), **EXTRACT_OPTIONS) or "") for p in paths)


def bare_eml(paths: list[Path]) -> int:
    n = 0
    for p in paths:
        m = email.message_from_bytes(p.read_bytes(), policy=email.policy.default)
        n += len(m.get_body(preferencelist=("plain", "html")).get_content())  # type: ignore[union-attr]
    return n


def bare_epub(paths: list[Path]) -> int:
    import ebooklib
    from ebooklib import epub

    n = 0
    for p in paths:
        book = epub.read_epub(str(p), options={"ignore_ncx": True})
        n += sum(len(i.get_content()) for i in book.get_items_of_type(ebooklib.ITEM_DOCUMENT))
    return n


def bare_jsonl(paths: list[Path]) -> int:
    return sum(len(json.loads(line)["text"]) for p in paths for line in p.read_text().splitlines())


def bare_pdf(paths: list[Path]) -> int:
    import pypdf

    return sum(len(page.extract_text() or "") for p in paths for page in pypdf.PdfReader(str(p)).pages)


def pdfplumber_pdf(paths: list[Path]) -> int:
    import pdfplumber

    n = 0
    for p in paths:
        with pdfplumber.open(str(p)) as pdf:
            n += sum(len(page.extract_text() or "") for page in pdf.pages)
    return n


def bare_ocr(paths: list[Path]) -> int:
    import pypdf
    import pytesseract

    return sum(
        len(pytesseract.image_to_string(image.image))
        for p in paths
        for page in pypdf.PdfReader(str(p)).pages
        for image in page.images
    )


def ours(paths: list[Path]) -> int:
    from agentrag.readers import layout, read

    n = 0
    for p in paths:
        text, _chunks = layout(read(p), size=1000, overlap=150)
        n += len(text)
    return n


def _median_seconds(fn: Callable[[list[Path]], int], paths: list[Path], repeats: int) -> tuple[float, int]:
    times, chars = [], 0
    for _ in range(repeats):
        t = time.perf_counter()
        chars = fn(paths)
        times.append(time.perf_counter() - t)
    return statistics.median(times), chars


def _paired(
    a: Callable[[list[Path]], int], b: Callable[[list[Path]], int], paths: list[Path], repeats: int
) -> tuple[float, float, int]:
    """Median seconds of ``a`` and of ``b``, run alternately (a busy neighbour slows both alike)."""
    times_a, times_b, chars = [], [], 0
    for _ in range(repeats):
        times_a.append(_median_seconds(a, paths, 1)[0])
        seconds, chars = _median_seconds(b, paths, 1)
        times_b.append(seconds)
    return statistics.median(times_a), statistics.median(times_b), chars


def saved_page(i: int) -> str:
    """A page saved from an intranet: no semantic tags, the menu and footer are plain divs."""
    menu = " | ".join(f'<a href="/m{k}">Navigation link {k}</a>' for k in range(25))
    body = "".join(f"<h2>Topic {i}.{k}</h2><p>{_paragraph(i * 10 + k)}</p>" for k in range(4))
    return (
        f'<html><head><title>Page {i}</title><script>var tracking = 1;</script></head><body><div id="menu">'
        f'{menu}</div><div class="sidebar"><p>Related articles sidebar</p></div><div class="content">'
        f'<h1>Guide page {i}</h1>{body}</div><div class="footer">Copyright notice and cookie settings</div>'
        "</body></html>"
    )


def html_fidelity(pages: int) -> list[tuple[str, str, float, float, float]]:
    """(page kind, extractor, content sentences kept, boilerplate phrases leaked, pages/s)."""
    import trafilatura

    from agentrag.readers.markup import html_to_markdown
    from agentrag.readers.web import EXTRACT_OPTIONS

    boiler = ("Navigation link", "Related articles", "Copyright notice", "tracking")
    rows = []
    for kind, page in (("docs page", html_page), ("saved page", saved_page)):
        docs = [page(i) for i in range(pages)]
        rows.extend(_html_rows(kind, docs, boiler, trafilatura.extract, EXTRACT_OPTIONS, html_to_markdown))
    return rows


def _html_rows(
    kind: str, docs: list[str], boiler: tuple[str, ...], extract: Any, options: Any, soup: Any
) -> list[tuple[str, str, float, float, float]]:
    pages = len(docs)
    rows = []
    for name, fn in (
        ("trafilatura", lambda h: extract(h, **options) or ""),
        ("BeautifulSoup + rules", lambda h: soup(h)[1]),
        ("BeautifulSoup, whole body", lambda h: soup(h, whole=True)[1]),
    ):
        t = time.perf_counter()
        outs = [fn(h) for h in docs]
        seconds = time.perf_counter() - t
        kept = sum(_sentence((i * 10 + k) * 5) in out for i, out in enumerate(outs) for k in range(4))
        leaked = sum(b in out for out in outs for b in boiler)
        rows.append((kind, name, kept / (4 * pages), leaked / (len(boiler) * pages), pages / seconds))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ocr-pages", type=int, default=3)
    args = parser.parse_args()
    pages = args.pages
    print(
        f"# readers: about {pages} pages per format, median of {args.repeats}; load {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpora: list[tuple[str, list[Path], Callable[[list[Path]], int]]] = []

        def one(
            name: str, suffix: str, writer: Callable[[Path, int], None], bare: Callable[[list[Path]], int]
        ) -> None:
            path = root / f"corpus{suffix}"
            writer(path, pages)
            corpora.append((name, [path], bare))

        def many(name: str, writer: Callable[[Path, int], None], bare: Callable[[list[Path]], int]) -> None:
            folder = root / name
            folder.mkdir()
            writer(folder, pages)
            corpora.append((name, sorted(folder.iterdir()), bare))

        one("pdf (text layer)", ".pdf", write_pdf, bare_pdf)
        one("docx", ".docx", write_docx, bare_docx)
        one("pptx", ".pptx", write_pptx, bare_pptx)
        one("xlsx", ".xlsx", write_xlsx, bare_xlsx)
        one("csv", ".csv", write_csv, bare_csv)
        many("html", write_html, bare_html)
        many("eml", write_eml, bare_eml)
        one("epub", ".epub", write_epub, bare_epub)
        one("jsonl", ".jsonl", write_jsonl, bare_jsonl)
        print(f"{'format':<18} {'pages':>6} {'bare parser p/s':>16} {'agentrag p/s':>13} {'ratio':>6}")
        for name, paths, bare in corpora:
            ours(paths), bare(paths)  # warm: imports, caches
            floor_s, ours_s, chars = _paired(bare, ours, paths, args.repeats)
            n = pages if name.startswith(("pdf", "pptx")) else max(chars / PAGE_CHARS, 1)
            print(f"{name:<18} {n:>6.1f} {n / floor_s:>16.1f} {n / ours_s:>13.1f} {floor_s / ours_s:>6.2f}")
        pdf = [p for name, paths, _ in corpora if name.startswith("pdf") for p in paths]
        pypdf_s, plumber_s, _ = _paired(bare_pdf, pdfplumber_pdf, pdf, args.repeats)
        print(f"\npdf text: pypdf {pages / pypdf_s:.1f} pages/s, pdfplumber {pages / plumber_s:.1f} pages/s")
        print("\nhtml page    extractor                   content kept  boilerplate leaked  pages/s")
        for kind, name, kept, leaked, rate in html_fidelity(pages):
            print(f"{kind:<12} {name:<27} {kept:>12.0%} {leaked:>19.0%} {rate:>8.1f}")
        if shutil.which("tesseract") is None:
            print("\nOCR: tesseract not installed (skipped)")
            return
        scanned = root / "scanned.pdf"
        write_scanned(scanned, args.ocr_pages)
        ours([scanned])  # warm
        bare_s, ours_s, chars = _paired(bare_ocr, ours, [scanned], 1)
        n = args.ocr_pages
        print(
            f"\nOCR (tesseract, 150 dpi A4, {n} pages): bare image_to_string {n / bare_s:.2f} pages/s,"
            f" agentrag reader {n / ours_s:.2f} pages/s ({chars} characters)"
        )


if __name__ == "__main__":
    main()
