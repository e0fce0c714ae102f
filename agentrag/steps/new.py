"""``new(question, ...)``: validate the question and options into a fresh Context."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentrag.context import MAX_QUESTION_CHARS, Budget, Context, Deps, Options, as_tuple
from agentrag.errors import EmptyQueryError, InvalidInputError
from agentrag.retrieval.fusion import check_fusion
from agentrag.scope import Scope

if TYPE_CHECKING:
    from agentrag.audit import AuditSink
    from agentrag.prompts import Prompts
    from agentrag.retrieval.filters import Filters
    from agentrag.store.store import Store
    from agentrag.telemetry import Telemetry

__all__ = ["MODES", "new", "preprocess_question"]

MODES = ("hybrid", "vector", "lexical", "lexical_sql")
_log = logging.getLogger("agentrag")


def preprocess_question(question: str, *, limit: int = MAX_QUESTION_CHARS) -> tuple[str, tuple[str, ...]]:
    """Strip and collapse whitespace; refuse empty text; truncate over ``limit`` with a warning."""
    if not isinstance(question, str):
        raise TypeError(f"the question must be a str, got {type(question).__name__}")
    text = " ".join(question.split())
    if not text:
        raise EmptyQueryError("the question is empty")
    if len(text) > limit:
        warning = f"question truncated from {len(text)} to {limit} characters"
        _log.warning(warning)
        return text[:limit], (warning,)
    return text, ()


def new(
    question: str,
    *,
    store: Store | None = None,
    llm: Any = None,
    prompts: Prompts | None = None,
    telemetry: Telemetry | None = None,
    audit: AuditSink | None = None,
    query_log: bool = False,
    limit: int = 5,
    threshold: float = 0.5,
    collections: str | Sequence[str] | None = None,
    mode: str = "hybrid",
    fusion: str = "rrf",
    scope: Scope | None = None,
    filters: Filters | Mapping[str, Any] | None = None,
    budget: Budget | None = None,
) -> Context:
    """Start a pipeline. ``llm`` takes a model string (litellm), an LLM object or any
    ``str -> str`` callable; without one every step uses its local strategy.

    ``query_log=True`` opts in to the query log: when ``answer()`` finishes, the question
    text, retrieved chunk ids, answer, mode, latencies, model and tokens are written to
    ``agentrag.query_logs`` (see :mod:`agentrag.querylog`). Nothing else stores the question.
    ``audit`` is the audit-event sink (default: the ``agentrag.audit`` logger)."""
    from agentrag.llm import as_llm

    text, warnings = preprocess_question(question)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 50:
        raise InvalidInputError(f"limit must be an integer from 1 to 50, got {limit!r}")
    if not isinstance(threshold, int | float) or isinstance(threshold, bool):
        raise InvalidInputError(f"threshold must be a number, got {threshold!r}")
    if mode not in MODES:
        raise InvalidInputError(f"mode must be one of {MODES}, got {mode!r}")
    check_fusion(fusion)
    if scope is not None and not isinstance(scope, Scope):
        raise InvalidInputError(f"scope must be an agentrag.Scope, got {type(scope).__name__}")
    if budget is not None and not isinstance(budget, Budget):
        raise InvalidInputError(f"budget must be an agentrag.Budget, got {type(budget).__name__}")
    if query_log and store is None:
        raise InvalidInputError("query_log=True needs a store")
    from agentrag.retrieval.filters import validate_filters

    parsed_filters = validate_filters(filters)  # FilterError now, before any step runs
    options = Options(
        limit=limit,
        threshold=float(threshold),
        collections=as_tuple(collections),
        mode=mode,
        fusion=fusion,
        scope=scope,
        filters=parsed_filters,
        budget=budget or Budget(),
    )
    deps = Deps(
        store=store, llm=as_llm(llm), prompts=prompts, telemetry=telemetry, audit=audit, query_log=query_log
    )
    return Context(question=text, options=options, warnings=warnings, deps=deps)
