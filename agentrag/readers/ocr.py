"""OCR of image-only PDF pages with Tesseract (``pytesseract``, the ``ocr`` extra, and the
``tesseract`` program: Debian's ``tesseract-ocr``). The page's images are read as they are
embedded (a scanned page is one image), so no PDF renderer is needed."""

from __future__ import annotations

import functools
import shutil
from typing import Any

from agentrag.errors import ReaderUnavailableError
from agentrag.readers.base import Source

__all__ = ["available", "ocr_image", "ocr_pdf_page", "unavailable_error", "why_unavailable"]


@functools.cache
def why_unavailable() -> str:
    """Why OCR cannot run here ("" when it can)."""
    try:
        import pytesseract  # noqa: F401
    except ImportError:
        return "pytesseract is not installed: pip install 'agentrag[ocr]'"
    if shutil.which("tesseract") is None:
        return "the tesseract program is not installed (Debian: apt-get install tesseract-ocr)"
    return ""


def available() -> bool:
    return not why_unavailable()


def unavailable_error(source: Source) -> ReaderUnavailableError:
    return ReaderUnavailableError(f"{source.name}: OCR needed but {why_unavailable()}", source=source.name)


def ocr_image(image: Any, *, language: str = "eng") -> str:
    """The text Tesseract reads in a PIL image (grayscale first)."""
    import pytesseract

    return str(pytesseract.image_to_string(image.convert("L"), lang=language)).replace("\r\n", "\n").strip()


def ocr_pdf_page(page: Any, *, language: str = "eng") -> str:
    """The text of a pypdf page's embedded images, top to bottom as stored."""
    texts = []
    for image in page.images:
        text = ocr_image(image.image, language=language)
        if text:
            texts.append(text)
    return "\n\n".join(texts)
