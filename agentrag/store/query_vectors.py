"""The Store's bounded cache of query vectors (``Store.embed_queries``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from agentrag.embedders import Embedder

__all__ = ["QueryVectorCache"]


class QueryVectorCache:
    """Query vectors by (model, version, text), most recently used last: a pipeline embeds the
    same question in route and in every collection's search. Bounded to ``size``; 0 turns it off.
    Thread-safe."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._vectors: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` with ``embedder``; only the texts not cached are sent to it, in one call."""
        import numpy as np

        if self.size == 0:
            return np.asarray(embedder.embed(list(texts)), dtype=np.float32)
        model, version = str(embedder.model_id), str(embedder.version)
        keys = [(model, version, text) for text in texts]
        found: dict[tuple[str, str, str], np.ndarray] = {}
        with self._lock:
            for key in keys:
                vector = self._vectors.get(key)
                if vector is not None:
                    self._vectors.move_to_end(key)
                    found[key] = vector
        missing = [key for key in dict.fromkeys(keys) if key not in found]
        if missing:
            vectors = np.asarray(embedder.embed([key[2] for key in missing]), dtype=np.float32)
            if vectors.ndim != 2 or len(vectors) != len(missing):
                return vectors  # the caller's shape check reports it; nothing is cached
            with self._lock:
                for key, vector in zip(missing, vectors, strict=True):
                    vector.setflags(write=False)
                    found[key] = self._vectors[key] = vector
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        if not keys:
            return np.zeros((0, int(embedder.dimensions)), dtype=np.float32)
        return np.stack([found[key] for key in keys])

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()
