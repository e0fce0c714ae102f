"""Plain text and Markdown (with flat ``key: value`` front matter as metadata)."""

from __future__ import annotations

import re
from typing import Any

from agentrag.readers.base import Block, Extracted, Source

__all__ = ["MarkdownReader", "TextReader", "parse_front_matter"]

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n", re.DOTALL)
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


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


class TextReader:
    """``.txt`` (and anything read as text): one prose block; ``#`` lines are headings."""

    name = "text"
    suffixes: tuple[str, ...] = (".txt", ".text")
    extra: str | None = None

    def read(self, source: Source) -> Extracted:
        return Extracted([Block("text", source.read_text(), markdown=True)], reader=self.name)


class MarkdownReader:
    """``.md``: front matter as metadata, the body as one prose block with its headings."""

    name = "markdown"
    suffixes: tuple[str, ...] = (".md", ".markdown")
    extra: str | None = None

    def read(self, source: Source) -> Extracted:
        metadata, body = parse_front_matter(source.read_text())
        return Extracted([Block("text", body, markdown=True)], metadata, reader=self.name)
