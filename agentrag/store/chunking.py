"""Split a document's text into overlapping chunks with exact character offsets.

Invariant (tested as a property): ``text[chunk.start_char:chunk.end_char] == chunk.text``.
Boundaries snap to a paragraph break, then a sentence end, then whitespace, so chunks
rarely cut words. Each chunk records its page (for paged sources such as PDF) and the
nearest Markdown heading at or before its start as its section title.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_CHUNK_OVERLAP", "DEFAULT_CHUNK_SIZE", "Chunk", "chunk_text"]

DEFAULT_CHUNK_SIZE = 1000  # characters: about 250 tokens, inside MiniLM's 256 word-piece window
DEFAULT_CHUNK_OVERLAP = 150

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_BREAKS = (re.compile(r"\n[ \t]*\n"), re.compile(r"[.!?][\"')\]]?\s"), re.compile(r"\s"))


@dataclass(frozen=True, slots=True)
class Chunk:
    index: int
    text: str
    start_char: int
    end_char: int
    page: int | None = None
    section: str | None = None


def _cut(text: str, start: int, limit: int, size: int) -> int:
    """Where a chunk starting at ``start`` should end: a natural break in its last half."""
    if limit - start <= size:
        return limit
    hard = start + size
    floor = start + size // 2
    window = text[floor:hard]
    for pattern in _BREAKS:
        last = None
        for match in pattern.finditer(window):
            last = match
        if last is not None:
            return floor + last.end()
    return hard


def _headings(text: str) -> tuple[list[int], list[str]]:
    starts, titles = [], []
    in_fence = False
    for line_match in re.finditer(r"^.*$", text, re.MULTILINE):
        line = line_match.group(0)
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        heading = _HEADING.match(line)
        if heading:
            starts.append(line_match.start())
            titles.append(heading.group(2).strip())
    return starts, titles


def chunk_text(
    text: str,
    *,
    size: int = DEFAULT_CHUNK_SIZE,
    overlap: int = DEFAULT_CHUNK_OVERLAP,
    page_starts: Sequence[int] | None = None,
) -> list[Chunk]:
    """Chunk ``text``. ``page_starts[i]`` is the offset where page ``i + 1`` begins."""
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"chunk overlap must be in [0, size), got {overlap}")
    heading_starts, heading_titles = _headings(text)
    chunks: list[Chunk] = []
    start, n = 0, len(text)
    while start < n:
        # skip leading whitespace so chunks start on content
        while start < n and text[start].isspace():
            start += 1
        if start >= n:
            break
        end = _cut(text, start, n, size)
        body_end = end
        while body_end > start and text[body_end - 1].isspace():
            body_end -= 1
        if body_end > start:
            # The section is the last heading at or before the chunk's first content line.
            h = bisect.bisect_right(heading_starts, start) - 1
            first_heading_inside = bisect.bisect_left(heading_starts, start)
            if first_heading_inside < len(heading_starts) and heading_starts[first_heading_inside] == start:
                h = first_heading_inside
            page = bisect.bisect_right(page_starts, start) if page_starts else None
            chunks.append(
                Chunk(
                    index=len(chunks),
                    text=text[start:body_end],
                    start_char=start,
                    end_char=body_end,
                    page=page,
                    section=heading_titles[h] if h >= 0 else None,
                )
            )
        if end >= n:
            break
        # step back by the overlap, but always move forward; snap to a word start
        next_start = max(end - overlap, start + 1)
        if overlap:
            space = text.find(" ", next_start, end)
            if space != -1:
                next_start = space + 1
        start = next_start
    return chunks
