"""PPTX (python-pptx, the ``readers`` extra): one block per slide (title, body, tables, notes);
the slide number is the chunk's page. The title line, the body and the notes are separated by
blank lines and each body paragraph is a list item, so the answer step reads a title, each bullet
and the notes as separate units (a title glued to its first bullet read as one sentence)."""

from __future__ import annotations

from typing import Any

from agentrag.errors import IngestError, UnreadableFileError
from agentrag.readers.base import Block, Extracted, Source, check_text, check_zip, import_extra, table_line

__all__ = ["PptxReader"]


def _shape_lines(shape: Any, title_id: int | None) -> list[str]:
    if getattr(shape, "shape_id", None) == title_id:
        return []
    lines: list[str] = []
    if getattr(shape, "shape_type", None) == 6:  # MSO_SHAPE_TYPE.GROUP
        for inner in shape.shapes:
            lines.extend(_shape_lines(inner, title_id))
        return lines
    if getattr(shape, "has_table", False):
        rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
        lines.extend(table_line(r) for r in rows)
        if rows:
            lines.insert(1, "|" + "---|" * len(rows[0]))
        return lines
    if getattr(shape, "has_text_frame", False):
        for paragraph in shape.text_frame.paragraphs:
            text = "".join(run.text for run in paragraph.runs).strip()
            if text:
                lines.append("  " * paragraph.level + "- " + text)
    return lines


class PptxReader:
    name = "pptx"
    suffixes: tuple[str, ...] = (".pptx",)
    extra: str | None = "readers"

    def read(self, source: Source) -> Extracted:
        check_zip(source, "PPTX")
        pptx = import_extra("pptx", "readers", "PPTX", source)
        try:
            with source.open() as f:
                presentation = pptx.Presentation(f)
            blocks = []
            total = 0
            for number, slide in enumerate(presentation.slides, start=1):
                title_shape = slide.shapes.title
                title = title_shape.text.strip() if title_shape is not None else ""
                title_id = title_shape.shape_id if title_shape is not None else None
                body = [line for shape in slide.shapes for line in _shape_lines(shape, title_id)]
                notes = ""
                if slide.has_notes_slide:
                    notes = slide.notes_slide.notes_text_frame.text.strip()
                parts = [f"Slide {number}" + (f": {title}" if title else ""), "\n".join(body)]
                text = "\n\n".join(p for p in (*parts, f"Notes: {notes}" if notes else "") if p)
                locator: dict[str, Any] = {"slide": number}
                if title:
                    locator["title"] = title
                blocks.append(Block("slide", text, locator))
                total += len(text)
                check_text(source, total)
            props = presentation.core_properties
            metadata = {k: v for k, v in (("title", props.title), ("author", props.author)) if v}
            return Extracted(blocks, {**metadata, "slides": len(blocks)}, reader=self.name)
        except IngestError:
            raise
        except Exception as exc:
            raise UnreadableFileError(
                f"{source.name}: cannot parse PPTX ({exc})", source=source.name
            ) from exc
