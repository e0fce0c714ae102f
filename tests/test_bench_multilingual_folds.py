"""benchmarks/multilingual_folds.py: the thresholds fitted with every fit-half article left out in turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.multilingual_folds import MODEL, census, cost, decide, decided, fit_curve, report
from tests.xquad_support import DATA, run_benchmark


def row(confidence: float, answerable: bool, fold: int = 0, semantic: float = 0.842) -> dict:
    return {
        "confidence": confidence,
        "answerable": answerable,
        "abstained": False,
        "threshold_applies": True,
        "signals": {"semantic": semantic},
        "fold": fold,
        "fact_hit": answerable,
    }


def test_a_row_is_decided_as_the_answer_step_decides() -> None:
    # at the fit's typical similarity the curve keeps the table's threshold (within its rounding)
    assert decide(row(0.50, True), 0.45) and not decide(row(0.40, True), 0.45)
    # a question far from its unit gets a higher threshold; a close one at most 0.02 lower
    assert not decide(row(0.50, True, semantic=0.80), 0.45)
    assert decide(row(0.44, True, semantic=0.95), 0.45) and not decide(row(0.42, True, semantic=0.95), 0.45)
    # an excerpt (no quotable sentence) is never refused by a threshold; an abstention always is
    assert decide({**row(0.0, True), "threshold_applies": False}, 0.9)
    assert not decide({**row(0.99, True), "abstained": True}, 0.1)


def test_the_threshold_separates_answerable_from_unanswerable() -> None:
    rows = [row(c, True) for c in (0.6, 0.7, 0.8, 0.9)] + [row(c, False) for c in (0.1, 0.2, 0.3)]
    threshold = fit_curve(rows)
    assert 0.3 < threshold <= 0.6
    assert cost(rows, threshold) == 0.0
    assert cost(rows, 0.0) == 1.0  # every unanswerable question answered
    assert cost(rows, 0.95) == 1.0  # every answerable question refused


def test_pooled_folds_fit_one_threshold_and_are_scored_on_the_fold_left_out(capsys) -> None:
    rows = [row(c, True, f) for f in range(6) for c in (0.55, 0.7, 0.9)]
    rows += [row(c, False, f) for f in range(6) for c in (0.05, 0.2 + 0.04 * f)]
    fitted = report({"de": rows, "th": rows})
    out = capsys.readouterr().out
    table = fitted["thresholds"]
    assert 0.4 <= table["de"] <= 0.55
    assert table["*"] == round(table["de"], 2)  # the median of the languages but Thai
    assert 0.80 <= fitted["neutral"]["de"] <= 0.90
    assert "| de |" in out and "| summed |" in out and "neutral point per language" in out


def test_the_benchmark_decides_as_the_library_does() -> None:
    """decide() reads the shipped curve as semantic_threshold does, in every language."""
    from agentrag.abstain import Calibration
    from agentrag.answer_languages import semantic_threshold

    for semantic in (0.78, 0.84, 0.87, 0.93):
        moved = semantic_threshold(Calibration(abstain_below=0.4, low_below=0.64), MODEL, semantic)
        for confidence in (moved.abstain_below - 0.002, moved.abstain_below + 0.002):
            expected = confidence >= moved.abstain_below
            assert decide(row(confidence, True, semantic=semantic), 0.4) == expected


def test_the_census_names_what_was_refused_and_what_was_answered(capsys) -> None:
    rows = [row(0.9, True), {**row(0.1, True), "question": "refused?"}]
    rows += [row(0.1, False), {**row(0.8, False), "question": "answered?"}]
    assert decided(rows, 0.45) == {"fact_hit": 0.5, "refused": 0.5, "unanswerable_answered": 0.5}
    census(rows, 0.45)
    out = capsys.readouterr().out
    assert "REFUSED" in out and "refused?" in out and "ANSWERED" in out and "answered?" in out
    assert out.count("Q:") == 2  # the two decided as they should be are not printed


@pytest.mark.skipif(not DATA.is_dir(), reason="XQuAD-dev is not beside the checkout (../shared/data)")
def test_the_folds_run_on_a_slice(tmp_path: Path) -> None:
    out = tmp_path / "folds.json"
    argv = ["--languages", "de", "--articles", "4", "--questions", "3", "--json", str(out)]
    run = run_benchmark("multilingual_folds", argv)
    rows = json.loads(out.read_text(encoding="utf-8"))["languages"]["de"]
    assert {r["fold"] for r in rows} == {0, 1}
    # every question of the two articles a fold leaves out is asked, as unanswerable
    assert all(sum(1 for r in rows if r["fold"] == f and not r["answerable"]) > 3 for f in (0, 1))
    assert sum(1 for r in rows if r["answerable"]) == 6
    assert all(r["gold"].startswith("a0") and r["answers"] for r in rows)
    assert "| de |" in run.stdout and "ABSTAIN_BELOW_BY_MODEL entry" in run.stdout


def test_the_weighted_cost_counts_an_unanswerable_answered_as_the_targets_do() -> None:
    from benchmarks.multilingual_folds import UNANSWERED_WEIGHT

    rows = [row(0.6, True), row(0.2, True), row(0.5, False), row(0.1, False)]
    # at 0.3: one answerable of two refused, one unanswerable of two answered
    assert cost(rows, 0.3) == 1.0 and cost(rows, 0.3, weight=UNANSWERED_WEIGHT) == 0.5 + 0.75
    # weighing the answered more moves the fitted threshold up, never down
    many = [row(c / 20, True) for c in range(4, 20)] + [row(c / 20, False) for c in range(0, 12)]
    assert fit_curve(many, weight=UNANSWERED_WEIGHT) >= fit_curve(many)


def test_other_languages_get_the_median_of_the_fitted_but_thai() -> None:
    from benchmarks.multilingual_folds import with_other_languages

    assert with_other_languages({"de": 0.3, "tr": 0.5, "vi": 0.9, "th": 0.95})["*"] == 0.5
    assert with_other_languages({}) == {}


def test_the_folds_span_the_fit_half_by_default_and_every_dev_article_when_asked() -> None:
    from argparse import Namespace

    from benchmarks.multilingual_folds import span

    assert span(Namespace(first_article=None, articles=12)) == (0, 12)
    # the default never leaves the fit half
    assert span(Namespace(first_article=None, articles=24)) == (0, 12)
    assert span(Namespace(first_article=None, articles=4)) == (0, 4)
    assert span(Namespace(first_article=0, articles=24)) == (0, 24)


def test_the_refit_is_judged_on_the_fold_it_did_not_see(capsys) -> None:
    import numpy as np

    from benchmarks.multilingual_refit import Rows, fitted, out_of_fold, report

    rows = [row(c, True, f) for f in range(12) for c in (0.55, 0.7, 0.9)]
    rows += [row(c, False, f) for f in range(12) for c in (0.05, 0.2 + 0.02 * f)]
    rows += [{**row(0.0, True, 3), "threshold_applies": False}, {**row(0.99, False, 4), "abstained": True}]
    arrays = Rows(rows)
    for threshold in (0.1, 0.3, 0.5, 0.8):  # decided as the answer step decides
        said = arrays.answered(np.array([threshold]), np.ones(len(rows), bool))[0]
        assert list(said) == [decide(r, threshold) for r in rows]
    assert 0.4 <= fitted(arrays, np.ones(len(rows), bool), "refit") <= 0.55
    # a fixed threshold, each fold held out in turn: the held-out rows' counts, pooled
    result = out_of_fold(arrays, 0.6, "table", list(range(12)))
    assert result["refused"] == 12 / 37 and result["answered"] == 0.0
    assert result["answerable"] == 37 and result["unanswerable"] == 25
    fitted_tables = report({"de": rows, "th": rows})
    out = capsys.readouterr().out
    assert "| de |" in out and "languages over a target" in out and "table, folds past 0-11" in out
    assert set(fitted_tables) == {"table", "refit", "weighted", "targets"}
    assert fitted_tables["refit"]["*"] == round(fitted_tables["refit"]["de"], 2)
