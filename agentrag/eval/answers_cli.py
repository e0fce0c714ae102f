"""``agentrag eval answers FILE``: the answer benchmark on a labelled question set (see
:mod:`agentrag.eval.answers`), registered by the CLI's ``eval`` group.

The collections come from ``--collections``, else from the file's meta line, else from its expected
sources (``collection/file.md``); every one must exist in the store, so a question set is never
run against collections it was not written for.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agentrag.errors import CollectionNotFoundError, InvalidInputError

__all__ = ["cmd_eval_answers", "register", "resolve_collections"]

_ROWS = (
    ("fact_hit", "answerable: fact in the answer"),
    ("source_hit", "answerable: right source cited"),
    ("fact_retrieved", "answerable: fact in the retrieved context"),
    ("answerable_abstained", "answerable: abstained"),
    ("abstention_precision", "abstention precision"),
    ("abstention_recall", "abstention recall (unanswerable)"),
    ("false_grounded_in_domain", "false-grounded, in-domain unanswerable"),
    ("false_grounded_out_of_domain", "false-grounded, out-of-domain"),
    ("small_talk_grounded", "small talk answered as grounded / full"),
    ("followup_fact_hit", "follow-ups: fact in the answer"),
    ("followup_source_hit", "follow-ups: right source cited"),
)


def resolve_collections(explicit: str | None, answer_set: Any, store: Any) -> list[str]:
    """``--collections`` (comma-separated), else the file's meta line, else its sources' collections;
    each must exist in ``store``."""
    if explicit:
        names = [n.strip() for n in explicit.split(",") if n.strip()]
        origin = "--collections"
    elif answer_set.collections:
        names, origin = list(answer_set.collections), f"the meta line of {answer_set.path}"
    else:
        names, origin = list(answer_set.source_collections()), f"the expected sources of {answer_set.path}"
    if not names:
        raise InvalidInputError(
            f"{answer_set.path} names no collections (no meta line, no collection/file sources): "
            "pass --collections NAME[,NAME...]"
        )
    missing = []
    for name in names:
        try:
            store.collection(name)
        except CollectionNotFoundError:
            missing.append(name)
    if missing:
        raise CollectionNotFoundError(
            f"collection(s) {', '.join(missing)} (from {origin}) not found in {store.url}: ingest the corpus "
            "the questions were written for (e.g. agentrag ingest DIR --collection NAME), or pass "
            "--collections with the collections to evaluate"
        )
    return names


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _print_report(metrics: dict[str, Any], collections: list[str], path: str) -> None:
    counts = ", ".join(f"{n} {k}" for k, n in metrics["counts"].items() if n)
    print(f"{path}: {metrics['questions']} questions ({counts}) over {', '.join(collections)}")
    for key, label in _ROWS:
        print(f"  {label:<44} {_pct(metrics.get(key))}")
    by_type = ", ".join(f"{t} {_pct(v)}" for t, v in metrics["fact_hit_by_type"].items() if v is not None)
    if by_type:
        print(f"  {'fact hit by where the fact is written':<44} {by_type}")
    print(
        f"  {'answer step p50 / p95 (ms)':<44} {metrics['answer_ms_p50']} / {metrics['answer_ms_p95']}"
        + (f"   errors: {metrics['errors']}" if metrics["errors"] else "")
    )


def _print_misses(outcomes: list[Any]) -> None:
    for o in outcomes:
        wrong = (o.kind in ("answerable", "followup") and not o.fact_hit) or (
            o.kind in ("unanswerable", "out_of_domain") and o.grounded is True and not o.abstained
        )
        if wrong:
            print(f"  miss {o.id} [{o.kind}] {o.question!r} -> mode {o.mode}, grounded {o.grounded}")
            print(f"       {' '.join(o.answer.split())[:200]!r}")


def _calibration_usage(threshold: float) -> str | None:
    """How to pass the threshold to ``answer()``, when this version has a ``Calibration``."""
    import importlib

    import agentrag as ar

    calibration, where = getattr(ar, "Calibration", None), "ar"
    if calibration is None:
        try:
            calibration, where = importlib.import_module("agentrag.abstain").Calibration, "agentrag.abstain"
        except (ImportError, AttributeError):
            return None
    low = max(threshold, float(getattr(calibration(), "low_below", threshold)))
    prefix = "ar." if where == "ar" else ""
    usage = f"ar.answer(calibration={prefix}Calibration(abstain_below={threshold:.2f}, low_below={low:.2f}))"
    return usage if where == "ar" else f"{usage}  (from agentrag.abstain import Calibration)"


def cmd_eval_answers(args: argparse.Namespace) -> int:
    """Run a question set through the pipeline and print its answer metrics (or calibrate)."""
    from agentrag.cli.common import open_store, print_json
    from agentrag.eval.answers import calibrate, load_answer_set, run_answers, score

    answer_set = load_answer_set(args.file)
    if args.limit < 1:
        raise InvalidInputError(f"--limit must be >= 1, got {args.limit}")
    store = open_store(args)
    collections = resolve_collections(args.collections, answer_set, store)
    options: dict[str, Any] = {"abstain": False} if args.calibrate else {}
    try:
        outcomes = run_answers(store, answer_set.items, collections, answer_options=options, limit=args.limit)
    except TypeError as exc:
        raise InvalidInputError(
            f"--calibrate needs an answer() that can answer without abstaining (abstain=False): {exc}"
        ) from None
    metrics = score(outcomes)
    report: dict[str, Any] = {"file": answer_set.path, "collections": collections, "metrics": metrics}
    if args.calibrate:
        report["calibration"] = calibrate(outcomes)
    if args.support:
        from agentrag.eval.support_check import build_replies, check_replies, score_support

        answerable = answer_set.of_kind("answerable")
        replies = check_replies(
            store, build_replies(store, answerable, collections, replies=args.support), collections
        )
        report["support_check"] = score_support(replies)
    if args.json:
        print_json({**report, "outcomes": [o.to_dict() for o in outcomes]})
        return 0
    if args.calibrate:
        print("(answered without abstaining, to calibrate: the abstention rows below do not apply)")
    _print_report(metrics, collections, answer_set.path)
    if args.misses:
        _print_misses(outcomes)
    if args.calibrate:
        cal = report["calibration"]
        print(
            f"calibrated abstention threshold: abstain below confidence {cal['abstain_below']:.2f} "
            f"(best from {cal['best_range'][0]:.2f} to {cal['best_range'][1]:.2f}): answerable with the fact "
            f"{cal['answerable_fact_hit']:.3f}, unanswerable not answered {cal['unanswerable_refused']:.3f}"
        )
        usage = _calibration_usage(cal["abstain_below"])
        if usage:
            print(f"  use it: {usage}")
    if "support_check" in report:
        sc = report["support_check"]
        flagged, kept = _pct(sc["unsupported_flagged"]), _pct(sc["supported_kept"])
        print(
            f"support check, {sc['replies']} scripted replies: unsupported flagged {flagged}, "
            f"supported kept {kept}, flag precision {_pct(sc['flag_precision'])}"
        )
        for form, row in sc["by_form"].items():
            print(f"  {form:<12} {row['sentences']:>4} sentences, flagged {_pct(row['flagged'])}")
    sys.stdout.flush()
    return 0


def register(ev: Any, add: Any) -> None:
    """Add ``answers`` to the ``eval`` subcommands ``ev`` (``add`` is the CLI's add_command)."""
    p = add(
        ev,
        "answers",
        cmd_eval_answers,
        "run a labelled question set (JSON Lines: answerable, unanswerable, out-of-domain, small talk, "
        "follow-ups) through the local pipeline and report fact hit, sources cited, abstention and "
        "false-grounded rates",
    )
    p.add_argument("file", help="question set, e.g. samples/answers/samples.jsonl")
    p.add_argument(
        "--collections",
        "-c",
        help="comma-separated collections to search (default: the file's meta line, else the collections "
        "of its expected sources); each must exist",
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="answer without abstaining and print the abstention threshold that fits these questions",
    )
    p.add_argument("--limit", type=int, default=5, help="hits per search (default 5)")
    p.add_argument(
        "--support",
        type=int,
        default=0,
        metavar="N",
        help="also score the support check on N scripted LLM replies (FakeLLM) written from the hits",
    )
    p.add_argument("--misses", action="store_true", help="list the questions answered wrongly")
