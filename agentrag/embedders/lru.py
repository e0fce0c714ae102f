"""A bounded, thread-safe LRU of text vectors keyed by the embedder's model and version, shared
by the Store's query vectors (:mod:`agentrag.store.query_vectors`) and the answer step's unit
vectors (:mod:`agentrag.unit_vectors`); each says what a text's key is and what it keeps."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["TextVectorLRU"]

Key = tuple[str, str, Hashable]


class TextVectorLRU:
    """Vectors by ``(model, version, key of the text)``, most recently used last, at most ``size``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._vectors: OrderedDict[Key, Any] = OrderedDict()
        self._lock = threading.Lock()

    def cached(
        self, embedder: Any, texts: Sequence[str], key_of: Callable[[str], Hashable]
    ) -> tuple[list[Key], dict[Key, np.ndarray]]:
        """Each text's key, and the vectors already held (marked as just used)."""
        model, version = str(embedder.model_id), str(embedder.version)
        keys: list[Key] = [(model, version, key_of(text)) for text in texts]
        found: dict[Key, np.ndarray] = {}
        with self._lock:
            for key in keys:
                vector = self._vectors.get(key)
                if vector is not None:
                    self._vectors.move_to_end(key)
                    found[key] = vector
        return keys, found

    def remember(self, pairs: Iterable[tuple[Key, np.ndarray]]) -> None:
        """Hold these vectors; the least recently used go beyond ``size``."""
        with self._lock:
            for key, vector in pairs:
                self._vectors[key] = vector
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()
