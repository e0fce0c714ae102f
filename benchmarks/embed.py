"""Local embedding throughput and quality per backend, in one run, on the same SciFact passages.

    .venv/bin/python -m benchmarks.embed [--passages 1000] [--quality] [--backends torch,onnx,onnx-int8]

* Throughput: ``LocalEmbedder(backend=...).embed`` over the same ``--passages`` SciFact
  abstracts (``title + "\\n" + text``; MiniLM reads the first 256 word pieces), after a warm-up
  batch; model load timed separately. Floor: the bare ONNX Runtime session's ``run`` over the
  same pre-tokenised, length-sorted batches (no tokenisation, pooling or bookkeeping).
* Quality (``--quality``): each backend embeds the whole corpus (5,183 abstracts) and the 300
  test queries; nDCG@10 by exact cosine scan in numpy (the model's own figure, no index), so the
  backends are compared on their vectors alone. Also the mean / minimum cosine of each backend's
  passage vectors to torch's.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_DATA = Path("/work/shared/data/beir/scifact")


def _ndcg(embedder: Any, data: Any, doc_ids: list[str], doc_vectors: np.ndarray) -> float:
    from agentrag.eval.metrics import ndcg_at_k

    qids = list(data.qrels)
    queries = embedder.embed([data.queries[q] for q in qids])
    scores = queries @ doc_vectors.T
    total = 0.0
    for row, qid in enumerate(qids):
        top = np.argsort(-scores[row])[:10]
        total += ndcg_at_k([doc_ids[i] for i in top], data.qrels[qid], 10) or 0.0
    return total / len(qids)


def _floor(embedder: Any, texts: list[str]) -> float:
    """Passages/s of the bare ONNX session over pre-built batches (tokenisation and pooling excluded)."""
    model = embedder._model()
    encodings = model.tokenizer.encode_batch(texts)
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    feeds = []
    for start in range(0, len(order), embedder.batch_size):
        idx = order[start : start + embedder.batch_size]
        width = max(len(encodings[i].ids) for i in idx)
        ids = np.zeros((len(idx), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for r, i in enumerate(idx):
            ids[r, : len(encodings[i].ids)] = encodings[i].ids
            mask[r, : len(encodings[i].ids)] = 1
        feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    t = time.perf_counter()
    for feed in feeds:
        model.session.run(None, feed)
    return len(texts) / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument("--backends", default="torch,onnx,onnx-int8")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--quality", action="store_true", help="nDCG@10 per backend (embeds the corpus)")
    args = parser.parse_args()

    from agentrag.embedders import LocalEmbedder
    from agentrag.eval import load_beir

    data = load_beir(args.data)
    doc_ids = list(data.corpus)
    corpus = [data.corpus[d].index_text for d in doc_ids]
    sample = corpus[: args.passages]
    backends = args.backends.split(",")
    rows = []
    vectors: dict[str, np.ndarray] = {}
    for backend in backends:
        embedder = LocalEmbedder(backend=backend, batch_size=args.batch_size)
        t = time.perf_counter()
        embedder.load()
        load_s = time.perf_counter() - t
        embedder.embed(sample[:16])  # warm-up
        t = time.perf_counter()
        out = embedder.embed(sample)
        rate = len(sample) / (time.perf_counter() - t)
        floor = _floor(embedder, sample) if backend != "torch" else None
        ndcg = None
        if args.quality:
            vectors[backend] = embedder.embed(corpus)
            ndcg = _ndcg(embedder, data, doc_ids, vectors[backend])
        else:
            vectors[backend] = out
        rows.append((backend, load_s, rate, floor, ndcg))
        print(f"{backend}: load {load_s:.2f} s, {rate:.1f} passages/s, nDCG@10 {ndcg}", flush=True)

    print(
        f"\n{len(sample)} SciFact passages, batch size {args.batch_size}, {os.cpu_count()} CPUs, "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}, Python {platform.python_version()}\n"
    )
    base = rows[0][2]
    print(
        "| backend | model load s | passages/s | x first row | bare session floor passages/s | "
        "nDCG@10 (exact scan) | cosine to torch mean / min |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for backend, load_s, rate, floor, ndcg in rows:
        cos = "-"
        if "torch" in vectors and backend != "torch":
            sims = np.sum(vectors[backend] * vectors["torch"], axis=1)
            cos = f"{sims.mean():.5f} / {sims.min():.5f}"
        print(
            f"| {backend} | {load_s:.2f} | {rate:.1f} | {rate / base:.2f} | "
            f"{'-' if floor is None else f'{floor:.1f}'} | {'-' if ndcg is None else f'{ndcg:.4f}'} | {cos} |"
        )


if __name__ == "__main__":
    main()
