"""An answer's Markdown as safe HTML: the subset answers use, nothing else.

Answers are untrusted text (an LLM wrote them from retrieved documents), so every character is
HTML-escaped first and only this subset becomes markup: paragraphs, ``#`` headings, ``-`` / ``*`` /
``1.`` lists, pipe tables, fenced code blocks, and inline ``code``, ``**bold**``, ``*italic*`` /
``_italic_``. Markdown links and raw HTML stay text (an answer cannot add a link or a script); the
caller turns citation labels into its own links through ``label_html``. Nothing is imported
beyond :mod:`html` and :mod:`re`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

__all__ = ["markdown_html"]

LabelHtml = Callable[[str], str]

_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d{1,3}[.)]\s+(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_FENCE = "```"
_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(
    r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])|(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])"
)
_SLOT = re.compile("\x00(\\d+)\x00")


def _inline(text: str, label: re.Pattern[str], label_html: LabelHtml) -> str:
    """Escape ``text``; code spans, bold and italic become tags; each label becomes ``label_html``."""
    slots: list[str] = []

    def keep(piece: str) -> str:
        slots.append(piece)
        return f"\x00{len(slots) - 1}\x00"

    text = text.replace("\x00", "")
    text = _CODE.sub(lambda m: keep(f"<code>{html.escape(m.group(1))}</code>"), text)
    text = label.sub(lambda m: keep(label_html(m.group(0))), text)
    text = html.escape(text, quote=True)
    text = _BOLD.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", text)
    text = _ITALIC.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", text)
    for _ in range(2):  # a slot may hold a slot (a label inside a code span stays code)
        text = _SLOT.sub(lambda m: slots[int(m.group(1))], text)
    return text


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _is_table(lines: list[str], i: int) -> bool:
    return (
        i + 1 < len(lines)
        and "|" in lines[i]
        and bool(_TABLE_RULE.match(lines[i + 1]))
        and "|" in lines[i + 1]
    )


def markdown_html(text: str, label: re.Pattern[str], label_html: LabelHtml) -> str:
    """``text`` (Markdown) as HTML blocks; ``label`` matches citation labels, rendered by ``label_html``."""
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    paragraph: list[str] = []

    def inline(piece: str) -> str:
        return _inline(piece, label, label_html)

    def flush() -> None:
        if paragraph:
            out.append("<p>" + "<br>".join(inline(line) for line in paragraph) + "</p>")
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith(_FENCE):
            flush()
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(_FENCE)), len(lines)
            )
            out.append("<pre><code>" + html.escape("\n".join(lines[i + 1 : end])) + "</code></pre>")
            i = end + 1
        elif _is_table(lines, i):
            flush()
            head = "".join(f"<th>{inline(c)}</th>" for c in _cells(line))
            i += 2
            rows = []
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                rows.append("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in _cells(lines[i])) + "</tr>")
                i += 1
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
        elif _BULLET.match(line) or _NUMBERED.match(line):
            flush()
            pattern, tag = (_BULLET, "ul") if _BULLET.match(line) else (_NUMBERED, "ol")
            items = []
            while i < len(lines) and (match := pattern.match(lines[i])):
                items.append(f"<li>{inline(match.group(1))}</li>")
                i += 1
            out.append(f"<{tag}>{''.join(items)}</{tag}>")
        elif heading := _HEADING.match(line):
            flush()
            out.append(f"<h5>{inline(heading.group(2))}</h5>")
            i += 1
        elif not line.strip():
            flush()
            i += 1
        else:
            paragraph.append(line)
            i += 1
    flush()
    return "".join(out)
