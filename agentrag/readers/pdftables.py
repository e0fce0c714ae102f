"""PDF tables kept as tables (``PDFReader(tables=True)``): pdfplumber finds ruled tables on each
page; the page becomes its text above, between and below them (pdfplumber's text, the tables' words
left out) and a table block per table (header row + numbered rows, locator ``page`` and ``table``).
pdfplumber's layout analysis is about 30x slower than pypdf's text (benchmarks/readers.py), so this
is opt-in; pages without tables keep pypdf's text (and OCR's, for scanned pages)."""

from __future__ import annotations

from typing import Any

from agentrag.readers.base import Block, Source, import_extra, table_header, table_line

__all__ = ["page_blocks"]


def _outside(boxes: list[tuple[float, float, float, float]]) -> Any:
    def keep(obj: dict[str, Any]) -> bool:
        x0, top, x1, bottom = obj.get("x0", 0), obj.get("top", 0), obj.get("x1", 0), obj.get("bottom", 0)
        return not any(b[0] <= x0 and x1 <= b[2] and b[1] <= top and bottom <= b[3] for b in boxes)

    return keep


def page_blocks(source: Source, texts: list[str], ocr_pages: list[int]) -> list[Block]:
    """The blocks of every page: ``texts[i]`` (pypdf's or OCR's) for a page without tables."""
    pdfplumber = import_extra("pdfplumber", "readers", "PDF tables", source)
    blocks: list[Block] = []
    tables = 0
    with source.open() as f, pdfplumber.open(f) as pdf:
        for number, page in enumerate(pdf.pages, start=1):
            found = [] if number in ocr_pages else sorted(page.find_tables(), key=lambda t: t.bbox[1])
            if not found:
                locator = {"page": number, **({"ocr": True} if number in ocr_pages else {})}
                blocks.append(Block("text", texts[number - 1], locator))
                continue
            keep = _outside([t.bbox for t in found])
            x0, top, x1, bottom = page.bbox
            edges = [top, *(v for t in found for v in (t.bbox[1], t.bbox[3])), bottom]
            for i in range(len(found) + 1):
                upper, lower = max(edges[2 * i], top), min(edges[2 * i + 1], bottom)
                if lower > upper:
                    text = page.crop((x0, upper, x1, lower)).filter(keep).extract_text() or ""
                    blocks.append(Block("text", text, {"page": number}))
                if i < len(found):
                    rows = [[cell or "" for cell in row] for row in found[i].extract()]
                    rows = [r for r in rows if any(c.strip() for c in r)]
                    if rows:
                        tables += 1
                        body = tuple((n, table_line(r)) for n, r in enumerate(rows[1:], start=2))
                        locator = {"page": number, "table": tables}
                        blocks.append(Block("table", "", locator, table_header(rows[0]), body))
    return blocks
