"""``answer()``: answer from the retrieved chunks, citing only what was retrieved.

* No chunks: no LLM call; ``grounded=False`` and the answer says what to try instead.
* With an LLM: ``prompts/answer.j2`` over the packed, delimited context; every citation
  is then checked (``suppress_ungrounded=True`` strips unsupported sentences).
* Without an LLM: extractive: the best-matching sentences, each with its chunk citation.
* LLM down: mode ``raw-results``: the sources come back without generated text.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from agentrag.context import Context, Degradation
from agentrag.errors import InvalidInputError, LLMError
from agentrag.grounding import PackedContext, check_citations, pack_context, split_sentences
from agentrag.hits import Hit
from agentrag.step import Outcome, Step, _calls_of
from agentrag.steps._common import coverage, prompts_of, use_llm

_SKIP_LINE = re.compile(r"^\s*(#|\||```|>|-{3,})")


def no_results_message(ctx: Context) -> str:
    where = ", ".join(ctx.collections or ctx.options.collections or ()) or "the searched collections"
    return (
        f"I could not find anything relevant to this question in {where}. "
        "Try widening the scope (more collections, fewer filters) or adding documents that cover it."
    )


def extractive_answer(question: str, hits: Sequence[Hit], *, max_sentences: int = 3) -> str:
    """The sentences that cover the most question terms, each cited with its chunk id."""
    scored: list[tuple[float, int, str, str]] = []
    for rank, hit in enumerate(hits):
        lines = [ln for ln in hit.text.splitlines() if not _SKIP_LINE.match(ln)]
        for order, sentence in enumerate(split_sentences("\n".join(lines))):
            sentence = sentence.strip(" -*")
            if len(sentence.split()) < 4:
                continue
            score = coverage(question, sentence) + 0.05 / (rank + 1) - 0.001 * order
            scored.append((score, rank, sentence, hit.chunk_id))
    if not scored:
        top = hits[0]
        return f"{top.text.strip()[:300]} [{top.chunk_id}]"
    scored.sort(key=lambda s: (-s[0], s[1], s[2]))
    picked: list[str] = []
    seen: set[str] = set()
    for _score, _rank, sentence, label in scored:
        key = sentence.lower()
        if key in seen:
            continue
        seen.add(key)
        end = "" if sentence.endswith((".", "!", "?")) else "."
        picked.append(f"{sentence}{end} [{label}]")
        if len(picked) == max_sentences:
            break
    return " ".join(picked)


def answer_mode(ctx: Context) -> str:
    degraded = any(d.kind == "lexical-only" for d in ctx.degradations)
    return "lexical-only" if degraded else "full"


def prepare(ctx: Context, *, max_context_tokens: int) -> PackedContext:
    from agentrag.prompts import new_delimiter

    if not isinstance(max_context_tokens, int) or max_context_tokens < 100:
        raise InvalidInputError(f"max_context_tokens must be an integer >= 100, got {max_context_tokens!r}")
    return pack_context(ctx.hits, delimiter=new_delimiter(), budget_tokens=max_context_tokens, prompts=ctx.deps.prompts)


def _answer(
    ctx: Context,
    *,
    strategy: str = "auto",
    max_context_tokens: int = 3000,
    suppress_ungrounded: bool = False,
    max_sentences: int = 3,
) -> Outcome:
    from agentrag.llm import call_llm
    from agentrag.telemetry import DEFAULT_TELEMETRY

    llm = use_llm(ctx, strategy, "answer")
    t0 = time.perf_counter()
    packed = prepare(ctx, max_context_tokens=max_context_tokens)
    context_ms = (time.perf_counter() - t0) * 1000.0
    base = {"context_used": packed.hits, "mode": answer_mode(ctx)}
    attrs = {"context_chunk_count": len(packed.hits), "context_tokens": packed.tokens}
    if ctx.retrieve is not False and not packed.hits:
        return Outcome(
            {**base, "answer_text": no_results_message(ctx), "grounded": False, "citations": ()},
            strategy="no-results",
            attributes=attrs,
            stages=(("context", context_ms),),
        )
    if not llm:
        text = extractive_answer(ctx.question, packed.hits, max_sentences=max_sentences)
        check = check_citations(text, packed.valid_ids, aliases=dict(packed.aliases))
        return Outcome(
            {**base, "answer_text": text, "citations": check.cited, "grounded": check.grounded,
             "invalid_citations": check.invalid, "ungrounded_claims": check.ungrounded},
            strategy="local:extractive",
            attributes=attrs,
            stages=(("context", context_ms),),
        )
    messages = prompts_of(ctx).render(
        "answer",
        question=ctx.question,
        context=packed.text,
        delimiter=packed.delimiter,
        labels=list(packed.labels),
        graph_context=ctx.graph_context or "",
    )
    t1 = time.perf_counter()
    try:
        call = call_llm(ctx.deps.llm, messages, purpose="answer",  # type: ignore[arg-type]
                        telemetry=ctx.deps.telemetry or DEFAULT_TELEMETRY)
    except LLMError as exc:
        return Outcome(
            {**base, "answer_text": "", "mode": "raw-results", "grounded": False, "citations": ()},
            strategy="llm",
            attributes=attrs,
            degradations=(Degradation("answer", "raw-results", f"the LLM failed: {type(exc).__name__}"),),
            llm_calls=_calls_of(exc),
            stages=(("context", context_ms), ("generation", (time.perf_counter() - t1) * 1000.0)),
        )
    generation_ms = (time.perf_counter() - t1) * 1000.0
    check = check_citations(call.reply or "", packed.valid_ids, aliases=dict(packed.aliases))
    text = check.suppressed_text if suppress_ungrounded else (call.reply or "")
    return Outcome(
        {**base, "answer_text": text, "citations": check.cited, "grounded": check.grounded,
         "invalid_citations": check.invalid, "ungrounded_claims": check.ungrounded},
        strategy="llm",
        attributes={**attrs, "grounded": check.grounded, "invalid_citation_count": len(check.invalid),
                    "ungrounded_claim_count": len(check.ungrounded)},
        llm_calls=(call,),
        stages=(("context", context_ms), ("generation", generation_ms)),
    )


answer = Step("answer", _answer)
