"""A threshold placed on each collection's own null (agentrag.abstention) for English answers,
leave-one-corpus-out over benchmarks.answers_loco's six corpora (issue #36 item 2).

    .venv/bin/python -m benchmarks.answers_null --rows LOCO.json [--database agentrag_loco] [--json FILE]

``LOCO.json`` is ``benchmarks.answers_loco --json``'s output (each question's confidence with the
library's defaults, whether it was refused for want of a selected unit, and whether the answer it
would quote states the fact); its collections are read in the same ``--database``. For each corpus,
the null of each of its collections (pseudo-questions of its documents asked without their own
document, the answer step's confidence with no threshold), pooled over the corpus's collections.

A threshold ``t`` refuses a question when the defaults refused it for want of a selected unit, or
when its confidence is below ``t`` and the defaults could refuse it (an answer without a quotable
unit is an excerpt, never refused: a row answered below the default 0.5). For each corpus left
out, the quantile of least refused + unanswerable answered on the other five (each weighing the
same) is applied to the left-out corpus's own null; the defaults (0.5) beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.multilingual_null import QUANTILES, quantile

DEFAULT = 0.5


def refuses(row: dict[str, Any], threshold: float) -> bool:
    could = row["abstained"] or row["confidence"] >= DEFAULT
    return bool(row["no_selection"]) or (could and row["confidence"] < threshold)


def at(rows: list[dict[str, Any]], threshold: float) -> dict[str, float | None]:
    def rate(flags: list[bool]) -> float | None:
        return round(sum(flags) / len(flags), 3) if flags else None

    ans = [r for r in rows if r["category"] == "answerable"]
    near = [r for r in rows if r["category"] == "near_miss"]
    absent = [r for r in rows if r["category"] == "absent"]
    return {
        "fact_hit": rate([r["open_hit"] and not refuses(r, threshold) for r in ans]),
        "refused": rate([refuses(r, threshold) for r in ans]),
        "near_miss_answered": rate([not refuses(r, threshold) for r in near]),
        "absent_answered": rate([not refuses(r, threshold) for r in absent]),
        "unanswerable_answered": rate([not refuses(r, threshold) for r in near + absent]),
    }


def cost(figures: dict[str, float | None]) -> float:
    return (figures["refused"] or 0.0) + (figures["unanswerable_answered"] or 0.0)


def gather(database: str, corpora: list[str], per_document: int, share: float) -> dict[str, list[float]]:
    import agentrag as ar
    from agentrag.abstention import null_confidences
    from benchmarks.answers import database_url
    from benchmarks.answers_loco import build

    store = ar.Store(database_url(database))
    root = Path("/tmp") / "agentrag-loco"
    args = argparse.Namespace(answerable=120, seed=0, only=corpora)
    out: dict[str, list[float]] = {}
    for corpus in build(root, args):
        names = [spec["name"] for spec in json.loads((corpus.folder / "collections.json").read_text())]
        started = time.perf_counter()
        out[corpus.name] = [
            v for name in names for v in null_confidences(store, name, per_document=per_document, share=share)
        ]
        seconds = time.perf_counter() - started
        print(corpus.name, names, len(out[corpus.name]), f"{seconds:.1f} s", file=sys.stderr, flush=True)
    store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=Path, required=True)
    parser.add_argument("--database", default="agentrag_loco")
    parser.add_argument("--nulls", type=Path, default=None, help="reuse nulls saved by an earlier --json")
    parser.add_argument("--per-document", type=int, default=3, help="pseudo-questions per document")
    parser.add_argument(
        "--share", type=float, default=0.5, help="the share of a sentence a pseudo-question keeps"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = json.loads(args.rows.read_text())["rows"]
    corpora = list(dict.fromkeys(r["corpus"] for r in rows))
    by_corpus = {c: [r for r in rows if r["corpus"] == c] for c in corpora}
    nulls = (
        json.loads(args.nulls.read_text())["nulls"]
        if args.nulls
        else gather(args.database, corpora, args.per_document, args.share)
    )
    usable = [c for c in corpora if len(nulls.get(c, [])) >= 8]
    results: dict[str, Any] = {}
    print(
        "| corpus | null values | quantile (fit on the others) | threshold | setting | fact hit |"
        " refused | near-miss answered | absent answered |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for held in corpora:
        others = [c for c in usable if c != held]
        q = min(
            QUANTILES,
            key=lambda q: (
                round(sum(cost(at(by_corpus[c], quantile(nulls[c], q))) for c in others), 6),
                q,
            ),
        )
        placed = quantile(nulls[held], q) if held in usable else None
        results[held] = {
            "quantile": q,
            "threshold": placed,
            "default": at(by_corpus[held], DEFAULT),
            "placed": at(by_corpus[held], placed) if placed is not None else None,
        }
        for setting in ("default", "placed"):
            fig = results[held][setting]
            if fig is None:
                continue
            cells = [
                "-" if fig[k] is None else f"{fig[k]:.3f}"
                for k in ("fact_hit", "refused", "near_miss_answered", "absent_answered")
            ]
            threshold = f"{placed:.3f}" if setting == "placed" and placed is not None else f"{DEFAULT}"
            print(
                f"| {held} | {len(nulls.get(held, []))} | {q} | {threshold} | {setting} | "
                + " | ".join(cells)
                + " |"
            )
    if args.json:
        args.json.write_text(json.dumps({"nulls": nulls, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
