"""EPUB (ebooklib, the ``readers`` extra): the spine's documents in reading order, each read as
HTML; the locator is the chapter (spine position) and the heading path."""

from __future__ import annotations

from agentrag.errors import IngestError, UnreadableFileError
from agentrag.readers.base import Block, Extracted, Source, check_text, check_zip, import_extra
from agentrag.readers.markup import html_to_markdown, markdown_blocks

__all__ = ["EpubReader"]


class EpubReader:
    name = "epub"
    suffixes: tuple[str, ...] = (".epub",)
    extra: str | None = "readers"

    def read(self, source: Source) -> Extracted:
        check_zip(source, "EPUB")
        import_extra("ebooklib", "readers", "EPUB", source)
        import ebooklib
        from ebooklib import epub

        try:
            with source.open() as f:
                book = epub.read_epub(f, options={"ignore_ncx": True})
            blocks: list[Block] = []
            total = 0
            chapter = 0
            for item_id, _linear in book.spine:
                item = book.get_item_with_id(item_id)
                if (
                    item is None
                    or item.get_type() != ebooklib.ITEM_DOCUMENT
                    or isinstance(item, epub.EpubNav)
                ):
                    continue  # the navigation document is the table of contents, not text
                _title, markdown = html_to_markdown(item.get_content(), whole=True)
                if not markdown.strip():
                    continue
                chapter += 1
                found = markdown_blocks(markdown, {"chapter": chapter})
                total += sum(len(b.text) + sum(len(r) for _, r in b.rows) for b in found)
                check_text(source, total)
                blocks.extend(found)
            metadata = {}
            for key in ("title", "creator", "language"):
                values = book.get_metadata("DC", key)
                if values and values[0][0]:
                    metadata["author" if key == "creator" else key] = str(values[0][0])
        except IngestError:
            raise
        except Exception as exc:
            raise UnreadableFileError(
                f"{source.name}: cannot parse EPUB ({exc})", source=source.name
            ) from exc
        if not blocks:
            raise UnreadableFileError(f"{source.name}: the book has no text", source=source.name)
        return Extracted(blocks, metadata, reader=self.name)
