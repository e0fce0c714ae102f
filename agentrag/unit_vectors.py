"""The vectors of evidence units, cached across answers: :class:`VectorCache` embeds a unit's text
once per embedder model and version (keyed by its SHA-1) in a bounded LRU that every answer of the
process shares (:data:`DEFAULT_CACHE`): the sentences of chunks that come back are embedded once."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_CACHE", "VectorCache"]


class VectorCache:
    """Unit vectors keyed by the embedder's model, version and the unit's text (its SHA-1):
    a bounded LRU shared by every answer of the process, so the sentences of chunks that come
    back across questions are embedded once."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self._vectors: OrderedDict[tuple[str, str, bytes], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def vectors(self, embedder: Any, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        model, version = str(embedder.model_id), str(embedder.version)
        keys = [(model, version, hashlib.sha1(t.encode()).digest()) for t in texts]
        found: dict[tuple[str, str, bytes], np.ndarray] = {}
        with self._lock:
            for key in keys:
                vector = self._vectors.get(key)
                if vector is not None:
                    self._vectors.move_to_end(key)
                    found[key] = vector
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        if missing:
            got = np.asarray(embedder.embed(list(missing.values())), dtype=np.float32)
            if got.ndim != 2 or len(got) != len(missing):
                raise ValueError(f"the embedder returned shape {got.shape} for {len(missing)} texts")
            norms = np.linalg.norm(got, axis=1, keepdims=True)
            got = (got / np.where(norms == 0, 1.0, norms)).astype(np.float32)
            with self._lock:
                for key, vector in zip(missing, got, strict=True):
                    found[key] = self._vectors[key] = vector
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        if not keys:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([found[key] for key in keys])

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()


DEFAULT_CACHE = VectorCache()
