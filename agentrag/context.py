"""The immutable :class:`Context` a question flows through, and its value types.

Every step returns a new Context (``dataclasses.replace``); nothing is ever mutated.
Dependencies (store, LLM, prompts, telemetry, audit sink) travel on ``deps``, outside
equality and repr, so two runs with the same inputs compare equal.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from agentrag._renderers import Renderable
from agentrag.errors import AgentragError
from agentrag.hits import Hit
from agentrag.scope import Scope

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Generator

    from agentrag.audit import AuditSink
    from agentrag.llm import LLM, LLMCall
    from agentrag.prompts import Prompts
    from agentrag.proof import Proof
    from agentrag.retrieval.filters import Filters
    from agentrag.store.store import Store
    from agentrag.telemetry import Telemetry

__all__ = [
    "Budget",
    "Context",
    "Degradation",
    "Deps",
    "Options",
    "SearchIteration",
    "SearchRecord",
    "StepRecord",
    "StopReason",
    "SupportSpan",
    "Turn",
]

MAX_QUESTION_CHARS = 10_000


class StopReason(StrEnum):
    """Why a (self-correcting) search for one question x collection stopped."""

    SINGLE_PASS = "single_pass"  # self_correct=False: one search, no judge
    SUFFICIENT = "sufficient"
    MAX_ITERATIONS = "max_iterations"
    NO_NEW_EVIDENCE = "no_new_evidence"  # a rewrite found no chunk not seen before, or no new query
    BUDGET_EXHAUSTED = "budget_exhausted"  # LLM calls, tokens or time
    JUDGE_UNPARSEABLE = "judge_unparseable"  # the sufficiency reply failed validation after a repair
    RETRIEVAL_FAILED = "retrieval_failed"  # the store could not search (embedder, database): see ``error``


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits on one pipeline run's LLM use; ``None`` means no limit."""

    max_llm_calls: int | None = 24
    max_tokens: int | None = None
    max_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Options:
    limit: int = 5
    threshold: float = 0.5
    collections: tuple[str, ...] | None = None
    mode: str = "hybrid"
    fusion: str = "relative_score"
    scope: Scope | None = None
    filters: Filters | None = None
    budget: Budget = Budget()


@dataclass(frozen=True, slots=True)
class Deps:
    """What the steps work with. Kept out of Context equality and repr."""

    store: Store | None = None
    llm: LLM | None = None
    prompts: Prompts | None = None
    telemetry: Telemetry | None = None
    audit: AuditSink | None = None
    query_log: bool = False


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier message of the conversation: ``role`` is ``"user"`` or ``"assistant"``."""

    role: str
    content: str

    def __repr__(self) -> str:
        return f"Turn({self.role}: {self.content[:40]!r})"


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step that ran: how it decided (``strategy``), how long it took, why it was skipped."""

    name: str
    strategy: str | None = None
    duration_ms: float = field(default=0.0, compare=False)
    skipped: str | None = None
    error: str | None = None

    def __repr__(self) -> str:
        extra = f" skipped: {self.skipped}" if self.skipped else ""
        extra += f" error: {self.error}" if self.error else ""
        return f"StepRecord({self.name} [{self.strategy or '-'}] {self.duration_ms:.1f}ms{extra})"


@dataclass(frozen=True, slots=True)
class SupportSpan:
    """One answer sentence and its best supporting span in a cited chunk.

    ``start`` / ``end`` are character offsets of ``text`` in the document ``document_id``;
    ``score`` (0-1) is the support check's (lexical + semantic, or the LLM judge's verdict);
    ``method`` says which check decided (``quoted``: the sentence is the span itself, extractive;
    ``local``; ``llm``). A sentence without any cited chunk has ``chunk_id`` None."""

    sentence: str
    chunk_id: str | None
    document_id: str | None
    start: int | None
    end: int | None
    text: str
    score: float
    supported: bool
    method: str = "local"


@dataclass(frozen=True, slots=True)
class Degradation:
    """A fallback that happened: never silent, always recorded here and on the span."""

    step: str
    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class SearchIteration:
    queries: tuple[str, ...]
    hit_ids: tuple[str, ...]
    new_hits: int
    sufficient: bool | None = None
    reasoning: str | None = None


@dataclass(frozen=True, slots=True)
class SearchRecord:
    """The search for one (sub-)question in one collection, with every iteration."""

    question: str
    collection: str
    hits: tuple[Hit, ...]
    iterations: tuple[SearchIteration, ...]
    stop_reason: StopReason
    used_mode: str
    degraded: str | None = None
    error: str | None = None  # why the search failed (no hits came back): "<ErrorType>: message"
    empty_reason: str | None = None  # why it found nothing (SearchResult.empty_reason); None with hits

    def __repr__(self) -> str:
        failed = f", failed: {self.error[:60]}" if self.error else ""
        return (
            f"SearchRecord({self.collection}: {len(self.hits)} hits, {len(self.iterations)} iterations, "
            f"{self.stop_reason.value}, q={self.question[:40]!r}{failed})"
        )


@dataclass(frozen=True, slots=True)
class Context(Renderable):
    """A question and everything the pipeline learned about it so far."""

    question: str
    options: Options = Options()
    # conversation: the earlier turns; condense() keeps the user's own words in original_question
    # and makes ``question`` the standalone question every later step works on
    history: tuple[Turn, ...] = ()
    original_question: str | None = None
    # gate
    retrieve: bool | None = None
    gate_reasoning: str | None = None
    # route / rewrite / decompose
    collections: tuple[str, ...] | None = None
    routing_reasoning: str | None = None
    rewrites: tuple[str, ...] = ()
    sub_questions: tuple[str, ...] | None = None
    decompose_reasoning: str | None = None
    # search / rerank / enrich
    results: tuple[SearchRecord, ...] = ()
    # the collections "every collection" left out, each with why: (name, reason); a caller without
    # a principal is not refused for an acl=True collection it did not name, it is told
    skipped_collections: tuple[tuple[str, str], ...] = ()
    ranked: tuple[Hit, ...] | None = None
    graph_context: str | None = None
    model_version_match: bool | None = None  # query embedder vs the index (None: no vector search ran)
    # answer (the field is answer_text: ``answer`` is the chain method)
    answer_text: str | None = None
    context_used: tuple[Hit, ...] = ()
    citations: tuple[str, ...] = ()
    invalid_citations: tuple[str, ...] = ()
    ungrounded_claims: tuple[str, ...] = ()
    grounded: bool | None = None
    mode: str | None = None
    answer_confidence: float | None = None  # 0-1: how likely the evidence answers (agentrag.abstain)
    support: tuple[SupportSpan, ...] = ()  # per answer sentence, its supporting span
    # bookkeeping
    error: AgentragError | None = None
    warnings: tuple[str, ...] = ()
    degradations: tuple[Degradation, ...] = ()
    steps: tuple[StepRecord, ...] = ()
    llm_calls: tuple[LLMCall, ...] = ()
    stage_ms: tuple[tuple[str, float], ...] = field(default=(), compare=False)
    query_id: str = field(default_factory=lambda: str(uuid.uuid4()), compare=False)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC), compare=False)
    deps: Deps = field(default=Deps(), compare=False, repr=False)

    # ---- reading ------------------------------------------------------------------------
    @property
    def questions(self) -> tuple[str, ...]:
        """The questions search works on: the sub-questions, else the question."""
        return self.sub_questions or (self.question,)

    @property
    def hits(self) -> tuple[Hit, ...]:
        """Every retrieved chunk once (the reranked order when rerank ran)."""
        if self.ranked is not None:
            return self.ranked
        seen: dict[str, Hit] = {}
        for record in self.results:
            for hit in record.hits:
                if hit.chunk_id not in seen or hit.score > seen[hit.chunk_id].score:
                    seen[hit.chunk_id] = hit
        return tuple(sorted(seen.values(), key=lambda h: (-h.score, h.chunk_id)))

    @property
    def empty_reason(self) -> str | None:
        """Why search found nothing: each empty search's reason (prefixed with its collection when
        several were searched); None when something was found or no search ran."""
        if not (self.results or self.skipped_collections) or any(r.hits for r in self.results):
            return None
        reasons: dict[str, str] = {}
        for record in self.results:
            why = record.empty_reason or record.error
            if why:
                reasons.setdefault(why, record.collection)
        several = len({r.collection for r in self.results}) > 1
        found = [f"{c}: {why}" if several else why for why, c in reasons.items()]
        skipped = [f"{name} not searched: {why}" for name, why in self.skipped_collections]
        return "; ".join(found + skipped) or None

    @property
    def latencies_ms(self) -> dict[str, float]:
        """Stage latencies (retrieval, context, generation, ...) and the total of all steps."""
        out: dict[str, float] = {}
        for stage, ms in self.stage_ms:  # a stage that ran more than once (two searches) adds up
            out[stage] = out.get(stage, 0.0) + ms
        out["total"] = sum(s.duration_ms for s in self.steps)
        return out

    @property
    def tokens(self) -> dict[str, int]:
        return {
            "input": sum(c.input_tokens or 0 for c in self.llm_calls),
            "output": sum(c.output_tokens or 0 for c in self.llm_calls),
        }

    @property
    def ok(self) -> bool:
        return self.error is None

    def raise_for_error(self) -> Context:
        """Raise the stored error, if any; otherwise return self (for chaining)."""
        if self.error is not None:
            raise self.error
        return self

    def evolve(self, **changes: Any) -> Context:
        return replace(self, **changes)

    def __repr__(self) -> str:
        parts = [f"question={self.question[:60]!r}"]
        if self.collections is not None:
            parts.append(f"collections={list(self.collections)}")
        if self.sub_questions is not None:
            parts.append(f"sub_questions={len(self.sub_questions)}")
        if self.results:
            parts.append(f"hits={len(self.hits)}")
        if self.answer_text is not None:
            parts.append(f"answer={self.answer_text[:60]!r}")
        if self.mode is not None:
            parts.append(f"mode={self.mode}")
        if self.error is not None:
            parts.append(f"error={type(self.error).__name__}")
        parts.append(f"steps=[{', '.join(s.name for s in self.steps)}]")
        return f"Context({', '.join(parts)})"

    # ---- method chaining: ctx.route(...).decompose().search().answer() ----------------
    # The step methods and ``proof()`` are bound onto Context by the one seam,
    # ``agentrag.steps`` (see its docstring), when the steps are imported: this module imports
    # nothing above it. The declarations below are for type checkers only. The notebook hooks
    # (``_repr_html_`` / ``_repr_markdown_``) come from Renderable, filled by agentrag.display.
    if TYPE_CHECKING:

        def gate(self, **options: Any) -> Context: ...
        def condense(self, **options: Any) -> Context: ...
        def rewrite(self, **options: Any) -> Context: ...
        def route(self, **options: Any) -> Context: ...
        def decompose(self, **options: Any) -> Context: ...
        def search(self, **options: Any) -> Context: ...
        def rerank(self, **options: Any) -> Context: ...
        def enrich(self, **options: Any) -> Context: ...
        def answer(self, **options: Any) -> Context: ...
        def answer_stream(self, **options: Any) -> Generator[str | Context, None, None]:
            """Yield the answer's text pieces as they arrive, then the final Context."""

        def aanswer_stream(self, **options: Any) -> AsyncGenerator[str | Context, None]:
            """The async twin of :meth:`answer_stream`."""

        def proof(self) -> Proof:
            """The retrieval proof: what was retrieved, from where, and what the answer cited."""

    else:

        def __getattr__(self, name: str) -> Any:
            if name in BOUND_METHODS:
                raise AttributeError(
                    f"Context.{name} is bound when agentrag.steps is imported: use agentrag.Context "
                    "(or import agentrag.steps) rather than agentrag.context alone"
                )
            raise AttributeError(f"'Context' object has no attribute {name!r}")


# What agentrag.steps binds onto Context (the seam); nothing else adds methods to it.
BOUND_METHODS: tuple[str, ...] = (
    "gate",
    "condense",
    "rewrite",
    "route",
    "decompose",
    "search",
    "rerank",
    "enrich",
    "answer",
    "answer_stream",
    "aanswer_stream",
    "proof",
)


def as_tuple(values: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    if isinstance(values, str):
        return (values,)
    return tuple(values)


def plain_mapping(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value or {})
