"""A :class:`~agentrag.retrieval.result.SearchResult` as HTML or Markdown (rank, score, leg ranks,
source, section, text)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrag.display.common import (
    CSS,
    SNIPPET,
    basename,
    esc,
    html_table,
    md_esc,
    md_table,
    num,
    opt,
    snippet,
    source_cell,
)
from agentrag.readers.locators import format_locator

if TYPE_CHECKING:
    from agentrag.retrieval.result import SearchResult

__all__ = ["search_result_html", "search_result_markdown"]

_HIT_HEADER = (
    "rank",
    "score",
    "vector rank",
    "lexical rank",
    "chunk",
    "collection",
    "source",
    "section",
    "page",
    "text",
)


def _result_facts(result: SearchResult) -> list[tuple[str, str]]:
    mode = result.mode if result.used_mode == result.mode else f"{result.mode} → {result.used_mode}"
    items = [("collections", ", ".join(result.collections)), ("mode", mode), ("hits", str(len(result.hits)))]
    timings = " / ".join(
        f"{key} {result.timings_ms[key]:.1f}"
        for key in ("embed", "vector", "lexical", "fuse", "fetch")
        if key in result.timings_ms
    )
    if "total" in result.timings_ms:
        items.append(("total", f"{result.timings_ms['total']:.1f} ms"))
    if timings:
        items.append(("ms", timings))
    if not result.model_version_match:
        items.append(("model version", "differs from the index"))
    return items


def _result_warnings(result: SearchResult) -> list[tuple[str, str]]:
    out = [("degraded", result.degraded)] if result.degraded else []
    out += [("warning", w) for w in dict.fromkeys(result.warnings) if w != result.degraded]
    return out


def search_result_html(result: SearchResult) -> str:
    """A search result as an escaped HTML table (rank, score, leg ranks, source, section, text)."""
    out = [CSS, '<div class="agentrag agentrag-search">']
    out.append(f"<p><strong>Search</strong> {esc(result.query)}</p>")
    meta = " · ".join(f'<span class="muted">{esc(k)}</span> {esc(v)}' for k, v in _result_facts(result))
    out.append(f"<p>{meta}</p>")
    warnings = _result_warnings(result)
    if warnings:
        items = "".join(f'<li><span class="warn">{esc(k)}</span>: {esc(v)}</li>' for k, v in warnings)
        out.append(f"<ul>{items}</ul>")
    if result.hits:
        rows = []
        for hit in result.hits:
            text = esc(snippet(hit.text))
            if len(" ".join(hit.text.split())) > SNIPPET:
                text = f"<details><summary>{text}</summary><pre>{esc(hit.text)}</pre></details>"
            rows.append(
                [
                    str(hit.rank),
                    num(hit.score),
                    f"{esc(opt(hit.vector_rank))}",
                    f"{esc(opt(hit.lexical_rank))}",
                    f"<code>{esc(hit.chunk_id)}</code>",
                    esc(hit.collection),
                    source_cell(hit),
                    esc(format_locator(hit.locator, section=hit.section)),
                    esc(opt(hit.page)),
                    text,
                ]
            )
        out.append(html_table(_HIT_HEADER, rows, numeric=(0, 1, 2, 3, 8)))
    else:
        why = f": {esc(result.empty_reason)}" if result.empty_reason else ""
        out.append(f'<p class="muted">no hits{why}</p>')
    out.append("</div>")
    return "".join(out)


def search_result_markdown(result: SearchResult) -> str:
    """A search result as Markdown (escaped)."""
    parts = [
        f"**Search** {md_esc(result.query)}",
        " · ".join(f"{md_esc(k)}: {md_esc(v)}" for k, v in _result_facts(result)),
    ]
    warnings = _result_warnings(result)
    if warnings:
        parts.append("\n".join(f"- **{md_esc(k)}**: {md_esc(v)}" for k, v in warnings))
    if result.hits:
        rows = [
            [
                str(hit.rank),
                num(hit.score),
                opt(hit.vector_rank),
                opt(hit.lexical_rank),
                md_esc(hit.chunk_id),
                md_esc(hit.collection),
                md_esc(basename(hit.source) or hit.document_id),
                md_esc(format_locator(hit.locator, section=hit.section)),
                opt(hit.page),
                md_esc(snippet(hit.text, 100)),
            ]
            for hit in result.hits
        ]
        parts.append(md_table(_HIT_HEADER, rows))
    else:
        parts.append(f"no hits: {md_esc(result.empty_reason)}" if result.empty_reason else "no hits")
    return "\n\n".join(parts) + "\n"
