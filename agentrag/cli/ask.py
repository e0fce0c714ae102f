"""``agentrag ask``: the pipeline (route, decompose, enrich, search, rerank, answer) on one question."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from agentrag.cli.common import (
    FILTER_HELP,
    FUSION_HELP,
    SEARCH_MODES,
    AddCommand,
    Load,
    principal_options,
    print_json,
    scope_of,
    scope_options,
    search_filters,
)

__all__ = ["register"]


def _source_line(hit: Any) -> str:
    from agentrag.readers.locators import format_locator

    where = hit.source or hit.document_id
    if hit.locator:
        return f"[{hit.chunk_id}] {where}, {format_locator(hit.locator)}"
    if hit.section:
        where += f", section: {hit.section}"
    if hit.page is not None:
        where += f", page {hit.page}"
    return f"[{hit.chunk_id}] {where}"


_SOURCE_KEYS = ("chunk_id", "document_id", "collection", "source", "section", "page", "locator", "score")


def _ask_dict(ctx: Any, proof: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "query_id": ctx.query_id,
        "question": ctx.question,
        "answer": ctx.answer_text,
        "mode": ctx.mode,
        "grounded": ctx.grounded,
        "answer_confidence": ctx.answer_confidence,
        "citations": list(ctx.citations),
        "invalid_citations": list(ctx.invalid_citations),
        "ungrounded_claims": list(ctx.ungrounded_claims),
        "support": [asdict(span) for span in ctx.support],
        "sources": [{k: getattr(h, k) for k in _SOURCE_KEYS} for h in ctx.context_used],
        "graph_context": ctx.graph_context,
        "warnings": list(ctx.warnings),
        "empty_reason": ctx.empty_reason,
        "latency_ms": ctx.latencies_ms,
        "tokens": ctx.tokens,
    }
    if proof:
        out["proof"] = ctx.proof().to_dict()
    return out


def _print_answer(ctx: Any, *, streamed: bool, load: Load | None = None) -> None:
    if ctx.mode == "raw-results":
        print("The language model failed, so there is no generated answer. The retrieved sources:")
    elif not streamed:
        print(ctx.answer_text or "")
    cited = set(ctx.citations)
    if ctx.context_used:
        print("\nSources:")
        for number, hit in enumerate(ctx.context_used, start=1):
            mark = "  (cited)" if hit.chunk_id in cited else ""
            print(f"  {number}. {_source_line(hit)}{mark}")
            if ctx.mode == "raw-results":
                snippet = " ".join(hit.text.split())
                print(f"     {snippet[:300]}{'...' if len(snippet) > 300 else ''}")
    graph_cited = [c for c in ctx.citations if c.startswith("rel_")]
    if ctx.graph_context and (graph_cited or ctx.mode == "graph-only"):
        print("\nKnowledge graph:")
        for line in ctx.graph_context.splitlines():
            print(f"  {line}")
    if ctx.invalid_citations:
        print(f"\nInvalid citations (not among the retrieved sources): {', '.join(ctx.invalid_citations)}")
    if ctx.ungrounded_claims:
        print("\nUngrounded claims (no valid citation, or the cited source does not say it):")
        for claim in ctx.ungrounded_claims:
            print(f"  - {claim}")
    grounded = {True: "yes", False: "no", None: "n/a"}[ctx.grounded]
    total = ctx.latencies_ms.get("total", 0.0)
    timing = load.line("answer", total) if load is not None else f"{total:.0f} ms"
    confidence = "" if ctx.answer_confidence is None else f"  confidence: {ctx.answer_confidence:.2f}"
    print(f"\nmode: {ctx.mode}  grounded: {grounded}{confidence}  sources: {len(ctx.context_used)}  {timing}")
    for warning in dict.fromkeys(ctx.warnings):
        print(f"warning: {warning}", file=sys.stderr)


def cmd_ask(args: argparse.Namespace) -> int:
    import os

    from agentrag.context import Context
    from agentrag.steps import answer_stream, new

    model = args.llm or os.environ.get("AGENTRAG_LLM") or None
    load = Load()
    store = load.store(args, needs_model=args.mode in ("vector", "hybrid") or args.route)
    ctx = new(
        args.question,
        store=store,
        llm=model,
        collections=args.collection or None,
        mode=args.mode,
        fusion=args.fusion,
        limit=args.top_k,
        scope=scope_of(args),
        filters=search_filters(args.filter),
    )
    if args.route:
        ctx = ctx.route()
    if args.decompose:
        ctx = ctx.decompose()
    if args.entity:
        ctx = ctx.enrich(entity=args.entity, depth=args.depth)
    ctx = ctx.search(self_correct=args.self_correct).rerank()
    streamed = args.stream and not args.json
    if streamed:
        for item in answer_stream(ctx, suppress_ungrounded=args.suppress_ungrounded):
            if isinstance(item, Context):
                ctx = item
            elif not ctx.error:
                print(item, end="", flush=True)
        print()
    else:
        ctx = ctx.answer(suppress_ungrounded=args.suppress_ungrounded)
    ctx.raise_for_error()
    if args.json:
        print_json({**_ask_dict(ctx, args.proof), "load_ms": load.to_dict()})
        return 0
    _print_answer(ctx, streamed=streamed, load=load)
    if args.proof:
        print("\nRetrieval proof:")
        print(ctx.proof().to_json())
    return 0


def register(sub: Any, add: AddCommand) -> None:
    from agentrag.retrieval.fusion import DEFAULT_FUSION, FUSIONS

    p = add(sub, "ask", cmd_ask, "answer a question from the collections, with citations and sources")
    p.add_argument("question")
    p.add_argument("--collection", "-c", action="append", help="collection to search (repeatable)")
    p.add_argument("--llm", help="model name for litellm (default: $AGENTRAG_LLM; none: extractive answer)")
    p.add_argument("--self-correct", action="store_true", help="judge the results and rewrite the query")
    p.add_argument("--route", action="store_true", help="pick the collections worth searching first")
    p.add_argument("--decompose", action="store_true", help="split a multi-part question into sub-questions")
    p.add_argument("--mode", default="hybrid", choices=list(SEARCH_MODES))
    p.add_argument("--top-k", type=int, default=5, help="chunks per search (default 5)")
    p.add_argument("--fusion", default=DEFAULT_FUSION, choices=list(FUSIONS), help=FUSION_HELP)
    p.add_argument("--entity", help="add this entity's knowledge-graph neighbourhood to the context")
    p.add_argument("--depth", type=int, default=1, help="hops of the --entity neighbourhood (default 1)")
    p.add_argument("--filter", "-f", action="append", metavar="KEY=VALUE", help=FILTER_HELP)
    p.add_argument("--suppress-ungrounded", action="store_true", help="strip uncited sentences")
    p.add_argument("--stream", action="store_true", help="print the answer as it is generated")
    p.add_argument("--proof", action="store_true", help="print the retrieval proof (JSON)")
    scope_options(p)
    principal_options(p)
