"""The abstention thresholds of other languages (issue #40) refitted on every XQuAD-dev article, judged
out of fold: leave-one-fold-out over the rows of ``benchmarks.multilingual_folds``.

    .venv/bin/python -m benchmarks.multilingual_folds --first-article 0 --articles 24 --json rows.json
    .venv/bin/python -m benchmarks.multilingual_refit --rows rows.json

Each fold (two articles) is held out in turn; a rule fits a language's threshold on the other folds'
rows pooled and is scored on the fold held out, decided as the answer step decides (the table's
threshold moved by the shipped curve, ``multilingual_folds.decide``). Every unanswerable question is
held out once; the held-out answerable rows are each fold's own. Printed per language and rule: the
out-of-fold answerable refused / unanswerable answered and fact hit (pooled over the held-out folds),
the summed cost over the languages and how many are over issue #40's targets (refused <= 0.15,
answered <= 0.10);
then each rule's thresholds fitted on every fold (the entry to paste). The rules:

* ``table``: :data:`agentrag.answer_languages.ABSTAIN_BELOW_BY_MODEL` as it is (fitted on articles
  0-11: on their folds it is not out of fold; ``table, folds past 0-11`` scores only the others);
* ``refit``: the table's rule (least refused + unanswerable answered) under the curve;
* ``weighted``: the same with an unanswerable question answered weighing 1.5 (the targets' ratio);
* ``targets``: least ``max(refused / 0.15, answered / 0.10)`` (each error against its target).

Nothing here changes the library.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.multilingual_folds import MODEL, UNANSWERED_WEIGHT, best_run, with_other_languages

REFUSED_TARGET = 0.15
ANSWERED_TARGET = 0.10
GRID = np.round(np.arange(201) * 0.005, 3)  # the thresholds a rule chooses among (as fit_curve's)
#: the table's article span: its thresholds were fitted on articles 0-11 (folds 0-5 of two)
TABLE_FOLDS = 6


class Rows:
    """A language's rows as arrays: whether each is answered at every threshold of :data:`GRID`."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        from agentrag.answer_curve import threshold_shift

        shifts = []
        for r in rows:
            signals = r.get("signals") or {}
            similarity = signals.get("semantic")
            if similarity is not None:
                shifts.append(threshold_shift(MODEL, similarity, signals.get("vector")) or 0.0)
            else:
                shifts.append(0.0)
        self.fold = np.array([r["fold"] for r in rows])
        self.answerable = np.array([bool(r["answerable"]) for r in rows])
        self.fact_hit = np.array([bool(r.get("fact_hit")) for r in rows])
        never = np.array([bool(r["abstained"]) for r in rows])
        always = ~never & ~np.array([bool(r["threshold_applies"]) for r in rows])
        confidence = np.array([float(r["confidence"]) for r in rows])
        self.shift = np.array(shifts)
        self.never, self.always, self.confidence = never, always, confidence

    def answered(self, thresholds: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Whether each row of ``mask`` is answered at each of ``thresholds`` (thresholds x rows)."""
        moved = np.clip(thresholds[:, None] + self.shift[mask][None, :], 0.0, 1.0)
        said = self.confidence[mask][None, :] >= moved
        return ~self.never[mask][None, :] & (self.always[mask][None, :] | said)

    def rates(self, thresholds: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Answerable refused and unanswerable answered (rates) of the rows of ``mask`` at each threshold."""
        yes, no = mask & self.answerable, mask & ~self.answerable
        refused = 1.0 - self.answered(thresholds, yes).mean(axis=1) if yes.any() else 0.0 * thresholds
        answered = self.answered(thresholds, no).mean(axis=1) if no.any() else 0.0 * thresholds
        return refused, answered


def objective(rule: str, refused: np.ndarray, answered: np.ndarray) -> np.ndarray:
    if rule == "refit":
        return refused + answered
    if rule == "weighted":
        return refused + UNANSWERED_WEIGHT * answered
    if rule == "targets":
        return np.maximum(refused / REFUSED_TARGET, answered / ANSWERED_TARGET)
    raise ValueError(rule)


def fitted(rows: Rows, mask: np.ndarray, rule: str) -> float:
    """The threshold of least ``rule`` objective over the rows of ``mask``: the middle of the first
    best run of :data:`GRID` (as ``multilingual_folds.fit_curve``)."""
    refused, answered = rows.rates(GRID, mask)
    start, stop = best_run([round(float(x), 9) for x in objective(rule, refused, answered)])
    return round(float(GRID[start] + GRID[stop]) / 2, 3)


RULES = ("table", "refit", "weighted", "targets")


def out_of_fold(rows: Rows, current: float, rule: str, folds: list[int]) -> dict[str, Any]:
    """Each fold of ``folds`` held out in turn, ``rule``'s threshold fitted on every other fold: the
    held-out answerable refused / unanswerable answered, pooled (counts over the held-out rows)."""
    refused = answered = yes = no = hit = 0
    chosen = []
    for f in folds:
        held = rows.fold == f
        threshold = current if rule == "table" else fitted(rows, ~held, rule)
        chosen.append(threshold)
        said = rows.answered(np.array([threshold]), held)[0]
        kinds = rows.answerable[held]
        refused += int((~said & kinds).sum())
        answered += int((said & ~kinds).sum())
        hit += int((said & kinds & rows.fact_hit[held]).sum())
        yes += int(kinds.sum())
        no += int((~kinds).sum())
    return {
        "refused": refused / max(yes, 1),
        "answered": answered / max(no, 1),
        "fact_hit": hit / max(yes, 1),
        "answerable": yes,
        "unanswerable": no,
        "thresholds": (min(chosen), max(chosen)),
    }


def over(result: dict[str, Any]) -> bool:
    return result["refused"] > REFUSED_TARGET + 1e-9 or result["answered"] > ANSWERED_TARGET + 1e-9


def report(by_language: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Print the out-of-fold table of every rule; return each rule's thresholds fitted on every fold."""
    from agentrag.answer_languages import ABSTAIN_BELOW_BY_MODEL

    table = ABSTAIN_BELOW_BY_MODEL[MODEL]
    columns = [("table", None), ("table", "past"), *((r, None) for r in RULES[1:])]
    names = [f"{r}, folds past 0-11" if part else r for r, part in columns]
    print("Out of fold (answerable refused / unanswerable answered, * over a target; (fact hit)):\n")
    print("| language | questions held out | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    sums = {n: [0.0, 0.0, 0] for n in names}
    everywhere: dict[str, dict[str, float]] = {r: {} for r in RULES}
    spread: dict[str, dict[str, tuple[float, float]]] = {r: {} for r in RULES[1:]}
    for lang, raw in by_language.items():
        rows = Rows(raw)
        folds = sorted({int(f) for f in rows.fold})
        current = table.get(lang, table["*"])
        cells = []
        for name, (rule, part) in zip(names, columns, strict=True):
            chosen = [f for f in folds if f >= TABLE_FOLDS] if part else folds
            if not chosen:  # rows of the fit half only
                cells.append("-")
                continue
            result = out_of_fold(rows, current, rule, chosen)
            if part is None and rule != "table":
                spread[rule][lang] = result["thresholds"]
            mark = "*" if over(result) else ""
            cells.append(
                f"{result['refused']:.3f} / {result['answered']:.3f}{mark} ({result['fact_hit']:.2f})"
            )
            sums[name][0] += result["refused"]
            sums[name][1] += result["answered"]
            sums[name][2] += int(over(result))
            if name == "table":
                held = f"{result['answerable']} / {result['unanswerable']}"
        everywhere["table"][lang] = current
        for rule in RULES[1:]:
            everywhere[rule][lang] = fitted(rows, np.ones_like(rows.answerable), rule)
        print(f"| {lang} | {held} | " + " | ".join(cells) + " |")
    print(
        "| summed (refused + answered) | | "
        + " | ".join(f"{s[0] + s[1]:.3f} ({s[0]:.3f} + {s[1]:.3f})" for s in sums.values())
        + " |"
    )
    weighted = [s[0] + UNANSWERED_WEIGHT * s[1] for s in sums.values()]
    print(f"| summed, answered x{UNANSWERED_WEIGHT} | | " + " | ".join(f"{w:.3f}" for w in weighted) + " |")
    print("| languages over a target | | " + " | ".join(str(s[2]) for s in sums.values()) + " |")
    print("\nThresholds (fitted on every fold; in brackets the range over the held-out folds' fits):\n")
    print("| language | " + " | ".join(RULES) + " |")
    print("|---|" + "---|" * len(RULES))
    for lang in by_language:
        cells = [f"{everywhere['table'][lang]:.3f}"]
        for rule in RULES[1:]:
            low, high = spread[rule][lang]
            cells.append(f"{everywhere[rule][lang]:.3f} ({low:.3f}-{high:.3f})")
        print(f"| {lang} | " + " | ".join(cells) + " |")
    for rule in RULES[1:]:
        with_other_languages(everywhere[rule])
        print(f"ABSTAIN_BELOW_BY_MODEL entry ({rule}, every fold):", json.dumps(everywhere[rule]))
    return everywhere


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=Path, required=True, help="benchmarks.multilingual_folds --json")
    args = parser.parse_args(argv)
    by_language = json.loads(args.rows.read_text(encoding="utf-8"))["languages"]
    counts = {lang: len({r["fold"] for r in rows}) for lang, rows in by_language.items()}
    print("folds per language:", statistics.mode(counts.values()), json.dumps(counts))
    report(by_language)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
