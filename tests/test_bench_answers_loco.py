"""benchmarks/answers_loco.py's held-out calibration map: the isotonic fit and its report from saved rows
(``--rows``), so the leave-one-corpus-out figures of RESULTS.md cannot rot."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.answers_loco import Row, held_out_map, isotonic, main, step_value

points = st.lists(
    st.tuples(
        st.floats(-1, 2, allow_nan=False), st.sampled_from([0.0, 1.0]), st.floats(0.01, 1, allow_nan=False)
    ),
    min_size=1,
    max_size=60,
)


@given(points)
def test_the_isotonic_map_rises_and_keeps_the_weighted_mean(data: list[tuple[float, float, float]]) -> None:
    knots = isotonic(data)
    values = [v for _, v in knots]
    assert values == sorted(values)  # never falls as the score rises
    assert [x for x, _ in knots] == sorted(x for x, _ in knots)
    weight = sum(w for _, _, w in data)
    mapped = sum(step_value(knots, x) * w for x, _, w in data) / weight
    assert mapped == pytest.approx(sum(y * w for _, y, w in data) / weight, abs=1e-9)


def test_the_map_fits_a_rising_step() -> None:
    knots = isotonic([(0.1, 0.0, 1.0), (0.2, 1.0, 1.0), (0.3, 0.0, 1.0), (0.9, 1.0, 1.0)])
    assert [step_value(knots, x) for x in (0.1, 0.25, 0.3, 0.9, 5.0)] == [0.0, 0.5, 0.5, 1.0, 1.0]


def _rows() -> list[Row]:
    rows = []
    for corpus, shift in (("a", 0.0), ("b", 0.1), ("c", -0.1)):
        for i in range(20):
            good = i % 2 == 0
            conf = min(0.99, max(0.01, (0.8 if good else 0.2) + shift))
            category = "answerable" if good or i % 4 == 1 else "near_miss"
            rows.append(Row(corpus, f"{corpus}{i}", category, "q", conf, conf < 0.5, good, good, False))
    return rows


def test_the_held_out_map_changes_no_answer() -> None:
    rows = _rows()
    out = held_out_map(rows, "a")
    mine = [r for r in rows if r.corpus == "a"]
    answered = [r for r in mine if not r.abstained]
    assert out["fact_hit"] == round(sum(r.hit for r in mine if r.category == "answerable") / 15, 3)
    assert out["near_miss_answered"] == round(
        sum(not r.abstained for r in mine if r.category == "near_miss") / 5, 3
    )
    assert answered and out["ece"] <= 0.2


def test_a_saved_run_is_reported_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "rows.json"
    saved.write_text(json.dumps({"rows": [asdict(r) for r in _rows()]}))
    assert main(["--rows", str(saved)]) == 0
    said = capsys.readouterr().out
    assert "| a | 15 / 5 / 0 | defaults' answers, confidence mapped from the others |" in said
