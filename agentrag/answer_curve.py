"""Where the evidence's similarity to the question moves the abstention threshold of an answer in
another language than English (issue #40): the logistic curves of :func:`semantic_threshold`, by the
model of the embedder that weighs the evidence. Read by :mod:`agentrag.answer_languages` (which
re-exports them), the answer step and the chat path."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrag.abstain import Calibration

__all__ = ["SEMANTIC_CURVE_BY_MODEL", "VECTOR_CURVE_BY_MODEL", "semantic_threshold", "threshold_shift"]

#: The evidence's semantic similarity (``Signals.semantic``: the question's cosine with its best unit)
#: moves the threshold of an answer in another language, by the evidence embedder's model: a logistic
#: curve over the confidence's margin above the table's threshold and that similarity, fitted on
#: XQuAD-dev articles 0-11 (all 11 languages pooled, answerable against unanswerable questions, each
#: class weighing the same), cut where it minimises answerable refused + unanswerable answered summed
#: over the languages (``benchmarks/multilingual_signals.py``). An answer is refused when
#: ``margin * (confidence - table) + semantic * similarity + bias < logit(cut)``, i.e. below the
#: table's threshold shifted by ``(logit(cut) - bias - semantic * similarity) / margin``: a question
#: as close to its unit as the fit's typical answerable one keeps the table's threshold, a closer
#: one gets a lower threshold, a more distant one a higher. Chosen on the fit half, among four sets of
#: signals, by leave-one-language-out inside it (cuts 0.05 apart; 0.01 apart, the candidates tie
#: within a question a language); reported on articles 12-23 (benchmarks/HISTORY.md, "Every
#: language", session 15).
#: ``lower``: how far the similarity may *lower* the table's threshold (session 16: 0, it only raised
#: it; session 18: 0.02, chosen by the same leave-one-corpus-out rule over a finer grid, 0.01-0.03
#: added: it answers a question a hair under the table's threshold that is closer to its unit than
#: the fit's typical answerable one, and no near-miss more). Short documents that all resemble a
#: question (a handbook of one-paragraph policies) give every question a similarity above XQuAD's
#: typical answerable one, near-misses included, and the full
#: curve answered them at any confidence; chosen leave-one-corpus-out over XQuAD-dev's fit half and
#: the handbook in German, Chinese and Japanese (``benchmarks/multilingual_loco.py``).
SEMANTIC_CURVE_BY_MODEL: dict[str, dict[str, float]] = {
    "intfloat/multilingual-e5-small": {
        "margin": 7.3225,
        "semantic": 45.0294,
        "bias": -37.5368,
        "cut": 0.59,
        "lower": 0.02,
    },
}

#: The curve used when the search's vector leg scored the hits (``Signals.vector``: the question's
#: best raw cosine with a retrieved chunk, a whole passage where ``semantic`` is a sentence): the
#: same fit with that similarity beside the unit's (session 22, benchmarks/RESULTS.md). An
#: unanswerable question asks about a text the collection lacks; its best passage is farther from it
#: than an answerable question's is from its own, even where a sentence of another text shares its
#: words (XQuAD-dev's fit half, pooled over 11 languages: the passage's similarity ranks answerable
#: above unanswerable for 0.89 of the pairs the table's threshold leaves within 0.2 of each other,
#: the sentence's for 0.71). Fitted on the six folds of articles 0-11
#: (``benchmarks.multilingual_folds``: answerable against unanswerable, each class weighing the same;
#: the cut where refused + unanswerable answered summed over the languages is least), ``lower`` as
#: :data:`SEMANTIC_CURVE_BY_MODEL`'s. Without a vector leg (a lexical search) the curve above moves
#: the threshold, and the answer step records which one did (``answer_threshold_source``).
VECTOR_CURVE_BY_MODEL: dict[str, dict[str, float]] = {
    "intfloat/multilingual-e5-small": {
        "margin": 8.2981,
        "semantic": 30.3913,
        "vector": 59.962,
        "bias": -75.8533,
        "cut": 0.37,
        "lower": 0.02,
    },
}


def threshold_shift(
    model_id: str | None, similarity: float | None, vector: float | None = None, *, lower: float | None = None
) -> float | None:
    """How far the evidence moves the table's threshold for ``model_id``: by the unit's
    ``similarity`` and, when the vector leg scored the hits, the passage's ``vector`` similarity
    (:data:`VECTOR_CURVE_BY_MODEL`; :data:`SEMANTIC_CURVE_BY_MODEL` without it); never lower than the
    curve's ``lower`` (``lower``: another bound, for the benchmarks that choose it). None for another
    model or without a similarity."""
    with_vector = VECTOR_CURVE_BY_MODEL.get(model_id or "") if vector is not None else None
    curve = with_vector or SEMANTIC_CURVE_BY_MODEL.get(model_id or "")
    if curve is None or similarity is None:
        return None
    logit = math.log(curve["cut"] / (1.0 - curve["cut"]))
    said = curve["semantic"] * similarity + (
        curve["vector"] * vector if with_vector and vector is not None else 0.0
    )
    shift = (logit - curve["bias"] - said) / curve["margin"]
    return max(-(curve.get("lower", 1.0) if lower is None else lower), shift)


def semantic_threshold(
    calibration: Calibration, model_id: str | None, similarity: float | None, vector: float | None = None
) -> Calibration:
    """``calibration`` with its threshold shifted by the evidence's ``similarity`` (and the vector
    leg's, ``vector``) for ``model_id`` (:func:`threshold_shift`); unchanged for another model or
    without a similarity."""
    shift = threshold_shift(model_id, similarity, vector)
    if shift is None:
        return calibration
    threshold = round(min(1.0, max(0.0, calibration.abstain_below + shift)), 4)
    return replace(calibration, abstain_below=threshold, low_below=max(threshold, calibration.low_below))
