"""The answer step's plan: what :func:`agentrag.steps.answer.prepare` decides, its options checked
and its context packed (recording the ``context.*`` metrics)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agentrag.abstain import Calibration
from agentrag.context import Context, Degradation
from agentrag.errors import InvalidInputError
from agentrag.grounding import PackedContext, graph_labels, pack_context
from agentrag.hits import Hit
from agentrag.step import Outcome, telemetry_of

if TYPE_CHECKING:
    from agentrag.llm import Message

__all__ = ["SUPPORT_CHECKS", "AnswerPlan", "check_options", "packed_plan", "plan_outcome"]

SUPPORT_CHECKS = ("local", "llm", "off")


@dataclass(frozen=True, slots=True)
class AnswerPlan:
    """What :func:`prepare` decided: either a finished ``outcome`` or the ``messages`` to send."""

    packed: PackedContext
    mode: str
    base: dict[str, Any]
    attributes: dict[str, Any]
    stages: tuple[tuple[str, float], ...]
    valid: frozenset[str] = frozenset()
    aliases: dict[str, str] = field(default_factory=dict)
    suppress_ungrounded: bool = False
    check: bool = True  # False when no retrieval was wanted: there is nothing to cite
    support: str = "local"  # how cited claims are checked against their chunks: local, llm or off
    embedder: Any = None  # for the support check's semantic signal (the store's)
    warnings: tuple[str, ...] = ()
    degradations: tuple[Degradation, ...] = ()
    messages: list[Message] | None = None
    outcome: Outcome | None = None


def check_options(
    llm: Any, *, max_context_tokens: Any, max_sentences: Any, support: Any, calibration: Any
) -> None:
    """InvalidInputError for the first of ``answer()``'s options that is out of range."""
    if (
        isinstance(max_context_tokens, bool)
        or not isinstance(max_context_tokens, int)
        or max_context_tokens < 100
    ):
        raise InvalidInputError(f"max_context_tokens must be an integer >= 100, got {max_context_tokens!r}")
    if isinstance(max_sentences, bool) or not isinstance(max_sentences, int) or max_sentences < 1:
        raise InvalidInputError(f"max_sentences must be a positive integer, got {max_sentences!r}")
    if support not in SUPPORT_CHECKS:
        raise InvalidInputError(f"answer(): support must be one of {SUPPORT_CHECKS}, got {support!r}")
    if support == "llm" and not llm:
        raise InvalidInputError("answer(support='llm') needs an LLM: pass llm=... to new()")
    if calibration is not None and not isinstance(calibration, Calibration):
        raise InvalidInputError(f"answer(): calibration must be an agentrag.Calibration, got {calibration!r}")


def packed_plan(
    ctx: Context,
    mode: str,
    hits: Sequence[Hit],
    *,
    estimate: str,
    max_context_tokens: int,
    suppress_ungrounded: bool,
    support: str,
    embedder: Any,
) -> AnswerPlan:
    """``hits`` packed into the prompt's budget (the ``context.*`` metrics recorded; ``estimate``:
    how tokens are counted, see :func:`agentrag.grounding.pack_context`) and the plan that starts
    from them."""
    from agentrag.prompts import new_delimiter

    started = time.perf_counter()
    packed = pack_context(
        hits,
        delimiter=new_delimiter(),
        budget_tokens=max_context_tokens,
        prompts=ctx.deps.prompts,
        estimate=estimate,
    )
    context_ms = (time.perf_counter() - started) * 1000.0
    instruments = telemetry_of(ctx).instruments
    instruments.context_build_duration.record(context_ms)
    instruments.context_tokens_used.record(packed.tokens)
    instruments.context_chunks_included.record(len(packed.hits))
    if packed.dropped:
        instruments.context_chunks_truncated.add(len(packed.dropped))

    return AnswerPlan(
        packed=packed,
        mode=mode,
        base={"context_used": packed.hits, "mode": mode},
        attributes={
            "mode": mode,
            "context_chunk_count": len(packed.hits),
            "context_dropped_count": len(packed.dropped),
            "context_tokens": packed.tokens,
            "context_token_estimate": estimate,
        },
        stages=(("context", context_ms),),
        valid=packed.valid_ids | graph_labels(ctx.graph_context),
        aliases=dict(packed.aliases),
        suppress_ungrounded=bool(suppress_ungrounded),
        check=ctx.retrieve is not False,
        support=support,
        embedder=embedder,
    )


def plan_outcome(
    plan: AnswerPlan, changes: dict[str, Any], strategy_name: str, attrs: dict[str, Any] | None = None
) -> AnswerPlan:
    """``plan`` finished without the LLM: its outcome is ``changes`` over the plan's base."""
    outcome = Outcome(
        {**plan.base, **changes},
        strategy=strategy_name,
        attributes={**plan.attributes, **(attrs or {}), "mode": changes.get("mode", plan.mode)},
        stages=plan.stages,
        warnings=plan.warnings,
        degradations=plan.degradations,
    )
    return replace(plan, outcome=outcome)
