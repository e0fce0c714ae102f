"""Local embedding throughput and quality per backend, in one run, on the same SciFact passages.

    .venv/bin/python -m benchmarks.embed [--passages 1000] [--quality]
        [--backends torch,torch-bf16,onnx,onnx-int8,default] [--fused]

* Throughput: ``LocalEmbedder(backend=...).embed`` over the same ``--passages`` SciFact
  abstracts (``title + "\\n" + text``; MiniLM reads the first 256 word pieces), after a warm-up
  batch; model load timed separately. ``default`` is ``LocalEmbedder()`` as shipped, timed on its
  documents' path (``embed_documents``: its ``document_backend``; its queries run ``onnx``).
  Floor: the bare ONNX Runtime session's ``run`` over the same pre-tokenised, length-sorted
  batches (no tokenisation, pooling or bookkeeping); for ``torch-bf16``, sentence-transformers'
  own ``encode`` under ``torch.autocast(bfloat16)``. Each rate is also given per CPU-second of
  this process (``time.process_time``): on a shared machine the wall-clock rate moves with the
  neighbours' load, the CPU-time rate much less.
* ``--fused``: also ONNX Runtime's transformer optimiser (``onnxruntime.transformers.optimizer``,
  model_type "bert", 12 heads, hidden 384: fused EmbedLayerNorm / Attention / BiasGelu /
  SkipLayerNorm), in float32 and then int8-quantised (same recipe as ``onnx-int8``), timed as
  bare sessions over the same batches, beside the bare floors of ``onnx`` and ``onnx-int8``.
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

from benchmarks._paths import scifact_path

DEFAULT_DATA = scifact_path()


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


def _feeds(model: Any, texts: list[str], batch_size: int) -> list[dict[str, np.ndarray]]:
    encodings = model.tokenizer.encode_batch(texts)
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    feeds = []
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        width = max(len(encodings[i].ids) for i in idx)
        ids = np.zeros((len(idx), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for r, i in enumerate(idx):
            ids[r, : len(encodings[i].ids)] = encodings[i].ids
            mask[r, : len(encodings[i].ids)] = 1
        feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    return feeds


def _run_bare(session: Any, feeds: list[dict[str, np.ndarray]], count: int) -> tuple[float, float]:
    """(passages per wall second, per CPU second of this process) of ``session.run`` over ``feeds``."""
    names = {i.name for i in session.get_inputs()}
    t, cpu = time.perf_counter(), time.process_time()
    for feed in feeds:
        session.run(None, {k: v for k, v in feed.items() if k in names})
    return count / (time.perf_counter() - t), count / (time.process_time() - cpu)


def _floor(embedder: Any, texts: list[str]) -> tuple[float, float]:
    """Passages/s of the bare ONNX session over pre-built batches (tokenisation and pooling excluded)."""
    model = embedder._model()
    return _run_bare(model.session, _feeds(model, texts, embedder.batch_size), len(texts))


def _floor_bf16(embedder: Any, texts: list[str]) -> tuple[float, float]:
    """torch-bf16's floor: sentence-transformers' own ``encode`` under ``torch.autocast`` (the raw library
    call doing the same work, the library's normalisation and checks left out)."""
    import torch

    model = embedder._model()
    t, cpu = time.perf_counter(), time.process_time()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model.encode(texts, batch_size=embedder.batch_size, convert_to_tensor=True, show_progress_bar=False)
    return len(texts) / (time.perf_counter() - t), len(texts) / (time.process_time() - cpu)


def _fused(embedder: Any, texts: list[str], folder: Path, torch_vectors: np.ndarray | None) -> list[Any]:
    """The transformer optimiser's fused graph, float32 and int8, as bare sessions (see the docstring)."""
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    model = embedder._model()  # the onnx (float32) backend: its exported file and tokenizer
    feeds = _feeds(model, texts, embedder.batch_size)
    fused, fused_int8 = folder / "fused.onnx", folder / "fused-int8.onnx"
    t = time.perf_counter()
    optimize_model(
        str(model.path), model_type="bert", num_heads=12, hidden_size=384, opt_level=0, use_gpu=False
    ).save_model_to_file(str(fused))
    optimise_s = time.perf_counter() - t
    t = time.perf_counter()
    quantize_dynamic(
        str(fused),
        str(fused_int8),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # the fused ops' outputs
    )
    quantise_s = time.perf_counter() - t
    rows = []
    for name, path, build_s in (("fused", fused, optimise_s), ("fused-int8", fused_int8, quantise_s)):
        options = model.session.get_session_options()
        session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        _run_bare(session, feeds[:1], len(texts))  # warm-up
        rate, cpu_rate = _run_bare(session, feeds, len(texts))
        cos = "-"
        if torch_vectors is not None:
            vectors = _pool(session, feeds, model, texts)
            sims = np.sum(vectors * torch_vectors[: len(texts)], axis=1)
            cos = f"{sims.mean():.5f} / {sims.min():.5f}"
        rows.append((name, build_s, rate, cpu_rate, cos))
    return rows


def _pool(session: Any, feeds: list[dict[str, np.ndarray]], model: Any, texts: list[str]) -> np.ndarray:
    """Mean-pooled, normalised vectors of a bare session, in the input order (for the cosine column)."""
    encodings = model.tokenizer.encode_batch(texts)
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    out = np.zeros((len(texts), model.dimensions), dtype=np.float32)
    names = {i.name for i in session.get_inputs()}
    start = 0
    for feed in feeds:
        idx = order[start : start + len(feed["input_ids"])]
        start += len(idx)
        hidden = session.run(None, {k: v for k, v in feed.items() if k in names})[0]
        weights = feed["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        out[idx] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument(
        "--backends",
        default="torch,torch:4,torch-bf16,onnx,onnx-int8,default",
        help="comma-separated BACKEND or BACKEND:BATCH_SIZE (default: each backend's own batch size);"
        " 'default': LocalEmbedder()'s documents (embed_documents: torch-bf16 on a CPU with native"
        " bfloat16, else onnx)",
    )
    parser.add_argument("--batch-size", type=int, default=None, help="for backends given without one")
    parser.add_argument("--quality", action="store_true", help="nDCG@10 per backend (embeds the corpus)")
    parser.add_argument("--fused", action="store_true", help="also the transformer optimiser's fused graphs")
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
    for spec in backends:
        backend, _, size = spec.partition(":")
        batch_size = int(size) if size else args.batch_size
        if backend == "default":  # LocalEmbedder() as shipped: its documents' path (embed_documents)
            default = LocalEmbedder(batch_size=batch_size)
            embedder = LocalEmbedder(backend=default.document_backend, batch_size=default.document_batch_size)
            embed, load, queries = default.embed_documents, default.load_documents, default
            backend = f"default, documents: {default.document_backend} (batch {default.document_batch_size})"
        else:
            embedder = LocalEmbedder(backend=backend, batch_size=batch_size)
            embed, load, queries = embedder.embed, embedder.load, embedder
            backend = f"{backend} (batch {embedder.batch_size})"
        t = time.perf_counter()
        load()
        load_s = time.perf_counter() - t
        embed(sample[:16])  # warm-up
        t, cpu = time.perf_counter(), time.process_time()
        out = embed(sample)
        rate = len(sample) / (time.perf_counter() - t)
        cpu_rate = len(sample) / (time.process_time() - cpu)
        # the floor of the backend that ran (for "default", a LocalEmbedder pinned to its document backend)
        floor = (
            _floor_bf16(embedder, sample)
            if embedder.backend == "torch-bf16"
            else None
            if embedder.backend == "torch"
            else _floor(embedder, sample)
        )
        ndcg = None
        if args.quality:  # documents by the row's path, queries by the row's embedder's embed
            vectors[backend] = embed(corpus)
            ndcg = _ndcg(queries, data, doc_ids, vectors[backend])
        else:
            vectors[backend] = out
        if embedder.backend == "torch":
            vectors.setdefault("torch", vectors[backend])  # the reference for the cosine column
        rows.append((backend, load_s, rate, cpu_rate, floor, ndcg))
        print(f"{backend}: load {load_s:.2f} s, {rate:.1f} passages/s, nDCG@10 {ndcg}", flush=True)
    fused_rows = []
    if args.fused:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            fused_rows = _fused(
                LocalEmbedder(backend="onnx", batch_size=args.batch_size),
                sample,
                Path(folder),
                vectors["torch"][: len(sample)] if "torch" in vectors else None,
            )

    print(
        f"\n{len(sample)} SciFact passages, {os.cpu_count()} CPUs, "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}, Python {platform.python_version()}\n"
    )
    base = rows[0][2]
    base_cpu = rows[0][3]
    print(
        "| backend | model load s | passages/s | x first row | passages/CPU-s | x first row (CPU) | "
        "bare session floor passages/s (/CPU-s) | nDCG@10 (exact scan) | cosine to torch mean / min |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for backend, load_s, rate, cpu_rate, floor, ndcg in rows:
        cos = "-"
        if "torch" in vectors and not backend.startswith("torch ("):
            sims = np.sum(vectors[backend] * vectors["torch"], axis=1)
            cos = f"{sims.mean():.5f} / {sims.min():.5f}"
        floor_text = "-" if floor is None else f"{floor[0]:.1f} ({floor[1]:.1f})"
        print(
            f"| {backend} | {load_s:.2f} | {rate:.1f} | {rate / base:.2f} | {cpu_rate:.1f} | "
            f"{cpu_rate / base_cpu:.2f} | {floor_text} | {'-' if ndcg is None else f'{ndcg:.4f}'} | {cos} |"
        )
    for name, build_s, rate, cpu_rate, cos in fused_rows:
        print(
            f"| {name} (bare session; build {build_s:.1f} s) | - | - | - | - | - | "
            f"{rate:.1f} ({cpu_rate:.1f}) | - | {cos} |"
        )


if __name__ == "__main__":
    main()
