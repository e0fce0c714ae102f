"""A search's query plan: its options checked, the query cleaned, filters and scope compiled.

:func:`make_plan` turns :func:`~agentrag.retrieval.search.search`'s arguments into a
:class:`SearchPlan`; everything a caller can get wrong fails here, before the query is embedded
or a connection is taken.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrag.errors import EmptyQueryError, InvalidInputError
from agentrag.retrieval.catalog import validate_name
from agentrag.retrieval.fusion import (
    DEFAULT_RRF_K,
    DEFAULT_VECTOR_WEIGHT,
    check_fusion,
    check_rrf_k,
    check_vector_weight,
)
from agentrag.retrieval.predicate import Predicate, compile_predicate
from agentrag.retrieval.vector import MAX_EF_SEARCH
from agentrag.scope import Scope

if TYPE_CHECKING:
    from agentrag.retrieval.filters import Filters

__all__ = [
    "MAX_DEPTH",
    "MAX_QUERY_CHARS",
    "MODES",
    "SearchPlan",
    "check_int",
    "collection_names",
    "fusion_settings",
    "make_plan",
    "preprocess_query",
]

MODES: tuple[str, ...] = ("hybrid", "vector", "lexical", "lexical_sql")
MAX_QUERY_CHARS = 10_000
MAX_DEPTH = 10_000

_log = logging.getLogger("agentrag.retrieval")


def preprocess_query(query: str) -> tuple[str, tuple[str, ...]]:
    """Strip, collapse whitespace, drop NUL bytes and lone surrogates, truncate to 10,000 characters.

    Returns the query and the warnings it caused. Raises EmptyQueryError when nothing is left.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, got {type(query).__name__}")
    text = query.replace("\x00", " ")
    if not text.isascii():
        text = text.encode("utf-8", "ignore").decode("utf-8")  # lone surrogates cannot be sent anywhere
    text = " ".join(text.split())
    if not text:
        raise EmptyQueryError("the query is empty")
    warnings: tuple[str, ...] = ()
    if len(text) > MAX_QUERY_CHARS:
        original = len(text)
        text = text[:MAX_QUERY_CHARS].rstrip()
        warnings = (f"query truncated from {original} to {len(text)} characters (limit {MAX_QUERY_CHARS})",)
        _log.warning("search query truncated from %d to %d characters", original, len(text))
    return text, warnings


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InvalidInputError(f"{name} must be {bounds}, got {value}")
    return value


def collection_names(collections: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(collections, str):
        collections = [collections]
    if not isinstance(collections, Sequence):
        raise TypeError(f"collections must be a str or a sequence of str, got {type(collections).__name__}")
    names: dict[str, None] = {}
    for name in collections:
        if not isinstance(name, str):
            raise TypeError(f"collection names must be str, got {type(name).__name__}")
        names[validate_name(name)] = None
    if not names:
        raise InvalidInputError("collections is empty: name at least one collection")
    return tuple(names)


def fusion_settings(fusion: str, rrf_k: float | None, vector_weight: float | None) -> tuple[float, float]:
    """Check the fusion options; return ``(rrf_k, vector_weight)``, the other fusion's at its default."""
    check_fusion(fusion)
    if fusion == "rrf":
        if vector_weight is not None:
            raise InvalidInputError('vector_weight applies to fusion="relative_score", not to "rrf"')
        return check_rrf_k(DEFAULT_RRF_K if rrf_k is None else rrf_k), DEFAULT_VECTOR_WEIGHT
    if rrf_k is not None:
        check_rrf_k(rrf_k)
        raise InvalidInputError('rrf_k applies to fusion="rrf", not to "relative_score" (the default)')
    return DEFAULT_RRF_K, check_vector_weight(
        DEFAULT_VECTOR_WEIGHT if vector_weight is None else vector_weight
    )


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """A search's options, validated: everything a caller can get wrong has failed by now."""

    query: str
    names: tuple[str, ...]
    mode: str
    top_k: int
    leg_depth: int  # candidates per leg and collection: max(depth, top_k)
    fusion: str
    rrf_k: float
    vector_weight: float
    ef_search: int | None
    min_score: float | None
    scope: Scope | None
    predicate: Predicate  # scope, grants and filters: the WHERE fragment per collection
    warnings: tuple[str, ...]

    @property
    def params(self) -> dict[str, Any]:
        return self.predicate.params


def make_plan(
    query: str,
    collections: str | Sequence[str],
    *,
    mode: str,
    top_k: int,
    max_top_k: int,
    depth: int,
    fusion: str,
    rrf_k: float | None,
    vector_weight: float | None,
    min_score: float | None,
    filters: Filters | Mapping[str, Any] | None,
    scope: Scope | None,
    ef_search: int | None,
) -> SearchPlan:
    if mode not in MODES:
        raise InvalidInputError(f"unknown search mode {mode!r}; valid modes are {', '.join(MODES)}")
    max_top_k = check_int("max_top_k", max_top_k, 1)
    top_k = check_int("top_k", top_k, 1, max_top_k)
    depth = check_int("depth", depth, 1, MAX_DEPTH)
    k, weight = fusion_settings(fusion, rrf_k, vector_weight)
    if ef_search is not None:
        ef_search = check_int("ef_search", ef_search, 1, MAX_EF_SEARCH)
    if min_score is not None:
        if isinstance(min_score, bool) or not isinstance(min_score, int | float):
            raise TypeError(f"min_score must be a number or None, got {type(min_score).__name__}")
        if not math.isfinite(min_score):
            raise InvalidInputError(f"min_score must be finite, got {min_score!r}")
    names = collection_names(collections)
    predicate = compile_predicate(scope, filters)
    query_text, query_warnings = preprocess_query(query)
    return SearchPlan(
        query=query_text,
        names=names,
        mode=mode,
        top_k=top_k,
        leg_depth=max(depth, top_k),
        fusion=fusion,
        rrf_k=k,
        vector_weight=weight,
        ef_search=ef_search,
        min_score=min_score,
        scope=scope,
        predicate=predicate,
        warnings=query_warnings,
    )
