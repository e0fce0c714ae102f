"""``new(question, ...)``: validate the question and options into a fresh Context."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentrag.context import MAX_QUESTION_CHARS, Budget, Context, Deps, Options, Turn, as_tuple
from agentrag.errors import EmptyQueryError, InvalidInputError
from agentrag.retrieval.fusion import check_fusion
from agentrag.scope import Scope

if TYPE_CHECKING:
    from agentrag.audit import AuditSink
    from agentrag.prompts import Prompts
    from agentrag.retrieval.filters import Filters
    from agentrag.store.store import Store
    from agentrag.telemetry import Telemetry

__all__ = ["MAX_HISTORY_TURNS", "MODES", "new", "parse_history", "preprocess_question"]

MODES = ("hybrid", "vector", "lexical", "lexical_sql")
MAX_HISTORY_TURNS = 200
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant"}
_IGNORED_ROLES = {"system", "developer", "tool", "function"}
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


def _content_text(content: Any, where: str) -> str:
    """A message's text: a string, or the text parts of a multi-part (OpenAI / LangChain) content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
        return " ".join(parts)
    raise InvalidInputError(
        f"{where}: content must be a string or a list of parts, got {type(content).__name__}"
    )


def parse_history(history: Sequence[Any] | None) -> tuple[Turn, ...]:
    """Earlier turns as :class:`Turn` values, from OpenAI-style ``{"role", "content"}`` dicts or
    LangChain messages (anything with ``.type`` and ``.content``). System, developer and tool
    messages are not conversation and are left out; an unknown role raises. Whitespace is
    collapsed, empty messages are dropped, and only the last ``MAX_HISTORY_TURNS`` are kept."""
    if history is None:
        return ()
    if isinstance(history, str | bytes | Mapping) or not isinstance(history, Sequence):
        raise InvalidInputError(f"history must be a list of messages, got {type(history).__name__}")
    turns: list[Turn] = []
    for i, message in enumerate(history):
        where = f"history[{i}]"
        if isinstance(message, Turn):
            role, content = message.role, message.content
        elif isinstance(message, Mapping):
            if "role" not in message or "content" not in message:
                raise InvalidInputError(
                    f"{where}: a message needs 'role' and 'content', got {sorted(message)}"
                )
            role, content = message["role"], message["content"]
        elif hasattr(message, "type") and hasattr(message, "content"):  # a LangChain message
            role, content = message.type, message.content
        else:
            kind = type(message).__name__
            raise InvalidInputError(
                f"{where}: expected a {{'role', 'content'}} dict or a LangChain message, got {kind}"
            )
        role = str(role).lower()
        if role in _IGNORED_ROLES:
            continue
        if role not in _ROLES:
            raise InvalidInputError(f"{where}: unknown role {role!r}; use 'user' or 'assistant'")
        text = " ".join(_content_text(content, where).split())
        if text:
            turns.append(Turn(_ROLES[role], text[:MAX_QUESTION_CHARS]))
    return tuple(turns[-MAX_HISTORY_TURNS:])


def _check_collections(store: Store, names: Sequence[str]) -> None:
    """CollectionNotFoundError now (naming the database and the collections it holds; see
    agentrag.retrieval.missing) rather than at search."""
    from agentrag.retrieval.catalog import validate_name

    for name in names:
        validate_name(name)
    store.describe(list(names), max_age=60)  # one cheap query, shared with route's cache


def new(
    question: str,
    *,
    history: Sequence[Any] | None = None,
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
    fusion: str = "relative_score",
    scope: Scope | None = None,
    filters: Filters | Mapping[str, Any] | None = None,
    budget: Budget | None = None,
) -> Context:
    """Start a pipeline. ``llm`` takes a model string (litellm), an LLM object or any
    ``str -> str`` callable; without one every step uses its local strategy.

    ``query_log=True`` opts in to the query log: when ``answer()`` finishes, the question
    text, retrieved chunk ids, answer, mode, latencies, model and tokens are written to
    ``agentrag.query_logs`` (see :mod:`agentrag.querylog`). Nothing else stores the question.
    ``audit`` is the audit-event sink (default: the ``agentrag.audit`` logger).

    ``history`` holds the conversation's earlier turns (OpenAI-style ``{"role", "content"}``
    dicts or LangChain messages, oldest first); ``condense()`` uses them to turn a follow-up
    into a standalone question, and ``gate()`` sees them.

    With a ``store``, the ``collections`` named must exist (CollectionNotFoundError here,
    not at search)."""
    from agentrag.llm import as_llm

    text, warnings = preprocess_question(question)
    turns = parse_history(history)
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
    if store is not None and options.collections:
        _check_collections(store, options.collections)
    deps = Deps(
        store=store, llm=as_llm(llm), prompts=prompts, telemetry=telemetry, audit=audit, query_log=query_log
    )
    return Context(question=text, options=options, history=turns, warnings=warnings, deps=deps)
