"""Request and response bodies of the serving API (pydantic; the OpenAPI schema at ``/docs``).

Requests refuse unknown fields (422 naming the field) and check every value before any SQL:
strings without NUL bytes or lone surrogates, bounded lengths, known modes, collection names
of the store's own pattern. ``top_k`` is further capped by the tenant's ``retrieval_top_k_max``.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["AskRequest", "ErrorBody", "ProofResponse", "SearchRequest"]

MAX_QUERY_CHARS = 4000
Mode = Literal["hybrid", "vector", "lexical", "lexical_sql"]
_COLLECTION = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$"


def _clean(value: str, what: str) -> str:
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL bytes")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode (lone surrogate)") from None
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)


class DateRangeIn(_Strict):
    start: date | None = None
    end: date | None = None

    @model_validator(mode="after")
    def _bounds(self) -> DateRangeIn:
        if self.start is None and self.end is None:
            raise ValueError("date_range needs start, end or both")
        if self.start and self.end and self.start > self.end:
            raise ValueError("date_range start is after its end")
        return self


class FiltersIn(_Strict):
    """Document filters, enforced inside the SQL of every retrieval leg."""

    classification: str | list[str] | None = Field(default=None, description="one value or any of a list")
    date_range: DateRangeIn | None = Field(default=None, description="ingestion date range, inclusive")
    doc_ids: list[str] | None = Field(default=None, max_length=1000)
    metadata: dict[str, Any] | None = Field(
        default=None,
        max_length=50,
        description='top-level metadata key -> a JSON value it must equal, or {"in": [values]}; '
        "as the Python and CLI filters (agentrag.Filters)",
    )

    @field_validator("classification", "doc_ids")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        items = [value] if isinstance(value, str) else (value or [])
        if isinstance(value, list) and not value:
            raise ValueError("must not be an empty list (leave the field out to not filter)")
        for item in items:
            if len(item) > 1000:
                raise ValueError("values are at most 1000 characters")
            _clean(item, "a filter value")
        return value

    def to_filters(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.classification is not None:
            out["classification"] = self.classification
        if self.doc_ids is not None:
            out["doc_ids"] = self.doc_ids
        if self.date_range is not None:
            out["date_range"] = {"start": self.date_range.start, "end": self.date_range.end}
        if self.metadata is not None:  # checked by the library (FilterError -> 422 on "filters")
            out["metadata"] = self.metadata
        return out or None


class SearchRequest(_Strict):
    """``POST /api/v1/query/{tenant_id}/search``."""

    query_text: str = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, description="at most 4,000 characters (longer: 422)"
    )
    top_k: int = Field(default=5, ge=1, le=50, description="capped by the tenant's retrieval_top_k_max")
    filters: FiltersIn | None = None
    mode: Mode = "hybrid"
    collections: list[str] | None = Field(
        default=None, min_length=1, max_length=32, description="default: every collection"
    )

    @field_validator("query_text")
    @classmethod
    def _query(cls, value: str) -> str:
        _clean(value, "query_text")
        if not value.strip():
            raise ValueError("query_text is empty")
        return value

    @field_validator("collections")
    @classmethod
    def _collections(cls, value: list[str] | None) -> list[str] | None:
        import re

        for name in value or []:
            if not re.fullmatch(_COLLECTION, name):
                raise ValueError(f"collection names match {_COLLECTION}")
        return value


class AskRequest(SearchRequest):
    """``POST /api/v1/query/{tenant_id}/ask``: a search, then a cite-only answer."""


class ProofChunkOut(BaseModel):
    chunk_id: str
    doc_id: str
    collection: str
    original_filename: str | None
    source: str | None
    text: str
    page: int | None
    section: str | None
    start_char: int
    end_char: int
    rank: int
    score: float
    similarity_score: float | None
    classification: str | None
    embed_model: str | None
    embed_version: str | None
    source_sha256: str | None
    chunk_sha256: str | None
    #: where the chunk is in its file: page / page_end, slide (+ title), sheet + rows, section (the
    #: heading path), record, chapter, message, attachment, ocr; null when there is nothing to add
    locator: dict[str, Any] | None = None
    revision: int | None = None
    grant: str | None = None


class SupportSpanOut(BaseModel):
    """One answer sentence and its best supporting span (document offsets) in a cited chunk."""

    sentence: str
    chunk_id: str | None
    document_id: str | None
    start: int | None
    end: int | None
    text: str
    score: float
    supported: bool
    method: str


class GenerationOut(BaseModel):
    answer: str | None
    cited_chunks: list[str]
    ungrounded_claims: list[str]
    invalid_citations: list[str]
    grounded: bool | None
    mode: str | None
    model: str | None
    context_chunks: list[str]
    confidence: float | None = None  # 0-1; the answer abstains ("mode": "abstained") when low
    support: list[SupportSpanOut] = []


class SkippedCollectionOut(BaseModel):
    """A collection a search naming none left out, and why (an ``acl=True`` one, no principal)."""

    collection: str
    reason: str


class ProofResponse(BaseModel):
    """The retrieval proof (``agentrag.Context.proof()``) plus ``warnings``."""

    query_id: str
    tenant_id: str | None
    workspace_id: str | None
    session_id: str | None
    collections: list[str]
    chunks: list[ProofChunkOut]
    timestamp: str
    model_version_match: bool | None
    mode: str | None
    degradations: list[str]
    generation: GenerationOut | None
    skipped_collections: list[SkippedCollectionOut] = []
    schema_version: int
    warnings: list[str]


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None
    request_id: str | None = None


class ErrorBody(BaseModel):
    """Every 4xx / 5xx: ``{"error": {"code": ..., "message": ...}}``."""

    error: ErrorDetail
