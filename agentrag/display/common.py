"""What the renderers of contexts and search results share: escaping, snippets, tables, the CSS.

Every piece of text is escaped with :func:`html.escape` (:func:`esc`); Markdown also
backslash-escapes its own punctuation (:func:`md_esc`). Nothing heavy is imported: only
:mod:`html` and :mod:`re`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrag.hits import Hit

__all__ = [
    "CSS",
    "SNIPPET",
    "basename",
    "esc",
    "html_table",
    "md_esc",
    "md_table",
    "num",
    "opt",
    "snippet",
    "source_cell",
]

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~])")
SNIPPET = 160
CSS = (
    "<style>"
    ".agentrag{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.4;"
    "max-width:100%}"
    ".agentrag h4{margin:.9em 0 .3em;font-size:14px;border-bottom:1px solid #ddd}"
    ".agentrag table{border-collapse:collapse;margin:.2em 0;font-size:12px}"
    ".agentrag th,.agentrag td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}"
    ".agentrag th{background:rgba(127,127,127,.12)}"
    ".agentrag td.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".agentrag pre{white-space:pre-wrap;word-break:break-word;max-height:28em;overflow:auto;margin:.2em 0;"
    "padding:4px;background:rgba(127,127,127,.08)}"
    ".agentrag .answer{padding:2px 8px;border-left:3px solid #4a7;background:rgba(68,170,119,.07)}"
    ".agentrag .answer p,.agentrag .answer ul,.agentrag .answer ol{margin:.35em 0}"
    ".agentrag .answer h5{margin:.5em 0 .2em;font-size:13px}"
    ".agentrag .muted{color:#777}"
    ".agentrag .warn{color:#a60}"
    ".agentrag .err{color:#c22;font-weight:600}"
    ".agentrag .invalid{color:#c22;text-decoration:line-through}"
    ".agentrag code{font-size:12px}"
    "</style>"
)


def esc(value: Any) -> str:
    """HTML-escape anything (quotes too, so it is safe inside attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def md_esc(value: Any) -> str:
    """Escape for Markdown inline text and table cells: HTML-escaped, punctuation backslashed, one line."""
    text = html.escape("" if value is None else str(value), quote=False)
    text = re.sub(r"\s+", " ", text)
    return _MD_SPECIAL.sub(r"\\\1", text)


def snippet(text: str, width: int = SNIPPET) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def opt(value: Any) -> str:
    return "-" if value is None else str(value)


def basename(source: str | None) -> str:
    if not source:
        return ""
    return re.split(r"[\\/]", source.rstrip("/\\"))[-1] or source


def source_cell(hit: Hit) -> str:
    """The source's file name, with the whole source (path or id) as the tooltip."""
    full = hit.source or hit.document_id
    return f'<span title="{esc(full)}">{esc(basename(hit.source) or hit.document_id)}</span>'


def html_table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """A table of pre-escaped cells (the caller escapes; headers are escaped here)."""
    head = "".join(f"<th>{esc(title)}</th>" for title in header)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>"
            for i, cell in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table of pre-escaped cells."""
    lines = ["| " + " | ".join(md_esc(title) for title in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
