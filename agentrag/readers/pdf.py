"""PDF: the text layer page by page (pypdf); a page without one is read by OCR when the ``ocr``
extra and Tesseract are installed (:mod:`agentrag.readers.ocr`), and reported either way."""

from __future__ import annotations

from agentrag.errors import EncryptedFileError, IngestError, UnreadableFileError
from agentrag.readers.base import Block, Extracted, Source, check_text, import_extra

__all__ = ["PDFReader"]

MIN_PAGE_CHARS = 3  # a page with less text than this has no text layer worth the name


class PDFReader:
    """``.pdf``: one prose block over the pages (``page_starts``), so the chunker knows each
    chunk's page. ``ocr=None`` OCRs image-only pages when Tesseract is there (else notes them),
    ``True`` requires it, ``False`` never runs it. ``tables=True`` keeps ruled tables as tables
    (pdfplumber, the ``readers`` extra; much slower: :mod:`agentrag.readers.pdftables`)."""

    name = "pdf"
    suffixes: tuple[str, ...] = (".pdf",)
    extra: str | None = "pdf"

    def __init__(self, *, ocr: bool | None = None, ocr_language: str = "eng", tables: bool = False) -> None:
        self.ocr = ocr
        self.ocr_language = ocr_language
        self.tables = tables

    def __repr__(self) -> str:
        return f"PDFReader(ocr={self.ocr!r}, ocr_language={self.ocr_language!r}, tables={self.tables!r})"

    def read(self, source: Source) -> Extracted:
        pypdf = import_extra("pypdf", "pdf", "PDF", source)
        try:
            with source.open() as f:
                reader = pypdf.PdfReader(f)
                if reader.is_encrypted and not reader.decrypt(""):
                    raise EncryptedFileError(
                        f"{source.name}: the PDF is password-protected", source=source.name
                    )
                pages = []
                blank: list[int] = []
                total = 0
                for number, page in enumerate(reader.pages, start=1):
                    text = (page.extract_text() or "").replace("\r\n", "\n")
                    if len(text.strip()) < MIN_PAGE_CHARS:
                        blank.append(number)
                    pages.append(text)
                    total += len(text)
                    check_text(source, total)
                extracted = Extracted([], reader=self.name)
                if blank and self.ocr is not False:
                    self._ocr(reader, blank, pages, extracted, source)
        except IngestError:
            raise
        except Exception as exc:
            raise UnreadableFileError(f"{source.name}: cannot parse PDF ({exc})", source=source.name) from exc
        starts, offset = [], 0
        for text in pages:
            starts.append(offset)
            offset += len(text) + 2
        body = "\n\n".join(pages)
        if not body.strip():
            hint = (
                "" if extracted.ocr_pages else ": it has no text layer; install the 'ocr' extra and Tesseract"
            )
            raise UnreadableFileError(
                f"{source.name}: the PDF has no extractable text{hint}", source=source.name
            )
        unread = [n for n in blank if n not in extracted.ocr_pages]
        if unread:
            extracted.notes.append(f"pages without text: {', '.join(map(str, unread))}")
            extracted.metadata["unread_pages"] = unread
        if extracted.ocr_pages:
            extracted.metadata["ocr_pages"] = list(extracted.ocr_pages)
        if self.tables:
            from agentrag.readers.pdftables import page_blocks

            try:
                extracted.blocks = page_blocks(source, pages, extracted.ocr_pages)
            except IngestError:
                raise
            except Exception as exc:
                raise UnreadableFileError(
                    f"{source.name}: cannot find the PDF's tables ({exc})", source=source.name
                ) from exc
            return extracted
        locator = {"page": 1, **({"ocr_pages": list(extracted.ocr_pages)} if extracted.ocr_pages else {})}
        extracted.blocks.append(Block("text", body, locator, markdown=False, page_starts=tuple(starts)))
        return extracted

    def _ocr(
        self, reader: object, blank: list[int], pages: list[str], out: Extracted, source: Source
    ) -> None:
        from agentrag.readers import ocr

        if not ocr.available():
            if self.ocr:
                raise ocr.unavailable_error(source)
            out.notes.append("OCR unavailable: " + ocr.why_unavailable())
            return
        for number in blank:
            text = ocr.ocr_pdf_page(reader.pages[number - 1], language=self.ocr_language)  # type: ignore[attr-defined]
            if text.strip():
                pages[number - 1] = text
                out.ocr_pages.append(number)
