"""Fusion of the legs (relative scores or RRF) and score merges across collections. Pure functions.

Reciprocal Rank Fusion (Cormack, Clarke and Büttcher, SIGIR 2009), ``fusion="rrf"``::

    rrf(d) = sum over rankings r containing d of  1 / (k + rank_r(d))      (rank 1-based)

``k`` (default 60, the paper's value) damps the weight of the top ranks: a small ``k`` lets a
first place dominate, a large one makes fusion closer to counting in how many rankings a
document appears. Only ranks matter, never the legs' raw scores, so a cosine similarity and a
BM25 score fuse without calibration.

Relative score fusion (``fusion="relative_score"``, the default; Weaviate's ``relativeScoreFusion``,
the normalised convex combination of Bruch, Gai and Ingber, ACM TOIS 2023)::

    rsf(d) = w * norm_vector(d) + (1 - w) * norm_lexical(d)

where each leg's scores are min-max normalised over that leg's own candidates (best 1, worst 0;
a leg whose candidates all score the same gives them 1) and a document missing from a leg
gets 0 there. ``w`` is ``vector_weight`` (default 0.5: no preference). That fused value ranks.

The score a hit shows is the same value rescaled so that it reads "how strong relative to the
best" instead of "where in this pool": min-max puts the pool's weakest candidate at exactly 0,
shown as ``0.0000`` on the last hit whenever a search returned every candidate (a small
collection, a tight filter; issue #30). Against each leg's natural floor, 0 (BM25 and
``ts_rank`` are never negative and 0 means no query term; a cosine or inner-product similarity
at or below 0 means nothing in common; the L2 similarity ``1 / (1 + d)`` is always positive),
the weakest candidate of a leg is worth ``f = max(worst, 0) / best`` of the best, so the shown
score maps the fused range ``[0, W]`` (``W``: the weights of the legs that found anything, 1
when both did) affinely onto ``[c, W]``::

    shown(d) = c + (W - c) * rsf(d) / W

``c`` is what the hits at fused 0 are worth: such a hit is at the bottom of each leg that found
it, worth ``weight * f`` there, and absent from the other leg, worth 0 there (min-max gives an
absent hit the same 0 as the leg's weakest candidate, but it is not that candidate: a leg that
found one chunk makes it its weakest, worth all of its best, and that must not lift the chunks
it did not find). ``c`` is the least of those worths; when no hit sits at 0 (each leg's weakest
is found by the other), the sum of ``weight * f`` over the legs that found every candidate.

An affine map with a positive slope: the order within one fusion is unchanged. The best of both
legs shows 1, the weakest candidates show what they are worth against the best (e.g. 0.45 when
both legs found every candidate and their weakest score about half their best), and a hit shows
0 only when it matched nothing (no query term, and a similarity at or below 0) or min-max ties
it at 0 with one that did. A fusion normalising each leg
by ``max(score, 0) / best`` directly would rank differently (it shrinks the leg whose scores
are closer together, in effect a different ``vector_weight``), so it was not made the ranking.

It uses how far apart the scores are, which ranks throw away, and measured better than RRF on
BEIR SciFact (see benchmarks/RESULTS.md), so it is the default. RRF needs no assumption about
score distributions: one argument away.

Determinism: ties (equal fused scores, e.g. first in one leg and first in the other for two
different chunks) are broken by id ascending, so the same inputs always give the same order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from agentrag.errors import InvalidInputError

__all__ = [
    "DEFAULT_FUSION",
    "DEFAULT_RRF_K",
    "DEFAULT_VECTOR_WEIGHT",
    "FUSIONS",
    "check_fusion",
    "check_rrf_k",
    "check_vector_weight",
    "merge_by_score",
    "relative_score",
    "rrf",
]

DEFAULT_RRF_K = 60
DEFAULT_VECTOR_WEIGHT = 0.5
DEFAULT_FUSION = "relative_score"
FUSIONS: tuple[str, ...] = ("relative_score", "rrf")


def check_fusion(fusion: str) -> str:
    """``fusion`` if it names one of :data:`FUSIONS`, else InvalidInputError."""
    if fusion not in FUSIONS:
        raise InvalidInputError(f"unknown fusion {fusion!r}; valid fusions are {', '.join(FUSIONS)}")
    return fusion


def check_rrf_k(k: float) -> float:
    if isinstance(k, bool) or not isinstance(k, int | float):
        raise TypeError(f"rrf_k must be a number, got {type(k).__name__}")
    if not math.isfinite(k) or k < 0:
        raise InvalidInputError(f"rrf_k must be a finite number >= 0, got {k!r}")
    return float(k)


def check_vector_weight(weight: float) -> float:
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise TypeError(f"vector_weight must be a number, got {type(weight).__name__}")
    if not math.isfinite(weight) or not 0 <= weight <= 1:
        raise InvalidInputError(f"vector_weight must be between 0 and 1, got {weight!r}")
    return float(weight)


def relative_score(
    vector: Sequence[tuple[str, float]],
    lexical: Sequence[tuple[str, float]],
    *,
    vector_weight: float = DEFAULT_VECTOR_WEIGHT,
) -> list[tuple[str, float]]:
    """Fuse two ``(id, score)`` legs by min-max normalised scores; ``[(id, score), ...]`` best first.

    The order is min-max fusion's; the scores are its values rescaled against the legs' natural
    floor (see the module docstring): in [0, 1], 1 for the best of both legs, and the hits at the
    bottom show what they are worth against the best of the legs that found them (0 when they
    matched nothing). An id repeated within a leg counts its best score; ties are broken by id
    ascending. Empty legs contribute nothing.
    """
    w = check_vector_weight(vector_weight)
    fused: dict[str, float] = {}
    worth: dict[str, float] = {}  # what a hit is worth at the bottom of the legs that found it
    total = 0.0  # W of the module docstring
    legs: list[tuple[float, int]] = []  # each leg's weight * f and how many candidates it found
    for leg, weight in ((vector, w), (lexical, 1.0 - w)):
        best: dict[str, float] = {}
        for item, score in leg:
            if item not in best or score > best[item]:
                best[item] = float(score)
        if not best:
            continue
        low, high = min(best.values()), max(best.values())
        span = high - low
        total += weight
        weakest = weight * (max(low, 0.0) / high if high > 0 else 0.0)
        legs.append((weakest, len(best)))
        for item, score in best.items():
            norm = (score - low) / span if span > 0 else 1.0
            fused[item] = fused.get(item, 0.0) + weight * norm
            worth[item] = worth.get(item, 0.0) + weakest
    ranked = sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))
    if total <= 0:  # every leg that found anything weighs 0: the min-max values (all 0) as they are
        return ranked
    # c: what the hits at fused 0 are worth, each at the bottom of the legs that found it and
    # absent (worth 0, not that leg's weakest) from the others; with none there, the legs that
    # found every candidate (a hit at 0 would be at their bottom, and absent from the others)
    bottom = [worth[item] for item, value in ranked if value <= 0]
    floor = min(bottom) if bottom else sum(f for f, found in legs if found == len(fused))
    slope = (total - floor) / total
    return [(item, floor + slope * value) for item, value in ranked]


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
