"""Lexical BM25 on BEIR SciFact: agentrag's two BM25 backends against bm25s' own pipeline.

    .venv/bin/python -m benchmarks.bm25_compare [--data /work/shared/data/beir/scifact] [--scale 60]

Rows:

* ``agentrag bm25s``: ``BM25Index.build(texts, backend="bm25s")`` (method="lucene", k1=1.5, b=0.75).
* ``agentrag rank_bm25``: ``BM25Index.build(texts, backend="rank_bm25")`` (``BM25Okapi``, k1=1.5, b=0.75).
* ``bm25s raw (floor)``: the library on its own: ``bm25s.tokenize(texts, stopwords="en",
  stemmer=Stemmer.Stemmer("english"))``, ``bm25s.BM25(method="lucene")``, ``retrieve(k=100)``.

Each document is indexed as ``title + " " + text``; the 300 test queries of qrels/test.tsv are run
one at a time (tokenization included in the latency). Quality: nDCG@10 (linear gain, log2
discount, trec_eval ``ndcg_cut``) and recall@100 over the top 100, ranked the trec_eval way
(score descending, ties by document id descending). Speed: build time (tokenize + index), per-query
latency of ``top(q, 100)`` (``retrieve`` for the floor) and, for agentrag's backends, of
``scores(q)``, which returns every chunk with a positive score (what the SQL side filters).

``--scale N`` adds a speed/memory table on the corpus repeated N times (N = 60 gives ~311k
chunks), for the bm25s backend on all queries and rank_bm25 on the first 20.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from agentrag.retrieval.bm25 import BM25Index
from agentrag.retrieval.tokenize import _stem_cache

DEFAULT_DATA = Path("/work/shared/data/beir/scifact")

Search = Callable[[str], tuple[Sequence[int], Sequence[float]]]


# --------------------------------------------------------------------------- metrics


def _local_ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float | None:
    """trec_eval ``ndcg_cut.k``: linear gain, log2(rank + 1) discount, ideal from the qrels."""
    relevant = {d: g for d, g in qrels.items() if g > 0}
    if not relevant:
        return None
    dcg = sum(relevant.get(d, 0.0) / math.log2(r + 1) for r, d in enumerate(ranked[:k], start=1))
    ideal = sum(g / math.log2(r + 1) for r, g in enumerate(sorted(relevant.values(), reverse=True)[:k], 1))
    return dcg / ideal


def _local_recall_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float | None:
    relevant = {d for d, g in qrels.items() if g > 0}
    if not relevant:
        return None
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def _local_rank_by_score(scores: Mapping[str, float]) -> list[str]:
    return sorted(scores, key=lambda d: (scores[d], d), reverse=True)


try:  # the project's metrics module, when present (same definitions)
    from agentrag.eval.metrics import ndcg_at_k, rank_by_score, recall_at_k

    METRICS_SOURCE = "agentrag.eval.metrics"
except ImportError:  # pragma: no cover - only before agentrag.eval.metrics existed
    ndcg_at_k, recall_at_k, rank_by_score = _local_ndcg_at_k, _local_recall_at_k, _local_rank_by_score
    METRICS_SOURCE = "local helpers in benchmarks/bm25_compare.py"


# --------------------------------------------------------------------------- data


@dataclasses.dataclass(frozen=True)
class SciFact:
    doc_ids: list[str]
    texts: list[str]  # title + " " + text, aligned with doc_ids
    queries: dict[str, str]  # test queries only, qrels order
    qrels: dict[str, dict[str, int]]


def load_scifact(root: Path) -> SciFact:
    doc_ids: list[str] = []
    texts: list[str] = []
    with (root / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                obj = json.loads(line)
                doc_ids.append(str(obj["_id"]))
                texts.append(f"{obj.get('title') or ''} {obj.get('text') or ''}")
    qrels: dict[str, dict[str, int]] = {}
    with (root / "qrels" / "test.tsv").open(encoding="utf-8") as f:
        next(f)  # header
        for line in f:
            if line.strip():
                qid, did, grade = line.rstrip("\n").split("\t")
                qrels.setdefault(qid, {})[did] = int(grade)
    all_queries: dict[str, str] = {}
    with (root / "queries.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                obj = json.loads(line)
                all_queries[str(obj["_id"])] = obj["text"]
    queries = {qid: all_queries[qid] for qid in qrels}
    return SciFact(doc_ids, texts, queries, qrels)


# --------------------------------------------------------------------------- running


@dataclasses.dataclass
class Row:
    name: str
    build_s: float
    ndcg10: float | None = None
    recall100: float | None = None
    qps: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    all_p50_ms: float | None = None
    all_p99_ms: float | None = None
    matched: float | None = None  # mean chunks with a positive score per query
    rss_mb: float | None = None  # resident memory after the build, minus before
    peak_mb: float | None = None  # peak resident memory during the build, minus before


def _timed(
    search: Search, queries: Sequence[str]
) -> tuple[list[tuple[Sequence[int], Sequence[float]]], list[float]]:
    search(queries[0])  # warm-up (lazy imports, caches)
    results, latencies = [], []
    for q in queries:
        t0 = time.perf_counter()
        results.append(search(q))
        latencies.append(time.perf_counter() - t0)
    return results, latencies


def _pct(latencies: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(latencies) * 1000.0, p))


def _quality(data: SciFact, results: Sequence[tuple[Sequence[int], Sequence[float]]]) -> tuple[float, float]:
    ndcgs, recalls = [], []
    for qid, (positions, scores) in zip(data.queries, results, strict=True):
        ranked = rank_by_score(
            {data.doc_ids[int(p)]: float(s) for p, s in zip(positions, scores, strict=True)}
        )
        n, r = ndcg_at_k(ranked, data.qrels[qid], 10), recall_at_k(ranked, data.qrels[qid], 100)
        if n is not None and r is not None:
            ndcgs.append(n)
            recalls.append(r)
    return statistics.fmean(ndcgs), statistics.fmean(recalls)


def _rss_mb() -> float | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None


def _peak_rss_mb() -> float | None:
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def bench_index(name: str, data: SciFact, texts: Sequence[str], backend: str, queries: Sequence[str]) -> Row:
    _stem_cache.clear()  # every build starts cold, as the first build in a process does
    gc.collect()
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    index = BM25Index.build(texts, backend=backend)  # type: ignore[arg-type]
    row = Row(name, time.perf_counter() - t0)
    gc.collect()
    rss1, peak = _rss_mb(), _peak_rss_mb()
    if rss0 is not None and rss1 is not None:
        row.rss_mb = rss1 - rss0
        row.peak_mb = None if peak is None else peak - rss0
    print(f"  {name}: {index!r}", file=sys.stderr)
    results, lat = _timed(lambda q: index.top(q, 100), queries)
    row.qps, row.p50_ms, row.p99_ms = len(lat) / sum(lat), _pct(lat, 50), _pct(lat, 99)
    if texts is data.texts:
        row.ndcg10, row.recall100 = _quality(data, results)
    everything, lat = _timed(index.scores, queries)
    row.all_p50_ms, row.all_p99_ms = _pct(lat, 50), _pct(lat, 99)
    row.matched = statistics.fmean(len(p) for p, _ in everything)
    for (tp, _), (ap, _) in zip(results, everything, strict=True):  # top() is scores() truncated
        assert np.array_equal(tp, ap[: len(tp)]), f"{name}: top() and scores() disagree"
    return row


def bench_scaled(args: argparse.Namespace, backend: str, n_queries: int | None) -> Row:
    """One backend on the corpus repeated ``--scale`` times, in a fresh process (clean memory figures)."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.bm25_compare",
        "--data",
        str(args.data),
        "--scale",
        str(args.scale),
    ]
    cmd += ["--child", backend] + ([] if n_queries is None else ["--queries", str(n_queries)])
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return Row(**json.loads(out.strip().splitlines()[-1]))


def bench_bm25s_raw(data: SciFact, queries: Sequence[str]) -> Row:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    t0 = time.perf_counter()
    corpus_tokens = bm25s.tokenize(data.texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    retriever.index(corpus_tokens, show_progress=False)
    row = Row("bm25s raw (floor)", time.perf_counter() - t0)
    n_tokens = sum(len(ids) for ids in corpus_tokens.ids)
    print(f"  bm25s raw: {len(retriever.vocab_dict)} vocab, {n_tokens} corpus tokens", file=sys.stderr)

    def search(q: str) -> tuple[Sequence[int], Sequence[float]]:
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
        docs, scores = retriever.retrieve(tokens, k=100, show_progress=False, n_threads=0)
        return docs[0], scores[0]

    results, lat = _timed(search, queries)
    row.qps, row.p50_ms, row.p99_ms = len(lat) / sum(lat), _pct(lat, 50), _pct(lat, 99)
    row.ndcg10, row.recall100 = _quality(data, results)
    return row


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def print_table(rows: Sequence[Row], *, quality: bool = True) -> None:
    head = ["system", "build s"]
    if quality:
        head += ["nDCG@10", "R@100"]
    head += ["q/s", "top100 p50 ms", "top100 p99 ms", "scores() p50 ms", "scores() p99 ms", "matched/q"]
    if not quality:
        head += ["RSS +MB", "peak +MB"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|")
    for r in rows:
        cells = [r.name, _fmt(r.build_s, ".2f")]
        if quality:
            cells += [_fmt(r.ndcg10, ".4f"), _fmt(r.recall100, ".4f")]
        cells += [
            _fmt(r.qps, ".0f"),
            _fmt(r.p50_ms, ".2f"),
            _fmt(r.p99_ms, ".2f"),
            _fmt(r.all_p50_ms, ".2f"),
            _fmt(r.all_p99_ms, ".2f"),
            _fmt(r.matched, ".0f"),
        ]
        if not quality:
            cells += [_fmt(r.rss_mb, ".0f"), _fmt(r.peak_mb, ".0f")]
        print("| " + " | ".join(cells) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="BEIR SciFact folder")
    parser.add_argument("--scale", type=int, default=1, help="also time the corpus repeated N times")
    parser.add_argument("--child", choices=["bm25s", "rank_bm25"], help=argparse.SUPPRESS)
    parser.add_argument("--queries", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("DISABLE_TQDM", "1")

    t0 = time.perf_counter()
    import bm25s  # imported up front so that no build below pays the one-time import
    import rank_bm25  # noqa: F401
    import Stemmer  # noqa: F401

    if args.child:  # one scaled run, see bench_scaled(); prints the row as JSON
        data = load_scifact(args.data)
        queries = list(data.queries.values())[: args.queries]
        name = f"agentrag {args.child}" + (f" (first {args.queries} queries)" if args.queries else "")
        row = bench_index(name, data, data.texts * args.scale, args.child, queries)
        print(json.dumps(dataclasses.asdict(row)))
        return 0

    import_s = time.perf_counter() - t0
    data = load_scifact(args.data)
    queries = list(data.queries.values())
    print(
        f"SciFact: {len(data.texts)} docs, {len(queries)} test queries; metrics from {METRICS_SOURCE}; "
        f"Python {platform.python_version()}, numpy {np.__version__}, bm25s {bm25s.__version__}, "
        f"{os.cpu_count()} CPUs; importing bm25s + rank_bm25 + Stemmer took {import_s:.2f} s",
        file=sys.stderr,
    )
    rows = [
        bench_index("agentrag bm25s (default)", data, data.texts, "bm25s", queries),
        bench_index("agentrag rank_bm25", data, data.texts, "rank_bm25", queries),
        bench_bm25s_raw(data, queries),
    ]
    print(f"\nBEIR SciFact test ({len(data.texts)} docs, {len(queries)} queries), k1=1.5 b=0.75\n")
    print_table(rows)

    if args.scale > 1:
        n_chunks = len(data.texts) * args.scale
        print(f"\nscaling to {n_chunks} chunks...", file=sys.stderr)
        scaled = [bench_scaled(args, "bm25s", None), bench_scaled(args, "rank_bm25", 20)]
        print(f"\nSciFact corpus x{args.scale} ({n_chunks} chunks), speed and memory only\n")
        print_table(scaled, quality=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
