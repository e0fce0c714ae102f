"""benchmarks.multilingual_signals on rows of its own making: the logistic fit separates what it is given,
and the report reads the held-out half with the chosen curve (no database, no model)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from benchmarks import multilingual_signals


def _rows(seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out = []
    for answerable in [True] * 30 + [False] * 20:
        semantic = rng.gauss(0.88 if answerable else 0.80, 0.02)
        out.append(
            {
                "answerable": answerable,
                "confidence": rng.uniform(0.2, 0.9),
                "abstained": False,
                "threshold_applies": True,
                "fact_hit": answerable,
                "signals": {"semantic": semantic, "lead": 0.1, "found": 1.0, "covered": 0.5, "unknown": 0.0},
            }
        )
    return out


def test_the_newton_fit_separates_what_separates() -> None:
    x = np.array([[v] for v in [0.1, 0.2, 0.3, 0.7, 0.8, 0.9]])
    coef, intercept = multilingual_signals.logistic(x, np.array([0, 0, 0, 1, 1, 1]))
    assert coef[0] > 0 and -coef[0] * 0.6 < intercept < -coef[0] * 0.4  # the boundary near 0.5


def test_the_report_chooses_a_curve_and_beats_the_table_on_what_it_was_made_for(
    tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    rows = {
        lang: {"confidences": {"fit": _rows(i), "report": _rows(100 + i)}}
        for i, lang in enumerate(("de", "zh", "tr"))
    }
    path = tmp_path / "rows.json"
    path.write_text(json.dumps({"languages": rows}))
    out = tmp_path / "out.json"
    assert multilingual_signals.main(["--rows", str(path), "--cut-step", "0.1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    curve = sum(
        r["curve"]["refused"] + r["curve"]["unanswerable_answered"] for r in result["report"].values()
    )
    table = sum(
        r["table"]["refused"] + r["table"]["unanswerable_answered"] for r in result["report"].values()
    )
    assert curve < table  # the similarity separates these rows; the confidence does not
    assert "chosen:" in capsys.readouterr().out
