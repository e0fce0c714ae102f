"""DOCX (python-docx, the ``readers`` extra): headings as sections, list items, tables (header
kept with every piece), footnotes at the end."""

from __future__ import annotations

from typing import Any

from agentrag.errors import IngestError, UnreadableFileError
from agentrag.readers.base import (
    Block,
    Extracted,
    Source,
    check_text,
    check_zip,
    import_extra,
    table_header,
    table_line,
)

__all__ = ["DocxReader"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _heading_level(style: str) -> int | None:
    if style == "Title":
        return 1
    if style.startswith("Heading "):
        digits = style.removeprefix("Heading ").strip()
        return int(digits) if digits.isdigit() else None
    return None


class DocxReader:
    name = "docx"
    suffixes: tuple[str, ...] = (".docx",)
    extra: str | None = "readers"

    def read(self, source: Source) -> Extracted:
        check_zip(source, "DOCX")
        docx = import_extra("docx", "readers", "DOCX", source)
        try:
            with source.open() as f:
                document = docx.Document(f)
            return self._read(document, source)
        except IngestError:
            raise
        except Exception as exc:
            raise UnreadableFileError(
                f"{source.name}: cannot parse DOCX ({exc})", source=source.name
            ) from exc

    def _read(self, document: Any, source: Source) -> Extracted:
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        blocks: list[Block] = []
        path: list[tuple[int, str]] = []
        lines: list[str] = []
        total = 0

        def locator() -> dict[str, Any]:
            return {"section": [t for _, t in path]} if path else {}

        def flush() -> None:
            if any(line.strip() for line in lines):
                blocks.append(Block("text", "\n\n".join(lines), locator()))
            lines.clear()

        tables = 0
        # style names by id, once: python-docx's paragraph.style looks each one up in the styles part
        names = {s.style_id: s.name for s in document.styles}
        for child in document.element.body.iterchildren():
            if child.tag == f"{_W}p":
                text = Paragraph(child, document).text.strip()
                style_id = child.xpath("./w:pPr/w:pStyle/@w:val")
                style = names.get(style_id[0], "") if style_id else ""  # the default: body text
                level = _heading_level(style)
                if level is not None and text:
                    flush()
                    while path and path[-1][0] >= level:
                        path.pop()
                    path.append((level, text))
                    lines.append("#" * min(level, 6) + " " + text)
                elif text:
                    numbered = "Number" in style
                    lines.append(("1. " if numbered else "- ") + text if "List" in style else text)
                total += len(text)
            elif child.tag == f"{_W}tbl":
                flush()
                tables += 1
                rows = [[cell.text for cell in row.cells] for row in Table(child, document).rows]
                rows = [r for r in rows if any(c.strip() for c in r)]
                if rows:
                    body = tuple((i, table_line(r)) for i, r in enumerate(rows[1:], start=2))
                    blocks.append(
                        Block("table", "", {**locator(), "table": tables}, table_header(rows[0]), body)
                    )
                    total += sum(len(line) for _, line in body)
            check_text(source, total)
        flush()
        notes = _footnotes(document)
        if notes:
            blocks.append(Block("text", "\n\n".join(notes), {"section": ["Footnotes"]}))
        props = document.core_properties
        metadata = {k: v for k, v in (("title", props.title), ("author", props.author)) if v}
        return Extracted(blocks, metadata, reader=self.name)


def _footnotes(document: Any) -> list[str]:
    """``[n] text`` for each footnote (python-docx has no API for them: read the part's XML)."""
    from lxml import etree

    for rel in document.part.rels.values():
        if rel.reltype.endswith("/footnotes") and not rel.is_external:
            root = etree.fromstring(rel.target_part.blob)
            out = []
            for note in root.iter(f"{_W}footnote"):
                number = int(note.get(f"{_W}id", "0"))
                text = "".join(t.text or "" for t in note.iter(f"{_W}t")).strip()
                if number > 0 and text:
                    out.append(f"[{number}] {text}")
            return out
    return []
