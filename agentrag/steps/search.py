"""``search(self_correct=False, max_iterations=3, ...)``: every (sub-)question x collection.

``depth`` is how many candidates each leg (vector, lexical) keeps before fusion (the per-method
K); ``rrf_k`` is Reciprocal Rank Fusion's constant (refused with ``fusion="relative_score"``).

Without ``self_correct`` each unit searches once (the question plus any rewrites).
With it, each unit loops: search -> judge sufficiency -> rewrite -> search, and always
stops with a typed :class:`StopReason`. Already-tried queries are never retried. The
loop's LLM calls are bounded by ``max_iterations`` and the context's :class:`Budget`.

Judge and rewrite use the LLM when one is configured (``strategy="auto"``), otherwise
their local strategies: a score threshold and pseudo-relevance feedback. If the LLM
fails (down, timeout) inside the loop, the unit falls back to the local strategy and
the fallback is recorded as a degradation. The async twin runs the units concurrently.

When the store cannot search (the embedder fails in ``vector`` mode, the database fails:
StoreError, EmbeddingError, RetrievalError, SQLAlchemyError) the unit keeps the hits it
has (none) and its record carries ``error``: a ``retrieval-failed`` degradation, not
``ctx.error``. When every unit failed the span status is ERROR; ``answer()`` then answers
from the graph context (``graph-only``) or sets ``ctx.error`` to a RetrievalError. A
hybrid search whose vector leg failed is recorded as a ``lexical-only`` degradation; a
lexical leg that ran ``lexical_sql`` because a collection's BM25 index is over the store's
memory budget (``SearchResult.lexical_fallback``) as a ``bm25-over-budget`` one.
Each ``store.search`` call records the ``retriever.*`` metrics; the step ends with the
``RETRIEVAL_EXECUTED`` audit event.

A question searched in several collections has its hits fused again across them from the raw
leg scores (cosine, BM25), as one ``store.search`` over those collections would: ``ctx.hits``
then ranks by evidence, not by each collection's own normalised best (which is 1.0 in every
collection, however weak). On the sample conversations over three collections this took the
pipeline's recall@5 from 0.875 to 0.903 (store.search over the three: 0.917;
benchmarks/RESULTS.md, "Pipeline recall over several collections").
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pydantic import BaseModel

from agentrag._sansio import Body, blocking, concurrently
from agentrag.context import Context, Degradation, SearchIteration, SearchRecord, StopReason
from agentrag.errors import (
    BudgetExceededError,
    CollectionNotFoundError,
    EmbeddingError,
    InvalidInputError,
    LLMError,
    LLMOutputError,
    RetrievalError,
    StoreError,
)
from agentrag.hits import Hit
from agentrag.llm import LLMCall
from agentrag.prompts import chunk_views
from agentrag.retrieval.fusion import DEFAULT_RRF_K, check_rrf_k, merge_by_score, relative_score, rrf
from agentrag.retrieval.result import SearchResult
from agentrag.step import Outcome, Step, calls_of, telemetry_of
from agentrag.steps._common import (
    BudgetTracker,
    ask_json,
    coverage,
    past_deadline,
    require_store,
    use_llm,
    within_budget,
)
from agentrag.steps.new import MODES
from agentrag.steps.rewrite import llm_rewrites, prf_rewrite

if TYPE_CHECKING:
    from agentrag.scope import Scope
    from agentrag.store.store import Store


class SufficiencyReply(BaseModel):
    sufficient: bool
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class _Plan:
    units: tuple[tuple[str, str], ...]
    mode: str
    limit: int
    self_correct: bool
    max_iterations: int
    llm: bool
    depth: int = 100
    rrf_k: float = 60
    fusion: str = "relative_score"
    skipped: tuple[tuple[str, str], ...] = ()  # "every collection" left these out: (name, why)


@dataclass(slots=True)
class _UnitResult:
    record: SearchRecord
    calls: list[LLMCall] = field(default_factory=list)
    degradations: list[Degradation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    model_version_match: bool | None = None
    plans: list[str] = field(default_factory=list)  # each search's planner choice (SearchResult.plan)
    served_by: list[str] = field(default_factory=list)


def _retrieval_failures() -> tuple[type[BaseException], ...]:
    from sqlalchemy.exc import SQLAlchemyError

    return (StoreError, EmbeddingError, RetrievalError, SQLAlchemyError)


def _failure(exc: BaseException) -> str:
    detail = " ".join(str(getattr(exc, "orig", None) or exc).split())[:200]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _search_once(ctx: Context, query: str, collection: str, plan: _Plan) -> SearchResult:
    """One ``store.search`` with the retriever.* metrics around it."""
    store = require_store(ctx, "search")
    instruments = telemetry_of(ctx).instruments
    attrs = {"retriever_type": plan.mode}
    instruments.retriever_search_calls.add(1, attrs)
    started = time.perf_counter()
    try:
        with within_budget(ctx):  # a hosted query embedder gets the time left as its timeout
            result = store.search(
                query,
                collections=[collection],
                mode=plan.mode,
                top_k=plan.limit,
                depth=plan.depth,
                fusion=ctx.options.fusion,
                rrf_k=plan.rrf_k if ctx.options.fusion == "rrf" else None,  # RRF's constant, nothing else's
                filters=ctx.options.filters,
                scope=ctx.options.scope,
            )
    except Exception as exc:
        instruments.retriever_search_errors.add(1, {**attrs, "error_type": type(exc).__name__})
        raise
    finally:
        instruments.retriever_search_duration.record((time.perf_counter() - started) * 1000.0, attrs)
    instruments.retriever_results_returned.record(len(result.hits), attrs)
    if not result.hits:
        instruments.retriever_empty_results.add(1, attrs)
    return result


def _plan(
    ctx: Context,
    *,
    self_correct: bool,
    max_iterations: int,
    mode: str | None,
    limit: int | None,
    collections: Sequence[str] | None,
    strategy: str,
    depth: int = 100,
    rrf_k: float = 60,
) -> _Plan:
    store = require_store(ctx, "search")
    if not isinstance(max_iterations, int) or not 1 <= max_iterations <= 10:
        raise InvalidInputError(f"max_iterations must be an integer from 1 to 10, got {max_iterations!r}")
    mode = mode or ctx.options.mode
    if mode not in MODES:
        raise InvalidInputError(f"mode must be one of {MODES}, got {mode!r}")
    limit = limit or ctx.options.limit
    if isinstance(collections, str):
        collections = [collections]
    names = list(collections or ctx.collections or ctx.options.collections or ())
    skipped: tuple[tuple[str, str], ...] = ()
    if not names:
        names, skipped = _all_collections(store, ctx.options.scope)
    if not names and not skipped:
        raise InvalidInputError("search(): there are no collections to search")
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= 1000:
        raise InvalidInputError(f"search(): depth must be an integer from 1 to 1000, got {depth!r}")
    check_rrf_k(rrf_k)
    if rrf_k != DEFAULT_RRF_K and ctx.options.fusion != "rrf":
        raise InvalidInputError(f'search(): rrf_k applies to fusion="rrf", not to {ctx.options.fusion!r}')
    units = tuple((q, c) for q in ctx.questions for c in names)
    llm = use_llm(ctx, strategy, "search")
    return _Plan(
        units,
        mode,
        limit,
        bool(self_correct),
        max_iterations,
        llm,
        depth,
        float(rrf_k),
        ctx.options.fusion,
        skipped,
    )


#: why "every collection" leaves out an acl=True collection for a scope without a principal
NO_PRINCIPAL_REASON = "it enforces document grants (acl=True) and the request names no user or group"


def _all_collections(
    store: Store, scope: Scope | None = None
) -> tuple[list[str], tuple[tuple[str, str], ...]]:
    """Every collection the scope may search, and the ones it may not search only for want of a
    principal (its tenant's or shared ``acl=True`` ones), each with why: left out and reported,
    not refused. Another tenant's collections are left out without a word (not even their names)."""
    from agentrag.retrieval.predicate import may_search

    try:
        found = store.collections()
    except _retrieval_failures() as exc:  # the database is down: nothing can be searched
        raise RetrievalError(f"cannot list the collections to search: {_failure(exc)}") from exc
    names, skipped = [], []
    for c in found:
        if may_search(scope, acl=c.acl, tenant=c.tenant):
            names.append(c.name)
        elif c.acl and may_search(scope, acl=False, tenant=c.tenant):
            skipped.append((c.name, NO_PRINCIPAL_REASON))
    return names, tuple(skipped)


def skipped_degradation(skipped: Sequence[tuple[str, str]]) -> Degradation:
    """The record of collections "every collection" left out (kind ``collections-skipped``)."""
    names = ", ".join(repr(name) for name, _ in skipped)
    reasons = "; ".join(dict.fromkeys(why for _, why in skipped))
    return Degradation("search", "collections-skipped", f"not searched: {names} ({reasons})")


def _local_sufficient(question: str, hits: Sequence[Hit], threshold: float) -> tuple[bool, str]:
    if not hits:
        return False, "no hits"
    sims = [h.vector_score for h in hits if h.vector_score is not None]
    if sims:
        best = max(sims)
        return best >= threshold, f"local: best similarity {best:.3f} vs threshold {threshold}"
    best = max(coverage(question, h.text) for h in hits)
    return best >= threshold, f"local: best term coverage {best:.2f} vs threshold {threshold}"


class _Unit:
    """One (question, collection) unit: search -> judge -> rewrite -> search ..., and what it found.

    ``run`` is the loop and decides why it stops; each stage is one method.
    """

    def __init__(
        self, ctx: Context, question: str, collection: str, plan: _Plan, tracker: BudgetTracker
    ) -> None:
        self.ctx, self.question, self.collection, self.plan, self.tracker = (
            ctx,
            question,
            collection,
            plan,
            tracker,
        )
        self.out = _UnitResult(record=None)  # type: ignore[arg-type]
        self.best: dict[str, Hit] = {}
        self.tried: list[str] = []
        self.iterations: list[SearchIteration] = []
        self.used_mode = plan.mode
        self.degraded: str | None = None
        self.empty: str | None = None
        self.error: str | None = None
        self.llm = plan.llm

    @functools.cached_property
    def delimiter(self) -> str:
        """The unit's one fence for retrieved text in its LLM prompts (drawn when the first is built)."""
        from agentrag.prompts import new_delimiter

        return new_delimiter()

    def run(self) -> _UnitResult:
        plan = self.plan
        pending = [self.question, *(self.ctx.rewrites if self.question == self.ctx.question else ())]
        stop = StopReason.MAX_ITERATIONS
        for iteration in range(1, plan.max_iterations + 1):
            if iteration > 1 and past_deadline(self.ctx):  # Budget(max_seconds=...) spent
                stop = StopReason.BUDGET_EXHAUSTED
                break
            found = self.search(pending)
            new_ids = {h.chunk_id for h in found} - self.best.keys()
            for hit in found:
                if hit.chunk_id not in self.best or hit.score > self.best[hit.chunk_id].score:
                    self.best[hit.chunk_id] = hit
            current = self.ranked()
            step_ids = tuple(dict.fromkeys(h.chunk_id for h in found))

            def record(sufficient: bool | None = None, reasoning: str | None = None) -> None:
                self.iterations.append(
                    SearchIteration(tuple(pending), step_ids, len(new_ids), sufficient, reasoning)  # noqa: B023
                )

            if self.error is not None:
                record(None, f"retrieval failed: {self.error}")
                self.out.warnings.append(f"search in {self.collection!r} failed: {self.error}")
                stop = StopReason.RETRIEVAL_FAILED
                break
            if not plan.self_correct:
                record()
                stop = StopReason.SINGLE_PASS
                break
            if iteration > 1 and not new_ids:
                record()
                stop = StopReason.NO_NEW_EVIDENCE
                break
            sufficient, reasoning, judge_stop = self.judge(current)
            record(sufficient, reasoning)
            if judge_stop is not None:
                stop = judge_stop
                break
            if sufficient:
                stop = StopReason.SUFFICIENT
                break
            if iteration == plan.max_iterations:
                stop = StopReason.MAX_ITERATIONS
                break
            queries = self.next_queries(current)
            if queries is None:
                stop = StopReason.BUDGET_EXHAUSTED
                break
            pending = [q for q in queries if q not in self.tried]
            if not pending:
                stop = StopReason.NO_NEW_EVIDENCE
                break
        return self.result(stop)

    def search(self, queries: Sequence[str]) -> list[Hit]:
        """Every query's hits; the first retrieval failure stops it (``self.error``)."""
        found: list[Hit] = []
        for query in queries:
            try:
                result = _search_once(self.ctx, query, self.collection, self.plan)
            except CollectionNotFoundError:
                raise
            except _retrieval_failures() as exc:
                self.error = _failure(exc)
                break
            self._note(result)
            found.extend(result.hits)
            self.tried.append(query)
        return found

    def _note(self, result: SearchResult) -> None:
        out = self.out
        self.used_mode, self.degraded = result.used_mode, self.degraded or result.degraded
        self.empty = self.empty or result.empty_reason
        if result.used_mode in ("vector", "hybrid"):  # the query embedder met the index
            out.model_version_match = result.model_version_match and out.model_version_match is not False
        out.warnings.extend(result.warnings)
        out.plans.extend(result.plan)
        out.served_by.append(result.served_by)
        if result.lexical_fallback and not any(d.reason == result.lexical_fallback for d in out.degradations):
            out.degradations.append(Degradation("search", "bm25-over-budget", result.lexical_fallback))
        if result.replica_fallback and not any(d.reason == result.replica_fallback for d in out.degradations):
            out.degradations.append(Degradation("search", "replica-fallback", result.replica_fallback))

    def ranked(self) -> list[Hit]:
        return sorted(self.best.values(), key=lambda h: (-h.score, h.chunk_id))[: self.plan.limit]

    def judge(self, current: list[Hit]) -> tuple[bool | None, str | None, StopReason | None]:
        """``(sufficient, reasoning, stop)``: the LLM's verdict, else the local one; ``stop`` when
        the loop must end here (budget spent, an unparseable verdict)."""
        if self.llm and (why := self.tracker.exhausted()):
            return None, why, StopReason.BUDGET_EXHAUSTED
        if self.llm:
            try:
                verdict, calls = ask_json(
                    self.ctx,
                    "sufficiency",
                    SufficiencyReply,
                    question=self.question,
                    chunks=chunk_views(current),
                    delimiter=self.delimiter,
                )
                self.tracker.add(calls)
                self.out.calls.extend(calls)
                return verdict.sufficient, verdict.reasoning, None
            except LLMOutputError as exc:
                self.tracker.add(calls_of(exc))
                self.out.calls.extend(calls_of(exc))
                return None, "the sufficiency reply could not be parsed", StopReason.JUDGE_UNPARSEABLE
            except BudgetExceededError as exc:
                self.out.calls.extend(calls_of(exc))
                return None, str(exc), StopReason.BUDGET_EXHAUSTED
            except LLMError as exc:
                self.tracker.add(calls_of(exc))
                self._degrade("local-judge", exc)
        sufficient, reasoning = _local_sufficient(self.question, current, self.ctx.options.threshold)
        return sufficient, reasoning, None

    def next_queries(self, current: list[Hit]) -> list[str] | None:
        """The next iteration's queries (the LLM's rewrite, else pseudo-relevance feedback); None
        when the budget is spent."""
        if self.llm and self.tracker.exhausted():
            return None
        queries: list[str] = []
        if self.llm:
            try:
                queries, _reasoning, calls = llm_rewrites(
                    self.ctx,
                    self.question,
                    max_rewrites=1,
                    previous=self.tried,
                    hits=current,
                    delimiter=self.delimiter,
                )
                self.tracker.add(calls)
                self.out.calls.extend(calls)
            except BudgetExceededError as exc:
                self.out.calls.extend(calls_of(exc))
                return None
            except LLMError as exc:
                self.tracker.add(calls_of(exc))
                self._degrade("local-rewrite", exc)
        if not self.llm:
            rewritten = prf_rewrite(self.question, current)
            queries = [rewritten] if rewritten else []
        return queries

    def _degrade(self, kind: str, exc: LLMError) -> None:
        """The LLM failed inside the loop: the rest of the unit runs the local strategies, on record."""
        self.llm = False
        self.out.calls.extend(calls_of(exc))
        self.out.degradations.append(
            Degradation("search", kind, f"{type(exc).__name__}; using the local strategy")
        )

    def result(self, stop: StopReason) -> _UnitResult:
        hits = tuple(self.ranked())
        failed = (
            self.error is not None and not hits
        )  # a failure after earlier hits keeps them (with the warning)
        self.out.record = SearchRecord(
            self.question,
            self.collection,
            hits,
            tuple(self.iterations),
            stop,
            "none" if failed else self.used_mode,
            self.degraded,
            self.error if failed else None,
            None if hits else self.empty,
        )
        return self.out


def _run_unit(
    ctx: Context, question: str, collection: str, plan: _Plan, tracker: BudgetTracker
) -> _UnitResult:
    return _Unit(ctx, question, collection, plan, tracker).run()


def _combine(plan: _Plan, results: Sequence[_UnitResult], started: float) -> Outcome:
    records = tuple(r.record for r in results)
    degradations = [d for r in results for d in r.degradations]
    reasons = sorted({r.degraded for r in records if r.degraded})
    if reasons:
        degradations.insert(0, Degradation("search", "lexical-only", "; ".join(reasons)))
    failed = [r for r in records if r.error]
    error_status = None
    if failed:
        why = "; ".join(sorted({r.error or "" for r in failed}))
        why = f"{len(failed)} of {len(records)} searches failed: {why}"
        degradations.append(Degradation("search", "retrieval-failed", why))
        if len(failed) == len(records):
            error_status = why[:300]
    if plan.skipped:
        degradations.append(skipped_degradation(plan.skipped))
    matches = [r.model_version_match for r in results if r.model_version_match is not None]
    unique = {h.chunk_id for r in records for h in r.hits}
    return Outcome(
        {
            "results": records,
            "ranked": _across_collections(plan, records),
            "model_version_match": all(matches) if matches else None,
            "skipped_collections": plan.skipped,
        },
        strategy=("llm" if plan.llm else "local")
        + (":self-correct" if plan.self_correct else ":single-pass"),
        attributes={
            "result_count": len(unique),
            "iterations": max((len(r.iterations) for r in records), default=0),
            "stop_reasons": sorted({r.stop_reason.value for r in records}),
            "mode": plan.mode,
            "failed_searches": len(failed),
            "plan": sorted({p for r in results for p in r.plans}),
            "served_by": sorted({s for r in results for s in r.served_by}),
        },
        warnings=tuple(dict.fromkeys(w for r in results for w in r.warnings)),
        degradations=tuple(degradations),
        llm_calls=tuple(c for r in results for c in r.calls),
        stages=(("retrieval", (time.perf_counter() - started) * 1000.0),),
        error_status=error_status,
    )


def _across_collections(plan: _Plan, records: Sequence[SearchRecord]) -> tuple[Hit, ...] | None:
    """The order of ``ctx.hits`` when a question was searched in several collections, else None.

    Each collection's search fuses its own legs, so its best hit scores up to 1.0 (relative score:
    against that collection's own best) or the same 1/(k+1) terms (RRF) however weak it is:
    merged by those scores, a poor collection's
    best would rank beside a good one's. So the hits of one question are fused again across its
    collections from their raw leg scores, as one ``store.search`` over those collections does:
    cosine similarities (one embedder) and BM25 scores (merged as they are) per leg, then the
    same fusion. Questions are then merged by their best score, as before.
    """
    by_question: dict[str, list[SearchRecord]] = {}
    for record in records:
        by_question.setdefault(record.question, []).append(record)
    if all(len(group) < 2 for group in by_question.values()):
        return None
    best: dict[str, Hit] = {}
    for group in by_question.values():
        hits = {h.chunk_id: h for r in group for h in r.hits}
        if len(group) > 1:
            vector = merge_by_score(
                [[(h.chunk_id, h.vector_score) for h in r.hits if h.vector_score is not None] for r in group]
            )
            lexical = merge_by_score(
                [
                    [(h.chunk_id, h.lexical_score) for h in r.hits if h.lexical_score is not None]
                    for r in group
                ]
            )
            if plan.fusion == "rrf" and vector and lexical:
                fused = rrf([[i for i, _ in vector], [i for i, _ in lexical]], k=plan.rrf_k)
            else:
                fused = relative_score(vector, lexical)
            scores = dict(fused)  # a hit with neither leg's score (none today) would rank last, not vanish
            hits = {i: replace(h, score=scores.get(i, 0.0)) for i, h in hits.items()}
        for hit in hits.values():
            if hit.chunk_id not in best or hit.score > best[hit.chunk_id].score:
                best[hit.chunk_id] = hit
    return tuple(sorted(best.values(), key=lambda h: (-h.score, h.chunk_id)))


def _skip(ctx: Context) -> Outcome | None:
    if ctx.retrieve is False:
        return Outcome({"results": ()}, skipped="gate decided no retrieval is needed")
    return None


def _search(
    ctx: Context,
    *,
    self_correct: bool = False,
    max_iterations: int = 3,
    mode: str | None = None,
    limit: int | None = None,
    collections: Sequence[str] | None = None,
    strategy: str = "auto",
    depth: int = 100,
    rrf_k: float = 60,
) -> Body[Outcome]:
    """The one body of ``search`` and ``asearch`` (see :mod:`agentrag._sansio`): the async run
    plans in a worker thread and runs the question x collection units concurrently."""
    started = time.perf_counter()
    if (skip := _skip(ctx)) is not None:
        return skip
    plan = yield blocking(
        _plan,
        ctx,
        self_correct=self_correct,
        max_iterations=max_iterations,
        mode=mode,
        limit=limit,
        collections=collections,
        strategy=strategy,
        depth=depth,
        rrf_k=rrf_k,
    )
    tracker = BudgetTracker(ctx, ctx.options.budget)
    units = [functools.partial(_run_unit, ctx, q, c, plan, tracker) for q, c in plan.units]
    return _combine(plan, (yield concurrently(units)), started)


def _after_search(ctx: Context) -> None:
    """RETRIEVAL_EXECUTED once search has run (ids and counts only)."""
    if ctx.error is None and ctx.steps and ctx.steps[-1].name == "search" and not ctx.steps[-1].skipped:
        from agentrag.audit import retrieval_event

        retrieval_event(ctx)


search = Step("search", _search, after=_after_search)
