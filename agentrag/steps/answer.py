"""``answer()``: answer from the retrieved chunks, citing only what was retrieved.

* No chunks (and no graph facts): no LLM call; ``grounded=False`` and the answer says what
  to try instead (widen the scope, add documents).
* With an LLM: ``prompts/answer.j2`` over the packed, delimited context; every citation
  is then checked against the retrieved set (``suppress_ungrounded=True`` strips the
  unsupported sentences and invalid markers, otherwise they are flagged in
  ``ungrounded_claims`` / ``invalid_citations``).
* Without an LLM: extractive: the best-matching sentences, each with its chunk citation.

The mode (``ctx.mode``), also on the span (``agentrag.answer.mode``):

* ``full``: everything worked.
* ``lexical-only``: the embedder or the vector leg failed; the answer rests on BM25 hits.
* ``graph-only``: every search failed but ``enrich()`` found knowledge-graph facts; the
  answer comes from them alone (cite ``[rel_<id>]``).
* ``raw-results``: the LLM failed; ``answer_text`` is empty and ``context_used`` holds the
  sources. The span status is ERROR (the generation failed) but the context has no error.
* Every search failed and there is no graph context: ``ctx.error`` is a RetrievalError.

Streaming: :func:`answer_stream` / :func:`aanswer_stream` yield the reply's text pieces as
they arrive and, last, the final Context: the same Context :func:`answer` returns for the
same replies (pieces are the raw reply; the Context has it checked, and suppressed when
asked). Every variant shares :func:`prepare` and :func:`finish`.

When answer finishes it emits the ``GENERATION_EXECUTED`` audit event, queues the query-log
row (``query_log=True``) and records the ``pipeline.query.*`` metrics.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentrag._sansio import (
    END,
    Body,
    Emit,
    blocking,
    choose,
    close,
    either,
    next_item,
    stream_async,
    stream_sync,
)
from agentrag.abstain import Calibration, abstention_message
from agentrag.answer_languages import answer_language_placed, answering_in, semantic_threshold
from agentrag.context import Context, Degradation
from agentrag.errors import AgentragError, InvalidInputError, LLMError, RetrievalError
from agentrag.extractive import cited_as_shown, extractive_answer, gather, labelled, render, spans_of
from agentrag.grounding import check_citations, pack_context
from agentrag.hits import Hit
from agentrag.step import Outcome, Step, StepRun, calls_of, telemetry_of
from agentrag.steps._common import UNRELATED_REASON, bounded, prompts_of, use_llm
from agentrag.steps.answer_plan import AnswerPlan, check_options, packed_plan, plan_outcome
from agentrag.steps.evidence_scope import evidence_questions, hits_for_evidence, typed_questions

if TYPE_CHECKING:
    from agentrag.abstention import Placement
    from agentrag.llm import LLMCall
    from agentrag.support import SupportCheck

__all__ = [
    "AnswerPlan",
    "aanswer_stream",
    "answer",
    "answer_mode",
    "answer_stream",
    "extractive_answer",
    "finish",
    "has_complete_sentence",
    "llm_failed",
    "no_results_message",
    "prepare",
    "retrieval_failed",
]

_GRAPH_FACT = re.compile(r"^\[(rel_\d+)\]\s+(.*?)(?:\s+\(source: [^)]*\))?$")

NOTHING_GROUNDED = (
    "The generated answer contained no statement supported by the retrieved sources, so it was withheld. "
    "Try rephrasing the question, widening the scope or adding documents that cover it."
)
NO_RETRIEVAL_NO_LLM = (
    "This message did not need a document search, and no language model is configured to reply to it."
)


def no_results_message(ctx: Context) -> str:
    where = ", ".join(ctx.collections or ctx.options.collections or ()) or "the searched collections"
    reason = ctx.empty_reason
    if reason:
        return f"I could not find anything relevant to this question in {where}: {reason}."
    return (
        f"I could not find anything relevant to this question in {where}. "
        "Try widening the scope (more collections, fewer filters) or adding documents that cover it."
    )


def has_complete_sentence(hits: Sequence[Hit]) -> bool:
    """Whether an extractive answer can quote at least one whole sentence or table row of ``hits``."""
    from agentrag.evidence import units_of

    return bool(units_of(hits))


def graph_answer(graph_context: str, *, max_facts: int = 5) -> str:
    """Without an LLM, in graph-only mode: the knowledge-graph facts themselves, each cited."""
    facts = []
    for line in graph_context.splitlines():
        match = _GRAPH_FACT.match(line.strip())
        if match:
            facts.append(f"- {match.group(2)} [{match.group(1)}].")
        if len(facts) == max_facts:
            break
    return "From the knowledge graph (no documents could be searched):\n" + "\n".join(facts)


def retrieval_failed(ctx: Context) -> bool:
    """Every search of the context failed (the store could not search at all)."""
    return bool(ctx.results) and all(r.error for r in ctx.results)


def answer_mode(ctx: Context) -> str:
    """``graph-only``, ``lexical-only`` or ``full``, from what search recorded (not ``raw-results``)."""
    if retrieval_failed(ctx):
        return "graph-only"
    if any(d.kind == "lexical-only" for d in ctx.degradations):
        return "lexical-only"
    return "full"


def _grounding_changes(
    text: str, plan: AnswerPlan, support: SupportCheck | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Context changes and span attributes of a checked answer ``text``: citations checked
    against the retrieved set, and (unless ``support="off"``) each cited claim against its chunk."""
    from agentrag.support import check_support

    if not plan.check:
        return {"answer_text": text, "grounded": None, "citations": ()}, {}
    if support is None and plan.support != "off":
        support = check_support(text, plan.packed.hits, aliases=plan.aliases, embedder=plan.embedder)
    verdicts = support.by_sentence if support is not None else {}

    def supported(sentence: str) -> bool:
        span = verdicts.get(sentence)
        return span is None or span.supported

    check = check_citations(text, plan.valid, aliases=plan.aliases, supported=supported)
    final = text
    if plan.suppress_ungrounded:
        final = check.suppressed_text or NOTHING_GROUNDED
    changes = {
        "answer_text": final,
        "citations": check.cited,
        "grounded": check.grounded,
        "invalid_citations": check.invalid,
        "ungrounded_claims": check.ungrounded,
        "support": support.spans if support is not None else (),
    }
    attrs = {
        "grounded": check.grounded,
        "citation_count": len(check.cited),
        "invalid_citation_count": len(check.invalid),
        "ungrounded_claim_count": len(check.ungrounded),
        "unsupported_claim_count": len(support.unsupported) if support is not None else 0,
    }
    return changes, attrs


def _embedder_of(ctx: Context, hits: Sequence[Hit]) -> Any:
    """The embedder of the best hit's collection (agentrag.store.embedders), the store's without hits."""
    store = ctx.deps.store
    return None if store is None else store.answer_embedder(hits[0].collection if hits else None)


def prepare(
    ctx: Context,
    *,
    strategy: str = "auto",
    max_context_tokens: int = 3000,
    suppress_ungrounded: bool = False,
    max_sentences: int = 3,
    abstain: bool | None = None,
    calibration: Calibration | None = None,
    support: str = "local",
) -> AnswerPlan:
    """Decide the mode, pack the context (recording the ``context.*`` metrics), weigh the evidence
    (abstaining when nothing answers) and either finish without the LLM or render the prompt.
    Raises RetrievalError when every search failed and there is no graph context."""
    llm = use_llm(ctx, strategy, "answer")
    check_options(
        llm,
        max_context_tokens=max_context_tokens,
        max_sentences=max_sentences,
        support=support,
        calibration=calibration,
    )
    cal = calibration or Calibration()
    if retrieval_failed(ctx) and not ctx.graph_context:
        reasons = "; ".join(dict.fromkeys(r.error or "" for r in ctx.results))
        raise RetrievalError(f"every retrieval source failed and there is no graph context: {reasons}")
    mode = answer_mode(ctx)

    hits = () if mode == "graph-only" else ctx.hits
    plan = packed_plan(
        ctx,
        mode,
        hits,
        estimate="tokenizer" if llm else "chars/4",  # no LLM: no context window to count tokens for
        max_context_tokens=max_context_tokens,
        suppress_ungrounded=suppress_ungrounded,
        support=support,
        embedder=_embedder_of(ctx, hits),
    )
    packed = plan.packed
    early = _without_evidence(ctx, plan, llm)
    if early is not None:
        return early
    evidence = None
    evidence_hits = packed.hits
    if not llm and len(hits) > len(packed.hits):
        # no prompt to fit: the extractive answer reads EVIDENCE_HITS hits, not the budget's share
        wide = pack_context(hits_for_evidence(ctx, hits), delimiter=packed.delimiter, budget_tokens=1_000_000)
        evidence_hits = wide.hits
        # a chunk the context shows under its own id stays that id, whatever the wider merge made of it
        # (the two merges can alias a pair each way round: a citation would flip to the other id)
        widened = {alias: label for alias, label in wide.aliases if alias not in packed.labels}
        plan = _replace_plan(plan, valid=plan.valid | wide.valid_ids, aliases={**widened, **plan.aliases})
    language = None
    if evidence_hits:
        started = time.perf_counter()
        language, cal, placement = answer_language_placed(
            ctx.question,
            evidence_hits,
            cal,
            given=calibration is not None,
            embedder=plan.embedder,
            store=ctx.deps.store,
        )
        with answering_in(language):
            evidence = gather(
                evidence_questions(ctx),
                evidence_hits,
                embedder=plan.embedder,
                calibration=cal,
                max_units=max_sentences,
                typed=typed_questions(ctx),
            )
        plan = _replace_plan(
            plan, stages=(*plan.stages, ("evidence", (time.perf_counter() - started) * 1000.0))
        )
        if placement is not None and placement.source == "table":  # a language, no caller's calibration
            vector = evidence.signals.vector
            shifted = semantic_threshold(
                cal, getattr(plan.embedder, "model_id", None), evidence.signals.semantic, vector
            )
            if shifted is not cal:  # which curve moved it: with the vector leg's similarity or without
                source = "table+semantic" if vector is None else "table+semantic+vector"
                cal, placement = shifted, replace(placement, source=source)
        plan = _threshold_recorded(plan, placement, cal)
        if evidence.fallback:
            plan = _replace_plan(
                plan,
                warnings=(*plan.warnings, evidence.fallback),
                degradations=(
                    *plan.degradations,
                    Degradation("answer", "lexical-evidence", evidence.fallback),
                ),
            )
        confidence = round(evidence.confidence, 4)
        low = confidence < cal.low_below and mode == "full"
        plan = _replace_plan(
            plan,
            base={**plan.base, "answer_confidence": confidence, "mode": "low-confidence" if low else mode},
            attributes={
                **plan.attributes,
                "answer_confidence": confidence,
                **({"answer_language": language} if language else {}),
                **({"answer_restated": ", ".join(evidence.restated)} if evidence.restated else {}),
            },
        )
        if (
            (not llm if abstain is None else abstain)
            and evidence.units  # nothing quotable is not nothing relevant: an excerpt follows
            and (confidence < cal.abstain_below or (not llm and not evidence.selected))
        ):
            changes = {
                "answer_text": abstention_message(evidence.closest(), language=language),
                "grounded": False,
                "citations": (),
                "mode": "abstained",
            }
            return plan_outcome(plan, changes, "local:abstained" if not llm else "abstained")
    if not llm:
        return _local_answer(ctx, plan, evidence, max_sentences)
    messages = prompts_of(ctx).render(
        "answer",
        question=ctx.question,
        context=packed.text,
        delimiter=packed.delimiter,
        labels=list(packed.labels),
        graph_context=ctx.graph_context or "",
    )
    return _replace_plan(plan, messages=messages)


def _threshold_recorded(plan: AnswerPlan, placement: Placement | None, cal: Calibration) -> AnswerPlan:
    """The threshold of an answer in another language and its source on the span; the table
    standing in for a collection's statistics, as a degradation (agentrag.abstention)."""
    if placement is None:
        return plan
    attrs = {"answer_threshold": cal.abstain_below, "answer_threshold_source": placement.source or "table"}
    plan = _replace_plan(plan, attributes={**plan.attributes, **attrs})
    if placement.reason is None:
        return plan
    return _replace_plan(
        plan,
        warnings=(*plan.warnings, placement.reason),
        degradations=(*plan.degradations, Degradation("answer", "abstention-table", placement.reason)),
    )


def _without_evidence(ctx: Context, plan: AnswerPlan, llm: Any) -> AnswerPlan | None:
    """The plan finished before any evidence is weighed: nothing retrieved (and no graph facts),
    or no retrieval wanted and no LLM to reply; None otherwise."""
    packed = plan.packed
    if ctx.retrieve is not False and not packed.hits and not ctx.graph_context:
        changes = {"answer_text": no_results_message(ctx), "grounded": False, "citations": ()}
        return plan_outcome(plan, {**changes, "mode": "abstained", "answer_confidence": 0.0}, "no-results")
    if ctx.retrieve is False and not packed.hits and not llm:
        unrelated = ctx.gate_reasoning == UNRELATED_REASON
        why = "none of its words occurs in the searched documents"
        text = abstention_message((), reason=why) if unrelated else NO_RETRIEVAL_NO_LLM
        changes = {"answer_text": text, "grounded": None, "citations": (), "mode": "abstained"}
        if unrelated:
            changes.update(grounded=False, answer_confidence=0.0)
        return plan_outcome(plan, changes, "local:no-retrieval")
    return None


def _local_answer(ctx: Context, plan: AnswerPlan, evidence: Any, max_sentences: int) -> AnswerPlan:
    """The answer without an LLM: the evidence's chosen sentences (an excerpt when only fragments
    are quotable), or the graph's facts when no chunk was retrieved."""
    packed = plan.packed
    if packed.hits:
        assert evidence is not None
        chosen = evidence.selected or tuple(r[0] for r in evidence.ranked if r)[:1]
        if not chosen:  # only fragments to quote: an excerpt, not a grounded answer
            text = extractive_answer(ctx.questions, packed.hits, max_sentences=max_sentences)
            changes, attrs = _grounding_changes(text, _replace_plan(plan, support="off"))
            changes["grounded"] = attrs["grounded"] = False
            return plan_outcome(plan, changes, "local:excerpt", attrs)
        from agentrag.support import SupportCheck

        chosen = cited_as_shown(chosen, packed.hits)
        text = render(chosen)
        changes, attrs = _grounding_changes(text, plan, SupportCheck(spans_of(chosen)))
        shown = {h.chunk_id for h in packed.hits}
        quoted = tuple(dict.fromkeys(s.unit.hit for s in chosen if s.unit.chunk_id not in shown))
        changes["context_used"] = labelled((*packed.hits, *quoted), chosen)
        return plan_outcome(plan, changes, "local:extractive", attrs)
    text = graph_answer(ctx.graph_context or "", max_facts=max(max_sentences, 5))
    changes, attrs = _grounding_changes(text, _replace_plan(plan, support="off"))
    return plan_outcome(plan, changes, "local:extractive", attrs)


def _replace_plan(plan: AnswerPlan, **changes: Any) -> AnswerPlan:
    from dataclasses import replace

    return replace(plan, **changes)


def finish(
    plan: AnswerPlan,
    call: LLMCall,
    generation_ms: float,
    support: SupportCheck | None = None,
    judge_calls: tuple[LLMCall, ...] = (),
    judge_failed: str | None = None,
) -> Outcome:
    """The outcome of a successful model call: the reply, its citations and their support checked."""
    changes, attrs = _grounding_changes(call.reply or "", plan, support)
    return Outcome(
        {**plan.base, **changes},
        strategy="llm",
        attributes={**plan.attributes, **attrs},
        llm_calls=(call, *judge_calls),
        stages=(*plan.stages, ("generation", generation_ms)),
        warnings=(*plan.warnings, *((judge_failed,) if judge_failed else ())),
        degradations=(
            *plan.degradations,
            *((Degradation("answer", "local-support", judge_failed),) if judge_failed else ()),
        ),
    )


def _judge(
    ctx: Context, plan: AnswerPlan, text: str
) -> tuple[SupportCheck | None, tuple[LLMCall, ...], str | None]:
    """``support="llm"``: the local check, then the LLM's verdict on each claim (its failure
    keeps the local verdicts and is recorded)."""
    from agentrag.support import check_support, judge_with_llm

    local = check_support(text, plan.packed.hits, aliases=plan.aliases, embedder=plan.embedder)
    try:
        judged, calls = judge_with_llm(ctx, local)
    except LLMError as exc:
        reason = f"the support judge failed ({type(exc).__name__}): the local support check decided"
        return local, calls_of(exc), reason
    return judged, tuple(calls), None


def llm_failed(plan: AnswerPlan, exc: LLMError, generation_ms: float) -> Outcome:
    """The outcome when the model failed: ``raw-results``, the sources without generated text."""
    reason = f"the LLM failed ({type(exc).__name__}): returning the retrieved sources without an answer"
    return Outcome(
        {
            **plan.base,
            "answer_text": "",
            "mode": "raw-results",
            "grounded": False,
            "citations": (),
            "invalid_citations": (),
            "ungrounded_claims": (),
        },
        strategy="llm",
        attributes={**plan.attributes, "mode": "raw-results"},
        warnings=(*plan.warnings, reason),
        degradations=(*plan.degradations, Degradation("answer", "raw-results", reason)),
        llm_calls=calls_of(exc),
        stages=(*plan.stages, ("generation", generation_ms)),
        error_status=f"{type(exc).__name__}: generation failed, raw results returned",
    )


def _answer(
    ctx: Context,
    *,
    strategy: str = "auto",
    max_context_tokens: int = 3000,
    suppress_ungrounded: bool = False,
    max_sentences: int = 3,
    abstain: bool | None = None,
    calibration: Calibration | None = None,
    support: str = "local",
) -> Body[Outcome]:
    """The one body of ``answer`` and its async twin (see :mod:`agentrag._sansio`)."""
    from agentrag.llm import acall_llm, call_llm

    plan = yield blocking(
        prepare,
        ctx,
        strategy=strategy,
        max_context_tokens=max_context_tokens,
        suppress_ungrounded=suppress_ungrounded,
        max_sentences=max_sentences,
        abstain=abstain,
        calibration=calibration,
        support=support,
    )
    if plan.outcome is not None:
        return plan.outcome
    assert ctx.deps.llm is not None and plan.messages is not None
    started = time.perf_counter()
    try:
        call = yield bounded(
            ctx,
            either(
                call_llm,
                acall_llm,
                ctx.deps.llm,
                plan.messages,
                purpose="answer",
                telemetry=telemetry_of(ctx),
            ),
        )
    except LLMError as exc:
        return llm_failed(plan, exc, (time.perf_counter() - started) * 1000.0)
    elapsed = (time.perf_counter() - started) * 1000.0
    if plan.support == "llm" and plan.check:
        checked, judge_calls, failed = yield blocking(_judge, ctx, plan, call.reply or "")
        return finish(plan, call, elapsed, checked, judge_calls, failed)
    return finish(plan, call, elapsed)


def _after_answer(ctx: Context) -> None:
    """GENERATION_EXECUTED, the query-log row and the pipeline.query.* metrics."""
    from agentrag import audit, querylog  # agentrag.audit, agentrag.querylog: modules, not the API

    instruments = telemetry_of(ctx).instruments
    instruments.pipeline_query_calls.add(1)
    instruments.pipeline_query_duration.record(ctx.latencies_ms["total"])
    ran = bool(ctx.steps) and ctx.steps[-1].name == "answer"
    if ctx.error is not None:
        stage = next((s.name for s in reversed(ctx.steps) if s.error), "unknown")
        instruments.pipeline_query_errors.add(1, {"stage": stage, "error_type": type(ctx.error).__name__})
    elif ran:
        audit.generation_event(ctx)
    if ran:
        querylog.submit(ctx)


answer = Step("answer", _answer, after=_after_answer)


# ---- streaming ----------------------------------------------------------------------------------
# One body for answer_stream and aanswer_stream (see agentrag._sansio): it yields Ops where it
# waits (prepare in a worker thread under async, the model's next piece) and Emits what the
# consumer gets: the text pieces, then the final Context.
def _stream_body(
    run: StepRun, ctx: Context, options: dict[str, Any], open_: Callable[..., Any]
) -> Body[None]:
    pieces: Any = None
    try:
        if ctx.error is not None:
            yield Emit(run.skip(ctx))
            return
        try:
            with run.current():
                plan = yield blocking(prepare, ctx, **options)
        except InvalidInputError:
            raise
        except AgentragError as exc:
            yield Emit(run.fail(ctx, exc))
            return
        if plan.outcome is not None:  # no model call: the whole answer is one piece
            text = plan.outcome.changes.get("answer_text")
            if text:
                yield Emit(text)
            yield Emit(run.finish(ctx, plan.outcome))
            return
        assert ctx.deps.llm is not None and plan.messages is not None
        stream = open_(ctx.deps.llm, plan.messages, purpose="answer", telemetry=telemetry_of(ctx))
        started = time.perf_counter()
        with run.current():  # starts the model-call span under the answer span
            pieces = yield choose(lambda: iter(stream), lambda: aiter(stream))
        try:
            while (piece := (yield bounded(ctx, next_item(pieces)))) is not END:
                yield Emit(piece)
        except LLMError as exc:
            elapsed = (time.perf_counter() - started) * 1000.0
            yield Emit(run.finish(ctx, llm_failed(plan, exc, elapsed)))
            return
        except AgentragError as exc:  # the time budget ran out mid-stream: typed, on the Context
            yield Emit(run.fail(ctx, exc))
            return
        assert stream.call is not None
        yield Emit(run.finish(ctx, finish(plan, stream.call, (time.perf_counter() - started) * 1000.0)))
    except BaseException as exc:  # the consumer stopped early (GeneratorExit) or a bug
        if pieces is not None:
            yield close(pieces)
        run.abort(exc)
        raise


def answer_stream(ctx: Context, **options: Any) -> Generator[str | Context, None, None]:
    """Yield the answer's text pieces (``str``) as the model produces them, then the final
    :class:`Context` as the last item: the one ``answer(ctx, **options)`` would return.

    Takes ``answer()``'s options. Without a model call (no results, no LLM) the whole answer
    is one piece. If the model fails mid-stream, the final Context is ``raw-results`` and the
    pieces already yielded belong to no answer::

        for item in answer_stream(ctx):
            if isinstance(item, str):
                print(item, end="", flush=True)
            else:
                ctx = item
    """
    from agentrag.llm import stream_llm

    run = answer.begin(ctx, **options)
    yield from stream_sync(_stream_body(run, ctx, options, stream_llm))


async def aanswer_stream(ctx: Context, **options: Any) -> AsyncGenerator[str | Context, None]:
    """The async twin of :func:`answer_stream`: ``async for item in aanswer_stream(ctx)``."""
    from agentrag.llm import astream_llm

    run = answer.begin(ctx, **options)
    items = stream_async(_stream_body(run, ctx, options, astream_llm))
    try:
        async for item in items:
            yield item
    finally:  # a consumer that stops early stops the body now (its GeneratorExit), as in the sync form
        await items.aclose()
