"""Standard IR metrics, defined as trec_eval / pytrec_eval (and so BEIR) define them.

Every function is pure and takes a ranking (document ids, best first) and the qrels of one
query (document id -> relevance grade). Conventions shared by all ranking metrics:

* **Relevance.** A document is relevant when its grade is ``> 0``. Grades ``<= 0`` and documents
  absent from the qrels are non-relevant (gain 0), as in trec_eval.
* **No relevant documents.** When the qrels hold no relevant document the metric is undefined and
  the function returns ``None``. trec_eval / BEIR leave such queries out of their averages;
  :class:`agentrag.eval.EvalReport` does the same by skipping ``None`` when it takes means.
* **Order.** The ranking is taken in the order given; nothing is re-sorted. To turn scores into a
  ranking the way trec_eval does (ties broken by document id), use :func:`rank_by_score`.
* **Duplicates.** A document id repeated in a ranking counts once, at its first position; later
  copies are dropped before the cut at ``k`` (so they do not push other documents out).
* **Cut-off.** ``k`` must be a positive int. A ranking shorter than ``k`` is fine; precision still
  divides by ``k`` (trec_eval's ``P_k``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from agentrag.errors import InvalidInputError

__all__ = [
    "citation_precision",
    "dcg",
    "grounded_rate",
    "hit_at_k",
    "mrr",
    "ndcg_at_k",
    "precision_at_k",
    "rank_by_score",
    "recall_at_k",
]


def _check_k(k: int | None, *, allow_none: bool = False) -> None:
    if k is None and allow_none:
        return
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if k < 1:
        raise InvalidInputError(f"k must be >= 1, got {k}")


def unique_ids(ranked: Iterable[str], k: int | None = None) -> list[str]:
    """The ranking with repeated ids dropped (first occurrence kept), cut at ``k``."""
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in ranked:
        if doc_id in seen:
            continue
        seen.add(doc_id)
        out.append(doc_id)
        if k is not None and len(out) >= k:
            break
    return out


def _relevant(qrels: Mapping[str, float]) -> dict[str, float]:
    return {doc_id: grade for doc_id, grade in qrels.items() if grade > 0}


def _found(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> tuple[int, dict[str, float]]:
    """How many of the top ``k`` (``k`` checked) are relevant, and the relevant documents."""
    _check_k(k)
    relevant = _relevant(qrels)
    return sum(1 for doc_id in unique_ids(ranked, k) if doc_id in relevant), relevant


def dcg(gains: Iterable[float]) -> float:
    """Discounted cumulative gain of gains listed best rank first: ``sum(g_i / log2(i + 1))``, i from 1."""
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float | None:
    """Normalised DCG at ``k`` (trec_eval ``ndcg_cut.k``, the nDCG@k BEIR reports).

    The gain of a document is its grade (linear gain, not ``2**grade - 1``); the discount at rank
    ``r`` (1-based) is ``log2(r + 1)``. The ideal DCG is the DCG of the relevant grades sorted
    best first and cut at ``k``. Returns ``None`` when the qrels hold no relevant document.
    """
    _check_k(k)
    relevant = _relevant(qrels)
    if not relevant:
        return None
    actual = dcg(relevant.get(doc_id, 0.0) for doc_id in unique_ids(ranked, k))
    ideal = dcg(sorted(relevant.values(), reverse=True)[:k])
    return actual / ideal


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float | None:
    """Relevant documents in the top ``k`` divided by all relevant documents (trec_eval ``recall_k``).

    Returns ``None`` when the qrels hold no relevant document.
    """
    found, relevant = _found(ranked, qrels, k)
    return found / len(relevant) if relevant else None


def precision_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float | None:
    """Relevant documents in the top ``k`` divided by ``k`` (trec_eval ``P_k``).

    The denominator is ``k`` even when fewer than ``k`` documents were retrieved. Returns ``None``
    when the qrels hold no relevant document.
    """
    found, relevant = _found(ranked, qrels, k)
    return found / k if relevant else None


def mrr(ranked: Sequence[str], qrels: Mapping[str, float], k: int | None = None) -> float | None:
    """Reciprocal rank of the first relevant document (``1 / rank``), 0.0 if none is found.

    With ``k``, only the top ``k`` are looked at (MRR@k). Averaged over queries this is the mean
    reciprocal rank. Returns ``None`` when the qrels hold no relevant document.
    """
    _check_k(k, allow_none=True)
    relevant = _relevant(qrels)
    if not relevant:
        return None
    for rank, doc_id in enumerate(unique_ids(ranked, k), start=1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


def hit_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float | None:
    """1.0 when at least one relevant document is in the top ``k``, else 0.0 (success@k).

    Returns ``None`` when the qrels hold no relevant document.
    """
    found, relevant = _found(ranked, qrels, k)
    return (1.0 if found else 0.0) if relevant else None


def rank_by_score(scores: Mapping[str, float], k: int | None = None) -> list[str]:
    """Document ids sorted the way trec_eval sorts a run: score descending, ties by id descending.

    trec_eval ignores the rank column of a run and orders documents by score, breaking ties by
    comparing document ids with ``strcmp`` in *descending* order (``comp_sim_docno`` in
    ``form_res_rels.c``); pytrec_eval and hence BEIR inherit this. Python compares ``str`` by code
    point, which gives the same order as ``strcmp`` on UTF-8 bytes. With ``k``, the best ``k`` only.
    NaN scores are rejected.
    """
    _check_k(k, allow_none=True)
    for doc_id, score in scores.items():
        if math.isnan(score):
            raise InvalidInputError(f"score of document {doc_id!r} is NaN")
    ranked = sorted(scores, key=lambda doc_id: (scores[doc_id], doc_id), reverse=True)
    return ranked if k is None else ranked[:k]


def citation_precision(valid: int, total: int) -> float | None:
    """Share of an answer's citations that point at a retrieved, supporting passage.

    ``valid / total``; ``None`` when the answer has no citation (undefined, skipped in means).
    """
    if valid < 0 or total < 0:
        raise InvalidInputError(f"citation counts must be >= 0, got valid={valid}, total={total}")
    if valid > total:
        raise InvalidInputError(f"valid citations ({valid}) exceed total citations ({total})")
    if total == 0:
        return None
    return valid / total


def grounded_rate(flags: Sequence[bool]) -> float | None:
    """Share of ``True`` flags (e.g. answers or claims judged grounded); ``None`` when empty."""
    if len(flags) == 0:
        return None
    return sum(1 for flag in flags if flag) / len(flags)
