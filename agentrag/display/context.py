"""A :class:`~agentrag.context.Context` as HTML or Markdown.

A context shows, in order: the question; errors, warnings and degradations; the answer with every
citation linked to its source (the source row's anchor is ``#<query_id>-<chunk_id>``); the steps
with their strategies and timings; the gate, rewrites, collections (with the routing reasoning) and
sub-questions; each search per (question, collection) with its iterations (queries, new hits,
sufficiency) and stop reason; the sources with their scores and leg ranks; the knowledge-graph
facts; the LLM calls (purpose, model, tokens, latency, and in HTML the rendered prompt and reply in
a collapsible ``<details>``).
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Any

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
from agentrag.display.markdown import markdown_html
from agentrag.readers.locators import format_locator

if TYPE_CHECKING:
    from agentrag.context import Context, SearchRecord
    from agentrag.hits import Hit
    from agentrag.llm import LLMCall

__all__ = ["anchor", "context_html", "context_markdown"]

_LABEL = re.compile(r"(?<![A-Za-z0-9_])(?:chk|rel)_[A-Za-z0-9]+")
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
_ITERATION_HEADER = ("iteration", "queries", "hits", "new", "sufficient", "reasoning")
_CALL_HEADER = ("#", "purpose", "model", "tokens in", "tokens out", "ms", "status", "messages")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _marks(chunk_id: str, cited: set[str], used: set[str]) -> str:
    return ", ".join(m for m, on in (("cited", chunk_id in cited), ("in context", chunk_id in used)) if on)


def _message_html(role: str, content: str) -> str:
    return f'<div><span class="muted">{esc(role)}</span><pre>{esc(content)}</pre></div>'


def _answer_md(text: str) -> str:
    """An answer's own text in the Markdown view: its Markdown kept (emphasis, code, lists,
    tables), HTML escaped and brackets backslashed, so it adds neither markup nor a link."""
    return re.sub(r"([\\\[\]])", r"\\\1", html.escape(text, quote=False))


def anchor(query_id: str, chunk_id: str) -> str:
    """The HTML id of a source row: ``<query_id>-<chunk_id>`` (link to it with ``#`` + this)."""
    return f"{query_id}-{chunk_id}"


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
    if ctx.answer_confidence is not None:
        items.append(("confidence", f"{ctx.answer_confidence:.2f}"))
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
    return opt(call.input_tokens), opt(call.output_tokens)


# -- Context: HTML -------------------------------------------------------------------------------------


def _source_sets(ctx: Context) -> tuple[list[Hit], set[str], set[str], set[str]]:
    """The sources shown, their ids, the cited ids and the ids of the chunks in the prompt."""
    sources = _sources(ctx)
    return sources, {h.chunk_id for h in sources}, set(ctx.citations), {h.chunk_id for h in ctx.context_used}


def _support_html(ctx: Context, source_ids: set[str]) -> list[str]:
    """Each answer sentence beside its supporting span, highlighted (``<mark>``) in its chunk."""
    if not ctx.support:
        return []
    hits = {h.chunk_id: h for h in ctx.context_used}
    rows = []
    for span in ctx.support:
        hit = hits.get(span.chunk_id or "")
        shown = esc(snippet(span.text))
        if hit is not None and span.start is not None and span.end is not None:
            a, b = span.start - hit.start_char, span.end - hit.start_char
            if 0 <= a <= b <= len(hit.text):
                around = (
                    f"{esc(hit.text[max(0, a - 120) : a])}<mark>{esc(hit.text[a:b])}</mark>"
                    f"{esc(hit.text[b : b + 120])}"
                )
                shown = f"<details><summary>{shown}</summary><pre>{around}</pre></details>"
        chunk = esc(span.chunk_id or "-")
        if span.chunk_id in source_ids:
            chunk = f'<a href="#{esc(anchor(ctx.query_id, span.chunk_id or ""))}">{chunk}</a>'
        verdict = "yes" if span.supported else '<span class="err">no</span>'
        rows.append([esc(span.sentence), chunk, f"{span.score:.2f}", verdict, shown])
    header = ["sentence", "chunk", "support", "supported", "supporting span"]
    return ["<h4>Support</h4>", html_table(header, rows, numeric=(2,))]


def context_html(ctx: Context) -> str:
    """The whole context as one self-contained, escaped HTML fragment (inline CSS)."""
    qid = ctx.query_id
    sources, source_ids, cited, used = _source_sets(ctx)
    out = [CSS, f'<div class="agentrag agentrag-context" id="{esc("agentrag-" + qid)}">']
    out.extend(_question_html(ctx))
    out.extend(_problems_html(ctx))
    out.extend(_answer_html(ctx, source_ids))
    out.extend(_steps_html(ctx))
    out.extend(_routing_html(ctx))
    out.extend(_search_html(ctx))
    out.extend(_sources_html(ctx, sources, cited, used))
    if ctx.graph_context:
        out.append("<h4>Knowledge graph</h4>")
        out.append(f'<pre id="{esc(qid + "-graph")}">{esc(ctx.graph_context)}</pre>')
    out.extend(_llm_calls_html(ctx))
    out.append("</div>")
    return "".join(out)


def _question_html(ctx: Context) -> list[str]:
    """The question and the headline facts (mode, confidence, timings, ...)."""
    meta = " · ".join(f'<span class="muted">{esc(k)}</span> {esc(v)}' for k, v in _headline(ctx))
    return [f"<p><strong>Question</strong> {esc(ctx.question)}</p>", f"<p>{meta}</p>"]


def _problems_html(ctx: Context) -> list[str]:
    """Errors, warnings and degradations, one item each (nothing when there are none)."""
    problems = _problems(ctx)
    if not problems:
        return []
    out = ["<h4>Errors, warnings and degradations</h4><ul>"]
    for kind, text in problems:
        css = "err" if kind in ("error", "invalid citations") else "warn"
        out.append(f'<li><span class="{css}">{esc(kind)}</span>: {esc(text)}</li>')
    out.append("</ul>")
    return out


def _answer_html(ctx: Context, source_ids: set[str]) -> list[str]:
    """The answer's Markdown rendered (escaped first), its citations linked to their sources, and
    the support of each sentence."""
    if ctx.answer_text is None:
        return []
    out = ["<h4>Answer</h4>"]
    body = markdown_html(
        ctx.answer_text,
        _LABEL,
        lambda label: _link_text(
            label,
            ctx,
            source_ids,
            link=lambda text, target: f'<a href="#{esc(target)}">{esc(text)}</a>',
            invalid=lambda text: f'<span class="invalid" title="{_NOT_RETRIEVED}">{esc(text)}</span>',
            escape=esc,
        ),
    )
    out.append(f'<div class="answer">{body}</div>')  # its Markdown rendered, escaped first
    if ctx.citations:
        links = ", ".join(
            f'<a href="#{esc(anchor(ctx.query_id, c))}">{esc(c)}</a>' if c in source_ids else esc(c)
            for c in ctx.citations
        )
        out.append(f'<p><span class="muted">cited</span> {links}</p>')
    out.extend(_support_html(ctx, source_ids))
    return out


def _steps_html(ctx: Context) -> list[str]:
    """The steps with their strategies, timings and notes, then the answer's stages."""
    if not ctx.steps:
        return []
    out = ["<h4>Steps</h4>"]
    rows = []
    for number, step in enumerate(ctx.steps, start=1):
        note = ""
        if step.skipped:
            note = f'<span class="muted">skipped: {esc(step.skipped)}</span>'
        if step.error:
            note = f'<span class="err">{esc(step.error)}</span>'
        rows.append([str(number), esc(step.name), esc(step.strategy or "-"), _ms(step.duration_ms), note])
    out.append(html_table(["#", "step", "strategy", "ms", "note"], rows, numeric=(0, 3)))
    stages = [(k, v) for k, v in ctx.latencies_ms.items() if k != "total"]
    if stages:
        line = " · ".join(f"{esc(k)} {v:.1f} ms" for k, v in stages)
        out.append(f'<p class="muted">stages: {line}</p>')
    return out


def _routing_html(ctx: Context) -> list[str]:
    """The gate, rewrites and collections with their reasoning, and the sub-questions."""
    plan = _plan_items(ctx)
    if not plan and ctx.sub_questions is None:
        return []
    out = ["<h4>Routing and decomposition</h4><ul>"]
    for label, value, reasoning in plan:
        why = f' <span class="muted">({esc(reasoning)})</span>' if reasoning else ""
        out.append(f"<li><strong>{esc(label)}</strong>: {esc(value)}{why}</li>")
    if ctx.sub_questions is not None:
        why = (
            f' <span class="muted">({esc(ctx.decompose_reasoning)})</span>' if ctx.decompose_reasoning else ""
        )
        items = "".join(f"<li>{esc(q)}</li>" for q in ctx.sub_questions)
        out.append(f"<li><strong>sub-questions</strong>{why}<ol>{items}</ol></li>")
    out.append("</ul>")
    return out


def _search_html(ctx: Context) -> list[str]:
    """Each search per (question, collection): its outcome, then a row per iteration."""
    if not ctx.results:
        return []
    out = ["<h4>Search</h4>"]
    for record in ctx.results:
        question, collection, facts = _record_title(record)
        css = ' class="err"' if record.error else ""
        title = f"<strong>{esc(question)}</strong> in <code>{esc(collection)}</code>"
        out.append(f"<p>{title}: <span{css}>{esc(facts)}</span></p>")
        rows = [
            [
                str(number),
                "<br>".join(esc(q) for q in it.queries),
                str(len(it.hit_ids)),
                str(it.new_hits),
                _sufficient(it.sufficient),
                esc(it.reasoning or ""),
            ]
            for number, it in enumerate(record.iterations, start=1)
        ]
        if rows:
            out.append(html_table(_ITERATION_HEADER, rows, numeric=(0, 2, 3)))
    return out


def _sources_html(ctx: Context, sources: list[Hit], cited: set[str], used: set[str]) -> list[str]:
    """A row per source (its anchor, scores, leg ranks, cited/used marks and text)."""
    if not sources:
        return []
    rows = []
    for number, hit in enumerate(sources, start=1):
        text = esc(snippet(hit.text))
        if len(" ".join(hit.text.split())) > SNIPPET:
            text = f"<details><summary>{text}</summary><pre>{esc(hit.text)}</pre></details>"
        rows.append(
            [
                str(number),
                f'<code id="{esc(anchor(ctx.query_id, hit.chunk_id))}">{esc(hit.chunk_id)}</code>',
                esc(hit.collection),
                source_cell(hit),
                esc(format_locator(hit.locator, section=hit.section)),
                esc(opt(hit.page)),
                num(hit.score),
                esc(opt(hit.vector_rank)),
                esc(opt(hit.lexical_rank)),
                esc(_marks(hit.chunk_id, cited, used)),
                text,
            ]
        )
    return ["<h4>Sources</h4>", html_table(_SOURCE_HEADER, rows, numeric=(0, 5, 6, 7, 8))]


def _llm_calls_html(ctx: Context) -> list[str]:
    """A row per LLM call, its prompt and reply in a collapsible ``<details>``."""
    if not ctx.llm_calls:
        return []
    rows = []
    for number, call in enumerate(ctx.llm_calls, start=1):
        tokens_in, tokens_out = _call_tokens(call)
        purpose = call.purpose + (" (repair)" if call.repair else "")
        status = f'<span class="err">{esc(call.error)}</span>' if call.error else "ok"
        if call.retries:
            status += f" ({call.retries} retries)"
        messages = "".join(_message_html(m.get("role", "?"), m.get("content", "")) for m in call.messages)
        reply = (
            _message_html("reply", call.reply) if call.reply is not None else '<p class="muted">no reply</p>'
        )
        details = f"<details><summary>prompt and reply</summary>{messages}{reply}</details>"
        rows.append(
            [
                str(number),
                esc(purpose),
                esc(call.model),
                tokens_in,
                tokens_out,
                _ms(call.latency_ms),
                status,
                details,
            ]
        )
    return ["<h4>LLM calls</h4>", html_table(_CALL_HEADER, rows, numeric=(0, 3, 4, 5))]


# -- Context: Markdown ---------------------------------------------------------------------------------


def context_markdown(ctx: Context) -> str:
    """The context as Markdown (no prompt bodies: see the HTML view or ``ctx.llm_calls[i].messages``)."""
    qid = ctx.query_id
    sources, source_ids, cited, used = _source_sets(ctx)
    parts = [f"**Question** {md_esc(ctx.question)}"]
    parts.append(" · ".join(f"{md_esc(k)}: {md_esc(v)}" for k, v in _headline(ctx)))

    problems = _problems(ctx)
    if problems:
        lines = [f"- **{md_esc(kind)}**: {md_esc(text)}" for kind, text in problems]
        parts.append("#### Errors, warnings and degradations\n\n" + "\n".join(lines))

    if ctx.answer_text is not None:

        def line(text: str) -> str:
            return _link_text(
                text,
                ctx,
                source_ids,
                link=lambda label, target: f"[{md_esc(label)}](#{esc(target)})",
                invalid=lambda label: f"~~{md_esc(label)}~~",
                escape=_answer_md,
            )

        lines = [f"> {line(text)}" if text.strip() else ">" for text in ctx.answer_text.split("\n")]
        parts.append("#### Answer\n\n" + "\n".join(lines))
        if ctx.support:
            rows = [
                [
                    md_esc(span.sentence),
                    md_esc(span.chunk_id or "-"),
                    f"{span.score:.2f}",
                    "yes" if span.supported else "no",
                    md_esc(snippet(span.text)),
                ]
                for span in ctx.support
            ]
            header = ["sentence", "chunk", "support", "supported", "supporting span"]
            parts.append("#### Support\n\n" + md_table(header, rows))

    if ctx.steps:
        rows = []
        for number, step in enumerate(ctx.steps, start=1):
            note = f"skipped: {step.skipped}" if step.skipped else ""
            note = f"error: {step.error}" if step.error else note
            rows.append(
                [
                    str(number),
                    md_esc(step.name),
                    md_esc(step.strategy or "-"),
                    _ms(step.duration_ms),
                    md_esc(note),
                ]
            )
        parts.append("#### Steps\n\n" + md_table(["#", "step", "strategy", "ms", "note"], rows))

    plan = _plan_items(ctx)
    if plan or ctx.sub_questions is not None:
        lines = []
        for label, value, reasoning in plan:
            why = f" ({md_esc(reasoning)})" if reasoning else ""
            lines.append(f"- **{md_esc(label)}**: {md_esc(value)}{why}")
        if ctx.sub_questions is not None:
            why = f" ({md_esc(ctx.decompose_reasoning)})" if ctx.decompose_reasoning else ""
            lines.append(f"- **sub-questions**{why}")
            lines += [f"  {n}. {md_esc(q)}" for n, q in enumerate(ctx.sub_questions, start=1)]
        parts.append("#### Routing and decomposition\n\n" + "\n".join(lines))

    if ctx.results:
        blocks = []
        for record in ctx.results:
            question, collection, facts = _record_title(record)
            block = f"**{md_esc(question)}** in {md_esc(collection)}: {md_esc(facts)}"
            rows = [
                [
                    str(n),
                    "<br>".join(md_esc(q) for q in it.queries),
                    str(len(it.hit_ids)),
                    str(it.new_hits),
                    _sufficient(it.sufficient),
                    md_esc(it.reasoning or ""),
                ]
                for n, it in enumerate(record.iterations, start=1)
            ]
            if rows:
                block += "\n\n" + md_table(_ITERATION_HEADER, rows)
            blocks.append(block)
        parts.append("#### Search\n\n" + "\n\n".join(blocks))

    if sources:
        rows = []
        for number, hit in enumerate(sources, start=1):
            marks = _marks(hit.chunk_id, cited, used)
            rows.append(
                [
                    str(number),
                    f'<a id="{esc(anchor(qid, hit.chunk_id))}"></a>{md_esc(hit.chunk_id)}',
                    md_esc(hit.collection),
                    md_esc(basename(hit.source) or hit.document_id),
                    md_esc(format_locator(hit.locator, section=hit.section)),
                    opt(hit.page),
                    num(hit.score),
                    opt(hit.vector_rank),
                    opt(hit.lexical_rank),
                    md_esc(marks),
                    md_esc(snippet(hit.text, 100)),
                ]
            )
        parts.append("#### Sources\n\n" + md_table(_SOURCE_HEADER, rows))

    if ctx.graph_context:
        lines = [f"- {md_esc(fact)}" for fact in ctx.graph_context.splitlines() if fact.strip()]
        parts.append(f'#### Knowledge graph\n\n<a id="{esc(qid + "-graph")}"></a>\n\n' + "\n".join(lines))

    if ctx.llm_calls:
        rows = []
        for number, call in enumerate(ctx.llm_calls, start=1):
            tokens_in, tokens_out = _call_tokens(call)
            purpose = call.purpose + (" (repair)" if call.repair else "")
            status = f"error: {call.error}" if call.error else "ok"
            rows.append(
                [
                    str(number),
                    md_esc(purpose),
                    md_esc(call.model),
                    tokens_in,
                    tokens_out,
                    _ms(call.latency_ms),
                    md_esc(status),
                    str(len(call.messages)),
                ]
            )
        parts.append("#### LLM calls\n\n" + md_table(_CALL_HEADER, rows))

    return "\n\n".join(parts) + "\n"
