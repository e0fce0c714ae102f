"""Which curve moves the threshold of an answer in another language (issue #40), chosen
leave-one-corpus-out over XQuAD-dev's fit half and the handbook in German, Chinese and Japanese.

    .venv/bin/python -m benchmarks.multilingual_loco --xquad FIT.json --handbook NM.json

``FIT.json``: ``benchmarks.multilingual_abstention --fit-only --json`` (articles 0-11 only: the report half
is never read here); ``NM.json``: ``benchmarks.near_miss_languages --json``. Both record each question's
confidence at threshold 0, whether a threshold can refuse it, and the answer step's signals, so every
candidate is read off the same rows.

Candidates: the table's threshold alone; the shipped curves (``agentrag.answer_curve``), as they are and
allowed only to raise the threshold; and curves refitted on XQuAD's fit half (the only corpus with
enough questions to fit one; ``benchmarks.multilingual_signals.Curve``) over other signals, among them
the best unit's similarity *above the candidate units' median* (``relative``: short documents that all
resemble a question score high whether or not one answers it). A corpus's cost is answerable refused +
unanswerable answered (near-misses and absent questions together), averaged over its languages. For
each corpus left out, the candidate of least mean cost over the other corpora (each weighing the same)
is chosen and its cost on the left-out one reported; the candidate of least cost over every corpus is
what ships.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.multilingual_signals import Curve, cost, total

MODEL = "intfloat/multilingual-e5-small"
REFITTED = [("margin", "semantic"), ("margin", "semantic", "semantic_median"), ("margin", "relative")]
Decide = Callable[[dict[str, Any], str], bool]  # (row, language) -> answered


def shipped(lower: float) -> Decide:
    """The shipped curves as the answer step reads them (the passage's similarity beside the unit's when
    the row recorded the vector leg's: ``VECTOR_CURVE_BY_MODEL``; ``SEMANTIC_CURVE_BY_MODEL`` without),
    the similarity lowering the table's threshold by at most ``lower``."""
    from agentrag.answer_curve import threshold_shift
    from agentrag.answer_languages import abstain_below

    def answers(row: dict[str, Any], language: str) -> bool:
        signals = row.get("signals") or {}
        table = abstain_below(language, MODEL)
        shift = threshold_shift(MODEL, signals.get("semantic"), signals.get("vector"), lower=lower)
        if shift is None:
            return bool(row["confidence"] >= table)
        return bool(row["confidence"] >= min(1.0, max(0.0, table + shift)))

    return answers


def table_only(row: dict[str, Any], language: str) -> bool:
    from agentrag.answer_languages import abstain_below

    return bool(row["confidence"] >= abstain_below(language, MODEL))


def refitted(xquad: dict[str, Any], names: tuple[str, ...]) -> tuple[Decide, Curve]:
    curve = Curve(xquad, list(xquad), names, "fit")
    return (lambda row, language: curve.probability(row, language) >= curve.cut), curve


def corpora(xquad: dict[str, Any], handbook: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """corpus -> language -> rows (each with ``answerable``)."""
    out = {"xquad_fit": {lang: row["confidences"]["fit"] for lang, row in xquad.items()}}
    for lang, result in json.loads(handbook.read_text(encoding="utf-8")).items():
        out[f"handbook_{lang}"] = {
            lang: [{**r, "answerable": r["category"] == "answerable"} for r in result["rows"]]
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--xquad", type=Path, required=True)
    parser.add_argument("--handbook", type=Path, required=True)
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="``multilingual_abstention --report-only --json`` rows (articles 12-23): every candidate's "
        "held-out figures, read after the choice",
    )
    args = parser.parse_args(argv)
    xquad = json.loads(args.xquad.read_text(encoding="utf-8"))["languages"]
    candidates: dict[str, Decide] = {
        "table": table_only,
        "shipped": shipped(1.0),
        "shipped, raise only": shipped(0.0),
        **{f"shipped, lower <= {x:g}": shipped(x) for x in (0.01, 0.02, 0.03, 0.05, 0.1, 0.2)},
    }
    for names in REFITTED:
        decide, curve = refitted(xquad, names)
        label = "refit " + " + ".join(names)
        candidates[label] = decide
        weights = {n: round(float(w), 4) for n, w in zip(names, curve.weights, strict=True)}
        print(f"{label}: {json.dumps({**weights, 'bias': round(curve.bias, 4), 'cut': curve.cut})}")
    data = corpora(xquad, args.handbook)
    figures = {
        (name, label, lang): cost(rows, lambda r, d=decide, x=lang: d(r, x))  # type: ignore[misc]
        for label, decide in candidates.items()
        for name, corpus in data.items()
        for lang, rows in corpus.items()
    }
    mean = {
        (name, label): sum(total(figures[name, label, lang]) for lang in corpus) / len(corpus)
        for label in candidates
        for name, corpus in data.items()
    }
    labels = list(candidates)
    print("| corpus | " + " | ".join(labels) + " | chosen on the others | its cost |")
    print("|---|" + "---|" * (len(labels) + 2))
    for name in data:
        others = [n for n in data if n != name]
        chosen = min(labels, key=lambda c: (round(sum(mean[n, c] for n in others), 6), labels.index(c)))
        cells = " | ".join(f"{mean[name, c]:.3f}" for c in labels)
        print(f"| {name} | {cells} | {chosen} | {mean[name, chosen]:.3f} |")
    overall = min(labels, key=lambda c: (round(sum(mean[n, c] for n in data), 6), labels.index(c)))
    print(f"chosen with every corpus: {overall}")
    for (name, label, lang), f in figures.items():
        if label == overall or label == "shipped":
            print(
                f"  {label:24} {name:12} {lang} hit {f['fact_hit']:.2f} refused {f['refused']:.2f}"
                f" unanswerable {f['unanswerable_answered']:.3f}"
            )
    if args.report:
        held_out(json.loads(args.report.read_text(encoding="utf-8"))["languages"], candidates)
    return 0


def held_out(report: dict[str, Any], candidates: dict[str, Decide]) -> None:
    """Every candidate on the report half (read once, after the choice): per language fact hit /
    refused / unanswerable answered, summed cost and targets missed."""
    print("| candidate | " + " | ".join(report) + " | summed | targets missed |")
    print("|---|" + "---|" * (len(report) + 2))
    for label, decide in candidates.items():
        cells, summed, missed = [], 0.0, 0
        for lang, row in report.items():
            f = cost(row["confidences"]["report"], lambda r, d=decide, x=lang: d(r, x))  # type: ignore[misc]
            cells.append(f"{f['fact_hit']:.2f} / {f['refused']:.2f} / {f['unanswerable_answered']:.3f}")
            summed += total(f)
            missed += (f["refused"] > 0.15) + (f["unanswerable_answered"] > 0.10)
        print(f"| {label} | " + " | ".join(cells) + f" | {summed:.3f} | {missed} |")


if __name__ == "__main__":
    raise SystemExit(main())
