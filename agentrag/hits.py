"""The one result type of retrieval: a :class:`Hit` per chunk found."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Hit"]


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved chunk with its provenance and how each leg ranked it.

    ``score`` is the final score of the mode that produced the hit (for hybrid the fused score:
    relative score fusion's in [0, 1] by default, the RRF score with ``fusion="rrf"``; cosine
    similarity for vector, BM25 score for lexical). The default fused score reads as "how strong
    relative to the best": 1 for the best of both legs; the pool's weakest candidates show what
    they are worth against the best of the legs that found them, 0 when they matched nothing (no
    query term, a similarity at or below 0; see :mod:`agentrag.retrieval.fusion`). ``vector_rank`` /
    ``lexical_rank`` are 1-based ranks in each leg (None when the leg did not find it).
    ``rerank_score`` is a reranker's score (``rerank(strategy="cross-encoder" | "api")`` or a
    user :class:`~agentrag.rerankers.Reranker`); None when no reranker scored the hit. ``grant``
    is the grant that made it visible on an ``acl=True`` collection.
    """

    chunk_id: str
    document_id: str
    collection: str
    text: str
    score: float
    rank: int
    start_char: int
    end_char: int
    chunk_index: int = 0
    page: int | None = None
    section: str | None = None
    source: str | None = None
    original_filename: str | None = None  # the uploaded file's name; None for text ingested as text
    source_sha256: str | None = None
    revision: int | None = None  # the document revision the chunk belongs to (store.document(id, revision=n))
    chunk_sha256: str | None = None
    classification: str | None = None
    embed_model: str | None = None
    embed_version: str | None = None
    vector_rank: int | None = None
    vector_score: float | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None
    rerank_score: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)
    #: where the chunk is in its file beyond the offsets: page / page_end, slide (+ title), sheet +
    #: rows, section (heading path), record, chapter, message, attachment, ocr; None if nothing
    locator: dict[str, Any] | None = field(default=None, hash=False, compare=True)
    #: on an ``acl=True`` collection, the grant that let the principal read it (``user:alice``,
    #: ``group:hr``, ``everyone``, ``admin``); None elsewhere
    grant: str | None = None

    def __repr__(self) -> str:
        snippet = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        legs = []
        if self.vector_rank is not None:
            legs.append(f"vector#{self.vector_rank}")
        if self.lexical_rank is not None:
            legs.append(f"lexical#{self.lexical_rank}")
        if self.rerank_score is not None:
            legs.append(f"rerank {self.rerank_score:.4f}")
        where = self.source or self.document_id
        if self.locator and (self.locator.get("slide") or self.locator.get("sheet")):
            where += " " + (
                "slide " + str(self.locator["slide"])
                if self.locator.get("slide")
                else f"sheet {self.locator['sheet']}"
            )
        elif self.page is not None:
            where += f" p.{self.page}"
        return (
            f"Hit(#{self.rank} {self.score:.4f} {self.chunk_id} {self.collection}:{where}"
            f"{' [' + ', '.join(legs) + ']' if legs else ''} {snippet!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
