"""Chunking that respects structure, with exact character offsets and a locator per chunk.

Invariant (tested as a property): ``text[chunk.start_char:chunk.end_char] == chunk.text``.

* Prose (:func:`chunk_text`): boundaries snap to a paragraph break, then a sentence end, then
  whitespace, so chunks rarely cut words. A chunk's section is the Markdown heading path of the
  section holding most of its characters (its own section, not the one its overlap starts in);
  its page, for paged sources such as PDF, is the page where it starts (``page_end`` in the
  locator when it runs onto another).
* Tables (:func:`layout`): cut between rows, never inside one (unless one row alone is larger than
  a chunk); every piece starts with the table's header, written again into the document text
  before each piece, so the invariant holds and every chunk reads on its own. The locator names
  the rows (``{"sheet": "Q3", "rows": [2, 40]}``).
* Slides: one chunk each, unless a slide alone is larger than a chunk.
* Markdown pipe tables inside prose (a ``.md`` or ``.txt`` file, stored exactly as read): cut between
  rows, never inside one nor between the header and the first row (unless one row alone is larger
  than a chunk); a chunk that starts below a table's header carries that header, as written, in its
  locator (``{"table_header": "| Plan | SSO |\n|---|---|"}``), so its rows still read on their own
  (the answer step renders each row with it) while the chunk's text stays the file's.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentrag.readers.base import Block, Extracted

__all__ = ["CHUNKER_VERSION", "DEFAULT_CHUNK_OVERLAP", "DEFAULT_CHUNK_SIZE", "Chunk", "chunk_text", "layout"]

DEFAULT_CHUNK_SIZE = 1000  # characters: about 250 tokens, inside MiniLM's 256 word-piece window
DEFAULT_CHUNK_OVERLAP = 150
# The chunking rules' version, recorded on every document with its chunk size and overlap
# (migration 0054): BUMP IT whenever the same text (or file) would be cut into other chunks:
# a boundary rule, a reader's layout, a locator or section. ``store.sync`` then re-chunks the
# unchanged files whose chunks differ (agentrag.store.sync_layout); files whose chunks come out the
# same only have the new version recorded, nothing re-embedded.
CHUNKER_VERSION = 2  # 2: Markdown pipe tables cut between rows, their header in the locator

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_TABLE_RULE = re.compile(r"^[ \t]*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_BREAKS = (re.compile(r"\n[ \t]*\n"), re.compile(r"[.!?][\"')\]]?\s"), re.compile(r"\s"))
BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class Chunk:
    index: int
    text: str
    start_char: int
    end_char: int
    page: int | None = None
    section: str | None = None
    #: where the chunk is in its file: page / page_end, slide (+ title), sheet + rows, section
    #: (the heading path), record, attachment, ocr; None when there is nothing to add to the offsets
    locator: dict[str, Any] | None = None


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


def _headings(text: str) -> tuple[list[int], list[tuple[str, ...]]]:
    """Where each Markdown heading starts, and its path (the titles of it and its parents)."""
    starts: list[int] = []
    paths: list[tuple[str, ...]] = []
    stack: list[tuple[int, str]] = []
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
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2).strip()))
            starts.append(line_match.start())
            paths.append(tuple(title for _, title in stack))
    return starts, paths


@dataclass(frozen=True, slots=True)
class _Table:
    """A Markdown pipe table in prose: where it starts (its header line), where its first row
    starts and where it ends (after its last row), the header (header line and rule, as written)
    and where each row line starts."""

    start: int
    body: int
    end: int
    header: str
    rows: tuple[int, ...]


def _tables(text: str) -> list[_Table]:
    """The pipe tables of Markdown ``text`` (a header line, its rule, the ``|`` lines under it;
    none inside a code fence)."""
    lines = [(m.start(), m.end(), m.group(0)) for m in re.finditer(r"^.*$", text, re.MULTILINE)]
    out: list[_Table] = []
    in_fence = False
    i = 0
    while i < len(lines):
        at, _, line = lines[i]
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif (
            not in_fence
            and line.lstrip().startswith("|")
            and i + 1 < len(lines)
            and _TABLE_RULE.match(lines[i + 1][2])
        ):
            j = i + 2
            while j < len(lines) and lines[j][2].lstrip().startswith("|"):
                j += 1
            if j > i + 2:  # a header without rows is not a table to cut
                rows = tuple(lines[k][0] for k in range(i + 2, j))
                out.append(_Table(at, rows[0], lines[j - 1][1], text[at : lines[i + 1][1]], rows))
            i = j
            continue
        i += 1
    return out


def _table_at(tables: list[_Table], offset: int) -> _Table | None:
    """The table whose lines hold ``offset`` (from its header line's start to its last row's end)."""
    for table in tables:
        if table.start <= offset < table.end:
            return table
    return None


def _row_cut(tables: list[_Table], start: int, end: int, size: int) -> int:
    """``end`` moved off a table's inside: to the last row start (or the table's start) in the
    chunk's second half when one is there, else to the start of the row ``end`` falls in (a table's
    header stays with its first row); a row larger than a chunk alone keeps ``end``."""
    floor = start + size // 2
    for table in tables:
        if table.end <= start or table.start >= end:
            continue
        if end >= table.end:
            continue  # the whole table (from here) fits
        bounds = [table.start, *table.rows[1:]]
        inside = [b for b in bounds if floor <= b <= end and b > start]
        if inside:
            return max(inside)
        earlier = [b for b in bounds if start < b <= end]
        return max(earlier) if earlier else end
    return end


def _row_start(tables: list[_Table], start: int, offset: int) -> int:
    """A next chunk's start at ``offset`` moved back to the start of the table row (or header) it
    falls in, when that is after the previous chunk's ``start``."""
    table = _table_at(tables, offset)
    if table is None:
        return offset
    line = max([table.start, *(r for r in table.rows if r <= offset)])
    if offset < table.body:
        line = table.start
    return line if line > start else offset


def _own_section(starts: list[int], start: int, end: int) -> int:
    """The heading whose section holds most of ``[start, end)`` (-1: the text before any heading)."""
    first = bisect.bisect_right(starts, start) - 1
    best, best_len = first, -1
    h = first
    while True:
        lo = max(start, starts[h]) if h >= 0 else start
        hi = min(end, starts[h + 1]) if h + 1 < len(starts) else end
        if hi - lo > best_len or (hi - lo == best_len and h >= 0 and starts[h] == start):
            best, best_len = h, hi - lo
        h += 1
        if h >= len(starts) or starts[h] >= end:
            return best


def chunk_text(
    text: str,
    *,
    size: int = DEFAULT_CHUNK_SIZE,
    overlap: int = DEFAULT_CHUNK_OVERLAP,
    page_starts: Sequence[int] | None = None,
    first_page: int = 1,
    markdown: bool = True,
) -> list[Chunk]:
    """Chunk prose. ``page_starts[i]`` is the offset where page ``first_page + i`` begins."""
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"chunk overlap must be in [0, size), got {overlap}")
    heading_starts, heading_paths = _headings(text) if markdown else ([], [])
    tables = _tables(text) if markdown and "|" in text else []
    chunks: list[Chunk] = []
    start, n = 0, len(text)
    while start < n:
        # skip leading whitespace so chunks start on content
        while start < n and text[start].isspace():
            start += 1
        if start >= n:
            break
        end = _cut(text, start, n, size)
        if tables:
            end = _row_cut(tables, start, end, size)
        body_end = end
        while body_end > start and text[body_end - 1].isspace():
            body_end -= 1
        if body_end > start:
            locator: dict[str, Any] = {}
            path: tuple[str, ...] = ()
            if heading_starts:
                h = _own_section(heading_starts, start, body_end)
                path = heading_paths[h] if h >= 0 else ()
            page = None
            if page_starts:
                page = bisect.bisect_right(page_starts, start) + first_page - 1
                locator["page"] = page
                last = bisect.bisect_right(page_starts, body_end - 1) + first_page - 1
                if last != page:
                    locator["page_end"] = last
            if path:
                locator["section"] = list(path)
            table = _table_at(tables, start) if tables else None
            if table is not None and start >= table.body:  # below its header: the header travels with it
                locator["table_header"] = table.header
            chunks.append(
                Chunk(
                    index=len(chunks),
                    text=text[start:body_end],
                    start_char=start,
                    end_char=body_end,
                    page=page,
                    section=path[-1] if path else None,
                    locator=locator or None,
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
        if tables:
            next_start = _row_start(tables, start, next_start)
        start = next_start
    return chunks


def _table_pieces(block: Block, size: int) -> list[tuple[str, int, int]]:
    """A table's rows grouped under its header into pieces of at most ``size`` characters
    (a row larger than that on its own: a piece of its own): ``(text, first row, last row)``."""
    pieces: list[tuple[str, int, int]] = []
    lines: list[str] = []
    first = last = 0
    length = len(block.header)
    for number, line in block.rows:
        if lines and length + 1 + len(line) > size:
            pieces.append(("\n".join([block.header, *lines]), first, last))
            lines, length = [], len(block.header)
        if not lines:
            first = number
        lines.append(line)
        last = number
        length += 1 + len(line)
    if lines or not pieces:
        pieces.append(("\n".join([block.header, *lines]), first, last))
    return pieces


def _section_of(locator: dict[str, Any]) -> str | None:
    section = locator.get("section")
    if section:
        return str(section[-1])
    for key in ("title", "sheet", "subject"):
        if locator.get(key):
            return str(locator[key])
    return None


def layout(extracted: Extracted, *, size: int, overlap: int) -> tuple[str, list[Chunk]]:
    """The document text of ``extracted`` and its chunks (offsets into that text, locators).

    Blocks are joined by a blank line. A single prose block lays out as its own text, so a
    plain or Markdown file is stored exactly as read.
    """
    parts: list[str] = []
    chunks: list[Chunk] = []
    offset = 0

    def place(text: str, pieces: list[Chunk], base: dict[str, Any]) -> None:
        nonlocal offset
        if parts:
            offset += len(BLOCK_SEPARATOR)
        parts.append(text)
        for piece in pieces:
            locator = {**base, **(piece.locator or {})}
            page = piece.page if piece.page is not None else locator.get("page", locator.get("slide"))
            chunks.append(
                Chunk(
                    index=len(chunks),
                    text=piece.text,
                    start_char=offset + piece.start_char,
                    end_char=offset + piece.end_char,
                    page=page,
                    section=_section_of(locator),
                    locator=locator or None,
                )
            )
        offset += len(text)

    def whole(text: str) -> list[Chunk]:
        """``text`` as one chunk when it fits (surrounding whitespace left out), else prose chunks."""
        body = text.strip()
        if len(body) > size:
            return chunk_text(text, size=size, overlap=overlap, markdown=False)
        if not body:
            return []
        lead = len(text) - len(text.lstrip())
        return [Chunk(0, body, lead, lead + len(body))]

    for block in extracted.blocks:
        if block.kind == "table":
            for text, first, last in _table_pieces(block, size):
                rows = {"rows": [first, last]} if first else {}
                place(text, whole(text), {**block.locator, **rows})
        elif block.kind == "slide":
            if block.text.strip():
                place(block.text, whole(block.text), block.locator)
        elif block.text.strip():
            base = dict(block.locator)
            ocr_pages = set(base.pop("ocr_pages", ()))
            first_page = int(base.get("page", 1))
            pieces = chunk_text(
                block.text,
                size=size,
                overlap=overlap,
                page_starts=block.page_starts,
                first_page=first_page,
                markdown=block.markdown,
            )
            if ocr_pages:  # pages read by OCR: said on each chunk that starts on one
                pieces = [
                    replace(p, locator={**(p.locator or {}), "ocr": True}) if p.page in ocr_pages else p
                    for p in pieces
                ]
            place(block.text, pieces, base)
    return BLOCK_SEPARATOR.join(parts), chunks
