"""The answer step's signals beside the per-language threshold (issue #40): fit a logistic curve on half of
XQuAD-dev, choose its signals inside that half, report it on the other half.

    .venv/bin/python -m benchmarks.multilingual_signals --rows ROWS.json

``ROWS.json`` is ``benchmarks.multilingual_abstention --json``'s output, whose rows record each question's
confidence and the answer step's signals (``Signals`` and the best unit's lead over the next). The features
are the confidence's margin above the language's table threshold (``ABSTAIN_BELOW_BY_MODEL``) and some
of the signals. For each candidate set of signals (:data:`CANDIDATES`):

* **leave-one-language-out inside the fit half** (articles 0-11): the curve fitted on ten languages' fit
  rows (logistic regression, answerable against unanswerable, each class weighing the same), its cut
  chosen there (least refused + unanswerable answered summed over the ten), the cost on the eleventh;
  summed over the eleven. The candidate of least summed cost is chosen: the fit half alone decides;
* the chosen candidate refitted on the whole fit half and its cut chosen there; reported on the report
  half (articles 12-23), beside the table's thresholds.

Only questions a threshold can refuse are fitted (an answer with no quotable sentence is an excerpt;
one refused for nothing selected stays refused). Prints the constants to paste into
``agentrag.answer_curve.SEMANTIC_CURVE_BY_MODEL`` (the curve of a search without a vector leg; the one with
the passage's similarity, ``VECTOR_CURVE_BY_MODEL``, was fitted on the six folds of
``benchmarks.multilingual_folds``: session 22). Needs numpy only.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.multilingual_abstention import at

MODEL = "intfloat/multilingual-e5-small"
CANDIDATES = [
    ("margin",),
    ("margin", "semantic"),
    ("margin", "semantic", "found", "covered"),
    ("margin", "lead", "semantic", "found", "covered", "unknown"),
]
CUTS = [i / 100 for i in range(1, 100)]  # --cut-step 0.05: every fifth


def features(row: dict[str, Any], language: str, names: tuple[str, ...]) -> list[float]:
    from agentrag.answer_languages import abstain_below

    signals = row.get("signals") or {}

    def value(name: str) -> float:
        if name == "margin":
            return float(row["confidence"] - abstain_below(language, MODEL))
        if name == "relative":  # the best unit's similarity above the candidate units' median
            return float(signals.get("semantic") or 0.0) - float(signals.get("semantic_median") or 0.0)
        return float(signals.get(name) or 0.0)

    return [value(n) for n in names]


def cost(rows: list[dict[str, Any]], answers: Callable[[dict[str, Any]], bool]) -> dict[str, float]:
    """Fact hit, refused and unanswerable answered when ``answers`` decides the refusable rows."""
    yes = [r for r in rows if r["answerable"]]
    no = [r for r in rows if not r["answerable"]]

    def refused(r: dict[str, Any]) -> bool:
        return bool(r["abstained"] or (r["threshold_applies"] and not answers(r)))

    return {
        "fact_hit": round(sum(r["fact_hit"] and not refused(r) for r in yes) / len(yes), 3),
        "refused": round(sum(refused(r) for r in yes) / len(yes), 3),
        "unanswerable_answered": round(sum(not refused(r) for r in no) / len(no), 3),
    }


def total(figures: dict[str, float]) -> float:
    return figures["refused"] + figures["unanswerable_answered"]


def logistic(x: Any, y: Any, *, c: float = 1.0, steps: int = 50) -> tuple[Any, float]:
    """Class-balanced logistic regression with an L2 penalty on the weights (not the intercept), by
    Newton's method: the optimum scikit-learn's ``LogisticRegression(class_weight="balanced", C=c)``
    reaches, without it."""
    import numpy as np

    rows, width = x.shape
    design = np.hstack([x, np.ones((rows, 1))])
    weight = np.where(y == 1, rows / (2 * max(1, int(y.sum()))), rows / (2 * max(1, int((1 - y).sum()))))
    theta = np.zeros(width + 1)
    penalty = np.eye(width + 1) / c
    penalty[-1, -1] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(design @ theta)))
        gradient = design.T @ (weight * (p - y)) + penalty @ theta
        hessian = design.T @ (design * (weight * p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if np.abs(step).max() < 1e-10:
            break
    return theta[:-1], float(theta[-1])


class Curve:
    """A logistic curve over ``names`` fitted on ``languages``' rows of ``half``, its cut chosen there."""

    def __init__(self, rows: dict[str, Any], languages: list[str], names: tuple[str, ...], half: str) -> None:
        import numpy as np

        self.names = names
        fitted = [
            (features(r, lang, names), int(r["answerable"]))
            for lang in languages
            for r in rows[lang]["confidences"][half]
            if r["threshold_applies"] and not r["abstained"]
        ]
        x = np.array([f for f, _ in fitted])
        mean, spread = x.mean(0), x.std(0) + 1e-9
        coef, intercept = logistic((x - mean) / spread, np.array([y for _, y in fitted]))
        self.weights = coef / spread  # on the raw features
        self.bias = float(intercept - (coef * mean / spread).sum())
        self.cut = 0.5
        self.cut = min(
            CUTS,
            key=lambda c: (round(sum(total(self.apply(rows, lang, half, c)) for lang in languages), 6), c),
        )

    def probability(self, row: dict[str, Any], language: str) -> float:
        z = self.bias + sum(
            w * f for w, f in zip(self.weights, features(row, language, self.names), strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def apply(
        self, rows: dict[str, Any], language: str, half: str, cut: float | None = None
    ) -> dict[str, float]:
        level = self.cut if cut is None else cut
        return cost(rows[language]["confidences"][half], lambda r: self.probability(r, language) >= level)


def leave_one_language_out(rows: dict[str, Any], languages: list[str], names: tuple[str, ...]) -> float:
    summed = 0.0
    for held in languages:
        curve = Curve(rows, [x for x in languages if x != held], names, "fit")
        summed += total(curve.apply(rows, held, "fit"))
    return round(summed, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=Path, required=True)
    parser.add_argument(
        "--cut-step", type=float, default=0.01, help="the cuts tried inside leave-one-language-out"
    )
    parser.add_argument(
        "--only", default="", help="report this candidate (signals joined by +), not the chosen one"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    from agentrag.answer_languages import abstain_below

    global CUTS
    inner = [round(args.cut_step * i, 4) for i in range(1, round(1 / args.cut_step))]

    rows = json.loads(args.rows.read_text(encoding="utf-8"))["languages"]
    languages = list(rows)
    fine, CUTS = CUTS, inner
    scores = {names: leave_one_language_out(rows, languages, names) for names in CANDIDATES}
    CUTS = fine
    for names, score in scores.items():
        print(f"leave-one-language-out on the fit half, {' + '.join(names)}: {score}")
    chosen = min(CANDIDATES, key=lambda n: scores[n])
    if args.only:
        chosen = tuple(args.only.split("+"))
    curve = Curve(rows, languages, chosen, "fit")
    print(f"chosen: {' + '.join(chosen)}; cut {curve.cut}")
    print(
        "SEMANTIC_CURVE_BY_MODEL entry:",
        json.dumps(
            {
                **{n: round(float(w), 4) for n, w in zip(chosen, curve.weights, strict=True)},
                "bias": round(curve.bias, 4),
                "cut": curve.cut,
            }
        ),
    )
    print(
        "| language | fact hit: table / curve | refused: table / curve | unanswerable answered:"
        " table / curve |"
    )
    print("|---|---|---|---|")
    report: dict[str, Any] = {}
    for lang in languages:
        table = at(rows[lang]["confidences"]["report"], abstain_below(lang, MODEL))
        new = curve.apply(rows, lang, "report")
        report[lang] = {"table": table, "curve": new}
        cells = [
            f"{table[k]:.2f} / **{new[k]:.2f}**" for k in ("fact_hit", "refused", "unanswerable_answered")
        ]
        print(f"| {lang} | " + " | ".join(cells) + " |")
    for name in ("table", "curve"):
        summed = sum(total(r[name]) for r in report.values())
        print(f"{name}: refused + unanswerable answered summed {summed:.3f}")
    if args.json:
        result = {"leave_one_language_out": {"+".join(n): s for n, s in scores.items()}, "report": report}
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
