"""One side of benchmarks/answers.py, run in its own process against one version of the library.

    PYTHONPATH=<checkout or archive> python benchmarks/_answers_worker.py --database-url URL \
        --set FILE=CORPUS_DIR ... --support 200 --scifact 50 --out RESULT.json

For the baseline, benchmarks/answers.py runs this file from a ``git archive`` of the old commit, with
``agentrag/eval/answers.py`` and ``agentrag/eval/support_check.py`` copied in: it only uses the
public API, ``agentrag.eval`` (BEIR loading) and those two modules, so the same measurement code
scores both versions.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def ingest_corpus(store: Any, corpus: Path) -> list[str]:
    """Create and fill the collections of ``corpus/collections.json`` (idempotent)."""
    names = []
    for spec in json.loads((corpus / "collections.json").read_text()):
        store.create_collection(spec["name"], description=spec["description"], exist_ok=True)
        folder = corpus / spec["name"]
        if not folder.is_dir():  # samples/library names folders by their short name
            folder = corpus / spec["name"].split("_", 1)[-1]
        store.ingest(folder, collection=spec["name"])
        names.append(spec["name"])
    return names


def run_set(store: Any, file: str, corpus: Path, support: int) -> dict[str, Any]:
    from agentrag.eval.answers import load_answer_set, run_answers, score

    names = ingest_corpus(store, corpus)
    answer_set = load_answer_set(file)
    collections = list(answer_set.collections) or names
    started = time.perf_counter()
    outcomes = run_answers(store, answer_set.items, collections)
    seconds = time.perf_counter() - started
    warm = run_answers(store, answer_set.items, collections)  # the same questions again: caches warm
    metrics = score(outcomes)
    warm_ms = sorted(o.answer_ms for o in warm if o.error is None)
    metrics["answer_ms_p50_warm"] = round(warm_ms[len(warm_ms) // 2], 3) if warm_ms else None
    metrics["seconds"] = round(seconds, 1)
    out: dict[str, Any] = {"file": file, "metrics": metrics, "outcomes": [o.to_dict() for o in outcomes]}
    if support:
        from agentrag.eval.support_check import build_replies, check_replies, score_support

        replies = build_replies(store, answer_set.of_kind("answerable"), collections, replies=support)
        checked = check_replies(store, replies, collections)
        out["support_check"] = score_support(checked)
    return out


def latency(store: Any, file: str, corpus: Path, limit: int = 10) -> dict[str, Any]:
    """The answer step alone over ``limit`` hits, for the answerable questions of ``file``: the first
    call (cold: nothing cached in this process), a second call on the same context (warm), and the
    floor of the cold call: embedding the hits' sentences once with the bare model."""
    import agentrag as ar
    from agentrag.eval.answers import load_answer_set
    from agentrag.sentences import sentences

    collections = ingest_corpus(store, corpus)
    items = load_answer_set(file).of_kind("answerable")
    embedder = store.embedder
    embedder.embed(["warm the model up"])
    cold, warm, floor = [], [], []
    for item in items:
        ctx = ar.new(item["question"], store=store, collections=collections, limit=limit).search().rerank()
        for runs in (cold, warm):
            started = time.perf_counter()
            ctx.answer()
            runs.append((time.perf_counter() - started) * 1000.0)
        texts = [x.text for h in ctx.hits for x in sentences(h.text) if x.complete]
        started = time.perf_counter()
        if texts:
            embedder.embed(texts)
        floor.append((time.perf_counter() - started) * 1000.0)

    def p50(values: list[float]) -> float:
        return round(sorted(values)[len(values) // 2], 2)

    return {
        "questions": len(items),
        "hits": limit,
        "cold_p50": p50(cold),
        "warm_p50": p50(warm),
        "floor_p50": p50(floor),
    }


def scifact(store: Any, path: str, claims: int, seed: int) -> dict[str, Any]:
    """Gold document cited on SciFact claims; abstention when the gold documents are left out."""
    import agentrag as ar
    from agentrag.eval import ingest_beir, load_beir
    from agentrag.eval.answers import abstained

    data = load_beir(path, "test")
    rng = random.Random(seed)
    chosen = sorted(rng.sample(sorted(data.queries), min(claims, len(data.queries))))
    gold = {q: {d for d, grade in data.qrels[q].items() if grade > 0} for q in chosen}
    left_out = set().union(*gold.values())
    ingest_beir(store, data, "scifact")
    partial = replace(data, corpus={k: v for k, v in data.corpus.items() if k not in left_out})
    nogold = f"scifact_nogold_{claims}_{seed}"
    ingest_beir(store, partial, nogold)

    def ask(claim: str, collection: str) -> tuple[Any, list[str]]:
        ctx = ar.new(claim, store=store, collections=[collection]) | ar.search() | ar.rerank() | ar.answer()
        hits = {h.chunk_id: h for h in (*ctx.hits, *ctx.context_used)}
        return ctx, [str(hits[c].source) for c in ctx.citations if c in hits]

    cited_gold = with_gold_abstained = without_abstained = without_grounded = 0
    for q in chosen:
        ctx, cited = ask(data.queries[q], "scifact")
        cited_gold += bool(gold[q] & set(cited))
        with_gold_abstained += abstained(ctx)
        ctx, cited = ask(data.queries[q], nogold)
        without_abstained += abstained(ctx)
        without_grounded += ctx.grounded is True and not abstained(ctx)
    n = len(chosen)
    return {
        "claims": n,
        "gold_cited": round(cited_gold / n, 4),
        "abstained_with_gold": round(with_gold_abstained / n, 4),
        "abstained_without_gold": round(without_abstained / n, 4),
        "grounded_without_gold": round(without_grounded / n, 4),
        "left_out_documents": len(left_out),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="FILE=CORPUS_DIR")
    parser.add_argument("--support", type=int, default=0)
    parser.add_argument("--scifact", type=int, default=0, help="claims (0: skip)")
    parser.add_argument("--scifact-path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import agentrag as ar

    store = ar.Store(args.database_url)
    result: dict[str, Any] = {"agentrag": str(Path(ar.__file__).resolve().parent), "sets": []}
    if args.set:  # first, while nothing is cached in this process
        file, _, corpus = args.set[0].partition("=")
        result["latency"] = latency(store, file, Path(corpus))
    for i, spec in enumerate(args.set):
        file, _, corpus = spec.partition("=")
        result["sets"].append(run_set(store, file, Path(corpus), args.support if i == 0 else 0))
        print(f"  {file}: done", file=sys.stderr, flush=True)
    if args.scifact and args.scifact_path:
        result["scifact"] = scifact(store, args.scifact_path, args.scifact, args.seed)
    store.close()
    Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
