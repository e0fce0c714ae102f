"""agentrag: agentic RAG over PostgreSQL + pgvector.

A question becomes an immutable :class:`Context` that flows through small steps::

    import agentrag as ar

    store = ar.Store()                                   # embedded PostgreSQL + pgvector
    ctx = ar.new("How do I paginate the notes API?", store=store)
    ctx = ctx | ar.route(collections=["api", "support"]) | ar.search(self_correct=True) | ar.answer()
    print(ctx.answer_text, ctx.citations)

In a conversation, pass the earlier turns and condense the follow-up first::

    ctx = ar.new("and how much does it cost?", store=store, history=messages) | ar.condense()

Everything public is listed in ``__all__`` and loaded on first use, so ``import agentrag``
stays fast (torch, sentence-transformers and litellm load only when a model is used).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentrag._version import __version__ as __version__
from agentrag.display import register_renderers
from agentrag.errors import (
    AgentragError,
    BudgetExceededError,
    CollectionExistsError,
    CollectionNotFoundError,
    DatabaseUnavailableError,
    DocumentNotFoundError,
    EmbeddingError,
    EmbeddingMismatchError,
    EmptyQueryError,
    ExtensionMissingError,
    FilterError,
    IngestError,
    InvalidInputError,
    LLMAuthError,
    LLMError,
    LLMOutputError,
    LLMRateLimitError,
    LLMRequestError,
    LLMTimeoutError,
    MigrationError,
    RerankError,
    RetrievalError,
    ScopeError,
    StatementTimeoutError,
    StoreError,
    SyncSourceError,
)

# The notebook views of Context and SearchResult (the presentation layer fills the hooks those
# types declare; nothing is imported to render until a notebook asks).
register_renderers()

_LAZY: dict[str, str] = {
    # pipeline
    "new": "agentrag.steps",
    "gate": "agentrag.steps",
    "condense": "agentrag.steps",
    "rewrite": "agentrag.steps",
    "route": "agentrag.steps",
    "decompose": "agentrag.steps",
    "search": "agentrag.steps",
    "rerank": "agentrag.steps",
    "enrich": "agentrag.steps",
    "answer": "agentrag.steps",
    "answer_stream": "agentrag.steps",
    "agate": "agentrag.steps",
    "arewrite": "agentrag.steps",
    "aroute": "agentrag.steps",
    "adecompose": "agentrag.steps",
    "asearch": "agentrag.steps",
    "arerank": "agentrag.steps",
    "aenrich": "agentrag.steps",
    "aanswer": "agentrag.steps",
    "aanswer_stream": "agentrag.steps",
    "arun": "agentrag.step",
    "Context": "agentrag.context",
    "Budget": "agentrag.context",
    "StopReason": "agentrag.context",
    "SearchRecord": "agentrag.context",
    "SearchIteration": "agentrag.context",
    "StepRecord": "agentrag.context",
    "Degradation": "agentrag.context",
    # store and retrieval
    "Store": "agentrag.store.store",
    "connect": "agentrag.store.store",
    "Document": "agentrag.store.store",
    "Collection": "agentrag.store.collections",
    "IngestReport": "agentrag.store.ingest",
    "SyncReport": "agentrag.store.sync_report",
    "GrantDetails": "agentrag.store.acl",
    "Executor": "agentrag.store.prepare",
    "LocalExecutor": "agentrag.store.prepare",
    "PreparedDocument": "agentrag.store.prepare",
    "prepare_documents": "agentrag.store.prepare",
    "ingest_samples": "agentrag.samples",
    "embed_documents": "agentrag.store.prepare",
    "Hit": "agentrag.hits",
    "Scope": "agentrag.scope",
    "Principal": "agentrag.scope",
    "Filters": "agentrag.retrieval.filters",
    "SearchResult": "agentrag.retrieval.result",
    # models, prompts, telemetry
    "Embedder": "agentrag.embedders",
    "LocalEmbedder": "agentrag.embedders",
    "LiteLLMEmbedder": "agentrag.embedders",
    "Reranker": "agentrag.rerankers",
    "CrossEncoderReranker": "agentrag.rerankers",
    "APIReranker": "agentrag.rerankers",
    "LLM": "agentrag.llm",
    "LiteLLM": "agentrag.llm",
    "LLMCall": "agentrag.llm",
    "Prompts": "agentrag.prompts",
    "Telemetry": "agentrag.telemetry",
}

__all__ = [
    "LLM",
    "APIReranker",
    "AgentragError",
    "Budget",
    "BudgetExceededError",
    "Collection",
    "CollectionExistsError",
    "CollectionNotFoundError",
    "Context",
    "CrossEncoderReranker",
    "DatabaseUnavailableError",
    "Degradation",
    "Document",
    "DocumentNotFoundError",
    "Embedder",
    "EmbeddingError",
    "EmbeddingMismatchError",
    "EmptyQueryError",
    "Executor",
    "ExtensionMissingError",
    "FilterError",
    "Filters",
    "GrantDetails",
    "Hit",
    "IngestError",
    "IngestReport",
    "InvalidInputError",
    "LLMAuthError",
    "LLMCall",
    "LLMError",
    "LLMOutputError",
    "LLMRateLimitError",
    "LLMRequestError",
    "LLMTimeoutError",
    "LiteLLM",
    "LiteLLMEmbedder",
    "LocalEmbedder",
    "LocalExecutor",
    "MigrationError",
    "PreparedDocument",
    "Principal",
    "Prompts",
    "RerankError",
    "Reranker",
    "RetrievalError",
    "Scope",
    "ScopeError",
    "SearchIteration",
    "SearchRecord",
    "SearchResult",
    "StatementTimeoutError",
    "StepRecord",
    "StopReason",
    "Store",
    "StoreError",
    "SyncReport",
    "SyncSourceError",
    "Telemetry",
    "aanswer",
    "aanswer_stream",
    "adecompose",
    "aenrich",
    "agate",
    "answer",
    "answer_stream",
    "arerank",
    "arewrite",
    "aroute",
    "arun",
    "asearch",
    "condense",
    "connect",
    "decompose",
    "embed_documents",
    "enrich",
    "gate",
    "ingest_samples",
    "new",
    "prepare_documents",
    "rerank",
    "rewrite",
    "route",
    "search",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrag' has no attribute {name!r}")
    if module == "agentrag.context":
        importlib.import_module("agentrag.steps")  # the seam: binds ctx.route() ... onto Context
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentrag.context import (
        Budget,
        Context,
        Degradation,
        SearchIteration,
        SearchRecord,
        StepRecord,
        StopReason,
    )
    from agentrag.embedders import Embedder, LiteLLMEmbedder, LocalEmbedder
    from agentrag.hits import Hit
    from agentrag.llm import LLM, LiteLLM, LLMCall
    from agentrag.prompts import Prompts
    from agentrag.rerankers import APIReranker, CrossEncoderReranker, Reranker
    from agentrag.retrieval.filters import Filters
    from agentrag.retrieval.result import SearchResult
    from agentrag.samples import ingest_samples
    from agentrag.scope import Principal, Scope
    from agentrag.step import arun
    from agentrag.steps.answer import aanswer_stream, answer, answer_stream
    from agentrag.steps.condense import condense
    from agentrag.steps.decompose import decompose
    from agentrag.steps.enrich import enrich
    from agentrag.steps.gate import gate
    from agentrag.steps.new import new
    from agentrag.steps.rerank import rerank
    from agentrag.steps.rewrite import rewrite
    from agentrag.steps.route import route
    from agentrag.steps.search import search

    AsyncStep = Callable[..., Awaitable[Context]]
    aanswer: AsyncStep
    adecompose: AsyncStep
    aenrich: AsyncStep
    agate: AsyncStep
    arerank: AsyncStep
    arewrite: AsyncStep
    aroute: AsyncStep
    asearch: AsyncStep
    from agentrag.store.acl import GrantDetails
    from agentrag.store.collections import Collection
    from agentrag.store.ingest import IngestReport
    from agentrag.store.prepare import (
        Executor,
        LocalExecutor,
        PreparedDocument,
        embed_documents,
        prepare_documents,
    )
    from agentrag.store.store import Document, Store, connect
    from agentrag.store.sync_report import SyncReport
    from agentrag.telemetry import Telemetry
