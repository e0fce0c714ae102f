"""``agentrag demo`` (what ``make demo`` runs): ingest the sample corpus, then answer two
questions with the full pipeline, printing every step.

Without an LLM every step uses its local strategy; set ``AGENTRAG_LLM`` to a litellm model
string (e.g. ``gpt-4o-mini`` or ``ollama/llama3.1``) to run the same pipeline with it.
"""

from __future__ import annotations

import argparse
import json
import os
import textwrap
from pathlib import Path

from agentrag.context import Context

QUESTIONS = (
    "How do I paginate through the notes API and what happens when I hit the rate limit?",
    "Compare support response times and API rate limits between the Team and Business plans.",
)


def _clip(text: str, width: int = 110) -> str:
    """``text`` whole, or cut at a word boundary with an ellipsis (never mid-word)."""
    return text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + " …"


def find_samples(explicit: str | None = None) -> Path:
    candidates = (
        [Path(explicit)]
        if explicit
        else [Path.cwd() / "samples", Path(__file__).resolve().parents[1] / "samples"]
    )
    for path in candidates:
        if (path / "collections.json").is_file():
            return path
    raise SystemExit("agentrag demo: no samples/collections.json found (pass --samples DIR)")


def ingest_samples(store: object, samples: Path) -> list[str]:
    from agentrag.errors import EmbeddingMismatchError

    names = []
    for spec in json.loads((samples / "collections.json").read_text()):
        try:
            store.create_collection(spec["name"], description=spec["description"], exist_ok=True)  # type: ignore[attr-defined]
        except EmbeddingMismatchError:  # embedded by an older default (e.g. float32): said, then fixed
            print(f"  {spec['name']!r} was embedded with another model version; re-embedding it:")
            print(f"  {store.reembed(spec['name'])}")  # type: ignore[attr-defined]
        report = store.ingest(samples / spec["name"], collection=spec["name"])  # type: ignore[attr-defined]
        status = "nothing new to ingest" if not report.changed and report.ok else ""
        print(f"  {report}" + (f"  ({status})" if status else ""))
        names.append(spec["name"])
    return names


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
    out.append(textwrap.indent(textwrap.fill(ctx.answer_text or "(none)", 100), "    "))
    by_id = {h.chunk_id: h for h in ctx.context_used}
    out.append("  citations:")
    for cid in ctx.citations:
        hit = by_id.get(cid)
        where = f"{hit.collection}/{Path(hit.source or '?').name} § {hit.section}" if hit else "?"
        out.append(f"    [{cid}] {where}")
    return "\n".join(out)


def run_demo(args: argparse.Namespace) -> int:
    import agentrag as ar

    samples = find_samples(getattr(args, "samples", None))
    store = ar.Store(getattr(args, "database_url", None))
    print(f"database: {store.url}")
    print(f"ingesting the sample corpus from {samples}:")
    names = ingest_samples(store, samples)
    model = os.environ.get("AGENTRAG_LLM") or None
    print(f"\nLLM: {model or 'none (every step uses its deterministic local strategy)'}\n")
    for question in QUESTIONS:
        ctx = (
            ar.new(question, store=store, llm=model, limit=5)
            | ar.gate()
            | ar.route(collections=names)
            | ar.decompose()
            | ar.search(self_correct=True, max_iterations=3)
            | ar.rerank()
            | ar.answer()
        )
        print(describe(ctx))
        print()
    store.close()
    return 0
