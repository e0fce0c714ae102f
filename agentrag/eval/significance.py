"""Paired significance tests over per-query scores (two systems, the same queries).

Is system B's mean nDCG@10 above system A's by more than the luck of the query sample? Both tests
look at the per-query differences ``d_i = b_i - a_i`` and are two-sided, as in ranx and trec_eval
practice (Smucker, Allan and Carterette, CIKM 2007):

* :func:`paired_randomization_test` (Fisher's randomisation / permutation test): under the null
  hypothesis each difference is as likely to have either sign, so the signs are flipped at random
  ``n_permutations`` times (seeded: the same inputs give the same p-value) and the p-value is the
  share of flips whose mean difference is at least as far from 0 as the observed one,
  ``(count + 1) / (n_permutations + 1)`` (the observed assignment counts as one).
* :func:`paired_t_test`: Student's t on the differences, ``t = mean(d) / (sd(d) / sqrt(n))`` with
  ``n - 1`` degrees of freedom; the p-value from the t distribution (regularised incomplete beta,
  no scipy needed).

Neither corrects for multiple comparisons: with many systems against one baseline, read small
p-values with that in mind (or divide the threshold by the number of comparisons, Bonferroni).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from agentrag.errors import InvalidInputError

__all__ = ["paired_randomization_test", "paired_t_test", "student_t_sf"]


def _differences(a: Sequence[float], b: Sequence[float]) -> list[float]:
    if len(a) != len(b):
        raise InvalidInputError(f"paired scores need the same number of queries, got {len(a)} and {len(b)}")
    if not a:
        raise InvalidInputError("paired scores need at least one query")
    return [float(y) - float(x) for x, y in zip(a, b, strict=True)]


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def student_t_sf(t: float, df: float) -> float:
    """Two-sided tail probability P(|T| >= |t|) of Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise InvalidInputError(f"degrees of freedom must be > 0, got {df}")
    if math.isinf(t):
        return 0.0
    return min(1.0, max(0.0, _betainc(df / 2.0, 0.5, df / (df + t * t))))


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test of ``b`` against ``a`` (same queries, same order).

    1.0 when every difference is 0; 0.0 when every difference is the same non-zero number.
    """
    d = _differences(a, b)
    n = len(d)
    mean = sum(d) / n
    if n < 2:
        return 1.0 if mean == 0 else 0.0
    var = sum((x - mean) ** 2 for x in d) / (n - 1)
    if var == 0:
        return 1.0 if mean == 0 else 0.0
    return student_t_sf(mean / math.sqrt(var / n), n - 1)


def paired_randomization_test(
    a: Sequence[float], b: Sequence[float], *, n_permutations: int = 10_000, seed: int = 0
) -> float:
    """Two-sided p-value of Fisher's paired randomisation test of ``b`` against ``a`` (see module doc)."""
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int) or n_permutations < 1:
        raise InvalidInputError(f"n_permutations must be an integer >= 1, got {n_permutations!r}")
    import numpy as np

    d = np.asarray(_differences(a, b), dtype=np.float64)
    observed = abs(float(d.mean()))
    if observed == 0.0:
        return 1.0
    rng = np.random.default_rng(seed)
    count = 0
    for start in range(0, n_permutations, 1000):  # in blocks: memory stays small for large query sets
        rows = min(1000, n_permutations - start)
        signs = rng.integers(0, 2, size=(rows, d.size), dtype=np.int8) * 2 - 1
        means = np.abs((signs * d).mean(axis=1))
        count += int((means >= observed - 1e-12).sum())
    return (count + 1) / (n_permutations + 1)
