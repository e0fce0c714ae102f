"""A failure census of the answer step on the *fit* data only (issue #36, #40's English line).

    .venv/bin/python -m benchmarks.answers_census collect [--database agentrag_loco] [--out F.pkl]
    .venv/bin/python -m benchmarks.answers_census score F.pkl [--json rows.json] [--where]

``collect`` asks, as ``benchmarks.answers_loco`` does (gate, condense, search, rerank; limit 5; its
collections), every answerable question of XQuAD-dev English articles 0-11 that the loco collection
keeps (articles 12-23 are the held-out half), the whole SQuAD 2.0 subset (answerable and adversarial)
and every question of the four other loco corpora, and saves each retrieved context (``--held-out``:
only XQuAD-en articles 12-23, to report once at the end). ``score`` runs the answer step of *this*
checkout over the saved contexts (no retrieval: a candidate rule is measured in seconds) and prints,
per group, fact hit / refused / answered and ECE; ``--where``: for each group's answerable questions not
answered right, where the fact was (the rank of the first hit holding it) and whether the question was
refused with the right quote, refused with a wrong one, or answered with a wrong one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.answers_loco import SHARED, ece, own_corpora, samples_corpora, squad_corpus, xquad_corpus


def _xquad_items(root: Path, articles: range, group: str) -> list[tuple[str, Path, dict[str, Any]]]:
    """Every answerable question of the XQuAD-dev English ``articles`` the loco collection keeps."""
    out: list[tuple[str, Path, dict[str, Any]]] = []
    xquad = xquad_corpus(root, 120, 0)
    data = json.loads((SHARED / "xquad-dev/xquad-dev.en.json").read_text())["data"]
    kept = {p.name.rsplit("-", 1)[0] for p in (xquad.folder / "xquad_en").glob("*.md")}
    for index in articles:
        article = data[index]
        if article["title"] not in kept:
            continue
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                item = {
                    "id": f"x{index}-{qa['id']}",
                    "question": qa["question"].strip(),
                    "expected": [a["text"] for a in qa["answers"]],
                }
                out.append((group, xquad.folder, item))
    return out


def _fit_items(root: Path) -> list[tuple[str, Path, dict[str, Any]]]:
    """(group, collection folder, item) of every fit question."""
    out: list[tuple[str, Path, dict[str, Any]]] = []
    squad = squad_corpus(root, 120, 0)
    dev = json.loads((SHARED / "squad2-subset/dev-v2.0-subset.json").read_text())["data"]
    for article in dev:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                impossible = bool(qa.get("is_impossible"))
                item = {
                    "id": qa["id"],
                    "question": qa["question"].strip(),
                    "expected": [a["text"] for a in qa.get("answers", [])],
                }
                out.append(("squad_adv" if impossible else "squad_ans", squad.folder, item))
    out += _xquad_items(root, range(12), "xquad_fit")
    for corpus in [*samples_corpora(), *own_corpora()]:
        for item in corpus.items:
            kind = item["kind"]
            if kind in ("answerable", "followup"):
                out.append((f"{corpus.name}_ans", corpus.folder, item))
            elif kind == "unanswerable":
                out.append((f"{corpus.name}_{item.get('why', 'near_miss')[:4]}", corpus.folder, item))
            elif kind == "out_of_domain":
                out.append((f"{corpus.name}_abse", corpus.folder, item))
    return out


def collect(args: argparse.Namespace) -> int:
    import agentrag as ar
    from agentrag.context import Deps
    from benchmarks._answers_worker import ingest_corpus
    from benchmarks.answers import database_url

    store = ar.Store(database_url(args.database))
    root = Path(tempfile.gettempdir()) / "agentrag-loco"
    names: dict[Path, list[str]] = {}
    saved = []
    started = time.perf_counter()
    asked = _xquad_items(root, range(12, 24), "xquad_held_out") if args.held_out else _fit_items(root)
    for group, folder, item in asked:
        if folder not in names:
            names[folder] = ingest_corpus(store, folder)
        ctx = ar.new(
            item["question"],
            store=store,
            collections=names[folder],
            history=item.get("history") or None,
            limit=5,
        )
        ctx = ctx | ar.gate() | ar.condense() | ar.search() | ar.rerank()
        saved.append((group, item, dataclasses.replace(ctx, deps=Deps())))
    store.close()
    Path(args.out).write_bytes(pickle.dumps(saved))
    print(f"{len(saved)} contexts in {time.perf_counter() - started:.0f} s -> {args.out}", file=sys.stderr)
    return 0


def score(args: argparse.Namespace) -> int:
    import importlib

    import agentrag as ar
    from agentrag.context import Deps
    from agentrag.eval.answers import abstained, fact_hit
    from benchmarks.answers import database_url

    store = ar.Store(database_url(args.database))
    saved = pickle.loads(Path(args.contexts).read_bytes())
    step = ar.answer()
    module = importlib.import_module("agentrag.steps.answer")  # the module, not the Step it exports
    gather, last = module.gather, {}

    def recorded(*a: Any, **k: Any) -> Any:
        last["evidence"] = gather(*a, **k)
        return last["evidence"]

    module.gather = recorded
    rows = []
    try:
        for group, item, ctx in saved:
            last.clear()
            done = dataclasses.replace(ctx, deps=Deps(store=store)) | step
            expected = item.get("expected") or []
            refused = abstained(done)
            rows.append(
                {
                    "group": group,
                    "id": item["id"],
                    "question": item["question"],
                    "confidence": float(done.answer_confidence or 0.0),
                    "refused": refused,
                    "hit": bool(expected) and not refused and fact_hit(done.answer_text or "", expected),
                    "answer": (done.answer_text or "")[:400],
                    **_where(ctx, last.get("evidence"), expected, fact_hit),
                }
            )
    finally:
        module.gather = gather
    store.close()
    print(f"{'group':<16} {'n':>4} {'hit':>6} {'refused':>8} {'answered':>9} {'ECE':>6}")
    for group in dict.fromkeys(r["group"] for r in rows):
        mine = [r for r in rows if r["group"] == group]
        n = len(mine)
        hit = sum(r["hit"] for r in mine) / n
        refused = sum(r["refused"] for r in mine) / n
        error = ece([r["confidence"] for r in mine], [r["hit"] for r in mine])
        print(f"{group:<16} {n:>4} {hit:>6.3f} {refused:>8.3f} {1 - refused:>9.3f} {error:>6.3f}")
    if args.where:
        _print_where(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def _where(ctx: Any, evidence: Any, expected: list[str], fact_hit: Any) -> dict[str, Any]:
    """Where an answerable question's fact is: the rank of the first hit holding it (None: no hit
    does), and whether what would be quoted holds it (the selected units, else the best one)."""
    if not expected:
        return {}
    chunk = next((i for i, h in enumerate(ctx.hits) if fact_hit(h.text, expected)), None)
    quoted = ""
    if evidence is not None:
        chosen = evidence.selected or [r[0] for r in evidence.ranked if r][:1]
        quoted = " ".join(s.unit.text for s in chosen)
    return {"fact_chunk": chunk, "quoted_right": bool(quoted) and fact_hit(quoted, expected)}


def _print_where(rows: list[dict[str, Any]]) -> None:
    """Per group of answerable questions, where the answers not given went (``score --where``)."""
    print("\nanswerable questions not answered right: where the fact was, and what happened")
    for group in dict.fromkeys(r["group"] for r in rows if "fact_chunk" in r):
        lost = [r for r in rows if r["group"] == group and "fact_chunk" in r and not r["hit"]]
        counts: dict[str, int] = {}
        for r in lost:
            if r["fact_chunk"] is None:
                key = "fact in no hit"
            else:
                at = "top chunk" if r["fact_chunk"] == 0 else "top 3" if r["fact_chunk"] < 3 else "top 5"
                what = "refused, right quote" if r["quoted_right"] else "refused, wrong quote"
                key = f"{what if r['refused'] else 'answered, wrong quote'} ({at})"
            counts[key] = counts.get(key, 0) + 1
        parts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
        print(f"{group}: {len(lost)} lost: {parts}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", default="agentrag_loco")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("collect")
    one.add_argument("--out", default="census.pkl")
    one.add_argument(
        "--held-out",
        action="store_true",
        help="only XQuAD-en articles 12-23 (issue #40's held-out half: report once, never tune on it)",
    )
    two = sub.add_parser("score")
    two.add_argument("contexts")
    two.add_argument("--json")
    two.add_argument(
        "--where", action="store_true", help="where each lost answerable question's fact was (the census)"
    )
    args = parser.parse_args(argv)
    return collect(args) if args.command == "collect" else score(args)


if __name__ == "__main__":
    raise SystemExit(main())
