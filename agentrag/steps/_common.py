"""Helpers the steps share: prompts, structured LLM calls, local text heuristics, budgets."""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

from agentrag._sansio import Op
from agentrag.errors import InvalidInputError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentrag.context import Budget, Context
    from agentrag.hits import Hit
    from agentrag.llm import LLMCall
    from agentrag.prompts import Prompts
    from agentrag.store.store import Store

M = TypeVar("M", bound="BaseModel")

STRATEGIES = ("auto", "llm", "local")
# gate()'s reason when no word of the question occurs in the searched collections (answer() says so)
UNRELATED_REASON = "local: no content word of the question occurs in the searched collections"


def prompts_of(ctx: Context) -> Prompts:
    from agentrag.prompts import default_prompts

    return ctx.deps.prompts or default_prompts()


def use_llm(ctx: Context, strategy: str, step: str) -> bool:
    """Whether a step decides with the LLM: ``auto`` uses it when one is configured."""
    if strategy not in STRATEGIES:
        raise InvalidInputError(f"{step}(): strategy must be one of {STRATEGIES}, got {strategy!r}")
    if strategy == "llm" and ctx.deps.llm is None:
        raise InvalidInputError(f"{step}(strategy='llm') needs an LLM: pass llm=... to new()")
    return strategy != "local" and ctx.deps.llm is not None


def ask_json(ctx: Context, purpose: str, schema: type[M], **variables: Any) -> tuple[M, list[LLMCall]]:
    """Render ``prompts/<purpose>.j2``, call the LLM, validate the JSON (one repair)."""
    from agentrag.llm import complete_json
    from agentrag.telemetry import DEFAULT_TELEMETRY

    assert ctx.deps.llm is not None
    messages = prompts_of(ctx).render(purpose, **variables)
    with within_budget(ctx):
        parsed, calls = complete_json(
            ctx.deps.llm, messages, schema, purpose=purpose, telemetry=ctx.deps.telemetry or DEFAULT_TELEMETRY
        )
    return parsed, list(calls)


def deadline_of(ctx: Context) -> float | None:
    """The run's deadline (``time.time()`` seconds): creation + ``Budget(max_seconds=...)``."""
    seconds = ctx.options.budget.max_seconds
    return None if seconds is None else ctx.created_at.timestamp() + seconds


def within_budget(ctx: Context) -> AbstractContextManager[None]:
    """The run's deadline in force for the model calls inside (see :mod:`agentrag.llm.deadline`)."""
    from agentrag.llm.deadline import deadline_scope

    return deadline_scope(deadline_of(ctx), ctx.options.budget.max_seconds)


def past_deadline(ctx: Context) -> bool:
    at = deadline_of(ctx)
    return at is not None and time.time() >= at


def bounded(ctx: Context, op: Op) -> Op:
    """``op`` with the run's deadline in force while it runs (sync or async)."""
    if ctx.options.budget.max_seconds is None:
        return op

    def run() -> Any:
        with within_budget(ctx):
            return op.run()

    async def arun() -> Any:
        with within_budget(ctx):
            return await op.arun()

    return Op(run, arun)


def require_store(ctx: Context, step: str) -> Store:
    if ctx.deps.store is None:
        raise InvalidInputError(f"{step}() needs a store: pass store=... to new()")
    return ctx.deps.store


def clean_list(values: Iterable[str], *, exclude: Iterable[str] = (), limit: int | None = None) -> list[str]:
    """Strip, drop empties and duplicates (case-insensitive), keep order."""
    seen = {e.strip().lower() for e in exclude}
    out: list[str] = []
    for value in values:
        value = " ".join(str(value).split())
        if value and value.lower() not in seen:
            seen.add(value.lower())
            out.append(value)
    return out[:limit] if limit is not None else out


# ---- local text heuristics ------------------------------------------------------------------
def terms(text: str) -> tuple[str, ...]:
    """Stemmed, stop-word-free terms (cached: chunks are re-read across iterations); in the answer's
    language when it has one (:mod:`agentrag.answer_languages`), each language cached apart."""
    from agentrag.answer_languages import ANSWER_LANGUAGE

    language = ANSWER_LANGUAGE.get()
    return english_terms(text) if language is None else language_terms(text, language)


@functools.lru_cache(maxsize=8192)
def english_terms(text: str) -> tuple[str, ...]:
    from agentrag.retrieval.tokenize import tokenize

    return tuple(tokenize(text))


@functools.lru_cache(maxsize=8192)
def language_terms(text: str, language: str) -> tuple[str, ...]:
    from agentrag.answer_languages import without_suffixes
    from agentrag.languages import analyze

    return tuple(analyze(without_suffixes(text, language), language))


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]{2,}")


def expansion_terms(question: str, hits: Sequence[Hit], *, count: int = 5) -> list[str]:
    """Pseudo-relevance feedback: frequent words of the top chunks the question lacks."""
    asked = set(terms(question))
    weights: dict[str, float] = {}
    surface: dict[str, str] = {}
    for rank, hit in enumerate(hits[:3]):
        for word in _WORD.findall(hit.text):
            stems = terms(word)
            if not stems or stems[0] in asked:
                continue
            weights[stems[0]] = weights.get(stems[0], 0.0) + 1.0 / (rank + 1)
            surface.setdefault(stems[0], word.lower())
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    return [surface[stem] for stem, _ in ranked[:count]]


def coverage(question: str, text: str) -> float:
    """Share of the question's terms that occur in ``text`` (0..1)."""
    asked = set(terms(question))
    if not asked:
        return 0.0
    return len(asked & set(terms(text))) / len(asked)


# ---- budgets ----------------------------------------------------------------------------------
class BudgetTracker:
    """Counts LLM calls and tokens of one step run against the context's budget (thread-safe)."""

    def __init__(self, ctx: Context, budget: Budget) -> None:
        self.budget = budget
        self._calls = len(ctx.llm_calls)
        self._tokens = sum((c.input_tokens or 0) + (c.output_tokens or 0) for c in ctx.llm_calls)
        self._started = ctx.created_at.timestamp()
        self._lock = threading.Lock()

    def add(self, calls: Sequence[LLMCall]) -> None:
        with self._lock:
            self._calls += len(calls)
            self._tokens += sum((c.input_tokens or 0) + (c.output_tokens or 0) for c in calls)

    def exhausted(self, upcoming_calls: int = 1) -> str | None:
        """Why the budget cannot pay for ``upcoming_calls`` more calls, or None."""
        b = self.budget
        with self._lock:
            if b.max_llm_calls is not None and self._calls + upcoming_calls > b.max_llm_calls:
                return f"LLM calls {self._calls} of {b.max_llm_calls}"
            if b.max_tokens is not None and self._tokens >= b.max_tokens:
                return f"tokens {self._tokens} of {b.max_tokens}"
        if b.max_seconds is not None and time.time() - self._started >= b.max_seconds:
            return f"time budget of {b.max_seconds}s spent"
        return None
