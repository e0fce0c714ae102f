"""The one error hierarchy of agentrag.

Every error agentrag raises on purpose derives from :class:`AgentragError`::

    AgentragError
    ├── InvalidInputError (also ValueError) ... bad input caught before any work is done
    │   ├── EmptyQueryError ................... a question or query with no text
    │   ├── FilterError ....................... an unknown filter key/operator or a bad value
    │   ├── ScopeError ........................ a scoped collection queried without a scope
    │   ├── UnsupportedLanguageError .......... a language code agentrag does not know
    │   └── UnknownEmbedderError .............. an embedder name no one registered (names the registered ones)
    ├── StoreError ............................ anything about the PostgreSQL store
    │   ├── DatabaseUnavailableError .......... cannot connect / embedded server will not start
    │   ├── StatementTimeoutError ............. PostgreSQL's own statement_timeout cancelled a statement
    │   ├── ExtensionMissingError ............. the `vector` extension is not installed
    │   ├── MigrationError .................... a migration failed (nothing half-applied)
    │   ├── CollectionNotFoundError ........... no collection by that name
    │   ├── CollectionExistsError ............. a collection by that name already exists
    │   └── DocumentNotFoundError ............. no document by that id
    ├── IngestError ........................... a file or text could not be ingested (names it)
    │   ├── UnsupportedFormatError ............ no reader for this kind of file
    │   ├── ReaderUnavailableError ............ the reader's library (an extra) is not installed
    │   ├── UnreadableFileError ............... truncated, corrupt, or not the format its name says
    │   ├── EncryptedFileError ................ password-protected: cannot be read without the key
    │   ├── FileTooLargeError ................. over a reader limit (file size, unpacked size, text)
    │   └── SyncSourceError ................... a sync source cannot be listed or fetched (folder, bucket)
    ├── EmbeddingError ........................ the embedder failed (model missing, provider down)
    │   └── EmbeddingMismatchError ............ vectors from another model / dimension than the collection's
    ├── LLMError .............................. the language model failed
    │   ├── LLMTimeoutError ................... no reply within the timeout
    │   ├── LLMRateLimitError ................. 429 after every retry
    │   ├── LLMRequestError ................... a 4xx other than 429 (bad key, bad model, bad request)
    │   │   └── LLMAuthError .................. a missing or rejected credential (names it); never retried
    │   └── LLMOutputError .................... the reply could not be parsed / validated (after one repair)
    ├── RerankError ........................... a reranker failed (model missing, provider down, bad scores)
    ├── PermissionDeniedError ................. the principal may read a document but not administer it
    ├── BudgetExceededError ................... Budget(max_seconds=...) ran out before a call could finish
    └── RetrievalError ........................ every retrieval source failed

Programming mistakes (an unknown option, a wrong type) raise the builtin
``TypeError`` at call time instead: they are bugs to fix, not conditions to handle.
"""

from __future__ import annotations

__all__ = [
    "AgentragError",
    "BudgetExceededError",
    "CollectionExistsError",
    "CollectionNotFoundError",
    "DatabaseUnavailableError",
    "DocumentNotFoundError",
    "EmbeddingError",
    "EmbeddingMismatchError",
    "EmptyQueryError",
    "EncryptedFileError",
    "ExtensionMissingError",
    "FileTooLargeError",
    "FilterError",
    "IngestError",
    "InvalidInputError",
    "LLMError",
    "LLMOutputError",
    "LLMRateLimitError",
    "LLMRequestError",
    "LLMTimeoutError",
    "MigrationError",
    "PermissionDeniedError",
    "ReaderUnavailableError",
    "RerankError",
    "RetrievalError",
    "ScopeError",
    "StatementTimeoutError",
    "StoreError",
    "SyncSourceError",
    "UnknownEmbedderError",
    "UnreadableFileError",
    "UnsupportedFormatError",
    "UnsupportedLanguageError",
]


class AgentragError(Exception):
    """Base of every error agentrag raises on purpose."""


class InvalidInputError(AgentragError, ValueError):
    """Input was rejected before any work was done."""


class EmptyQueryError(InvalidInputError):
    """The question or query has no text once whitespace is stripped."""


class FilterError(InvalidInputError):
    """A filter has an unknown key, an unknown operator or a value of the wrong type."""


class UnsupportedLanguageError(InvalidInputError):
    """A collection's language is not one of ``agentrag.languages.LANGUAGES`` (names the supported ones)."""


class UnknownEmbedderError(InvalidInputError):
    """An embedder name that is not registered (``agentrag.embedders.registry``); names the registered."""


class ScopeError(InvalidInputError):
    """A scoped collection was queried without a scope (pass a Scope, or Scope.every())."""


class StoreError(AgentragError):
    """Something went wrong in the PostgreSQL store."""


class DatabaseUnavailableError(StoreError):
    """The database cannot be reached, or the embedded server failed to start."""


class StatementTimeoutError(StoreError):
    """A statement ran past the ``statement_timeout`` set for the connection, its role or its
    database (not a ``Budget(max_seconds=...)``: that is :class:`BudgetExceededError`). The message
    names the setting to raise."""


class ExtensionMissingError(StoreError):
    """The pgvector `vector` extension is not available in the database."""


class MigrationError(StoreError):
    """A schema migration failed; its transaction was rolled back."""


class CollectionNotFoundError(StoreError, KeyError):
    """No collection has that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class CollectionExistsError(StoreError):
    """A collection with that name already exists."""


class DocumentNotFoundError(StoreError, KeyError):
    """No document has that id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class IngestError(AgentragError):
    """A file or text could not be ingested. ``source`` names it."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        super().__init__(message)
        self.source = source


class UnsupportedFormatError(IngestError):
    """No reader handles this kind of file (by its extension and its content)."""


class ReaderUnavailableError(IngestError):
    """The reader for this kind of file needs a library that is not installed (the message names
    the extra: ``pip install 'agentrag[readers]'``)."""


class UnreadableFileError(IngestError):
    """The file is truncated, corrupt, or not the format its name says."""


class EncryptedFileError(IngestError):
    """The file is password-protected and cannot be read without its key."""


class FileTooLargeError(IngestError):
    """The file is over a reader limit: its size, its unpacked size (a zip bomb) or its text."""


class SyncSourceError(IngestError):
    """``store.sync``: the source cannot be listed (a missing folder, an unreachable or unknown
    bucket, rejected credentials): nothing is written. A single file that cannot be fetched is
    a failed file of the report instead."""


class EmbeddingError(AgentragError):
    """The embedder failed: the model could not load or the provider is down."""


class EmbeddingMismatchError(EmbeddingError):
    """Vectors come from another model, version or dimension than the collection records."""


class LLMError(AgentragError):
    """The language model call failed."""


class LLMTimeoutError(LLMError):
    """The model did not reply within the timeout."""


class LLMRateLimitError(LLMError):
    """The provider kept answering 429 after every retry."""


class LLMRequestError(LLMError):
    """The provider rejected the request (a 4xx other than 429); never retried."""


class LLMAuthError(LLMRequestError):
    """The credential is missing or was rejected (401/403, no API key); never retried.

    ``missing`` names the environment variables the provider needs and the process lacks."""

    def __init__(self, message: str, *, missing: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing


class LLMOutputError(LLMError):
    """The reply could not be parsed or validated, even after one repair attempt."""

    def __init__(self, message: str, *, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw


class RerankError(AgentragError):
    """A reranker failed: the model could not load, the provider is down, or the scores are unusable."""


class PermissionDeniedError(AgentragError):
    """The scope's principal may read the document but not administer it (grant, revoke, share,
    list its grants): see docs/how-to/permissions-admin.md. A document it may not read is "not found"
    (DocumentNotFoundError) instead, so nothing is learnt of it."""


class BudgetExceededError(AgentragError):
    """The run's ``Budget(max_seconds=...)`` deadline passed: a call was stopped (or not started).

    ``limit_s`` is the budget; ``what`` names the call that ran out of time (``"llm:answer"``...)."""

    def __init__(self, message: str, *, limit_s: float | None = None, what: str | None = None) -> None:
        super().__init__(message)
        self.limit_s = limit_s
        self.what = what


class RetrievalError(AgentragError):
    """Every retrieval source failed, so there is nothing to answer from."""
