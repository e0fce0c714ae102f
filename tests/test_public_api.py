"""The public surface: a pinned __all__, every name resolvable, and a cheap import."""

from __future__ import annotations

import subprocess
import sys

import agentrag

PINNED = [
    "Executor",
    "LocalExecutor",
    "PreparedDocument",
    "embed_documents",
    "ingest_samples",
    "prepare_documents",
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
    "ExtensionMissingError",
    "FilterError",
    "Filters",
    "GrantDetails",
    "Hit",
    "IngestError",
    "IngestReport",
    "InvalidInputError",
    "LLM",
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
    "MigrationError",
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
    "enrich",
    "gate",
    "new",
    "rerank",
    "rewrite",
    "route",
    "search",
]


def test_all_is_pinned() -> None:
    assert sorted(agentrag.__all__) == sorted(PINNED)
    assert len(set(agentrag.__all__)) == len(agentrag.__all__)


def test_every_public_name_resolves() -> None:
    for name in agentrag.__all__:
        assert getattr(agentrag, name) is not None, name


def test_unknown_attribute_raises() -> None:
    try:
        agentrag.nope  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "nope" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_errors_share_one_root() -> None:
    for name in agentrag.__all__:
        value = getattr(agentrag, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, agentrag.AgentragError), name


def test_import_is_lazy() -> None:
    code = (
        "import sys, agentrag; heavy = ['litellm', 'torch', 'sentence_transformers', 'sqlalchemy', 'psycopg',"
        " 'numpy', 'transformers', 'ray']; print([m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
