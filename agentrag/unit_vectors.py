"""The vectors of evidence units, cached across answers: :class:`VectorCache` embeds a unit's text
once per embedder model and version (keyed by its SHA-1) in a bounded LRU that every answer of the
process shares (:data:`DEFAULT_CACHE`): the sentences of chunks that come back are embedded once."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentrag.embedders.lru import TextVectorLRU

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_CACHE", "VectorCache"]


class VectorCache(TextVectorLRU):
    """Unit vectors keyed by the embedder's model, version and the unit's text (its SHA-1):
    a bounded LRU shared by every answer of the process, so the sentences of chunks that come
    back across questions are embedded once."""

    def __init__(self, size: int = 20_000) -> None:
        super().__init__(size)

    def vectors(self, embedder: Any, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        keys, found = self.cached(embedder, texts, lambda text: hashlib.sha1(text.encode()).digest())
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        if missing:
            got = np.asarray(embedder.embed(list(missing.values())), dtype=np.float32)
            if got.ndim != 2 or len(got) != len(missing):
                raise ValueError(f"the embedder returned shape {got.shape} for {len(missing)} texts")
            norms = np.linalg.norm(got, axis=1, keepdims=True)
            got = (got / np.where(norms == 0, 1.0, norms)).astype(np.float32)
            fresh = list(zip(missing, got, strict=True))
            self.remember(fresh)
            found.update(fresh)
        if not keys:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([found[key] for key in keys])


DEFAULT_CACHE = VectorCache()
