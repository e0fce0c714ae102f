"""The Store's bounded cache of query vectors (``Store.embed_queries``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentrag.embedders.lru import TextVectorLRU

if TYPE_CHECKING:
    import numpy as np

    from agentrag.embedders import Embedder

__all__ = ["QueryVectorCache"]


class QueryVectorCache(TextVectorLRU):
    """Query vectors by (model, version, text), most recently used last: a pipeline embeds the
    same question in route and in every collection's search. Bounded to ``size``; 0 turns it off.
    Thread-safe."""

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` with ``embedder``; only the texts not cached are sent to it, in one call."""
        import numpy as np

        if self.size == 0:
            return np.asarray(embedder.embed(list(texts)), dtype=np.float32)
        keys, found = self.cached(embedder, texts, lambda text: text)
        missing = [key for key in dict.fromkeys(keys) if key not in found]
        if missing:
            vectors = np.asarray(embedder.embed([str(key[2]) for key in missing]), dtype=np.float32)
            if vectors.ndim != 2 or len(vectors) != len(missing):
                return vectors  # the caller's shape check reports it; nothing is cached
            for vector in vectors:
                vector.setflags(write=False)
            fresh = list(zip(missing, vectors, strict=True))
            self.remember(fresh)
            found.update(fresh)
        if not keys:
            return np.zeros((0, int(embedder.dimensions)), dtype=np.float32)
        return np.stack([found[key] for key in keys])
