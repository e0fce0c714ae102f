"""The result of a search: the hits plus how they were found (mode, degradation, warnings, timings)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, overload

from agentrag._renderers import Renderable
from agentrag.hits import Hit
from agentrag.readers.locators import format_locator

__all__ = ["SearchResult"]

_SNIPPET = 70


def _snippet(text: str, width: int = _SNIPPET) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


@dataclass(frozen=True, repr=False)
class SearchResult(Renderable):
    """Hits of one search, best first; behaves as a sequence of :class:`~agentrag.hits.Hit`.

    ``mode`` is the mode asked for, ``used_mode`` the one that ran: ``"lexical"`` when a hybrid
    search lost its vector leg, and then ``degraded`` says why (and ``warnings`` repeats it).
    ``model_version_match`` is False when a collection's embedding model version differs from the
    store embedder's (same model and dimensions). ``timings_ms`` has ``embed``, ``vector``,
    ``lexical``, ``fuse``, ``fetch`` and ``total`` (a hybrid search may rank its BM25 leg while the
    vector statement runs, so ``vector`` and ``lexical`` can overlap). ``fusion`` is how a hybrid search
    fused its legs (``"rrf"`` or ``"relative_score"``); None for the single-leg modes.
    ``empty_reason`` says why a search found nothing (an empty collection, a scope or filters
    that exclude every document, no lexical match ...; see :mod:`agentrag.retrieval.empty`);
    None when there are hits. ``lexical_fallback`` says why the lexical leg ran ``lexical_sql``
    instead of BM25 (a collection's BM25 index over the store's memory budget); None otherwise.
    ``served_by`` names the database that ran the search (``"primary"`` or ``"replica HOST:PORT/DB"``)
    and ``replica_fallback`` why it is not the replica it was sent to (:mod:`agentrag.store.replicas`).
    ``plan`` says how each collection's legs ran (``collection: vector=... lexical=...``, see
    :mod:`agentrag.retrieval.scoped`); ``explain`` (``search(explain=True)``) adds the numbers behind it.

    In a notebook it renders as a table (``_repr_html_`` / ``_repr_markdown_``, filled by
    :mod:`agentrag.display`, which this module does not import).
    """

    query: str
    collections: tuple[str, ...]
    mode: str
    used_mode: str
    hits: tuple[Hit, ...]
    degraded: str | None = None
    warnings: tuple[str, ...] = ()
    model_version_match: bool = True
    fusion: str | None = None
    empty_reason: str | None = None
    lexical_fallback: str | None = None
    served_by: str = field(default="primary", compare=False)
    replica_fallback: str | None = field(default=None, compare=False)
    plan: tuple[str, ...] = field(default=(), compare=False)
    explain: tuple[dict[str, Any], ...] | None = field(default=None, compare=False)
    timings_ms: dict[str, float] = field(default_factory=dict, compare=False)

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    @overload
    def __getitem__(self, index: int) -> Hit: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Hit, ...]: ...

    def __getitem__(self, index: int | slice) -> Hit | tuple[Hit, ...]:
        return self.hits[index]

    @property
    def chunk_ids(self) -> list[str]:
        return [hit.chunk_id for hit in self.hits]

    def _header(self) -> str:
        mode = self.mode if self.used_mode == self.mode else f"{self.mode} -> {self.used_mode}"
        if self.fusion and self.used_mode == "hybrid":
            mode += f" ({self.fusion})"
        total = self.timings_ms.get("total")
        took = f", {total:.1f} ms" if total is not None else ""
        query = _snippet(self.query, 60)
        return (
            f"SearchResult({query!r} in {', '.join(self.collections)}: {len(self.hits)} hits, "
            f"mode={mode}{took})"
        )

    def __str__(self) -> str:
        lines = [self._header()]
        if self.degraded:
            lines.append(f"  degraded: {self.degraded}")
        if self.lexical_fallback:
            lines.append(f"  lexical fallback: {self.lexical_fallback}")
        shown = (self.degraded, self.lexical_fallback)
        lines.extend(f"  warning: {warning}" for warning in self.warnings if warning not in shown)
        if not self.hits and self.empty_reason:
            lines.append(f"  no hits: {self.empty_reason}")
        if self.hits:
            rows = [["rank", "score", "vec", "lex", "source", "section", "text"]]
            for hit in self.hits:
                source = hit.source or hit.document_id
                if len(self.collections) > 1:
                    source = f"{hit.collection}:{source}"
                if hit.page is not None and not hit.locator:
                    source += f" p.{hit.page}"
                rows.append(
                    [
                        str(hit.rank),
                        f"{hit.score:.4f}",
                        "-" if hit.vector_rank is None else str(hit.vector_rank),
                        "-" if hit.lexical_rank is None else str(hit.lexical_rank),
                        _snippet(source, 40),
                        _snippet(format_locator(hit.locator, section=hit.section), 32),
                        _snippet(hit.text),
                    ]
                )
            widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
            for row in rows:
                cells = [
                    cell.rjust(w) if i < 4 else cell.ljust(w)
                    for i, (cell, w) in enumerate(zip(row, widths, strict=True))
                ]
                lines.append("  " + "  ".join(cells).rstrip())
        return "\n".join(lines)

    __repr__ = __str__

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "collections": list(self.collections),
            "mode": self.mode,
            "used_mode": self.used_mode,
            "degraded": self.degraded,
            "warnings": list(self.warnings),
            "model_version_match": self.model_version_match,
            "fusion": self.fusion,
            "empty_reason": self.empty_reason,
            "lexical_fallback": self.lexical_fallback,
            "timings_ms": dict(self.timings_ms),
            "hits": [hit.to_dict() for hit in self.hits],
        }
