"""One mapping from exceptions to HTTP answers: :class:`ApiError` and :func:`api_error_for`.

Every route, the search fast path and the SSE stream answer through it, so one condition gets
one status everywhere:

* the database cannot be reached (a driver ``OperationalError`` / ``InterfaceError``, the pool
  timing out, :class:`~agentrag.errors.DatabaseUnavailableError` or another ``StoreError`` from a
  statement, the audit writer's queue full because the database is down): **503
  ``DATABASE_UNAVAILABLE``** with ``Retry-After``. It is a
  handled answer, never an unhandled exception, so uvicorn keeps the keep-alive connection;
* the run's time budget ran out (:class:`~agentrag.errors.BudgetExceededError`): 504
  ``BUDGET_EXCEEDED``;
* the database's own ``statement_timeout`` cancelled a statement
  (:class:`~agentrag.errors.StatementTimeoutError`): 504 ``STATEMENT_TIMEOUT``, which names the
  setting to raise (no ``Retry-After``: the same request would time out again);
* anything else unexpected: 500 ``INTERNAL``, whose body names nothing.

No message here quotes the client's input: bodies carry fixed texts or the library's own
message with every quoted part removed (:func:`safe_message`).
"""

from __future__ import annotations

import re
from typing import Any

from agentrag.errors import (
    AgentragError,
    BudgetExceededError,
    CollectionExistsError,
    CollectionNotFoundError,
    DatabaseUnavailableError,
    DocumentNotFoundError,
    ExtensionMissingError,
    MigrationError,
    StatementTimeoutError,
    StoreError,
)

__all__ = [
    "DATABASE_DOWN_KINDS",
    "RETRIEVAL_RETRY_KINDS",
    "RETRY_AFTER_S",
    "ApiError",
    "AuditBackpressure",
    "api_error_for",
    "database_unavailable",
    "is_database_down",
    "known_field",
    "mapped_exceptions",
    "safe_message",
]

#: The ``Retry-After`` of a 503 (seconds): a restarted PostgreSQL is usually back by then.
RETRY_AFTER_S = 1

# The class names of driver errors that mean "the database is not reachable now" (no import of
# psycopg / SQLAlchemy needed to test for them; result errors carry these names as text too).
DATABASE_DOWN_KINDS = frozenset(
    {
        "DatabaseUnavailableError",
        "OperationalError",
        "InterfaceError",
        "TimeoutError",  # SQLAlchemy's pool timeout
        "AdminShutdown",
        "CannotConnectNow",
        "ConnectionTimeout",
        "PoolTimeout",
        "AuditBackpressure",
    }
)

# StoreErrors that a retry would not fix: a name, the schema, the extension
_NOT_TRANSIENT = (
    CollectionExistsError,
    CollectionNotFoundError,
    DocumentNotFoundError,
    ExtensionMissingError,
    MigrationError,
)

#: Retrieval failures answered 503 (retry later): the database down, or any other database error
#: the store reported (``StoreError``: a backend terminated mid-statement twice, say).
RETRIEVAL_RETRY_KINDS = DATABASE_DOWN_KINDS | {"StoreError"}


class ApiError(Exception):
    """An error answered with ``{"error": {"code", "message", "field"?}}``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field
        self.headers = headers or {}

    def body(self, request_id: str | None) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message, "request_id": request_id}
        if self.field is not None:
            error["field"] = self.field
        return {"error": error}


class AuditBackpressure(Exception):
    """The audit writer's queue stayed full (the database is not taking writes): answered 503."""


def database_unavailable() -> ApiError:
    return ApiError(
        503,
        "DATABASE_UNAVAILABLE",
        "the database is unavailable; retry later",
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


def is_database_down(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) means the database is unreachable now, or failed a
    statement under it (a ``StoreError`` that is not about a name: a backend terminated twice, say)."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 5:
        if isinstance(current, DatabaseUnavailableError | AuditBackpressure):
            return True
        if isinstance(current, StoreError) and not isinstance(current, _NOT_TRANSIENT):
            return True
        if type(current).__name__ in DATABASE_DOWN_KINDS and _is_db_class(current):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def _is_db_class(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("psycopg", "sqlalchemy", "agentrag"))


def api_error_for(exc: BaseException) -> ApiError | None:
    """The answer for an exception the routes did not turn into an :class:`ApiError` themselves,
    or None (an unexpected error: the caller answers 500)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BudgetExceededError):  # first: a statement cancelled at the deadline is its context
        return ApiError(504, "BUDGET_EXCEEDED", "the request's time budget ran out")
    if isinstance(exc, StatementTimeoutError):
        return ApiError(
            504,
            "STATEMENT_TIMEOUT",
            "the database's statement_timeout cancelled a statement: raise it for the role the service"
            " connects as (ALTER ROLE ... SET statement_timeout), or drop it from the database URL's options",
        )
    if is_database_down(exc):
        return database_unavailable()
    return None


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")


def safe_message(exc: AgentragError | str) -> str:
    """An error message fit for a response: the library's first line, every quoted part (where a
    message may repeat a filter key, a value or a name the client sent) replaced by ``'…'``."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return _QUOTED.sub("'…'", text)[:300]


def mapped_exceptions() -> tuple[type[Exception], ...]:
    """The exception types :func:`~agentrag.server.errors.api_error_for` answers (503 / 504)."""
    import psycopg
    import sqlalchemy.exc

    return (
        StoreError,  # DatabaseUnavailableError and the rest; api_error_for leaves the name errors to 500
        DatabaseUnavailableError,
        BudgetExceededError,
        AuditBackpressure,
        sqlalchemy.exc.OperationalError,
        sqlalchemy.exc.InterfaceError,
        sqlalchemy.exc.TimeoutError,
        psycopg.OperationalError,
        psycopg.InterfaceError,
    )


def known_field(model: Any, loc: list[str]) -> str | None:
    """The longest prefix of a validation error's ``loc`` made of the model's own field names
    (nested models followed), dotted; None when even the first is not ours (an unknown key the
    client sent is never echoed)."""
    import typing

    from pydantic import BaseModel

    names: list[str] = []
    current = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            break
        names.append(part)
        args = typing.get_args(fields[part].annotation) or (fields[part].annotation,)
        current = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return ".".join(names) or None
