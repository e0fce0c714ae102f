"""``make bench``: every benchmark in turn, each printing its table beside its floor.

    .venv/bin/python -m benchmarks [--quick]

The figures recorded in benchmarks/RESULTS.md come from the commands listed there; retired
one-off experiments and superseded runs are summarised in benchmarks/HISTORY.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

RUNS = [
    ("retrieval quality and speed on BEIR SciFact", ["benchmarks.scifact"], ["benchmarks.scifact"]),
    (
        "ingestion at 100k chunks",
        ["benchmarks.ingest"],
        ["benchmarks.ingest", "--chunks", "10000", "--embed-sample", "200"],
    ),
    (
        "one collection at scale: load, BM25 memory, latency and recall (1M: --chunks 1000000)",
        ["benchmarks.scale"],
        ["benchmarks.scale", "--chunks", "20000", "--queries", "20"],
    ),
    (
        "document permissions at 100k chunks, 1,000 groups (1 / 10 / 50 % visible)",
        ["benchmarks.acl"],
        ["benchmarks.acl", "--chunks", "10000", "--groups", "100", "--queries", "10", "--passages", "1200"],
    ),
    (
        "halfvec beside float32 storage on SciFact: nDCG@10 in every mode, bytes, index build",
        ["benchmarks.halfvec"],
        ["benchmarks.halfvec", "--corpus", "300", "--builds", "1"],
    ),
    ("pipeline overhead per question", ["benchmarks.pipeline"], ["benchmarks.pipeline", "--questions", "20"]),
    (
        "pipeline recall@5 over three collections: routing margins and the merge of the searches",
        ["benchmarks.pipeline_recall"],
        ["benchmarks.pipeline_recall", "--margins", "0.05,1.0"],
    ),
    (
        "chat follow-ups: recall@5 condensed vs raw, condense + subgraph overhead per turn",
        ["benchmarks.chat"],
        ["benchmarks.chat", "--repeats", "2"],
    ),
    (
        "the serving API under load",
        ["benchmarks.serve"],
        ["benchmarks.serve", "--docs", "500", "--levels", "1,16,64", "--requests", "200"],
    ),
    (
        "local embedding backends",
        ["benchmarks.embed", "--quality"],
        ["benchmarks.embed", "--passages", "300"],
    ),
    (
        "ingest on Ray beside single-process",
        ["benchmarks.ray_ingest"],
        ["benchmarks.ray_ingest", "--passages", "100"],
    ),
    (
        "what /metrics costs a request",
        ["benchmarks.metrics_cost"],
        ["benchmarks.metrics_cost", "--requests", "5000", "--rounds", "3"],
    ),
    (
        "answers: fact hit, abstention, false-grounded, follow-ups, support check, beside 697a508",
        ["benchmarks.answers"],
        ["benchmarks.answers", "--support", "60", "--scifact", "0"],
    ),
    (
        "store.sync of a changing folder beside its floor, a full ingest and LangChain's indexing API",
        ["benchmarks.sync"],
        ["benchmarks.sync", "--files", "1000"],
    ),
    (
        "the answer step offline: warm, cold and the bare embedder on the same sentences",
        ["benchmarks.answer_latency"],
        ["benchmarks.answer_latency", "--questions", "12"],
    ),
    ("CLI cold start", ["benchmarks.coldstart"], ["benchmarks.coldstart", "--runs", "2"]),
    (
        "readers: pages/s per format beside the bare parser, OCR, HTML and PDF candidates",
        ["benchmarks.readers"],
        ["benchmarks.readers", "--pages", "8", "--repeats", "2", "--ocr-pages", "1"],
    ),
    (
        "reliability under load, faults and hostile input",
        ["benchmarks.reliability"],
        [
            "benchmarks.reliability",
            "--searches",
            "300",
            "--filters",
            "1000",
            "--http-kills",
            "200",
            "--http-seconds",
            "5",
        ],
    ),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller ingestion and pipeline runs")
    args = parser.parse_args()
    failed = 0
    for title, full, quick in RUNS:
        argv = quick if args.quick else full
        print(f"\n## {title}\n$ python -m {' '.join(argv)}", flush=True)
        failed += subprocess.call([sys.executable, "-m", *argv]) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
