"""HTML: the page's main content without navigation and boilerplate (trafilatura, the
``readers`` extra), headings as sections, tables kept as tables. When trafilatura finds no main
content (a very short page), the page is read with BeautifulSoup instead, and that is noted."""

from __future__ import annotations

from agentrag.errors import IngestError, UnreadableFileError
from agentrag.readers.base import Extracted, Source, check_text, import_extra
from agentrag.readers.markup import html_to_markdown, markdown_blocks

__all__ = ["EXTRACT_OPTIONS", "HTMLReader", "decode_html", "page_title"]

#: trafilatura's options: Markdown out (headings, tables), recall over precision (docs pages)
EXTRACT_OPTIONS = {
    "output_format": "markdown",
    "include_tables": True,
    "include_formatting": True,
    "include_comments": False,
    "favor_recall": True,
}


def decode_html(data: bytes) -> str:
    """HTML bytes as text: UTF-8 (BOM or not), else the page's declared charset, else cp1252."""
    import re

    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        declared = re.search(rb"charset=[\"']?([A-Za-z0-9_-]+)", data[:4096])
        for encoding in ([declared.group(1).decode()] if declared else []) + ["cp1252"]:
            try:
                return data.decode(encoding)
            except (LookupError, UnicodeDecodeError):
                continue
        return data.decode("latin-1")


def page_title(html: str) -> str:
    """The ``<title>`` of a page (cheap: no second parse of the page)."""
    import html as entities
    import re

    match = re.search(r"<title[^>]*>(.*?)</title>", html[:65536], re.IGNORECASE | re.DOTALL)
    return " ".join(entities.unescape(match.group(1)).split()) if match else ""


class HTMLReader:
    name = "html"
    suffixes: tuple[str, ...] = (".html", ".htm", ".xhtml")
    extra: str | None = "readers"

    def read(self, source: Source) -> Extracted:
        trafilatura = import_extra("trafilatura", "readers", "HTML", source)
        html = decode_html(source.read_bytes())
        check_text(source, len(html) // 4)
        notes = []
        try:
            markdown = trafilatura.extract(html, **EXTRACT_OPTIONS)
            title = page_title(html)
            if not markdown or not markdown.strip():
                notes.append("trafilatura found no main content: read with BeautifulSoup")
                title, markdown = html_to_markdown(html)
        except IngestError:
            raise
        except Exception as exc:
            raise UnreadableFileError(
                f"{source.name}: cannot parse HTML ({exc})", source=source.name
            ) from exc
        if not markdown.strip():
            raise UnreadableFileError(f"{source.name}: the page has no text", source=source.name)
        metadata = {"title": title} if title else {}
        return Extracted(markdown_blocks(markdown), metadata, reader=self.name, notes=notes)
