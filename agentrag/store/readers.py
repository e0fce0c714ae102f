"""Read files into text: ``.txt``, ``.md`` (with flat front matter) and ``.pdf`` (pypdf extra)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrag.errors import IngestError

__all__ = ["SUPPORTED_SUFFIXES", "SourceText", "parse_front_matter", "read_file"]

SUPPORTED_SUFFIXES = (".txt", ".md", ".markdown", ".pdf")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n", re.DOTALL)
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True, slots=True)
class SourceText:
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    page_starts: tuple[int, ...] | None = None  # offset where page i+1 begins


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split a leading ``---`` block of flat ``key: value`` lines from the body."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    metadata: dict[str, Any] = {}
    for line in match.group(1).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or not _KEY.match(key):
            return {}, text  # not front matter we understand: keep the text whole
        value = value.strip().strip('"').strip("'")
        if key == "tags":
            metadata[key] = [t.strip() for t in value.split(",") if t.strip()]
        else:
            metadata[key] = value
    return metadata, text[match.end() :]


def read_file(path: Path) -> SourceText:
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise IngestError(f"{path}: unsupported file type {suffix or '(none)'}", source=str(path))
    if suffix == ".pdf":
        return _read_pdf(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(f"{path}: not valid UTF-8 text ({exc.reason})", source=str(path)) from exc
    except OSError as exc:
        raise IngestError(f"{path}: cannot be read ({exc.strerror or exc})", source=str(path)) from exc
    raw = raw.replace("\r\n", "\n")
    if suffix in (".md", ".markdown"):
        metadata, body = parse_front_matter(raw)
        return SourceText(body, metadata)
    return SourceText(raw)


def _read_pdf(path: Path) -> SourceText:
    try:
        from pypdf import PdfReader
    except ImportError as exc:
        raise IngestError(
            f"{path}: PDF support needs pypdf: pip install 'agentrag[pdf]'", source=str(path)
        ) from exc
    try:
        reader = PdfReader(str(path))
        pages = [(page.extract_text() or "").replace("\r\n", "\n") for page in reader.pages]
    except Exception as exc:
        raise IngestError(f"{path}: cannot parse PDF ({exc})", source=str(path)) from exc
    starts, parts, offset = [], [], 0
    for page_text in pages:
        starts.append(offset)
        parts.append(page_text)
        offset += len(page_text) + 2
    text = "\n\n".join(parts)
    if not text.strip():
        raise IngestError(f"{path}: the PDF has no extractable text", source=str(path))
    return SourceText(text, {}, tuple(starts))
