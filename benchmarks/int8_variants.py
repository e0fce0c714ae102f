"""Screen int8 quantisation recipes of the ONNX MiniLM by their fidelity to float32, and time them.

    .venv/bin/python -m benchmarks.int8_variants [--passages 600] [VARIANT ...]

Each variant is ``onnxruntime.quantization.quantize_dynamic`` over the cached float32 export
(``LocalEmbedder(backend="onnx")``), per output channel, QInt8 weights unless the variant says
otherwise. Every variant embeds the same texts one per forward pass (as ``onnx-int8`` does): the
first ``--passages`` SciFact abstracts and the 300 test queries. Reported beside the float32
session in the same run:

* cosine of each vector to the float32 vector of the same text (mean / min; passages, queries);
* rank agreement: per query, the overlap of its top-100 (and top-10) passages by cosine with
  float32's, within the embedded passages;
* passages/s and passages per CPU-second of this process (a shared machine moves the first).

How branch int8fid screened int8 recipes (benchmarks/RESULTS.md, "Branch int8fid"): the candidate
was picked by fidelity to float32 vectors only, never by the queries' relevance judgements, so
SciFact's test nDCG per mode stayed a held-out check (it failed it, so ``onnx-int8`` kept its recipe,
the first row after fp32, and float32 became the default).
"""

from __future__ import annotations

import argparse
import gc
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_DATA = Path("/work/shared/data/beir/scifact")
FFN_OUT = r"/layer\.\d+/output/dense/MatMul$"


def variants() -> dict[str, dict[str, Any]]:
    """Name -> quantize_dynamic options; ``exclude`` is a regex over MatMul node names."""
    from onnxruntime.quantization import QuantType

    table: dict[str, dict[str, Any]] = {
        "fp32": {},
        "onnx-int8 (all MatMul + Gather)": {"op_types_to_quantize": None},
        "MatMul only": {"op_types_to_quantize": ["MatMul"]},
        "reduce_range": {"op_types_to_quantize": None, "reduce_range": True},
        "QUInt8 weights": {"op_types_to_quantize": None, "weight_type": QuantType.QUInt8},
        "fp32 FFN out": {"op_types_to_quantize": None, "exclude": FFN_OUT},
        "fp32 FFN in": {"op_types_to_quantize": None, "exclude": r"intermediate/dense"},
        "fp32 attention out": {"op_types_to_quantize": None, "exclude": r"attention/output/dense"},
        "fp32 q/k/v": {"op_types_to_quantize": None, "exclude": r"self/(query|key|value)/"},
        "fp32 layer 0": {"op_types_to_quantize": None, "exclude": r"layer\.0/"},
        "fp32 layer 5": {"op_types_to_quantize": None, "exclude": r"layer\.5/"},
        "MatMul only, fp32 FFN out": {"op_types_to_quantize": ["MatMul"], "exclude": FFN_OUT},
        "candidate: MatMul only, fp32 FFN out + layer 0": {
            "op_types_to_quantize": ["MatMul"],
            "exclude": FFN_OUT + r"|layer\.0/",
        },
    }
    for i in range(6):
        table[f"fp32 FFN out of layer {i}"] = {
            "op_types_to_quantize": None,
            "exclude": rf"layer\.{i}/output/dense",
        }
    return table


def _build(name: str, options: dict[str, Any], source: Path, folder: Path) -> Path:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if name == "fp32":
        return source
    kwargs: dict[str, Any] = {"weight_type": QuantType.QInt8, "per_channel": True, **options}
    pattern = kwargs.pop("exclude", None)
    if pattern:
        graph = onnx.load(str(source)).graph
        kwargs["nodes_to_exclude"] = [
            n.name for n in graph.node if n.op_type == "MatMul" and re.search(pattern, n.name)
        ]
    target = folder / (re.sub(r"\W+", "_", name) + ".onnx")
    quantize_dynamic(str(source), str(target), **kwargs)
    return target


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--passages", type=int, default=600)
    parser.add_argument("names", nargs="*", help="variants to run (default: all); fp32 always runs first")
    args = parser.parse_args()

    import onnxruntime as ort

    from agentrag.embedders import LocalEmbedder
    from agentrag.eval import load_beir

    data = load_beir(args.data)
    corpus = [data.corpus[d].index_text for d in list(data.corpus)[: args.passages]]
    queries = [data.queries[q] for q in data.qrels]
    texts = corpus + queries
    table = variants()
    names = ["fp32"] + [n for n in (args.names or table) if n != "fp32"]
    unknown = [n for n in names if n not in table]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(table)}")
    model = LocalEmbedder(backend="onnx")._model()
    options = model.session.get_session_options()
    reference = model.encode(texts, 1)
    k = min(100, len(corpus))
    ref_scores = reference[len(corpus) :] @ reference[: len(corpus)].T
    ref_top = np.argsort(-ref_scores, axis=1)[:, :k]
    print(f"{len(corpus)} SciFact passages + {len(queries)} test queries, one text per pass")
    print(
        "| variant | passages cos mean / min | queries cos mean / min | top-100 overlap | top-10 overlap "
        "| texts/s | texts/CPU-s | x fp32 (CPU) | file MB |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    base_cpu = None
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            path = _build(name, table[name], model.path, Path(folder))
            model.session = ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            model.encode(texts[:8], 1)  # warm-up
            gc.collect()
            t, cpu = time.perf_counter(), time.process_time()
            vectors = model.encode(texts, 1)
            rate, cpu_rate = len(texts) / (time.perf_counter() - t), len(texts) / (time.process_time() - cpu)
            base_cpu = base_cpu or cpu_rate
            cos = np.sum(vectors * reference, axis=1)
            top = np.argsort(-(vectors[len(corpus) :] @ vectors[: len(corpus)].T), axis=1)[:, :k]
            overlap = np.mean([len(set(a) & set(b)) / k for a, b in zip(top, ref_top, strict=True)])
            overlap10 = np.mean(
                [len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(top, ref_top, strict=True)]
            )
            docs, qs = cos[: len(corpus)], cos[len(corpus) :]
            print(
                f"| {name} | {docs.mean():.5f} / {docs.min():.5f} | {qs.mean():.5f} / {qs.min():.5f} | "
                f"{overlap:.4f} | {overlap10:.4f} | {rate:.1f} | {cpu_rate:.1f} | "
                f"{cpu_rate / base_cpu:.2f} | {path.stat().st_size / 1e6:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
