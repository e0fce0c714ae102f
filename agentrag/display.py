"""Rich notebook display: a :class:`~agentrag.context.Context` or a search result as HTML or Markdown.

Jupyter calls ``Context._repr_html_`` / ``_repr_markdown_`` and ``SearchResult._repr_html_`` /
``_repr_markdown_``, which call the pure functions here. A context shows, in order: the
question; errors, warnings and degradations; the answer with every citation linked to its source
(the source row's anchor is ``#<query_id>-<chunk_id>``); the steps with their strategies and
timings; the gate, rewrites, collections (with the routing reasoning) and sub-questions; each
search per (question, collection) with its iterations (queries, new hits, sufficiency) and stop
reason; the sources with their scores and leg ranks; the knowledge-graph facts; the LLM calls
(purpose, model, tokens, latency, and in HTML the rendered prompt and reply in a collapsible
``<details>``).

Every piece of text (question, answer, chunk text, prompts, reasoning, errors, even ids) is escaped
with :func:`html.escape`; Markdown also backslash-escapes its own punctuation. Nothing heavy is
imported: only :mod:`html` and :mod:`re`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrag.context import Context, SearchRecord
    from agentrag.hits import Hit
    from agentrag.llm import LLMCall
    from agentrag.retrieval.result import SearchResult

__all__ = [
    "anchor",
    "context_html",
    "context_markdown",
    "search_result_html",
    "search_result_markdown",
]

_LABEL = re.compile(r"(?<![A-Za-z0-9_])(?:chk|rel)_[A-Za-z0-9]+")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~])")
_SNIPPET = 160
_NOT_RETRIEVED = "not among the retrieved sources"
_SOURCE_HEADER = (
    "#",
    "chunk",
    "collection",
    "source",
    "section",
    "page",
    "score",
    "vector rank",
    "lexical rank",
    "used",
    "text",
)
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
_ITERATION_HEADER = ("iteration", "queries", "hits", "new", "sufficient", "reasoning")
_CALL_HEADER = ("#", "purpose", "model", "tokens in", "tokens out", "ms", "status", "messages")

_CSS = (
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
    ".agentrag .answer{white-space:pre-wrap;padding:6px 8px;border-left:3px solid #4a7;"
    "background:rgba(68,170,119,.07)}"
    ".agentrag .muted{color:#777}"
    ".agentrag .warn{color:#a60}"
    ".agentrag .err{color:#c22;font-weight:600}"
    ".agentrag .invalid{color:#c22;text-decoration:line-through}"
    ".agentrag code{font-size:12px}"
    "</style>"
)


# -- helpers -------------------------------------------------------------------------------------------


def _e(value: Any) -> str:
    """HTML-escape anything (quotes too, so it is safe inside attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def _md(value: Any) -> str:
    """Escape for Markdown inline text and table cells: HTML-escaped, punctuation backslashed, one line."""
    text = html.escape("" if value is None else str(value), quote=False)
    text = re.sub(r"\s+", " ", text)
    return _MD_SPECIAL.sub(r"\\\1", text)


def _snippet(text: str, width: int = _SNIPPET) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _opt(value: Any) -> str:
    return "-" if value is None else str(value)


def _basename(source: str | None) -> str:
    if not source:
        return ""
    return re.split(r"[\\/]", source.rstrip("/\\"))[-1] or source


def _marks(chunk_id: str, cited: set[str], used: set[str]) -> str:
    return ", ".join(m for m, on in (("cited", chunk_id in cited), ("in context", chunk_id in used)) if on)


def _source_cell(hit: Hit) -> str:
    """The source's file name, with the whole source (path or id) as the tooltip."""
    full = hit.source or hit.document_id
    return f'<span title="{_e(full)}">{_e(_basename(hit.source) or hit.document_id)}</span>'


def _message_html(role: str, content: str) -> str:
    return f'<div><span class="muted">{_e(role)}</span><pre>{_e(content)}</pre></div>'


def anchor(query_id: str, chunk_id: str) -> str:
    """The HTML id of a source row: ``<query_id>-<chunk_id>`` (link to it with ``#`` + this)."""
    return f"{query_id}-{chunk_id}"


def _html_table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """A table of pre-escaped cells (the caller escapes; headers are escaped here)."""
    head = "".join(f"<th>{_e(title)}</th>" for title in header)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>"
            for i, cell in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table of pre-escaped cells."""
    lines = ["| " + " | ".join(_md(title) for title in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _sources(ctx: Context) -> list[Hit]:
    """Every retrieved chunk once (``ctx.hits`` order), then any context chunk not among them."""
    out = list(ctx.hits)
    seen = {hit.chunk_id for hit in out}
    for hit in ctx.context_used:
        if hit.chunk_id not in seen:
            seen.add(hit.chunk_id)
            out.append(hit)
    return out


def _link_text(text: str, ctx: Context, source_ids: set[str], *, link: Any, invalid: Any, escape: Any) -> str:
    """Escape ``text``, turning each chunk / relation label into a link (or an invalid marker)."""
    graph = bool(ctx.graph_context)
    parts: list[str] = []
    last = 0
    for match in _LABEL.finditer(text):
        parts.append(escape(text[last : match.start()]))
        label = match.group(0)
        if label in source_ids:
            parts.append(link(label, anchor(ctx.query_id, label)))
        elif label.startswith("rel_") and graph:
            parts.append(link(label, f"{ctx.query_id}-graph"))
        elif label in ctx.invalid_citations:
            parts.append(invalid(label))
        else:
            parts.append(escape(label))
        last = match.end()
    parts.append(escape(text[last:]))
    return "".join(parts)


def _problems(ctx: Context) -> list[tuple[str, str]]:
    """(kind, text) for the error, warnings, degradations, invalid citations and ungrounded claims."""
    out: list[tuple[str, str]] = []
    if ctx.error is not None:
        out.append(("error", f"{type(ctx.error).__name__}: {ctx.error}"))
    for step in ctx.steps:
        if step.error and (ctx.error is None or str(ctx.error) not in step.error):
            out.append(("error", f"step {step.name}: {step.error}"))
    for record in ctx.results:
        if record.error:
            out.append(("error", f"search of {record.collection!r} failed: {record.error}"))
    if ctx.empty_reason:
        out.append(("no hits", ctx.empty_reason))
    for degradation in ctx.degradations:
        out.append(("degraded", f"{degradation.step}: {degradation.kind}: {degradation.reason}"))
    for warning in dict.fromkeys(ctx.warnings):
        out.append(("warning", warning))
    if ctx.invalid_citations:
        invalid = ", ".join(ctx.invalid_citations)
        out.append(("invalid citations", f"{invalid} (not among the retrieved sources)"))
    for claim in ctx.ungrounded_claims:
        out.append(("ungrounded claim", claim))
    if ctx.model_version_match is False:
        out.append(("warning", "the query embedder's model version differs from the index's"))
    return out


def _headline(ctx: Context) -> list[tuple[str, str]]:
    grounded = {True: "yes", False: "no", None: "n/a"}[ctx.grounded]
    tokens = ctx.tokens
    items = [("query id", ctx.query_id)]
    if ctx.mode is not None:
        items.append(("mode", ctx.mode))
    if ctx.answer_text is not None:
        items.append(("grounded", grounded))
    items.append(("total", f"{ctx.latencies_ms.get('total', 0.0):.1f} ms"))
    if ctx.llm_calls:
        items.append(("LLM calls", str(len(ctx.llm_calls))))
        if any(c.input_tokens is not None or c.output_tokens is not None for c in ctx.llm_calls):
            items.append(("tokens", f"{tokens['input']} in / {tokens['output']} out"))
        else:
            items.append(("tokens", "not reported"))
    items.append(("status", "error" if ctx.error is not None else "ok"))
    return items


def _plan_items(ctx: Context) -> list[tuple[str, str, str | None]]:
    """(label, value, reasoning) for gate, rewrites, collections and sub-questions."""
    out: list[tuple[str, str, str | None]] = []
    if ctx.retrieve is not None:
        out.append(("retrieve", "yes" if ctx.retrieve else "no", ctx.gate_reasoning))
    if ctx.rewrites:
        out.append(("rewrites", " | ".join(ctx.rewrites), None))
    if ctx.collections is not None:
        out.append(("collections", ", ".join(ctx.collections) or "(none)", ctx.routing_reasoning))
    elif ctx.options.collections:
        out.append(("collections", ", ".join(ctx.options.collections) + " (given)", None))
    return out


def _sufficient(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "-"}[value]


def _record_title(record: SearchRecord) -> tuple[str, str, str]:
    """(question, collection, the facts line) of one search record."""
    facts = (
        f"{len(record.hits)} hits, {len(record.iterations)} iteration(s), stop: {record.stop_reason.value}, "
        f"mode: {record.used_mode}"
    )
    if record.degraded:
        facts += f", degraded: {record.degraded}"
    if record.error:
        facts += f", failed: {record.error}"
    return record.question, record.collection, facts


def _call_tokens(call: LLMCall) -> tuple[str, str]:
    return _opt(call.input_tokens), _opt(call.output_tokens)


# -- Context: HTML -------------------------------------------------------------------------------------


def _source_sets(ctx: Context) -> tuple[list[Hit], set[str], set[str], set[str]]:
    """The sources shown, their ids, the cited ids and the ids of the chunks in the prompt."""
    sources = _sources(ctx)
    return sources, {h.chunk_id for h in sources}, set(ctx.citations), {h.chunk_id for h in ctx.context_used}


def context_html(ctx: Context) -> str:
    """The whole context as one self-contained, escaped HTML fragment (inline CSS)."""
    qid = ctx.query_id
    sources, source_ids, cited, used = _source_sets(ctx)
    out = [_CSS, f'<div class="agentrag agentrag-context" id="{_e("agentrag-" + qid)}">']

    out.append(f"<p><strong>Question</strong> {_e(ctx.question)}</p>")
    meta = " · ".join(f'<span class="muted">{_e(k)}</span> {_e(v)}' for k, v in _headline(ctx))
    out.append(f"<p>{meta}</p>")

    problems = _problems(ctx)
    if problems:
        out.append("<h4>Errors, warnings and degradations</h4><ul>")
        for kind, text in problems:
            css = "err" if kind in ("error", "invalid citations") else "warn"
            out.append(f'<li><span class="{css}">{_e(kind)}</span>: {_e(text)}</li>')
        out.append("</ul>")

    if ctx.answer_text is not None:
        out.append("<h4>Answer</h4>")
        body = _link_text(
            ctx.answer_text,
            ctx,
            source_ids,
            link=lambda label, target: f'<a href="#{_e(target)}">{_e(label)}</a>',
            invalid=lambda label: f'<span class="invalid" title="{_NOT_RETRIEVED}">{_e(label)}</span>',
            escape=_e,
        )
        out.append(f'<div class="answer">{body}</div>')
        if ctx.citations:
            links = ", ".join(
                f'<a href="#{_e(anchor(qid, c))}">{_e(c)}</a>' if c in source_ids else _e(c)
                for c in ctx.citations
            )
            out.append(f'<p><span class="muted">cited</span> {links}</p>')

    if ctx.steps:
        out.append("<h4>Steps</h4>")
        rows = []
        for number, step in enumerate(ctx.steps, start=1):
            note = ""
            if step.skipped:
                note = f'<span class="muted">skipped: {_e(step.skipped)}</span>'
            if step.error:
                note = f'<span class="err">{_e(step.error)}</span>'
            rows.append([str(number), _e(step.name), _e(step.strategy or "-"), _ms(step.duration_ms), note])
        out.append(_html_table(["#", "step", "strategy", "ms", "note"], rows, numeric=(0, 3)))
        stages = [(k, v) for k, v in ctx.latencies_ms.items() if k != "total"]
        if stages:
            line = " · ".join(f"{_e(k)} {v:.1f} ms" for k, v in stages)
            out.append(f'<p class="muted">stages: {line}</p>')

    plan = _plan_items(ctx)
    if plan or ctx.sub_questions is not None:
        out.append("<h4>Routing and decomposition</h4><ul>")
        for label, value, reasoning in plan:
            why = f' <span class="muted">({_e(reasoning)})</span>' if reasoning else ""
            out.append(f"<li><strong>{_e(label)}</strong>: {_e(value)}{why}</li>")
        if ctx.sub_questions is not None:
            why = (
                f' <span class="muted">({_e(ctx.decompose_reasoning)})</span>'
                if ctx.decompose_reasoning
                else ""
            )
            items = "".join(f"<li>{_e(q)}</li>" for q in ctx.sub_questions)
            out.append(f"<li><strong>sub-questions</strong>{why}<ol>{items}</ol></li>")
        out.append("</ul>")

    if ctx.results:
        out.append("<h4>Search</h4>")
        for record in ctx.results:
            question, collection, facts = _record_title(record)
            css = ' class="err"' if record.error else ""
            title = f"<strong>{_e(question)}</strong> in <code>{_e(collection)}</code>"
            out.append(f"<p>{title}: <span{css}>{_e(facts)}</span></p>")
            rows = []
            for number, it in enumerate(record.iterations, start=1):
                queries = "<br>".join(_e(q) for q in it.queries)
                rows.append(
                    [
                        str(number),
                        queries,
                        str(len(it.hit_ids)),
                        str(it.new_hits),
                        _sufficient(it.sufficient),
                        _e(it.reasoning or ""),
                    ]
                )
            if rows:
                out.append(_html_table(_ITERATION_HEADER, rows, numeric=(0, 2, 3)))

    if sources:
        out.append("<h4>Sources</h4>")
        rows = []
        for number, hit in enumerate(sources, start=1):
            marks = _marks(hit.chunk_id, cited, used)
            text = _e(_snippet(hit.text))
            if len(" ".join(hit.text.split())) > _SNIPPET:
                text = f"<details><summary>{text}</summary><pre>{_e(hit.text)}</pre></details>"
            rows.append(
                [
                    str(number),
                    f'<code id="{_e(anchor(qid, hit.chunk_id))}">{_e(hit.chunk_id)}</code>',
                    _e(hit.collection),
                    _source_cell(hit),
                    _e(hit.section or ""),
                    _e(_opt(hit.page)),
                    _num(hit.score),
                    _e(_opt(hit.vector_rank)),
                    _e(_opt(hit.lexical_rank)),
                    _e(marks),
                    text,
                ]
            )
        out.append(_html_table(_SOURCE_HEADER, rows, numeric=(0, 5, 6, 7, 8)))

    if ctx.graph_context:
        out.append("<h4>Knowledge graph</h4>")
        out.append(f'<pre id="{_e(qid + "-graph")}">{_e(ctx.graph_context)}</pre>')

    if ctx.llm_calls:
        out.append("<h4>LLM calls</h4>")
        rows = []
        for number, call in enumerate(ctx.llm_calls, start=1):
            tokens_in, tokens_out = _call_tokens(call)
            purpose = call.purpose + (" (repair)" if call.repair else "")
            status = f'<span class="err">{_e(call.error)}</span>' if call.error else "ok"
            if call.retries:
                status += f" ({call.retries} retries)"
            messages = "".join(_message_html(m.get("role", "?"), m.get("content", "")) for m in call.messages)
            reply = (
                _message_html("reply", call.reply)
                if call.reply is not None
                else '<p class="muted">no reply</p>'
            )
            details = f"<details><summary>prompt and reply</summary>{messages}{reply}</details>"
            rows.append(
                [
                    str(number),
                    _e(purpose),
                    _e(call.model),
                    tokens_in,
                    tokens_out,
                    _ms(call.latency_ms),
                    status,
                    details,
                ]
            )
        out.append(_html_table(_CALL_HEADER, rows, numeric=(0, 3, 4, 5)))

    out.append("</div>")
    return "".join(out)


# -- Context: Markdown ---------------------------------------------------------------------------------


def context_markdown(ctx: Context) -> str:
    """The context as Markdown (no prompt bodies: see the HTML view or ``ctx.llm_calls[i].messages``)."""
    qid = ctx.query_id
    sources, source_ids, cited, used = _source_sets(ctx)
    parts = [f"**Question** {_md(ctx.question)}"]
    parts.append(" · ".join(f"{_md(k)}: {_md(v)}" for k, v in _headline(ctx)))

    problems = _problems(ctx)
    if problems:
        lines = [f"- **{_md(kind)}**: {_md(text)}" for kind, text in problems]
        parts.append("#### Errors, warnings and degradations\n\n" + "\n".join(lines))

    if ctx.answer_text is not None:

        def line(text: str) -> str:
            return _link_text(
                text,
                ctx,
                source_ids,
                link=lambda label, target: f"[{_md(label)}](#{_e(target)})",
                invalid=lambda label: f"~~{_md(label)}~~",
                escape=_md,
            )

        lines = [f"> {line(text)}" if text.strip() else ">" for text in ctx.answer_text.split("\n")]
        parts.append("#### Answer\n\n" + "\n".join(lines))

    if ctx.steps:
        rows = []
        for number, step in enumerate(ctx.steps, start=1):
            note = f"skipped: {step.skipped}" if step.skipped else ""
            note = f"error: {step.error}" if step.error else note
            rows.append(
                [str(number), _md(step.name), _md(step.strategy or "-"), _ms(step.duration_ms), _md(note)]
            )
        parts.append("#### Steps\n\n" + _md_table(["#", "step", "strategy", "ms", "note"], rows))

    plan = _plan_items(ctx)
    if plan or ctx.sub_questions is not None:
        lines = []
        for label, value, reasoning in plan:
            why = f" ({_md(reasoning)})" if reasoning else ""
            lines.append(f"- **{_md(label)}**: {_md(value)}{why}")
        if ctx.sub_questions is not None:
            why = f" ({_md(ctx.decompose_reasoning)})" if ctx.decompose_reasoning else ""
            lines.append(f"- **sub-questions**{why}")
            lines += [f"  {n}. {_md(q)}" for n, q in enumerate(ctx.sub_questions, start=1)]
        parts.append("#### Routing and decomposition\n\n" + "\n".join(lines))

    if ctx.results:
        blocks = []
        for record in ctx.results:
            question, collection, facts = _record_title(record)
            block = f"**{_md(question)}** in {_md(collection)}: {_md(facts)}"
            rows = [
                [
                    str(n),
                    "<br>".join(_md(q) for q in it.queries),
                    str(len(it.hit_ids)),
                    str(it.new_hits),
                    _sufficient(it.sufficient),
                    _md(it.reasoning or ""),
                ]
                for n, it in enumerate(record.iterations, start=1)
            ]
            if rows:
                block += "\n\n" + _md_table(_ITERATION_HEADER, rows)
            blocks.append(block)
        parts.append("#### Search\n\n" + "\n\n".join(blocks))

    if sources:
        rows = []
        for number, hit in enumerate(sources, start=1):
            marks = _marks(hit.chunk_id, cited, used)
            rows.append(
                [
                    str(number),
                    f'<a id="{_e(anchor(qid, hit.chunk_id))}"></a>{_md(hit.chunk_id)}',
                    _md(hit.collection),
                    _md(_basename(hit.source) or hit.document_id),
                    _md(hit.section or ""),
                    _opt(hit.page),
                    _num(hit.score),
                    _opt(hit.vector_rank),
                    _opt(hit.lexical_rank),
                    _md(marks),
                    _md(_snippet(hit.text, 100)),
                ]
            )
        parts.append("#### Sources\n\n" + _md_table(_SOURCE_HEADER, rows))

    if ctx.graph_context:
        lines = [f"- {_md(fact)}" for fact in ctx.graph_context.splitlines() if fact.strip()]
        parts.append(f'#### Knowledge graph\n\n<a id="{_e(qid + "-graph")}"></a>\n\n' + "\n".join(lines))

    if ctx.llm_calls:
        rows = []
        for number, call in enumerate(ctx.llm_calls, start=1):
            tokens_in, tokens_out = _call_tokens(call)
            purpose = call.purpose + (" (repair)" if call.repair else "")
            status = f"error: {call.error}" if call.error else "ok"
            rows.append(
                [
                    str(number),
                    _md(purpose),
                    _md(call.model),
                    tokens_in,
                    tokens_out,
                    _ms(call.latency_ms),
                    _md(status),
                    str(len(call.messages)),
                ]
            )
        parts.append("#### LLM calls\n\n" + _md_table(_CALL_HEADER, rows))

    return "\n\n".join(parts) + "\n"


# -- SearchResult --------------------------------------------------------------------------------------


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
    out = [_CSS, '<div class="agentrag agentrag-search">']
    out.append(f"<p><strong>Search</strong> {_e(result.query)}</p>")
    meta = " · ".join(f'<span class="muted">{_e(k)}</span> {_e(v)}' for k, v in _result_facts(result))
    out.append(f"<p>{meta}</p>")
    warnings = _result_warnings(result)
    if warnings:
        items = "".join(f'<li><span class="warn">{_e(k)}</span>: {_e(v)}</li>' for k, v in warnings)
        out.append(f"<ul>{items}</ul>")
    if result.hits:
        rows = []
        for hit in result.hits:
            text = _e(_snippet(hit.text))
            if len(" ".join(hit.text.split())) > _SNIPPET:
                text = f"<details><summary>{text}</summary><pre>{_e(hit.text)}</pre></details>"
            rows.append(
                [
                    str(hit.rank),
                    _num(hit.score),
                    f"{_e(_opt(hit.vector_rank))}",
                    f"{_e(_opt(hit.lexical_rank))}",
                    f"<code>{_e(hit.chunk_id)}</code>",
                    _e(hit.collection),
                    _source_cell(hit),
                    _e(hit.section or ""),
                    _e(_opt(hit.page)),
                    text,
                ]
            )
        out.append(_html_table(_HIT_HEADER, rows, numeric=(0, 1, 2, 3, 8)))
    else:
        why = f": {_e(result.empty_reason)}" if result.empty_reason else ""
        out.append(f'<p class="muted">no hits{why}</p>')
    out.append("</div>")
    return "".join(out)


def search_result_markdown(result: SearchResult) -> str:
    """A search result as Markdown (escaped)."""
    parts = [
        f"**Search** {_md(result.query)}",
        " · ".join(f"{_md(k)}: {_md(v)}" for k, v in _result_facts(result)),
    ]
    warnings = _result_warnings(result)
    if warnings:
        parts.append("\n".join(f"- **{_md(k)}**: {_md(v)}" for k, v in warnings))
    if result.hits:
        rows = [
            [
                str(hit.rank),
                _num(hit.score),
                _opt(hit.vector_rank),
                _opt(hit.lexical_rank),
                _md(hit.chunk_id),
                _md(hit.collection),
                _md(_basename(hit.source) or hit.document_id),
                _md(hit.section or ""),
                _opt(hit.page),
                _md(_snippet(hit.text, 100)),
            ]
            for hit in result.hits
        ]
        parts.append(_md_table(_HIT_HEADER, rows))
    else:
        parts.append(f"no hits: {_md(result.empty_reason)}" if result.empty_reason else "no hits")
    return "\n\n".join(parts) + "\n"
