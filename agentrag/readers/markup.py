"""Markdown-shaped text into blocks (a prose block per section, a table block per pipe table),
and HTML into that Markdown. Shared by the HTML, EPUB and e-mail readers."""

from __future__ import annotations

import re
from typing import Any

from agentrag.readers.base import Block, table_header, table_line

__all__ = ["html_to_markdown", "markdown_blocks"]

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


def markdown_blocks(text: str, locator: dict[str, Any] | None = None) -> list[Block]:
    """Blocks of Markdown text: prose split at headings (each block's locator has its heading
    path as ``section``), pipe tables as table blocks (rows numbered from 1 under the header)."""
    base = dict(locator or {})
    blocks: list[Block] = []
    path: list[tuple[int, str]] = []
    prose: list[str] = []
    tables = 0

    def here() -> dict[str, Any]:
        return {**base, "section": [t for _, t in path]} if path else dict(base)

    def flush() -> None:
        if any(line.strip() for line in prose):
            blocks.append(Block("text", "\n".join(prose).strip("\n"), here()))
        prose.clear()

    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, heading.group(2).strip()))
            prose.append(line)
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1].strip()):
            flush()
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            tables += 1
            rows = tuple((n, lines[k].rstrip()) for n, k in enumerate(range(i + 2, j), start=1))
            header = lines[i].rstrip() + "\n" + lines[i + 1].strip()
            blocks.append(Block("table", "", {**here(), "table": tables}, header, rows))
            i = j
            continue
        else:
            prose.append(line)
        i += 1
    flush()
    return blocks


_SKIP = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "button",
)


def html_to_markdown(html: str | bytes, *, whole: bool = False) -> tuple[str, str]:
    """``(title, markdown)`` of an HTML page with BeautifulSoup: headings as ``#`` lines, tables
    as pipe tables, list items as ``-`` lines. Unless ``whole``, navigation, headers, footers and
    side bars are dropped and ``<main>`` / ``<article>`` preferred (the fallback when the
    boilerplate-aware extractor finds nothing)."""
    import warnings

    from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning

    with warnings.catch_warnings():  # XHTML (EPUB chapters) read as HTML on purpose
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(html, "lxml")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(["script", "style", "noscript", "template", "head"] if whole else [*_SKIP, "head"]):
        tag.decompose()
    root = (None if whole else (soup.find("main") or soup.find("article"))) or soup.body or soup
    out: list[str] = []

    def text_of(node: Any) -> str:
        return re.sub(r"\s+", " ", node.get_text(" ", strip=True)).strip()

    for node in root.find_all(
        ["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "table", "blockquote", "dt", "dd"]
    ):
        if node.find_parent(["table", "li", "blockquote"]) is not None:
            continue  # read with its container
        name = node.name
        if name == "table":
            rows = [[text_of(c) for c in tr.find_all(["th", "td"])] for tr in node.find_all("tr")]
            rows = [r for r in rows if any(r)]
            if rows:
                out.append(table_header(rows[0]) + "".join("\n" + table_line(r) for r in rows[1:]))
            continue
        text = node.get_text("\n", strip=False).strip() if name == "pre" else text_of(node)
        if not text:
            continue
        if name[0] == "h" and name[1:].isdigit():
            out.append("#" * int(name[1:]) + " " + text)
        elif name == "li":
            out.append("- " + text)
        elif name == "pre":
            out.append("```\n" + text + "\n```")
        else:
            out.append(text)
    return title, "\n\n".join(out)
