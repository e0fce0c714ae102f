"""Rerankers: score (query, passage) pairs so the best fused candidates come first.

A :class:`Reranker` is anything with ``rerank(query, texts) -> scores`` (one float per text,
higher is better). Two ship with the library:

* :class:`CrossEncoderReranker`: a sentence-transformers ``CrossEncoder`` on the CPU, from a
  Hugging Face model name or any local model directory; loaded on first use (torch and
  sentence-transformers are imported then, never at ``import agentrag``), shared per model, and
  run in batches.
* :class:`APIReranker`: a hosted reranker (Cohere, Jina, Voyage, ...) through ``litellm.rerank``,
  e.g. ``APIReranker("cohere/rerank-english-v3.0")``; ``api_base`` points it at any compatible
  server.

Both raise :class:`~agentrag.errors.RerankError` when they fail; the ``rerank`` step then keeps
its heuristic order and records the degradation. :func:`rerank_hits` reorders hits with any
reranker: the first ``candidates`` hits (in fused order) are scored and sorted by score, ties
keeping the fused order; the rest follow in fused order. Each scored hit carries its
``rerank_score``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from agentrag.errors import InvalidInputError, RerankError

if TYPE_CHECKING:
    from agentrag.hits import Hit

__all__ = [
    "DEFAULT_CANDIDATES",
    "DEFAULT_CROSS_ENCODER",
    "APIReranker",
    "CrossEncoderReranker",
    "Reranker",
    "check_scores",
    "rerank_hits",
]

DEFAULT_CANDIDATES = 50
DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L6-v2"


@runtime_checkable
class Reranker(Protocol):
    """Anything that scores passages for a query: one float per text, higher is better."""

    def rerank(self, query: str, texts: Sequence[str]) -> Sequence[float]: ...


def reranker_name(reranker: Any) -> str:
    """A short name for spans and reports: the model when the reranker has one, else its type."""
    model = getattr(reranker, "model", None)
    return str(model) if isinstance(model, str) else type(reranker).__name__


def check_scores(scores: Any, expected: int, name: str) -> list[float]:
    """``scores`` as floats if there is one finite number per text, else RerankError."""
    try:
        values = [float(s) for s in scores]
    except (TypeError, ValueError) as exc:
        raise RerankError(f"reranker {name!r} returned scores that are not numbers: {exc}") from exc
    if len(values) != expected:
        raise RerankError(f"reranker {name!r} returned {len(values)} scores for {expected} texts")
    if not all(math.isfinite(v) for v in values):
        raise RerankError(f"reranker {name!r} returned a score that is not finite")
    return values


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise InvalidInputError(f"{name} must be >= 1, got {value}")
    return value


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` (model name or local directory), batched, on the CPU.

    ``max_length`` caps the word pieces of each (query, passage) pair (default: the model's own).
    The model loads on the first :meth:`rerank` and is shared by every instance using the same
    ``model``; a model that cannot load raises RerankError.
    """

    _models: ClassVar[dict[str, Any]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self, model: str = DEFAULT_CROSS_ENCODER, *, batch_size: int = 32, max_length: int | None = None
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInputError(f"model must be a model name or a directory, got {model!r}")
        self.model = model
        self.batch_size = _positive("batch_size", batch_size)
        self.max_length = None if max_length is None else _positive("max_length", max_length)

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({self.model!r}, batch_size={self.batch_size})"

    def _model(self) -> Any:
        from agentrag.embedders import local_model_version

        # a directory is keyed by its contents' hash too: changed weights load again
        key = f"{self.model}\x00{self.max_length}\x00{local_model_version(self.model)}"
        with self._lock:
            loaded = self._models.get(key)
            if loaded is None:
                try:
                    from sentence_transformers import CrossEncoder

                    loaded = CrossEncoder(self.model, device="cpu", max_length=self.max_length)
                except Exception as exc:
                    raise RerankError(f"could not load cross-encoder {self.model!r}: {exc}") from exc
                self._models[key] = loaded
            return loaded

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        model = self._model()
        try:
            scores = model.predict(
                [(query, text) for text in texts],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        except Exception as exc:
            raise RerankError(f"cross-encoder {self.model!r} failed: {exc}") from exc
        return check_scores(getattr(scores, "tolist", lambda: scores)(), len(texts), self.model)


class APIReranker:
    """A hosted reranker through ``litellm.rerank`` (``"cohere/rerank-english-v3.0"``,
    ``"jina_ai/jina-reranker-v2-base-multilingual"``, ``"voyage/rerank-2"``, ...).

    ``api_base`` and ``api_key`` go to litellm as given (``None``: litellm's environment
    variables); further keyword arguments too. Any failure (network, 4xx/5xx, a reply without one
    score per text) raises RerankError.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        **kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInputError(f"model must be a litellm rerank model name, got {model!r}")
        self.model = model
        self.api_base = api_base
        self.timeout = timeout
        self._kwargs = {**kwargs, **({"api_key": api_key} if api_key is not None else {})}

    def __repr__(self) -> str:
        return f"APIReranker({self.model!r})"

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        try:
            import litellm

            response = litellm.rerank(
                model=self.model,
                query=query,
                documents=list(texts),
                top_n=len(texts),
                api_base=self.api_base,
                timeout=self.timeout,
                **self._kwargs,
            )
            results = response.results if hasattr(response, "results") else response["results"]
            scores: list[float | None] = [None] * len(texts)
            for item in results or []:
                index = int(item["index"])
                if not 0 <= index < len(texts):
                    raise RerankError(
                        f"reranker {self.model!r} returned index {index} for {len(texts)} texts"
                    )
                scores[index] = float(item["relevance_score"])
        except RerankError:
            raise
        except Exception as exc:
            detail = " ".join(str(exc).split())[:200]
            raise RerankError(f"reranker {self.model!r} failed: {type(exc).__name__}: {detail}") from exc
        missing = sum(s is None for s in scores)
        if missing:
            raise RerankError(f"reranker {self.model!r} scored {len(texts) - missing} of {len(texts)} texts")
        return check_scores(scores, len(texts), self.model)


def rerank_hits(
    reranker: Reranker, query: str, hits: Sequence[Hit], *, candidates: int = DEFAULT_CANDIDATES
) -> list[Hit]:
    """``hits`` (fused order) reordered by ``reranker`` over the first ``candidates``; see the module doc.

    Ranks are renumbered from 1; scored hits get ``rerank_score``. Raises RerankError.
    """
    _positive("candidates", candidates)
    head, tail = list(hits[:candidates]), list(hits[candidates:])
    scores = check_scores(reranker.rerank(query, [h.text for h in head]), len(head), reranker_name(reranker))
    order = sorted(range(len(head)), key=lambda i: -scores[i])  # stable: ties keep the fused order
    ranked = [replace(head[i], rerank_score=scores[i]) for i in order] + tail
    return [replace(h, rank=n) for n, h in enumerate(ranked, start=1)]
