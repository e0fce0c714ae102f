"""Notebook display of contexts and search results: escaped, complete, linked (no database needed)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest

from agentrag.context import (
    Context,
    Degradation,
    SearchIteration,
    SearchRecord,
    StepRecord,
    StopReason,
)
from agentrag.display import (
    anchor,
    context_html,
    context_markdown,
    search_result_html,
    search_result_markdown,
)
from agentrag.errors import RetrievalError
from agentrag.hits import Hit
from agentrag.llm import LLMCall
from agentrag.retrieval.result import SearchResult

XSS = "<script>alert('x')</script>"
QID = "q-0001"
A = "chk_aaaa000000000001"
B = "chk_bbbb000000000002"
C = "chk_cccc000000000003"


def hit(chunk_id: str, rank: int, text: str, **extra: Any) -> Hit:
    base: dict[str, Any] = dict(
        chunk_id=chunk_id,
        document_id="doc_" + chunk_id[4:],
        collection="api",
        text=text,
        score=1.0 / (60 + rank),
        rank=rank,
        start_char=0,
        end_char=len(text),
        source=f"/srv/samples/api/file{rank}.md",
        section="Rate limits",
        vector_rank=rank,
        vector_score=0.8 - rank / 10,
        lexical_rank=rank + 1,
        lexical_score=5.0 - rank,
    )
    base.update(extra)
    return Hit(**base)


def build_context(*, hostile: bool = False) -> Context:
    """A deterministic, fully populated context built from the dataclasses."""
    evil = f" {XSS}" if hostile else ""
    hits = (
        hit(A, 1, "Use the next_cursor field to page through notes." + evil),
        hit(B, 2, "A 429 response carries a Retry-After header." + evil, page=3),
        hit(C, 3, "Webhooks are retried for 24 hours." + evil, section=None, vector_rank=None),
    )
    record = SearchRecord(
        question="How do I paginate?" + evil,
        collection="api",
        hits=hits[:2],
        iterations=(
            SearchIteration(("How do I paginate?" + evil,), (A, C), 2, False, "missing the 429 part" + evil),
            SearchIteration(("paginate 429 retry",), (A, B), 1, True, "covers both"),
        ),
        stop_reason=StopReason.SUFFICIENT,
        used_mode="hybrid",
    )
    failed = SearchRecord(
        question="What happens on a 429?",
        collection="support",
        hits=(),
        iterations=(),
        stop_reason=StopReason.RETRIEVAL_FAILED,
        used_mode="none",
        error="StoreError: connection refused" + evil,
    )
    calls = (
        LLMCall(
            purpose="route",
            model="fake",
            messages=(
                {"role": "system", "content": "Pick collections." + evil},
                {"role": "user", "content": "Q"},
            ),
            reply='{"collections": ["api"]}' + evil,
            input_tokens=120,
            output_tokens=12,
            latency_ms=4.25,
        ),
        LLMCall(
            purpose="answer",
            model="fake",
            messages=({"role": "user", "content": "Answer from the sources."},),
            reply=None,
            latency_ms=1.5,
            error="LLMTimeoutError: timed out",
        ),
    )
    answer = (
        f"Page with next_cursor [{A}]. On a 429, wait for Retry-After [{B}, chk_ffff99999999].{evil}\n"
        "Webhooks retry for a day."
    )
    return Context(
        question="How do I paginate the notes API and what happens on a 429?" + evil,
        retrieve=True,
        gate_reasoning="needs the docs" + evil,
        collections=("api", "support"),
        routing_reasoning="API questions" + evil,
        sub_questions=("How do I paginate?" + evil, "What happens on a 429?"),
        decompose_reasoning="two parts",
        results=(record, failed),
        answer_text=answer,
        context_used=hits[:2],
        citations=(A, B),
        invalid_citations=("chk_ffff99999999",),
        ungrounded_claims=("Webhooks retry for a day." + evil,),
        grounded=False,
        mode="full",
        warnings=("question truncated" + evil,),
        degradations=(Degradation("search", "retrieval-failed", "1 of 2 searches failed" + evil),),
        steps=(
            StepRecord("route", "llm", 5.0),
            StepRecord("decompose", "local", 0.5),
            StepRecord("search", "local:self-correct", 12.25),
            StepRecord("rerank", None, 0.0, skipped="nothing to rerank"),
            StepRecord("answer", "llm", 2.0),
        ),
        llm_calls=calls,
        stage_ms=(("retrieval", 12.0), ("generation", 1.5)),
        query_id=QID,
    )


@pytest.fixture
def hostile() -> Context:
    return build_context(hostile=True)


# -- escaping -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("render", [context_html, context_markdown])
def test_hostile_text_is_escaped_everywhere(hostile: Context, render: Any) -> None:
    out = render(hostile)
    assert "<script" not in out.lower()
    assert "&lt;script&gt;" in out
    # every hostile field made it into the rendering, escaped
    assert out.count("&lt;script&gt;") >= (12 if render is context_html else 8)


def test_hostile_chunk_text_and_source_in_search_results_are_escaped() -> None:
    evil = hit(A, 1, XSS, source=f"/tmp/{XSS}.md", section=XSS, collection="api")
    result = SearchResult(query=XSS, collections=("api",), mode="hybrid", used_mode="hybrid", hits=(evil,))
    for out in (search_result_html(result), search_result_markdown(result), result._repr_html_()):
        assert "<script" not in out.lower()
        assert "&lt;script&gt;" in out


def test_attribute_values_cannot_be_broken_out_of() -> None:
    ctx = replace(build_context(), query_id='x" onmouseover="alert(1)')
    out = context_html(ctx)
    assert 'onmouseover="alert(1)"' not in out
    assert "&quot; onmouseover=&quot;alert(1)" in out


def test_hostile_answer_citation_like_text_is_not_linked_raw() -> None:
    ctx = replace(build_context(), answer_text=f"see [chk_<img src=x onerror=alert(1)>] and [{A}]")
    out = context_html(ctx)
    assert "<img" not in out
    assert f'<a href="#{QID}-{A}">{A}</a>' in out


# -- content ------------------------------------------------------------------------------------------


def test_html_has_every_section(hostile: Context) -> None:
    out = context_html(hostile)
    for title in (
        "Errors, warnings and degradations",
        "Answer",
        "Steps",
        "Routing and decomposition",
        "Search",
        "Sources",
        "LLM calls",
    ):
        assert f"<h4>{title}</h4>" in out
    # steps with timings and strategies
    assert "local:self-correct" in out and "12.2" in out and "skipped: nothing to rerank" in out
    # routing reasoning and sub-questions
    assert "API questions" in out and "<ol><li>How do I paginate?" in out
    # per (question, collection): iterations, sufficiency, reasoning and stop reason
    assert "stop: sufficient" in out and "missing the 429 part" in out and "paginate 429 retry" in out
    assert "stop: retrieval_failed" in out and "StoreError: connection refused" in out
    # sources: chunk id, file name (full path as tooltip), section, score, leg ranks
    assert "file1.md" in out and 'title="/srv/samples/api/file1.md"' in out and "Rate limits" in out
    assert f"{1 / 61:.4f}" in out
    # problems
    assert "retrieval-failed" in out and "question truncated" in out and "chk_ffff99999999" in out
    assert "Webhooks retry for a day." in out
    # LLM calls: purpose, model, tokens, latency; the prompt and reply inside <details>
    assert "<details><summary>prompt and reply</summary>" in out
    assert "Pick collections." in out and "&quot;collections&quot;" in out
    assert ">120<" in out and ">12<" in out and "4.2" in out and "LLMTimeoutError: timed out" in out
    assert out.startswith("<style>") and "</style>" in out


def test_citations_link_to_source_anchors() -> None:
    ctx = build_context()
    out = context_html(ctx)
    for chunk_id in (A, B):
        target = anchor(QID, chunk_id)
        assert target == f"{QID}-{chunk_id}"
        assert f'href="#{target}"' in out
        assert f'id="{target}"' in out
    # every link target exists in the document
    targets = set(re.findall(r'href="#([^"]+)"', out))
    ids = set(re.findall(r'id="([^"]+)"', out))
    assert targets and targets <= ids
    # an invalid citation is marked, not linked
    assert 'href="#q-0001-chk_ffff99999999"' not in out
    assert '<span class="invalid"' in out
    md = context_markdown(ctx)
    assert f"[chk\\_aaaa000000000001](#{QID}-{A})" in md
    assert f'<a id="{QID}-{A}"></a>' in md


def test_error_context_renders() -> None:
    ctx = Context(question="q", error=RetrievalError("every search failed"), query_id="e1")
    html_out = context_html(ctx)
    assert "RetrievalError: every search failed" in html_out and "status</span> error" in html_out
    assert "**error**: RetrievalError: every search failed" in context_markdown(ctx)


def test_minimal_context_renders_without_empty_sections() -> None:
    ctx = Context(question="just a question", query_id="m1")
    out = context_html(ctx)
    assert "just a question" in out
    for title in ("Answer", "Steps", "Search", "Sources", "LLM calls"):
        assert f"<h4>{title}</h4>" not in out


def test_context_repr_hooks_use_display() -> None:
    ctx = build_context()
    assert ctx._repr_html_() == context_html(ctx)
    assert ctx._repr_markdown_() == context_markdown(ctx)


def test_search_result_rendering() -> None:
    result = SearchResult(
        query="rate limits",
        collections=("api",),
        mode="hybrid",
        used_mode="lexical",
        hits=(hit(A, 1, "Rate limits are per workspace."),),
        degraded="vector leg unavailable",
        warnings=("vector leg unavailable", "model version differs"),
        timings_ms={"embed": 1.0, "vector": 2.0, "lexical": 3.0, "fuse": 0.1, "fetch": 0.5, "total": 6.6},
    )
    out = result._repr_html_()
    assert "hybrid → lexical" in out and "vector leg unavailable" in out and "model version differs" in out
    assert "Rate limits are per workspace." in out and "6.6 ms" in out
    md = result._repr_markdown_()
    assert md.count("vector leg unavailable") == 1
    assert "| 1 | 0.0164 | 1 | 2 | chk\\_aaaa000000000001 |" in md
    empty = replace(result, hits=())
    assert "no hits" in empty._repr_html_() and "no hits" in empty._repr_markdown_()


def test_markdown_snapshot(snapshot: Any) -> None:
    assert context_markdown(build_context(hostile=True)) == snapshot


def test_graph_citations_link_to_the_knowledge_graph_section() -> None:
    ctx = replace(
        build_context(),
        graph_context="[rel_12] Team plan --has_limit--> 300 requests/min <script>",
        answer_text=f"Team allows 300 requests a minute [rel_12] [{A}].",
        citations=("rel_12", A),
        invalid_citations=(),
    )
    out = context_html(ctx)
    assert f'<a href="#{QID}-graph">rel_12</a>' in out and f'<pre id="{QID}-graph">' in out
    assert "<script>" not in out
    md = context_markdown(ctx)
    assert f"[rel\\_12](#{QID}-graph)" in md and f'<a id="{QID}-graph"></a>' in md


def test_the_renderers_are_registered_when_agentrag_loads_and_imported_on_first_use() -> None:
    code = (
        "import sys\n"
        "import agentrag\n"
        "from agentrag.retrieval.result import SearchResult\n"
        "print('agentrag.display.result' in sys.modules)\n"
        "result = SearchResult(query='q', collections=('c',), mode='hybrid', used_mode='hybrid', hits=())\n"
        "html, md = result._repr_html_(), result._repr_markdown_()\n"
        "print('agentrag.display.result' in sys.modules, 'no hits' in html, 'no hits' in md)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True", "True"]


def test_a_type_without_a_renderer_has_no_notebook_view() -> None:
    from agentrag._renderers import Renderable

    class Plain(Renderable):
        pass

    assert Plain()._repr_html_() is None and Plain()._repr_markdown_() is None


# -- the answer's Markdown ----------------------------------------------------------------------------


def test_the_answer_markdown_is_rendered_escaped_first() -> None:
    answer = (
        f"**Team** allows *300* requests a minute [{A}].\n\n"
        "| plan | limit |\n|---|---|\n| Team | `300/min` |\n\n"
        f"- first, see [{B}]\n- second <b>bold?</b>\n\n"
        "1. one\n2. two\n\n"
        "## Next\n```\nGET /notes?cursor=<x>\n```"
    )
    out = context_html(replace(build_context(), answer_text=answer))
    body = out.split('<div class="answer">', 1)[1].split("</div>", 1)[0]
    assert (
        f'<p><strong>Team</strong> allows <em>300</em> requests a minute [<a href="#{QID}-{A}">{A}</a>].</p>'
        in body
    )
    assert "<table><thead><tr><th>plan</th><th>limit</th></tr></thead>" in body
    assert "<td><code>300/min</code></td>" in body
    assert (
        f'<ul><li>first, see [<a href="#{QID}-{B}">{B}</a>]</li><li>second &lt;b&gt;bold?&lt;/b&gt;</li></ul>'
        in body
    )
    assert "<ol><li>one</li><li>two</li></ol>" in body and "<h5>Next</h5>" in body
    assert "<pre><code>GET /notes?cursor=&lt;x&gt;</code></pre>" in body
    assert "**" not in body and "<b>" not in body


def test_an_answer_cannot_add_a_link_or_markup() -> None:
    answer = f"[click](javascript:alert(1)) **{XSS}** `<img src=x onerror=alert(1)>` snake_case_name"
    out = context_html(replace(build_context(), answer_text=answer))
    body = out.split('<div class="answer">', 1)[1].split("</div>", 1)[0]
    assert "<a " not in body and "<script" not in body and "<img" not in body
    assert "<strong>&lt;script&gt;" in body and "snake_case_name" in body  # no italics inside a word
    md = context_markdown(replace(build_context(), answer_text=answer))
    assert "\\[click\\](javascript" in md and "<script" not in md and "**&lt;script&gt;" in md
