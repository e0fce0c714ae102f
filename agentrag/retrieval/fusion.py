"""Rank fusion: Reciprocal Rank Fusion across legs, score merges across collections. Pure functions.

Reciprocal Rank Fusion (Cormack, Clarke and Büttcher, SIGIR 2009)::

    rrf(d) = sum over rankings r containing d of  1 / (k + rank_r(d))      (rank 1-based)

``k`` (default 60, the paper's value) damps the weight of the top ranks: a small ``k`` lets a
first place dominate, a large one makes fusion closer to counting in how many rankings a
document appears. Only ranks matter, never the legs' raw scores, so a cosine similarity and a
BM25 score fuse without calibration.

Determinism: ties (equal fused scores, e.g. first in one leg and first in the other for two
different chunks) are broken by id ascending, so the same inputs always give the same order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from agentrag.errors import InvalidInputError

__all__ = ["DEFAULT_RRF_K", "check_rrf_k", "merge_by_score", "rrf"]

DEFAULT_RRF_K = 60


def check_rrf_k(k: float) -> float:
    if isinstance(k, bool) or not isinstance(k, int | float):
        raise TypeError(f"rrf_k must be a number, got {type(k).__name__}")
    if not math.isfinite(k) or k < 0:
        raise InvalidInputError(f"rrf_k must be a finite number >= 0, got {k!r}")
    return float(k)


def rrf(rankings: Iterable[Sequence[str]], *, k: float = DEFAULT_RRF_K) -> list[tuple[str, float]]:
    """Fuse ``rankings`` (ids, best first) into ``[(id, score), ...]``, best first.

    A ranking that repeats an id counts its first (best) position only. Scores are summed over
    the rankings in the order given (so the float result is reproducible); ties are broken by id
    ascending. Empty rankings contribute nothing.
    """
    kf = check_rrf_k(k)
    scores: dict[str, float] = {}
    for ranking in rankings:
        seen: set[str] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + 1.0 / (kf + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def merge_by_score(
    lists: Iterable[Sequence[tuple[str, float]]], limit: int | None = None
) -> list[tuple[str, float]]:
    """Merge ``(id, score)`` lists into one, score descending then id ascending, cut at ``limit``.

    Used across collections within one leg: vector similarities from the same model are
    comparable, and so (approximately, as in any multi-index BM25 engine) are BM25 scores.
    An id present in several lists keeps its best score.
    """
    best: dict[str, float] = {}
    for pairs in lists:
        for item, score in pairs:
            old = best.get(item)
            if old is None or score > old:
                best[item] = score
    merged = sorted(best.items(), key=lambda pair: (-pair[1], pair[0]))
    return merged if limit is None else merged[:limit]
