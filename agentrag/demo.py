"""``agentrag demo`` (what ``make demo`` runs): ingest the sample corpus, then answer two
questions with the full pipeline, printing every step.

Without an LLM every step uses its local strategy; set ``AGENTRAG_LLM`` to a litellm model
string (e.g. ``gpt-4o-mini`` or ``ollama/llama3.1``) to run the same pipeline with it.
"""

from __future__ import annotations

import argparse
import os
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.context import Context

if TYPE_CHECKING:
    from agentrag.store.ingest import IngestReport

QUESTIONS = (
    "How do I paginate through the notes API and what happens when I hit the rate limit?",
    "Compare support response times and API rate limits between the Team and Business plans.",
)


def _clip(text: str, width: int = 110) -> str:
    """``text`` whole, or cut at a word boundary with an ellipsis (never mid-word)."""
    return text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + " …"


def ingest_samples(store: object, samples: Path) -> list[str]:
    """The sample collections (the demo's own: ``demo_product_docs``, ``demo_support``, ``demo_api``,
    apart from the user's), ingested for tenant ``demo`` as ``agentrag serve --demo`` does (so running
    both leaves one copy), a line per collection."""
    from agentrag.samples import ingest_samples as ingest

    def say(report: IngestReport) -> None:
        status = "nothing new to ingest" if not report.changed and report.ok else ""
        print(f"  {report}" + (f"  ({status})" if status else ""))

    def reembed(name: str) -> None:  # embedded by an older default (e.g. float32): said, then fixed
        print(f"  {name!r} was embedded with another model version; re-embedding it:")
        print(f"  {store.reembed(name)}")  # type: ignore[attr-defined]

    return ingest(store, samples, on_report=say, on_mismatch=reembed)  # type: ignore[arg-type]


def describe(ctx: Context) -> str:
    out = [f"Q: {ctx.question}"]
    out.append(
        "  steps: "
        + " -> ".join(f"{s.name}[{s.strategy or 'skipped'}] {s.duration_ms:.0f}ms" for s in ctx.steps)
    )
    if ctx.collections is not None:
        out.append(f"  collections: {', '.join(ctx.collections)}  ({ctx.routing_reasoning})")
    if ctx.sub_questions is not None:
        out.append("  sub-questions:")
        out.extend(f"    - {q}" for q in ctx.sub_questions)
    out.append("  search:")
    for record in ctx.results:
        out.append(
            f"    [{record.collection}] {_clip(record.question)!r}: {len(record.iterations)} iteration(s), "
            f"stop: {record.stop_reason.value}, {len(record.hits)} hits"
        )
        for i, it in enumerate(record.iterations, 1):
            verdict = "" if it.sufficient is None else (" sufficient" if it.sufficient else " insufficient")
            out.append(
                f"      {i}. {len(it.hit_ids)} hits, {it.new_hits} new{verdict}; "
                f"query: {_clip(it.queries[-1])!r}"
            )
    for d in ctx.degradations:
        out.append(f"  degraded: {d.step} -> {d.kind}: {d.reason}")
    if ctx.error is not None:
        out.append(f"  error: {type(ctx.error).__name__}: {ctx.error}")
    out.append(f"  answer (mode {ctx.mode}, grounded {ctx.grounded}):")
    for paragraph in (ctx.answer_text or "(none)").split("\n\n"):  # a table's lines stay as written
        lines = (
            paragraph.splitlines() if paragraph.lstrip().startswith("|") else [textwrap.fill(paragraph, 100)]
        )
        out.append(textwrap.indent("\n".join(lines), "    "))
    by_id = {h.chunk_id: h for h in ctx.context_used}
    out.append("  citations:")
    for cid in ctx.citations:
        hit = by_id.get(cid)
        where = f"{hit.collection}/{Path(hit.source or '?').name} § {hit.section}" if hit else "?"
        out.append(f"    [{cid}] {where}")
    return "\n".join(out)


def ask(question: str, store: object, names: list[str], model: str | None = None) -> Context:
    """The demo's pipeline on ``question`` over the collections ``names``."""
    import agentrag as ar

    return (
        ar.new(question, store=store, llm=model, limit=5)  # type: ignore[arg-type]
        | ar.gate()
        | ar.route(collections=names)
        | ar.decompose()
        | ar.search(self_correct=True, max_iterations=3)
        | ar.rerank()
        | ar.answer()
    )


def load_embedder(store: Any, *, notice_after: float = 3.0) -> float:
    """Load the store's embedder before the first step, and say so when it took long: a machine's
    first use exports the local model to ONNX (about 20 s here, once), which would otherwise show up
    in the first step's time as if routing took that long. Returns the seconds it took."""
    load = getattr(store.embedder, "load", None)
    if load is None:  # an embedder without a load step (a hosted API): nothing to wait for here
        return 0.0
    started = time.perf_counter()
    load()
    took = time.perf_counter() - started
    if took >= notice_after:
        print(
            f"embedding model loaded in {took:.0f} s (its first use on this machine exports it to ONNX, once)"
        )
    return took


def run_demo(args: argparse.Namespace) -> int:
    import agentrag as ar
    from agentrag.samples import find_samples

    try:
        samples = find_samples(getattr(args, "samples", None))
    except FileNotFoundError as exc:
        raise SystemExit(f"agentrag demo: {exc} (--samples DIR)") from None
    store = ar.Store(getattr(args, "database_url", None))
    print(f"database: {store.url}")
    load_embedder(store)
    print(f"ingesting the sample corpus from {samples}:")
    names = ingest_samples(store, samples)
    model = os.environ.get("AGENTRAG_LLM") or None
    print(f"\nLLM: {model or 'none (every step uses its deterministic local strategy)'}\n")
    for question in QUESTIONS:
        print(describe(ask(question, store, names, model)))
        print()
    store.close()
    return 0
