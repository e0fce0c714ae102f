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
import math
import random
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def ingest_corpus(store: Any, corpus: Path, *, fresh: bool = False) -> list[str]:
    """Create and fill the collections of ``corpus/collections.json`` (idempotent). ``fresh``:
    delete them first, so the chunks are this checkout's (an unchanged file is not re-chunked, so
    a database filled by an older chunker keeps its chunks' old sections)."""
    names = []
    specs = json.loads((corpus / "collections.json").read_text())
    if fresh:
        existing = {c.name for c in store.collections()}
        for spec in specs:
            if spec["name"] in existing:
                store.delete_collection(spec["name"])
    for spec in specs:
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


_WORD = re.compile(r"[a-z0-9]+")


def bm25_pool(data: Any, claims: list[str], depth: int) -> set[str]:
    """The union of each claim's top ``depth`` documents by a plain BM25 (k1 1.2, b 0.75) over the
    corpus, computed here: the candidate pool the SciFact check ingests instead of all 5,183."""
    docs = {doc_id: _WORD.findall(doc.index_text.lower()) for doc_id, doc in data.corpus.items()}
    average = sum(len(words) for words in docs.values()) / len(docs)
    postings: dict[str, dict[str, int]] = {}
    for doc_id, words in docs.items():
        for word in words:
            row = postings.setdefault(word, {})
            row[doc_id] = row.get(doc_id, 0) + 1
    pool: set[str] = set()
    for claim in claims:
        scores: dict[str, float] = {}
        for word in set(_WORD.findall(claim.lower())):
            row = postings.get(word, {})
            idf = math.log(1 + (len(docs) - len(row) + 0.5) / (len(row) + 0.5))
            for doc_id, tf in row.items():
                norm = tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(docs[doc_id]) / average))
                scores[doc_id] = scores.get(doc_id, 0.0) + idf * norm
        pool.update(sorted(scores, key=lambda d: (-scores[d], d))[:depth])
    return pool


def scifact(store: Any, path: str, claims: int, seed: int, depth: int = 20) -> dict[str, Any]:
    """Gold document cited on SciFact test claims, and abstention when their gold documents are left
    out, over one collection: the claims' BM25 candidate pool (top ``depth`` each) plus their gold
    documents. "Left out" is a ``doc_ids`` filter on the pool without the gold documents (inside the
    SQL, as for any filter), so the collection is embedded once."""
    import agentrag as ar
    from agentrag.eval import ingest_beir, load_beir
    from agentrag.eval.answers import abstained

    data = load_beir(path, "test")
    rng = random.Random(seed)
    chosen = sorted(rng.sample(sorted(data.queries), min(claims, len(data.queries))))
    gold = {q: {d for d, grade in data.qrels[q].items() if grade > 0} for q in chosen}
    left_out = set().union(*gold.values())
    pool = bm25_pool(data, [data.queries[q] for q in chosen], depth) | left_out
    name = f"scifact_pool_{claims}_{seed}_{depth}"
    ingest_beir(store, replace(data, corpus={k: v for k, v in data.corpus.items() if k in pool}), name)
    ids = {
        str(d["source"]): str(d["id"]) for d in (x.to_dict() for x in store.documents(name, limit=100_000))
    }
    kept = sorted(ids[d] for d in pool - left_out)[:1000]  # a doc_ids filter takes up to 1,000

    def ask(claim: str, filters: Any = None) -> tuple[Any, list[str]]:
        ctx = ar.new(claim, store=store, collections=[name], filters=filters)
        ctx = ctx | ar.search() | ar.rerank() | ar.answer()
        hits = {h.chunk_id: h for h in (*ctx.hits, *ctx.context_used)}
        return ctx, [str(hits[c].source) for c in ctx.citations if c in hits]

    cited_gold = with_gold_abstained = without_abstained = without_grounded = 0
    for q in chosen:
        ctx, cited = ask(data.queries[q])
        cited_gold += bool(gold[q] & set(cited))
        with_gold_abstained += abstained(ctx)
        ctx, cited = ask(data.queries[q], {"doc_ids": kept})
        assert not gold[q] & set(cited), "a left-out document was cited"
        without_abstained += abstained(ctx)
        without_grounded += ctx.grounded is True and not abstained(ctx)
    n = len(chosen)
    return {
        "claims": n,
        "pool_documents": len(pool),
        "left_out_documents": len(left_out),
        "gold_cited": round(cited_gold / n, 4),
        "abstained_with_gold": round(with_gold_abstained / n, 4),
        "abstained_without_gold": round(without_abstained / n, 4),
        "grounded_without_gold": round(without_grounded / n, 4),
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
    for spec in args.set:  # this checkout's chunks, whatever an earlier run left in the database
        ingest_corpus(store, Path(spec.partition("=")[2]), fresh=True)
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
