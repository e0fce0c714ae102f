"""Retrieval for chatbots: one turn of a conversation in, the ``rag_*`` fields a reply prompt needs out.

The turn runs ``gate -> condense -> rewrite -> search -> rerank -> context`` over a
:class:`RAGConfig` (one typed, validated object for every knob; an unknown key raises):

* ``enabled=False``: nothing runs, ``rag_context`` stays empty (mode ``disabled``).
* ``gate`` decides whether the message needs documents at all (small talk skips retrieval).
* ``condense`` makes a follow-up standalone from the earlier turns.
* ``enable_query_rewrite``: 1-3 extra queries (``max_rewrites``), else the question only.
* ``search``: each leg keeps ``per_method_k`` candidates, fused by the context's fusion (relative
  score by default; ``fusion="rrf"`` given to :func:`start` uses RRF with ``rrf_k``); the best
  ``rerank_top_n`` go to ``rerank``.
* ``enable_llm_rerank``: the LLM orders them, only when an LLM is configured; otherwise the
  heuristic does and the fallback is recorded (a ``heuristic-rerank`` degradation).
* ``context``: the chunks that are relevant to the standalone question (term coverage
  ``min_term_coverage`` or vector similarity ``min_similarity``), at most ``max_chunks``,
  adjacent chunks of one document merged, packed under ``token_budget`` tokens inside
  per-request random delimiters (``prompts/chat_context.j2``). Nothing relevant:
  ``rag_grounded`` is false and ``rag_guidance`` says to widen the scope or add documents.

:func:`retrieve_turn` / :func:`aretrieve_turn` run it in one call; the node functions are what
:mod:`agentrag.integrations.langgraph` wires into a LangGraph subgraph. :func:`with_rag_context`
appends the context, or a short disclaimer when ungrounded, to a reply's system prompt.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentrag.abstain import DEFAULT_CALIBRATION
from agentrag.context import Context, Degradation
from agentrag.errors import InvalidInputError
from agentrag.scope import Principal, Scope
from agentrag.steps._common import UNRELATED_REASON

if TYPE_CHECKING:
    from agentrag.hits import Hit
    from agentrag.store.store import Store

__all__ = [
    "GUIDANCE",
    "RAG_FIELDS",
    "RAGConfig",
    "RAGResult",
    "aretrieve_turn",
    "asearch_node",
    "citation_of",
    "condense_node",
    "context_node",
    "gate_node",
    "rerank_node",
    "retrieve_turn",
    "rewrite_node",
    "scope_from_configurable",
    "search_node",
    "split_messages",
    "start",
    "with_rag_context",
]

_WIDEN = "Widen the scope (another workspace, or beyond this session) or add documents that cover this topic."
GUIDANCE = f"No relevant passages were found in the searched documents. {_WIDEN}"
RAG_FIELDS = (
    "rag_context",
    "rag_citations",
    "rag_chunks",
    "rag_grounded",
    "rag_mode",
    "rag_skipped_reason",
    "rag_proof",
    "rag_guidance",
    "rag_question",
    "rag_confidence",
)
Strategy = Literal["auto", "llm", "local"]


class RAGConfig(BaseModel):
    """Every retrieval knob of a chat turn. Validated at construction: an unknown key or a bad value
    raises :class:`~agentrag.errors.InvalidInputError` naming every problem.

    ``RAGConfig.model_validate({"rag": {...}})`` also takes the settings nested under ``rag``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    collections: tuple[str, ...] | None = None  # None: every collection
    mode: Literal["hybrid", "vector", "lexical", "lexical_sql"] = "hybrid"
    gate: Strategy = "auto"
    condense: Strategy = "auto"
    history_turns: int = Field(6, ge=1, le=50)  # earlier turns gate and condense look at
    enable_query_rewrite: bool = False
    max_rewrites: int = Field(2, ge=1, le=3)
    per_method_k: int = Field(100, ge=1, le=1000)  # candidates each leg keeps before fusion
    rrf_k: float = Field(60.0, ge=0, allow_inf_nan=False)
    rerank_top_n: int = Field(20, ge=1, le=50)  # fused candidates that go to rerank
    enable_llm_rerank: bool = False
    max_chunks: int = Field(6, ge=1, le=50)  # chunks in rag_context at most
    token_budget: int = Field(2000, ge=100, le=200_000)
    min_term_coverage: float = Field(0.34, ge=0, le=1)
    min_similarity: float = Field(0.45, ge=-1, le=1)
    include_proof: bool = True
    abstain: bool = True  # no context when the evidence answers nothing (rag_mode "abstained")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidInputError(_problems(exc)) from None

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> RAGConfig:
        if isinstance(obj, Mapping):
            return cls(**_unnested(obj))
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise InvalidInputError(_problems(exc)) from None

    @model_validator(mode="before")
    @classmethod
    def _unnest(cls, data: Any) -> Any:
        return _unnested(data)

    @model_validator(mode="after")
    def _consistent(self) -> RAGConfig:
        if self.per_method_k < self.rerank_top_n:
            raise ValueError(
                f"per_method_k ({self.per_method_k}) cannot be below rerank_top_n ({self.rerank_top_n}): "
                "the candidates for reranking come from each method's top K"
            )
        if self.max_chunks > self.rerank_top_n:
            raise ValueError(
                f"max_chunks ({self.max_chunks}) cannot exceed rerank_top_n ({self.rerank_top_n})"
            )
        if self.collections is not None and not self.collections:
            raise ValueError("collections must be None (every collection) or name at least one")
        return self


def _unnested(data: Any) -> Any:
    """``{"rag": {...}}`` -> ``{...}``: the seed names the settings ``rag.enabled``, ``rag.rrf_k``, ..."""
    if isinstance(data, Mapping) and set(data) == {"rag"} and isinstance(data["rag"], Mapping):
        return dict(data["rag"])
    return data


def _problems(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "config"
        why = error["msg"]
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(error["loc"][-1]), RAGConfig.model_fields, n=1, cutoff=0.6)
            why = "unknown setting" + (f" (did you mean {close[0]!r}?)" if close else "")
        parts.append(f"{where}: {why}")
    return "RAGConfig: " + "; ".join(parts)


@dataclass(frozen=True, slots=True)
class RAGResult:
    """What one turn's retrieval produced: the ``rag_*`` state fields (see :meth:`as_state`)."""

    context: str = ""
    citations: tuple[dict[str, Any], ...] = ()
    chunks: tuple[dict[str, Any], ...] = ()
    grounded: bool = False
    mode: str = "skipped"  # full | lexical-only | low-confidence | abstained | skipped | disabled | failed
    skipped_reason: str | None = None
    proof: dict[str, Any] | None = None
    guidance: str | None = None
    question: str | None = None  # the standalone question that was searched
    confidence: float | None = None  # 0-1: how likely the context answers it (agentrag.abstain)
    ctx: Context | None = field(default=None, compare=False, repr=False)

    def as_state(self) -> dict[str, Any]:
        """The ``rag_*`` fields as plain JSON-friendly values, for a graph state."""
        return {
            "rag_context": self.context,
            "rag_citations": [dict(c) for c in self.citations],
            "rag_chunks": [dict(c) for c in self.chunks],
            "rag_grounded": self.grounded,
            "rag_mode": self.mode,
            "rag_skipped_reason": self.skipped_reason,
            "rag_proof": self.proof,
            "rag_guidance": self.guidance,
            "rag_question": self.question,
            "rag_confidence": self.confidence,
        }

    def __repr__(self) -> str:
        labels = [c["label"] for c in self.citations]
        why = f", skipped: {self.skipped_reason}" if self.skipped_reason else ""
        return f"RAGResult({self.mode}, grounded={self.grounded}, citations={labels}{why})"


# ---- the turn's input -------------------------------------------------------------------------
def split_messages(messages: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
    """The last user message (the question) and the turns before it (the history)."""
    from agentrag.steps.new import parse_history

    turns = parse_history(messages)
    if not turns or turns[-1].role != "user":
        raise InvalidInputError("a chat turn needs the conversation to end with a user message")
    return turns[-1].content, turns[:-1]


def scope_from_configurable(configurable: Mapping[str, Any] | None) -> Scope | None:
    """``Scope(tenant, workspace, session)`` from ``tenant_id`` / ``workspace_id`` / ``session_id``, its
    principal from ``user_id`` / ``groups`` (a list); a session scope includes the shared documents."""
    config = configurable or {}
    values = [config.get(f"{k}_id") for k in ("tenant", "workspace", "session")]
    user, groups = config.get("user_id"), config.get("groups")
    if all(v is None for v in values) and user is None and not groups:
        return None
    tenant, workspace, session = (None if v is None else str(v) for v in values)
    principal = None
    if user is not None or groups:
        principal = Principal(user=None if user is None else str(user), groups=list(groups or []))
    # a conversation reads its own uploads and the shared documents, fused as one ranking
    return Scope(
        tenant=tenant,
        workspace=workspace,
        session=session,
        include_shared=session is not None,
        principal=principal,
    )


def start(
    store: Store | None,
    messages: Sequence[Any],
    *,
    config: RAGConfig,
    scope: Scope | None = None,
    llm: Any = None,
    **new_options: Any,
) -> Context:
    """The turn's Context: ``new(last user message, history=earlier turns, ...)``."""
    from agentrag.steps.new import new

    question, history = split_messages(messages)
    return new(
        question,
        history=history,
        store=store,
        llm=llm,
        scope=scope,
        collections=config.collections,
        mode=config.mode,
        limit=config.rerank_top_n,
        **new_options,
    )


# ---- the nodes: Context -> Context --------------------------------------------------------------
def _skip(ctx: Context, config: RAGConfig) -> bool:
    return not config.enabled or ctx.error is not None or ctx.retrieve is False


def gate_node(ctx: Context, config: RAGConfig) -> Context:
    from agentrag.steps.gate import gate

    return ctx if not config.enabled else gate(ctx, strategy=config.gate, max_turns=config.history_turns)


def condense_node(ctx: Context, config: RAGConfig) -> Context:
    from agentrag.steps.condense import condense

    if not config.enabled:
        return ctx
    return condense(ctx, strategy=config.condense, max_turns=config.history_turns)


def rewrite_node(ctx: Context, config: RAGConfig) -> Context:
    from agentrag.steps.rewrite import rewrite

    if _skip(ctx, config) or not config.enable_query_rewrite:
        return ctx
    return rewrite(ctx, max_rewrites=config.max_rewrites)


def _search_options(config: RAGConfig) -> dict[str, Any]:
    return {"limit": config.rerank_top_n, "depth": config.per_method_k, "rrf_k": config.rrf_k}


def search_node(ctx: Context, config: RAGConfig) -> Context:
    from agentrag.steps.search import search

    return ctx if _skip(ctx, config) else search(ctx, **_search_options(config))


async def asearch_node(ctx: Context, config: RAGConfig) -> Context:
    from agentrag.steps.search import search

    return ctx if _skip(ctx, config) else await search.arun(ctx, **_search_options(config))


def rerank_node(ctx: Context, config: RAGConfig) -> Context:
    from agentrag.steps.rerank import rerank

    if _skip(ctx, config):
        return ctx
    strategy = "llm" if config.enable_llm_rerank and ctx.deps.llm is not None else "heuristic"
    return rerank(ctx, strategy=strategy, top_k=config.rerank_top_n)


def _relevant(ctx: Context, config: RAGConfig) -> list[Hit]:
    from agentrag.steps._common import coverage

    return [
        h
        for h in ctx.hits
        if coverage(ctx.question, h.text) >= config.min_term_coverage
        or (h.vector_score is not None and h.vector_score >= config.min_similarity)
    ]


def citation_of(hit: Hit) -> dict[str, Any]:
    """A chunk as a ``rag_citations`` entry: its label (chunk id), document, collection and place."""
    return {
        "label": hit.chunk_id,
        "document_id": hit.document_id,
        "collection": hit.collection,
        "source": hit.source,
        "section": hit.section,
        "page": hit.page,
        "locator": hit.locator,
    }


def _mode(ctx: Context, config: RAGConfig) -> tuple[str, str | None]:
    from agentrag.steps.answer import answer_mode

    if not config.enabled:
        return "disabled", "retrieval is disabled (rag.enabled is false)"
    if ctx.error is not None:
        return "failed", f"{type(ctx.error).__name__}: {ctx.error}"
    if ctx.retrieve is False:
        return "skipped", ctx.gate_reasoning or "the gate decided no retrieval is needed"
    mode = answer_mode(ctx)
    return ("failed", "every search failed") if mode == "graph-only" else (mode, None)


def _confidence(ctx: Context, config: RAGConfig) -> tuple[float | None, str | None, float]:
    """The evidence's confidence over the hits (None without hits), when the turn abstains the guidance
    that says so (the knowledge base does not cover it; the closest documents), and the confidence
    below which the turn is low-confidence. The evidence is weighed as the answer step weighs it
    without an LLM (the same candidates: :func:`~agentrag.steps.evidence_scope.hits_for_evidence`
    of the ranked hits, adjacent chunks merged; the message as typed beside a condensed follow-up),
    with the embedder of the best hit's collection, and in another language than English with its
    sentences, terms and abstention threshold (:func:`agentrag.answer_languages.answer_language`,
    moved by the evidence's similarity as the answer step moves it: ``semantic_threshold``)."""
    from agentrag.abstain import abstention_message
    from agentrag.answer_languages import answer_language, answering_in, semantic_threshold
    from agentrag.extractive import gather
    from agentrag.grounding import pack_context
    from agentrag.prompts import new_delimiter
    from agentrag.steps.evidence_scope import evidence_questions, hits_for_evidence, typed_questions

    ranked = ctx.hits[: config.rerank_top_n]
    if not ranked:
        return None, None, DEFAULT_CALIBRATION.low_below
    hits = pack_context(
        hits_for_evidence(ctx, ranked), delimiter=new_delimiter(), budget_tokens=1_000_000
    ).hits
    store = ctx.deps.store
    embedder = store.answer_embedder(ranked[0].collection) if store is not None else None
    language, calibration = answer_language(
        ctx.question, hits, DEFAULT_CALIBRATION, given=False, embedder=embedder
    )
    with answering_in(language):
        evidence = gather(
            evidence_questions(ctx),
            hits,
            embedder=embedder,
            calibration=calibration,
            typed=typed_questions(ctx),
        )
    if language is not None:  # the answer step's threshold in that language: moved by the similarity
        calibration = semantic_threshold(
            calibration,
            getattr(embedder, "model_id", None),
            evidence.signals.semantic,
            evidence.signals.vector,
        )
    confidence = round(evidence.confidence, 4)
    if config.abstain and evidence.units and confidence < calibration.abstain_below:
        why = abstention_message(evidence.closest(), language=language)
        return confidence, f"{why} {_WIDEN}", calibration.low_below
    return confidence, None, calibration.low_below


def context_node(ctx: Context, config: RAGConfig) -> tuple[Context, RAGResult]:
    """Build ``rag_context`` (span ``agentrag.rag_context``); record what fell back."""
    from agentrag.grounding import pack_context
    from agentrag.prompts import new_delimiter
    from agentrag.telemetry import DEFAULT_TELEMETRY, mark_degraded, mark_skipped

    telemetry = ctx.deps.telemetry or DEFAULT_TELEMETRY
    with telemetry.step_span("rag_context") as span:
        mode, skipped = _mode(ctx, config)
        question = ctx.question if config.enabled and ctx.error is None else None
        if skipped is not None and ctx.retrieve is False and skipped == UNRELATED_REASON and config.abstain:
            # the gate found none of the question's words in the collections: the turn abstains
            from agentrag.abstain import abstention_message

            why = abstention_message((), reason="none of its words occurs in the searched documents")
            span.set_attribute("agentrag.rag_context.mode", "abstained")
            ctx = replace(ctx, answer_confidence=0.0)
            result = RAGResult(
                mode="abstained",
                skipped_reason=skipped,
                guidance=f"{why} {_WIDEN}",
                question=question,
                confidence=0.0,
                ctx=ctx,
            )
            return ctx, result
        if skipped is not None:
            mark_skipped(span, skipped)
            span.set_attribute("agentrag.rag_context.mode", mode)
            return ctx, RAGResult(mode=mode, skipped_reason=skipped, question=question, ctx=ctx)
        if config.enable_llm_rerank and ctx.deps.llm is None:
            why = "enable_llm_rerank is on but no LLM is configured: the heuristic reranked"
            ctx = replace(
                ctx, degradations=(*ctx.degradations, Degradation("rerank", "heuristic-rerank", why))
            )
            mark_degraded(span, "heuristic-rerank", why)
        relevant = _relevant(ctx, config)[: config.max_chunks]
        confidence, guidance, low_below = _confidence(ctx, config)
        if confidence is not None and guidance is not None:
            relevant, mode = [], "abstained"
        elif confidence is not None and confidence < low_below and mode == "full":
            mode = "low-confidence"
        packed = pack_context(
            relevant, delimiter=new_delimiter(), budget_tokens=config.token_budget, prompts=ctx.deps.prompts
        )
        grounded = bool(packed.hits)
        ctx = replace(ctx, context_used=packed.hits, grounded=grounded, answer_confidence=confidence)
        text = ""
        if grounded:
            from agentrag.prompts import default_prompts

            prompts = ctx.deps.prompts or default_prompts()
            text = prompts.render(
                "chat_context", context=packed.text, delimiter=packed.delimiter, labels=list(packed.labels)
            )[-1]["content"]
        span.set_attribute("agentrag.rag_context.mode", mode)
        span.set_attribute("agentrag.rag_context.grounded", grounded)
        span.set_attribute("agentrag.rag_context.chunks", len(packed.hits))
        span.set_attribute("agentrag.rag_context.tokens", packed.tokens)
        if confidence is not None:
            span.set_attribute("agentrag.rag_context.confidence", confidence)
        result = RAGResult(
            context=text,
            citations=tuple(citation_of(h) for h in packed.hits),
            chunks=tuple(
                {**citation_of(h), "text": h.text, "score": h.score, "rank": h.rank} for h in packed.hits
            ),
            grounded=grounded,
            mode=mode,
            proof=ctx.proof().to_dict() if config.include_proof else None,
            guidance=None if grounded else _with_skipped(guidance or GUIDANCE, ctx),
            question=ctx.question,
            confidence=confidence,
            ctx=ctx,
        )
        return ctx, result


def _with_skipped(guidance: str, ctx: Context) -> str:
    """The guidance, plus the collections that were not searched and why (an acl=True collection
    when the conversation names no user or group)."""
    if not ctx.skipped_collections:
        return guidance
    names = ", ".join(name for name, _ in ctx.skipped_collections)
    reasons = "; ".join(dict.fromkeys(why for _, why in ctx.skipped_collections))
    return f"{guidance} Not searched: {names} ({reasons}); pass user_id or groups to search them."


# ---- one call ----------------------------------------------------------------------------------
def _as_config(config: RAGConfig | Mapping[str, Any] | None) -> RAGConfig:
    if config is None:
        return RAGConfig()
    if isinstance(config, RAGConfig):
        return config
    if isinstance(config, Mapping):
        return RAGConfig.model_validate(dict(config))
    raise InvalidInputError(f"config must be a RAGConfig or a mapping, got {type(config).__name__}")


def retrieve_turn(
    store: Store | None,
    messages: Sequence[Any],
    *,
    config: RAGConfig | Mapping[str, Any] | None = None,
    scope: Scope | None = None,
    llm: Any = None,
    **new_options: Any,
) -> RAGResult:
    """Run one chat turn's retrieval: ``messages`` is the conversation, ending with the user's message."""
    cfg = _as_config(config)
    ctx = start(store, messages, config=cfg, scope=scope, llm=llm, **new_options)
    for node in (gate_node, condense_node, rewrite_node, search_node, rerank_node):
        ctx = node(ctx, cfg)
    return context_node(ctx, cfg)[1]


async def aretrieve_turn(
    store: Store | None,
    messages: Sequence[Any],
    *,
    config: RAGConfig | Mapping[str, Any] | None = None,
    scope: Scope | None = None,
    llm: Any = None,
    **new_options: Any,
) -> RAGResult:
    """The async twin of :func:`retrieve_turn` (the searches run concurrently)."""
    import asyncio

    cfg = _as_config(config)
    ctx = start(store, messages, config=cfg, scope=scope, llm=llm, **new_options)
    for node in (gate_node, condense_node, rewrite_node):
        ctx = await asyncio.to_thread(node, ctx, cfg)
    ctx = await asearch_node(ctx, cfg)
    ctx = rerank_node(ctx, cfg)
    return (await asyncio.to_thread(context_node, ctx, cfg))[1]


def with_rag_context(system_prompt: str, state: Mapping[str, Any] | RAGResult) -> str:
    """``system_prompt`` plus the retrieved context, or a short disclaimer when retrieval ran and
    found nothing relevant (``rag_grounded`` false). Skipped or disabled retrieval adds nothing."""
    if isinstance(state, RAGResult):
        state = state.as_state()
    context = state.get("rag_context") or ""
    if context:
        return f"{system_prompt.rstrip()}\n\n{context}"
    if state.get("rag_mode") in ("skipped", "disabled", None):
        return system_prompt
    from agentrag.prompts import default_prompts

    guidance = state.get("rag_guidance") or GUIDANCE
    disclaimer = default_prompts().render("chat_disclaimer", guidance=guidance)[-1]["content"]
    return f"{system_prompt.rstrip()}\n\n{disclaimer}"
